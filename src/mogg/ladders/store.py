"""Ladders as artifacts: the key a ladder is stored under, and build-or-load."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mogg.core.artifacts import cached
from mogg.core.text import TEXT_VERSION
from mogg.ladders.base import Ladder
from mogg.ladders.sources import (
    PARAGRAPH_STARTS,
    PARAGRAPHS,
    SOURCE_POSITIONS,
    paragraph_count,
    paragraph_counts,
    paragraph_starts,
    source_positions,
)


def ladder_key(corpus, builder) -> dict:
    """What a ladder artifact depends on: the builder's config and the corpus fingerprint."""
    return {"builder": builder.config(), "corpus": corpus.fingerprint(), "text_version": TEXT_VERSION}


def with_structure(ladder: Ladder, documents) -> Ladder:
    """``ladder`` with its documents' paragraph counts (:data:`PARAGRAPHS`) and the units that open a paragraph
    (:data:`PARAGRAPH_STARTS`) stored among its arrays: found once when the ladder is built (one pass over
    ``documents``), so that routing a corpus reads them instead of its texts again; a merge of shards concatenates
    them, byte for byte a single build's. ``documents``: what the ladder was built from, in its order. (The source
    positions are not stored in the ladder: a merge could not write them without every id at once;
    :func:`build_ladder` keeps them beside it.)"""
    ladder.arrays[PARAGRAPHS], ladder.arrays[PARAGRAPH_STARTS] = structure_of(documents, ladder)
    return ladder


def _derived_array(artifacts: Path, kind: str, key: dict, build) -> np.ndarray:
    """An array computed once per artifact store beside the ladder of ``key`` (a derived artifact: a damaged one
    is rebuilt), then loaded."""
    return cached(artifacts, kind, key, build=build, save=lambda a, d: np.save(d / f"{kind}.npy", a),
                  load=lambda d: np.load(d / f"{kind}.npy", allow_pickle=False), derived=True)


def paragraphs_of(documents, doc_ids) -> np.ndarray:
    """Paragraph counts [D] of ``documents`` in the order of ``doc_ids`` (a ladder's); a document the ladder holds
    and ``documents`` lack is a clear error (the corpus changed under the ladder's key)."""
    count = dict(zip((d.id for d in documents), paragraph_counts(d.text for d in documents)))
    missing = [i for i in doc_ids if i not in count]
    if missing:
        raise ValueError(f"the ladder holds documents the corpus lacks: {missing[:3]}")
    return np.fromiter((count[i] for i in doc_ids), dtype=np.int64, count=len(doc_ids))


def structure_of(documents, ladder: Ladder) -> tuple[np.ndarray, np.ndarray]:
    """One pass over ``documents``: their paragraph counts [D] in the ladder's document order
    (:func:`paragraphs_of`) and the ladder's units that open a paragraph other than their document's first
    (int64 [P], increasing; :func:`mogg.ladders.sources.paragraph_starts`; none where a ladder's units of one
    document are not contiguous, in order)."""
    texts = {}  # only the documents of several paragraphs: the rest open none (an abstract, a snippet)
    counts = {}
    for d in documents:
        counts[d.id] = paragraph_count(d.text)
        if counts[d.id] > 1:
            texts[d.id] = d.text
    doc_ids = ladder.units.doc_ids
    missing = [i for i in doc_ids if i not in counts]
    if missing:
        raise ValueError(f"the ladder holds documents the corpus lacks: {missing[:3]}")
    n_par = np.fromiter((counts[i] for i in doc_ids), dtype=np.int64, count=len(doc_ids))
    doc = ladder.units.doc
    if not texts or (len(doc) > 1 and (np.diff(doc) < 0).any()):
        return n_par, np.zeros(0, dtype=np.int64)
    first = np.searchsorted(doc, np.arange(len(doc_ids) + 1))  # units of document i: first[i]:first[i + 1]
    starts = [paragraph_starts(texts[i], ladder.units.text[first[k]:first[k + 1]]) + first[k]
              for k, i in enumerate(doc_ids) if i in texts and first[k + 1] - first[k] > 1]
    starts = [s for s in starts if len(s)]
    return n_par, (np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64))


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
    if PARAGRAPHS not in ladder.arrays:  # saved before the counts were: a derived artifact
        ladder.arrays[PARAGRAPHS] = _derived_array(artifacts, PARAGRAPHS, key,
                                                   lambda: paragraphs_of(corpus.documents(), ladder.units.doc_ids))
    if PARAGRAPH_STARTS not in ladder.arrays:  # ... and before the paragraphs' first units were
        ladder.arrays[PARAGRAPH_STARTS] = _derived_array(artifacts, PARAGRAPH_STARTS, key,
                                                         lambda: structure_of(corpus.documents(), ladder)[1])
    # the source positions (linear in the corpus: ~2.4 s per million ids), once per store: a routing session reads
    # them instead of scanning every document id
    ladder.arrays[SOURCE_POSITIONS] = _derived_array(artifacts, "source_positions", key,
                                                     lambda: source_positions(ladder.units.doc_ids))
    return ladder, key
