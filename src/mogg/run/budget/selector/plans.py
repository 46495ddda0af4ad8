"""Reading inside the chunk on the frontier: the evidence selector's plans, route + trim, and the
sentence-level oracle, as policies the matched-cost evaluation compares with the envelope.

A question's *plans* are the prefixes of a ranking of its candidate units (k = 1..K units): the
selector ranks by predicted evidence density (ties: fewer tokens, then document order), the
oracle by the true density. A plan's **true** F1 and tokens come from
:func:`mogg.evaluation.prefix.prefix_table` (the units concatenated in rank order; F1 does not
depend on the order, and a deployed context is read in document order). Its **estimated** F1 is

    F1_hat(k) = 2 * sum_{i<=k} p_i * t_i / (sum_{i<=k} t_i + E)

with p_i the predicted density clipped to [0, 1], t_i the unit's tokens and E the median evidence
length of the fold's training questions; the selector deploys argmax_k F1_hat(k) - lambda * T(k),
lambda chosen on the fold's validation questions for each budget (free to spend less than B), as
the action router's is (:class:`mogg.evaluation.frontier_guard.Learned`). Every question keeps
at least its best unit.

**Route + trim**: the action router's chosen (level, k, cap) at a budget B' in {B, 2B, 4B}
(chosen on validation), then the selector's ranking restricted to the units inside that context,
trimmed by its own lambda for B. **Sentence oracle**: per question any prefix of the true-density
ranking under the mean budget (:func:`mogg.evaluation.frontier.oracle_at`): a ceiling over the
same candidates, not deployable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mogg.core.segments import group_best_row, range_indices, range_sums, segment_rank
from mogg.evaluation.frontier import Family
from mogg.evaluation.prefix import prefix_table
from mogg.run.budget.base import Learned

# the estimated F1's evidence length E: a training median, or per question (its candidates' predicted
# evidence tokens, or the tokens of the document its best-scored candidate sits in)
EVIDENCE = ("median", "predicted", "document")
# a selector read on a new set: lambda from its questions' tokens alone, at least the training sets', or
# read up to the best candidate's document and its close neighbours where the evidence looks like whole short documents
# (mogg.run.budget.selector.set_shape.fits_target) and the training sets' elsewhere
LAMBDA_RULES = ("here", "learned", "fits")


@dataclass
class Ranked:
    """Per question the candidate rows of its ranking, [Q, K] (-1 padding), and each row's score."""

    rows: np.ndarray

    def valid(self) -> np.ndarray:
        return self.rows >= 0


def rank_candidates(cand_q: np.ndarray, score: np.ndarray, tokens: np.ndarray, unit: np.ndarray, n_questions: int,
                    depth: int, keep: np.ndarray | None = None, questions: np.ndarray | None = None) -> Ranked:
    """Each question's top ``depth`` candidates by ``score`` (ties: fewer tokens, then the unit's
    position), only rows where ``keep`` and only for ``questions`` (others: all padding)."""
    ok = np.ones(len(cand_q), dtype=bool) if keep is None else np.asarray(keep, dtype=bool).copy()
    if questions is not None:
        inq = np.zeros(n_questions, dtype=bool)
        inq[np.asarray(questions, dtype=np.int64)] = True
        ok &= inq[cand_q]
    idx = np.flatnonzero(ok & ~np.isnan(score))
    order = idx[np.lexsort((unit[idx], tokens[idx], -score[idx], cand_q[idx]))]
    q = cand_q[order]
    r = segment_rank(q)
    top = r < depth
    out = np.full((n_questions, depth), -1, dtype=np.int64)
    out[q[top], r[top]] = order[top]
    return Ranked(out)


