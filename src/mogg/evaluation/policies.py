"""Run every selection policy on a prepared ladder and score it without an LLM.

Policies (all but ``topk_all`` are MoG eq. 1-2 with some weight matrix):
``fixed:<level>`` (MedRAG-style), ``mog_router`` (trained router, out-of-fold),
``mog_prior`` (constant training-mean weights), ``mog_transfer`` (a router trained on another
question set) with ``source_best_fixed`` (the level it falls back to), ``labels`` (the soft labels used as weights:
how good the labels are), ``oracle`` (per-question best fixed level), ``random`` (seeded random
level) and ``topk_all`` (all levels ranked together by raw score). With ``router.profiles``,
``best_action`` (the eq. 1 action best on average) and ``action_oracle`` (per question) are the
baselines of a router over actions (:mod:`mogg.routing.profiles`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from mogg.core.metrics import aggregate, gold_hit, tfidf_cosine, token_prf
from mogg.core.text import count_tokens
from mogg.evaluation import names as N
from mogg.prepared import Prepared
from mogg.routing.inputs.objectives import best_fixed_level
from mogg.routing.profiles import ProfileSpace
from mogg.selection import (
    Selection,
    cap_contexts,
    mog_select,
    one_hot,
    random_level_select,
    topk_all_select,
)

log = logging.getLogger(__name__)

METRICS = ("f1", "precision", "recall", "label_sim", "gold_hit", "ctx_tokens")


def policy_weights(prep: Prepared, routers: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Weight matrices [Q, L] of the eq. 1-2 policies that apply: the given router policies
    (name -> weights), then the soft labels and the oracle level."""
    n_l = prep.ladder.n_levels
    out = dict(routers or {})
    out[N.LABELS] = prep.labels
    oracle = prep.oracle_level()
    if (oracle >= 0).any():
        out[N.ORACLE] = one_hot(np.maximum(oracle, 0), n_l)
    if prep.profile_f1 is not None:
        space = ProfileSpace(prep.profiles, n_l)
        u = prep.profile_f1
        out[N.BEST_ACTION] = space.weights(np.full(len(u), best_fixed_level(u)))  # best fixed action
        out[N.ACTION_ORACLE] = space.weights(u.argmax(axis=1))
    return out


@dataclass
class PolicyResult:
    """One policy's selection and what it gave every question (all per-question lists have Q rows)."""

    selection: Selection
    level: np.ndarray  # int64 [Q]: the level eq. 2 injects (the first snippet's level for other policies)
    metrics: dict[str, np.ndarray] = field(default_factory=dict)  # METRICS -> float64 [Q]
    docs: list[list[str]] = field(default_factory=list)  # documents the selected snippets come from
    contexts: list[str] = field(default_factory=list)  # the snippets joined (capped at max_context_tokens)
    snippets: list[list[str]] = field(default_factory=list)  # what a reader is given, in rank order
    weights: np.ndarray | None = None  # [Q, L] eq. 1 weights of weight policies
    n_cut: int = 0  # contexts cut to max_context_tokens

    def subset(self, rows: np.ndarray) -> "PolicyResult":
        """The result restricted to questions ``rows``."""
        return PolicyResult(
            Selection(self.selection.level[rows], self.selection.chunk[rows]), self.level[rows],
            {m: v[rows] for m, v in self.metrics.items()}, [self.docs[i] for i in rows],
            [self.contexts[i] for i in rows], [self.snippets[i] for i in rows],
            None if self.weights is None else self.weights[rows], self.n_cut,
        )


def score_selection(prep: Prepared, sel: Selection, level: np.ndarray, weights: np.ndarray | None = None) -> PolicyResult:
    """Score one selection for every question (metrics float64 [Q], documents, contexts)."""
    lad = prep.ladder
    snippets, n_cut = cap_contexts(sel.contexts(lad), prep.max_context_tokens)
    ctx = [" ".join(c) for c in snippets]
    # metrics read the chunks (tokenised once each, shared by many contexts), equal to reading ctx
    p, r, f = token_prf(snippets, [it.evidence_text for it in prep.items])
    docs = []
    for lrow, crow in zip(sel.level, sel.chunk):
        ds = set()
        for lv, c in zip(lrow, crow):
            if c >= 0:
                cov = lad.levels[lv].coverage
                ds.update(lad.units.doc_ids[d] for d in np.unique(lad.units.doc[cov.indices[cov.indptr[c] : cov.indptr[c + 1]]]))
        docs.append(sorted(ds))
    metrics = {
        "f1": f,
        "precision": p,
        "recall": r,
        "label_sim": tfidf_cosine(snippets, [it.label_text for it in prep.items]),
        "gold_hit": gold_hit(docs, prep.gold_doc_ids or [it.gold_doc_ids for it in prep.items]),
        "ctx_tokens": np.array([sum(map(count_tokens, c)) for c in snippets], dtype=float),
    }
    return PolicyResult(sel, np.asarray(level), metrics, docs, ctx, snippets, weights, n_cut)


