"""Dense retrieval by inner product of L2-normalized embeddings (cosine), faiss or torch.

Both backends return the contract of :mod:`mogg.retrieval.base`, including the ascending-id
tie-break: faiss is asked for k+1 hits and rows with a tie at the k-th place are re-ranked exactly.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, Self

import numpy as np

from mogg.retrieval.base import empty_topk, order_rows, topk_rows

logger = logging.getLogger(__name__)

__all__ = ["DenseRetriever", "Encoder", "l2_normalize"]

EMBEDDINGS_FILE = "dense_embeddings.npy"
PARAMS_FILE = "dense_params.json"
FAISS_FILE = "dense.faiss"
_RUNTIME_KEYS = ("backend", "batch_size", "device")


class Encoder(Protocol):
    """What a dense retriever needs from an encoder (e.g. :class:`mogg.encoders.HFEncoder`)."""

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray: ...

    def config(self) -> dict: ...


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalization to float32; all-zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, np.float32(1e-12))


class DenseRetriever:
    """Cosine-similarity retriever over ``encoder`` embeddings; backend ``"faiss"`` or ``"torch"``.

    ``config()`` holds the encoder's config only: backend, batch_size and device do not change
    the index.
    """

    def __init__(self, encoder: Encoder, backend: str = "faiss", batch_size: int = 1024,
                 device: str | None = None) -> None:
        if backend not in ("faiss", "torch"):
            raise ValueError(f"backend must be 'faiss' or 'torch', got {backend!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.encoder, self.backend = encoder, backend
        self.batch_size, self.device = int(batch_size), device
        self.embeddings = np.zeros((0, 0), dtype=np.float32)  # [N, d], rows L2-normalized
        self._index = None  # faiss.IndexFlatIP, or torch tensor [N, d] on device

    def config(self) -> dict:
        """Index-defining parameters (JSON-able)."""
        return {"encoder": self.encoder.config()}

    @property
    def n_docs(self) -> int:
        return int(self.embeddings.shape[0])

    def fit(self, texts: Sequence[str], show_progress: bool = False) -> Self:
        """Encode and index ``texts``; text ``i`` gets id ``i``."""
        return self.fit_embeddings(self.encoder.encode(list(texts), show_progress=show_progress))

    def fit_embeddings(self, embeddings: np.ndarray) -> Self:
        """Index precomputed embeddings [N, d] (normalized here)."""
        emb = np.asarray(embeddings)
        if emb.ndim != 2:
            raise ValueError(f"embeddings must be [N, d], got shape {emb.shape}")
        self.embeddings = np.ascontiguousarray(l2_normalize(emb))
        self._index = None
        logger.info("Dense index: %d x %d (%s)", *self.embeddings.shape, self.backend)
        return self

    # ------------------------------------------------------------------ shards (map / reduce)
    def save_shard(self, texts: Sequence[str], directory: Path, prefix: str) -> None:
        """Map step: the shard's normalized embeddings as ``{prefix}_emb.npy`` (the costly, GPU part)."""
        emb = l2_normalize(self.encoder.encode(list(texts), show_progress=True))
        np.save(Path(directory) / f"{prefix}_emb.npy", emb, allow_pickle=False)

    def fit_shards(self, directories: Sequence[Path], prefix: str) -> Self:
        """Reduce step: one index over all shards (in order) through faiss; equal to a single build.

        The shard files are memory-mapped and added block by block (faiss ``add`` on the flat
        index; the torch backend stacks them), so shard ids ``0..n_s-1`` become ``offset + i``.
        """
        blocks = [np.load(Path(d) / f"{prefix}_emb.npy", mmap_mode="r", allow_pickle=False) for d in directories]
        if not blocks:
            raise ValueError("no shards to merge")
        dims = {b.shape[1] for b in blocks}
        if len(dims) != 1:
            raise ValueError(f"shard embeddings differ in dimension: {sorted(dims)}")
        n = sum(len(b) for b in blocks)
        self.embeddings = np.empty((n, dims.pop()), dtype=np.float32)
        self._index = None
        if self.backend == "faiss":
            import faiss

            self._index = faiss.IndexFlatIP(self.embeddings.shape[1])
        at = 0
        for b in blocks:
            self.embeddings[at : at + len(b)] = b
            if self._index is not None:
                self._index.add(self.embeddings[at : at + len(b)])
            at += len(b)
        logger.info("Dense index merged from %d shards: %d x %d", len(blocks), *self.embeddings.shape)
        return self

    def _torch_device(self) -> str:
        import torch

        return self.device or ("cuda" if torch.cuda.is_available() else "cpu")

    def _get_index(self):
        if self._index is None:
            if self.backend == "faiss":
                import faiss

                self._index = faiss.IndexFlatIP(self.embeddings.shape[1])
                self._index.add(self.embeddings)
            else:
                import torch

                self._index = torch.from_numpy(self.embeddings).to(self._torch_device())
        return self._index

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ``(scores float32 [Q, k], ids int64 [Q, k])`` by cosine similarity."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        queries = list(queries)
        if self.n_docs == 0 or not queries or k == 0:
            return empty_topk(len(queries), k)
        return self.search_embeddings(self.encoder.encode(queries), k)

    def search_embeddings(self, query_emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Like :meth:`search` for precomputed query embeddings [Q, d] (normalized here)."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        q = np.ascontiguousarray(l2_normalize(query_emb))
        if self.n_docs == 0 or len(q) == 0 or k == 0:
            return empty_topk(len(q), k)
        if q.shape[1] != self.embeddings.shape[1]:
            raise ValueError(f"query dim {q.shape[1]} != index dim {self.embeddings.shape[1]}")
        out_s, out_i = [], []
        for start in range(0, len(q), self.batch_size):
            batch = q[start:start + self.batch_size]
            topk = self._faiss_topk if self.backend == "faiss" else self._torch_topk
            s, i = topk(batch, k)
            out_s.append(s)
            out_i.append(i)
        return np.concatenate(out_s), np.concatenate(out_i)

    def _torch_topk(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        index = self._get_index()
        scores = torch.from_numpy(q).to(index.device) @ index.T  # [b, N]
        return topk_rows(scores, k)

    def _exact(self, q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Scores of candidates ``ids`` [b, m] for queries [b, d], the same bits whatever the batch.

        BLAS kernels (faiss for >= 20 queries, numpy matmul) round differently with the batch
        shape; a per-pair dot product does not, so a sharded or re-batched run scores like a
        single one.
        """
        s = np.einsum("bd,bmd->bm", q, self.embeddings[np.maximum(ids, 0)])
        return np.where(ids >= 0, s, -np.inf).astype(np.float32)

    def _faiss_topk(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        m = min(k, self.n_docs)
        extra = min(m + 1, self.n_docs)  # one more hit reveals a (near) tie at the k-th place
        _, ids = self._get_index().search(q, extra)  # [b, extra] candidates by faiss's scores
        vals = self._exact(q, ids)
        if extra == m:  # every document was returned: the set is exact
            return order_rows(vals, ids, k)
        # faiss chose the set with its own rounding: where the m-th and the next candidate are within
        # a few ulps, which document makes the cut is decided on exact scores over all documents.
        top_vals, top_ids = order_rows(vals[:, :m], ids[:, :m], k)
        tied = np.flatnonzero(top_vals[:, m - 1] <= vals[:, m] + 1e-5)
        if tied.size:
            full = np.einsum("bd,nd->bn", q[tied], self.embeddings).astype(np.float32)  # [t, N]
            top_vals[tied], top_ids[tied] = topk_rows(full, k)
        return top_vals, top_ids

    def save(self, directory: Path) -> list[str]:
        """Write embeddings (npy), parameters (json) and, for faiss, the index file."""
        directory = Path(directory)
        np.save(directory / EMBEDDINGS_FILE, self.embeddings, allow_pickle=False)
        params = {"config": self.config(), "n_docs": self.n_docs,
                  "dim": int(self.embeddings.shape[1]), "backend": self.backend,
                  "format_version": 1}
        (directory / PARAMS_FILE).write_text(json.dumps(params, indent=2), encoding="utf-8")
        written = [EMBEDDINGS_FILE, PARAMS_FILE]
        if self.backend == "faiss":
            import faiss

            faiss.write_index(self._get_index(), str(directory / FAISS_FILE))
            written.append(FAISS_FILE)
        return written

    @classmethod
    def load(cls, directory: Path, encoder: Encoder | None = None, **runtime_kwargs: Any) -> Self:
        """Load a saved index; ``encoder`` must match the saved encoder config."""
        if encoder is None:
            raise TypeError("DenseRetriever.load needs the query encoder: "
                            "load(directory, encoder=...)")
        unknown = set(runtime_kwargs) - set(_RUNTIME_KEYS)
        if unknown:
            raise TypeError(f"DenseRetriever.load: not runtime options: {sorted(unknown)}")
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text(encoding="utf-8"))
        saved, given = params["config"]["encoder"], encoder.config()
        if saved != given:
            diff = sorted(key for key in set(saved) | set(given)
                          if saved.get(key) != given.get(key))
            raise ValueError(f"{directory}: encoder config differs from the saved one in {diff}: "
                             f"saved {saved}, given {given}")
        kwargs = {"backend": params.get("backend", "faiss"), **runtime_kwargs}
        self = cls(encoder, **kwargs)
        emb = np.load(directory / EMBEDDINGS_FILE, allow_pickle=False)
        self.embeddings = np.ascontiguousarray(emb, dtype=np.float32)
        if self.embeddings.shape != (params["n_docs"], params["dim"]):
            raise ValueError(f"{directory}: embeddings shape {self.embeddings.shape} does not "
                             f"match the saved parameters ({params['n_docs']} x {params['dim']})")
        if self.backend == "faiss" and (directory / FAISS_FILE).is_file():
            import faiss

            self._index = faiss.read_index(str(directory / FAISS_FILE))
            if self._index.ntotal != self.n_docs:
                raise ValueError(f"{directory}: {FAISS_FILE} holds {self._index.ntotal} vectors, "
                                 f"embeddings {self.n_docs}")
        return self
