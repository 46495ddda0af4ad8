"""The evidence selector's final fit on this set (``router.fit=all`` or ``both`` with the ``selector``
budget router, ``frontier/routers=[actions,selector]``): one scorer on every question's candidates,
a cost weight per budget, the guard's decision per budget, one directory
(:class:`mogg.run.budget.selector.deploy.DeployedSelector`, ``<run>/<ladder>/selector/final``; its
files are that module's doc) that ``mogg-route --budget`` applies. The fit on ``train_sources`` is
:mod:`mogg.run.budget.selector.transfer`.

Per budget B lambda is chosen on the final fit's own validation slice
(:func:`mogg.evaluation.frontier_guard.best_lambda` over the plans' F1_hat and true F1), the guard
decides on every question out of fold (the cross-fitted selector against the envelope each fold
chose on its training folds: :func:`mogg.evaluation.frontier_guard.out_of_fold_guard`), and the
envelope deployed where the guard keeps it is the fixed (level, k, cap) best within B on all questions.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from mogg.evaluation.frontier import choose_config
from mogg.evaluation.frontier_guard import best_lambda, out_of_fold_guard
from mogg.routing.fitting.folds import split_train_val
from mogg.routing.plans import decide
from mogg.run.budget.base import FINAL_DIR, LadderFrontier
from mogg.run.budget.selector.deploy import FORMAT, DeployedSelector, plans_of
from mogg.run.budget.selector.folds import predict_selector_folds
from mogg.run.budget.selector.plans import evidence_estimate, plan_table, selector_learned
from mogg.run.budget.selector.scorer import candidate_weights, fit_scorer
from mogg.run.budget.selector.stage import _key, reading_data
from mogg.run.context import RunContext

log = logging.getLogger(__name__)


def fit_final_selector(ctx: RunContext, name: str, ladder: LadderFrontier, sel, selector_dir: Path) -> dict:
    """Fit the deployable selector (knobs ``sel``) for one ladder into ``selector_dir/final`` (after
    its cross-fit in ``selector_dir``, whose out-of-fold predictions decide the guard). ``ladder``:
    the prepared questions under the frontier settings (budgets, the guard, the envelope's table)."""
    prep, fs = ladder.prep, ladder.fs
    data = reading_data(ctx, prep, sel)
    n_q, q, unit, tokens = len(prep.items), data.cand.q, data.cand.unit, data.tokens
    texts, evidence = prep.ladder.units.text, [it.evidence_text for it in prep.items]
    has = np.flatnonzero(~np.isnan(data.evidence_len))
    val_fraction = ctx.val_fraction
    train, val = split_train_val(has, val_fraction, ctx.seed + 2000)
    labelled = ~np.isnan(data.density)
    rtr = np.flatnonzero(np.isin(q, train) & labelled)
    rva = np.flatnonzero(np.isin(q, val) & labelled)
    model = fit_scorer(data.x, data.density, candidate_weights(q, tokens), rtr, rva, sel.params, ctx.seed,
                       ctx.threads)
    import lightgbm as lgb

    # the trees up to the best validation round, as the directory keeps them: predictions here and
    # from the loaded file are the same numbers
    booster = lgb.Booster(model_str=model.booster_.model_to_string(num_iteration=model.best_iteration_ or None))
    e_len = float(np.median(data.evidence_len[train])) if len(train) else 0.0
    pred = booster.predict(data.x)
    e = evidence_estimate(sel.evidence, e_len, q, pred, tokens, data.doc_tokens, n_q)
    ranked, util, plan_tok = plans_of(pred, q, unit, tokens, texts, n_q, sel.plans, e)
    vf, vt = plan_table(ranked, texts, unit, evidence, val)
    # the guard: the cross-fitted selector out of fold against each fold's training-fold envelope
    sf = predict_selector_folds(data.x, q, prep.query_ids, selector_dir, _key(ctx, prep, data, sel), ctx.retrain)
    learned = selector_learned("selector", q, unit, tokens, sf.pred, sf.val, sf.evidence_len, sf.fold, texts, evidence,
                               sel.plans, estimate=sel.evidence, doc_tokens=data.doc_tokens)
    space, fixed = ladder.space, ladder.table
    guards = out_of_fold_guard(learned, sf.fold, fixed, fs.budgets, fs.guard, fs.guard_se)
    budgets, decisions, selector_own = {}, {}, {}
    for b in fs.budgets:
        lam = best_lambda(util[val], vt, vf, b)
        env = choose_config(fixed.f1, fixed.tokens, has, b)
        g = guards[int(b)]
        budgets[str(int(b))] = {"lambda": lam, "deploy": g["deploy"], "envelope": int(env),
                                "envelope_config": space.describe(env), "guard": g}
        plan = {"lambda": lam, "deploy": g["deploy"]}
        own = decide(util, plan_tok, lam).astype(np.int64)
        decisions[str(int(b))] = (np.full(n_q, -1, dtype=np.int64) if g["deploy"] == "envelope" else own).tolist()
        selector_own[str(int(b))] = own.tolist()
        log.info("%s evidence selector at B=%d: %s deployed (out-of-fold gain %+.4f ± %.4f over %d questions); lambda %.3g",
                 name, b, plan["deploy"], g["gain"], g["se"], g["n"], lam)
    spec = ctx.router_spec(name, prep)
    spec["frontier"] = {"depth": fs.depth, "caps": list(fs.caps), "budgets": list(fs.budgets),
                        "max_context_tokens": prep.max_context_tokens}
    with_options = float(np.mean([bool(it.options) for it in prep.items])) if prep.items else 0.0
    deploy = {"format": FORMAT, "settings": sel.knobs(), "evidence_len": e_len, "evidence": sel.evidence, "n_features": int(data.x.shape[1]),
              "with_options": with_options,  # the share of training questions with answer options
              "budgets": budgets, "space": space.to_json(), "spec": spec,
              "fit": {"seed": int(ctx.seed), "val_fraction": val_fraction, "n_train": int(len(train)), "n_val": int(len(val)),
                      "trees": int(booster.num_trees()), "cross_fit_run_id": sf.info["run_id"]}}
    dep = DeployedSelector(booster, deploy, {"ids": list(prep.query_ids), "val": [prep.query_ids[i] for i in val],
                                             "budgets": decisions, "selector": selector_own})
    out = dep.save(Path(selector_dir) / FINAL_DIR)
    log.info("deployable %s evidence selector in %s (budgets %s)", name, out, ", ".join(map(str, fs.budgets)))
    return {"dir": str(out), "budgets": {b: p["deploy"] for b, p in budgets.items()}}
