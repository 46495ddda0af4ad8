"""The numba kernels behind :mod:`mogg.retrieval.bm25_kernel` (compiled on first call and cached
on disk: module-level functions, so the cache holds across processes)."""

from __future__ import annotations

import numba as nb
import numpy as np

# Nodes per term probed for the k-th-score lower bound of the self-kNN (step 1 of ``self_knn``).
_PROBE = 16
_PROBE_TERMS = 1
# A query whose postings exceed n_docs / _DENSE_FACTOR accumulates without tracking touched documents
# and scans all scores (sequential, cheap) instead: 2,000 MIRAGE questions on 100k docs, 1 thread,
# kernel 0.95 s at factor 4, 0.51 s at 16, 0.46 s at 64.
_DENSE_FACTOR = 32
# Scores per chunk of the dense pass's top-k scan (chunk maxima, then only the chunks that can hold
# a top-k score). 2,000 MIRAGE questions on 100k docs, kernel alone, alternating with the previous
# kernel (a count of scores above the heap root per chunk of 256, signed indices) on a noisy VM:
# chunks of 64 1.19-1.43x faster at 1 thread, 1.39-1.60x at 2; 128 1.25-1.35x / 1.24-1.42x; 32 1.09x / 1.20x.
_SCAN_CHUNK = 64


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


@nb.njit(cache=True)
def _drain(hs, hi, n, out_s, out_i, q):  # the heap's n entries, worst-first, into row q from the back
    m = n
    while m > 0:
        out_s[q, m - 1], out_i[q, m - 1] = hs[0], hi[0]
        m -= 1
        hs[0], hi[0] = hs[m], hi[m]
        _sift_down(hs, hi, m, 0)


@nb.njit(cache=True)
def _push(hs, hi, n, k, s, d):  # offer (s, d) to a bounded heap of n <= k entries; returns n
    if n < k:
        hs[n], hi[n] = s, d
        pos = n
        while pos > 0:
            parent = (pos - 1) // 2
            if _worse(hs[pos], hi[pos], hs[parent], hi[parent]):
                hs[pos], hs[parent] = hs[parent], hs[pos]
                hi[pos], hi[parent] = hi[parent], hi[pos]
                pos = parent
            else:
                break
        return n + 1
    if _worse(hs[0], hi[0], s, d):
        hs[0], hi[0] = s, d
        _sift_down(hs, hi, n, 0)
    return n


@nb.njit(cache=True, inline="always")
def _add_postings(acc, seen, touched, n_t, c, w_docs, w_vals, lo, hi):
    """acc[d] += c * W[t, d] over t's postings lo..hi; documents seen first are appended to
    ``touched`` (their count ``n_t`` is returned), so a query resets only what it touched."""
    for b in range(lo, hi):
        d = w_docs[b]
        acc[d] += c * w_vals[b]
        if not seen[d]:
            seen[d] = True
            touched[n_t] = d
            n_t += 1
    return n_t


@nb.njit(cache=True)
def _chunk_key_max(bits, lo, hi):
    """max over ``bits[lo:hi]`` (float32 scores viewed as int32) of an integer key ordered as the
    floats are: non-negative floats order as their bits, negative ones with the low 31 bits flipped
    (-0.0 would rank below +0.0, but sums that start at +0.0 never become -0.0). Branch-free with
    unsigned indices, so LLVM vectorizes it."""
    m = np.int32(np.iinfo(np.int32).min)
    for j in range(np.uint64(lo), np.uint64(hi)):
        b = bits[j]  # explicit int32 throughout: numba widens to int64 otherwise (half the lanes)
        m = max(m, np.int32(b ^ ((b >> np.int32(31)) & np.int32(0x7FFFFFFF))))
    return m


