"""A compiled BM25 top-k kernel (numba): term-at-a-time accumulation over the postings of each
query's terms into a reused score buffer, top-k by a bounded heap over the touched documents only,
queries spread over the CPU cores.

Bit-identical to the scipy path (``Q @ W`` then top-k): float32 accumulation in ascending term
order, ``score += count * weight``; ties by ascending id; documents a query does not touch score
0 and fill the remaining slots by ascending id, as rows of zeros do in the dense product.
"""

from __future__ import annotations

import numpy as np


def _kernel():
    from mogg.retrieval import _bm25_jit

    return _bm25_jit.topk, _bm25_jit.self_knn


def _postings_ids(indices: np.ndarray) -> np.ndarray:
    """Document ids of the postings as stored: int32 (scipy's choice below 2**31 entries) halves
    the memory each query streams through (12 -> 8 bytes per posting with the float32 weight)."""
    return indices if indices.dtype in (np.int32, np.int64) else indices.astype(np.int64)


def available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def bm25_topk(qmat, weights, k: int, threads: int | None = None,
              dense_factor: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of ``qmat @ weights`` (CSR [B, V] x CSR [V, N]) -> (float32 [B, k], int64 [B, k]).

    ``dense_factor``: a query whose postings exceed n_docs / dense_factor takes the dense pass
    (default :data:`mogg.retrieval._bm25_jit._DENSE_FACTOR`); results are the same either way.
    """
    import numba as nb

    from mogg.retrieval._bm25_jit import _DENSE_FACTOR

    qmat = qmat.tocsr()
    qmat.sort_indices()
    n_blocks = max(1, min(qmat.shape[0], 4 * (threads or nb.get_num_threads())))
    s, i = _kernel()[0](qmat.indptr.astype(np.int64), qmat.indices.astype(np.int64), qmat.data.astype(np.float32),
                     weights.indptr.astype(np.int64, copy=False), _postings_ids(weights.indices),
                     weights.data.astype(np.float32, copy=False), weights.shape[1], k, n_blocks,
                        int(dense_factor or _DENSE_FACTOR))
    if k > weights.shape[1]:  # fewer documents than k: the tail stays padding
        s[:, weights.shape[1]:], i[:, weights.shape[1]:] = -np.inf, -1
    return s, i


def bm25_self_knn(qmat, weights, own: np.ndarray, k: int, min_sim: float, offset: int = 0,
                  threads: int | None = None, rest_share: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Every node's top-``k`` neighbours by ``sim = s(v, u) / s(v, v)`` (self excluded, score > 0,
    ``sim >= min_sim``), rows by (-sim, id), -inf / -1 padding: (float32 [B, k], int64 [B, k]).

    ``qmat`` [B, V]: term counts of nodes ``offset..offset+B-1`` of the index ``weights`` [V, N];
    ``own`` float64 [B]: their self-scores. Exact: scores are the float32 sums of ``qmat @ weights``
    in the same order (bit-identical); max-score pruning only skips nodes that cannot reach the
    threshold (``min_sim``, then the heap's k-th similarity). ``rest_share``: the share of that
    threshold the skipped ("rest") terms may account for; larger means fewer postings walked but
    more exact look-ups (0.45-0.75 were equally fast on replicated MIRAGE nodes, 1.0 5x slower).
    """
    import numba as nb

    qmat = qmat.tocsr()
    qmat.sort_indices()
    w = weights.tocsr()
    w.sort_indices()
    max_w = np.zeros(w.shape[0], dtype=np.float64)
    nz = np.diff(w.indptr) > 0
    max_w[nz] = np.maximum.reduceat(w.data, w.indptr[:-1][nz]).astype(np.float64)
    n_blocks = max(1, min(qmat.shape[0], 4 * (threads or nb.get_num_threads())))
    return _kernel()[1](qmat.indptr.astype(np.int64), qmat.indices.astype(np.int64), qmat.data.astype(np.float32),
                        w.indptr.astype(np.int64, copy=False), _postings_ids(w.indices),
                        w.data.astype(np.float32, copy=False), max_w, np.asarray(own, dtype=np.float64),
                        int(offset), w.shape[1], int(k), float(min_sim), n_blocks, float(rest_share))
