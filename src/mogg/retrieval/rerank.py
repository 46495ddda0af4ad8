"""Reranking: a second stage over a retriever's top candidates, behind the same retriever interface.

``RerankRetriever(base, scorer, depth)`` asks ``base`` for ``depth`` candidates per query and
orders them by ``scorer.score(queries, texts)``; ties by ascending id. Scorers:

* :class:`CrossEncoderScorer`: any sequence-classification model by hub name or local path
  (MedCPT's cross-encoder ``ncbi/MedCPT-Cross-Encoder`` is the medical standard), query and text
  as one pair, batched by length; the score is the first logit (a one-logit relevance head) or
  the last one's margin over the first (a two-class head);
* :class:`BiEncoderScorer`: cosine of a text encoder's embeddings (the offline default with the
  bundled MiniLM; the texts' embeddings are cached by the encoder).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from mogg.retrieval.base import check_saved_config, merge_topk

PARAMS_FILE = "rerank_params.json"
TEXTS_FILE = "rerank_texts.jsonl"


class CrossEncoderScorer:
    """Relevance of (query, text) pairs from a sequence-classification model (loaded on first use)."""

    def __init__(self, name_or_path: str, max_length: int = 512, batch_size: int = 32, device: str | None = None,
                 seed: int = 0) -> None:
        if max_length < 8 or batch_size < 1:
            raise ValueError("max_length >= 8 and batch_size >= 1 required")
        self.name_or_path, self.max_length, self.batch_size = name_or_path, int(max_length), int(batch_size)
        self.device, self.seed = device, int(seed)
        self._model = self._tok = None

    def config(self) -> dict:
        return {"kind": "cross-encoder", "name_or_path": self.name_or_path, "max_length": self.max_length}

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from mogg.encoders import resolve_model_path

        path, local = resolve_model_path(self.name_or_path)
        self._tok = AutoTokenizer.from_pretrained(path, local_files_only=local)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=local)
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._model = model.to(device).eval()

    def prepare(self, texts: Sequence[str]) -> None:
        """Nothing to precompute: a cross-encoder reads every pair."""

    def score(self, queries: Sequence[str], texts: Sequence[str], ids: np.ndarray | None = None) -> np.ndarray:
        """float32 [N] for N (query, text) pairs."""
        import torch

        if self._model is None:
            self._load()
        out = np.zeros(len(texts), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths per batch
        device = next(self._model.parameters()).device
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self._tok([queries[i] for i in idx], [texts[i] for i in idx], truncation="only_second",
                                max_length=self.max_length, padding=True, return_tensors="pt").to(device)
                logits = self._model(**enc).logits.float()
                s = logits[:, 0] if logits.shape[1] == 1 else logits[:, -1] - logits[:, 0]
                out[idx] = s.cpu().numpy()
        return out


class BiEncoderScorer:
    """Cosine similarity of query and text embeddings from one encoder."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self._emb: np.ndarray | None = None  # [N, d] embeddings of the level's texts

    def config(self) -> dict:
        return {"kind": "bi-encoder", "encoder": self.encoder.config()}

    def prepare(self, texts: Sequence[str]) -> None:
        """Embed all the level's texts once (the encoder's cache shares them with a dense index)."""
        from mogg.core.vectors import l2_normalize

        self._emb = l2_normalize(self.encoder.encode(list(texts)))

    def score(self, queries: Sequence[str], texts: Sequence[str], ids: np.ndarray | None = None) -> np.ndarray:
        from mogg.core.vectors import l2_normalize

        uq, qi = np.unique(np.asarray(queries, dtype=object), return_inverse=True)
        q = l2_normalize(self.encoder.encode(list(uq)))
        if self._emb is not None and ids is not None:
            t = self._emb[np.asarray(ids)]
            return np.einsum("nd,nd->n", q[qi], t).astype(np.float32)
        ut, ti = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
        t = l2_normalize(self.encoder.encode(list(ut)))
        return np.einsum("nd,nd->n", q[qi], t[ti]).astype(np.float32)


class RerankRetriever:
    """``base``'s top ``depth`` candidates per query, reordered by ``scorer``.

    ``base`` may be a retriever or a factory (a Hydra partial), called once.
    """

    def __init__(self, base: Any, scorer: Any, depth: int = 20) -> None:
        if depth < 1:
            raise ValueError(f"rerank depth must be >= 1, got {depth}")
        self.base = base() if callable(base) and not hasattr(base, "search") else base
        # a shallow copy: one scorer node serves every level, each level keeps its own text embeddings
        self.scorer, self.depth = copy.copy(scorer), int(depth)
        self.texts: list[str] = []

    def config(self) -> dict:
        return {"base": {"kind": type(self.base).__name__, **self.base.config()}, "scorer": self.scorer.config(),
                "depth": self.depth}

    def fit(self, texts: Sequence[str]) -> Self:
        self.texts = list(texts)
        self.base.fit(self.texts)
        self.scorer.prepare(self.texts)
        return self

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        queries = list(queries)
        _, ids = self.base.search(queries, max(self.depth, k))  # [Q, D]
        ok = ids >= 0
        rows, cols = np.nonzero(ok)
        scores = np.full(ids.shape, -np.inf, dtype=np.float32)
        if len(rows):
            scores[rows, cols] = self.scorer.score([queries[r] for r in rows], [self.texts[i] for i in ids[rows, cols]],
                                                   ids[rows, cols])
        return merge_topk(scores, np.where(ok, ids, -1), k)

    def save(self, directory: Path) -> list[str]:
        directory = Path(directory)
        (directory / "base").mkdir()
        self.base.save(directory / "base")
        with open(directory / TEXTS_FILE, "w", encoding="utf-8") as f:
            for t in self.texts:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        (directory / PARAMS_FILE).write_text(json.dumps({"config": self.config(), "format_version": 1}, indent=2))
        return [PARAMS_FILE, TEXTS_FILE]

    def restore(self, directory: Path) -> Self:
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text())
        check_saved_config(type(self).__name__, directory, params["config"], self.config())
        self.base.restore(directory / "base")
        with open(directory / TEXTS_FILE, encoding="utf-8") as f:
            self.texts = [json.loads(line) for line in f]
        self.scorer.prepare(self.texts)
        return self
