"""MoG ladder: nested, non-overlapping chunk levels (Zhong et al., docs/design.md section 1).

Units are sentence groups; level j groups 2**j adjacent units of one document, so every level-j
chunk is the concatenation of (at most) two adjacent level-(j-1) chunks and never crosses a
document. An optional top level is the whole document.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from mogg.core.text import UNIT_RULE, log_cuts, pack_by_tokens, split_units
from mogg.data.records import Document
from mogg.ladders.base import Ladder, Units, partition_level
from mogg.ladders.builder import LadderBuilder

log = logging.getLogger(__name__)


def pack_sentences(sentences: Sequence[str], unit: str, size: int) -> list[str]:
    """Group sentences into units.

    ``unit="sentences"``: ``size`` sentences per unit. ``unit="tokens"``: greedy packing of whole
    sentences up to ``size`` tokens (a longer sentence stays one unit: we never cut a sentence).
    """
    if unit == "sentences":
        return [" ".join(sentences[i : i + size]) for i in range(0, len(sentences), size)]
    if unit != "tokens":
        raise ValueError(f"unit must be 'sentences' or 'tokens', got {unit!r}")
    return pack_by_tokens(sentences, size)


class MoGLadderBuilder(LadderBuilder):
    """Build nested MoG levels.

    Args:
        unit: "sentences" or "tokens": how the finest units are formed.
        unit_size: sentences per unit, or the token budget of a unit.
        n_levels: number of doubling levels (unit, 2 units, 4 units, ...).
        document_level: append a level holding each whole document.
        max_sentence_tokens: a longer "sentence" (a table, a list without full stops) is cut into
            pieces of at most this many tokens (logged), so no unit grows without bound.
    """

    method = "mog"

    def __init__(self, unit: str = "sentences", unit_size: int = 1, n_levels: int = 5, document_level: bool = False,
                 max_sentence_tokens: int = 256, chunker=None, policies=None, reports=None):
        super().__init__(policies, reports)
        if unit not in ("sentences", "tokens", "semantic"):
            raise ValueError(f"unit must be 'sentences', 'tokens' or 'semantic', got {unit!r}")
        if (unit == "semantic") != (chunker is not None):
            raise ValueError("unit='semantic' needs a chunker (mogg.ladders.semantic.SemanticChunker), and only it uses one")
        self.chunker = chunker
        if unit_size < 1 or n_levels < 1 or max_sentence_tokens < 1:
            raise ValueError("unit_size, n_levels and max_sentence_tokens must be >= 1")
        self.unit, self.unit_size, self.n_levels, self.document_level = unit, unit_size, n_levels, document_level
        self.max_sentence_tokens = int(max_sentence_tokens)

    def config(self) -> dict:
        return {
            "method": self.method,
            "unit": self.unit,
            "unit_size": self.unit_size,
            "n_levels": self.n_levels,
            "document_level": self.document_level,
            "max_sentence_tokens": self.max_sentence_tokens,
            "unit_rule": UNIT_RULE,  # how a text splits into units (mogg.core.text.split_units): a new rule, a new ladder
            **({"chunker": self.chunker.config()} if self.chunker is not None else {}),
        }

    def units(self, documents: Sequence[Document], show_progress: bool = False) -> Units:
        """Split every document into units (corpus order)."""
        texts: list[str] = []
        counts = np.zeros(len(documents), dtype=np.int64)
        if self.unit == "semantic":  # semantic chunks as units (one batched embedding pass)
            for d, us in enumerate(self.chunker.chunk_documents(documents, show_progress)):
                texts.extend(us)
                counts[d] = len(us)
        else:
            cuts: dict = {}
            for d, doc in enumerate(tqdm(documents, desc="sentence split", disable=not show_progress)):
                us = pack_sentences(split_units(doc.text, self.max_sentence_tokens, cuts), self.unit, self.unit_size)
                texts.extend(us)
                counts[d] = len(us)
            log_cuts(cuts, self.max_sentence_tokens, "MoG units")
        return Units(
            text=texts,
            doc=np.repeat(np.arange(len(documents), dtype=np.int64), counts),
            doc_ids=[doc.id for doc in documents],
        )

    def build(self, documents: Sequence[Document], show_progress: bool = False) -> Ladder:
        """Units + nested levels for ``documents``."""
        units = self.units(documents, show_progress)
        levels = nested_levels(units.doc, self.n_levels, self.document_level, self.unit, self.unit_size)
        log.info("MoG ladder: %d units, chunks per level %s", len(units), [len(lv) for lv in levels])
        return Ladder(method=self.method, units=units, levels=levels, meta=self.config())


def nested_levels(unit_doc: np.ndarray, n_levels: int, document_level: bool, unit: str = "units", size: int = 1):
    """Nested partitions from the units' document ids (int64 [U], non-decreasing).

    Level j maps unit u to chunk key (doc[u], pos[u] >> j); keys are monotone in corpus order, so
    chunk ids are a cumulative count of key changes: fully vectorised.
    """
    n = len(unit_doc)
    if n == 0:
        raise ValueError("cannot build a ladder over zero units (empty corpus?)")
    if np.any(np.diff(unit_doc) < 0):
        raise ValueError("units must be in corpus order (document ids non-decreasing)")
    starts = np.r_[0, np.flatnonzero(np.diff(unit_doc)) + 1]  # first unit of each doc
    doc_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    pos = np.arange(n) - doc_start  # position of the unit inside its document
    levels = []
    suffix = {"sentences": "sent", "tokens": "tok", "semantic": "sem"}.get(unit, "u")
    for j in range(n_levels):
        block = pos >> j
        new = np.r_[True, (unit_doc[1:] != unit_doc[:-1]) | (block[1:] != block[:-1])]
        chunk = np.cumsum(new) - 1
        levels.append(partition_level(f"L{j}:{size * 2**j}{suffix}", chunk))
    if document_level:
        new = np.r_[True, unit_doc[1:] != unit_doc[:-1]]
        levels.append(partition_level("doc", np.cumsum(new) - 1))
    return levels
