"""The frontier evaluation of one ladder: matched-cost table, area, tokens-to-reach, plots.

Every policy is compared at matched mean tokens B: a family deploys the configuration chosen on
the training folds for B (:func:`mogg.evaluation.frontier.crossfit_choice`), a learned budget
router the cost weight calibrated on its fold's validation questions for B. Only questions with gold
evidence take part (F1 is undefined without it).
"""

from __future__ import annotations

import logging
from collections import Counter

import numpy as np

from mogg.core.progress import Heartbeat
from mogg.evaluation import names as N
from mogg.evaluation.frontier import (
    Family,
    area_share,
    choose_config,
    crossfit_choice,
    oracle_at,
    oracle_frontier,
    paired_interval,
    pareto,
    share_kept,
    tokens_to_reach,
)
from mogg.evaluation.frontier_guard import BudgetPolicy, TableAt, cut_family

GRID = 16.0 * np.sqrt(2.0) ** np.arange(13)  # 16 .. 1024 tokens, every half power of two
TRANSFERRED, TRAINING_ENVELOPE = "transferred router", "training sets' envelope"  # leave-one-set-out rows

log = logging.getLogger(__name__)


def _most_common(fam: Family, choice: np.ndarray) -> str:
    (c, n), = Counter(choice.tolist()).most_common(1)
    return fam.configs[c] + ("" if n == len(choice) else f" ({n / len(choice):.0%})")


