"""The action router's final fit (``router.fit=all`` / ``both`` with a frontier): one scorer on
every question, a cost weight per budget, the guard's decision per budget, one directory
(:class:`mogg.run.budget.actions.deploy.DeployedActions`) that ``mogg-route --budget`` applies.

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
from mogg.evaluation.frontier_guard import best_lambda, guard_check, out_of_fold_guard
from mogg.routing.fitting.folds import split_train_val
from mogg.routing.plans import decide
from mogg.run.budget.actions.deploy import FINAL_DIR, TRANSFER_DIR, DeployedActions
from mogg.run.budget.actions.fit import fit_action_routers
from mogg.run.budget.actions.policy import RouterFolds, action_learned
from mogg.run.budget.base import LadderFrontier
from mogg.run.budget.shared import config_stats
from mogg.run.context import RunContext

log = logging.getLogger(__name__)

FINAL_ACTIONS, TRANSFER_ACTIONS = FINAL_DIR, TRANSFER_DIR


def guard_decisions(r: RouterFolds, fixed, budgets, guard: bool, guard_se: float) -> dict[int, dict]:
    """Per budget: the cross-fitted action router against the training-fold envelope on every
    question out of fold (see the module doc; :func:`mogg.evaluation.frontier_guard.out_of_fold_guard`)."""
    return out_of_fold_guard(action_learned(r, fixed), r.fold, fixed, budgets, guard, guard_se)


def fit_final_actions(ctx: RunContext, name: str, ladder: LadderFrontier, kind, actions_dir: Path) -> dict:
    """Fit the deployable action router ``kind`` (:class:`mogg.run.budget.actions.ActionRouterKind`)
    for one ladder into ``actions_dir/final`` (after the cross-fit in ``actions_dir``, whose
    out-of-fold predictions decide the guard)."""
    prep, fs = ladder.prep, ladder.fs
    space, table, xq, xa = ladder.actions
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
    out = dep.save(Path(actions_dir) / FINAL_ACTIONS)
    log.info("deployable %s action router in %s (budgets %s)", name, out, ", ".join(map(str, fs.budgets)))
    return {"dir": str(out), "budgets": {b: p["deploy"] for b, p in budgets.items()}}


def fit_transfer_actions(ctx: RunContext, name: str, sources: dict[str, LadderFrontier], kind,
                         actions_dir: Path) -> dict:
    """The action router trained on several question sets (``train_sources``) for one ladder, into
    ``actions_dir/transfer``: one scorer over the pooled sets (each keeps its own seeded validation
    slice), lambda per budget on the pooled validation questions, the training sets' envelope per
    budget (the fixed (level, k, cap) with the best mean F1 within B on their training questions:
    what a practitioner deploys on a new set without labels) and the guard's decision per budget on
    the pooled validation questions (the router against that envelope, ``frontier.guard_se``
    standard errors, within B + 2%). Larger sets weigh more (no reweighting: a first protocol)."""
    source_preps = {s: lf.prep for s, lf in sources.items()}
    fs = next(iter(sources.values())).fs
    parts = {s: lf.actions for s, lf in sources.items()}
    space = next(iter(parts.values()))[0]
    for s, (sp, *_) in parts.items():
        if sp != space:
            raise ValueError(f"train_sources.{s}: its ladder's actions {sp.to_json()} differ from "
                             f"{space.to_json()}: one ladder builder for every training set")
    xq = np.concatenate([p[2] for p in parts.values()])
    xa = np.concatenate([p[3] for p in parts.values()])
    f1 = np.concatenate([p[1].f1 for p in parts.values()])
    tok = np.concatenate([p[1].tokens for p in parts.values()])
    ids = [f"{s}:{q}" for s, p in source_preps.items() for q in p.query_ids]
    val_fraction = ctx.val_fraction
    trains, vals, off = [], [], 0
    for i, p in enumerate(parts.values()):
        has = np.flatnonzero(~np.isnan(p[1].f1).all(axis=1))
        t, v = split_train_val(has, val_fraction, ctx.seed + 3000 + i)
        trains.append(t + off)
        vals.append(v + off)
        off += len(p[2])
    train, val = np.concatenate(trains), np.concatenate(vals)
    router = fit_action_routers(xq, xa, f1, [train], [val], [ctx.seed], kind)[0]
    uv, u_all = router.utilities(xq[val], xa[val]), router.utilities(xq, xa)
    budgets, decisions = {}, {}
    for b in fs.budgets:
        lam = best_lambda(uv, tok[val], f1[val], b)
        env = choose_config(f1, tok, train, b)
        a = decide(uv, tok[val], lam)
        d = f1[val, a] - f1[val, env]
        g = guard_check(d, float(tok[val, a].mean()) if len(val) else 0.0, b, fs.guard_se)
        gain, se, tokens = g["gain"], g["se"], g["tokens"]
        deploy = "router" if g["passes"] or not fs.guard else "envelope"
        budgets[int(b)] = {"lambda": lam, "deploy": deploy, "envelope": int(env), "envelope_config": space.describe(env),
                           "guard": {"gain": gain, "se": se, "n": g["n"], "tokens": tokens, "guard": fs.guard,
                                     "on": "the training sets' pooled validation questions"}}
        decisions[int(b)] = np.full(len(xq), env, dtype=np.int64) if deploy == "envelope" else decide(u_all, tok, lam)
        log.info("%s transfer action router (trained on %s) at B=%d: %s deployed (validation gain %+.4f ± %.4f over %d "
                 "questions, %.1f tokens)", name, " + ".join(parts), b, deploy, gain, se, g["n"], tokens)
    first = next(iter(source_preps))
    spec = ctx.router_spec(name, source_preps[first], transfer=True)  # no corpus: the user's, named when routing
    spec["frontier"] = {"depth": fs.depth, "caps": list(fs.caps), "budgets": list(fs.budgets),
                        "max_context_tokens": source_preps[first].max_context_tokens}
    spec["fit"] = {**kind.knobs(), "seed": int(ctx.seed), "val_fraction": val_fraction, "n_train": int(len(train)),
                   "n_val": int(len(val)), "sources": list(parts)}  # every knob it was trained with
    spec["configs"] = config_stats(f1[train], tok[train])
    dep = DeployedActions(router, space, budgets, spec,
                          {"ids": ids, "budgets": decisions, "val": [ids[i] for i in val]})
    out = dep.save(Path(actions_dir) / TRANSFER_ACTIONS)
    return {"dir": str(out), "budgets": {b: p["deploy"] for b, p in budgets.items()}}
