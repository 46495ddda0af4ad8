"""The action router trained on several question sets (``train_sources``) and read on a new set
without its labels: ``<run>/<ladder>/actions/transfer`` (``router.fit=all`` or ``both``; the
leave-one-set-out rows).

**Fit** (:func:`fit_transfer_actions`): one scorer over the pooled sets, each keeping its own seeded
validation slice; lambda per budget and the guard's decision on the pooled validation questions.
**Read on a new set** (:func:`transferred_rows`, as ``mogg-route --calibrate-here`` reads it): lambda
recalibrated to B on the new set's token counts and, where the guard kept the envelope, the training
sets' best configuration among those reading <= B there.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from mogg.evaluation.frontier import choose_config
from mogg.evaluation.frontier_guard import best_lambda, guard_check
from mogg.routing.fitting.folds import split_train_val
from mogg.routing.plans import decide
from mogg.run.budget.actions.deploy import DeployedActions
from mogg.run.budget.actions.fit import fit_action_routers
from mogg.run.budget.base import TRANSFER_DIR, LadderFrontier
from mogg.run.budget.shared import config_stats
from mogg.run.context import RunContext

log = logging.getLogger(__name__)


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
    parts = {s: lf.action_table for s, lf in sources.items()}
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
    out = dep.save(Path(actions_dir) / TRANSFER_DIR)
    return {"dir": str(out), "budgets": {b: p["deploy"] for b, p in budgets.items()}}


def transferred_rows(ladder: LadderFrontier, directory: Path):
    """budget -> {row: (F1 [Q], tokens [Q], config)} of the transfer action router in ``directory``
    and the training sets' envelope on this set. Both read this set's token counts, which need no
    labels: the envelope is the training sets' best configuration among those reading <= B mean
    tokens here, and the router's lambda is recalibrated to B on this set's questions; where the
    training sets' guard kept the envelope, the router deploys it."""
    from mogg.core.artifacts import ArtifactError
    from mogg.evaluation.frontier_report import TRAINING_ENVELOPE, TRANSFERRED

    d = Path(directory)
    space, table, xq, xa = ladder.action_table
    dep = DeployedActions.load(d)
    if dep.space != space:
        raise ArtifactError(f"{d}: trained on actions {dep.space.to_json()}, this set's are {space.to_json()}; "
                            "retrain")
    rows = np.arange(len(xq))

    def at(b: float) -> dict:
        if int(b) not in dep.budgets:
            return {}
        # label-free on this set (DeployedActions.decide with here=True): the training sets' best
        # configuration among those reading <= B here where their guard kept the envelope, else the
        # router with lambda recalibrated to B on this set's tokens
        p = dep.plan(int(b), here=True)
        a, _ = dep.decide(xq, xa, table.tokens, p)
        env = dep.envelope_here(table.tokens, b)
        return {TRANSFERRED: (table.f1[rows, a], table.tokens[rows, a], f"{p['deploy']} deployed"),
                TRAINING_ENVELOPE: (table.f1[:, env], table.tokens[:, env], space.names()[env])}
    return at

