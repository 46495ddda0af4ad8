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
    calibrate_lambda,
    choose_config,
    crossfit_choice,
    oracle_at,
    oracle_frontier,
    paired_interval,
    pareto,
    tokens_to_reach,
)
from mogg.routing.actions import decide

GRID = 16.0 * np.sqrt(2.0) ** np.arange(13)  # 16 .. 1024 tokens, every half power of two
TOKEN_SLACK = 0.02  # the guard's tolerance on pooled validation tokens (guarded_at)
TRANSFERRED, TRAINING_ENVELOPE = "transferred router", "training sets' envelope"  # leave-one-set-out rows


@dataclass
class RouterFolds:
    """What the frontier needs of a cross-fitted action router (rows index the questions)."""

    util: np.ndarray  # [Q, A] out-of-fold predicted utilities (columns = the fixed family's)
    fold: np.ndarray  # [Q]
    val: list[tuple[np.ndarray, np.ndarray]]  # per fold: (validation rows, that fold's utilities on them)
    guard: bool = True  # per fold and budget: keep the envelope's configuration unless the router beats it on validation
    max_tokens: float | None = None
    # ... by guard_se standard errors of the paired difference: lambda is chosen on the same
    # validation rows (optimistic), and a fold's validation slice is small, so a point-estimate
    # win there often does not hold on the fold's test questions (the one-SE rule)
    guard_se: float = 1.0


def best_lambda(util: np.ndarray, tokens: np.ndarray, f1: np.ndarray, budget: float,
                max_tokens: float | None = None) -> float:
    """The cost weight for ``budget``, chosen on validation rows: among lambda >= the calibrated one
    (so mean tokens stay <= budget there), the one with the best validation F1, as the envelope
    takes the best configuration under the budget rather than the one that spends it all (reading
    more can lower F1). Ties: the smallest lambda."""
    lam0 = calibrate_lambda(util, tokens, budget)
    cands = np.r_[lam0, lam0 * np.geomspace(1.25, 1e4, 40) if lam0 > 0 else np.geomspace(1e-6, 1.0, 40)]
    rows = np.arange(len(util))
    scores = [np.nanmean(f1[rows, decide(util, tokens, lam, max_tokens)]) for lam in cands]
    return float(cands[int(np.argmax(scores))])


@dataclass
class Learned:
    """A learned policy over its own per-question plans (the action router's (level, k, cap); the
    evidence selector's prefixes of its sentence ranking): out-of-fold predicted utilities and each
    plan's true F1 and tokens [Q, A]; per fold its validation questions with that fold's utilities
    and the plans' F1 and tokens there (where lambda is calibrated). Rows index the questions."""

    name: str
    util: np.ndarray
    f1: np.ndarray
    tokens: np.ndarray
    val: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # per fold: (rows, util, f1, tokens)
    max_tokens: float | None = None

    def cut(self, sub: np.ndarray, new: np.ndarray) -> "Learned":
        """The same policy on questions ``sub`` (``new``: old row -> new row, -1 dropped)."""
        val = []
        for v, u, f, t in self.val:
            ok = new[v] >= 0
            val.append((new[v][ok], u[ok], f[ok], t[ok]))
        return Learned(self.name, self.util[sub], self.f1[sub], self.tokens[sub], val, self.max_tokens)

    def choices(self, j: int, test: np.ndarray, budget: float) -> tuple[float, np.ndarray, np.ndarray]:
        """Fold j at ``budget``: lambda (chosen on its validation questions) and the plans it picks
        for the ``test`` rows and for its validation rows."""
        vrows, vutil, vf, vt = self.val[j]
        lam = best_lambda(vutil, vt, vf, budget, self.max_tokens) if len(vrows) else 0.0
        ch = decide(self.util[test], self.tokens[test], lam, self.max_tokens)
        va = decide(vutil, vt, lam, self.max_tokens) if len(vrows) else np.zeros(0, dtype=np.int64)
        return lam, ch, va

    def at_fold(self, j: int, test: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Fold j at ``budget``: test F1 and tokens, validation F1 and tokens (lambda from validation)."""
        vrows, _, vf, vt = self.val[j]
        lam, ch, va = self.choices(j, test, budget)
        rt, rv = np.arange(len(test)), np.arange(len(vrows))
        return (self.f1[test][rt, ch], self.tokens[test][rt, ch], vf[rv, va], vt[rv, va],
                {"lambda": lam, "n_val": int(len(vrows))})


def action_learned(r: RouterFolds, fixed: Family) -> Learned:
    """The action router as a :class:`Learned` policy: its plans are the fixed family's columns."""
    return Learned("action router", r.util, fixed.f1, fixed.tokens,
                   [(v, u, fixed.f1[v], fixed.tokens[v]) for v, u in r.val], r.max_tokens)


def route_at(r: RouterFolds, fixed: Family, budget: float, routed: list[Family] | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], list[dict]]:
    """The router policy at ``budget`` (:func:`guarded_at` over the action router and every
    ``routed`` family: eq. 1-2 under the level router's weights), guarded as ``r`` says."""
    return guarded_at(r.fold, fixed, budget, [action_learned(r, fixed), *(routed or [])], r.guard, r.guard_se)


