"""Shared test fakes: model-free text encoders with the encoder interface mogg uses
(``encode(texts, show_progress=False) -> (n, dim) float array`` and ``config() -> dict``).

Three kinds cover every test: a lookup (texts name their vectors: tables, row numbers, planted
clusters), seeded random vectors per text (a stable stand-in for a model), and hashed bags of
words (similar texts get similar vectors). Each test keeps its own vectors and config through the
arguments, so artifact keys and results are those of the encoder it had before.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable

import numpy as np


class LookupEncoder:
    """``vector_of(text)`` per text, stacked (as ``dtype`` unless None)."""

    def __init__(self, vector_of: Callable[[str], np.ndarray], config: dict, dtype=np.float32) -> None:
        self.vector_of, self._config, self.dtype = vector_of, dict(config), dtype

    @classmethod
    def from_table(cls, table: dict[str, np.ndarray], config: dict) -> "LookupEncoder":
        enc = cls(table.__getitem__, config)
        enc.table = table
        return enc

    @property
    def dim(self) -> int:
        return int(self._config.get("dim") or len(self.vector_of(next(iter(self.table)))))

    def encode(self, texts, show_progress=False):
        out = np.stack([self.vector_of(t) for t in texts])
        return out if self.dtype is None else out.astype(self.dtype)

    def config(self) -> dict:
        return dict(self._config)


def crc32_seed(text: str) -> int:
    return zlib.crc32(text.encode())


def sha256_seed(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


class SeededEncoder:
    """A unit normal vector per text, seeded by ``seed_of(text)``: stable across processes."""

    def __init__(self, dim: int, config: dict, seed_of: Callable[[str], int] = sha256_seed) -> None:
        self.dim, self._config, self.seed_of = dim, dict(config), seed_of

    def encode(self, texts, show_progress=False):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = np.random.default_rng(self.seed_of(t)).normal(size=self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def config(self) -> dict:
        return dict(self._config)


class BagOfWordsEncoder:
    """Counts of ``words(text)`` hashed by ``bucket(word)`` into ``dim`` slots."""

    def __init__(self, dim: int, config: dict, words: Callable[[str], list[str]], bucket: Callable[[str], int]) -> None:
        self.dim, self._config, self.words, self.bucket = dim, dict(config), words, bucket

    def encode(self, texts, show_progress=False):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in self.words(t):
                out[i, self.bucket(w) % self.dim] += 1.0
        return out

    def config(self) -> dict:
        return dict(self._config)
