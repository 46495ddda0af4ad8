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

from mogg.core.segments import segment_cumsum
from mogg.core.text import UNIT_RULE, count_tokens
from mogg.data.records import Document
from mogg.ladders.base import Ladder, Level, Units
from mogg.ladders.builder import LadderBuilder
from mogg.ladders.knn import bm25_knn, dense_knn, knn_recall
from mogg.ladders.mog import MoGLadderBuilder
from mogg.retrieval.bm25 import BM25Retriever
from mogg.retrieval.dense import DenseRetriever

log = logging.getLogger(__name__)

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
            "unit_rule": UNIT_RULE,  # its nodes are MoG's units (mogg.core.text.split_units): a new rule, a new ladder
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


__all__ = ["GraphLadderBuilder", "bm25_knn", "dense_knn", "knn_edges", "knn_recall", "adjacency", "hop_levels"]
