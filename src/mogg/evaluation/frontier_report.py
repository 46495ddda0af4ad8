"""The frontier evaluation of one ladder: matched-cost table, area, tokens-to-reach, plots.

Every policy is compared at matched mean tokens B: a family deploys the configuration chosen on
the training folds for B (:func:`mogg.evaluation.frontier.crossfit_choice`), the action router
the cost weight calibrated on its fold's validation questions for B. Only questions with gold
evidence take part (F1 is undefined without it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from mogg.core.metrics import aggregate
from mogg.evaluation.frontier import (
    Family,
    area_share,
    choose_config,
    crossfit_choice,
    oracle_at,
    oracle_frontier,
    paired_interval,
    pareto,
    tokens_to_reach,
)
from mogg.evaluation.frontier_guard import Learned, RouterFolds, guarded_at, route_at

GRID = 16.0 * np.sqrt(2.0) ** np.arange(13)  # 16 .. 1024 tokens, every half power of two
TRANSFERRED, TRAINING_ENVELOPE = "transferred router", "training sets' envelope"  # leave-one-set-out rows


def _row(f1: np.ndarray, tok: np.ndarray, env_f1: np.ndarray, n_boot: int, seed: int, config: str = "") -> dict:
    d, lo, hi = paired_interval(f1, env_f1, n_boot, seed)
    return {"f1": aggregate(f1), "tokens": aggregate(tok), "vs_envelope": {"mean": d, "lo": lo, "hi": hi},
            "config": config, "_q": (np.asarray(f1, float), np.asarray(tok, float))}  # per question: popped below


def _reading_rows(reading: Reading, folds: np.ndarray, fixed: Family, b: float, ef: np.ndarray, n_boot: int, seed: int,
                  guard_se: float) -> dict:
    """The selector guarded and not, route + trim guarded over its variants (where evaluated at
    ``b``), and the sentence oracle at ``b``."""
    res = {}
    f, t, src, names, facts = guarded_at(folds, fixed, b, [reading.selector], True, guard_se)
    res["selector"] = _row(f, t, ef, n_boot, seed, f"selector {(src >= 0).mean():.0%}")
    res["selector"].update(own=float((src >= 0).mean()), calibration=facts)
    f, t, _, _, _ = guarded_at(folds, fixed, b, [reading.selector], False)
    res["selector (unguarded)"] = _row(f, t, ef, n_boot, seed)
    trims = reading.trims(b)
    if trims:
        f, t, src, names, facts = guarded_at(folds, fixed, b, trims, True, guard_se)
        used = Counter(["envelope" if s < 0 else names[s] for s in src.tolist()])
        res["route + trim"] = _row(f, t, ef, n_boot, seed, ", ".join(f"{n} {c / len(src):.0%}" for n, c in used.items()))
        res["route + trim"].update(own=float((src >= 0).mean()), calibration=facts)
    tx, fy = oracle_at(np.nan_to_num(reading.oracle.f1), reading.oracle.tokens, b)
    res["sentence oracle"] = {"f1": {"mean": fy, "se": float("nan"), "n": len(ef)}, "tokens": {"mean": tx}}
    return res


def _most_common(fam: Family, choice: np.ndarray) -> str:
    (c, n), = Counter(choice.tolist()).most_common(1)
    return fam.configs[c] + ("" if n == len(choice) else f" ({n / len(choice):.0%})")


@dataclass
class Reading:
    """The read-inside-the-chunk policies (:mod:`mogg.evaluation.sentence_frontier`): the evidence
    selector over all levels' candidates, route + trim (a function of the budget: the variants to
    guard over, or None where it is not evaluated), and the sentence oracle's plans."""

    selector: Learned
    trims: object  # Callable[[float], list[Learned] | None]
    oracle: Family
    cost_ms: dict | None = None  # per question: gathering candidates and features, scoring (wall clock)


