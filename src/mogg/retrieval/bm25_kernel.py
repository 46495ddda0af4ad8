"""A compiled BM25 top-k kernel (numba): term-at-a-time accumulation over the postings of each
query's terms into a reused score buffer, top-k by a bounded heap over the touched documents only,
queries spread over the CPU cores.

Bit-identical to the scipy path (``Q @ W`` then top-k): float32 accumulation in ascending term
order, ``score += count * weight``; ties by ascending id; documents a query does not touch score
0 and fill the remaining slots by ascending id, as rows of zeros do in the dense product.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=1)
def _kernel():
    import numba as nb

    @nb.njit(cache=True, inline="always")
    def _worse(s_a, i_a, s_b, i_b):  # is (s_a, i_a) ranked below (s_b, i_b): lower score, then higher id
        return s_a < s_b or (s_a == s_b and i_a > i_b)

    @nb.njit(cache=True)
    def _sift_down(hs, hi, n, pos):
        while True:
            low = pos
            left, right = 2 * pos + 1, 2 * pos + 2
            if left < n and _worse(hs[left], hi[left], hs[low], hi[low]):
                low = left
            if right < n and _worse(hs[right], hi[right], hs[low], hi[low]):
                low = right
            if low == pos:
                return
            hs[pos], hs[low] = hs[low], hs[pos]
            hi[pos], hi[low] = hi[low], hi[pos]
            pos = low

    @nb.njit(cache=True, parallel=True)
    def topk(q_ptr, q_terms, q_counts, w_ptr, w_docs, w_vals, n_docs, k, n_blocks):
        n_q = len(q_ptr) - 1
        out_s = np.full((n_q, k), -np.inf, dtype=np.float32)
        out_i = np.full((n_q, k), -1, dtype=np.int64)
        per = (n_q + n_blocks - 1) // n_blocks
        for blk in nb.prange(n_blocks):
            acc = np.zeros(n_docs, dtype=np.float32)
            seen = np.zeros(n_docs, dtype=np.bool_)
            touched = np.empty(n_docs, dtype=np.int64)
            hs = np.empty(k, dtype=np.float32)
            hi = np.empty(k, dtype=np.int64)
            for q in range(blk * per, min(n_q, (blk + 1) * per)):
                n_t = 0
                for a in range(q_ptr[q], q_ptr[q + 1]):  # ascending term ids: the product's order
                    t, c = q_terms[a], q_counts[a]
                    for b in range(w_ptr[t], w_ptr[t + 1]):
                        d = w_docs[b]
                        acc[d] += c * w_vals[b]
                        if not seen[d]:
                            seen[d] = True
                            touched[n_t] = d
                            n_t += 1
                n = 0
                for j in range(n_t):  # bounded heap: the worst kept entry at the root
                    d = touched[j]
                    s = acc[d]
                    if n < k:
                        hs[n], hi[n] = s, d
                        pos = n
                        n += 1
                        while pos > 0:
                            parent = (pos - 1) // 2
                            if _worse(hs[pos], hi[pos], hs[parent], hi[parent]):
                                hs[pos], hs[parent] = hs[parent], hs[pos]
                                hi[pos], hi[parent] = hi[parent], hi[pos]
                                pos = parent
                            else:
                                break
                    elif _worse(hs[0], hi[0], s, d):
                        hs[0], hi[0] = s, d
                        _sift_down(hs, hi, n, 0)
                # untouched documents score 0: they rank after positive ones, before negative ones
                d = 0
                while d < n_docs:
                    if not seen[d]:
                        if n < k:
                            hs[n], hi[n] = 0.0, d
                            pos = n
                            n += 1
                            while pos > 0:
                                parent = (pos - 1) // 2
                                if _worse(hs[pos], hi[pos], hs[parent], hi[parent]):
                                    hs[pos], hs[parent] = hs[parent], hs[pos]
                                    hi[pos], hi[parent] = hi[parent], hi[pos]
                                    pos = parent
                                else:
                                    break
                        elif _worse(hs[0], hi[0], np.float32(0.0), d):
                            hs[0], hi[0] = 0.0, d
                            _sift_down(hs, hi, n, 0)
                        else:
                            break  # ids only grow from here: no later zero can beat the root
                    d += 1
                # drain the heap worst-first into the row from the back
                m = n
                while m > 0:
                    out_s[q, m - 1], out_i[q, m - 1] = hs[0], hi[0]
                    m -= 1
                    hs[0], hi[0] = hs[m], hi[m]
                    _sift_down(hs, hi, m, 0)
                for j in range(n_t):  # reset only what this query touched
                    acc[touched[j]] = 0.0
                    seen[touched[j]] = False
        return out_s, out_i

    return topk


def available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def bm25_topk(qmat, weights, k: int, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of ``qmat @ weights`` (CSR [B, V] x CSR [V, N]) -> (float32 [B, k], int64 [B, k])."""
    import numba as nb

    qmat = qmat.tocsr()
    qmat.sort_indices()
    n_blocks = max(1, min(qmat.shape[0], 4 * (threads or nb.get_num_threads())))
    s, i = _kernel()(qmat.indptr.astype(np.int64), qmat.indices.astype(np.int64), qmat.data.astype(np.float32),
                     weights.indptr.astype(np.int64, copy=False), weights.indices.astype(np.int64, copy=False),
                     weights.data.astype(np.float32, copy=False), weights.shape[1], k, n_blocks)
    if k > weights.shape[1]:  # fewer documents than k: the tail stays padding
        s[:, weights.shape[1]:], i[:, weights.shape[1]:] = -np.inf, -1
    return s, i
