"""The frontier stage of ``train.py`` and ``evaluate.py`` (``frontier`` config node set).

train: the action table (every fixed (level, k, cap) with its evidence F1 and tokens) over the
deep hits, and each learned budget router of ``frontier.routers`` cross-fitted per ladder in
``<checkpoint>/<ladder>/<kind>/`` (:mod:`mogg.run.budget`: the action router, the evidence
selector). evaluate: every family at matched mean tokens (the envelope chosen on training folds,
each router's cost weight calibrated on validation), the oracle frontier, the report section and
plots. The stage calls the budget routers' interface only (:class:`mogg.run.budget.base.BudgetRouter`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path, strict_json
from mogg.evaluation import names as N
from mogg.evaluation.families import stream_family
from mogg.evaluation.frontier import Family, merge_families
from mogg.evaluation.frontier_render import frontier_section, plot_frontier, plot_ladders_frontier
from mogg.evaluation.frontier_report import frontier_evaluation
from mogg.prepared import Prepared
from mogg.routing.fitting.folds import make_folds
from mogg.routing.profiles import ProfileSpace
from mogg.run.budget.base import ALL_LADDERS, BudgetRouter, LadderFrontier
from mogg.run.context import RunContext
from mogg.run.frontier_settings import FrontierSettings, frontier_settings  # noqa: F401 (app.py and scripts import it here)
from mogg.selection import Selection, mog_select, topk_all_select

log = logging.getLogger(__name__)


def ladder_frontier(prep: Prepared, fs: FrontierSettings) -> LadderFrontier:
    """One ladder's questions under ``fs``, its action table computed once for every router kind."""
    return LadderFrontier(prep, fs)


def _evidence(prep: Prepared) -> list[str]:
    return [it.evidence_text for it in prep.items]


def save_per_question(pq: dict, query_ids: list[str], path: Path) -> None:
    """``<ladder>_frontier_questions.npz``: question ids, the table's budgets and, per policy, F1 and
    tokens per budget and question ([n_budgets, 2, n]: row 0 F1, row 1 tokens); numpy arrays only
    (no pickle), keys ``policy:<name>``."""
    arrays = {"ids": np.array([query_ids[i] for i in pq["rows"]], dtype=str), "budgets": pq["budgets"]}
    arrays.update({f"policy:{k}": v for k, v in pq.items() if k not in ("rows", "budgets")})
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)


