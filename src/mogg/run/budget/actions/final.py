"""The action router's final fit on this set (``router.fit=all`` / ``both`` with a frontier): one scorer
on every question, a cost weight per budget, the guard's decision per budget, one directory
(:class:`mogg.run.budget.actions.deploy.DeployedActions`, ``<run>/<ladder>/actions/final``) that
``mogg-route --budget`` applies. The fit on ``train_sources`` is :mod:`mogg.run.budget.actions.transfer`.

Per budget B:

* **lambda** is :func:`mogg.evaluation.frontier_guard.best_lambda` on the final fit's own
  validation slice (seeded, ``trainer.val_fraction`` of the questions; the cross-fit's folds do
  the same per fold);
* **the guard** compares, on every question out of fold, the cross-fitted action router (lambda
  calibrated per fold on its validation slice, as in the report's "router (action, unguarded)"
  row) with the envelope each fold chose on its training folds: the router is deployed at B when
  its mean paired F1 gain beats ``frontier.guard_se`` standard errors and its mean tokens stay within
  B (+ the report's 2% slack), else the envelope. Out-of-fold questions are the most data a
  decision can use that no scorer was fitted on (the report's own guard, which must keep the test
  folds out, pools only validation slices);
* **the envelope** deployed where the guard keeps it is the fixed (level, k, cap) with the best
  mean F1 within B on all training questions.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from mogg.evaluation.frontier import choose_config
from mogg.evaluation.frontier_guard import best_lambda, out_of_fold_guard
from mogg.routing.fitting.folds import split_train_val
from mogg.routing.plans import decide
from mogg.run.budget.actions.deploy import DeployedActions
from mogg.run.budget.actions.fit import fit_action_routers
from mogg.run.budget.actions.policy import RouterFolds, action_learned
from mogg.run.budget.base import FINAL_DIR, LadderFrontier
from mogg.run.budget.shared import config_stats
from mogg.run.context import RunContext

log = logging.getLogger(__name__)


def guard_decisions(r: RouterFolds, fixed, budgets, guard: bool, guard_se: float) -> dict[int, dict]:
    """Per budget: the cross-fitted action router against the training-fold envelope on every
    question out of fold (see the module doc; :func:`mogg.evaluation.frontier_guard.out_of_fold_guard`)."""
    return out_of_fold_guard(action_learned(r, fixed), r.fold, fixed, budgets, guard, guard_se)


def fit_final_actions(ctx: RunContext, name: str, ladder: LadderFrontier, kind, actions_dir: Path) -> dict:
    """Fit the deployable action router ``kind`` (:class:`mogg.run.budget.actions.ActionRouterKind`)
    for one ladder into ``actions_dir/final`` (after the cross-fit in ``actions_dir``, whose
    out-of-fold predictions decide the guard)."""
    prep, fs = ladder.prep, ladder.fs
    space, table, xq, xa = ladder.action_table
    val_fraction = ctx.val_fraction
    af = kind.folds(ctx, ladder, actions_dir)
    guards = guard_decisions(RouterFolds(af.util, af.fold, af.val, fs.guard, fs.guard_se), table, fs.budgets, fs.guard,
                             fs.guard_se)
    has = np.flatnonzero(~np.isnan(table.f1).all(axis=1))  # questions with gold evidence
    # its own seed stream (the folds use seed + 1000 + k): the final slice is another draw
    train, val = split_train_val(has, val_fraction, ctx.seed + 2000)
    router = fit_action_routers(xq, xa, table.f1, [train], [val], [ctx.seed], kind)[0]
    uv, u_all = router.utilities(xq[val], xa[val]), router.utilities(xq, xa)
    budgets, decisions = {}, {}
    for b in fs.budgets:
        lam = best_lambda(uv, table.tokens[val], table.f1[val], b)
        env = choose_config(table.f1, table.tokens, has, b)
        g = guards[int(b)]
        budgets[int(b)] = {"lambda": lam, "deploy": g["deploy"], "envelope": int(env),
                           "envelope_config": space.describe(env), "guard": g}
        decisions[int(b)] = np.full(len(xq), env, dtype=np.int64) if g["deploy"] == "envelope" \
            else decide(u_all, table.tokens, lam)
        chosen = decisions[int(b)][has]
        log.info("%s action router at B=%d: %s deployed (out-of-fold gain %+.4f ± %.4f over %d questions); lambda %.3g; "
                 "training questions read %.1f mean tokens", name, b, g["deploy"], g["gain"], g["se"], g["n"], lam,
                 table.tokens[has, chosen].mean())
    spec = ctx.router_spec(name, prep)
    spec["frontier"] = {"depth": fs.depth, "caps": list(fs.caps), "budgets": list(fs.budgets),
                        "max_context_tokens": prep.max_context_tokens}
    spec["fit"] = {**kind.knobs(), "seed": int(ctx.seed), "val_fraction": val_fraction, "n_train": int(len(train)),
                   "n_val": int(len(val)), "cross_fit_run_id": af.info["run_id"]}  # every knob it was trained with
    spec["configs"] = config_stats(table.f1[train], table.tokens[train])
    dep = DeployedActions(router, space, budgets, spec, {"ids": list(prep.query_ids), "budgets": decisions,
                                                            "val": [prep.query_ids[i] for i in val]})
    out = dep.save(Path(actions_dir) / FINAL_DIR)
    log.info("deployable %s action router in %s (budgets %s)", name, out, ", ".join(map(str, fs.budgets)))
    return {"dir": str(out), "budgets": {b: p["deploy"] for b, p in budgets.items()}}