@nb.njit(cache=True, parallel=True)
def topk(q_ptr, q_terms, q_counts, w_ptr, w_docs, w_vals, n_docs, k, n_blocks, dense_factor):
    n_q = len(q_ptr) - 1
    out_s = np.full((n_q, k), -np.inf, dtype=np.float32)
    out_i = np.full((n_q, k), -1, dtype=np.int64)
    for blk in nb.prange(n_blocks):
        acc = np.zeros(n_docs, dtype=np.float32)
        seen = np.zeros(n_docs, dtype=np.bool_)
        touched = np.empty(n_docs, dtype=np.int64)
        hs = np.empty(k, dtype=np.float32)
        hi = np.empty(k, dtype=np.int64)
        bits = acc.view(np.int32)
        n_chunks = (n_docs + _SCAN_CHUNK - 1) // _SCAN_CHUNK
        ckeys = np.empty(n_chunks, dtype=np.int32)
        hk = np.empty(k, dtype=np.int32)
        hc = np.empty(k, dtype=np.int64)
        # strided, not contiguous: question sets arrive grouped by source (short MMLU questions, then
        # long MedQA vignettes), and prange hands each thread a contiguous run of blocks
        for q in range(blk, n_q, n_blocks):
            n_post = 0
            for a in range(q_ptr[q], q_ptr[q + 1]):
                n_post += w_ptr[q_terms[a] + 1] - w_ptr[q_terms[a]]
            if n_post * dense_factor > n_docs:
                # dense mode (long queries with common terms touch most documents): accumulate
                # without tracking, then a pass over all scores, zeros included, exactly as over
                # a dense row of the product (ties by ascending id)
                # unsigned indices: numba wraps negative signed indices at every access, and that
                # compare-and-add cost ~30% of this scatter (2,000 questions, 100k docs: 281 -> 201 ms)
                for a in range(q_ptr[q], q_ptr[q + 1]):
                    t, c = q_terms[a], q_counts[a]
                    if c == 1.0:  # most query terms occur once: 1 * w == w exactly, skip the product
                        for b in range(w_ptr[t], w_ptr[t + 1]):
                            acc[np.uint64(w_docs[b])] += w_vals[b]
                    else:
                        for b in range(w_ptr[t], w_ptr[t + 1]):
                            acc[np.uint64(w_docs[b])] += c * w_vals[b]
                # chunk maxima by order-preserving integer keys (a float max does not vectorize
                # in numba; an int32 max does): the k-th largest chunk maximum is a lower bound
                # on the k-th best score, since k chunks each hold a score >= it; chunks below it
                # hold only scores strictly below the k-th best and are skipped, exactly
                theta = np.int32(np.iinfo(np.int32).min)
                if n_chunks > k:
                    n = 0
                    for ch in range(n_chunks):
                        ck = _chunk_key_max(bits, ch * _SCAN_CHUNK, min(n_docs, (ch + 1) * _SCAN_CHUNK))
                        ckeys[ch] = ck
                        n = _push(hk, hc, n, k, ck, ch)
                    theta = hk[0]
                n = 0
                for ch in range(n_chunks):  # ascending ids: ties resolve as in the product
                    if n_chunks <= k or ckeys[ch] >= theta:
                        for d in range(ch * _SCAN_CHUNK, min(n_docs, (ch + 1) * _SCAN_CHUNK)):
                            n = _push(hs, hi, n, k, acc[d], d)
                acc[:] = 0.0  # one memset instead of a store per document in the scan
                _drain(hs, hi, n, out_s, out_i, q)
                continue
            n_t = 0
            for a in range(q_ptr[q], q_ptr[q + 1]):  # ascending term ids: the product's order
                t = q_terms[a]
                n_t = _add_postings(acc, seen, touched, n_t, q_counts[a], w_docs, w_vals, w_ptr[t], w_ptr[t + 1])
            n = 0
            for j in range(n_t):  # bounded heap: the worst kept entry at the root
                d = touched[j]
                s = acc[d]
                n = _push(hs, hi, n, k, s, d)
            # untouched documents score 0: they rank after positive ones, before negative ones
            d = 0
            while d < n_docs:
                if not seen[d]:
                    if n < k or _worse(hs[0], hi[0], np.float32(0.0), d):
                        n = _push(hs, hi, n, k, np.float32(0.0), d)
                    else:
                        break  # ids only grow from here: no later zero can beat the root
                d += 1
            # drain the heap worst-first into the row from the back
            _drain(hs, hi, n, out_s, out_i, q)
            for j in range(n_t):  # reset only what this query touched
                acc[touched[j]] = 0.0
                seen[touched[j]] = False
    return out_s, out_i