def frontier_evaluation(fixed: Family, others: list[Family], folds: np.ndarray, budgets: list[int],
                        router: RouterFolds | None = None, n_boot: int = 1000, seed: int = 0,
                        reading: Reading | None = None, guard_se: float = 1.0, transfer=None) -> dict:
    """Matched-cost table at ``budgets``, curves on :data:`GRID`, area share and tokens-to-reach;
    with ``reading``, the selector (guarded and not), route + trim (at ``budgets``) and the
    sentence oracle too. ``transfer``: budget -> {name: (F1 [Q], tokens [Q], config)} of policies
    fixed before this set was seen (a router trained on other sets, their envelope), rows at the
    table's budgets; the transferred router also gets its paired interval against the training
    sets' envelope (``vs_training_envelope``)."""
    keep = ~np.isnan(fixed.f1).any(axis=1)
    if not keep.any():
        raise ValueError("no question has gold evidence: the frontier needs evidence F1")
    sub = np.flatnonzero(keep)
    new = np.full(len(keep), -1)
    new[sub] = np.arange(len(sub))

    def cut(fam: Family) -> Family:
        return Family(fam.name, fam.f1[sub], fam.tokens[sub], fam.configs, fam.fixed, fam.meta, fam.routed)

    fixed, others, folds = cut(fixed), [cut(o) for o in others], np.asarray(folds)[sub]
    if router is not None:
        val = [(new[v][new[v] >= 0], u[new[v] >= 0]) for v, u in router.val]
        router = RouterFolds(router.util[sub], router.fold[sub], val, router.guard, router.max_tokens, router.guard_se)
    cost = reading.cost_ms if reading is not None else None
    if reading is not None:
        trims = reading.trims
        reading = Reading(reading.selector.cut(sub, new),
                          lambda b: None if (ts := trims(b)) is None else [t.cut(sub, new) for t in ts], cut(reading.oracle))
    rows = np.arange(len(sub))
    ox, oy = oracle_frontier(fixed.f1, fixed.tokens)
    hx, hy = pareto(np.c_[fixed.tokens.mean(0), fixed.f1.mean(0)])
    out: dict = {"n": int(len(sub)), "n_dropped": int((~keep).sum()), "budgets": {}, "curves": {},
                 "oracle_curve": [ox.tolist(), oy.tolist()], "hindsight_curve": [hx.tolist(), hy.tolist()]}
    if cost:
        out["selector_cost_ms"] = dict(cost)

    def policies_at(b: float) -> dict:
        ef, et, ec = crossfit_choice(fixed.f1, fixed.tokens, folds, b)
        res = {"envelope": _row(ef, et, ef, n_boot, seed, _most_common(fixed, ec))}
        hc = choose_config(fixed.f1, fixed.tokens, rows, b)
        res["envelope (hindsight)"] = _row(fixed.f1[:, hc], fixed.tokens[:, hc], ef, n_boot, seed, fixed.configs[hc])
        if router is not None:
            rf, rt, src, names, facts = route_at(router, fixed, b, [o for o in others if o.routed])
            used = Counter(["envelope" if s < 0 else names[s] for s in src.tolist()])
            res["router"] = _row(rf, rt, ef, n_boot, seed, ", ".join(f"{n} {c / len(src):.0%}" for n, c in used.items()))
            res["router"].update(own=float((src >= 0).mean()), calibration=facts)
            if router.guard:
                raw = RouterFolds(router.util, router.fold, router.val, False, router.max_tokens)
                rf, rt, _, _, _ = route_at(raw, fixed, b)
                res["router (action, unguarded)"] = _row(rf, rt, ef, n_boot, seed)
        for fam in others:
            f, t, c = crossfit_choice(fam.f1, fam.tokens, folds, b)
            res[fam.name] = _row(f, t, ef, n_boot, seed, _most_common(fam, c))
        tx, fy = oracle_at(fixed.f1, fixed.tokens, b)
        res["oracle"] = {"f1": {"mean": fy, "se": float("nan"), "n": len(sub)}, "tokens": {"mean": tx}}
        if reading is not None:
            res.update(_reading_rows(reading, folds, fixed, b, ef, n_boot, seed, guard_se))
        named = transfer(b) if transfer is not None and b in table_budgets else {}
        for n, (f, t, conf) in named.items():
            res[n] = _row(f[sub], t[sub], ef, n_boot, seed, conf)
        if TRANSFERRED in named and TRAINING_ENVELOPE in named:
            d, lo, hi = paired_interval(named[TRANSFERRED][0][sub], named[TRAINING_ENVELOPE][0][sub], n_boot, seed)
            res[TRANSFERRED]["vs_training_envelope"] = {"mean": d, "lo": lo, "hi": hi}
        return res

    table_budgets = {float(b) for b in budgets}
    for b in budgets:
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
    curves = {float(b): policies_at(b) for b in GRID}
    for res in curves.values():
        for r in res.values():
            r.pop("_q", None)
    names = [n for n in curves[GRID[0]] if n not in ("oracle", "sentence oracle")]
    out["curves"] = {n: {"tokens": [curves[b][n]["tokens"]["mean"] for b in curves],
                         "f1": [curves[b][n]["f1"]["mean"] for b in curves],
                         "se": [curves[b][n]["f1"]["se"] for b in curves],
                         # the paired 95% interval of the difference to the envelope at each budget
                         "gain_lo": [curves[b][n]["vs_envelope"]["lo"] for b in curves],
                         "gain_hi": [curves[b][n]["vs_envelope"]["hi"] for b in curves]} for n in names}
    out["grid"] = {"budget": [float(b) for b in curves], "oracle": [curves[b]["oracle"]["f1"]["mean"] for b in curves]}
    if reading is not None:
        out["grid"]["sentence oracle"] = [curves[b]["sentence oracle"]["f1"]["mean"] for b in curves]
        out["grid"]["sentence oracle tokens"] = [curves[b]["sentence oracle"]["tokens"]["mean"] for b in curves]
    lo, hi = min(budgets), max(budgets)
    span = [b for b in curves if lo <= b <= hi]
    env = np.array([curves[b]["envelope"]["f1"]["mean"] for b in span])
    orc = np.array([curves[b]['oracle']['f1']['mean'] for b in span])
    out["area"] = {n: area_share(np.array(span), np.array([curves[b][n]["f1"]["mean"] for b in span]), env, orc)
                   for n in names if n != "envelope"}
    out["area"]["oracle"] = 1.0
    if reading is not None:
        so = np.array([curves[b]["sentence oracle"]["f1"]["mean"] for b in span])
        out["area"]["sentence oracle"] = area_share(np.array(span), so, env, orc)
    target = max(out["curves"]["envelope"]["f1"])
    out["reach_target"] = target
    out["reach"] = {n: tokens_to_reach(np.array(c["tokens"]), np.array(c["f1"]), target) for n, c in out["curves"].items()}
    out["reach"]["oracle"] = tokens_to_reach(ox, oy, target)
    return out
