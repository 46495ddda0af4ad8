"""Ladders as artifacts: the key a ladder is stored under, and build-or-load."""

from __future__ import annotations

from pathlib import Path

from mogg.core.artifacts import cached
from mogg.core.text import TEXT_VERSION
from mogg.ladders.base import Ladder
from mogg.ladders.sources import SOURCE_POSITIONS, source_positions


def ladder_key(corpus, builder) -> dict:
    """What a ladder artifact depends on: the builder's config and the corpus fingerprint."""
    return {"builder": builder.config(), "corpus": corpus.fingerprint(), "text_version": TEXT_VERSION}


def with_source_positions(ladder: Ladder) -> Ladder:
    """``ladder`` with its documents' source positions stored among its arrays (:data:`SOURCE_POSITIONS`): computed
    once when the ladder is built into the artifact store, so that routing a corpus reads them instead of scanning
    every document id at each session (linear in the corpus: ~2.6 s per million ids)."""
    ladder.arrays[SOURCE_POSITIONS] = source_positions(ladder.units.doc_ids)
    return ladder


def build_ladder(corpus, builder, artifacts: Path | None) -> tuple[Ladder, dict]:
    """Build (or load) the ladder of ``corpus`` with ``builder``; returns (ladder, its key)."""
    key = ladder_key(corpus, builder)
    if artifacts is None:
        return builder.build(corpus.documents(), show_progress=True), key
    ladder = cached(
        artifacts, "ladder", key,
        build=lambda: with_source_positions(builder.build(corpus.documents(), show_progress=True)),
        save=lambda lad, d: lad.save(d),
        load=Ladder.load,
    )
    return ladder, key
