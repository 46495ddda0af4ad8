"""Each question's best candidate's source read whole (issue 58; docs/results.md, "The best candidate's whole
source").

Where a corpus's ids name sources (``<source>-<k>``: an explanation's sentences, an abstract's contexts, each its
own short document) the question's evidence is often the whole source, but retrieval finds only the parts that
match the question: on the long explanations 40% of the gold sentences are candidates, on the snippet shapes
75-80%. So where most questions' best candidate sits in a source of two or more documents (:func:`reads_sources`),
each question reads its best candidate's source first: that source's candidates in the scorer's order, then its
documents' other units in source order, each valued at the least of that source's candidates' predictions, then
the rest. The values are handed out again in that order (:func:`~mogg.run.budget.selector.adapt.reorder`), so the
price of a token keeps its scale. Sections of a page read their own rule (:func:`~mogg.run.budget.selector.set_shape.page_sections`);
a corpus whose ids share one prefix (``doc-1`` ... ``doc-N``) has no sources (:data:`SOURCE_SPREAD`); nor is a source
read whole where most of the questions' best sources hold another question's evidence (:data:`SOURCE_SHARED`,
:func:`shared_sources`): ids that name a page whose paragraphs are documents, its sections several questions'.

Vectorised over the questions' best sources; the cost follows the questions, not the corpus.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np

from mogg.core.segments import group_best_row, pair_groups, range_indices
from mogg.ladders.sources import Sources, source_runs
from mogg.run.budget.selector.adapt import reorder
from mogg.run.budget.selector.set_shape import CLOSE_RATIO, SetShape, page_sections

log = logging.getLogger(__name__)

# a source is read whole where at least this share of the questions' best candidates sit in a source of 2 or more
# (and at most SOURCE_MAX_DOCS) documents: the long explanations 1.0, the snippet shapes 0.9-1.0, every whole-document
# shape 0 (each id its own source)
SOURCE_SHARE = 0.5
SOURCE_SPREAD = 0.1  # ... and the documents around them hold this many sources per document (one prefix: none)
SOURCE_MAX_DOCS = 64  # a source of more documents is not read whole (it bounds the rows a question adds)
# ... and only where fewer than this share of those questions' best sources hold another question's evidence: the best
# document of another question that owns it (no question predicts it higher) and that this question does not find
# close (a candidate document predicted at least set_shape.CLOSE_RATIO of its best). A source whose documents are
# several questions' different evidence is a page of sections, not one question's evidence. A majority, as
# set_shape.SECTIONS_SHARE and SHARED_SHARE, fixed before it was measured; the two conditions on the other question's
# best were read on the protocol's shapes (seed 0, docs/results.md, "A page's paragraphs, each a document"): counting
# every other question's best, or the owned ones, read the explanation sentences as pages of several questions (65%,
# 52%; the pages written a paragraph per document 95%, 93%), where their questions mostly find that document close
# themselves: evidence they share
SOURCE_SHARED = 0.5


class ReadRows(NamedTuple):
    """The rows a reading reads, each [N]: question, unit, tokens, document's tokens, and the scorer's prediction (a
    set's candidates, and the units :func:`read_best_source` adds; not the retrieval's
    :class:`~mogg.run.budget.selector.candidates.Candidates`)."""

    q: np.ndarray
    unit: np.ndarray
    tokens: np.ndarray
    doc_tokens: np.ndarray
    pred: np.ndarray


def _best_runs(pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray, sources: Sources,
               shape: SetShape | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Where the set reads its questions' best sources whole (:func:`reads_sources`): each question's best row
    [Q'], its source's position range (lo, hi) [Q'] and whether that source is short (2 to
    :data:`SOURCE_MAX_DOCS` documents) [Q']; None elsewhere, and where :data:`SOURCE_SHARED` of the short ones hold
    another question's evidence (:func:`shared_sources`; logged either way)."""
    if not len(cand_q) or (shape is not None and page_sections(shape)):
        return None
    best = group_best_row(pred, cand_q)
    lo, hi, spread = source_runs(sources, np.asarray(unit_doc)[np.asarray(unit)[best]], SOURCE_MAX_DOCS)
    short = (hi - lo >= 2) & (hi - lo <= SOURCE_MAX_DOCS)
    if spread < SOURCE_SPREAD or short.mean() < SOURCE_SHARE:
        return None
    cand_doc = np.asarray(unit_doc)[np.asarray(unit)]
    owned = owns_best(cand_q, cand_doc, pred, best)
    at = sources.positions[cand_doc[best]]
    shared = shared_sources(at, owned, lo, hi,
                            close_owned(cand_q, cand_doc, pred, best, owned, sources.positions, lo, hi))[short].mean()
    # the rule's two conditions on the other question's best, dropped one at a time: logged, never decided by
    looser = (shared_sources(at, np.ones(len(at), dtype=bool), lo, hi)[short].mean(),
              shared_sources(at, owned, lo, hi)[short].mean())
    log.info("%.0f%% of the questions' best sources hold another question's evidence, its owned best document that "
             "they do not find close (%s from %.0f%%, best_source.SOURCE_SHARED; any other question's best %.0f%%, "
             "owned %.0f%%)", 100 * shared, "not read whole" if shared >= SOURCE_SHARED else "read whole under",
             100 * SOURCE_SHARED, *(100 * x for x in looser))
    if shared >= SOURCE_SHARED:
        return None
    return best, lo, hi, short


