"""A third budget-router kind, added as docs/extending.md says: this package and its config file
(``fixed.yaml``) only; ``tests/docs/test_extending.py`` trains, evaluates, deploys and routes it.

Per budget it 'learns' the fixed configuration with the best mean F1 within ``share`` * B on the
training questions: at ``share`` = 1 exactly the envelope, the reference its test checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from mogg.evaluation.frontier import choose_config, crossfit_choice
from mogg.evaluation.frontier_guard import BudgetPolicy
from mogg.routing.fitting.folds import make_folds
from mogg.run.budget.base import BudgetRouter


class FixedChoicePolicy(BudgetPolicy):
    """The new kind's rows: per fold, the configuration with the best mean F1 within ``share`` * B
    on the other folds (at share 1 exactly the envelope: the reference the test checks)."""

    STYLES = {"fixed choice": {"color": "#393b79", "ls": "-", "lw": 1.6}}

    def __init__(self, fold: np.ndarray, share: float):
        self.fold, self.share = fold, share

    def cut(self, sub, new):
        return FixedChoicePolicy(self.fold[sub], self.share)

    def rows(self, budget, table):
        f, t, _ = crossfit_choice(table.fixed.f1, table.fixed.tokens, self.fold, budget * self.share)
        return {"fixed choice": table.row(f, t)}


class FixedChoiceSession:
    """``mogg-route`` on the new kind's directory: each question gets the configuration it deploys."""

    def __init__(self, deploy: dict):
        self.deploy = deploy

    def route(self, questions, ids=None, budget=None):
        config = self.deploy["budgets"][str(int(budget))]
        ids = list(ids) if ids is not None else [str(i) for i in range(len(questions))]
        return ([{"id": i, "question": q, "config": config} for i, q in zip(ids, questions)],
                {"n": len(questions), "budget": int(budget), "deployed": "fixed", "mean_tokens": float("nan")})


@dataclass
class FixedChoiceKind(BudgetRouter):
    """The kind: its one knob, and the interface the spine calls."""

    share: float = 1.0

    TITLE: ClassVar[str] = "the fixed-choice test router"
    ROUTE_FLAGS: ClassVar[tuple[str, ...]] = ("budget",)

    def train(self, ctx, ladder, out_dir):  # ctx: the run's mogg.run.context.RunContext
        fold = make_folds(len(ladder.prep.items), ctx.n_folds, ctx.seed)
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        np.save(Path(out_dir) / "fold.npy", fold)
        return {"folds": sorted(set(fold.tolist()))}

    def policy(self, ctx, ladder, fold_dir, chunk=None):
        return FixedChoicePolicy(np.load(Path(fold_dir) / "fold.npy"), self.share)

    def fit_final(self, ctx, name, ladder, fold_dir):
        t = ladder.table
        rows = np.flatnonzero(~np.isnan(t.f1).any(axis=1))
        budgets = {str(b): t.configs[choose_config(t.f1, t.tokens, rows, b * self.share)] for b in ladder.fs.budgets}
        d = self.save_deployed(Path(fold_dir) / "final", {"budgets": budgets})  # sealed, with a manifest
        return {"dir": str(d)}

    @classmethod
    def session(cls, directory, artifacts="auto", overrides=(), data_dir=None):
        return FixedChoiceSession(json.loads((Path(directory) / "deploy.json").read_text()))
