"""The action router's frontier rows: its out-of-fold plans as a
:class:`~mogg.run.budget.base.BudgetPolicy` (the guarded router policy: the action router
or eq. 1-2 under the level router's weights, kept only where it beats the envelope on validation;
and the action router unguarded)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from mogg.evaluation.frontier import Family
from mogg.evaluation.frontier_guard import guarded_at
from mogg.run.budget.base import BudgetPolicy, Learned, TableAt


@dataclass
class RouterFolds(BudgetPolicy):
    """What the frontier needs of a cross-fitted action router (rows index the questions): the
    router policy (the action router or eq. 1-2 under the level router's weights, guarded) and
    the action router unguarded."""

    util: np.ndarray  # [Q, A] out-of-fold predicted utilities (columns = the fixed family's)
    fold: np.ndarray  # [Q]
    val: list[tuple[np.ndarray, np.ndarray]]  # per fold: (validation rows, that fold's utilities on them)
    guard: bool  # frontier.guard: per fold and budget, keep the envelope's configuration unless the router beats it
    # ... by guard_se standard errors of the paired difference (frontier.guard_se): lambda is chosen on
    # the same validation rows (optimistic), and a fold's validation slice is small, so a
    # point-estimate win there often does not hold on the fold's test questions (the one-SE rule)
    guard_se: float
    max_tokens: float | None = None

    STYLES = {"router (action, unguarded)": {"color": "#ff9896", "ls": "-", "lw": 1.2},
              "router": {"color": "#d62728", "ls": "-", "lw": 2.4}}
    HEADLINE = SHADED = BANDS = ("router",)
    MARKS = {"router": "D"}
    RULE = (" (the router: the action router, lambda calibrated on its fold's validation questions, or eq. 1-2 under the "
            "level router's weights, whichever beats the envelope on pooled validation questions by one standard error, "
            "else the envelope); ")

    def notes(self, fr: dict, budgets: list[int]) -> tuple[list[str], list[str]]:
        own = "; ".join(f"{b}: {fr['budgets'][b]['router']['config']}" for b in budgets)
        return ["Configurations deployed: " + "; ".join(f"B={b}: envelope `{fr['budgets'][b]['envelope']['config']}`"
                                                        for b in budgets) + ".",
                f"The router policy's deciders (share of questions; envelope = the guard kept it): {own}.", ""], []

    def cut(self, sub: np.ndarray, new: np.ndarray) -> "RouterFolds":
        val = [(new[v][new[v] >= 0], u[new[v] >= 0]) for v, u in self.val]
        return RouterFolds(self.util[sub], self.fold[sub], val, self.guard, self.guard_se, self.max_tokens)

    def rows(self, budget: float, table: TableAt) -> dict[str, dict]:
        rf, rt, src, names, facts = route_at(self, table.fixed, budget, table.routed)
        used = Counter(["envelope" if s < 0 else names[s] for s in src.tolist()])
        res = {"router": table.row(rf, rt, ", ".join(f"{n} {c / len(src):.0%}" for n, c in used.items()))}
        res["router"].update(own=float((src >= 0).mean()), calibration=facts)
        if self.guard:
            raw = RouterFolds(self.util, self.fold, self.val, False, self.guard_se, self.max_tokens)
            rf, rt, _, _, _ = route_at(raw, table.fixed, budget)
            res["router (action, unguarded)"] = table.row(rf, rt)
        return res

    def learned(self, fixed: Family) -> "Learned":
        return action_learned(self, fixed)


def action_learned(r: RouterFolds, fixed: Family) -> Learned:
    """The action router as a :class:`Learned` policy: its plans are the fixed family's columns."""
    return Learned("action router", r.util, fixed.f1, fixed.tokens,
                   [(v, u, fixed.f1[v], fixed.tokens[v]) for v, u in r.val], r.max_tokens)


def route_at(r: RouterFolds, fixed: Family, budget: float, routed: list[Family] | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], list[dict]]:
    """The router policy at ``budget`` (:func:`guarded_at` over the action router and every
    ``routed`` family: eq. 1-2 under the level router's weights), guarded as ``r`` says."""
    return guarded_at(r.fold, fixed, budget, [action_learned(r, fixed), *(routed or [])], r.guard, r.guard_se)
