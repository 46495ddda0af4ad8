"""Exact k-nearest-neighbour search over a ladder's nodes, for MoGG's graph
(:mod:`mogg.ladders.graph`): BM25 self-similarity with pruned exact scoring (essential terms plus
a k-th score lower bound; a numba kernel or the scipy product) and dense cosine kNN through faiss,
with a recall check against brute force.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from mogg.core.segments import csr_keys, csr_lookup, range_indices, segment_cumsum, segment_rank
from mogg.retrieval.bm25 import BM25Retriever
from mogg.retrieval.dense import DenseRetriever

log = logging.getLogger(__name__)

# Share of the threshold that the pruned query terms may account for. Larger: fewer essential terms
# (a cheaper product) but a looser candidate filter (more exact look-ups); 0.3 was fastest on the PubMedQA+MedMCQA nodes.
_REST_SHARE = 0.3

__all__ = ["bm25_knn", "bm25_self_scores", "dense_knn", "knn_recall"]


def _scatter_topk(rows, cols, sims, n_rows: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row top-k of candidate triples by (-sim, col) into [n_rows, k] arrays (-1 / -inf pad)."""
    order = np.lexsort((cols, -sims, rows))  # rows first, best similarity, ties by lower id
    rows, cols, sims = rows[order], cols[order], sims[order]
    rank = segment_rank(rows)
    keep = rank < k
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float32)
    out_i = np.full((n_rows, k), -1, dtype=np.int64)
    out_s[rows[keep], rank[keep]] = sims[keep]
    out_i[rows[keep], rank[keep]] = cols[keep]
    return out_s, out_i


def bm25_self_scores(retriever: BM25Retriever, queries: sp.csr_matrix, offset: int = 0) -> np.ndarray:
    """s(v, v) for node-queries ``queries`` [Uq, V] (nodes ``offset..offset+Uq-1`` of the index): float64 [Uq]."""
    # sum_t Q[v, t] * W[t, offset + v]: elementwise product with rows of W^T, no [Uq, U] product needed.
    w_t = retriever.weights[:, offset : offset + queries.shape[0]].T.tocsr()  # [Uq, V], not all of W
    return np.asarray(queries.multiply(w_t).sum(axis=1), dtype=np.float64).ravel()


def _split_essential(q: sp.csr_matrix, max_w: np.ndarray, budget: np.ndarray):
    """Split query rows [U, V] into (essential, rest, rest upper bound float64 [U]) (max-score).

    A term's contribution to any score is at most Q[v, t] * max_w[t]. The cheapest terms whose
    bounds sum below ``budget[v]`` (= min_sim * s(v, v)) form "rest": a node matching only those
    cannot reach the threshold, so candidates come from the essential terms alone, and the rest
    (usually the few most frequent terms, i.e. the longest postings) is only looked up for them.
    """
    rows = np.repeat(np.arange(q.shape[0]), np.diff(q.indptr))
    ub = q.data.astype(np.float64) * max_w[q.indices]
    order = np.lexsort((ub, rows))  # per row, cheapest term first
    cum = segment_cumsum(ub[order], rows[order], dtype=np.float64)
    rest = np.zeros(q.nnz, dtype=bool)
    rest[order] = cum < budget[rows[order]] * (1 - 1e-6)  # slack: float32 scores vs float64 bounds
    rest_ub = np.bincount(rows[rest], weights=ub[rest], minlength=q.shape[0])
    ess, nes = q.copy(), q.copy()
    ess.data[rest] = 0
    nes.data[~rest] = 0
    ess.eliminate_zeros()
    nes.eliminate_zeros()
    return ess, nes, rest_ub