def run_policies(
    prep: Prepared,
    k: int,
    routers: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    rows: np.ndarray | None = None,
    extra: dict[str, Selection] | None = None,
) -> dict[str, PolicyResult]:
    """Selections and metrics for every policy; ``rows`` restricts the question set (held-out).

    ``routers`` maps router policy names (``mog_router``, ``mog_prior``, ``mog_transfer``, ...) to
    their eq. 1 weights [Q, L]; ``extra`` adds ladder-specific policies (its builder's hooks)
    scored the same way.
    """
    lad, hits = prep.ladder, prep.hits
    chosen: dict[str, tuple[Selection, np.ndarray, np.ndarray | None]] = {}
    for j, sel in enumerate(prep.fixed):
        chosen[N.fixed(lad.levels[j].name)] = (sel, np.full(len(prep.items), j), None)
    for name, w in policy_weights(prep, routers).items():
        chosen[name] = (mog_select(lad, hits, w, k), w.argmax(axis=1), w)
    rnd = random_level_select(lad, hits, k, seed)
    chosen[N.RANDOM] = (rnd, rnd.level[:, 0], None)
    tk = topk_all_select(hits, k)
    chosen[N.TOPK_ALL] = (tk, tk.level[:, 0], None)
    for name, sel in (extra or {}).items():
        chosen[name] = (sel, sel.level[:, 0], None)
    results = {}
    for name, (sel, level, w) in chosen.items():
        res = results[name] = score_selection(prep, sel, level, w)
        if res.n_cut:
            log.info("%s: %d of %d contexts reach max_context_tokens=%d and are cut there", name, res.n_cut,
                     len(prep.items), prep.max_context_tokens)
    if rows is not None:
        results = {name: res.subset(rows) for name, res in results.items()}
    return results


def _gap_closed(table: dict, lo: float, hi: float) -> dict[str, float]:
    """Each policy's share of the way from F1 ``lo`` (a fixed baseline) to ``hi`` (its oracle)."""
    return {n: (r["f1"]["mean"] - lo) / (hi - lo) if hi > lo else float("nan") for n, r in table.items()}


def summarize(prep: Prepared, results: dict[str, PolicyResult], rows: np.ndarray | None = None) -> dict:
    """Aggregates (mean, se, n) per policy and metric, the level distribution, router accuracy
    against the oracle level, and the share of the best-fixed-to-oracle gap each policy closes."""
    n_l = prep.ladder.n_levels
    oracle = prep.oracle_level() if rows is None else prep.oracle_level()[rows]
    table = {}
    for name, res in results.items():
        row = {m: aggregate(res.metrics[m]) for m in METRICS}
        lv = np.asarray(res.level)
        row["level_share"] = (np.bincount(lv[lv >= 0], minlength=n_l) / max(1, len(lv))).tolist()
        if N.is_routed(name) or name in (N.LABELS, N.RANDOM, N.SOURCE_BEST_FIXED):
            ok = oracle >= 0
            row["oracle_agreement"] = aggregate((lv[ok] == oracle[ok]).astype(float))
        table[name] = row
    fixed = {n: r["f1"]["mean"] for n, r in table.items() if N.is_fixed(n)}
    best_fixed = max(fixed, key=fixed.get)
    summary = {"policies": table, "best_fixed": best_fixed, "levels": prep.ladder.level_names}
    if N.ORACLE in table:
        summary["gap_closed"] = _gap_closed(table, fixed[best_fixed], table[N.ORACLE]["f1"]["mean"])
    if N.ACTION_ORACLE in table:  # the stricter gap: best fixed eq. 1 action to the per-question best action
        summary["action_gap_closed"] = _gap_closed(table, table[N.BEST_ACTION]["f1"]["mean"],
                                                   table[N.ACTION_ORACLE]["f1"]["mean"])
        summary["best_action"] = ProfileSpace(prep.profiles, n_l).names(prep.ladder.level_names)[
            best_fixed_level(prep.profile_f1)]
    return summary