def plan_table(ranked: Ranked, texts: Sequence[str], unit: np.ndarray, evidence: Sequence[str], rows: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """True F1 and tokens [len(rows), K] of every prefix of the rankings of questions ``rows``
    (a prefix past a question's last candidate repeats its whole ranking)."""
    streams = [[texts[unit[c]] for c in ranked.rows[q] if c >= 0] for q in rows]  # table building: one list a question
    pt = prefix_table(streams, [evidence[q] for q in rows], ranked.rows.shape[1])
    return pt.f1[:, :, 0], pt.tokens[:, :, 0].astype(float)


def predicted_evidence(cand_q: np.ndarray, pred: np.ndarray, tokens: np.ndarray, n_questions: int) -> np.ndarray:
    """Each question's evidence tokens as its candidates predict them, float64 [Q]: the sum of
    clip(p, 0, 1) * tokens over its candidates (no labels: the stopping estimate on a new set)."""
    p = np.clip(np.nan_to_num(pred, nan=0.0), 0.0, 1.0)
    return np.bincount(cand_q, weights=p * tokens, minlength=n_questions)


def document_evidence(cand_q: np.ndarray, pred: np.ndarray, doc_tokens: np.ndarray, n_questions: int) -> np.ndarray:
    """Each question's evidence tokens bounded by the document its highest-predicted candidate sits
    in, float64 [Q] (``doc_tokens`` [N]: each candidate's document's tokens; ties: the first row; a
    question without candidates: 0). No labels: where evidence is a whole short document (an
    abstract, an explanation) this is its length; where it is a sentence of a long paper it is far
    too long, and the selector reads up to the budget."""
    out = np.zeros(n_questions, dtype=np.float64)
    if not len(cand_q):
        return out
    first = group_best_row(pred, cand_q)
    out[cand_q[first]] = doc_tokens[first]
    return out


def evidence_estimate(estimate: str, median: float, cand_q: np.ndarray, pred: np.ndarray, tokens: np.ndarray,
                      doc_tokens: np.ndarray | None, n_questions: int):
    """E for the estimated F1 by the selector's ``evidence`` knob (:data:`EVIDENCE`): ``median``
    (one number), ``predicted`` or ``document`` (one per question, [Q])."""
    if estimate == "predicted":
        return predicted_evidence(cand_q, pred, tokens, n_questions)
    if estimate == "document":
        if doc_tokens is None:
            raise ValueError("evidence=document needs each candidate's document tokens")
        return document_evidence(cand_q, pred, doc_tokens, n_questions)
    if estimate != "median":
        raise ValueError(f"evidence={estimate!r}: one of {EVIDENCE}")
    return median


def document_tokens(unit_doc: np.ndarray, unit_tokens: np.ndarray, cand_unit: np.ndarray) -> np.ndarray:
    """Each candidate's document's tokens, float64 [N] (``unit_doc``, ``unit_tokens``: every unit's, [U],
    in corpus order so that a document's units are one run). Only the candidates' documents' units
    are read (binary search for each run): the cost follows the questions, not the corpus."""
    if not len(cand_unit):
        return np.zeros(0)
    docs, inv = np.unique(np.asarray(unit_doc)[cand_unit], return_inverse=True)
    lo, hi = np.searchsorted(unit_doc, docs, "left"), np.searchsorted(unit_doc, docs, "right")
    return range_sums(unit_tokens, lo, hi)[inv.ravel()]


def estimated_f1(ranked: Ranked, pred: np.ndarray, tokens: np.ndarray, rows: np.ndarray, evidence_len) -> np.ndarray:
    """F1_hat of every prefix [len(rows), K] (module doc); -inf past a question's candidates except
    that an empty ranking's first plan stays selectable (0). ``evidence_len``: E, one number, or
    one per row ([len(rows)]: :func:`predicted_evidence`)."""
    r = ranked.rows[rows]
    ok = r >= 0
    p = np.where(ok, np.clip(pred[np.maximum(r, 0)], 0.0, 1.0), 0.0)
    t = np.where(ok, tokens[np.maximum(r, 0)], 0.0)
    gain, spend = np.cumsum(p * t, axis=1), np.cumsum(t, axis=1)
    e = np.asarray(evidence_len, dtype=np.float64)
    u = 2.0 * gain / np.maximum(spend + (e[:, None] if e.ndim else e), 1e-9)
    u = np.where(ok, u, -np.inf)
    u[:, 0] = np.where(ok[:, 0], u[:, 0], 0.0)
    return u


def selector_learned(name: str, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray, pred: np.ndarray,
                     fold_val: list[tuple[np.ndarray, np.ndarray, np.ndarray]], evidence_len: list[float],
                     fold: np.ndarray, texts: Sequence[str], evidence: Sequence[str], depth: int,
                     keep: np.ndarray | None = None, keep_val: list[np.ndarray] | None = None,
                     estimate: str = "median", doc_tokens: np.ndarray | None = None) -> Learned:
    """The selector as a :class:`Learned` policy: test plans from the out-of-fold ranking ``pred``
    [N], validation plans of fold j from fold j's own predictions on its validation questions;
    ``keep`` (and per fold ``keep_val``) restricts the candidates (route + trim). ``estimate``: the
    estimated F1's E (:func:`evidence_estimate`): each fold's training median (``evidence_len[j]``),
    or per question (``predicted``; ``document``, from ``doc_tokens`` [N])."""
    n_q = len(fold)
    ranked = rank_candidates(cand_q, pred, tokens, unit, n_q, depth, keep)
    allq = np.arange(n_q)
    f1, tok = plan_table(ranked, texts, unit, evidence, allq)
    util = np.full(f1.shape, -np.inf)

    def est(p: np.ndarray, e: float, rows: np.ndarray):
        out = evidence_estimate(estimate, e, cand_q, p, tokens, doc_tokens, n_q)
        return out if np.ndim(out) == 0 else out[rows]

    for j, e in enumerate(evidence_len):  # folds: each test question's estimate uses its fold's E
        test = np.flatnonzero(fold == j)
        util[test] = estimated_f1(ranked, pred, tokens, test, est(pred, e, test))
    val = []
    for j, (vq, vrows, vpred) in enumerate(fold_val):
        vp = np.full(len(cand_q), np.nan)
        vp[vrows] = vpred
        vk = None if keep_val is None else keep_val[j]
        rv = rank_candidates(cand_q, vp, tokens, unit, n_q, depth, vk, vq)
        vf, vt = plan_table(rv, texts, unit, evidence, vq)
        val.append((vq, estimated_f1(rv, vp, tokens, vq, est(vp, evidence_len[j], vq)), vf, vt))
    return Learned(name, util, f1, tok, val)


def sentence_oracle(cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray, density: np.ndarray, n_questions: int,
                    texts: Sequence[str], evidence: Sequence[str], depth: int) -> Family:
    """Per question the prefixes of its true-density ranking (F1 and tokens [Q, K]): the sentence
    oracle's choices (:func:`mogg.evaluation.frontier.oracle_at` over them)."""
    ranked = rank_candidates(cand_q, density, tokens, unit, n_questions, depth)
    f1, tok = plan_table(ranked, texts, unit, evidence, np.arange(n_questions))
    return Family("sentence oracle", f1, tok, [f"k={k + 1}" for k in range(depth)])


def context_units(ladder, deep_ids: np.ndarray, choice: np.ndarray, space, lex_tokens: np.ndarray,
                  cand_q: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Which candidate rows lie inside each question's chosen action's context (bool [N]): the
    units of the top-k chunks of its level, in rank order, while the cap's tokens last (a unit that
    starts inside the cap counts). ``choice`` [Q] action index into ``space``."""
    lv, kk, cp = (x[choice] for x in space.grid())
    caps = np.array([np.inf if c is None else c for c in space.caps])[cp]
    n_u = len(ladder.units)
    inside = np.zeros(len(cand_q), dtype=bool)
    key = cand_q * n_u + unit
    order = np.argsort(key)
    for level in np.unique(lv):  # L levels, not questions
        qs = np.flatnonzero(lv == level)
        cov = ladder.levels[level].coverage
        depth = int(kk[qs].max()) + 1
        ids = deep_ids[qs, level, :depth]
        ranks = np.broadcast_to(np.arange(depth), ids.shape)
        ok = (ids >= 0) & (ranks <= kk[qs][:, None])
        q = np.broadcast_to(qs[:, None], ids.shape)[ok]
        c = ids[ok]
        ptr = cov.indptr
        n = ptr[c + 1] - ptr[c]
        offs = range_indices(ptr[c], n)
        u = cov.indices[offs].astype(np.int64)
        qq = np.repeat(q, n)
        # tokens read before each unit within its question's stream (chunks in rank order, units in order)
        before = np.r_[0, np.cumsum(lex_tokens[u])[:-1]]
        start = np.r_[0, np.flatnonzero(qq[1:] != qq[:-1]) + 1]
        first = np.repeat(start, np.diff(np.r_[start, len(qq)]))
        used = before - before[first]
        keep = used < caps[qq]
        k2 = qq[keep] * n_u + u[keep]
        pos = np.searchsorted(key[order], k2)
        hit = (pos < len(order)) & (key[order][np.minimum(pos, len(order) - 1)] == k2)
        inside[order[pos[hit]]] = True
    return inside