def frontier_evaluation(fixed: Family, others: list[Family], folds: np.ndarray, budgets: list[int],
                        policies: list[BudgetPolicy], n_boot: int, seed: int, transfer=None) -> dict:
    """Matched-cost table at ``budgets``, curves on :data:`GRID`, area share and tokens-to-reach;
    every learned budget router's ``policies`` add their rows (:class:`BudgetPolicy`: a chunk-level
    router's guarded policy, or a policy reading inside the chunk with its own ceiling), in
    their order, chunk-level ones before the fixed families and inside-the-chunk ones after the
    oracle. ``transfer``: budget -> {name: (F1 [Q], tokens [Q], config)} of policies fixed before
    this set was seen (a router trained on other sets, their envelope), rows at the table's
    budgets; the transferred router also gets its paired interval against the training sets'
    envelope (``vs_training_envelope``). A value (F1, tokens, config, in-set row) names the in-set row of its
    kind (a row of this table): its ``kept`` is the share of that row's gain over the envelope it keeps
    (:func:`~mogg.evaluation.frontier.share_kept`)."""
    keep = ~np.isnan(fixed.f1).any(axis=1)
    if not keep.any():
        raise ValueError("no question has gold evidence: the frontier needs evidence F1")
    sub = np.flatnonzero(keep)
    new = np.full(len(keep), -1)
    new[sub] = np.arange(len(sub))
    fixed, others, folds = cut_family(fixed, sub), [cut_family(o, sub) for o in others], np.asarray(folds)[sub]
    policies = [p.cut(sub, new) for p in policies]
    chunk = [p for p in policies if not p.reads_units]
    inside = [p for p in policies if p.reads_units]
    ceilings = [c for p in policies for c in p.ceilings]
    routed = [o for o in others if o.routed]
    rows = np.arange(len(sub))
    ox, oy = oracle_frontier(fixed.f1, fixed.tokens)
    hx, hy = pareto(np.c_[fixed.tokens.mean(0), fixed.f1.mean(0)])
    out: dict = {"n": int(len(sub)), "n_dropped": int((~keep).sum()), "budgets": {}, "curves": {},
                 "oracle_curve": [ox.tolist(), oy.tolist()], "hindsight_curve": [hx.tolist(), hy.tolist()]}
    for p in policies:
        out.update(p.report())

    def policies_at(b: float) -> dict:
        ef, et, ec = crossfit_choice(fixed.f1, fixed.tokens, folds, b)
        table = TableAt(fixed, folds, ef, routed, n_boot, seed)
        res = {"envelope": table.row(ef, et, _most_common(fixed, ec))}
        hc = choose_config(fixed.f1, fixed.tokens, rows, b)
        res[N.HINDSIGHT_ENVELOPE] = table.row(fixed.f1[:, hc], fixed.tokens[:, hc], fixed.configs[hc])
        for p in chunk:
            res.update(p.rows(b, table))
        for fam in others:
            f, t, c = crossfit_choice(fam.f1, fam.tokens, folds, b)
            res[fam.name] = table.row(f, t, _most_common(fam, c))
        tx, fy = oracle_at(fixed.f1, fixed.tokens, b)
        res["oracle"] = {"f1": {"mean": fy, "se": float("nan"), "n": len(sub)}, "tokens": {"mean": tx}}
        for p in inside:
            res.update(p.rows(b, table))
        named = transfer(b) if transfer is not None and b in table_budgets else {}
        for n, (f, t, conf, *_) in named.items():
            res[n] = table.row(f[sub], t[sub], conf)
        for n, (*_, in_set) in ((n, v) for n, v in named.items() if len(v) > 3 and v[3] in res):
            # a transferred row beside its kind's in-set row: the share of that row's gain over the envelope it keeps
            res[n]["kept"] = {"of": in_set, **share_kept(res[n]["_q"][0] - table.env_f1,
                                                         res[in_set]["_q"][0] - table.env_f1, n_boot, seed)}
        for n in named if TRAINING_ENVELOPE in named else ():  # every transferred row against the training sets' envelope
            if n.startswith("transferred"):
                d, lo, hi = paired_interval(named[n][0][sub], named[TRAINING_ENVELOPE][0][sub], n_boot, seed)
                res[n]["vs_training_envelope"] = {"mean": d, "lo": lo, "hi": hi}
        return res

    heart = Heartbeat(log)  # a batch log hears from a long evaluation (COVID-QA: tens of seconds)
    table_budgets = {float(b) for b in budgets}
    for b in budgets:
        heart.beat(lambda b=b: f"frontier: the table at B = {b:g}")
        out["budgets"][int(b)] = policies_at(b)
    table_budgets = set()  # the curves' grid: the table's policies only
    # every policy's per-question F1 and tokens at the table's budgets [n_budgets, n] (rows: ``rows`` of
    # the question set): what pooling seeds question by question needs (mogg.evaluation.collect)
    pols = [p for p in out["budgets"][int(budgets[0])] if "_q" in out["budgets"][int(budgets[0])][p]]
    out["per_question"] = {"rows": sub, "budgets": np.array([int(b) for b in budgets]),
                           **{p: np.stack([np.stack(out["budgets"][int(b)][p]["_q"]) for b in budgets]) for p in pols}}
    for b in budgets:
        for r in out["budgets"][int(b)].values():
            r.pop("_q", None)
    curves = {}
    for b in GRID:
        heart.beat(lambda b=b: f"frontier: the curves, B = {b:g} of {GRID[0]:g}-{GRID[-1]:g}")
        curves[float(b)] = policies_at(b)
    for res in curves.values():
        for r in res.values():
            r.pop("_q", None)
    names = [n for n in curves[GRID[0]] if n not in ("oracle", *ceilings)]
    out["curves"] = {n: {"tokens": [curves[b][n]["tokens"]["mean"] for b in curves],
                         "f1": [curves[b][n]["f1"]["mean"] for b in curves],
                         "se": [curves[b][n]["f1"]["se"] for b in curves],
                         # the paired 95% interval of the difference to the envelope at each budget
                         "gain_lo": [curves[b][n]["vs_envelope"]["lo"] for b in curves],
                         "gain_hi": [curves[b][n]["vs_envelope"]["hi"] for b in curves]} for n in names}
    out["grid"] = {"budget": [float(b) for b in curves], "oracle": [curves[b]["oracle"]["f1"]["mean"] for b in curves]}
    for c in ceilings:  # a learned policy's own ceiling (the sentence oracle), on the grid
        out["grid"][c] = [curves[b][c]["f1"]["mean"] for b in curves]
        out["grid"][f"{c} tokens"] = [curves[b][c]["tokens"]["mean"] for b in curves]
    lo, hi = min(budgets), max(budgets)
    span = [b for b in curves if lo <= b <= hi]
    env = np.array([curves[b]["envelope"]["f1"]["mean"] for b in span])
    orc = np.array([curves[b]['oracle']['f1']['mean'] for b in span])
    out["area"] = {n: area_share(np.array(span), np.array([curves[b][n]["f1"]["mean"] for b in span]), env, orc)
                   for n in names if n != "envelope"}
    out["area"]["oracle"] = 1.0
    for c in ceilings:
        out["area"][c] = area_share(np.array(span), np.array([curves[b][c]["f1"]["mean"] for b in span]), env, orc)
    target = max(out["curves"]["envelope"]["f1"])
    out["reach_target"] = target
    out["reach"] = {n: tokens_to_reach(np.array(c["tokens"]), np.array(c["f1"]), target) for n, c in out["curves"].items()}
    out["reach"]["oracle"] = tokens_to_reach(ox, oy, target)
    for c in ceilings:  # on the grid, as drawn
        out["reach"][c] = tokens_to_reach(np.array(out["grid"][f"{c} tokens"]), np.array(out["grid"][c]), target)
    for n in out["budgets"][int(budgets[0])]:  # a row without a curve (route + trim): from the table's budgets
        if n not in out["reach"]:
            cells = [out["budgets"][int(b)][n] for b in budgets]
            out["reach"][n] = tokens_to_reach(np.array([r["tokens"]["mean"] for r in cells]),
                                              np.array([r["f1"]["mean"] for r in cells]), target)
    return out
