"""The evidence selector as a budget-router kind (``conf/frontier/routers/selector.yaml``; issue 38).

It reads inside the chunk: every level's top-``depth`` chunks give candidate units (sentences),
a LightGBM scorer cross-fitted like the routers regresses each one's evidence density, and per
question the prefix of its ranking with the best estimated F1 - lambda * tokens is read
(:mod:`mogg.run.budget.selector.stage`). Its rows follow the chunk oracle: the selector guarded and not,
route + trim (a chunk-level router evaluated before it, trimmed by the selector) and the sentence
oracle. Checkpoints: ``<checkpoint>/<ladder>/selector/`` (``fold<k>``, ``final``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

from mogg.run.budget.base import BudgetRouter, LadderFrontier
from mogg.run.budget.selector.stage import reading_policies, selector_settings, train_selector
from mogg.run.context import RunContext


@dataclass
class EvidenceSelectorKind(BudgetRouter):
    """Candidates: the units of every level's top-``depth`` chunks, at most ``per_chunk`` of one
    chunk (those sharing the most question words); plans: the first 1..``plans`` units of the
    ranking; ``cosine``: the question-unit cosine of the encoder as a feature; ``params``:
    LightGBM knobs over :data:`mogg.run.budget.selector.scorer.PARAMS`."""

    depth: int = 8
    per_chunk: int = 24
    plans: int = 48
    cosine: bool = True
    params: dict = field(default_factory=dict)

    TITLE: ClassVar[str] = "the evidence selector"
    FORMAT: ClassVar[str] = "mogg-evidence-selector/1"
    ROUTE_FLAGS: ClassVar[tuple[str, ...]] = ("budget", "cost_weight", "unguarded", "options")

    def __post_init__(self) -> None:
        checked = selector_settings(asdict(self))
        self.params = checked["params"]

    def train(self, ctx: RunContext, ladder: LadderFrontier, out_dir: Path) -> dict:
        return train_selector(ctx, ladder.prep, self.knobs(), out_dir)

    def policy(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path, chunk=None):
        return reading_policies(ctx, ladder.prep, self.knobs(), fold_dir, chunk, ladder.space, ladder.fs.budgets,
                                ctx.retrain, ladder.fs.guard_se)

    def fit_final(self, ctx: RunContext, name: str, ladder: LadderFrontier, fold_dir: Path) -> dict:
        from mogg.run.budget.selector.final import fit_final_selector

        return fit_final_selector(ctx, name, ladder, self.knobs(), fold_dir)

    @classmethod
    def session(cls, directory: Path, artifacts="auto", overrides=(), data_dir=None):
        from mogg.run.budget.selector.session import SelectorSession

        return SelectorSession.from_checkpoint(directory, artifacts, overrides, data_dir)