@nb.njit(cache=True)
def _weight(w_ptr, w_docs, w_vals, t, d):  # W[t, d] by binary search in t's sorted postings, 0 if absent
    lo, hi = w_ptr[t], w_ptr[t + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        if w_docs[mid] < d:
            lo = mid + 1
        else:
            hi = mid
    if lo < w_ptr[t + 1] and w_docs[lo] == d:
        return w_vals[lo]
    return np.float32(0.0)


@nb.njit(cache=True, parallel=True)
def self_knn(q_ptr, q_terms, q_counts, w_ptr, w_docs, w_vals, max_w, own, offset, n_docs, k, min_sim, n_blocks,
             rest_share):
    n_q = len(q_ptr) - 1
    out_s = np.full((n_q, k), -np.inf, dtype=np.float32)
    out_i = np.full((n_q, k), -1, dtype=np.int64)
    for blk in nb.prange(n_blocks):
        acc = np.zeros(n_docs, dtype=np.float32)
        seen = np.zeros(n_docs, dtype=np.bool_)
        touched = np.empty(n_docs, dtype=np.int64)
        scored = np.zeros(n_docs, dtype=np.bool_)  # scored exactly in step 1 (already offered to the heap)
        scored_list = np.empty(_PROBE_TERMS * _PROBE, dtype=np.int64)
        hs = np.empty(k, dtype=np.float32)
        hi = np.empty(k, dtype=np.int64)
        for q in range(blk, n_q, n_blocks):  # strided: neighbouring nodes share a document's length
            a0, a1 = q_ptr[q], q_ptr[q + 1]
            if own[q] <= 0.0 or a1 == a0:
                continue
            ub = np.empty(a1 - a0, dtype=np.float64)
            for a in range(a0, a1):
                ub[a - a0] = q_counts[a] * max_w[q_terms[a]]
            order = np.argsort(ub)
            me = offset + q
            # 1. a cheap lower bound on the k-th best score: nodes in the postings of the two
            # terms of largest bound (rare, heavy terms), scored exactly; they enter the heap
            n = 0
            n_s = 0
            for j in range(max(0, a1 - a0 - _PROBE_TERMS), a1 - a0):
                t = q_terms[a0 + order[j]]
                for b in range(w_ptr[t], min(w_ptr[t + 1], w_ptr[t] + _PROBE)):
                    d = w_docs[b]
                    if d == me or scored[d]:
                        continue
                    scored[d] = True
                    scored_list[n_s] = d
                    n_s += 1
                    score = np.float32(0.0)
                    for a in range(a0, a1):
                        score += q_counts[a] * _weight(w_ptr, w_docs, w_vals, q_terms[a], d)
                    if score <= 0.0:
                        continue
                    sim = np.float32(np.float64(score) / own[q])
                    if np.float64(sim) >= min_sim:
                        n = _push(hs, hi, n, k, sim, d)
            bar = min_sim * own[q]  # the score a neighbour must reach (float64)
            if n == k:
                bar = max(bar, np.float64(hs[0]) * own[q] * (1 - 1e-5))
            # 2. max-score split: the cheapest terms whose bounds sum below the bar are "rest";
            # a node matching only rest terms cannot reach it, so candidates come from the others
            rest = np.zeros(a1 - a0, dtype=np.bool_)
            rest_ub, cum = 0.0, 0.0
            for j in range(a1 - a0):
                cum += ub[order[j]]
                if cum < rest_share * bar * (1 - 1e-6):
                    rest[order[j]] = True
                    rest_ub = cum
                else:
                    break
            n_t = 0
            for a in range(a0, a1):  # essential terms, ascending term id
                if rest[a - a0]:
                    continue
                t = q_terms[a]
                n_t = _add_postings(acc, seen, touched, n_t, q_counts[a], w_docs, w_vals, w_ptr[t], w_ptr[t + 1])
            for j in range(n_t):
                d = touched[j]
                if d == me or scored[d]:
                    continue
                need = bar
                if n == k:  # the heap's worst similarity also bounds the score
                    need = max(need, np.float64(hs[0]) * own[q])
                if acc[d] + rest_ub < need * (1 - 1e-5):
                    continue
                if rest_ub > 0.0:  # the exact score: every term, ascending id (the product's order)
                    score = np.float32(0.0)
                    for a in range(a0, a1):
                        score += q_counts[a] * _weight(w_ptr, w_docs, w_vals, q_terms[a], d)
                else:
                    score = acc[d]
                if score <= 0.0:
                    continue
                sim = np.float32(np.float64(score) / own[q])
                if np.float64(sim) < min_sim:
                    continue
                n = _push(hs, hi, n, k, sim, d)
            _drain(hs, hi, n, out_s, out_i, q)
            for j in range(n_t):
                acc[touched[j]] = 0.0
                seen[touched[j]] = False
            for j in range(n_s):
                scored[scored_list[j]] = False
    return out_s, out_i
