"""A new set's shape, read off its candidates without labels (issue 58): whether its evidence looks like
whole short documents, and how far the ``fits`` price of a token (``transfer_lambda=fits``) reads there.

* :func:`whole_documents`: per question, the best-scored candidate's document, whether the block around that
  candidate covers it, and its close documents (:func:`close_reach`), as one :class:`SetShape`.
* :func:`whole_shape`: whether the block around most questions' best candidate covers most of that candidate's
  document (an abstract, an explanation); decided once per set, before any refit, at no budget: it picks the
  whole-document scorer (:func:`mogg.run.budget.selector.transfer.shape_scorer`) and the ``fits`` price alike. A
  block covering a document of several paragraphs does not count (:func:`whole_documents` with the ladder's
  :class:`Paragraphs`): that is a one-topic page, read as sections of a page.
* :func:`sections_share`: whether the set's close documents sit beside each other in the corpus (sections of
  one source: an abstract's contexts, an explanation's sentences) rather than anywhere (competing documents).
* :func:`~mogg.ladders.sources.source_positions`: the corpus order these decisions read, a source's documents
  ("<id>-<k>") together (the corpus's own order where it keeps them so; a shuffled corpus's regrouped); a ladder
  in the artifact store keeps it (:meth:`mogg.ladders.base.Ladder.source_unit_docs`).
* :func:`chain_first`: in a set of sections of sources, each question's documents chained to its best one
  read first; :func:`chain_evidence`: there E is at most that chain (:func:`sources_sections`).
* :func:`fits_target`: where the set is whole short documents, read at least up to min(B, the median reach:
  the best document, with its chain where the set is sections of sources (:func:`source_chain`), else with the
  close documents chained to it); where it is sections of a page, a share of the page; elsewhere (a sentence of a
  paper) the training sets' price.
* :func:`stands_alone`, :func:`fits_cap`, :func:`document_density`: where few questions own several documents and
  the best documents have no more candidate neighbours in corpus order than a shuffled corpus gives them (a whole
  explanation, a whole abstract) or their close documents seldom neighbour them (a page's sections a document
  each), each question reads its best document whole, and at most it.
* :func:`page_parts`: documents of a few paragraphs that are one question's each and sit beside their page's other
  parts in corpus order (a page's sections written one a document, each over two paragraphs) are whole short
  documents too, read so.
* :func:`owned_sections`, :func:`owned_first`: where the corpus order shows nothing but the questions own several
  close documents (:func:`owned_reach`: no other question predicts them higher; a source's sections written in
  another order, with ids that name no source), each question reads the documents it owns first, and at least
  them (:func:`fits_target`).
* :func:`page_sections`: where the set is not whole short documents but the block around the best candidate (never a
  question line heading its paragraph: :func:`below_headings`) covers a part of its document, or half its paragraph
  (:func:`paragraph_cover`: a page of many sections), a section
  of a page, not a sentence of a long paper, the ``fits`` price reads
  with E the best candidate's paragraph (:func:`section_evidence`), and at least the median one (a ladder without
  its paragraphs: a share of the best candidate's document, and at least that share of the median one).
* :func:`page_order`: there the best candidate's section is read first (:func:`paragraph_first`,
  :func:`section_rows`: its paragraph, and the paragraphs beside it that the question owns on a page holding
  another question's best paragraph, or on a page of one question those its words chain to it where the set's pages
  run their sections over paragraphs: :mod:`~mogg.run.budget.selector.cohesion`), E is that section
  (:func:`section_evidence`), the ``fits`` price reads at least the median one and each question at most its own or
  the median one (:func:`section_cap`); the F1 estimate
  reads the section's candidates as likely as its best (:func:`section_density`), and where the section is longer than
  B its best paragraph is read shortest first (:func:`short_first`); a question line that heads its paragraph is read
  last, as no evidence (:func:`heading_rows`, :func:`headings_last`); a ladder without its paragraphs
  (:class:`Paragraphs`) ranks each candidate with its neighbours.
* :data:`~mogg.run.budget.selector.units.UNITS`, :func:`declared`: a user who knows the evidence unit of their set
  declares it (``frontier.routers.selector.transfer_unit``, ``mogg-route --evidence-unit``), in place of the
  decisions above: no label-free rule tells a section of a long paper from a sentence of it, since the inputs are
  the same (docs/results.md, "One topic, many questions").

Vectorised over candidates; no loop over questions.

Length (over ~350 lines): every label-free decision about the set's shape, and the thresholds each reads, sit
together so that the report, the script and ``mogg-route`` read one decision each.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from mogg.core.segments import group_best_row, group_max, pair_groups, range_indices, range_sums
from mogg.core.text import is_list_item, is_question_line
from mogg.run.budget.selector.adapt import block_evidence, document_best, rank_within, reorder
from mogg.run.budget.selector.cohesion import COHESION_MIN_PARAGRAPHS, PageLinks, cohesive_links, peak_links
from mogg.run.budget.selector.plans import document_evidence
from mogg.run.budget.selector.units import AUTO, UNITS

log = logging.getLogger(__name__)

# the ``fits`` rule's thresholds, fixed before it was measured (a majority of the questions, half a document;
# the block's ratio is block_evidence's default), not tuned on the held-out shapes
FITS_SHARE = 0.5
FITS_COVER = 0.5
# a document is close where its best candidate is predicted at least this share of the question's best
# (close_reach): a quarter, against a half measured on seed 0 (docs/results.md, "Sections of one source")
CLOSE_RATIO = 0.25
# a set is sections of sources where at least this share of its questions with several close documents have
# one of them next to the best in corpus order (a majority, fixed before it was measured, as FITS_SHARE)
SECTIONS_SHARE = 0.5
# in a set of sections of sources, each question's documents chained to the best one are read first
# (chain_first): every candidate document (ratio 0) with at most one document missing between two of the
# chain's (gap 1), against no gap and the close ones at a quarter (five seeds, docs/results.md, "The chain first")
CHAIN_RATIO = 0.0
CHAIN_GAP = 1
# a set's best documents stand alone where the share of them with a candidate neighbour (linked_rows) exceeds a
# shuffled corpus's by less than a tenth of the questions (stands_alone): MedMCQA +0.00, PubMedQA* +0.02 against
# +0.22 to +0.82 on the sets of sentences or sections (docs/results.md, "Documents that stand alone"); every
# threshold from 0.03 to 0.22 decides alike there, and this one sits between them
ALONE_EXCESS = 0.1
# a set that is not whole short documents is sections of pages where the block around a question's best candidate
# covers at least this share of its document (the median over the questions): the page stand-ins 0.14, COVID-QA's
# sentences of long papers 0.01 (docs/results.md, "Sections of a page"); every threshold from 0.013 to 0.14
# decides alike there
PAGE_COVER = 0.05
# ... or, where the ladder holds the corpus's paragraphs, where that block covers at least this share of the best
# candidate's paragraph (the median over the questions): a page of many sections, where one section is under
# PAGE_COVER of its page (the page stand-in written 15 sections a page: 0.044 of the page, 0.90 of the paragraph),
# against COVID-QA's sentences of a paper's paragraph (0.29, seed 0). Half, as FITS_COVER reads half a document
# (docs/results.md, "Pages of many sections")
PARAGRAPH_COVER = 0.5
# where the ladder holds no paragraphs (Paragraphs; a ladder built outside the store), E (the estimated F1's evidence
# length) is this share of each question's best document, and the fits price reads at least this share of the median
# one (at most B); with them E is the best candidate's paragraph (section_evidence). Under E predicted and the training
# sets' price the page stand-ins read 44-96 tokens of 61-134-token sections; over the three page shapes (five seeds) 0.2 is the
# script's leximin among the shares 0.2-0.33, 30 tokens and the page's mean paragraph: 30 tokens has the best worst
# shape (the abstract pages -0.088), 0.2 is within one standard error of it (-0.095) with the better next-worst
# (the long sections +0.020 against -0.027); a third had -0.107 (docs/results.md, "The page share by the worst shape").
# Since the ladder holds its paragraphs this share reads only where a corpus keeps no breaks (candidate_paragraphs):
# there, on the two page stand-ins written each page on one line (the abstract pages so written read as whole
# documents and never reach it), 0.3 is the leximin of 0.2 / 0.3 / 0.4 by the worst shape (its figures: docs/results.md,
# "A page on one line")
PAGE_SHARE = 0.3
# there (no paragraphs) each candidate is also ranked by its neighbours (page_order): its prediction plus this weight times those of
# the candidates beside it in its document (a section is several sentences in a row; a lone match elsewhere is not);
# among the weights 0.1-0.75, within one standard error of the best worst shape (0.35, the long-section page stand-in)
# and the best next-worst (the page stand-in), as the script's leximin (docs/results.md, "The neighbours' order")
PAGE_SMOOTH = 0.15
PARA_TOP = 1  # the best paragraph on sections of a page: the one holding the best candidate (paragraph_first)
# A section over several paragraphs (section_rows): the best paragraph and the paragraphs beside it in its page that
# the question owns, on a page holding another question's best paragraph, whose best candidate predicts at least this
# share of the question's best, chained; None: the best paragraph alone. 0 (any share) and CLOSE_RATIO tie on the
# worst page shape (the abstract pages, +0.003 / +0.009 over seeds 0 / 1-2) and 0 reads the paragraph halves 0.002
# more (docs/results.md, "A section over several paragraphs"); half of the best loses the halves again (-0.011)
SECTION_RATIO: float | None = 0.0
# a set's evidence spans several documents whatever the corpus order where at least this share of its questions
# own two or more close documents (owned_reach): documents predicted at least OWN_RATIO of the question's best whose
# best question, of all the set's, is this one. Seed 0, the first scorer: MedMCQA 0.18, PubMedQA* 0.11 (one document
# each) against the explanation sentences 0.38, the long explanations 0.58, the snippet shapes 0.61-0.69; a
# quarter, between them, fixed before the shuffled files were read (docs/results.md, "Ids that name nothing")
OWN_RATIO = 0.5
OWN_SHARE = 0.25
# a set's documents are parts of pages, one question's section each (page_parts), only where fewer than this share of
# its questions have a best document that is another question's best too: a majority, as SECTIONS_SHARE. A quarter
# (OWN_SHARE) was read first, and the headed sections written one a document share 38% under the first scorer (its
# wrong documents; their gold documents 2%), where a page of two sections that two questions ask shares most
SHARED_SHARE = 0.5
CHANCE_DRAWS = 4  # shuffled corpora averaged for the chance share (the candidates' documents at random places)


class SetShape(NamedTuple):
    """A new set's shape, per question [Q], on one scorer's predictions (:func:`whole_documents`): ``doc`` the
    tokens of its best candidate's document (0 without candidates), ``covered`` whether the block around that
    candidate covers :data:`FITS_COVER` of it, and (:func:`close_reach`) ``close`` the tokens of every close
    document, ``chain`` those of the close documents chained to the best one in corpus order (both >= ``doc``),
    ``linked`` whether any other candidate document sits beside the best one in corpus order
    (:func:`linked_rows`), ``chance`` the share of such questions in a shuffled corpus (:func:`chance_linked`),
    ``block`` the tokens of the block around the best candidate (:func:`~mogg.run.budget.selector.adapt.block_evidence`),
    ``owned`` the tokens of the close documents the question owns (:func:`owned_reach` at :data:`CLOSE_RATIO`, what
    :func:`fits_target` reads there) and ``owns`` the number it owns at :data:`OWN_RATIO` (what
    :func:`owned_sections` decides by); ``paragraph`` the tokens of the best candidate's paragraph (without the
    ladder's paragraphs None: :func:`paragraph_cover`), ``parts`` the paragraphs of its best candidate's document and
    ``shared`` whether that document is another question's best too (:func:`page_parts`; the eight None where not
    computed); ``declared`` the evidence
    unit a user declared for the set (:data:`~mogg.run.budget.selector.units.UNITS`; ``auto``: the decisions read the
    arrays; :func:`declared`)."""

    doc: np.ndarray
    covered: np.ndarray
    close: np.ndarray
    chain: np.ndarray
    linked: np.ndarray | None = None
    chance: float | None = None
    block: np.ndarray | None = None
    owned: np.ndarray | None = None
    owns: np.ndarray | None = None
    paragraph: np.ndarray | None = None
    parts: np.ndarray | None = None
    shared: np.ndarray | None = None
    declared: str = AUTO


def declared(shape: SetShape, unit: str | None) -> SetShape:
    """``shape`` with the evidence unit ``unit`` declared (:data:`~mogg.run.budget.selector.units.UNITS`; None: as
    it is): ``document`` reads the set as whole short documents (:func:`whole_set`), ``section`` as sections of a page
    (:func:`page_sections`), ``sentence`` as neither, whatever the candidates show; the decisions within each
    (sections of sources, documents that stand alone, a section over paragraphs) still read the candidates."""
    if unit is None:
        return shape
    if unit not in UNITS:
        raise ValueError(f"evidence unit {unit!r}: one of {', '.join(UNITS)}")
    return shape._replace(declared=unit)


def whole_set(shape: SetShape) -> bool:
    """Whether the set reads as whole short documents: :func:`whole_shape` on its arrays, or its documents are parts
    of pages (:func:`page_parts`), or as declared."""
    if shape.declared != AUTO:
        return shape.declared == "document"
    return whole_shape(shape.doc, shape.covered) or page_parts(shape)


def page_parts(shape: SetShape) -> bool:
    """Whether a set's documents are the parts of pages, a section a document, each over a few paragraphs: not whole
    short documents by their blocks (:func:`whole_shape`), but
    (1) the best documents hold fewer than :data:`~mogg.run.budget.selector.cohesion.COHESION_MIN_PARAGRAPHS`
    paragraphs at the median;
    (2) fewer than :data:`SHARED_SHARE` of the questions share their best document with another question;
    (3) the corpus order keeps each best document beside candidate documents beyond chance (the share above a shuffled
    corpus's by :data:`ALONE_EXCESS` or more: its page's other parts, in order);
    (4) those documents are seldom close to the best one (:func:`sections_share` < :data:`SECTIONS_SHARE`) and fewer
    than :data:`OWN_SHARE` of the questions own several documents: the neighbours are other questions' evidence.
    Such a document is one question's section, read whole as a section of a page written one section per document is
    (:func:`stands_alone`). Read as a page of one question, its best paragraph alone was half the section: a document
    of two paragraphs has no page median for its paragraphs' shared words to stand out from
    (:mod:`~mogg.run.budget.selector.cohesion`). A whole page of one question (an abstract: its background, methods,
    results and conclusion, one question asking for one of them) holds more paragraphs, and its corpus order keeps
    nothing beside it beyond chance, so it stays a page (docs/results.md, "A headed section per document: the parts
    of a page")."""
    if shape.parts is None or shape.shared is None or shape.linked is None or shape.chance is None:
        return False
    has = np.asarray(shape.doc) > 0
    if not has.any() or whole_shape(shape.doc, shape.covered):
        return False
    return bool(np.median(np.asarray(shape.parts)[has]) < COHESION_MIN_PARAGRAPHS
                and shared_share(shape) < SHARED_SHARE
                and linked_share(shape) - shape.chance >= ALONE_EXCESS
                and sections_share(shape) < SECTIONS_SHARE and owned_share(shape) < OWN_SHARE)


def _close_pairs(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, n_questions: int, ratio: float,
                 gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The candidates' (question, document) pairs and which of them are close and chained (:func:`close_reach`):
    ``pair`` [N] each candidate's dense pair id (question, document order), ``first`` [P] one row per pair,
    ``keep`` [P] whether the pair is close, ``inrun`` [K] (K = keep.sum()) whether a close pair is in its
    question's run chained to the best one, ``pid`` [K] the close pairs' ids."""
    p = np.nan_to_num(np.asarray(pred, dtype=np.float64), nan=-np.inf)
    cand_doc = np.asarray(cand_doc, dtype=np.int64)
    pair = pair_groups(cand_q, cand_doc)  # dense ids in (question, document) order
    best_pair = group_max(p, pair)
    top = group_best_row(p, cand_q)  # each question's best row (ties: the first)
    best_q = np.full(n_questions, -np.inf)
    best_q[cand_q[top]] = p[top]
    top_pair = np.full(n_questions, -1)
    top_pair[cand_q[top]] = pair[top]
    first = np.unique(pair, return_index=True)[1]  # one row per (question, document), in that order
    qq, dd = cand_q[first], cand_doc[first]
    keep = (best_pair >= ratio * best_q[qq]) | (np.arange(len(first)) == top_pair[qq])
    pid, qq, dd = np.flatnonzero(keep), qq[keep], dd[keep]
    run = np.cumsum(np.r_[True, (qq[1:] != qq[:-1]) | (dd[1:] - dd[:-1] > gap + 1)])  # chained neighbours
    is_top = pid == top_pair[qq]
    run_of_top = np.zeros(n_questions, dtype=np.int64)
    run_of_top[qq[is_top]] = run[is_top]
    return pair, first, keep, run == run_of_top[qq], pid


def close_reach(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, doc_tokens: np.ndarray,
                n_questions: int, ratio: float = CLOSE_RATIO, gap: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per question [Q]: the tokens of its close documents (its best-scored candidate's document and every
    document whose best candidate is predicted at least ``ratio`` times the question's best), and of the
    run of them chained to the best one in corpus order (document indices at most ``gap`` + 1 apart). ``cand_q``, ``cand_doc``, ``pred``, ``doc_tokens``: per
    candidate [N]; 0 without candidates. Where a corpus keeps a source's sections together (an abstract's
    contexts, an explanation's sentences, the snippets of one paper) the evidence spans the run; competing
    documents (explanations of other questions, a shuffled corpus) are seldom neighbours."""
    close, chain = np.zeros(n_questions), np.zeros(n_questions)
    if not len(cand_q):
        return close, chain
    _, first, keep, inrun, _ = _close_pairs(cand_q, cand_doc, pred, n_questions, ratio, gap)
    qq, tok = cand_q[first][keep], np.asarray(doc_tokens, dtype=np.float64)[first][keep]
    np.add.at(close, qq, tok)
    np.add.at(chain, qq[inrun], tok[inrun])
    return close, chain


def _owned_pairs(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, n_questions: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The candidates' (question, document) pairs and what ownership reads of them (:func:`owned_reach`): ``pair``
    [N] each candidate's dense pair id, ``first`` [P] one row per pair, ``mine`` [P] bool, no other question
    predicts the document higher, and ``best`` [2, P] the pair's best prediction and its question's best: owned
    at a ratio r where ``mine`` and the first is at least r times the second (:func:`_owned_at`)."""
    p = np.nan_to_num(np.asarray(pred, dtype=np.float64), nan=-np.inf)
    cand_q, cand_doc = np.asarray(cand_q, dtype=np.int64), np.asarray(cand_doc, dtype=np.int64)
    pair = pair_groups(cand_q, cand_doc)
    pbest = group_max(p, pair)  # [P] each (question, document)'s best candidate
    first = np.unique(pair, return_index=True)[1]
    qq = cand_q[first]
    best_q = np.full(n_questions, -np.inf)
    np.maximum.at(best_q, qq, pbest)
    _, d_inv = np.unique(cand_doc[first], return_inverse=True)
    d_top = np.full(int(d_inv.max()) + 1, -np.inf)
    np.maximum.at(d_top, d_inv, pbest)  # each document's best prediction over the set's questions
    return pair, first, pbest >= d_top[d_inv], np.stack([pbest, best_q[qq]])


def _owned_at(mine: np.ndarray, best: np.ndarray, ratio: float) -> np.ndarray:
    """Which pairs [P] (bool) the question owns at ``ratio`` (:func:`_owned_pairs`' ``mine`` and ``best``)."""
    return mine & (best[0] >= ratio * best[1])


def _owned_sums(cand_q: np.ndarray, first: np.ndarray, own: np.ndarray, doc_tokens: np.ndarray, n_questions: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per question [Q]: the tokens and the number of its owned pairs ``own`` [P] (``first``: one row per pair)."""
    qq = np.asarray(cand_q, dtype=np.int64)[first][own]
    tok, n = np.zeros(n_questions), np.zeros(n_questions, dtype=np.int64)
    np.add.at(tok, qq, np.asarray(doc_tokens, dtype=np.float64)[first][own])
    np.add.at(n, qq, 1)
    return tok, n


def owned_reach(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, doc_tokens: np.ndarray,
                n_questions: int, ratio: float = OWN_RATIO) -> tuple[np.ndarray, np.ndarray]:
    """Per question [Q]: the tokens and the number of the documents it owns, whatever the corpus order: every
    candidate document predicted at least ``ratio`` times the question's best whose best prediction over all the
    set's questions is this question's (ties: each owns it; its best document too only where no other question
    predicts it higher, so a question owns none where its best document is another's). ``cand_q``,
    ``cand_doc``, ``pred``, ``doc_tokens``: per candidate [N]. Where a question's evidence is several short
    documents (a source's sections, the snippets of several papers) it owns several of them; where it is one
    document (an explanation, an abstract), the other close documents are the evidence of other questions,
    which own them."""
    if not len(cand_q):
        return np.zeros(n_questions), np.zeros(n_questions, dtype=np.int64)
    _, first, mine, best = _owned_pairs(cand_q, cand_doc, pred, n_questions)
    return _owned_sums(cand_q, first, _owned_at(mine, best, ratio), doc_tokens, n_questions)


def owned_rows(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, n_questions: int,
               ratio: float = CLOSE_RATIO) -> np.ndarray:
    """Whether each candidate [N] (bool) sits in a document its question owns (:func:`owned_reach` at ``ratio``)."""
    if not len(cand_q):
        return np.zeros(0, dtype=bool)
    pair, _, mine, best = _owned_pairs(cand_q, cand_doc, pred, n_questions)
    return _owned_at(mine, best, ratio)[pair]  # pair ids are dense, in the order of their first rows


def owned_share(shape: SetShape) -> float:
    """The share of the questions with candidates that own two or more documents (:func:`owned_reach`; 0 where
    none has candidates or it was not computed)."""
    has = np.asarray(shape.doc) > 0
    return float((np.asarray(shape.owns)[has] >= 2).mean()) if shape.owns is not None and has.any() else 0.0


def shared_share(shape: SetShape) -> float:
    """The share of the questions with candidates whose best document is another question's best too
    (``shape.shared``; 0 where none has candidates or it was not computed)."""
    has = np.asarray(shape.doc) > 0
    return float(np.asarray(shape.shared)[has].mean()) if shape.shared is not None and has.any() else 0.0


def unordered(shape: SetShape) -> bool:
    """Whether the corpus order says nothing of the set's whole short documents (:func:`whole_shape`): the share of
    the best documents with a candidate neighbour (:func:`linked_share`) above a shuffled corpus's by less than
    :data:`ALONE_EXCESS`."""
    if shape.linked is None or shape.chance is None or not whole_set(shape):
        return False
    return linked_share(shape) - shape.chance < ALONE_EXCESS


def owned_sections(shape: SetShape) -> bool:
    """Whether a set's evidence is several short documents the corpus order does not show (:func:`unordered`, and
    at least :data:`OWN_SHARE` of the questions own two or more documents: :func:`owned_share`): the snippets of a
    corpus written in another order, with ids that name no source. There each question reads at least its owned
    documents (:func:`fits_target`) and no cap (:func:`stands_alone`)."""
    return unordered(shape) and owned_share(shape) >= OWN_SHARE


def chain_rows(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, n_questions: int,
               ratio: float = CLOSE_RATIO, gap: int = 0) -> np.ndarray:
    """Whether each candidate [N] (bool) belongs to a document of its question's run of close documents
    chained to the best one in corpus order (:func:`close_reach`'s ``chain``, the same arguments)."""
    if not len(cand_q):
        return np.zeros(0, dtype=bool)
    pair, _, keep, inrun, pid = _close_pairs(cand_q, cand_doc, pred, n_questions, ratio, gap)
    member = np.zeros(len(keep), dtype=bool)
    member[pid[inrun]] = True
    return member[pair]


def linked_rows(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, n_questions: int,
                ratio: float = CHAIN_RATIO, gap: int = CHAIN_GAP) -> np.ndarray:
    """Per question [Q] (bool): whether another of its candidate documents is chained to its best-scored
    candidate's document in corpus order, as :func:`chain_first` chains them (:func:`chain_rows` at ``ratio``,
    ``gap``): the best document has neighbours among the candidates (a source's sections, an explanation's
    sentences) rather than standing alone (a whole explanation, a whole abstract among others)."""
    out = np.zeros(n_questions, dtype=bool)
    if not len(cand_q):
        return out
    _, first, keep, inrun, _ = _close_pairs(cand_q, cand_doc, pred, n_questions, ratio, gap)
    return np.bincount(np.asarray(cand_q)[first][keep][inrun], minlength=n_questions) > 1


def linked_share(shape: SetShape) -> float:
    """The share of the questions with candidates whose best document has a candidate neighbour
    (``shape.linked``; 0 where none has candidates or it was not computed)."""
    has = np.asarray(shape.doc) > 0
    return float(np.asarray(shape.linked)[has].mean()) if shape.linked is not None and has.any() else 0.0


def chance_linked(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, n_questions: int, n_docs: int,
                  seed: int = 0, draws: int = CHANCE_DRAWS) -> float:
    """The share of the questions with candidates whose best document would have a candidate neighbour
    (:func:`linked_rows`) in a corpus whose order says nothing: the candidates' documents placed at distinct
    random indices among ``n_docs`` (``draws`` draws seeded by ``seed``, averaged). What neighbours by chance in a small corpus
    (PubMedQA*'s and MedMCQA's 2,670 documents: 0.01-0.02 at 11-13 candidate documents a question)."""
    has = np.bincount(np.asarray(cand_q, dtype=np.int64), minlength=n_questions) > 0 if len(cand_q) else None
    if has is None or not has.any():
        return 0.0
    rng = np.random.default_rng(seed)
    # only the candidates' documents move: distinct random places among n_docs (what a permutation gives
    # them), drawn without a permutation of the whole corpus, so the cost follows the candidates
    uniq, inv = np.unique(np.asarray(cand_doc, dtype=np.int64), return_inverse=True)
    return float(np.mean([linked_rows(cand_q, rng.choice(n_docs, size=len(uniq), replace=False)[inv], pred,
                                      n_questions)[has].mean() for _ in range(draws)]))


def stands_alone(shape: SetShape) -> bool:
    """Whether a set of whole short documents (:func:`whole_shape`) has best documents that stand alone in its
    corpus: fewer than :data:`OWN_SHARE` of the questions own several documents (:func:`owned_share`), and either
    the share of the best documents with a candidate neighbour (:func:`linked_share`) is above a shuffled corpus's
    (``shape.chance``) by less than :data:`ALONE_EXCESS` (:func:`unordered`), or the close documents seldom
    neighbour the best one (:func:`sections_share` < :data:`SECTIONS_SHARE`). Then a question's evidence is one
    document (a whole explanation, a whole abstract, one section of a page written a section per document), not a
    source's sections or an explanation's sentences beside each other, nor the snippets of a corpus written in
    another order. Where the corpus keeps a page's sections together, one document each, the best documents have
    neighbours (the page's other sections: 19% of the page stand-in's so written against 2% shuffled), but those
    are other questions' evidence, which own them (docs/results.md, "A page written one section per document")."""
    if shape.linked is None or shape.chance is None or not whole_set(shape) or owned_share(shape) >= OWN_SHARE:
        return False  # the order not read (a shape built without it), or not one document a question
    return unordered(shape) or sections_share(shape) < SECTIONS_SHARE


def fits_cap(shape: SetShape) -> np.ndarray | None:
    """The most tokens each question [Q, 1] reads under the ``fits`` price: where the set's best documents stand
    alone (:func:`stands_alone`), its best document's tokens (without candidates: inf), but in a corpus whose order
    says nothing (:func:`unordered`) not for a question whose best document has a candidate neighbour; None
    elsewhere (no cap). MedMCQA read 128 tokens at B = 128 where its explanation holds about 70 (the training sets'
    price went on reading). Where the order keeps neighbours (a page's sections a document each) they are other
    questions' evidence, so every question reads at most its best document."""
    if not stands_alone(shape):
        return None
    doc = np.asarray(shape.doc, dtype=np.float64)
    linked = np.asarray(shape.linked) & unordered(shape)
    return np.where(linked | (doc <= 0), np.inf, doc)[:, None]


def document_density(pred: np.ndarray, cand_q: np.ndarray, cand_doc: np.ndarray) -> np.ndarray:
    """The densities [N] the plans' estimated F1 reads where the set's documents stand alone (:func:`stands_alone`):
    ``pred``, except that each candidate of its question's best document (the best-scored candidate's, ``cand_doc``
    [N]) takes the question's best prediction. There the document is the evidence, so its sentences are evidence
    together, as a section's are (:func:`section_density`): under their own predictions a question stopped inside its
    best document (the page stand-in written a section per document read 65 tokens for F1 0.544 at B = 128, read
    whole 74 for 0.571; docs/results.md, "A page written one section per document"). The ranking stays ``pred``'s."""
    pred = np.asarray(pred, dtype=np.float64)
    if not len(pred):
        return pred
    cand_q, cand_doc = np.asarray(cand_q, dtype=np.int64), np.asarray(cand_doc, dtype=np.int64)
    top = group_best_row(pred, cand_q)
    best_doc = np.full(int(cand_q.max()) + 1, -1, dtype=np.int64)
    best_doc[cand_q[top]] = cand_doc[top]
    return _as_likely_as_best(pred, cand_q, cand_doc == best_doc[cand_q])


def _as_likely_as_best(pred: np.ndarray, cand_q: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """``pred`` [N] with each ``inside`` row [N] (bool) at its question's best prediction: the densities
    :func:`section_density` and :func:`document_density` read, where a unit of candidates is evidence as a whole."""
    best = group_max(pred, np.asarray(cand_q, dtype=np.int64))
    return np.where(inside, best[np.asarray(cand_q, dtype=np.int64)], pred)


def reads_whole_document(shape: SetShape) -> bool:
    """Whether each question reads its best document whole (:func:`document_density`, the ``fits`` price within
    :func:`fits_cap`): the set's documents stand alone (:func:`stands_alone`) and it is neither sections of a page
    nor sections of sources, whose own readings decide there."""
    return stands_alone(shape) and not (page_sections(shape) or sources_sections(shape))


def whole_documents(cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray, tokens: np.ndarray, pred: np.ndarray,
                    doc_tokens: np.ndarray, n_questions: int, paras: Paragraphs | None = None) -> SetShape:
    """A new set's shape (:class:`SetShape`, per question [Q]) on ``pred`` [N]: the tokens of its best-scored
    candidate's document (0 without candidates), whether the block of candidates around that candidate
    (:func:`block_evidence`) covers at least :data:`FITS_COVER` of it (bool), and its close documents
    (:func:`close_reach`). No labels: PubMedQA*'s and MedMCQA's best blocks cover their
    document (median 0.98 and 1.0), the page stand-in's a section (0.14), COVID-QA's a sentence (0.02).

    With the ladder's ``paras`` (a corpus whose candidate documents hold several paragraphs), a block covering a
    document of two or more paragraphs does not count as covering it: a page of several sections whose every
    sentence is a candidate is one topic, not one piece of evidence. The whole-document shapes' best documents hold
    one paragraph (PubMedQA*, the snippet shapes: 98-100%), the page shapes' four or five (docs/results.md,
    "A page of paragraphs is not one document").

    A question line that heads its paragraph (:attr:`Paragraphs.heading`) is read as no candidate here
    (:func:`below_headings`): it repeats the question, so it is often the best, and the block around it is that line
    alone, which on a page of many long answers covers under :data:`PAGE_COVER` of the page and under
    :data:`PARAGRAPH_COVER` of its paragraph; the answer's own candidates show the section (docs/results.md, "A page
    of many questions and their answers")."""
    from mogg.run.budget.selector.plans import document_evidence

    if paras is not None and paras.heading is not None and paras.heading.any():
        pred = below_headings(pred, paras.heading)
    doc = document_evidence(cand_q, pred, doc_tokens, n_questions)
    block = block_evidence(cand_q, unit, unit_doc, tokens, pred, n_questions)
    covered = (doc > 0) & (block >= FITS_COVER * doc)
    paragraph = parts = None
    if paras is not None and len(cand_q):
        parts = document_evidence(cand_q, pred, paras.in_doc.astype(np.float64), n_questions)
        covered &= parts < 2
        paragraph = document_evidence(cand_q, pred, np.asarray(paras.tokens, dtype=np.float64), n_questions)
        if paras.listed is not None:  # a list's items answer together: the block around a best item is its list
            block = np.maximum(block, document_evidence(cand_q, pred, paras.listed, n_questions))
    unit_doc = np.asarray(unit_doc)
    cand_doc = unit_doc[unit]
    shared = None
    if parts is not None:  # whether each question's best document is another question's best too (page_parts)
        top = group_best_row(pred, cand_q)  # each question's best row: its best document cand_doc[top]
        _, inv, counts = np.unique(cand_doc[top], return_inverse=True, return_counts=True)
        shared = np.zeros(n_questions, dtype=bool)
        shared[np.asarray(cand_q)[top]] = counts[inv.ravel()] >= 2
    return SetShape(doc, covered, *close_reach(cand_q, cand_doc, pred, doc_tokens, n_questions),
                    linked_rows(cand_q, cand_doc, pred, n_questions),
                    chance_linked(cand_q, cand_doc, pred, n_questions, int(unit_doc.max()) + 1 if len(unit_doc) else 0),
                    block, *_owned_shape(cand_q, cand_doc, pred, doc_tokens, n_questions), paragraph, parts, shared)


def _owned_shape(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, doc_tokens: np.ndarray,
                 n_questions: int) -> tuple[np.ndarray, np.ndarray]:
    """:class:`SetShape`'s ``owned`` (tokens owned at :data:`CLOSE_RATIO`) and ``owns`` (documents owned at
    :data:`OWN_RATIO`), [Q] each, from one pass over the pairs (:func:`owned_reach` at each ratio)."""
    if not len(cand_q):
        return np.zeros(n_questions), np.zeros(n_questions, dtype=np.int64)
    _, first, mine, best = _owned_pairs(cand_q, cand_doc, pred, n_questions)
    return (_owned_sums(cand_q, first, _owned_at(mine, best, CLOSE_RATIO), doc_tokens, n_questions)[0],
            _owned_sums(cand_q, first, _owned_at(mine, best, OWN_RATIO), doc_tokens, n_questions)[1])


def _block_share(shape: SetShape, whole: np.ndarray | None) -> float:
    """The median over the questions with candidates of ``shape.block`` / ``whole`` [Q] (0 where none has candidates
    or either was not computed)."""
    has = np.asarray(shape.doc) > 0
    if shape.block is None or whole is None or not has.any():
        return 0.0
    return float(np.median(np.asarray(shape.block, dtype=np.float64)[has] / np.asarray(whole, dtype=np.float64)[has]))


def block_cover(shape: SetShape) -> float:
    """The median share of the best candidate's document that the block around it covers (``shape.block`` /
    ``shape.doc``; 0 where none has candidates or it was not computed)."""
    return _block_share(shape, shape.doc)


def paragraph_cover(shape: SetShape) -> float:
    """The median share of the best candidate's paragraph that the block around it covers (``shape.block`` /
    ``shape.paragraph``, a paragraph of at least one token; 0 where the ladder's paragraphs were not read)."""
    return _block_share(shape, None if shape.paragraph is None else np.maximum(shape.paragraph, 1.0))


def page_sections(shape: SetShape) -> bool:
    """Whether a set's evidence looks like one section of a page (:func:`block_cover` >= :data:`PAGE_COVER`, or
    with the ladder's paragraphs :func:`paragraph_cover` >= :data:`PARAGRAPH_COVER`, where the set is not whole short
    documents, :func:`whole_shape`), not one sentence of a long paper. There the ``fits``
    price reads with E :data:`PAGE_SHARE` of the best candidate's document (a share of the page:
    :func:`~mogg.run.budget.selector.plans.document_evidence`) and at least that share of the median page
    (:func:`fits_target`), so that a section longer than the training sets' evidence is read: under E predicted
    and their price the page stand-ins read 44-96 tokens of 61-134-token sections. A declared unit (:func:`declared`)
    decides instead."""
    if shape.declared != AUTO:
        return shape.declared == "section"
    if shape.block is None or whole_set(shape):
        return False
    return block_cover(shape) >= PAGE_COVER or paragraph_cover(shape) >= PARAGRAPH_COVER


def page_evidence(cand_q: np.ndarray, pred: np.ndarray, doc_tokens: np.ndarray, n_questions: int,
                  share: float = PAGE_SHARE) -> np.ndarray:
    """E on sections of a page (:func:`page_sections`), tokens [Q]: ``share`` of each question's best
    candidate's document (the page), 0 where a question has no candidate."""
    return share * document_evidence(cand_q, pred, doc_tokens, n_questions)


class Paragraphs(NamedTuple):
    """A ladder's paragraphs as the page rule reads them, per candidate: ``cand`` int64 [N], each candidate's
    paragraph as one id over the corpus (equal ids: one paragraph; a document's paragraphs numbered on in page
    order); ``tokens`` float64 [N], that paragraph's tokens; ``in_doc`` int64 [N], the paragraphs of the candidate's
    document; ``doc`` int64 [N], the candidate's document; ``first`` int64 [N], the paragraph's first unit (None
    where not known); ``links``: the pages' words, which tell a page's paragraphs of one section apart where no other
    question marks them (:class:`~mogg.run.budget.selector.cohesion.PageLinks`; None: not read); ``listed`` float64
    [N]: the tokens of the list the candidate is in (:func:`list_spans`; 0 outside one; None: not read);
    ``contested``: on a page of several questions, a paragraph beside a question's section that another question
    predicts higher joins the section where the two share their words most (:func:`section_rows`); ``heading`` bool
    [N]: whether the candidate is a question line opening its paragraph (:func:`heading_rows`; None: not read)
    (:func:`candidate_paragraphs`)."""

    cand: np.ndarray
    tokens: np.ndarray
    in_doc: np.ndarray
    doc: np.ndarray
    first: np.ndarray | None = None
    links: PageLinks | None = None
    listed: np.ndarray | None = None
    contested: bool = False
    heading: np.ndarray | None = None


def candidate_paragraphs(starts: np.ndarray | None, unit_tokens: np.ndarray, cand_unit: np.ndarray,
                         unit_doc: np.ndarray, unit_text: Sequence[str] | None = None, contested: bool = False
                         ) -> Paragraphs | None:
    """:class:`Paragraphs` of candidates ``cand_unit`` [N]. ``starts``: the units that open a paragraph other than
    their document's first (:meth:`mogg.ladders.base.Ladder.paragraph_starts`, increasing; None for a ladder
    without them); ``unit_tokens`` [U]; ``unit_doc`` [U]: each unit's document, non-decreasing. None also where most
    of the candidates' documents hold one paragraph (a corpus that keeps no breaks: its paragraph would be the
    page, so the rule before reads there).

    The cost follows the questions, not the corpus: binary searches over ``starts`` and ``unit_doc``, and only the
    candidate paragraphs' units are summed. A unit u of document d lies in paragraph d + (starts <= u), the id
    :func:`mogg.ladders.sources.paragraph_ids` gives it where every document holds a unit. ``unit_text`` [U] (the
    ladder's units' texts): the pages' words read for :attr:`Paragraphs.links`, and the question lines that head a
    paragraph (:attr:`Paragraphs.heading`); ``contested``: :attr:`Paragraphs.contested` (a transfer directory's
    ``transfer_section_cohesion``)."""
    if starts is None or not len(cand_unit):
        return None
    starts = np.asarray(starts, dtype=np.int64)
    unit = np.asarray(cand_unit, dtype=np.int64)
    doc = np.asarray(unit_doc[unit], dtype=np.int64)
    docs, inv = np.unique(doc, return_inverse=True)
    first = np.searchsorted(unit_doc, docs, side="left")  # [D'] each candidate document's units: [first, end)
    end = np.searchsorted(unit_doc, docs, side="right")
    held = np.searchsorted(starts, end - 1, side="right") - np.searchsorted(starts, first, side="right") + 1
    if np.median(held) < 2:
        log.info("sections of a page: most candidate documents hold one paragraph (no breaks)")
        return None
    k = np.searchsorted(starts, unit, side="right")  # [N] paragraph starts at or before each candidate
    inv = inv.ravel()
    # [N] the paragraph's units [lo, hi): from its start (or its document's first unit) to the next start (or the
    # document's end); ``starts`` is not empty here, since some document holds two paragraphs
    lo = np.maximum(first[inv], np.where(k > 0, starts[np.maximum(k - 1, 0)], 0))
    hi = np.minimum(end[inv], np.append(starts, np.iinfo(np.int64).max)[k])
    pid = doc + k
    _, at, back = np.unique(pid, return_index=True, return_inverse=True)
    back = back.ravel()
    listed = None
    if unit_text is not None:  # each candidate's list: its paragraph's span of lead-in and items, if it lies in it
        slo, shi = list_spans(unit_text, lo[at], hi[at])
        inside = (unit >= slo[back]) & (unit < shi[back])
        listed = np.where(inside, range_sums(unit_tokens, slo, shi)[back], 0.0)
    paras = Paragraphs(pid, range_sums(unit_tokens, lo[at], hi[at])[back], held[inv], doc, lo,
                       None if unit_text is None else PageLinks(unit_text, starts, unit_doc), listed, bool(contested))
    return paras if unit_text is None else paras._replace(heading=heading_rows(unit, paras, unit_text))


def list_spans(unit_text: Sequence[str], lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per paragraph [lo, hi) (its units, int64 [P] each), the units of the list it holds, [slo, shi): from the unit
    before its first list item (the lead-in, "Signs may include:"; the item itself where it opens the paragraph) to
    its last item; empty (slo = shi = lo) where it holds fewer than two items. A unit is an item where its text opens
    with a bullet (:func:`mogg.core.text.is_list_item`: the ladder's units split at each item, ``split_units``); only
    these paragraphs' units are read."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    size = np.maximum(hi - lo, 0)
    slo, shi = lo.copy(), lo.copy()
    if not size.sum():
        return slo, shi
    owner = np.repeat(np.arange(len(lo)), size)  # [M] each read unit's paragraph
    flat = range_indices(lo, size)  # [M] the units
    item = np.fromiter((is_list_item(unit_text[u]) for u in flat), dtype=bool, count=len(flat))
    count = np.bincount(owner, weights=item, minlength=len(lo))
    big = np.iinfo(np.int64).max
    first = np.full(len(lo), big)
    np.minimum.at(first, owner[item], flat[item])
    last = np.full(len(lo), -1)
    np.maximum.at(last, owner[item], flat[item])
    has = count >= 2
    slo[has] = np.maximum(first[has] - 1, lo[has])
    shi[has] = last[has] + 1
    return slo, shi


def paragraph_scores(pred: np.ndarray, cand_q: np.ndarray, cand_paragraph: np.ndarray, top: int) -> np.ndarray:
    """Per candidate [N], its (question, paragraph)'s score: the sum of that paragraph's ``top`` best candidates'
    predictions (``pred`` [N]), negatives counted as 0."""
    pred = np.asarray(pred, dtype=np.float64)
    g = pair_groups(cand_q, cand_paragraph)
    order = np.lexsort((-pred, g))  # each paragraph's candidates, best first
    gs = g[order]
    start = np.r_[0, np.flatnonzero(gs[1:] != gs[:-1]) + 1]
    rank = np.arange(len(gs)) - np.repeat(start, np.diff(np.r_[start, len(gs)]))
    kept = np.where(rank < top, np.maximum(pred[order], 0.0), 0.0)
    return np.bincount(gs, weights=kept)[g]


def section_rows(pred: np.ndarray, cand_q: np.ndarray, paras: Paragraphs, top: int = 1,
                 ratio: float | None = SECTION_RATIO, owned: bool = True) -> np.ndarray:
    """Per candidate [N] (bool), whether it lies in its question's section: its best paragraph (the best-scored
    candidate's with ``top`` 1, else the one whose ``top`` best candidates' predictions sum highest:
    :func:`paragraph_scores`), and with ``ratio`` the paragraphs beside it in its document (``paras.cand`` one apart,
    the same ``paras.doc``) whose best candidate predicts at least ``ratio`` times the question's best, chained while
    they do (a paragraph without candidates ends the run); with ``owned``, only paragraphs the question owns (no
    other question of the set predicts them higher) on a page that holds another question's best paragraph, or, with
    ``paras.links``, on a page of one question, chained by shared words
    (:func:`~mogg.run.budget.selector.cohesion.cohesive_links`); with ``paras.contested`` and the pages' words, on a
    page of several questions also a paragraph beside the section that another question predicts higher, but not
    another question's best, where the two paragraphs are more alike than the pairs either side of them
    (:func:`~mogg.run.budget.selector.cohesion.peak_links`). A web page's section often runs over several paragraphs;
    the page stand-ins' sections are mostly one (docs/results.md, "A section over several paragraphs")."""
    pred, cand_q, pid = np.asarray(pred, dtype=np.float64), np.asarray(cand_q), np.asarray(paras.cand)
    if not len(pred):
        return np.zeros(0, dtype=bool)
    if top == 1:
        first = group_best_row(pred, cand_q)
    else:
        order = np.lexsort((np.arange(len(pred)), -pred, -paragraph_scores(pred, cand_q, pid, top), cand_q))
        first = order[np.r_[True, cand_q[order][1:] != cand_q[order][:-1]]]
    chosen = np.full(int(np.max(cand_q)) + 1, -1, dtype=np.int64)
    chosen[cand_q[first]] = pid[first]
    if ratio is None:
        return pid == chosen[cand_q]
    g = pair_groups(cand_q, pid)  # [N] one id per (question, paragraph)
    best_g = group_max(pred, g)  # [G]
    n_g = len(best_g)
    gq, gp, gd = (np.zeros(n_g, dtype=np.int64) for _ in range(3))
    gq[g], gp[g], gd[g] = cand_q, pid, np.asarray(paras.doc)
    best_q = group_max(pred, np.asarray(cand_q, dtype=np.int64))  # [Q'] each question's best
    close = (best_q[gq] > 0) & (best_g >= ratio * best_q[gq])
    near_any = close.copy()  # close at any owner (paras.contested)
    if owned:
        # the paragraph is the question's own (no other question predicts it higher) and the question's page holds
        # another question's best paragraph: there the questions' own paragraphs mark the sections; on a page no
        # other question reads as its own (an abstract and its one question) every paragraph is "owned"
        para = np.unique(gp, return_inverse=True)[1].ravel()  # [G] each pair's paragraph, dense
        close &= best_g >= group_max(best_g, para)[para]  # the best any question of the set gives it
        best_doc = gd[g[first]]  # [Q'] each question's best paragraph's page
        docs_, n_best = np.unique(best_doc, return_counts=True)
        shared = np.zeros(len(chosen), dtype=bool)
        shared[cand_q[first]] = n_best[np.searchsorted(docs_, best_doc)] >= 2
        if paras.links is None:
            close &= shared[gq]
    chosen_g = np.zeros(n_g, dtype=bool)
    chosen_g[g[first]] = True
    o = np.lexsort((gp, gq))  # each question's paragraphs in page order
    # a run continues where the next paragraph of the same question and document is the next one and both are close
    # (the chosen paragraph counts as close: the run is built around it)
    near = close[o] | chosen_g[o]
    step = (gq[o][1:] == gq[o][:-1]) & (gd[o][1:] == gd[o][:-1]) & (gp[o][1:] == gp[o][:-1] + 1)  # the next paragraph
    link = step & near[1:] & near[:-1]
    if owned and paras.links is not None:
        # on a page of one routed question its paragraphs' shared words mark the section (cohesion module doc)
        coh = cohesive_links(paras.links, best_doc, gp[o][:-1])
        link &= shared[gq[o][1:]] | coh
        if paras.contested:
            # on a page of several questions a section's other half is often predicted higher by another question
            # (69 of the halves' 183 questions whose E was short, seed 0): such a paragraph, not that question's
            # best, continues the section where the pair is the most alike of the three around it (the long
            # sections in halves read 0.618 at B = 128 against 0.602, seed 0; docs/results.md, "A contested
            # paragraph")
            free = chosen_g[o] | (near_any & ~others_best(g, gp, first))[o]
            link |= (step & shared[gq[o][1:]] & free[1:] & free[:-1]
                     & peak_links(paras.links, best_doc, gp[o][:-1], joins=coh))
    run = np.empty(n_g, dtype=np.int64)
    run[o] = np.cumsum(np.r_[True, ~link])
    want = np.zeros(len(chosen), dtype=np.int64)
    want[gq[chosen_g]] = run[chosen_g]
    return run[g] == want[cand_q]


def others_best(g: np.ndarray, gp: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per (question, paragraph) pair [G] (``g`` [N] each candidate's pair, ``gp`` [G] its paragraph, ``first`` [Q']
    each question's best row), whether the paragraph is another question's best paragraph."""
    own = np.zeros(len(gp), dtype=bool)
    own[g[first]] = True
    return np.isin(gp, gp[g[first]]) & ~own


def paragraph_first(pred: np.ndarray, cand_q: np.ndarray, cand_paragraph: np.ndarray, top: int = 1,
                    paras: Paragraphs | None = None, ratio: float | None = None, owned: bool = True) -> np.ndarray:
    """``pred`` [N] reordered (:func:`~mogg.run.budget.selector.adapt.reorder`) so that each question's candidates in
    its best paragraph (``cand_paragraph`` [N]) come first, then the rest, each in ``pred``'s order. The best
    paragraph: the best-scored candidate's (``top`` 1), or the one whose ``top`` best candidates' predictions sum
    highest (:func:`paragraph_scores`; ties: the best-scored candidate's). With ``paras`` and a ``ratio``, its
    section first (:func:`section_rows`)."""
    pred = np.asarray(pred, dtype=np.float64)
    if not len(pred):
        return pred
    if paras is None:
        paras = Paragraphs(np.asarray(cand_paragraph), np.zeros(len(pred)), np.ones(len(pred), dtype=np.int64),
                           np.zeros(len(pred), dtype=np.int64))
        ratio = None
    inside = section_rows(pred, cand_q, paras, top, ratio, owned)
    return reorder(pred, cand_q, inside * (1.0 + np.abs(pred).max()) + pred)


def section_evidence(cand_q: np.ndarray, pred: np.ndarray, paras: Paragraphs, n_questions: int,
                     ratio: float | None = SECTION_RATIO, owned: bool = True) -> np.ndarray:
    """E on sections of a page where the ladder holds its paragraphs, tokens [Q]: each question's section
    (:func:`section_rows`: the paragraph of its best-scored candidate, and with ``ratio`` the close paragraphs
    chained to it), 0 where a question has no candidate."""
    if ratio is None or not len(cand_q):
        return document_evidence(cand_q, pred, paras.tokens, n_questions)
    inside = section_rows(pred, cand_q, paras, 1, ratio, owned)
    g = pair_groups(cand_q, paras.cand)
    _, one = np.unique(g, return_index=True)  # one row per (question, paragraph)
    one = one[inside[one]]
    return np.bincount(np.asarray(cand_q)[one], weights=np.asarray(paras.tokens, dtype=np.float64)[one],
                       minlength=n_questions)


def section_density(pred: np.ndarray, cand_q: np.ndarray, paras: Paragraphs, ratio: float | None = SECTION_RATIO,
                    owned: bool = True) -> np.ndarray:
    """The densities [N] the plans' estimated F1 reads on sections of a page: ``pred``, except that each candidate
    in its question's section (:func:`section_rows`, the section :func:`section_evidence` measures) takes the
    question's best prediction. There the section is the evidence, so its sentences are evidence together or not at
    all: each is as likely as the best one. Under their own predictions the section's other sentences (which need not
    repeat the question's words) looked like distractors, and a question whose best sentence is short stopped after it
    (the long sections under headings: 407 of 487 questions read one sentence at B = 64, a sixth of them 4-19 tokens;
    docs/results.md, "A section's sentences as likely as its best"). The ranking stays ``pred``'s."""
    pred = np.asarray(pred, dtype=np.float64)
    if not len(pred):
        return pred
    return _as_likely_as_best(pred, cand_q, section_rows(pred, cand_q, paras, 1, ratio, owned))


def short_first(pred: np.ndarray, cand_q: np.ndarray, tokens: np.ndarray, paras: Paragraphs, section: np.ndarray,
                budget: float, ratio: float | None = SECTION_RATIO, owned: bool = True) -> np.ndarray:
    """``pred`` [N] reordered (:func:`~mogg.run.budget.selector.adapt.reorder`) for reading at ``budget`` on sections of a
    page: each question whose section (``section`` [Q], :func:`section_evidence`) is longer than the budget reads its
    best paragraph's candidates shortest first (``tokens`` [N]), then the rest of its section, then the rest, each in
    ``pred``'s order; every other question keeps ``pred``'s order. Where the budget cannot cover the section, any of
    the section's sentences is evidence alike (:func:`section_density`), so the cheapest is read first and a question
    the scorer is unsure of spends less: under headings at B = 64, 407 of 487 questions read their best sentence
    alone, 39 tokens at the median (docs/results.md, "A section's sentences as likely as its best"). The section's
    rows keep the question's best values, so :func:`section_density` reads the same densities on either order."""
    pred = np.asarray(pred, dtype=np.float64)
    long_q = np.asarray(section, dtype=np.float64) > budget
    if not len(pred) or not long_q.any():
        return pred
    cand_q = np.asarray(cand_q, dtype=np.int64)
    inside = section_rows(pred, cand_q, paras, 1, ratio, owned) & long_q[cand_q]
    para = section_rows(pred, cand_q, paras, 1, None) & inside
    top = np.abs(pred).max() + 1.0  # 2 * top + pred lies above every prediction, 4 * top above that
    score = np.where(para, 4.0 * top + np.max(tokens) + 1.0 - np.asarray(tokens, dtype=np.float64),
                     np.where(inside, 2.0 * top + pred, pred))
    return reorder(pred, cand_q, score)


def heading_rows(unit: np.ndarray, paras: Paragraphs, texts) -> np.ndarray:
    """Per candidate [N] (bool), whether its unit is a question line that opens its paragraph
    (:func:`mogg.core.text.is_question_line`; ``unit`` [N], ``texts`` the ladder's unit texts, ``paras.first`` each
    candidate's paragraph's first unit): the heading of an answer on a page of questions and answers, a unit of its
    own (the sentence splitter ends it at its "?"). It repeats a question; it is not the answer. Only the candidates
    whose text ends with "?" are matched one by one."""
    unit = np.asarray(unit, dtype=np.int64)
    out = np.zeros(len(unit), dtype=bool)
    if paras.first is None or not len(unit):
        return out
    at = np.flatnonzero(unit == np.asarray(paras.first))
    if len(at):
        asks = np.char.endswith(np.asarray([texts[u] for u in unit[at]], dtype=str), "?")
        out[at[asks]] = [is_question_line(texts[u]) for u in unit[at[asks]]]
    return out


def below_headings(pred: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """``pred`` [N] with the ``heading`` rows [N] (bool) below every candidate's value, the others unchanged."""
    pred = np.asarray(pred, dtype=np.float64)
    if not len(pred):
        return pred
    return np.where(np.asarray(heading, dtype=bool), pred.min() - 1.0 - np.abs(pred).max(), pred)


def headings_last(order: np.ndarray, density: np.ndarray, cand_q: np.ndarray, heading: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``order`` [N] reordered (:func:`~mogg.run.budget.selector.adapt.reorder`) so that each question's heading rows
    (``heading`` [N], :func:`heading_rows`) come after all its other candidates, and ``density`` [N] with theirs 0 (a
    heading read is tokens without evidence, as the F1 estimate counts it); unchanged where there are none. On a page
    of questions and answers the best candidate is often the heading that repeats the question: it finds the section,
    and the section is read without it (docs/results.md, "Question lines of any length")."""
    heading = np.asarray(heading, dtype=bool)
    if not heading.any():
        return order, density
    order = np.asarray(order, dtype=np.float64)
    return reorder(order, cand_q, below_headings(order, heading)), np.where(heading, 0.0, density)


def section_cap(shape: SetShape, section: np.ndarray | None) -> np.ndarray | None:
    """The most tokens each question [Q, 1] reads on sections of a page (:func:`page_sections`) where the ladder
    holds its paragraphs: its best candidate's paragraph (``section`` [Q]: :func:`section_evidence`), or the median
    one where that is longer (the floor :func:`fits_target` reads); None elsewhere (no cap). One section is the
    evidence, so past it every sentence read is a distractor of the page's topic: the abstract pages read 97-103
    tokens for F1 0.41 at B >= 128 without the cap, 49 tokens for 0.48 with it (docs/results.md, "At most the
    paragraph")."""
    if section is None or not page_sections(shape):
        return None
    section = np.asarray(section, dtype=np.float64)
    if not (section > 0).any():
        return None
    return np.maximum(section, float(np.median(section[section > 0])))[:, None]


def neighbour_sum(pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray) -> np.ndarray:
    """Per candidate [N], the sum of the predictions of the candidates beside it: the same question, the same
    document, the unit just before or just after it (0 where none is a candidate). ``pred``, ``cand_q``,
    ``unit`` [N]; ``unit_doc`` [U], every unit's document. Rows in any order."""
    pred, cand_q, unit = np.asarray(pred, dtype=np.float64), np.asarray(cand_q), np.asarray(unit)
    out = np.zeros(len(pred))
    if len(pred) < 2:
        return out
    order = np.lexsort((unit, cand_q))
    q, u, p = cand_q[order], unit[order], pred[order]
    d = np.asarray(unit_doc)[u]
    nxt = (q[1:] == q[:-1]) & (u[1:] == u[:-1] + 1) & (d[1:] == d[:-1])  # row i+1 is row i's next unit
    side = np.zeros(len(p))
    side[:-1] += np.where(nxt, p[1:], 0.0)
    side[1:] += np.where(nxt, p[:-1], 0.0)
    out[order] = side
    return out


def page_order(pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray, shape: SetShape,
               weight: float = PAGE_SMOOTH, paras: Paragraphs | None = None, top: int = PARA_TOP,
               ratio: float | None = SECTION_RATIO, owned: bool = True) -> np.ndarray:
    """``pred`` [N] reordered (:func:`~mogg.run.budget.selector.adapt.reorder`: each question keeps its values, so
    the price of a token keeps its scale) where the set is sections of a page (:func:`page_sections` on ``shape``,
    decided once on the first scorer); ``pred`` as it is elsewhere. With the ladder's ``paras``, the best candidate's
    paragraph first (:func:`paragraph_first`): a section is a paragraph of its page, so the best sentence's paragraph
    is its section when it is right, and one wrong section otherwise (docs/results.md, "The best candidate's
    paragraph"). Without them, by ``pred`` plus ``weight`` times its neighbours' (:func:`neighbour_sum`): a sentence
    whose neighbours match the question too is more likely inside the section than a lone match elsewhere."""
    if not len(cand_q) or not page_sections(shape):
        return pred
    if paras is not None:
        if len(paras.cand) != len(pred):
            raise ValueError(f"paragraphs of {len(paras.cand)} candidates for {len(pred)} predictions")
        log.info("sections of a page: the best paragraph first (by its %d best candidates)%s", top,
                 "" if ratio is None else f", and the paragraphs beside it that the question owns (at {ratio:g} of its best)")
        return paragraph_first(pred, cand_q, paras.cand, top, paras, ratio, owned)
    log.info("sections of a page: each candidate ranked with %.2f of its neighbours' scores", weight)
    return reorder(pred, cand_q, np.asarray(pred, dtype=np.float64) + weight * neighbour_sum(pred, cand_q, unit, unit_doc))


def sections_share(shape: SetShape) -> float:
    """The share of the questions with several close documents whose run chained to the best one holds more
    than it (:func:`close_reach`): 0.61-0.74 on the snippet shapes (an abstract's contexts kept together),
    at most 0.23 on the others, 0.01 on MedMCQA (seed 0, docs/results.md, "Sections of one source")."""
    several = np.asarray(shape.close) > np.asarray(shape.doc)
    return float((np.asarray(shape.chain)[several] > np.asarray(shape.doc)[several]).mean()) if several.any() else 0.0


def members_first(pred: np.ndarray, cand_q: np.ndarray, cand_doc: np.ndarray, member: np.ndarray) -> np.ndarray:
    """``pred`` [N] reordered (:func:`~mogg.run.budget.selector.adapt.reorder`: each question keeps its values) so
    that each question's ``member`` rows [N] (bool) come first, then the rest, each part by its documents' best
    candidate (a document's units together): what :func:`chain_first` and :func:`owned_first` read first."""
    return reorder(pred, cand_q, member + 1.0 / (2.0 + rank_within(document_best(pred, cand_q, cand_doc), cand_q)))


def chain_first(pred: np.ndarray, cand_q: np.ndarray, cand_doc: np.ndarray, n_questions: int, shape: SetShape,
                ratio: float = CHAIN_RATIO, gap: int = CHAIN_GAP) -> np.ndarray:
    """``pred`` [N] reordered (:func:`~mogg.run.budget.selector.adapt.reorder`: each question keeps its values)
    so that, where the set is sections of sources (``shape``: :func:`sections_share` >= :data:`SECTIONS_SHARE`,
    decided once on the first scorer), each question reads first the documents chained to its best one in
    corpus order (:func:`chain_rows` at ``ratio``, ``gap``), each part in ``pred``'s document order (a
    document's units together, by their best); ``pred`` as it is elsewhere. The sections of the best
    candidate's source before another source's best section: an abstract's contexts rank below a competing
    abstract's best one under a scorer trained on other shapes, and its evidence is the whole abstract."""
    share = sections_share(shape)
    if not len(cand_q) or share < SECTIONS_SHARE:
        return pred
    log.info("%.0f%% of the questions with several close documents have one beside the best in corpus order "
             "(sections of sources): the documents chained to the best one first", 100 * share)
    first = chain_rows(cand_q, cand_doc, pred, n_questions, ratio, gap)
    # the chain's documents first (1 + a term below 1), then the rest, each part by its documents' best candidate
    return members_first(pred, cand_q, cand_doc, first)


def owned_first(pred: np.ndarray, cand_q: np.ndarray, cand_doc: np.ndarray, n_questions: int,
                shape: SetShape) -> np.ndarray:
    """``pred`` [N] reordered (:func:`~mogg.run.budget.selector.adapt.reorder`: each question keeps its values) so
    that, where the set's evidence is several documents the corpus order does not show (:func:`owned_sections` on
    ``shape``, decided once on the first scorer), each question reads first the close documents it owns
    (:func:`owned_rows`), then the rest, each part by its documents' best candidate: :func:`chain_first` where the
    order is lost (a source's sections written shuffled, with ids that name no source). ``pred`` as it is
    elsewhere."""
    if not len(cand_q) or not owned_sections(shape):
        return pred
    log.info("%.0f%% of the questions own several close documents and the corpus order shows none (several "
             "documents in another order): the documents each question owns first", 100 * owned_share(shape))
    first = owned_rows(cand_q, cand_doc, pred, n_questions)
    return members_first(pred, cand_q, cand_doc, first)


def sources_sections(shape: SetShape) -> bool:
    """Whether a set's evidence looks like sections of sources: whole short documents (:func:`whole_shape`) whose
    close documents neighbour the best one in corpus order (:func:`sections_share` >= :data:`SECTIONS_SHARE`; an
    abstract's contexts kept together). There the chain is read first (:func:`chain_first`, under the
    whole-document scorer) and the estimated F1's E is bounded by it (:func:`chain_evidence`)."""
    return whole_set(shape) and sections_share(shape) >= SECTIONS_SHARE


def source_chain(cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, doc_tokens: np.ndarray,
                 n_questions: int) -> np.ndarray:
    """The tokens [Q] of each question's documents chained to its best one (:func:`close_reach`'s chain at
    :data:`CHAIN_RATIO`, :data:`CHAIN_GAP`, on ``pred``; 0 without candidates): on sections of sources what
    :func:`chain_first` reads first, the bound of E (:func:`chain_evidence`) and the ``fits`` floor
    (:func:`fits_target`). ``cand_q``, ``cand_doc``, ``pred``, ``doc_tokens``: per candidate [N]."""
    return close_reach(cand_q, cand_doc, pred, doc_tokens, n_questions, CHAIN_RATIO, CHAIN_GAP)[1]


def chain_evidence(evidence, cand_q: np.ndarray, cand_doc: np.ndarray, pred: np.ndarray, doc_tokens: np.ndarray,
                   n_questions: int) -> np.ndarray:
    """E [Q] on sections of sources (:func:`sources_sections`): ``evidence`` (a number or [Q]) bounded by the tokens
    of each question's chain (:func:`source_chain` on ``pred``). The evidence is the chain; E predicted sums the
    predictions over every candidate document, and a question whose chain is short then read past it
    (docs/results.md, "The chain bounds E")."""
    chain = source_chain(cand_q, cand_doc, pred, doc_tokens, n_questions)
    return np.minimum(np.broadcast_to(np.asarray(evidence, dtype=np.float64), (n_questions,)), chain)


def covered_share(doc: np.ndarray, covered: np.ndarray) -> float:
    """The share of the questions with candidates (``doc`` > 0, [Q]) whose best block covers its document
    (``covered`` [Q]); 0 where none has candidates."""
    has = np.asarray(doc) > 0
    return float(np.asarray(covered)[has].mean()) if has.any() else 0.0


def whole_shape(doc: np.ndarray, covered: np.ndarray) -> bool:
    """Whether a set's evidence looks like whole short documents (:class:`SetShape`'s first two arrays, [Q]): at
    least :data:`FITS_SHARE` of the questions with candidates have the block around their best-scored candidate
    covering that candidate's document. One label-free decision per set, taken on the directory's first
    scorer's predictions: it chooses the whole-document scorer (:func:`mogg.run.budget.selector.transfer.shape_scorer`)
    and the ``fits`` price (:func:`fits_target`) alike, at every budget."""
    return bool((np.asarray(doc) > 0).any() and covered_share(doc, covered) >= FITS_SHARE)


def fits_target(shape: SetShape, budget: float, chain: np.ndarray | None = None,
                section: np.ndarray | None = None) -> float | None:
    r"""The mean tokens the ``fits`` rule reads at least at budget B (``shape``: :func:`whole_documents`):
    where the set is whole short documents (:func:`whole_shape`), min(B, the median reach): where the set is
    sections of sources (:func:`sections_share` >= :data:`SECTIONS_SHARE`) the chain ``chain`` [Q] (:func:`source_chain`
    on the read's predictions, what E is bounded by; without it every close document, the rule before), else the
    close documents chained to the best one (mostly the best document alone), or where the corpus order shows nothing
    and the questions own several documents (:func:`owned_sections`) those they own; where the set is sections of a page
    (:func:`page_sections`), min(B, the median of ``section`` [Q], each question's best candidate's paragraph:
    :func:`section_evidence`), or without it min(B, :data:`PAGE_SHARE` of the median best document); None elsewhere
    (the training sets' price of a token decides).

    On sections of sources every close document counted other sources' sections as well: trained beside whole
    abstracts (``transfer_selector_generic``), the scorer finds more of them close and the floor read 256-283 tokens
    at B = 256 / 512 on the second snippet shape, below its envelope; the chain reads 170 (docs/results.md, "The
    chain is the floor").

    The decision does not depend on B: an earlier version also asked that half the best documents fit
    in B, taken on the refit's predictions, and on PubMedQA\* (abstracts of 213 tokens at the median)
    that share sat at 0.48-0.74 at B = 256 over five seeds, so three seeds of five stopped inside the
    abstract at the training sets' price (docs/results.md, "One shape decision"). The reach, not the best
    document alone: the snippet shapes' evidence is several sections of one abstract, where MedMCQA's
    close documents are competing explanations (docs/results.md, "Sections of one source")."""
    has = np.asarray(shape.doc) > 0
    if page_sections(shape) and section is not None:  # a section of a page: at least its median paragraph
        section = np.asarray(section, dtype=np.float64)
        return float(min(budget, np.median(section[section > 0]))) if (section > 0).any() else None
    if page_sections(shape):  # ... a ladder without its paragraphs: at least min(B, PAGE_SHARE of the median page)
        return float(min(budget, PAGE_SHARE * np.median(np.asarray(shape.doc)[has])))
    if not whole_set(shape):
        return None
    if sections_share(shape) >= SECTIONS_SHARE:  # sections of sources: the chain (every close document without it)
        reach = shape.close if chain is None else np.asarray(chain, dtype=np.float64)
    elif owned_sections(shape):  # several documents the corpus order does not show: those each question owns
        reach = shape.owned
    else:
        reach = shape.chain
    return float(min(budget, np.median(np.maximum(reach, shape.doc)[has])))