def vote_envelope(prep: Prepared, fs: FrontierSettings, fixed: Family) -> Family:
    """With ``router.profiles``: the fixed configurations (profile, level, k, cap), i.e. the
    envelope's (level, k, cap) plus every other eq. 1 profile's ranking along k and the caps
    (:mod:`mogg.routing.profiles`), as one family: its training-fold choice per budget says whether
    a fixed vote, no router, pays at matched cost."""
    space = ProfileSpace(prep.profiles, prep.ladder.n_levels)
    names, n_q, ev = space.names(prep.ladder.level_names), len(prep.items), _evidence(prep)
    fams = [fixed]
    for a, w in enumerate(space.matrix()):
        if space.profiles[a // space.n_levels] != "own":  # own = the fixed levels, already in ``fixed``
            sel = mog_select(prep.ladder, prep.deep, np.broadcast_to(w, (n_q, len(w))), fs.depth)
            fams.append(stream_family(names[a], prep.ladder, sel, ev, fs.depth, fs.caps, prep.max_context_tokens))
    return merge_families(N.VOTE_ENVELOPE, fams, fixed=False)


def other_families(prep: Prepared, fs: FrontierSettings, weights: dict[str, np.ndarray],
                   ladder_policies: dict[str, Selection], fixed: Family | None = None) -> list[Family]:
    """Top-k over all levels, eq. 1-2 under each router's weights, and the ladder's own policies
    (``ladder_policies``: selected on the deep hits at k = depth), each along k = 1..depth and the
    caps; with ``router.profiles`` and the fixed table ``fixed``, the envelope with eq. 1 votes."""
    lad, deep, ev = prep.ladder, prep.deep, _evidence(prep)
    sels = {N.TOPK_ALL: topk_all_select(deep, fs.depth)}
    for name in (N.ROUTER, N.PRIOR):
        if name in weights:
            sels[f"{name} (eq. 1-2)"] = mog_select(lad, deep, weights[name], fs.depth)
    sels.update(ladder_policies)
    fams = [stream_family(n, lad, s, ev, fs.depth, fs.caps, prep.max_context_tokens) for n, s in sels.items()]
    for fam in fams:  # eq. 1-2 under the trained router's weights: a candidate of the router policy
        fam.routed = fam.name == f"{N.ROUTER} (eq. 1-2)"
    if prep.profiles and fixed is not None:
        fams.append(vote_envelope(prep, fs, fixed))
    return fams


def train_budget_routers(ctx: RunContext, fs: FrontierSettings, preps: dict[str, Prepared], ckpt: Callable[[str], Path],
                         in_set: bool, source_preps: dict | None = None) -> dict:
    """``train.py``'s frontier stage: every learned budget router cross-fitted per ladder
    (``ckpt(ladder)/<kind>/``), deployed on this set (``in_set``) or on ``train_sources``
    (``source_preps``; such a directory holds no corpus: the user names one when routing), and the router over every ladder where
    a kind spans ladders (``ckpt(ALL_LADDERS)``). Returns ``{ladder: {kind: {...}}}``."""
    results: dict[str, dict] = {}
    for name, prep in preps.items():
        ladder = ladder_frontier(prep, fs)
        for kind in fs.routers:
            info = kind.train(ctx, ladder, ckpt(name) / kind.slot)
            results.setdefault(name, {})[kind.slot] = {"folds": len(info["folds"])}
            log.info("cross-fitted %s (%s) in %s", kind.TITLE, name, ckpt(name) / kind.slot)
            final = kind.fit_final(ctx, name, ladder, ckpt(name) / kind.slot) if in_set else None
            if final is not None:
                results[name][kind.slot]["final"] = final
        if source_preps:  # leave-one-set-out at matched cost: the kinds trained on the other sets
            sources = {s: ladder_frontier(p[name], fs) for s, p in source_preps.items()}
            for kind in fs.routers:
                r = kind.fit_transfer(ctx, name, sources, ckpt(name) / kind.slot)
                if r is not None:
                    results[name][kind.slot]["transfer"] = r
    kind = joint_router(fs) if len(preps) > 1 else None
    if kind is not None:  # one router choosing the ladder too: <run>/all_ladders/<kind>/
        ladders = {n: ladder_frontier(p, fs) for n, p in preps.items()}
        out = ckpt(ALL_LADDERS) / kind.slot
        results[ALL_LADDERS] = {kind.slot: {"folds": len(kind.train_joint(ctx, ladders, out)["folds"])}}
        log.info("cross-fitted %s across all ladders in %s", kind.TITLE, out)
    return results


def evaluate_frontier(ctx: RunContext, name: str, prep: Prepared, fs: FrontierSettings, weights: dict,
                      ladder_policies: dict[str, Selection], ckpt: Path, report_dir: Path) -> tuple[dict, list[str]]:
    """The frontier of one ladder: matched-cost table, plot, section (``ladder_policies``: the
    ladder's own policies selected on the deep hits). Each learned budget router adds its policy
    from its cross-fit in ``ckpt/<kind>``, in order; a router that reads inside the chunk trims the
    plans of the kind it names (:meth:`~mogg.run.budget.base.BudgetRouter.trims`; route + trim)."""
    ladder = ladder_frontier(prep, fs)
    space, table = ladder.space, ladder.table
    folds = make_folds(len(prep.items), ctx.n_folds, ctx.seed)  # every kind's cross-fit uses these
    by_slot: dict[str, object] = {}
    transfers = []
    if fs.budget_routers and ctx.use_router:
        # the kinds that trim another's plans (route + trim) after the one they name: list order means nothing
        for kind in sorted(fs.routers, key=lambda k: k.trims() is not None):
            chunk = by_slot[kind.trims()].learned(table) if kind.trims() is not None else None
            by_slot[kind.slot] = kind.policy(ctx, ladder, ckpt / kind.slot, chunk)
        for kind in fs.routers:
            t = kind.transferred(ctx, ladder, ckpt / kind.slot)
            if t is not None:  # its rows read against the kind's in-set headline row (the share of its gain kept)
                head = getattr(by_slot.get(kind.slot), "HEADLINE", ())
                transfers.append((t, head[0] if head else None))
    policies = [by_slot[k.slot] for k in fs.routers if k.slot in by_slot]  # the report's order: the list's
    transfer = (lambda b: {k: (*v, head) if head and k.startswith("transferred") else v
                           for t, head in transfers for k, v in t(b).items()}) if transfers else None
    fr = frontier_evaluation(table, other_families(prep, fs, weights, ladder_policies, table), folds, list(fs.budgets),
                             policies, fs.n_boot, ctx.seed, transfer)
    fr["action_space"] = space.to_json()
    save_per_question(fr.pop("per_question"), prep.query_ids, report_dir / f"{name}_frontier_questions.npz")
    plot_frontier(name, fr, report_dir / f"{name}_frontier.png", policies)
    return fr, frontier_section(name, fr, list(fs.budgets), policies)




def joint_router(fs: FrontierSettings) -> BudgetRouter | None:
    """The first budget router of ``fs`` that can span every ladder at once (None: none can)."""
    return next((k for k in fs.routers if k.spans_ladders), None)


def ladders_section(ctx: RunContext, fs: FrontierSettings, preps: dict[str, Prepared], frontiers: dict[str, dict],
                    ckpt: Path, report_dir: Path) -> list[str]:
    """The report's "ladders at matched reading cost" head: every ladder's frontier in one plot and,
    with a budget router that spans ladders, the all-ladders router (its frontier also written as
    json); ``ckpt``: ``<run>/<ALL_LADDERS>``."""
    head = ["## Ladders at matched reading cost", "", "![ladders](ladders_frontier.png)", ""]
    kind = joint_router(fs)
    if fs.budget_routers and ctx.use_router and kind is not None:  # one router choosing the ladder too
        ladders = {n: ladder_frontier(p, fs) for n, p in preps.items()}
        joint, md = kind.evaluate_joint(ctx, ladders, ckpt / kind.slot, report_dir)
        frontiers = {**frontiers, ALL_LADDERS: joint}
        head += md
        report_dir.mkdir(parents=True, exist_ok=True)
        with atomic_path(report_dir / f"{ALL_LADDERS}_frontier.json") as tmp:
            tmp.write_text(strict_json(joint, indent=1))
    plot_ladders_frontier(frontiers, report_dir / "ladders_frontier.png")
    return head