def _rest_scores(nes: sp.csr_matrix, w, keys, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """sum_{t in rest(v)} Q[v, t] * W[t, u] for candidate pairs (rows v, cols u): float64 [M]."""
    ptr = nes.indptr
    lengths = ptr[rows + 1] - ptr[rows]  # rest terms per candidate's query
    pair = np.repeat(np.arange(len(rows)), lengths)
    offs = range_indices(ptr[rows], lengths)
    contrib = nes.data[offs].astype(np.float64) * csr_lookup(w, keys, nes.indices[offs], cols[pair])
    return np.bincount(pair, weights=contrib, minlength=len(rows))


def _top_terms(q: sp.csr_matrix, max_w: np.ndarray, m: int) -> sp.csr_matrix:
    """Each query row [U, V] reduced to its ``m`` terms of largest bound Q[v, t] * max_w[t]."""
    rows = np.repeat(np.arange(q.shape[0]), np.diff(q.indptr))
    order = np.lexsort((-(q.data * max_w[q.indices]), rows))
    keep = np.zeros(q.nnz, dtype=bool)
    keep[order] = segment_rank(rows[order]) < m
    out = q.copy()
    out.data[~keep] = 0
    out.eliminate_zeros()
    return out


def _kth_lower_bound(q_all, w, keys, k: int, batch_size: int, max_w: np.ndarray, offset: int = 0) -> np.ndarray:
    """A lower bound on every node's k-th best neighbour score (float64 [U], 0 when unknown).

    Candidates from the 2 most selective query terms (short postings), up to 2k of them with a
    partial score within half of the row's best, rescored exactly: the k-th best exact score among any k real neighbours is <= the true
    k-th best, so nodes scoring below it can never enter the top-k.
    """
    n = q_all.shape[0]
    q_top = _top_terms(q_all, max_w, 2)
    out = np.zeros(n, dtype=np.float64)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        prod = (q_top[start:stop] @ w).tocsr()  # [b, U] partial scores
        rows = np.repeat(np.arange(stop - start), np.diff(prod.indptr))
        cols = prod.indices.astype(np.int64)
        # Cheap candidates, no sort: per row, the first 2k (column order) within half of the row max.
        row_max = np.zeros(stop - start, dtype=np.float32)
        nonempty = np.diff(prod.indptr) > 0
        row_max[nonempty] = np.maximum.reduceat(prod.data, prod.indptr[:-1][nonempty])
        ok = (cols != offset + start + rows) & (prod.data >= 0.5 * row_max[rows])
        rows, cols = rows[ok], cols[ok]
        first = segment_rank(rows) < 2 * k
        rows, cols = rows[first], cols[first]
        exact = _rest_scores(q_all, w, keys, start + rows, cols)  # full BM25 of those pairs
        kth, _ = _scatter_topk(rows, cols, exact.astype(np.float32), stop - start, k)
        out[start:stop] = np.where(np.isfinite(kth[:, -1]), kth[:, -1], 0.0)
    return out * (1 - 1e-6)  # slack: float32 products vs float64 sums


def bm25_knn(texts: Sequence[str], k: int, min_sim: float = 0.0, batch_size: int = 2048,
             timings: dict | None = None, retriever: BM25Retriever | None = None, offset: int = 0,
             backend: str = "auto", show_progress: bool = False):
    """Every node as a BM25 query against all nodes: top-``k`` neighbours, self excluded.

    ``texts`` are the query nodes. Without ``retriever`` they are also the index; with one (an
    index over all nodes, e.g. merged from shards) ``texts[i]`` is node ``offset + i`` of it, so a
    shard's nodes search the full graph and the rows concatenate to the single-machine result.

    Returns ``(sim float32 [U, k], ids int64 [U, k])``, rows by (-sim, id), -inf / -1 padding. Only
    neighbours with a positive score and ``sim = s(v, u) / s(v, v) >= min_sim`` are kept (filtering
    before the top-k gives the same result as after it). ``backend``: ``"numba"`` (a compiled
    max-score kernel, all cores; scores bit-identical to the full product), ``"scipy"`` (sparse
    products with a k-th-score lower bound and a max-score split) or ``"auto"`` (numba when
    installed). Both are exact.
    """
    from mogg.retrieval import bm25_kernel

    if backend not in ("auto", "numba", "scipy"):
        raise ValueError(f"backend must be 'auto', 'numba' or 'scipy', got {backend!r}")
    t0 = time.perf_counter()
    if retriever is None and offset:
        raise ValueError("offset needs the retriever (index) that holds all nodes")
    if retriever is None:  # one tokenization pass: the nodes' term counts are their query rows
        r = BM25Retriever(backend="scipy")
        vocab, tf, dl = r.count_terms(texts)
        r.fit_counts(vocab, tf, dl)
        q_all = tf.T.tocsr().astype(np.float32)  # [U, V] term counts
        q_all.sort_indices()
    else:
        r = retriever
        if offset < 0 or offset + len(texts) > r.n_docs:
            raise ValueError(f"query nodes {offset}..{offset + len(texts)} outside the index of {r.n_docs} nodes")
        q_all = r.query_matrix(texts)  # [Uq, V] term counts
    self_s = bm25_self_scores(r, q_all, offset)  # [Uq]
    if backend == "numba" or (backend == "auto" and bm25_kernel.available()):
        out = _knn_numba(q_all, r, self_s, k, min_sim, offset, timings, t0, show_progress)
    else:
        out = _knn_scipy(q_all, r, self_s, k, min_sim, batch_size, offset, timings, t0)
    return out


def _knn_numba(q_all, r: BM25Retriever, self_s, k, min_sim, offset, timings, t0, show_progress):
    from tqdm.auto import tqdm

    from mogg.retrieval.bm25_kernel import bm25_self_knn

    w = r._kernel_weights()
    t1 = time.perf_counter()
    n = q_all.shape[0]
    step = 16384  # queries per kernel call: a progress bar tick, and the rows stay small
    out_s = np.full((n, k), -np.inf, dtype=np.float32)
    out_i = np.full((n, k), -1, dtype=np.int64)
    with tqdm(total=n, desc="MoGG kNN (BM25)", unit="node", disable=not show_progress) as bar:
        for start in range(0, n, step):
            stop = min(start + step, n)
            out_s[start:stop], out_i[start:stop] = bm25_self_knn(q_all[start:stop], w, self_s[start:stop], k, min_sim,
                                                                 offset + start)
            bar.update(stop - start)
    if timings is not None:
        timings["indexing"] = timings.get("indexing", 0.0) + t1 - t0
        timings["knn_search"] = timings.get("knn_search", 0.0) + time.perf_counter() - t1
    return out_s, out_i


def _knn_scipy(q_all, r: BM25Retriever, self_s, k, min_sim, batch_size, offset, timings, t0):
    w = r.weights.tocsr()  # [V, U]
    w.sort_indices()
    n = q_all.shape[0]
    bar = np.zeros(n)  # [Uq] score a neighbour must reach (0: any positive score)
    if min_sim > 0:
        max_w = np.asarray(w.max(axis=1).toarray(), dtype=np.float64).ravel()  # [V]
        keys = csr_keys(w)  # W[t, u] by binary search (csr_lookup)
        bar = np.maximum(min_sim * self_s, _kth_lower_bound(q_all, w, keys, k, batch_size, max_w, offset))
        ess, nes, rest_ub = _split_essential(q_all, max_w, _REST_SHARE * bar)
    else:
        ess, nes, rest_ub, keys = q_all, None, np.zeros(n), None
    t1 = time.perf_counter()
    out_s = np.full((n, k), -np.inf, dtype=np.float32)
    out_i = np.full((n, k), -1, dtype=np.int64)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        prod = (ess[start:stop] @ w).tocsr()  # [b, U] partial scores of nodes sharing essential terms
        rows = np.repeat(np.arange(stop - start), np.diff(prod.indptr))
        cols = prod.indices.astype(np.int64)
        # The rest terms add at most rest_ub: drop candidates that cannot reach the bar.
        ok = (prod.data + rest_ub[start + rows] >= bar[start + rows] * (1 - 1e-6)) & (cols != offset + start + rows)
        rows, cols, score = rows[ok], cols[ok], prod.data[ok].astype(np.float64)
        own = self_s[start + rows]
        if nes is not None:
            score = score + _rest_scores(nes, w, keys, start + rows, cols)
        with np.errstate(divide="ignore", invalid="ignore"):
            sim = (score / own).astype(np.float32)
        ok = (score > 0) & (own > 0) & (sim.astype(np.float64) >= min_sim)
        s, i = _scatter_topk(rows[ok], cols[ok], sim[ok], stop - start, k)
        out_s[start:stop], out_i[start:stop] = s, i
    if timings is not None:
        timings["indexing"] = timings.get("indexing", 0.0) + t1 - t0
        timings["knn_search"] = timings.get("knn_search", 0.0) + time.perf_counter() - t1
    log.debug("bm25 kNN: %d nodes, %.1f%% of query terms essential", n, 100.0 * ess.nnz / max(q_all.nnz, 1))
    return out_s, out_i


def dense_knn(embeddings: np.ndarray, k: int, min_sim: float = -1.0, batch_size: int = 2048,
              backend: str = "faiss", timings: dict | None = None, index_embeddings: np.ndarray | None = None,
              offset: int = 0, index: str = "Flat", nprobe: int = 32, ef_search: int = 128, seed: int = 0,
              retriever: DenseRetriever | None = None):
    """Cosine kNN of every embedding [Uq, d] among all, self excluded; same contract as :func:`bm25_knn`.

    With ``index_embeddings`` [U, d] (all nodes), row i of ``embeddings`` is node ``offset + i``.
    ``index``: a faiss factory string; "Flat" is exact, e.g. "IVF1024,Flat" or "HNSW32" approximate
    (candidates re-scored exactly, so a found neighbour has its exact similarity; see
    :func:`knn_recall` for how many are found). ``retriever``: a :class:`DenseRetriever` already
    fitted on all nodes (a sharded build's node index, its trained faiss index saved once and
    reused by every kNN shard); then ``index``, ``nprobe``, ``ef_search`` and ``seed`` are its own.
    """
    t0 = time.perf_counter()
    nodes = embeddings if index_embeddings is None else index_embeddings
    if retriever is not None:
        nodes = retriever.embeddings
    if offset < 0 or offset + len(embeddings) > len(nodes):
        raise ValueError(f"query nodes {offset}..{offset + len(embeddings)} outside the index of {len(nodes)} nodes")
    r = retriever or DenseRetriever(None, backend=backend, batch_size=batch_size, index=index, nprobe=nprobe,
                                    ef_search=ef_search, seed=seed).fit_embeddings(nodes)
    r.build_index()  # now (IVF: trained), so that its time counts as indexing
    t1 = time.perf_counter()
    s, i = r.search_embeddings(embeddings, k + 1)  # [Uq, k+1]: self is usually among them
    out = _drop_self(s, i, offset + np.arange(len(s)), k, min_sim)
    if timings is not None:
        timings["indexing"] = timings.get("indexing", 0.0) + t1 - t0
        timings["knn_search"] = timings.get("knn_search", 0.0) + time.perf_counter() - t1
    return out


def _drop_self(s: np.ndarray, i: np.ndarray, own: np.ndarray, k: int, min_sim: float):
    """[n, k+1] hits of nodes ``own`` [n] -> their top-k rows without self, padding, or sim < min_sim."""
    n, m = s.shape
    rows = np.repeat(np.arange(n), m)
    s, i = s.ravel(), i.ravel()
    # Drop self and padding; exact duplicates with lower ids may push self out: then k+1 remain.
    ok = (i >= 0) & (i != np.repeat(own, m)) & (s.astype(np.float64) >= min_sim)
    return _scatter_topk(rows[ok], i[ok], s[ok], n, k)


def knn_recall(embeddings: np.ndarray, ids: np.ndarray, k: int, min_sim: float, sample: int = 1000,
               seed: int = 0) -> dict:
    """Neighbour recall of approximate kNN rows ``ids`` [U, k] of ``embeddings`` [U, d] against exact
    (brute-force) rows of a seeded sample of ``sample`` nodes: the share of exact neighbours found
    (``neighbour_recall``) and of rows found whole (``rows_equal``)."""
    n = len(embeddings)
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(sample, n), replace=False))
    r = DenseRetriever(None).fit_embeddings(embeddings)  # exact (Flat)
    s, i = r.search_embeddings(np.asarray(embeddings[rows]), k + 1)
    _, want = _drop_self(s, i, rows, k, min_sim)  # [S, k], -1 padded
    got = ids[rows]
    found = (want[:, :, None] == got[:, None, :]).any(axis=2) & (want >= 0)  # [S, k]
    n_exact = int((want >= 0).sum())
    return {"sampled_nodes": int(len(rows)), "exact_neighbours": n_exact,
            "neighbour_recall": float(found.sum() / n_exact) if n_exact else 1.0,
            "rows_equal": float(np.mean((np.sort(want, 1) == np.sort(got, 1)).all(axis=1)))}
