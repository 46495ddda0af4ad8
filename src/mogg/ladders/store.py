"""Ladders as artifacts: the key a ladder is stored under, and build-or-load."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mogg.core.artifacts import cached
from mogg.core.text import TEXT_VERSION
from mogg.ladders.base import Ladder
from mogg.ladders.sources import PARAGRAPHS, SOURCE_POSITIONS, paragraph_counts, source_positions


def ladder_key(corpus, builder) -> dict:
    """What a ladder artifact depends on: the builder's config and the corpus fingerprint."""
    return {"builder": builder.config(), "corpus": corpus.fingerprint(), "text_version": TEXT_VERSION}


def with_structure(ladder: Ladder, documents) -> Ladder:
    """``ladder`` with its documents' source positions (:data:`SOURCE_POSITIONS`) and paragraph counts
    (:data:`PARAGRAPHS`) stored among its arrays: computed once when the ladder is built into the artifact store,
    so that routing a corpus reads them instead of scanning every document id (linear in the corpus: ~2.4 s per
    million ids) or its texts again. ``documents``: what the ladder was built from, in its order."""
    ladder.arrays[SOURCE_POSITIONS] = source_positions(ladder.units.doc_ids)
    ladder.arrays[PARAGRAPHS] = paragraphs_of(documents, ladder.units.doc_ids)
    return ladder


def paragraphs_of(documents, doc_ids) -> np.ndarray:
    """Paragraph counts [D] of ``documents`` in the order of ``doc_ids`` (a ladder's); a document the ladder holds
    and ``documents`` lack is a clear error (the corpus changed under the ladder's key)."""
    count = dict(zip((d.id for d in documents), paragraph_counts(d.text for d in documents)))
    missing = [i for i in doc_ids if i not in count]
    if missing:
        raise ValueError(f"the ladder holds documents the corpus lacks: {missing[:3]}")
    return np.fromiter((count[i] for i in doc_ids), dtype=np.int64, count=len(doc_ids))


def build_ladder(corpus, builder, artifacts: Path | None) -> tuple[Ladder, dict]:
    """Build (or load) the ladder of ``corpus`` with ``builder``; returns (ladder, its key)."""
    key = ladder_key(corpus, builder)
    if artifacts is None:
        return with_structure(builder.build(corpus.documents(), show_progress=True), corpus.documents()), key
    ladder = cached(
        artifacts, "ladder", key,
        build=lambda: with_structure(builder.build(corpus.documents(), show_progress=True), corpus.documents()),
        save=lambda lad, d: lad.save(d),
        load=Ladder.load,
    )
    if PARAGRAPHS not in ladder.arrays:  # saved before the counts were, or merged from shards: a derived artifact
        ladder.arrays[PARAGRAPHS] = cached(
            artifacts, "doc_paragraphs", key,
            build=lambda: paragraphs_of(corpus.documents(), ladder.units.doc_ids),
            save=lambda a, d: np.save(d / "doc_paragraphs.npy", a),
            load=lambda d: np.load(d / "doc_paragraphs.npy", allow_pickle=False),
            derived=True,
        )
    return ladder, key
