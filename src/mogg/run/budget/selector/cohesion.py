"""Lexical cohesion between a page's paragraphs (issue 58): which paragraph beside a question's best continues its
section, where no other question marks the sections.

On sections of a page (:func:`~mogg.run.budget.selector.set_shape.page_sections`) a question's section is its best
paragraph and the paragraphs beside it that it owns, on a page holding another question's best paragraph
(:func:`~mogg.run.budget.selector.set_shape.section_rows`): there the other questions mark where a section ends. On a
page of one routed question nothing did, and the rule read the best paragraph alone: half a section where a page
writes its sections over several paragraphs (docs/results.md, "A section over several paragraphs"). A section's
paragraphs share their words more than the page's paragraphs share them on average (lexical cohesion: Hearst's
TextTiling reads a topic's boundary where it drops). The median, not the mean: a page's many close pairs
(a section's halves) would raise its mean above the pairs of different sections. So:

* :meth:`PageLinks.cohesion`: for each paragraph of the given pages and the paragraph after it, their tf-idf cosine
  less the page's median cosine over all its pairs of paragraphs (NaN for a page's last paragraph, or a page of fewer
  than three: there the median is the pair itself);
* :func:`reads_over_paragraphs`: a set's pages run their sections over paragraphs where the pairs of paragraphs
  above that median by :data:`COHESION_MARGIN` outnumber those below it by as much :data:`COHESION_SKEW` times. On a
  page of one topic's sections (an abstract: background, methods, results, conclusion) neighbours are as often less
  alike than the page as more, and the rule keeps its paragraphs apart;
* :func:`cohesive_links`: there, each paragraph whose pair with the next is above the median by the margin;
* :func:`peak_links`: of those, the pairs at least as alike as the pairs either side (a paragraph between two sections
  goes with the one it shares its words with more: a page of several questions, where another question predicts it
  higher).

Words: the project's tokenizer without stop words (:func:`mogg.core.text.tokenize`, as BM25 reads them), counted per
paragraph from its units, sublinear tf times smooth idf over the pages read. The cost follows the pages asked for
(each question's best paragraph's page), never the corpus.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from mogg.core.segments import range_indices, segment_rank

log = logging.getLogger(__name__)

# a pair of neighbouring paragraphs is one section's where their cosine exceeds the page's median pairwise cosine by at
# least this much; and a set reads its sections over paragraphs where such pairs outnumber the pairs below the median
# by as much at least COHESION_SKEW times (docs/results.md, "A page of one question: its paragraphs' shared words")
COHESION_MARGIN = 0.05
COHESION_SKEW = 3.0
COHESION_MIN_PARAGRAPHS = 3  # a page of two paragraphs has one pair: its median is that pair
# a page's median reads its pairs at most this many paragraphs apart: every pair on a page of up to 65 paragraphs (the
# page shapes hold at most 30), and a page of thousands costs 64 pairs a paragraph, not millions
COHESION_WINDOW = 64


class PageLinks:
    """The ladder's units as :meth:`cohesion` reads a page's paragraphs: ``unit_text`` [U] (the ladder's units'
    texts), ``starts`` (the units that open a paragraph other than their document's first, increasing:
    :meth:`mogg.ladders.base.Ladder.paragraph_starts`) and ``unit_doc`` [U] (each unit's document, non-decreasing).
    A paragraph's id is its document plus the paragraph starts at or before its first unit, as
    :func:`~mogg.run.budget.selector.set_shape.candidate_paragraphs` numbers it."""

    def __init__(self, unit_text: Sequence[str], starts: np.ndarray, unit_doc: np.ndarray):
        self.unit_text, self.starts, self.unit_doc = unit_text, np.asarray(starts, dtype=np.int64), unit_doc
        self._read: dict[bytes, tuple[np.ndarray, np.ndarray, bool]] = {}  # the pages asked for -> read()

    def read(self, docs: np.ndarray, margin: float = COHESION_MARGIN, skew: float = COHESION_SKEW
             ) -> tuple[np.ndarray, np.ndarray, bool]:
        """:meth:`cohesion` of pages ``docs`` and whether they run their sections over paragraphs
        (:func:`reads_over_paragraphs`), once per set of pages and thresholds: the plans read it at every budget."""
        docs = np.unique(np.asarray(docs, dtype=np.int64))
        key = docs.tobytes() + np.asarray([margin, skew]).tobytes()
        if key not in self._read:
            ids, c = self.cohesion(docs)
            self._read[key] = ids, c, bool(len(ids)) and reads_over_paragraphs(c, margin, skew)
        return self._read[key]

    def cohesion(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The paragraphs of documents ``docs`` (ids, any order) as (ids int64 [P], increasing; their pair with the
        next paragraph of the page: its cosine less the page's median pairwise cosine (pairs at most
        :data:`COHESION_WINDOW` apart), float64 [P], NaN for a page's last paragraph and on a page of fewer than
        :data:`COHESION_MIN_PARAGRAPHS` paragraphs)."""
        from sklearn.feature_extraction.text import CountVectorizer

        from mogg.core.text import tokenize

        docs = np.unique(np.asarray(docs, dtype=np.int64))
        lo = np.searchsorted(self.unit_doc, docs, side="left")
        hi = np.searchsorted(self.unit_doc, docs, side="right")
        n_units = hi - lo
        if not n_units.sum():
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        units = range_indices(lo, n_units)
        unit_docs = np.repeat(docs, n_units)
        pid = unit_docs + np.searchsorted(self.starts, units, side="right")  # [U'] each unit's paragraph
        ids, par = np.unique(pid, return_inverse=True)
        par = par.ravel()
        p_doc = np.zeros(len(ids), dtype=np.int64)
        p_doc[par] = unit_docs
        vec = CountVectorizer(tokenizer=lambda t: tokenize(t, stopwords=True), lowercase=False, token_pattern=None)
        try:
            counts = vec.fit_transform([self.unit_text[int(u)] for u in units])  # [U', V]
        except ValueError:  # no word at all on these pages
            return ids, np.full(len(ids), np.nan)
        member = sp.csr_matrix((np.ones(len(units)), (par, np.arange(len(units)))), shape=(len(ids), len(units)))
        x = (member @ counts).tocsr().astype(np.float64)  # [P, V] word counts per paragraph
        df = np.bincount(x.indices, minlength=x.shape[1])
        x.data = 1.0 + np.log(x.data)  # sublinear tf
        x = x @ sp.diags(np.log((1.0 + len(ids)) / (1.0 + df)) + 1.0)
        norm = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
        x = sp.diags(1.0 / np.maximum(norm, 1e-12)) @ x  # rows of unit length (0 for a paragraph without words)
        x = x.tocsr()
        # every pair of paragraphs of a page (i < j <= i + COHESION_WINDOW): [M] rows, the pages' n (n - 1) / 2 at most
        d = np.unique(p_doc, return_inverse=True)[1].ravel()  # [P] dense page ids, non-decreasing
        n = np.bincount(d)
        end = np.cumsum(n)[d]  # [P] one past the page's last paragraph
        after = np.minimum(end - np.arange(len(ids)) - 1, COHESION_WINDOW)  # [P] the page's paragraphs read after each
        i = np.repeat(np.arange(len(ids)), after)
        j = i + 1 + segment_rank(i)
        cos = np.asarray(x[i].multiply(x[j]).sum(axis=1)).ravel()
        if not len(cos):  # no page of two paragraphs
            return ids, np.full(len(ids), np.nan)
        # each page's median pair: its pairs sorted by cosine, the middle one (two middles: their mean)
        page = d[i]
        order = np.lexsort((cos, page))
        m = np.bincount(page, minlength=len(n))
        lo_at = np.r_[0, np.cumsum(m)[:-1]]
        a, b = lo_at + (m - 1) // 2, lo_at + m // 2
        cs = cos[order]
        median = np.where(m > 0, (cs[np.minimum(a, len(cs) - 1)] + cs[np.minimum(b, len(cs) - 1)]) / 2, np.nan)
        out = np.full(len(ids), np.nan)
        nxt = (after > 0) & (n[d] >= COHESION_MIN_PARAGRAPHS)  # the pair (p, p + 1) is its first pair (i = p, j = p + 1)
        first_pair = np.r_[0, np.cumsum(after)[:-1]]
        out[nxt] = cos[first_pair[nxt]] - median[d[nxt]]
        return ids, out


def reads_over_paragraphs(cohesion: np.ndarray, margin: float = COHESION_MARGIN, skew: float = COHESION_SKEW) -> bool:
    """Whether a set's pages run their sections over paragraphs (module doc): among the pairs of neighbouring
    paragraphs (``cohesion`` [P], NaN: no pair), those above their page's median by ``margin`` outnumber those below
    it by ``margin`` at least ``skew`` times."""
    c = np.asarray(cohesion, dtype=np.float64)
    c = c[np.isfinite(c)]
    up, down = int((c > margin).sum()), int((c < -margin).sum())
    over = up > 0 and up >= skew * down
    log.info("sections of a page: %d pairs of neighbouring paragraphs, %d above their page's median cosine by %.2f, "
             "%d below it; %s", len(c), up, margin, down,
             "a section runs over cohesive paragraphs" if over else "each paragraph its own section")
    return over


def cohesive_links(links: PageLinks, docs: np.ndarray, paragraph: np.ndarray,
                   margin: float = COHESION_MARGIN, skew: float = COHESION_SKEW) -> np.ndarray:
    """Per paragraph id of ``paragraph`` [M] (bool), whether it continues into the next paragraph of its page as one
    section (above its page's median cosine by ``margin``), where the pages ``docs`` (the questions' best paragraphs'
    pages) run their sections over paragraphs (:func:`reads_over_paragraphs`); all False elsewhere."""
    paragraph = np.asarray(paragraph, dtype=np.int64)
    ids, c, over = links.read(docs, margin, skew)
    if not over:
        return np.zeros(len(paragraph), dtype=bool)
    at = np.clip(np.searchsorted(ids, paragraph), 0, len(ids) - 1)
    return (ids[at] == paragraph) & (np.nan_to_num(c, nan=-np.inf)[at] > margin)


def peak_links(links: PageLinks, docs: np.ndarray, paragraph: np.ndarray,
               margin: float = COHESION_MARGIN, skew: float = COHESION_SKEW,
               joins: np.ndarray | None = None) -> np.ndarray:
    """:func:`cohesive_links` where the pair (p, p + 1) is also at least as alike as each pair beside it, (p - 1, p)
    and (p + 1, p + 2) (a pair missing there counts as least alike): of two sections' paragraphs side by side, the
    paragraph between them goes with the one it shares its words with more. ``joins``: :func:`cohesive_links` of
    these arguments where the caller holds it (computed here otherwise)."""
    paragraph = np.asarray(paragraph, dtype=np.int64)
    if joins is None:
        joins = cohesive_links(links, docs, paragraph, margin, skew)
    if not joins.any():
        return joins
    ids, c, _ = links.read(docs, margin, skew)
    c = np.nan_to_num(c, nan=-np.inf)

    def pair(p: np.ndarray) -> np.ndarray:  # the cohesion of (p, p + 1); -inf where p is not read or has no next
        at = np.clip(np.searchsorted(ids, p), 0, len(ids) - 1)
        return np.where(ids[at] == p, c[at], -np.inf)
    own = pair(paragraph)
    return joins & (own >= pair(paragraph - 1)) & (own >= pair(paragraph + 1))