def guarded_at(fold: np.ndarray, fixed: Family, budget: float, candidates: list, guard: bool = True,
               guard_se: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], list[dict]]:
    """A guarded policy at ``budget``: per question its F1 and tokens, which candidate decided (int
    [Q] into the returned names; -1: the guard kept the envelope's configuration), and per-fold facts.

    Candidates: :class:`Learned` policies (lambda calibrated on their fold's validation questions)
    and families (each deployed at the configuration chosen on its training folds). The guard for
    fold k pools every fold j's validation rows that are not fold k's test rows (fold j's candidate
    against fold j's envelope on them): no test row of fold k enters its decision, and the pooled
    slice is ~4x a single fold's. Fold k deploys the candidate with the best pooled gain among those
    beating the envelope by ``guard_se`` standard errors (the one-SE rule), else the envelope.
    Without ``guard`` the first candidate decides everywhere.
    """
    f, t = fixed.f1, fixed.tokens
    names = [c.name for c in candidates]
    n_q, n_c = len(fold), len(candidates)
    qf, qt = np.empty((n_c, n_q)), np.empty((n_c, n_q))  # every candidate's test-fold outcome
    env_f, env_t = np.empty(n_q), np.empty(n_q)
    facts, diffs = [], []  # diffs[j][c]: fold j's validation rows, candidate c minus fold j's envelope
    folds = np.unique(fold)
    for j in folds:
        test = np.flatnonzero(fold == j)
        train = np.flatnonzero(fold != j)
        env = choose_config(f, t, train, budget)
        env_f[test], env_t[test] = f[test, env], t[test, env]
        vrows = next((c.val[j][0] for c in candidates if isinstance(c, Learned)), np.zeros(0, dtype=np.int64))
        fact: dict = {"fold": int(j)}
        d, dt = [np.zeros(0)] * n_c, [np.zeros(0)] * n_c  # F1 and token differences to the envelope
        for c, cand in enumerate(candidates):
            if isinstance(cand, Learned):
                qf[c, test], qt[c, test], vf, vt, info = cand.at_fold(j, test, budget)
                vrows = cand.val[j][0]
                if c == 0:  # the first candidate's calibration is the policy's fact
                    fact.update(info, envelope=fixed.configs[env])
                    if len(vrows):
                        fact.update(val_tokens=float(vt.mean()), val_f1=float(np.nanmean(vf)),
                                    val_envelope_f1=float(np.nanmean(f[vrows, env])))
                if len(vrows):
                    d[c], dt[c] = vf - f[vrows, env], vt - t[vrows, env]
            else:
                cc = choose_config(cand.f1, cand.tokens, train, budget)
                qf[c, test], qt[c, test] = cand.f1[test, cc], cand.tokens[test, cc]
                if len(vrows):
                    d[c], dt[c] = cand.f1[vrows, cc] - f[vrows, env], cand.tokens[vrows, cc] - t[vrows, env]
        fact.setdefault("envelope", fixed.configs[env])
        diffs.append((vrows, d, dt, t[vrows, env]))
        facts.append(fact)
    source = np.zeros(n_q, dtype=np.int64)
    out_f, out_t = qf[0].copy(), qt[0].copy()
    if guard:
        rows_all = np.arange(n_q)
        for k, fact in zip(folds, facts):
            test = fold == k
            gains = []
            env_tok = np.concatenate([et[~test[vj]] for vj, _, _, et in diffs])
            for c in range(n_c):
                dd = np.concatenate([dj[c][~test[vj]] for vj, dj, _, _ in diffs])
                extra = np.concatenate([tj[c][~test[vj]] for vj, _, tj, _ in diffs])
                ok = ~np.isnan(dd)
                dd, extra = dd[ok], extra[ok]
                mean = float(dd.mean()) if len(dd) else 0.0
                se = float(dd.std(ddof=1) / np.sqrt(len(dd))) if len(dd) > 1 else 0.0
                # within the budget on validation, or no dearer than the envelope where nothing fits;
                # TOKEN_SLACK: each fold's lambda holds its own validation slice to <= B, the pool here
                # drops the rows in fold k's test set, and a subset's mean may pass B by a token
                tokens = float((env_tok[ok] + extra).mean()) if len(dd) else 0.0
                fits = tokens <= budget * (1 + TOKEN_SLACK) + 1e-9 or (len(dd) > 0 and extra.mean() <= 1e-9)
                gains.append({"candidate": names[c], "n": int(len(dd)), "gain": mean, "se": se, "tokens": tokens,
                              "passes": bool(fits and mean > guard_se * se)})
            fact["guard"] = gains
            ok = [c for c in range(n_c) if gains[c]["passes"]]
            rows = rows_all[test]
            if ok:
                best = max(ok, key=lambda c: gains[c]["gain"])
                source[rows], out_f[rows], out_t[rows] = best, qf[best, rows], qt[best, rows]
                fact["deployed"] = names[best]
            else:
                source[rows], out_f[rows], out_t[rows] = -1, env_f[rows], env_t[rows]
                fact["deployed"] = "envelope"
    return out_f, out_t, source, names, facts


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