def owns_best(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Whether each question owns its best document [Q'] (bool; ``best`` [Q'] its best row): no other question's
    candidate in that document is predicted higher (ties: the first row's question). ``cand_q``, ``cand_doc``,
    ``pred``: per candidate [N]."""
    top = group_best_row(pred, cand_doc)  # per candidate document, in increasing document order: its best row
    at = np.searchsorted(cand_doc[top], cand_doc[best])
    return cand_q[top[at]] == cand_q[best]


def close_owned(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, best: np.ndarray, owned: np.ndarray,
                positions: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per question [Q'] (``best`` [Q'] its best row, in question order; ``owned`` [Q'] :func:`owns_best`): how many
    other questions' owned best documents in its best source [lo, hi) (positions; ``positions`` [D] each document's)
    it finds close itself: a candidate document predicted at least
    :data:`~mogg.run.budget.selector.set_shape.CLOSE_RATIO` of its best (evidence the two questions share)."""
    qs = cand_q[best]
    slot = np.full(int(cand_q.max()) + 1, -1, dtype=np.int64)
    slot[qs] = np.arange(len(qs))
    # the candidates' documents numbered densely: the arrays follow the candidates, not the corpus's document ids
    docs, dense = np.unique(cand_doc, return_inverse=True)
    dense = dense.ravel()
    other = np.full(len(docs), -1, dtype=np.int64)  # each owned best document: its question
    other[dense[best][owned]] = qs[owned]
    owner = other[dense]
    row = slot[cand_q]  # each candidate's question's slot
    at = positions[cand_doc]
    hit = ((owner >= 0) & (owner != cand_q) & (pred >= CLOSE_RATIO * pred[best][row])
           & (at >= lo[row]) & (at < hi[row]))
    pair = pair_groups(cand_q[hit], cand_doc[hit])  # a document counted once per question
    first = np.unique(pair, return_index=True)[1] if len(pair) else np.zeros(0, dtype=np.int64)
    return np.bincount(row[hit][first], minlength=len(qs))


def shared_sources(at: np.ndarray, owned: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                   close: np.ndarray | None = None) -> np.ndarray:
    """Whether each question's best source [lo, hi) (positions, [Q']) holds the best document of another question
    that owns it (``at`` [Q']: each question's best document's position, inside its own source; ``owned`` [Q']
    (bool): whether the question owns it, :func:`owns_best`) and that the question does not find close (``close``
    [Q']: :func:`close_owned`; None: none): the owned positions in the range, counted by binary search over them
    sorted, less the question's own and the close ones."""
    owned = np.asarray(owned, dtype=bool)
    pos = np.sort(np.asarray(at, dtype=np.int64)[owned])
    n = np.searchsorted(pos, hi, "left") - np.searchsorted(pos, lo, "left") - owned
    return (n - (0 if close is None else np.asarray(close))) > 0


def reads_sources(pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray, sources: Sources,
                  shape: SetShape | None) -> bool:
    """Whether the set reads its questions' best sources whole (module doc): not sections of a page, many sources
    among the documents around the best candidates (:data:`SOURCE_SPREAD`), and :data:`SOURCE_SHARE` of the
    questions' best candidates in a source of 2 to :data:`SOURCE_MAX_DOCS` documents. ``unit_doc`` [U]: every
    unit's document (the corpus's numbering). Only the ids around the best candidates are read
    (:func:`~mogg.ladders.sources.source_runs`)."""
    return _best_runs(pred, cand_q, unit, unit_doc, sources, shape) is not None


def read_best_source(c: ReadRows, unit_doc: np.ndarray, unit_tokens: np.ndarray, doc_tokens_of, sources: Sources,
                     shape: SetShape | None) -> ReadRows:
    """``c`` with each question's best candidate's source read first (module doc), where :func:`reads_sources`;
    ``c`` as it is elsewhere. ``unit_doc`` [U] every unit's document, non-decreasing (units are stored by document);
    ``unit_tokens`` [U]; ``doc_tokens_of(units)``: the tokens of each given unit's document [M]."""
    pred = np.asarray(c.pred, dtype=np.float64)
    runs = _best_runs(pred, c.q, c.unit, unit_doc, sources, shape)
    if runs is None:
        return c
    best, lo, hi, keep = runs
    qs, lo, hi = c.q[best][keep], lo[keep], hi[keep]
    # every document of those sources, in source order: [M] (question, document)
    n_docs = hi - lo
    at = range_indices(lo, n_docs)
    dq, dd = np.repeat(qs, n_docs), sources.pos_doc[at]
    # their units (a document's units are one run of unit indices)
    u_lo, u_hi = np.searchsorted(unit_doc, dd, "left"), np.searchsorted(unit_doc, dd, "right")
    n_units = u_hi - u_lo
    uq = np.repeat(dq, n_units)
    uu = range_indices(u_lo, n_units)
    n_all = len(unit_tokens)
    new = ~np.isin(uq.astype(np.int64) * n_all + uu, np.asarray(c.q, dtype=np.int64) * n_all + c.unit)
    uq, uu = uq[new], uu[new]
    # the best source's candidates [N]: their document's source is the question's best one
    best_lo = np.full(int(c.q.max()) + 1, -1, dtype=np.int64)
    best_lo[qs] = lo
    best_hi = np.full(len(best_lo), -1, dtype=np.int64)
    best_hi[qs] = hi
    at = sources.positions[np.asarray(unit_doc)[c.unit]]  # each candidate's document's position
    in_src = (at >= best_lo[c.q]) & (at < best_hi[c.q])
    least = np.full(len(best_lo), np.inf)
    np.minimum.at(least, c.q[in_src], pred[in_src])
    # each added unit valued just under the least (1e-9 apart, in source order), so that the values handed out
    # below stay as distinct as the candidates' own and the ranking by value keeps the order made here
    rank_in = np.arange(len(uq)) - np.searchsorted(uq, uq, "left")  # uq is grouped by question, in source order
    value = least[uq] - 1e-9 * (1.0 + rank_in)
    q = np.r_[c.q, uq]
    p = np.r_[pred, value]
    # first the best source (its candidates by pred, then the other units in source order), then the rest by pred
    top = 1.0 + (np.abs(p).max() if len(p) else 0.0)
    score = np.where(np.r_[in_src, np.ones(len(uq), dtype=bool)], top, 0.0) + p
    log.info("the best candidate's whole source first: %d units read beside %d candidates (%.0f%% of the questions)",
             len(uu), len(c.q), 100 * keep.mean())
    return ReadRows(q, np.r_[c.unit, uu], np.r_[c.tokens, np.asarray(unit_tokens, dtype=np.float64)[uu]],
                      np.r_[c.doc_tokens, doc_tokens_of(uu)], reorder(p, q, score))
