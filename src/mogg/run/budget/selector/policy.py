"""The evidence selector's frontier rows: the selector (guarded and not), route + trim (a chunk-level
router's plans trimmed by the selector) and the sentence oracle beside them, as a
:class:`~mogg.run.budget.base.BudgetPolicy` whose rows follow the chunk oracle."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from mogg.evaluation.frontier import Family, oracle_at, paired_interval
from mogg.evaluation.frontier_guard import cut_family, guarded_at
from mogg.run.budget.base import BudgetPolicy, Learned, TableAt


def _reading_rows(reading: Reading, table: TableAt, b: float) -> dict:
    """The selector guarded and not, route + trim guarded over its variants (where evaluated at
    ``b``), and the sentence oracle at ``b``."""
    res, folds, fixed, guard_se = {}, table.folds, table.fixed, reading.guard_se
    f, t, src, names, facts = guarded_at(folds, fixed, b, [reading.selector], True, guard_se)
    res["selector"] = table.row(f, t, f"selector {(src >= 0).mean():.0%}")
    res["selector"].update(own=float((src >= 0).mean()), calibration=facts)
    f, t, _, _, _ = guarded_at(folds, fixed, b, [reading.selector], False, guard_se)
    res["selector (unguarded)"] = table.row(f, t)
    trims = reading.trims(b)
    if trims:
        f, t, src, names, facts = guarded_at(folds, fixed, b, trims, True, guard_se)
        used = Counter(["envelope" if s < 0 else names[s] for s in src.tolist()])
        res["route + trim"] = table.row(f, t, ", ".join(f"{n} {c / len(src):.0%}" for n, c in used.items()))
        res["route + trim"].update(own=float((src >= 0).mean()), calibration=facts)
    sel_f1 = res["selector"]["_q"][0]
    for name, learned in reading.variants.items():  # the kind's variants: same questions and folds
        f, t, src, _, facts = guarded_at(folds, fixed, b, [learned], True, guard_se)
        res[name] = table.row(f, t, f"selector {(src >= 0).mean():.0%}")
        d, lo, hi = paired_interval(f, sel_f1, table.n_boot, table.seed)
        res[name].update(own=float((src >= 0).mean()), calibration=facts, vs_selector={"mean": d, "lo": lo, "hi": hi})
    tx, fy = oracle_at(np.nan_to_num(reading.oracle.f1), reading.oracle.tokens, b)
    res["sentence oracle"] = {"f1": {"mean": fy, "se": float("nan"), "n": len(table.env_f1)}, "tokens": {"mean": tx}}
    return res


@dataclass
class Reading(BudgetPolicy):
    """The read-inside-the-chunk policies (:mod:`mogg.run.budget.selector.plans`): the evidence
    selector over all levels' candidates, route + trim (a function of the budget: the variants to
    guard over, or None where it is not evaluated), and the sentence oracle's plans (its ceiling)."""

    selector: Learned
    trims: object  # Callable[[float], list[Learned] | None]
    oracle: Family
    guard_se: float  # the guard's standard errors (frontier.guard_se)
    cost_ms: dict | None = None  # per question: gathering candidates and features, scoring (wall clock)
    variants: dict = field(default_factory=dict)  # row name -> Learned: the kind's variants (kind.variants)
    reads_units = True
    ceilings = ("sentence oracle",)
    STYLES = {"selector (unguarded)": {"color": "#ffbb78", "ls": "-", "lw": 1.2},
              "selector": {"color": "#ff7f0e", "ls": "-", "lw": 2.4},
              "route + trim": {"color": "#8c6d31", "ls": "-", "lw": 1.8},
              "sentence oracle": {"color": "#2ca02c", "ls": ":", "lw": 2.0}}
    HEADLINE = BANDS = ("selector",)

    def notes(self, fr: dict, budgets: list[int]) -> tuple[list[str], list[str]]:
        before = []
        for name in self.variants:
            cells = []
            for b in budgets:
                v = fr["budgets"].get(b, {}).get(name, {}).get("vs_selector")
                if v:
                    cells.append(f"B={b}: {v['mean']:+.3f} [{v['lo']:+.3f}, {v['hi']:+.3f}]")
            if cells:
                before.append(f"{name} against the selector (same questions, paired 95% interval): " + "; ".join(cells) + ".")
        before += [""] if before else []
        if "selector_cost_ms" not in fr:
            return before, []
        c = fr["selector_cost_ms"]  # wall clock: differs between runs (the only such line of a report)
        return before, [f"Reading inside the chunk costs {c['features']:.2f} ms per question to gather the candidates and "
                    f"their features and {c['scoring']:.3f} ms to score them (wall clock, this run).", ""]

    def cut(self, sub: np.ndarray, new: np.ndarray) -> "Reading":
        trims = self.trims
        return Reading(self.selector.cut(sub, new),
                       lambda b: None if (ts := trims(b)) is None else [t.cut(sub, new) for t in ts],
                       cut_family(self.oracle, sub), self.guard_se, self.cost_ms,
                       {n: v.cut(sub, new) for n, v in self.variants.items()})

    def rows(self, budget: float, table: TableAt) -> dict[str, dict]:
        return _reading_rows(self, table, budget)

    def report(self) -> dict:
        return {"selector_cost_ms": dict(self.cost_ms)} if self.cost_ms else {}
