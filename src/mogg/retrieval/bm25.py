"""Batched BM25 (Okapi, rank-bm25 compatible) as one sparse matrix product per query batch.

Scores equal ``rank_bm25.BM25Okapi.get_scores`` on the same tokens (float32 tolerance): same idf,
same epsilon floor for negative idf (``epsilon * mean idf`` over the vocabulary), each query token
occurrence counted once. The index is a term x doc weight matrix ``W`` [V, N]; a query batch is a
count matrix ``Q`` [B, V]; scores are ``Q @ W`` [B, N] (scipy on CPU, torch sparse on GPU).
"""

from __future__ import annotations

import json
import logging
import warnings
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from mogg.core.text import encode_texts, tokenize
from mogg.retrieval.base import check_runtime_kwargs, check_saved_config, empty_topk, topk_rows, trivial_topk

logger = logging.getLogger(__name__)

__all__ = ["BM25Retriever", "bm25_idf", "merge_term_counts"]

WEIGHTS_FILE = "bm25_weights.npz"
VOCAB_FILE = "bm25_vocab.json"
PARAMS_FILE = "bm25_params.json"
STATS_FILE = "bm25_stats.npz"
_RUNTIME_KEYS = ("backend", "device", "batch_size")
# Upper bound on the dense [B, N] score block per batch (float32 elements, ~256 MiB).
_MAX_DENSE_ELEMENTS = 1 << 26


def bm25_idf(doc_freqs: np.ndarray, n_docs: int, epsilon: float) -> tuple[np.ndarray, float]:
    """rank-bm25 Okapi idf [V] (float64) and the mean raw idf; negative idf -> epsilon * mean.

    Pure function of global statistics, so shards can share one idf after a document-frequency pass.
    """
    df = np.asarray(doc_freqs, dtype=np.float64)
    idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    average_idf = float(idf.mean()) if idf.size else 0.0
    idf[idf < 0] = epsilon * average_idf
    return idf, average_idf


