"""MoGG ladder: a kNN similarity graph over sentence-group nodes, levels = hop neighbourhoods.

Nodes are groups of ``node_sentences`` sentences (the MoG unit splitter). Every node queries an
index of all nodes; its ``k_graph`` best neighbours (self excluded) whose similarity reaches
``t_graph`` become undirected edges. Level h holds one chunk per node v: v plus the nodes within h
hops, admitted in (hop distance, corpus order) while the running token count stays within
``max_tokens`` (v itself always), emitted in corpus order. Chunk index == node index.

Similarity. Dense: cosine of L2-normalised embeddings. BM25: raw Okapi scores are unbounded and
scale with query length, so the similarity compared with ``t_graph`` is ``s(v, u) / s(v, v)``, the
neighbour's score relative to the node's own self-score (1 = scores like an exact copy). It is
usually in [0, 1] but can exceed 1 (a shorter node holding the same rare terms). The ranking of
v's neighbours is the raw-score ranking (s(v, v) is constant per query). An edge found from both
ends keeps the larger of the two directed similarities.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from mogg.data.records import Document
from mogg.ladders.base import Ladder, Level, Units
from mogg.ladders.builder import LadderBuilder
from mogg.ladders.mog import MoGLadderBuilder
from mogg.retrieval.bm25 import BM25Retriever
from mogg.retrieval.dense import DenseRetriever
from mogg.segments import segment_cumsum, segment_rank
from mogg.text import count_tokens

log = logging.getLogger(__name__)

# Share of the threshold that the pruned query terms may account for. Larger: fewer essential terms
# (a cheaper product) but a looser candidate filter (more exact look-ups); 0.3 was fastest on the PubMedQA+MedMCQA nodes.
_REST_SHARE = 0.3

__all__ = ["GraphLadderBuilder", "bm25_knn", "dense_knn", "knn_edges", "knn_recall", "adjacency", "hop_levels"]


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


def _lookup(w: sp.csr_matrix, keys: np.ndarray, terms: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """W[terms, docs] (0 where absent) via binary search in the sorted flat keys t * N + d."""
    want = terms.astype(np.int64) * w.shape[1] + docs
    pos = np.minimum(np.searchsorted(keys, want), max(len(keys) - 1, 0))
    hit = keys[pos] == want if len(keys) else np.zeros(len(want), dtype=bool)
    return np.where(hit, w.data[pos], 0.0)


def _rest_scores(nes: sp.csr_matrix, w, keys, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """sum_{t in rest(v)} Q[v, t] * W[t, u] for candidate pairs (rows v, cols u): float64 [M]."""
    ptr = nes.indptr
    lengths = ptr[rows + 1] - ptr[rows]  # rest terms per candidate's query
    pair = np.repeat(np.arange(len(rows)), lengths)
    offs = np.repeat(ptr[rows] - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
    contrib = nes.data[offs].astype(np.float64) * _lookup(w, keys, nes.indices[offs], cols[pair])
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
        keys = np.repeat(np.arange(w.shape[0], dtype=np.int64), np.diff(w.indptr)) * w.shape[1] + w.indices
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


def knn_edges(sim: np.ndarray, ids: np.ndarray, min_sim: float) -> tuple[np.ndarray, np.ndarray]:
    """Undirected edges from kNN rows [U, k]: ``(edges int64 [E, 2] with i < j, sim float32 [E])``.

    Keeps neighbours with ``sim >= min_sim``; a pair found from both ends keeps the larger sim.
    Edges are sorted by (i, j).
    """
    n, k = ids.shape
    src = np.repeat(np.arange(n, dtype=np.int64), k)
    dst, s = ids.ravel(), sim.ravel()
    ok = (dst >= 0) & (dst != src) & (s.astype(np.float64) >= min_sim)
    a, b, s = np.minimum(src[ok], dst[ok]), np.maximum(src[ok], dst[ok]), s[ok]
    key = a * max(n, 1) + b
    order = np.lexsort((-s, key))  # per pair, the larger similarity first
    key, s = key[order], s[order]
    first = np.r_[True, key[1:] != key[:-1]] if len(key) else np.zeros(0, dtype=bool)
    key, s = key[first], s[first]
    edges = np.stack([key // max(n, 1), key % max(n, 1)], axis=1).astype(np.int64).reshape(-1, 2)
    return edges, s.astype(np.float32)


def adjacency(edges: np.ndarray, n: int) -> sp.csr_matrix:
    """Symmetric 0/1 adjacency CSR [n, n] (float32) of an undirected edge list [E, 2]."""
    i = np.r_[edges[:, 0], edges[:, 1]]
    j = np.r_[edges[:, 1], edges[:, 0]]
    adj = sp.csr_matrix((np.ones(len(i), dtype=np.float32), (i, j)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1.0
    return adj


def _binary_csr(rows: np.ndarray, cols: np.ndarray, n: int) -> sp.csr_matrix:
    m = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, n))
    m.sum_duplicates()
    return m


def hop_levels(adj: sp.csr_matrix, tokens: np.ndarray, hops: int, max_tokens: int) -> list[Level]:
    """Levels hop0..hop``hops``: chunk v = v plus nodes within h hops under the token budget.

    Frontier expansion with sparse products over the rows still growing. Nodes are admitted in
    (distance, corpus order) while the running token count stays <= ``max_tokens``; a row whose
    next node does not fit (or whose frontier is empty) stops growing, so until it stops its
    coverage equals the set of visited nodes and serves as the visited mask.
    """
    n = adj.shape[0]
    tokens = np.asarray(tokens, dtype=np.int64)
    eye = sp.identity(n, dtype=np.float32, format="csr")
    cov = eye
    home = np.arange(n, dtype=np.int64)
    levels = [Level(name="hop0", coverage=cov, home=home)]
    used = tokens.copy()  # [n] tokens already in each chunk (hop 0 = the node itself, any length)
    active = np.ones(n, dtype=bool)
    frontier = eye  # [n, n] nodes at exactly the current distance, rows of active nodes only
    for h in range(1, hops + 1):
        act = np.flatnonzero(active)
        cand = (frontier[act] @ adj).tocsr()  # [R, n] neighbours of the frontier
        cand.data[:] = 1.0
        cand = cand - cand.multiply(cov[act])  # drop visited (== covered, rows are active)
        cand.eliminate_zeros()
        cand.sort_indices()  # within a row: corpus order
        r_loc = np.repeat(np.arange(len(act)), np.diff(cand.indptr))
        rows, cols = act[r_loc], cand.indices.astype(np.int64)
        run = used[rows] + segment_cumsum(tokens[cols], r_loc)
        admit = run <= max_tokens  # a prefix of each row: token counts are non-negative
        rejected = np.zeros(n, dtype=bool)
        rejected[rows[~admit]] = True
        has_new = np.zeros(n, dtype=bool)
        has_new[rows] = True
        used += np.bincount(rows[admit], weights=tokens[cols[admit]], minlength=n).astype(np.int64)
        active &= has_new & ~rejected
        new = _binary_csr(rows[admit], cols[admit], n)
        cov = (cov + new).tocsr()
        cov.sort_indices()
        keep = active[rows[admit]]
        frontier = _binary_csr(rows[admit][keep], cols[admit][keep], n)
        levels.append(Level(name=f"hop{h}", coverage=cov, home=home))
        log.debug("hop %d: %d entries admitted, %d rows still growing", h, int(admit.sum()), int(active.sum()))
    return levels


class GraphLadderBuilder(LadderBuilder):
    """Build the MoGG ladder (docs/design.md section 1).

    Args:
        node_sentences: sentences per node (MoGG: 1-2).
        k_graph: neighbours retrieved per node.
        t_graph: minimum similarity for an edge (BM25: score / self-score; dense: cosine).
        hops: largest hop distance; the ladder has ``hops + 1`` levels.
        max_tokens: token budget of a chunk (the node itself is always kept).
        similarity: "bm25" or "dense".
        encoder: text encoder (``encode``, ``config``) for dense similarity.
        dense_index: faiss factory string of the dense kNN: "Flat" (exact) or approximate, e.g.
            "IVF1024,Flat" (deterministic) or "HNSW32"; an approximate build measures its neighbour
            recall against brute force on ``recall_sample`` seeded nodes (``ladder.meta["knn_recall"]``).
        nprobe, ef_search: search knobs of an IVF / HNSW ``dense_index`` (recall vs time).
        batch_size: node-queries per search batch.
        policies, reports: spine hooks (:mod:`mogg.ladders.builder`), from the config.
    """

    method = "mogg"
    document_local = False  # hop neighbourhoods span documents
    shard_stages = ("nodes", "knn")  # nodes + one node index, then every shard's rows of the kNN

    def __init__(self, node_sentences: int = 2, k_graph: int = 3, t_graph: float = 0.2, hops: int = 4,
                 max_tokens: int = 512, similarity: str = "bm25", encoder=None, batch_size: int = 2048,
                 knn_backend: str = "auto", dense_index: str = "Flat", nprobe: int = 32, ef_search: int = 128,
                 recall_sample: int = 1000, seed: int = 0, policies=None, reports=None):
        super().__init__(policies, reports)
        if knn_backend not in ("auto", "numba", "scipy"):
            raise ValueError(f"knn_backend must be 'auto', 'numba' or 'scipy', got {knn_backend!r}")
        self.knn_backend = knn_backend  # runtime option: every backend gives the same edges (not in config())
        self.show_progress = False
        if similarity not in ("bm25", "dense"):
            raise ValueError(f"similarity must be 'bm25' or 'dense', got {similarity!r}")
        if similarity == "dense" and encoder is None:
            raise ValueError("similarity='dense' needs an encoder")
        if node_sentences < 1 or k_graph < 1 or hops < 0 or max_tokens < 1 or batch_size < 1:
            raise ValueError("node_sentences, k_graph, max_tokens, batch_size must be >= 1 and hops >= 0")
        if dense_index != "Flat" and similarity != "dense":
            raise ValueError(f"dense_index={dense_index!r} is a faiss index for similarity='dense', "
                             f"not {similarity!r}")
        if nprobe < 1 or ef_search < 1 or recall_sample < 1:
            raise ValueError("nprobe, ef_search and recall_sample must be >= 1")
        self.dense_index, self.nprobe, self.ef_search = str(dense_index), int(nprobe), int(ef_search)
        self.recall_sample, self.seed = int(recall_sample), int(seed)
        self.node_sentences, self.k_graph, self.t_graph = int(node_sentences), int(k_graph), float(t_graph)
        self.hops, self.max_tokens, self.similarity = int(hops), int(max_tokens), similarity
        self.encoder, self.batch_size = encoder, int(batch_size)
        self.timings: dict[str, float] = {}  # seconds per stage of the last build
        self._node_embeddings = None  # [U, d] of the last dense knn(), for the recall check

    def config(self) -> dict:
        return {
            "method": self.method,
            "node_sentences": self.node_sentences,
            "k_graph": self.k_graph,
            "t_graph": self.t_graph,
            "hops": self.hops,
            "max_tokens": self.max_tokens,
            "similarity": self.similarity,
            "encoder": self.encoder.config() if self.similarity == "dense" else None,
            # only an approximate index changes the edges (and exact configs keep their old keys)
            **({"dense_index": self.dense_index, "nprobe": self.nprobe, "ef_search": self.ef_search,
                "seed": self.seed} if self.approximate else {}),
        }

    @property
    def approximate(self) -> bool:
        """Whether the kNN comes from an approximate (non-Flat) dense index."""
        return self.similarity == "dense" and self.dense_index != "Flat"

    def knn(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k_graph`` neighbours of every node with sim >= ``t_graph``: (float32 [U, k], int64 [U, k]).

        The same result as a sharded build (index all nodes, then search rows), bit for bit; BM25
        tokenizes the nodes once for both the index and the queries.
        """
        if self.similarity == "bm25":
            return bm25_knn(texts, self.k_graph, self.t_graph, self.batch_size, self.timings,
                            backend=self.knn_backend, show_progress=self.show_progress)
        t0 = time.perf_counter()
        index = self.node_index().fit(texts)  # dense: encodes the nodes
        self.timings["encoding" if self.similarity == "dense" else "indexing"] = time.perf_counter() - t0
        self._node_embeddings = index.embeddings
        return self.knn_rows(index, texts, 0)

    def node_index(self):
        """An unfitted index over nodes for this similarity: BM25 (as :func:`bm25_knn` fits it) or dense."""
        if self.similarity == "bm25":
            return BM25Retriever(backend="scipy", batch_size=self.batch_size)
        # the builder's faiss index: a sharded build saves it (trained) with the node index once
        return DenseRetriever(self.encoder, batch_size=self.batch_size, index=self.dense_index, nprobe=self.nprobe,
                              ef_search=self.ef_search, seed=self.seed)

    def knn_rows(self, index, texts: Sequence[str], offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """kNN rows of nodes ``offset .. offset + len(texts) - 1`` against ``index`` (fitted over all nodes).

        Concatenating the rows of consecutive ranges gives :meth:`knn` of all nodes (a sharded build).
        """
        if self.similarity == "bm25":
            return bm25_knn(texts, self.k_graph, self.t_graph, self.batch_size, self.timings,
                            retriever=index, offset=offset, backend=self.knn_backend, show_progress=self.show_progress)
        q = index.embeddings[offset : offset + len(texts)]  # the index stores the nodes' embeddings
        return dense_knn(q, self.k_graph, self.t_graph, self.batch_size, timings=self.timings,
                         offset=offset, retriever=index)

    def nodes(self, documents: Sequence[Document], show_progress: bool = False) -> Units:
        """The graph's nodes: ``node_sentences``-sentence groups of each document, in corpus order."""
        units = MoGLadderBuilder("sentences", self.node_sentences, n_levels=1).units(documents, show_progress)
        if len(units) == 0:
            raise ValueError("cannot build a graph ladder over zero nodes (empty corpus?)")
        return units

    def ladder_from_knn(self, units: Units, sim: np.ndarray, ids: np.ndarray,
                        embeddings: np.ndarray | None = None) -> Ladder:
        """Edges from kNN rows [U, k] of all nodes, then the hop levels: the MoGG ladder.

        ``embeddings`` [U, d]: the nodes' (dense similarity); with an approximate ``dense_index`` the
        rows' neighbour recall is measured against brute force and kept in ``meta["knn_recall"]``.
        """
        recall = None
        if self.approximate:
            if embeddings is None:
                raise ValueError(f"an approximate kNN ({self.dense_index}) needs the node embeddings to measure its recall")
            t0 = time.perf_counter()
            recall = {"index": self.dense_index, **knn_recall(embeddings, ids, self.k_graph, self.t_graph,
                                                              self.recall_sample, self.seed)}
            self.timings["recall_check"] = time.perf_counter() - t0
            log.info("MoGG approximate kNN (%s): neighbour recall %.4f on %d sampled nodes", self.dense_index,
                     recall["neighbour_recall"], recall["sampled_nodes"])
        t0 = time.perf_counter()
        edges, edge_sim = knn_edges(sim, ids, self.t_graph)
        self.timings["edge_filter"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tokens = np.fromiter((count_tokens(t) for t in units.text), dtype=np.int64, count=len(units))
        levels = hop_levels(adjacency(edges, len(units)), tokens, self.hops, self.max_tokens)
        self.timings["hop_expansion"] = time.perf_counter() - t0
        log.info("MoGG ladder: %d nodes, %d edges, mean chunk size per level %s, timings %s", len(units),
                 len(edges), [round(lv.coverage.nnz / len(units), 2) for lv in levels],
                 {k: round(v, 2) for k, v in self.timings.items()})
        meta = {**self.config(), "n_edges": int(len(edges)), **({"knn_recall": recall} if recall else {})}
        return Ladder(method=self.method, units=units, levels=levels, meta=meta,
                      arrays={"edges": edges, "edge_sim": edge_sim})

    def build(self, documents: Sequence[Document], show_progress: bool = False) -> Ladder:
        """Nodes, graph and hop levels for ``documents``."""
        self.timings, self._node_embeddings = {}, None
        t0 = time.perf_counter()
        units = self.nodes(documents, show_progress)
        self.timings["nodes"] = time.perf_counter() - t0
        self.show_progress = show_progress
        sim, ids = self.knn(units.text)
        return self.ladder_from_knn(units, sim, ids, self._node_embeddings)
