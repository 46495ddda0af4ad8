"""Reading inside the chunk: every question's candidate units (sentences, on the sentence ladder)
with the features a learned evidence selector scores them by, and their labels.

**Candidates.** The units inside the top-``depth`` retrieved chunks of every level, each once per
question (a unit inside chunks of several levels is one candidate); a chunk holding more than
``per_chunk`` units (a whole paper) contributes the ``per_chunk`` that share the most
IDF-weighted words with the question, so long documents stay bounded. No Python loop over
questions, chunks or units: CSR gathers and sorts over all (question, unit) rows at once.

**Features** (one row per candidate, :data:`FEATURES` names them): for every level the relative
retrieval score and reciprocal rank of the chunk that holds the unit (MoG's eq. 1 vote, as inputs
to learn it), their sum, the unit's own lexical match with the question (IDF-weighted coverage of
the question's words, a BM25-style saturated score, and each relative to the question's best
candidate), its neighbours' lexical match, its position in its document, its length, the
question-unit cosine of the bundled encoder when given unit and question embeddings, and its
document as a whole among the question's candidates (best vote, lexical match and cosine of the
document's candidate units, their number: where the evidence is a whole document, the document
decides), and for multiple-choice questions the share of the answer options' IDF-weighted words
the unit and its document hold (an explanation names the right option; missing, NaN, without options).
With ``page`` (the transfer scorers, issue 58): the question's words the unit holds, each weighted by
the share of its document's other units that lack it (:func:`page_match`): on a page whose sections
share one topic, the topic's words are on every section and say nothing of which section answers.

**Labels**: the unit's gold-evidence tokens (its multiset overlap with the question's evidence,
clipped per unit) and its tokens; the selector regresses their ratio, the unit's evidence density.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mogg.core.segments import csr_keys, csr_lookup, group_max, pair_groups, range_indices, segment_rank
from mogg.core.text import tokenize
from mogg.ladders.base import Ladder
from mogg.run.budget.selector.lexicon import Lexicon, UnitTerms, _csr, unit_terms  # noqa: F401  (re-exported)
from mogg.search import Hits


@dataclass
class Candidates:
    """Candidate units per question, rows sorted by question: ``q`` and ``unit`` (int64 [N]); per
    level the retrieval score of the chunk that holds the unit, relative to the level's top score
    (0: not retrieved) and its 0-based rank (-1: not retrieved), float/int [N, L]."""

    q: np.ndarray
    unit: np.ndarray
    score: np.ndarray
    rank: np.ndarray
    n_questions: int

    def __len__(self) -> int:
        return len(self.q)

    @property
    def offsets(self) -> np.ndarray:
        """Rows of question q: ``offsets[q]:offsets[q + 1]`` (int64 [Q + 1])."""
        return np.r_[0, np.cumsum(np.bincount(self.q, minlength=self.n_questions))]

    def subset(self, questions: np.ndarray) -> np.ndarray:
        """Row indices of the candidates of ``questions`` (any order in, rows in row order out)."""
        keep = np.zeros(self.n_questions, dtype=bool)
        keep[np.asarray(questions, dtype=np.int64)] = True
        return np.flatnonzero(keep[self.q])


def candidates(ladder: Ladder, hits: Hits, lex: Lexicon, depth: int, per_chunk: int) -> Candidates:
    """The candidate units of every question (see the module doc) from hits [Q, L, >= depth]."""
    n_q, n_l, _ = hits.shape
    if depth > hits.shape[2]:  # refused, not clamped: the knob would silently mean less than it says
        raise ValueError(f"frontier.routers.selector.depth={depth} reads deeper than the {hits.shape[2]} chunks per level "
                         "retrieved (frontier.depth); set frontier.routers.selector.depth <= frontier.depth")
    n_u = len(ladder.units)
    parts = []
    for lv_i, lv in enumerate(ladder.levels):  # L levels: a loop over levels, not rows
        ids = hits.ids[:, lv_i, :depth]
        s = hits.scores[:, lv_i, :depth].astype(np.float64)
        top = np.where(ids[:, :1] >= 0, np.abs(s[:, :1]), 1.0)
        rel = np.where(ids >= 0, s / np.maximum(top, 1e-12), 0.0)
        valid = ids >= 0
        q = np.broadcast_to(np.arange(n_q)[:, None], ids.shape)[valid]
        r = np.broadcast_to(np.arange(depth)[None, :], ids.shape)[valid]
        c, rel = ids[valid], rel[valid]
        ptr = lv.coverage.indptr
        n = ptr[c + 1] - ptr[c]
        offs = range_indices(ptr[c], n)
        g = np.repeat(np.arange(len(c)), n)  # the retrieved chunk each row comes from
        u = lv.coverage.indices[offs].astype(np.int64)
        qq = q[g]
        if (n > per_chunk).any():  # long chunks: their units closest to the question
            m, _ = lex.match(qq, u, bm25=False)
            order = np.lexsort((u, -m, g))
            keep = np.zeros(len(g), dtype=bool)
            keep[order[segment_rank(g[order]) < per_chunk]] = True
            g, u, qq = g[keep], u[keep], qq[keep]
        parts.append((qq, u, np.full(len(u), lv_i), rel[g], r[g]))
    q, u, lvl, rel, rank = (np.concatenate(x) for x in zip(*parts))
    key, inv = np.unique(q * n_u + u, return_inverse=True)
    score = np.zeros((len(key), n_l))
    rk = np.full((len(key), n_l), -1, dtype=np.int64)
    np.maximum.at(score, (inv, lvl), rel)
    best = np.full((len(key), n_l), np.iinfo(np.int64).max)
    np.minimum.at(best, (inv, lvl), rank)
    rk = np.where(best < np.iinfo(np.int64).max, best, -1)
    return Candidates(key // n_u, key % n_u, score, rk, n_q)


FEATURES_PER_LEVEL = ("score", "inv_rank")
FEATURES = ("vote", "match", "match_rel", "bm25", "bm25_rel", "prev_match", "next_match", "doc_position",
            "doc_first", "log_doc_units", "log_tokens", "question_log_tokens", "cosine", "cosine_rel",
            "doc_vote", "doc_match", "doc_candidates", "doc_vote_rel", "doc_cosine", "doc_cosine_rel",
            "option_match", "option_match_rel", "doc_option_match", "doc_option_match_rel")


# with ``context``: what the unit's neighbours and document say of the question (issue 49: evidence
# that is a contiguous block shows in the units around it), NaN where a neighbour is not a candidate
CONTEXT_FEATURES = ("prev_cosine", "next_cosine", "window_cosine", "doc_cosine_mean", "doc_cosine_rank",
                    "window_match")


# with ``page``: the question's words the unit holds that its page's other units lack (:func:`page_match`),
# as a share of the question's IDF mass and relative to the question's best candidate; last, so that the
# columns before them are a directory's written before them (deploy.BEFORE_KNOB)
PAGE_FEATURES = ("page_match", "page_match_rel")


def feature_names(level_names: list[str], context: bool, page: bool = False) -> list[str]:
    return ([f"{f} {lv}" for lv in level_names for f in FEATURES_PER_LEVEL] + list(FEATURES)
            + (list(CONTEXT_FEATURES) if context else []) + (list(PAGE_FEATURES) if page else []))


def option_column(x: np.ndarray, n_levels: int) -> np.ndarray:
    """The candidates' share of their question's answer options' words [N] (``option_match``; NaN without options)
    from the raw columns ``x`` [N, F] of a ladder of ``n_levels`` levels (:func:`feature_names`)."""
    return x[:, 2 * n_levels + FEATURES.index("option_match")]


def features(ladder: Ladder, cand: Candidates, lex: Lexicon, cand_emb: np.ndarray | None = None,
             question_emb: np.ndarray | None = None, *, context: bool, page: bool = False) -> np.ndarray:
    """The feature matrix float32 [N, 2 L + len(FEATURES) (+ len(CONTEXT_FEATURES) with ``context``)
    (+ len(PAGE_FEATURES) with ``page``)] (:func:`feature_names`); the cosine columns are 0 without
    embeddings (cand_emb [N, d]: each candidate's unit, question_emb [Q, d]; L2-normalised)."""
    n_l = ladder.n_levels
    q, u = cand.q, cand.unit
    inv_rank = 1.0 / (np.maximum(cand.rank, 0) + 1.0) * (cand.rank >= 0)
    per_level = np.stack([cand.score, inv_rank], axis=2).reshape(len(u), 2 * n_l)
    match, bm25 = lex.match(q, u)
    match = match / np.maximum(lex.question_mass[q], 1e-9)
    doc = ladder.units.doc
    n_units = len(doc)
    prev_u, next_u = np.maximum(u - 1, 0), np.minimum(u + 1, n_units - 1)
    prev_ok, next_ok = (u > 0) & (doc[prev_u] == doc[u]), (u < n_units - 1) & (doc[next_u] == doc[u])
    pm, _ = lex.match(q, prev_u, bm25=False)  # the neighbours' coverage only
    nm, _ = lex.match(q, next_u, bm25=False)
    mass = np.maximum(lex.question_mass[q], 1e-9)
    # position of the unit in its document: units of one document are contiguous, in order
    first = np.r_[0, np.flatnonzero(doc[1:] != doc[:-1]) + 1]
    run = np.searchsorted(first, u, side="right") - 1  # [N] each candidate's document, as a run of units
    sizes = np.diff(np.r_[first, n_units])
    start, size = first[run], sizes[run]
    tokens = lex.unit_tokens[u]
    qtok = np.asarray(lex.question_terms.getnnz(axis=1))[q]
    if cand_emb is not None and question_emb is not None:
        cos = np.einsum("nd,nd->n", cand_emb.astype(np.float64), question_emb[q].astype(np.float64))
    else:
        cos = np.zeros(len(u))

    def rel(x: np.ndarray) -> np.ndarray:  # relative to the question's best candidate
        best = np.full(cand.n_questions, -np.inf)
        with np.errstate(invalid="ignore"):  # NaN (options absent) stays NaN: missing, not a fault
            np.maximum.at(best, q, x)
        return x - best[q]

    # the unit's document as a whole, per question: its best vote and lexical match among the
    # candidates, how many candidates it holds (whole-document evidence: the document decides)
    vote = cand.score.sum(axis=1)
    dg = pair_groups(q, doc[u])
    opt = lex.option_match(q, u)  # the answer options' words (an explanation names the right one)
    # NaN (options absent) stays NaN: missing, not a fault
    dvote, dmatch, dcos, dopt = (group_max(v, dg) for v in (vote, match, cos, opt))
    dcount = np.bincount(dg)
    cols = [vote, match, rel(match), bm25, rel(bm25), np.where(prev_ok, pm, 0.0) / mass,
            np.where(next_ok, nm, 0.0) / mass, (u - start) / np.maximum(size - 1, 1), (u == start).astype(float),
            np.log1p(size), np.log1p(tokens), np.log1p(qtok), cos, rel(cos),
            dvote[dg], dmatch[dg], np.log1p(dcount[dg]), rel(dvote[dg]), dcos[dg], rel(dcos[dg]),
            opt, rel(opt), dopt[dg], rel(dopt[dg])]
    if context:
        cols += _context_columns(cand, doc, cos, match, dg)
    if page:
        pmatch = page_match(lex, q, u, run, first, sizes) / mass
        cols += [pmatch, rel(pmatch)]
    return np.concatenate([per_level, np.stack(cols, axis=1)], axis=1).astype(np.float32)


def page_match(lex: Lexicon, q: np.ndarray, u: np.ndarray, run: np.ndarray, first: np.ndarray,
               sizes: np.ndarray) -> np.ndarray:
    """Per (question, unit) row: the IDF mass of the question's words the unit holds, each weighted by
    the share of the unit's document's other units that lack it (float64 [N]; a document of one unit:
    its whole match). A document is a run of units: ``run`` [N] each row's, starting at unit ``first``
    [R] and ``sizes`` [R] long. Only the candidates' documents are read: the cost follows the
    candidates, not the corpus."""
    import scipy.sparse as sp

    both = lex.question_terms[q].multiply(lex.unit_terms[u]).tocoo()  # [N, V] idf where shared
    if not both.nnz:
        return np.zeros(len(q))
    docs, d_of = np.unique(run, return_inverse=True)  # the candidates' documents, densely numbered
    d_of = d_of.ravel()
    units = range_indices(first[docs], sizes[docs])  # their units, document by document
    held = sp.csr_matrix((np.ones(len(units), dtype=np.float32),
                          (np.repeat(np.arange(len(docs)), sizes[docs]), np.arange(len(units)))),
                         shape=(len(docs), len(units))) @ lex.unit_terms[units]  # [D', V] units holding each word
    held = held.tocsr()
    held.sort_indices()
    row = d_of[both.row]
    # each shared word's count in its row's document (>= 1: the unit itself holds it)
    n = csr_lookup(held, csr_keys(held), row, both.col).astype(np.float64)
    others = np.maximum(sizes[docs][row] - 1, 1)
    return np.bincount(both.row, weights=both.data * (1.0 - (n - 1.0) / others), minlength=len(q))


def _context_columns(cand: Candidates, doc: np.ndarray, cos: np.ndarray, match: np.ndarray, dg: np.ndarray) -> list:
    """:data:`CONTEXT_FEATURES`, per candidate row: the cosine of the unit before and after it (same
    document, a candidate of the same question; NaN otherwise), the best cosine within two units
    either side, its document's mean candidate cosine, the unit's cosine rank among its document's
    candidates (0: the best) and the best lexical match within two units either side. Rows are sorted
    by (question, unit) (:func:`candidates`), so a neighbour is found by one binary search."""
    q, u = cand.q, cand.unit
    n_u = int(max(u.max(initial=0), 0)) + 3
    key = q * n_u + u  # increasing (rows sorted by question, then unit)

    def at(x: np.ndarray, off: int) -> np.ndarray:
        want = key + off
        pos = np.minimum(np.searchsorted(key, want), len(key) - 1)
        v = np.clip(u + off, 0, len(doc) - 1)
        ok = (key[pos] == want) & (u + off >= 0) & (u + off < len(doc)) & (doc[v] == doc[u])
        return np.where(ok, x[pos], np.nan)

    def window_max(x: np.ndarray) -> np.ndarray:  # the best of the units within two either side; NaN: none
        near = np.stack([at(x, o) for o in (-2, -1, 1, 2)], axis=1)
        return np.where(np.isnan(near).all(axis=1), np.nan, np.nan_to_num(near, nan=-np.inf).max(axis=1))

    prev_cos, next_cos = at(cos, -1), at(cos, 1)
    dmean = np.bincount(dg, weights=cos) / np.maximum(np.bincount(dg), 1)
    order = np.lexsort((u, -cos, dg))
    rank = np.empty(len(u))
    rank[order] = segment_rank(dg[order])
    return [prev_cos, next_cos, window_max(cos), dmean[dg], rank, window_max(match)]


def evidence_overlap(cand: Candidates, lex: Lexicon, evidence: list[str], block: int = 200_000) -> np.ndarray:
    """Each candidate's gold-evidence tokens: the multiset overlap of the unit's tokens with its
    question's evidence, clipped per unit (float64 [N]; NaN where the question has no evidence)."""
    ind, ptr = [], [0]
    for e in evidence:
        ind.extend(lex.vocab[w] for w in tokenize(e) if w in lex.vocab)
        ptr.append(len(ind))
    ev = _csr(ind, ptr, len(lex.vocab))  # [Q, V] counts, as wide as the lexicon's unit matrices
    has = np.array([bool(e.strip()) for e in evidence])
    out = np.zeros(len(cand))
    for a in range(0, len(cand), block):
        qi, ui = cand.q[a:a + block], cand.unit[a:a + block]
        out[a:a + block] = np.asarray(lex.unit_counts[ui].minimum(ev[qi]).sum(axis=1)).ravel()
    return np.where(has[cand.q], out, np.nan)