class BM25Retriever:
    """BM25 Okapi retriever; ``backend`` is ``"scipy"``, ``"numba"`` (a compiled top-k kernel over the
    postings, all cores), ``"torch"`` or ``"auto"`` (torch on a GPU, else numba, else scipy); all
    give the same ids and scores.

    ``config()`` holds only the parameters that define the index (k1, b, epsilon, stopwords);
    backend, device and batch_size are runtime options and do not change results.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25,
                 stopwords: bool = True, backend: str = "auto", device: str | None = None,
                 batch_size: int = 1024) -> None:
        if backend not in ("auto", "scipy", "torch", "numba"):
            raise ValueError(f"backend must be 'auto', 'scipy', 'numba' or 'torch', got {backend!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self.stopwords = bool(stopwords)
        self.backend, self.device, self.batch_size = backend, device, int(batch_size)
        self.vocab: list[str] = []
        self.term_index: dict[str, int] = {}
        self.doc_freqs = np.zeros(0, dtype=np.int64)  # [V] docs containing each term
        self.doc_len = np.zeros(0, dtype=np.int64)  # [N] tokens per doc
        self.n_docs = 0
        self.total_len = 0
        self.idf = np.zeros(0, dtype=np.float64)  # [V] after the epsilon floor
        self.average_idf = 0.0
        self.weights = sp.csr_matrix((0, 0), dtype=np.float32)  # W [V, N]
        self._torch_weights = None  # (device, torch CSR copy of W) cache
        self._ids_plus_one: tuple[list[str], dict[str, int]] | None = None  # (vocab, term -> id + 1) for query_matrix

    # ------------------------------------------------------------------ index
    def config(self) -> dict:
        """Index-defining constructor parameters (JSON-able)."""
        return {"k1": self.k1, "b": self.b, "epsilon": self.epsilon, "stopwords": self.stopwords}

    def fit(self, texts: Sequence[str]) -> Self:
        """Tokenize ``texts`` with :func:`mogg.core.text.tokenize` and build ``W``."""
        return self.fit_counts(*self.count_terms(texts))

    def count_terms(self, texts: Sequence[str]) -> tuple[list[str], sp.csr_matrix, np.ndarray]:
        """The map step: (vocab in first-occurrence order, tf [V, N] float64 CSR, doc_len [N]).

        Shards of a corpus count their own terms; :func:`merge_term_counts` joins them and
        :meth:`fit_counts` turns the global counts into the same index a single build makes.
        """
        term_ids, doc_len = self._encode_corpus(texts)
        docs = np.repeat(np.arange(len(doc_len), dtype=np.int64), doc_len)
        # tf [V, N]: duplicate (term, doc) pairs are summed by the COO -> CSR conversion.
        tf = sp.csr_matrix((np.ones(len(term_ids), dtype=np.float64), (term_ids, docs)),
                           shape=(len(self.vocab), len(doc_len)))
        tf.sum_duplicates()
        return list(self.vocab), tf, doc_len

    def fit_terms(self, terms) -> Self:
        """:meth:`fit` on a ladder level from its units' terms (:class:`mogg.ladders.unit_terms.LevelTerms`)."""
        return self.fit_counts(*terms.counts())

    def save_shard_terms(self, terms, directory: Path, prefix: str) -> None:
        """:meth:`save_shard` from a level's unit terms (no tokenizer pass over its chunk texts)."""
        self.save_shard((), directory, prefix, terms.counts())

    def fit_counts(self, vocab: list[str], tf: sp.csr_matrix, doc_len: np.ndarray) -> Self:
        """The reduce step: global document frequencies -> idf, avgdl -> weights ``W``."""
        self.vocab = list(vocab)
        self.term_index = {t: i for i, t in enumerate(self.vocab)}
        self._ids_plus_one = None
        self.n_docs = len(doc_len)
        self.doc_len = np.asarray(doc_len, dtype=np.int64)
        self.total_len = int(self.doc_len.sum())
        self.doc_freqs = np.diff(tf.indptr).astype(np.int64)
        self.idf, self.average_idf = bm25_idf(self.doc_freqs, self.n_docs, self.epsilon)
        self.weights = self._weights_from_tf(tf)
        self._torch_weights = None
        logger.info("BM25 index: %d docs, %d terms, %d postings", self.n_docs, len(self.vocab), tf.nnz)
        return self

    # ------------------------------------------------------------------ shards (map / reduce)
    def save_shard(self, texts: Sequence[str], directory: Path, prefix: str, counts=None) -> None:
        """Map step: term counts of one shard's ``texts`` (or the given ``counts``) as ``{prefix}_vocab.json / _tf.npz / _doclen.npy``."""
        vocab, tf, dl = counts or self.count_terms(texts)
        directory = Path(directory)
        (directory / f"{prefix}_vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        sp.save_npz(directory / f"{prefix}_tf.npz", tf.astype(np.float32), compressed=True)
        np.save(directory / f"{prefix}_doclen.npy", dl, allow_pickle=False)

    def fit_shards(self, directories: Sequence[Path], prefix: str) -> Self:
        """Reduce step: the index of all shards (in order), equal to :meth:`fit` on their texts joined."""
        parts = []
        for d in map(Path, directories):
            vocab = json.loads((d / f"{prefix}_vocab.json").read_text(encoding="utf-8"))
            tf = sp.load_npz(d / f"{prefix}_tf.npz").astype(np.float64)
            parts.append((vocab, tf, np.load(d / f"{prefix}_doclen.npy", allow_pickle=False)))
        return self.fit_counts(*merge_term_counts(parts))

    def _encode_corpus(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        # One pass over the texts: flat term ids [total tokens] and lengths [N], no token lists kept.
        vocab, ids, lengths = encode_texts(texts, self.stopwords)
        self.vocab, self.term_index = vocab, {t: i for i, t in enumerate(vocab)}
        return ids, lengths

    def _weights_from_tf(self, tf: sp.csr_matrix, avgdl: float | None = None) -> sp.csr_matrix:
        # w[t, d] = idf[t] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl[d] / avgdl)), in float64.
        # ``avgdl``: the corpus average when this index is one part of a larger one.
        w = tf.copy()
        if w.nnz:
            avgdl = self.total_len / self.n_docs if avgdl is None else avgdl
            rows = np.repeat(np.arange(w.shape[0]), np.diff(w.indptr))
            norm = self.k1 * (1.0 - self.b + self.b * self.doc_len[w.indices] / avgdl)
            w.data = self.idf[rows] * w.data * (self.k1 + 1.0) / (w.data + norm)
        return w.astype(np.float32)

    # ----------------------------------------------------------------- search
    def _resolved(self) -> tuple[str, str | None]:
        """(backend, torch device) actually used: 'auto' is torch with a CUDA device, else numba
        when it is installed, else scipy."""
        from mogg.retrieval import bm25_kernel

        if self.backend in ("scipy", "numba"):
            return self.backend, None
        try:
            import torch
        except ImportError:
            if self.backend == "torch":
                raise
            return ("numba" if bm25_kernel.available() else "scipy"), None
        cuda = torch.cuda.is_available()
        if self.backend == "auto" and not cuda and self.device in (None, "cpu"):
            return ("numba" if bm25_kernel.available() else "scipy"), None
        return "torch", self.device or ("cuda" if cuda else "cpu")

    def query_matrix(self, queries: Sequence[str]) -> sp.csr_matrix:
        """Query term counts ``Q`` [B, V] (float32, sorted indices); terms outside the vocabulary are dropped."""
        # Hot path at thousands of queries/s: tokens map to ids through C-level map/filter. Stop
        # words need no filter here: the index was built without them, so they are outside the
        # vocabulary like any unknown term (the same ids as tokenize(q, stopwords) + lookup).
        cache = self._ids_plus_one
        if cache is None or cache[0] is not self.vocab or len(cache[1]) != len(self.vocab):
            # term -> id + 1: 0 is falsy, so filter(None) drops the misses
            cache = self._ids_plus_one = (self.vocab, {t: i + 1 for i, t in enumerate(self.vocab)})
        get = cache[1].get
        ids, lengths = array("q"), array("q")
        for q in queries:
            before = len(ids)
            ids.extend(filter(None, map(get, tokenize(q))))
            lengths.append(len(ids) - before)
        n, v = len(queries), len(self.vocab)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.frombuffer(lengths, dtype=np.int64))
        # CSR straight from the sorted unique (row, term) keys: counts are the duplicates
        keys, counts = np.unique(rows * v + (np.frombuffer(ids, dtype=np.int64) - 1), return_counts=True)
        indptr = np.searchsorted(keys, np.arange(n + 1, dtype=np.int64) * v)
        return sp.csr_matrix((counts.astype(np.float32), keys % v, indptr), shape=(n, v))

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ``(scores float32 [Q, k], ids int64 [Q, k])``, as in :mod:`.base`."""
        queries = list(queries)
        if (trivial := trivial_topk(self.n_docs, len(queries), k)) is not None:
            return trivial
        # The numba kernel keeps no [b, N] score block, so its batches are only bounded by batch_size
        # (at 1M docs the dense-block bound meant 67 queries per call, and per-call buffers dominated).
        step = self.batch_size
        if self._resolved()[0] != "numba":
            step = max(1, min(self.batch_size, _MAX_DENSE_ELEMENTS // self.n_docs))
        out_s, out_i = [], []
        for start in range(0, len(queries), step):  # tokenize per batch: no [Q, V] matrix of all queries
            s, i = self.search_matrix(self.query_matrix(queries[start:start + step]), k)
            out_s.append(s)
            out_i.append(i)
        return np.concatenate(out_s), np.concatenate(out_i)

    def search_matrix(self, qmat: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` for a prepared query term-count matrix [B, V] over this index's vocabulary."""
        if qmat.shape[1] != len(self.vocab):
            raise ValueError(f"query matrix has {qmat.shape[1]} terms, the index {len(self.vocab)}")
        if self.n_docs == 0 or qmat.shape[0] == 0 or k == 0:
            return empty_topk(qmat.shape[0], k)
        backend, device = self._resolved()
        if backend == "numba":  # no dense score block: all queries at once, top-k in the kernel
            from mogg.retrieval.bm25_kernel import bm25_topk

            return bm25_topk(qmat, self._kernel_weights(), k)
        step = max(1, min(self.batch_size, _MAX_DENSE_ELEMENTS // self.n_docs))
        out_s, out_i = [], []
        for start in range(0, qmat.shape[0], step):
            qmat_b = qmat[start:start + step]
            if backend == "scipy":
                dense = (qmat_b @ self.weights).toarray()  # [b, N] float32
            else:
                dense = self._torch_scores(qmat_b, device)
            s, i = topk_rows(dense, k)
            out_s.append(s)
            out_i.append(i)
        return np.concatenate(out_s), np.concatenate(out_i)

    def _kernel_weights(self) -> sp.csr_matrix:
        """``W`` as the kernels take it: CSR with sorted indices (int32 or int64, as stored)."""
        if not self.weights.has_sorted_indices:
            self.weights.sort_indices()
        return self.weights

    def _torch_scores(self, qmat: sp.csr_matrix, device: str):
        import torch

        # Cached per requested device string ("cuda" vs the tensor's "cuda:0" would never match).
        if self._torch_weights is None or self._torch_weights[0] != device:
            self._torch_weights = (device, _to_torch_csr(self.weights, device))
        if qmat.nnz == 0 or self.weights.nnz == 0:
            return torch.zeros((qmat.shape[0], self.n_docs), dtype=torch.float32, device=device)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            prod = torch.sparse.mm(_to_torch_csr(qmat, device), self._torch_weights[1])  # [b, N]
        # Scatter the CSR entries ourselves: CSR to_dense() is several times slower on CPU.
        crow, cols = prod.crow_indices(), prod.col_indices()
        rows = torch.repeat_interleave(torch.arange(prod.shape[0], device=crow.device), crow.diff())
        dense = torch.zeros(prod.shape, dtype=torch.float32, device=crow.device)
        dense[rows, cols] = prod.values()
        return dense  # [b, N]

    # ------------------------------------------------------------ persistence
    def save(self, directory: Path) -> list[str]:
        """Write weights (npz), vocabulary (json), statistics (npz) and parameters (json)."""
        directory = Path(directory)
        sp.save_npz(directory / WEIGHTS_FILE, self.weights, compressed=False)
        (directory / VOCAB_FILE).write_text(json.dumps(self.vocab, ensure_ascii=False),
                                            encoding="utf-8")
        np.savez(directory / STATS_FILE, doc_freqs=self.doc_freqs, doc_len=self.doc_len,
                 idf=self.idf)
        params = {"config": self.config(), "n_docs": self.n_docs, "total_len": self.total_len,
                  "average_idf": self.average_idf, "format_version": 1}
        (directory / PARAMS_FILE).write_text(json.dumps(params, indent=2), encoding="utf-8")
        return [WEIGHTS_FILE, VOCAB_FILE, STATS_FILE, PARAMS_FILE]

    def restore(self, directory: Path) -> Self:
        """Load a saved index into this instance, keeping its runtime options (backend, device,
        batch_size); its index-defining config must equal the saved one."""
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text(encoding="utf-8"))
        check_saved_config(type(self).__name__, directory, params["config"], self.config())
        self.vocab = json.loads((directory / VOCAB_FILE).read_text(encoding="utf-8"))
        self.term_index = {t: i for i, t in enumerate(self.vocab)}
        self._ids_plus_one = None
        with np.load(directory / STATS_FILE, allow_pickle=False) as stats:
            self.doc_freqs, self.doc_len = stats["doc_freqs"], stats["doc_len"]
            self.idf = stats["idf"]
        self.weights = sp.load_npz(directory / WEIGHTS_FILE).tocsr().astype(np.float32)
        self._torch_weights = None
        self.n_docs, self.total_len = int(params["n_docs"]), int(params["total_len"])
        self.average_idf = float(params["average_idf"])
        if self.weights.shape != (len(self.vocab), self.n_docs):
            raise ValueError(f"{directory}: weights shape {self.weights.shape} does not match "
                             f"vocab size {len(self.vocab)} x n_docs {self.n_docs}")
        return self

    @classmethod
    def load(cls, directory: Path, **runtime_kwargs: Any) -> Self:
        """A new retriever from a saved index; only ``backend``, ``device`` and ``batch_size`` may be given."""
        check_runtime_kwargs("BM25Retriever", runtime_kwargs, _RUNTIME_KEYS)
        params = json.loads((Path(directory) / PARAMS_FILE).read_text(encoding="utf-8"))
        return cls(**params["config"], **runtime_kwargs).restore(directory)


def _to_torch_csr(mat: sp.csr_matrix, device: str):
    """scipy CSR -> torch sparse CSR tensor on ``device`` (int64 indices, float32 values)."""
    import torch

    with warnings.catch_warnings():
        # torch flags CSR as beta on every construction; the ops used here are stable.
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(
            torch.from_numpy(mat.indptr.astype(np.int64)),
            torch.from_numpy(mat.indices.astype(np.int64)),
            torch.from_numpy(mat.data.astype(np.float32, copy=False)),
            size=mat.shape, dtype=torch.float32, device=device, check_invariants=False)


def merge_term_counts(parts: Sequence[tuple[list[str], sp.csr_matrix, np.ndarray]]):
    """Join shard term counts (in corpus order) into global ones.

    The global vocabulary keeps first-occurrence order across shards, which is the order a single
    streaming build would have made, so the merged index equals it term for term.
    """
    index: dict[str, int] = {}
    vocab: list[str] = []
    blocks, lens = [], []
    for v, tf, dl in parts:
        for t in v:
            if t not in index:
                index[t] = len(vocab)
                vocab.append(t)
        rows = np.fromiter((index[t] for t in v), dtype=np.int64, count=len(v))
        coo = tf.tocoo()
        blocks.append((rows[coo.row], coo.col, coo.data, tf.shape[1]))
        lens.append(np.asarray(dl, dtype=np.int64))
    offsets = np.cumsum([0] + [b[3] for b in blocks])
    r = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros(0, np.int64)
    c = np.concatenate([b[1] + o for b, o in zip(blocks, offsets)]) if blocks else np.zeros(0, np.int64)
    d = np.concatenate([b[2] for b in blocks]) if blocks else np.zeros(0)
    tf = sp.csr_matrix((d, (r, c)), shape=(len(vocab), int(offsets[-1])))
    tf.sum_duplicates()
    return vocab, tf, np.concatenate(lens) if lens else np.zeros(0, np.int64)
