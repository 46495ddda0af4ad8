"""Dense retrieval by inner product of L2-normalized embeddings (cosine), faiss or torch.

Both backends return the contract of :mod:`mogg.retrieval.base`, including the ascending-id
tie-break: faiss is asked for k+1 hits and rows with a tie at the k-th place are re-ranked exactly.

``index`` picks the faiss index by its factory string: ``"Flat"`` (exact, the default) or an
approximate one for corpora whose embeddings do not fit in memory, e.g. ``"IVF65536,PQ64"`` (64
bytes per vector: PubMed's 23.9M snippets in ~1.5 GB). Approximate indexes are trained on a seeded
sample, keep the embeddings memory-mapped on disk, and re-score the candidates they return with
exact cosines, so scores are exact and only recall is approximate (``nprobe`` trades it for speed).

Length (over ~350 lines): one retriever's state: encoding, the torch and faiss (flat, IVF, HNSW)
backends, GPU batching and save/load act on the same arrays and parameters.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, Self

import numpy as np

from mogg.core.vectors import l2_normalize
from mogg.retrieval.base import (
    check_runtime_kwargs,
    check_saved_config,
    merge_topk,
    order_rows,
    topk_rows,
    trivial_topk,
)

logger = logging.getLogger(__name__)

__all__ = ["DenseRetriever", "Encoder", "l2_normalize"]

EMBEDDINGS_FILE = "dense_embeddings.npy"
PARAMS_FILE = "dense_params.json"
FAISS_FILE = "dense.faiss"
_RUNTIME_KEYS = ("backend", "batch_size", "device", "nprobe", "ef_search")


class Encoder(Protocol):
    """What a dense retriever needs from an encoder (e.g. :class:`mogg.encoders.HFEncoder`)."""

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray: ...

    def config(self) -> dict: ...



class _Rows:
    """Row blocks (e.g. memory-mapped shard files) seen as one [N, d] matrix for row gathers.

    Lets a sharded merge build an approximate index without copying every embedding into memory.
    """

    def __init__(self, blocks: Sequence[np.ndarray]) -> None:
        self.blocks = list(blocks)
        self.offsets = np.cumsum([0] + [len(b) for b in self.blocks]).astype(np.int64)
        self.shape = (int(self.offsets[-1]), int(self.blocks[0].shape[1]))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, ids) -> np.ndarray:
        """Rows ``ids`` (int array of any shape) -> float32 [*ids.shape, d]."""
        ids = np.asarray(ids, dtype=np.int64)
        flat = ids.ravel()
        out = np.empty((len(flat), self.shape[1]), dtype=np.float32)
        which = np.searchsorted(self.offsets, flat, side="right") - 1
        for b in np.unique(which):  # a loop over shards, not over rows
            sel = which == b
            out[sel] = self.blocks[b][flat[sel] - self.offsets[b]]
        return out.reshape(*ids.shape, self.shape[1])


def _row_blocks(x, rows: int = 1 << 16):
    """Contiguous float32 blocks of at most ``rows`` rows of an array or :class:`_Rows`, in order."""
    for b in (x.blocks if isinstance(x, _Rows) else [x]):
        for start in range(0, len(b), rows):
            yield np.ascontiguousarray(b[start : start + rows], dtype=np.float32)


class DenseRetriever:
    """Cosine-similarity retriever over ``encoder`` embeddings (queries through ``query_encoder`` when
    given: a two-encoder model such as MedCPT); backend ``"faiss"`` or ``"torch"``.

    ``config()`` holds the encoder's config only: backend, batch_size and device do not change
    the index.
    """

    def __init__(self, encoder: Encoder, backend: str = "faiss", batch_size: int = 1024,
                 device: str | None = None, index: str = "Flat", nprobe: int = 32,
                 train_size: int = 262_144, seed: int = 0, query_encoder: Encoder | None = None,
                 ef_search: int = 128) -> None:
        if backend not in ("faiss", "torch"):
            raise ValueError(f"backend must be 'faiss' or 'torch', got {backend!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if index != "Flat" and backend != "faiss":
            raise ValueError(f"index={index!r} is a faiss index: it needs backend='faiss'")
        if nprobe < 1 or train_size < 1 or ef_search < 1:
            raise ValueError("nprobe, ef_search and train_size must be >= 1")
        # two-encoder retrieval (MedCPT: an article encoder for the texts, a query encoder for the
        # questions); without ``query_encoder`` queries use ``encoder``
        self.encoder, self.query_encoder, self.backend = encoder, query_encoder, backend
        self.batch_size, self.device = int(batch_size), device
        self.index, self.nprobe, self.train_size, self.seed = str(index), int(nprobe), int(train_size), int(seed)
        self.ef_search = int(ef_search)  # HNSW candidate list per query (faiss' default, 16, loses neighbours)
        self.embeddings = np.zeros((0, 0), dtype=np.float32)  # [N, d], rows L2-normalized
        self._index = None  # faiss index, or torch tensor [N, d] on device

    @property
    def exact(self) -> bool:
        return self.index == "Flat"

    def config(self) -> dict:
        """Index-defining parameters (JSON-able); an approximate index adds its training setup."""
        cfg = {"encoder": self.encoder.config()}
        if self.query_encoder is not None:
            cfg["query_encoder"] = self.query_encoder.config()
        if not self.exact:
            cfg.update(index=self.index, train_size=self.train_size, seed=self.seed)
        return cfg

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

        Exact (``Flat``): the shard files are stacked in order, so shard ids ``0..n_s-1`` become
        ``offset + i``; an approximate index is trained and filled from the memory-mapped files.
        """
        blocks = [np.load(Path(d) / f"{prefix}_emb.npy", mmap_mode="r", allow_pickle=False) for d in directories]
        if not blocks:
            raise ValueError("no shards to merge")
        dims = {b.shape[1] for b in blocks}
        if len(dims) != 1:
            raise ValueError(f"shard embeddings differ in dimension: {sorted(dims)}")
        if not self.exact:  # stay on disk: the index is trained and filled from the shard files
            self.embeddings, self._index = _Rows(blocks), None
            logger.info("Dense shards: %d x %d in %d memory-mapped blocks", *self.embeddings.shape, len(blocks))
            return self
        self.embeddings = np.concatenate(blocks).astype(np.float32, copy=False)  # [N, d], already normalized
        self._index = None  # built on first search, as after fit
        logger.info("Dense index merged from %d shards: %d x %d", len(blocks), *self.embeddings.shape)
        return self

    def _torch_device(self) -> str:
        import torch

        return self.device or ("cuda" if torch.cuda.is_available() else "cpu")

    def _faiss_gpu(self) -> bool:
        """Move faiss indexes to the GPU? When this faiss build has GPU support and a GPU is
        visible, unless ``device`` names the CPU; ``device="cuda..."`` without it is an error."""
        import faiss

        has = hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
        want = str(self.device or "auto")
        if want.startswith("cuda") and not has:
            raise RuntimeError(f"device={self.device!r} but this faiss has no GPU support or sees no GPU "
                               "(install faiss-gpu, or use backend=torch for CUDA matmul)")
        return has and not want.startswith("cpu")

    def _to_device(self, idx):
        if not self._faiss_gpu():
            return idx
        import faiss

        gpu = int(str(self.device).split(":")[1]) if str(self.device).startswith("cuda:") else 0
        self._gpu_resources = getattr(self, "_gpu_resources", None) or faiss.StandardGpuResources()
        logger.info("faiss index moved to GPU %d", gpu)
        return faiss.index_cpu_to_gpu(self._gpu_resources, gpu, idx)

    def _cpu_index(self):
        """The index as a CPU index (what faiss can write)."""
        import faiss

        idx = self._get_index()
        return faiss.index_gpu_to_cpu(idx) if hasattr(faiss, "index_gpu_to_cpu") and self._faiss_gpu() else idx

    def _build_ann(self):
        """Train the factory index on a seeded sample of the embeddings and add them block by block."""
        import faiss

        n, d = self.embeddings.shape
        idx = faiss.index_factory(d, self.index, faiss.METRIC_INNER_PRODUCT)
        sample = np.sort(np.random.default_rng(self.seed).choice(n, size=min(self.train_size, n), replace=False))
        try:
            idx.train(np.ascontiguousarray(self.embeddings[sample], dtype=np.float32))  # [S, d]
        except RuntimeError as exc:
            raise ValueError(f"cannot train faiss index {self.index!r} on {len(sample)} vectors "
                             f"(too few for its lists or codebooks?): {exc}") from None
        for block in _row_blocks(self.embeddings):
            idx.add(block)
        logger.info("faiss %s index: %d vectors (trained on %d)", self.index, idx.ntotal, len(sample))
        return idx

    def _set_search_params(self) -> None:
        """Search-time knobs of an approximate index: IVF ``nprobe``, HNSW ``efSearch``."""
        import faiss

        try:
            faiss.extract_index_ivf(self._index).nprobe = self.nprobe
        except RuntimeError:
            pass  # not an IVF index: nothing to probe
        hnsw = getattr(faiss.downcast_index(self._index), "hnsw", None)
        if hnsw is not None:
            hnsw.efSearch = self.ef_search

    def build_index(self) -> Self:
        """Build (and for IVF, train) the search index now instead of at the first search: callers
        that time indexing and searching apart, or want a trained index before forking, call it."""
        self._get_index()
        return self

    def _get_index(self):
        if self._index is None:
            if self.backend == "faiss" and not self.exact:
                self._index = self._build_ann()
                self._set_search_params()
                self._index = self._to_device(self._index)
            elif self.backend == "faiss":
                import faiss

                self._index = faiss.IndexFlatIP(self.embeddings.shape[1])
                self._index.add(self.embeddings)
                self._index = self._to_device(self._index)
            else:
                import torch

                self._index = torch.from_numpy(self.embeddings).to(self._torch_device())
        return self._index

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ``(scores float32 [Q, k], ids int64 [Q, k])`` by cosine similarity."""
        queries = list(queries)
        if (trivial := trivial_topk(self.n_docs, len(queries), k)) is not None:
            return trivial
        return self.search_embeddings((self.query_encoder or self.encoder).encode(queries), k)

    def search_embeddings(self, query_emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Like :meth:`search` for precomputed query embeddings [Q, d] (normalized here)."""
        if (trivial := trivial_topk(self.n_docs, len(query_emb), k)) is not None:
            return trivial
        q = np.ascontiguousarray(l2_normalize(query_emb))
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
        if not self.exact:  # approximate candidates, exact scores
            _, ids = self._get_index().search(q, k)  # [b, k], -1 where fewer were found
            return order_rows(self._exact(q, ids), ids, k)
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
            top_vals[tied], top_ids[tied] = self._settle_ties(q[tied], k, m, extra)
        return top_vals, top_ids

    def _settle_ties(self, q: np.ndarray, k: int, m: int, extra: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-k of queries [t, d] whose m-th and next faiss candidates are near-tied.

        A wider faiss candidate list [t, M] is scored exactly; it holds the exact top-k whenever its
        last candidate scores more than 1e-5 below the exact m-th (a document outside it scores at
        most that plus faiss's rounding, ~1e-6). Only rows where even that is tied (long runs of
        near-duplicates) score every document. Scoring every tied row in full cost ~40 ms per row
        at 100k documents: 483 s of kNN on 100k replicated MoGG nodes.
        """
        wide_n = min(self.n_docs, max(4 * extra, 64))
        _, wide = self._get_index().search(q, wide_n)  # [t, M]
        vals = self._exact(q, wide)
        top_vals, top_ids = merge_topk(vals, wide, k)  # by (-exact score, id); here m == k < M
        if wide_n == self.n_docs:
            return top_vals, top_ids
        full_rows = np.flatnonzero(top_vals[:, m - 1] <= vals[:, -1] + 1e-5)
        if full_rows.size:
            full = np.einsum("bd,nd->bn", q[full_rows], self.embeddings).astype(np.float32)  # [f, N]
            top_vals[full_rows], top_ids[full_rows] = topk_rows(full, k)
        return top_vals, top_ids

    def save(self, directory: Path) -> list[str]:
        """Write embeddings (npy), parameters (json) and, for faiss, the index file."""
        directory = Path(directory)
        if isinstance(self.embeddings, np.ndarray):
            np.save(directory / EMBEDDINGS_FILE, self.embeddings, allow_pickle=False)
        else:  # shard blocks: streamed into one file, never all in memory
            out = np.lib.format.open_memmap(directory / EMBEDDINGS_FILE, mode="w+", dtype=np.float32,
                                            shape=self.embeddings.shape)
            at = 0
            for block in _row_blocks(self.embeddings):
                out[at : at + len(block)] = block
                at += len(block)
            out.flush()
            del out
        params = {"config": self.config(), "n_docs": self.n_docs,
                  "dim": int(self.embeddings.shape[1]), "backend": self.backend,
                  "nprobe": self.nprobe, "ef_search": self.ef_search, "format_version": 1}
        (directory / PARAMS_FILE).write_text(json.dumps(params, indent=2), encoding="utf-8")
        written = [EMBEDDINGS_FILE, PARAMS_FILE]
        if self.backend == "faiss":
            import faiss

            faiss.write_index(self._cpu_index(), str(directory / FAISS_FILE))
            written.append(FAISS_FILE)
        return written

    def restore(self, directory: Path) -> Self:
        """Load a saved index into this instance, keeping its encoder and runtime options (backend,
        device, batch_size, nprobe); the saved encoder and index config must equal this one's."""
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text(encoding="utf-8"))
        check_saved_config(type(self).__name__, directory, params["config"], self.config())
        if self.exact:
            emb = np.load(directory / EMBEDDINGS_FILE, allow_pickle=False)
            self.embeddings = np.ascontiguousarray(emb, dtype=np.float32)
        else:  # only candidates are read: keep them on disk
            self.embeddings = np.load(directory / EMBEDDINGS_FILE, mmap_mode="r", allow_pickle=False)
        if self.embeddings.shape != (params["n_docs"], params["dim"]):
            raise ValueError(f"{directory}: embeddings shape {self.embeddings.shape} does not "
                             f"match the saved parameters ({params['n_docs']} x {params['dim']})")
        self._index = None
        if self.backend == "faiss" and (directory / FAISS_FILE).is_file():
            import faiss

            self._index = faiss.read_index(str(directory / FAISS_FILE))
            self._set_search_params()
            if self._index.ntotal != self.n_docs:
                raise ValueError(f"{directory}: {FAISS_FILE} holds {self._index.ntotal} vectors, "
                                 f"embeddings {self.n_docs}")
            self._index = self._to_device(self._index)
        elif not self.exact:
            raise ValueError(f"{directory}: an approximate index ({self.index}) needs backend='faiss' and its {FAISS_FILE}")
        return self

    @classmethod
    def load(cls, directory: Path, encoder: Encoder | None = None, query_encoder: Encoder | None = None,
             **runtime_kwargs: Any) -> Self:
        """A new retriever from a saved index (the saved backend and nprobe unless given); ``encoder``
        (and ``query_encoder`` for a two-encoder index) must match the saved configs."""
        if encoder is None:
            raise TypeError("DenseRetriever.load needs the query encoder: "
                            "load(directory, encoder=...)")
        check_runtime_kwargs("DenseRetriever", runtime_kwargs, _RUNTIME_KEYS)
        params = json.loads((Path(directory) / PARAMS_FILE).read_text(encoding="utf-8"))
        built = {k: v for k, v in params["config"].items() if k not in ("encoder", "query_encoder")}  # index, train_size, seed
        kwargs = {"backend": params.get("backend", "faiss"), "nprobe": params.get("nprobe", 32),
                  "ef_search": params.get("ef_search", 128), **built, **runtime_kwargs}
        return cls(encoder, query_encoder=query_encoder, **kwargs).restore(directory)
