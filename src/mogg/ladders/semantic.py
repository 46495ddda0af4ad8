"""Semantic chunking: cut a document where adjacent sentences stop being about the same thing.

Every sentence is embedded (one batched, cached encoder call for the whole corpus); the distance
between neighbours is ``1 - cos``. A cut falls after sentence i when its distance exceeds the
``percentile`` of the last ``window`` distances (a moving threshold, so a document that drifts
slowly is not cut everywhere and a sharp topic change stands out locally), subject to
``min_sentences`` per chunk, and always before a chunk would pass ``max_tokens``. With
``overlap`` > 0 each chunk's text also carries that many sentences of its neighbours on both
sides (the cancer-QA pipeline's sentence-window overlap, SEOS); chunks still partition the
sentences, so they can be the units of a MoG ladder, the leaves of a RAPTOR tree or a level.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from mogg.core.text import UNIT_RULE, count_tokens, log_cuts, split_units
from mogg.core.vectors import l2_normalize
from mogg.data.records import Document

log = logging.getLogger(__name__)


def moving_thresholds(dist: np.ndarray, percentile: float, window: int) -> np.ndarray:
    """[n] threshold for each distance: the ``percentile`` of the last ``window`` distances up to and
    including it (fewer at the start of the document)."""
    n = len(dist)
    if n == 0:
        return dist
    padded = np.r_[np.full(window - 1, np.nan), dist]
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)  # [n, window]
    return np.nanpercentile(windows, percentile, axis=1)


def breakpoints(dist: np.ndarray, tokens: np.ndarray, percentile: float, window: int, min_sentences: int,
                max_tokens: int) -> list[int]:
    """Chunk start indices (sentence positions, the first is 0) for one document.

    ``dist[i]``: distance between sentence i and i+1; ``tokens[i]``: tokens of sentence i.
    """
    thr = moving_thresholds(dist, percentile, window)
    semantic = dist > thr  # strict: a distance equal to its window's percentile is no break
    starts, size, used = [0], 0, 0
    for i, t in enumerate(tokens):
        if i > 0:
            cut = (semantic[i - 1] and size >= min_sentences) or (used + t > max_tokens and size > 0)
            if cut:
                starts.append(i)
                size, used = 0, 0
        size += 1
        used += t
    return starts


class SemanticChunker:
    """Semantic chunks of documents (see the module doc); ``encoder`` embeds sentences."""

    def __init__(self, encoder, percentile: float = 90.0, window: int = 16, min_sentences: int = 2,
                 max_tokens: int = 256, overlap: int = 0, max_sentence_tokens: int = 256) -> None:
        if not 0 < percentile <= 100 or window < 1 or min_sentences < 1 or max_tokens < 1 or overlap < 0:
            raise ValueError("semantic chunking: 0 < percentile <= 100, window, min_sentences, max_tokens >= 1, overlap >= 0")
        self.encoder, self.percentile, self.window = encoder, float(percentile), int(window)
        self.min_sentences, self.max_tokens, self.overlap = int(min_sentences), int(max_tokens), int(overlap)
        self.max_sentence_tokens = int(max_sentence_tokens)

    def config(self) -> dict:
        return {"kind": "semantic", "encoder": self.encoder.config(), "percentile": self.percentile,
                "window": self.window, "min_sentences": self.min_sentences, "max_tokens": self.max_tokens,
                "overlap": self.overlap, "max_sentence_tokens": self.max_sentence_tokens,
                "unit_rule": UNIT_RULE}  # its sentences are split_units' units: a new rule, new chunks

    def chunk_texts(self, texts: Sequence[str], show_progress: bool = False) -> list[list[str]]:
        """Chunks (texts, overlap included) of every input text, in order."""
        cuts: dict = {}
        sents = [split_units(t, self.max_sentence_tokens, cuts) for t in texts]  # a list's items are units
        log_cuts(cuts, self.max_sentence_tokens, "semantic chunking")
        flat = [s for ss in sents for s in ss]
        emb = l2_normalize(self.encoder.encode(flat, show_progress=show_progress)) if flat else np.zeros((0, 1), np.float32)
        tokens = np.fromiter((count_tokens(s) for s in flat), dtype=np.int64, count=len(flat))
        out, at = [], 0
        for ss in sents:
            n = len(ss)
            e, tok = emb[at:at + n], tokens[at:at + n]
            at += n
            if n == 0:
                out.append([])
                continue
            dist = 1.0 - np.einsum("id,id->i", e[:-1], e[1:]) if n > 1 else np.zeros(0)
            starts = breakpoints(dist, tok, self.percentile, self.window, self.min_sentences, self.max_tokens)
            bounds = [*starts, n]
            out.append([" ".join(ss[max(0, a - self.overlap):min(n, b + self.overlap)]) for a, b in zip(bounds[:-1], bounds[1:])])
        return out

    def chunk_documents(self, documents: Sequence[Document], show_progress: bool = False) -> list[list[str]]:
        return self.chunk_texts([d.text for d in documents], show_progress)
