"""BM25 over index parts that share the corpus statistics: a merge that never holds all postings.

:class:`BM25Retriever.fit_shards` joins every shard's postings into one weight matrix: exact, but
the merge needs RAM for all of them (~440 GB for PubMed at five levels, docs/cluster.md, scale plan).
BM25's score of a document depends only on its own term counts and on corpus-wide statistics
(document frequencies -> idf, N, average length), so :class:`ShardedBM25` merges just those
(vocabulary x 8 bytes) and keeps one weight matrix per shard, computed with the global statistics.
A search runs every part with its own (local) vocabulary and merges the per-part top-k by
(score, global id). Local vocabularies are ordered by global term id, so each score is summed in
the same order as in the single index: the top-k ids *and* scores equal a single build's bit for
bit. Only one part's weights are in memory at a time (parts are read back from the saved
artifact, or recomputed from the shard counts before it is saved).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from mogg.retrieval.base import check_runtime_kwargs, check_saved_config, empty_topk, merge_topk, trivial_topk
from mogg.retrieval.bm25 import BM25Retriever, bm25_idf

logger = logging.getLogger(__name__)

__all__ = ["ShardedBM25"]

PARAMS_FILE = "sharded_bm25.json"
STATS_FILE = "sharded_bm25_stats.npz"
_RUNTIME_KEYS = ("backend", "device", "batch_size")


class ShardedBM25:
    """BM25 Okapi (rank-bm25 compatible, as :class:`BM25Retriever`) over parts with global statistics.

    Args: as :class:`BM25Retriever`; ``part_docs`` splits a single-machine :meth:`fit` into parts
    of at most that many documents (the sharded path takes one part per shard).
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25, stopwords: bool = True,
                 backend: str = "auto", device: str | None = None, batch_size: int = 1024,
                 part_docs: int = 1_000_000) -> None:
        if part_docs < 1:
            raise ValueError(f"part_docs must be >= 1, got {part_docs}")
        self._proto = BM25Retriever(k1, b, epsilon, stopwords, backend, device, batch_size)
        self.part_docs = int(part_docs)
        self.vocab: list[str] = []
        self.idf = np.zeros(0, dtype=np.float64)  # [V] global, after the epsilon floor
        self.n_docs, self.total_len = 0, 0
        self.offsets = np.zeros(1, dtype=np.int64)  # [P + 1] first global doc id of each part
        self._sources: list[Any] = []  # per part: in-memory counts, shard files, or saved files
        self._term_index: dict[str, int] | None = None  # global term -> id, built once when needed

    def config(self) -> dict:
        """Index-defining parameters: BM25's own (parts do not change any score)."""
        return self._proto.config()

    @property
    def n_parts(self) -> int:
        return len(self._sources)

    # ------------------------------------------------------------------ build
    def _fit_parts(self, parts: Sequence[tuple[list[str], sp.csr_matrix, np.ndarray]], sources: list) -> Self:
        """Global statistics from per-part (vocab, tf [V_p, N_p], doc_len) in corpus order."""
        index: dict[str, int] = {}
        vocab: list[str] = []
        doc_freqs = np.zeros(0, dtype=np.float64)  # [V] grows with the vocabulary
        lens = []
        for v, tf, dl in parts:
            for t in v:
                if t not in index:
                    index[t] = len(vocab)
                    vocab.append(t)
            g = np.fromiter((index[t] for t in v), dtype=np.int64, count=len(v))  # unique per part
            if len(vocab) > len(doc_freqs):
                doc_freqs = np.concatenate([doc_freqs, np.zeros(2 * len(vocab) - len(doc_freqs))])
            doc_freqs[g] += np.diff(tf.indptr)
            lens.append(len(dl))
            self.total_len += int(np.asarray(dl).sum())
        self.vocab, self.n_docs = vocab, int(sum(lens))
        self._term_index = index
        doc_freqs = doc_freqs[: len(vocab)]
        self.idf, _ = bm25_idf(doc_freqs, self.n_docs, self._proto.epsilon)
        self.offsets = np.cumsum([0, *lens]).astype(np.int64)
        self._sources = sources
        logger.info("sharded BM25: %d docs in %d parts, %d terms", self.n_docs, len(lens), len(vocab))
        return self

    def fit(self, texts: Sequence[str]) -> Self:
        """Index ``texts`` as parts of ``part_docs`` documents (same scores as one index)."""
        texts = list(texts)
        parts = [self._proto.count_terms(texts[i : i + self.part_docs]) for i in range(0, len(texts), self.part_docs)]
        self.total_len = 0
        return self._fit_parts(parts, [("counts", p) for p in parts])

    def save_shard(self, texts: Sequence[str], directory: Path, prefix: str) -> None:
        """Map step: the shard's term counts (the same files as :meth:`BM25Retriever.save_shard`)."""
        self._proto.save_shard(texts, directory, prefix)

    def save_shard_terms(self, terms, directory: Path, prefix: str) -> None:
        """:meth:`save_shard` from a level's unit terms (:mod:`mogg.ladders.unit_terms`)."""
        self._proto.save_shard_terms(terms, directory, prefix)

    def fit_shards(self, directories: Sequence[Path], prefix: str) -> Self:
        """Reduce step over shard files, one shard's counts in memory at a time."""
        self.total_len = 0
        sources = [("shard", Path(d), prefix) for d in directories]

        def counts():
            for _, d, p in sources:
                yield _read_counts(d, p)

        return self._fit_parts(counts(), sources)

    # ------------------------------------------------------------------ parts
    def _global_index(self) -> dict[str, int]:
        if self._term_index is None:
            self._term_index = {t: i for i, t in enumerate(self.vocab)}
        return self._term_index

    def _part(self, p: int) -> tuple[BM25Retriever, np.ndarray]:
        """Part ``p``: a BM25 index over its documents with the global idf and average length, and
        the global ids of its terms (ascending: local term i is global term ``ids[i]``)."""
        src = self._sources[p]
        if src[0] == "saved":
            d = src[1] / f"part{p}"
            return BM25Retriever.load(d, **self._runtime()), np.load(d / "global_ids.npy", allow_pickle=False)
        vocab, tf, dl = src[1] if src[0] == "counts" else _read_counts(src[1], src[2])
        index = self._global_index()
        g = np.fromiter((index[t] for t in vocab), dtype=np.int64, count=len(vocab))
        order = np.argsort(g, kind="stable")  # local terms in global order: same summation order
        r = BM25Retriever(**self.config(), **self._runtime())
        r.vocab = [vocab[i] for i in order]
        r.term_index = {t: i for i, t in enumerate(r.vocab)}
        r.doc_len = np.asarray(dl, dtype=np.int64)
        r.n_docs, r.total_len = len(r.doc_len), int(r.doc_len.sum())
        r.doc_freqs = np.diff(tf.indptr)[order].astype(np.int64)  # local counts (informational)
        r.idf = self.idf[g[order]]
        r.weights = r._weights_from_tf(tf[order].tocsr(), avgdl=self.total_len / max(self.n_docs, 1))
        return r, g[order]

    def _runtime(self) -> dict:
        return {"backend": self._proto.backend, "device": self._proto.device, "batch_size": self._proto.batch_size}

    # ------------------------------------------------------------------ search
    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ``(scores float32 [Q, k], ids int64 [Q, k])`` over all parts (global ids)."""
        queries = list(queries)
        if (trivial := trivial_topk(self.n_docs, len(queries), k)) is not None:
            return trivial
        best_s, best_i = empty_topk(len(queries), k)
        # Tokenized once against the global vocabulary; each part takes the columns of its terms.
        proto = self._proto  # its tokenizer settings, pointed at the global vocabulary for this call
        proto.vocab, proto.term_index = self.vocab, self._global_index()
        try:
            q_all = proto.query_matrix(queries)  # [Q, V] global term counts, indices sorted per row
        finally:
            proto.vocab, proto.term_index = [], {}
        for p in range(self.n_parts):  # one part's weights in memory at a time
            part, g = self._part(p)
            s, i = part.search_matrix(_restrict(q_all, g), k)
            i = np.where(i >= 0, i + self.offsets[p], -1)
            best_s, best_i = merge_topk(np.concatenate([best_s, s], 1), np.concatenate([best_i, i], 1), k)
        return best_s, best_i

    # ------------------------------------------------------------------ persistence
    def save(self, directory: Path) -> list[str]:
        """Global statistics plus one ``part{p}/`` BM25 index per part (written one at a time)."""
        directory = Path(directory)
        for p in range(self.n_parts):
            part, g = self._part(p)
            (directory / f"part{p}").mkdir()
            part.save(directory / f"part{p}")
            np.save(directory / f"part{p}" / "global_ids.npy", g, allow_pickle=False)
        np.savez(directory / STATS_FILE, idf=self.idf, offsets=self.offsets)
        (directory / "sharded_bm25_vocab.json").write_text(json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8")
        params = {"config": self.config(), "n_docs": self.n_docs, "total_len": self.total_len,
                  "n_parts": self.n_parts, "part_docs": self.part_docs, "format_version": 1}
        (directory / PARAMS_FILE).write_text(json.dumps(params, indent=2), encoding="utf-8")
        return [PARAMS_FILE, STATS_FILE]

    def restore(self, directory: Path) -> Self:
        """Load saved statistics into this instance (parts are read from disk when searched),
        keeping its runtime options; the BM25 config must equal the saved one."""
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text(encoding="utf-8"))
        check_saved_config(type(self).__name__, directory, params["config"], self.config())
        self.part_docs = int(params["part_docs"])
        self.vocab = json.loads((directory / "sharded_bm25_vocab.json").read_text(encoding="utf-8"))
        with np.load(directory / STATS_FILE, allow_pickle=False) as st:
            self.idf, self.offsets = st["idf"], st["offsets"]
        self.n_docs, self.total_len = int(params["n_docs"]), int(params["total_len"])
        self._sources = [("saved", directory)] * int(params["n_parts"])
        self._term_index = None
        if len(self.offsets) != self.n_parts + 1 or int(self.offsets[-1]) != self.n_docs:
            raise ValueError(f"{directory}: part offsets {self.offsets.tolist()} do not match {self.n_docs} documents")
        return self

    @classmethod
    def load(cls, directory: Path, **runtime_kwargs: Any) -> Self:
        """A new retriever from saved statistics; only runtime options may be given."""
        check_runtime_kwargs("ShardedBM25", runtime_kwargs, _RUNTIME_KEYS)
        params = json.loads((Path(directory) / PARAMS_FILE).read_text(encoding="utf-8"))
        return cls(**params["config"], part_docs=params["part_docs"], **runtime_kwargs).restore(directory)


def _read_counts(d: Path, prefix: str) -> tuple[list[str], sp.csr_matrix, np.ndarray]:
    vocab = json.loads((d / f"{prefix}_vocab.json").read_text(encoding="utf-8"))
    tf = sp.load_npz(d / f"{prefix}_tf.npz").astype(np.float64).tocsr()
    return vocab, tf, np.load(d / f"{prefix}_doclen.npy", allow_pickle=False)


def _restrict(q: sp.csr_matrix, terms: np.ndarray) -> sp.csr_matrix:
    """Columns ``terms`` (sorted global ids) of a query matrix [B, V] -> [B, len(terms)], order kept."""
    pos = np.searchsorted(terms, q.indices)
    hit = (pos < len(terms)) & (terms[np.minimum(pos, max(len(terms) - 1, 0))] == q.indices) if len(terms) else \
        np.zeros(q.nnz, dtype=bool)
    rows = np.repeat(np.arange(q.shape[0]), np.diff(q.indptr))
    return sp.csr_matrix((q.data[hit], (rows[hit], pos[hit])), shape=(q.shape[0], len(terms)), dtype=np.float32)
