"""The cost-aware action router as a budget-router kind (``conf/frontier/routers/actions.yaml``).

Per question it scores every fixed (level, k, cap) of the action table
(:mod:`mogg.run.budget.actions.fit`: one stacked fit over all folds) and reads ``argmax u - lambda *
tokens``; the frontier's router policy guards it against the envelope (with eq. 1-2 under the
level router's weights as the other candidate). It can span every ladder at once (the
all-ladders router). Checkpoints: ``<checkpoint>/<ladder>/actions/`` (``fold<k>``, ``final``,
``transfer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from mogg.core.knobs import Check, check_knobs, count, is_number, knob, number, one_of
from mogg.run.budget.actions import LOSSES, NODE
from mogg.run.budget.base import ALL_LADDERS, TRANSFER_DIR, BudgetRouter, LadderFrontier
from mogg.run.context import RunContext

# what its scorer, folds and directory need (torch) is imported where it is used: the kind itself,
# which Hydra's ConfigStore reads at start (hydra_plugins/mogg_knobs), stays light


@dataclass
class ActionRouterKind(BudgetRouter):
    """The action scorer's knobs, declared here only: each field's default, check and doc (the
    fit, :func:`mogg.run.budget.actions.fit.fit_action_routers`, reads this object; the config's
    defaults and the docs' knob table are these fields)."""

    loss: str = knob("utility", one_of(LOSSES, f"out of range: one of {LOSSES}"),
                     "the scorer's loss: utility (F1 regression) | bce | listwise; named apart from the level "
                     "router's router.objective, which does not reach it")
    # 64 and patience 15 before issue 37: the router policy equal to the printed digit on all three sets
    # but one cell (+0.001), the fit ~3x faster (docs/benchmarks.md, 'The frontier, profiled')
    hidden: int = knob(32, count("out of range: an integer >= 1"), "hidden units (the second layer; the first has twice as many)")
    dropout: float = knob(0.1, Check(lambda v: is_number(v, 0.0, 1.0) and v < 1, "out of range: 0 <= dropout < 1"),
                          "dropout on the first layer's units (the fit's seeded hash)")
    lr: float = knob(3.0e-3, number("out of range: 0 < lr <= 10", 0.0, 10.0, low_open=True), "AdamW's learning rate")
    weight_decay: float = knob(1.0e-4, number("out of range: a number >= 0", 0.0), "AdamW's decoupled weight decay")
    batch_size: int = knob(64, count("out of range: an integer >= 1"), "questions per step")
    max_epochs: int = knob(200, count("out of range: an integer >= 1"), "at most this many epochs")
    patience: int = knob(10, count("out of range: an integer >= 0 (0: no early stopping)", 0),
                         "early stopping: epochs without a better validation loss")

    TITLE: ClassVar[str] = "the action router"
    FORMAT: ClassVar[str] = "mogg-action-router/1"
    ROUTE_FLAGS: ClassVar[tuple[str, ...]] = ("budget", "cost_weight", "max_tokens", "here", "unguarded")
    spans_ladders: ClassVar[bool] = True

    RENAMED: ClassVar[dict[str, str]] = {"objective": "loss"}  # knobs renamed since (refused with the new name)

    def __post_init__(self) -> None:
        check_knobs(self, NODE)

    def _key(self, ctx: RunContext, xq, xa, table, space, data_key: str) -> dict:
        from mogg.run.budget.actions.folds import action_key

        return action_key(xq, xa, table.f1, space, ctx.n_folds, ctx.seed, self, ctx.val_fraction, data_key)

    def train(self, ctx: RunContext, ladder: LadderFrontier, out_dir: Path) -> dict:
        from mogg.run.budget.actions.folds import crossfit_actions

        space, table, xq, xa = ladder.action_table
        return crossfit_actions(xq, xa, table.f1, space, ladder.prep.query_ids, ctx.n_folds, ctx.seed, self,
                                ctx.val_fraction, out_dir, ladder.prep.data_key, ctx.artifacts)

    def folds(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path):
        """The cross-fit's out-of-fold utilities (:class:`mogg.run.budget.actions.folds.ActionFolds`),
        refused when they were trained on other data or knobs."""
        from mogg.run.budget.actions.folds import predict_action_folds

        space, table, xq, xa = ladder.action_table
        return predict_action_folds(xq, xa, ladder.prep.query_ids, fold_dir, space,
                                    self._key(ctx, xq, xa, table, space, ladder.prep.data_key), ctx.retrain)

    def policy(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path, chunk=None):
        from mogg.run.budget.actions.policy import RouterFolds

        af = self.folds(ctx, ladder, fold_dir)
        return RouterFolds(af.util, af.fold, af.val, guard=ladder.fs.guard, guard_se=ladder.fs.guard_se)

    def fit_final(self, ctx: RunContext, name: str, ladder: LadderFrontier, fold_dir: Path) -> dict:
        from mogg.run.budget.actions.final import fit_final_actions

        return fit_final_actions(ctx, name, ladder, self, fold_dir)

    def fit_transfer(self, ctx: RunContext, name: str, sources: dict[str, LadderFrontier], fold_dir: Path
                     ) -> dict:
        from mogg.run.budget.actions.transfer import fit_transfer_actions

        return fit_transfer_actions(ctx, name, sources, self, fold_dir)

    def transferred(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path):
        """With ``train_sources`` and their action router (``<fold_dir>/transfer``): budget -> the
        transferred router's and the training sets' envelope's rows on this set, both label-free
        (:func:`mogg.run.budget.actions.transfer.transferred_rows`); None otherwise."""
        from mogg.run.budget.actions.transfer import transferred_rows

        if not ctx.train_sources:
            return None
        d = Path(fold_dir) / TRANSFER_DIR
        if not d.is_dir():
            raise FileNotFoundError(f"no transfer action router in {d}: run `{ctx.retrain}` (train.py with "
                                    "router.fit=all or both)")
        return transferred_rows(ladder, d)

    def train_joint(self, ctx: RunContext, ladders: dict[str, LadderFrontier], out_dir: Path) -> dict:
        """Cross-fit the all-ladders action router into ``out_dir`` (same folds as every ladder's)."""
        from mogg.run.budget.actions.folds import crossfit_actions

        space, table, xq, xa, _ = all_ladders_actions(ladders)
        key = "+".join(lf.prep.data_key for lf in ladders.values())
        return crossfit_actions(xq, xa, table.f1, space, next(iter(ladders.values())).prep.query_ids, ctx.n_folds,
                                ctx.seed, self, ctx.val_fraction, out_dir, key)

    def evaluate_joint(self, ctx: RunContext, ladders: dict[str, LadderFrontier], fold_dir: Path,
                       report_dir: Path) -> tuple[dict, list[str]]:
        """The frontier across ladders: the envelope over every ladder's fixed configurations, each
        ladder's own envelope as a family, the all-ladders router, the oracle over all actions."""
        from mogg.evaluation.frontier import Family
        from mogg.evaluation.frontier_render import frontier_section, plot_frontier
        from mogg.evaluation.frontier_report import frontier_evaluation
        from mogg.run.budget.actions.folds import predict_action_folds
        from mogg.run.budget.actions.policy import RouterFolds

        space, table, xq, xa, per_ladder = all_ladders_actions(ladders)
        fs = next(iter(ladders.values())).fs
        ids = next(iter(ladders.values())).prep.query_ids
        expected = self._key(ctx, xq, xa, table, space, "+".join(lf.prep.data_key for lf in ladders.values()))
        af = predict_action_folds(xq, xa, ids, fold_dir, space, expected, ctx.retrain)
        router = RouterFolds(af.util, af.fold, af.val, guard=fs.guard, guard_se=fs.guard_se)
        own = [Family(f"{n} envelope", t.f1, t.tokens, t.configs, False, {}) for n, t in per_ladder.items()]
        fr = frontier_evaluation(table, own, af.fold, list(fs.budgets), [router], fs.n_boot, ctx.seed)
        fr.pop("per_question")
        fr["action_space"] = space.to_json()
        plot_frontier(ALL_LADDERS, fr, report_dir / f"{ALL_LADDERS}_frontier.png", [router])
        return fr, frontier_section(ALL_LADDERS, fr, list(fs.budgets), [router])

    @classmethod
    def session(cls, directory: Path, artifacts="auto", overrides=(), data_dir=None, corpus=()):
        from mogg.run.budget.actions.session import ActionSession

        return ActionSession.from_checkpoint(directory, artifacts, overrides, data_dir, corpus)


def all_ladders_actions(ladders: dict[str, LadderFrontier]) -> tuple:
    """(ActionSpace, Family, xq, xa, {ladder: Family}): :func:`mogg.run.budget.shared.action_table_of` over every ladder at once: levels named
    ``<ladder>/<level>`` (ladder-major, so the merged table keeps :class:`ActionSpace`'s order),
    query inputs of all ladders side by side, action features from the ladders' deep scores
    stacked along the level axis; and each ladder's own action table (its fixed envelope's
    candidates)."""
    from mogg.evaluation.frontier import Family, merge_families
    from mogg.routing.plans import ActionSpace, action_features

    ids = next(iter(ladders.values())).prep.query_ids
    if any(lf.prep.query_ids != ids for lf in ladders.values()):
        raise ValueError("the all-ladders router needs every ladder prepared on the same questions")
    fs = next(iter(ladders.values())).fs
    parts = {name: lf.action_table for name, lf in ladders.items()}
    names = [f"{n}/{lv}" for n, lf in ladders.items() for lv in lf.prep.ladder.level_names]
    space = ActionSpace(names, fs.depth, list(fs.caps))
    tables = []
    for n, (_, t, _, _) in parts.items():
        tables.append(Family(t.name, t.f1, t.tokens, [f"{n}/{c}" for c in t.configs], True, {}))
    table = merge_families("fixed envelope (all ladders)", tables)
    xq = np.concatenate([x for _, _, x, _ in parts.values()], axis=1)
    scores = np.concatenate([lf.prep.deep.scores[:, :, : fs.depth] for lf in ladders.values()], axis=1)
    xa = action_features(space, scores, table.tokens)
    return space, table, xq, xa, {n: t for n, (_, t, _, _) in parts.items()}


__all__ = ["ActionRouterKind", "all_ladders_actions"]
