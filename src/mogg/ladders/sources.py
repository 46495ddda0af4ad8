"""A document's source, read off its id without labels: an abstract's contexts ("<PMID>-<k>"), a chunked
document's parts ("<source>_<k>"), an explanation's sentences ("<id>-<k>") are sections of one source.

:func:`source_positions` is the corpus order the set-shape decisions read (issue 58: a source's sections beside
each other, in order). It is linear in the corpus (one regular expression per id), so the artifact store keeps
it beside a ladder once computed (a derived artifact that :func:`mogg.ladders.store.build_ladder` attaches as
:data:`SOURCE_POSITIONS`, :meth:`mogg.ladders.base.Ladder.source_positions`): routing a corpus then reads it
instead of scanning every id.

:func:`paragraph_counts` is each document's paragraphs (:func:`mogg.core.text.paragraphs`), which the sentence
units no longer show: on sections of a page a section is a paragraph, so a page's mean paragraph is a label-free
estimate of its section's length (docs/results.md, "The page share by the worst shape"). Stored in the ladder's ``arrays.npz``
(:data:`PARAGRAPHS`, :meth:`mogg.ladders.base.Ladder.doc_paragraphs`).

:func:`paragraph_starts` finds, inside one document, the units that open a paragraph (each unit's text found in
order in the whitespace-normalised text): on sections of a page the best candidate's paragraph is the section it
sits in (docs/results.md, "The best candidate's paragraph"). Stored beside the counts (:data:`PARAGRAPH_STARTS`,
:meth:`mogg.ladders.base.Ladder.paragraph_starts`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from mogg.core.text import PARAGRAPH_RULE, paragraphs, unit_paragraphs

SOURCE_POSITIONS = "source_positions"  # the ladder array (int64 [D]) attached at load (mogg.ladders.store)

# the ladder arrays read off the paragraph rule, named by its version (a ladder stored under another rule lacks them,
# so mogg.ladders.store.build_ladder derives them once): each document's paragraphs (int64 [D], each >= 1), and the
# units that open a paragraph other than their document's first (int64 [P], increasing), both written at build
PARAGRAPHS = f"doc_paragraphs_r{PARAGRAPH_RULE}"
PARAGRAPH_STARTS = f"paragraph_starts_r{PARAGRAPH_RULE}"

# a document's source: its id without a trailing "-<n>" or "_<n>"; an id without one is its own source
_SOURCE_ID = re.compile(r"^(.+)[-_](\d+)$")


def source_keys(doc_ids: Sequence[str]) -> np.ndarray:
    """Each document's source [D] (int64, numbered in order of first appearance): the documents whose ids name one
    source (:data:`_SOURCE_ID`, ``<source>-<k>`` or ``<source>_<k>``) share it; any other id is a source alone."""
    keys = np.asarray([m.group(1) if (m := _SOURCE_ID.match(i)) else i for i in doc_ids], dtype=object)
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse.ravel()]


class Sources(NamedTuple):
    """A corpus in the order :func:`source_positions` gives (a source's documents one run): ``positions`` int64 [D]
    each document's position, ``pos_doc`` int64 [D] the document at each position, ``doc_ids`` [D]. No id is read
    until :func:`source_runs` asks for the runs around some documents."""

    positions: np.ndarray
    pos_doc: np.ndarray
    doc_ids: Sequence[str]


def corpus_sources(doc_ids: Sequence[str], positions: np.ndarray) -> Sources:
    """:class:`Sources` of documents ``doc_ids`` [D] at ``positions`` [D] (:func:`source_positions`, stored with the
    ladder): the inverse permutation only, no id read."""
    positions = np.asarray(positions, dtype=np.int64)
    pos_doc = np.empty(len(positions), dtype=np.int64)
    pos_doc[positions] = np.arange(len(positions))
    return Sources(positions, pos_doc, doc_ids)


def source_runs(sources: Sources, docs: np.ndarray, reach: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The source run of each of ``docs`` [M]: positions [lo, hi) (int64 [M] each), read within ``reach`` positions
    on either side (a run that fills a side is longer than ``2 * reach``: hi - lo > ``reach`` then), and the sources
    per document among the positions read (near 0 where one id prefix names every document, ``doc-1`` ...
    ``doc-N``). Only the ids of those positions are read (:func:`source_keys`): the cost follows ``docs``, not the
    corpus."""
    at = sources.positions[np.asarray(docs, dtype=np.int64)]
    n = len(sources.positions)
    if not len(at):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0.0
    window = at[:, None] + np.arange(-reach, reach + 1)[None, :]  # [M, 2 reach + 1]
    inside = (window >= 0) & (window < n)
    seen, inv = np.unique(np.where(inside, window, 0), return_inverse=True)
    key = source_keys([sources.doc_ids[int(d)] for d in sources.pos_doc[seen]])[inv.reshape(window.shape)]
    same = inside & (key == key[:, reach][:, None])
    # consecutive same-source positions from the centre outwards (argmin finds the first break; none: the whole side)
    right = same[:, reach + 1:]
    left = same[:, :reach][:, ::-1]
    n_right = np.where(right.all(axis=1), reach, np.argmin(right, axis=1))
    n_left = np.where(left.all(axis=1), reach, np.argmin(left, axis=1))
    looked = inside.ravel()
    spread = float(len(np.unique(key.ravel()[looked]))) / max(len(seen), 1)
    return at - n_left, at + n_right + 1, spread


def source_positions(doc_ids: Sequence[str]) -> np.ndarray:
    """Each document's position [D] in the corpus with every source's documents (:data:`_SOURCE_ID`) moved together at
    its first document's place, in the order of their numbers (then corpus order): the corpus order the chain reads
    (the set-shape decisions' "document indices one apart"). The identity where each
    source's documents already sit together in order, as in every corpus the shapes read; a corpus written in another
    order (shuffled) gets its sources' sections back beside each other, in order. One regular expression per id,
    then vectorised."""
    n = len(doc_ids)
    if not n:
        return np.zeros(0, dtype=np.int64)
    found = [_SOURCE_ID.match(i) for i in doc_ids]
    keys = np.asarray([m.group(1) if m else i for m, i in zip(found, doc_ids)], dtype=object)
    number = np.asarray([int(m.group(2)) if m else 0 for m in found], dtype=np.float64)  # float: any length of digits
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.lexsort((np.arange(n), number, first[inverse]))  # the source's first place, its number, corpus order
    positions = np.empty(n, dtype=np.int64)
    positions[order] = np.arange(n)
    return positions


def is_permutation(positions: np.ndarray, n: int) -> bool:
    """Whether ``positions`` is a permutation of 0..n-1 (int [n]): what a stored array must be to be read."""
    p = np.asarray(positions)
    if p.shape != (n,) or not np.issubdtype(p.dtype, np.integer):
        return False
    if not n:
        return True
    return bool(p.min() >= 0 and p.max() < n and np.bincount(p, minlength=n).max() == 1)


def paragraph_count(text: str) -> int:
    """A text's paragraphs (at least 1: :func:`mogg.core.text.paragraphs`); a text of one paragraph, or a format
    that keeps none, counts 1."""
    return max(1, len(paragraphs(text)))


def paragraph_counts(texts: Iterable[str]) -> np.ndarray:
    """Each text's paragraphs [D] (int64, at least 1: :func:`paragraph_count`)."""
    return np.fromiter((paragraph_count(t) for t in texts), dtype=np.int64)


def paragraph_starts(text: str, units: Sequence[str]) -> np.ndarray:
    """Within one document: the indices into ``units`` (its units, in order) of those that open a paragraph other
    than the first (int64, increasing), as :func:`mogg.core.text.unit_paragraphs` places each unit (found in order in
    the whitespace-normalised paragraphs; a unit not found stays in the paragraph before it). A text of one
    paragraph (:func:`mogg.core.text.paragraphs`) opens none."""
    return np.flatnonzero(np.diff(unit_paragraphs(text, units)) > 0).astype(np.int64) + 1


def paragraph_ids(unit_doc: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Every unit's paragraph as one id over the corpus (int64 [U], non-decreasing): a new id at each document's first
    unit and at each of ``starts`` (:data:`PARAGRAPH_STARTS`). ``unit_doc`` [U]: each unit's document, units of one
    document contiguous."""
    unit_doc = np.asarray(unit_doc)
    opens = np.zeros(len(unit_doc), dtype=bool)
    if len(unit_doc):
        opens[0] = True
        opens[1:] = unit_doc[1:] != unit_doc[:-1]
        opens[np.asarray(starts, dtype=np.int64)] = True
    return np.cumsum(opens) - 1
