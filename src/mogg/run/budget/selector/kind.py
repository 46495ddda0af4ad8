"""The evidence selector as a budget-router kind (``conf/frontier/routers/selector.yaml``; issue 38).

It reads inside the chunk: every level's top-``depth`` chunks give candidate units (sentences),
a LightGBM scorer cross-fitted like the routers regresses each one's evidence density, and per
question the prefix of its ranking with the best estimated F1 - lambda * tokens is read
(:mod:`mogg.run.budget.selector.stage`). Its rows follow the chunk oracle: the selector guarded and not,
route + trim (a chunk-level router evaluated before it, trimmed by the selector) and the sentence
oracle. Checkpoints: ``<checkpoint>/<ladder>/selector/`` (``fold<k>``, ``final``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from mogg.run.budget.base import BudgetRouter, LadderFrontier
from mogg.run.budget.selector.adapt import VIEWS
from mogg.run.budget.selector.plans import EVIDENCE, LAMBDA_RULES
from mogg.run.budget.selector.scorer import check_params
from mogg.run.budget.selector.stage import reading_policies, train_selector
from mogg.run.context import RunContext

VARIANTS = "variants"  # <checkpoint>/<ladder>/selector/variants/<name>: each variant's cross-fit
VARIANT_KNOBS = ("depth", "per_chunk", "plans", "cosine", "params", "evidence", "context")
VARIANT_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass
class EvidenceSelectorKind(BudgetRouter):
    """Its knobs, declared here only (``conf/frontier/routers/selector.yaml`` sets them; this object
    travels down): candidates are the units of every level's top-``depth`` chunks (at most
    ``frontier.depth``: deeper is refused, not clamped), at most ``per_chunk`` of one chunk (those
    sharing the most question words); plans: the first 1..``plans`` units of the ranking;
    ``cosine``: the question-unit cosine of the encoder as a feature; ``params``: LightGBM knobs over
    :data:`mogg.run.budget.selector.scorer.PARAMS`; ``trim_of``: the chunk-level budget router whose
    plans route + trim trims (its slot in ``frontier.routers``; null: no route + trim); ``evidence``:
    the estimated F1's evidence length, ``median`` (the training questions') or ``predicted`` (per
    question, from its candidates' predicted density: label-free on a new set) or ``document`` (per
    question, the tokens of its best-scored candidate's document); ``transfer_evidence``: the same
    for the selector trained on other sets (``train_sources``) and read on a new one: what its
    directory deploys with (the report shows a row for each estimate); ``transfer_lambda``: how that
    selector's lambda is set on a new set, ``here`` (the smallest that reads <= B mean tokens on its
    questions) or ``learned`` (at least the training sets' validation lambda for B; a row of its own);
    ``transfer_features``: that selector's feature view (:data:`mogg.run.budget.selector.adapt.VIEWS`:
    ``within_question`` adds each column's z-score and rank among the question's candidates);
    ``context``: also the neighbours' and the document's columns (the cosine of the units around it,
    its document's mean and its rank there: :data:`mogg.run.budget.selector.candidates.CONTEXT_FEATURES`);
    ``variants``: name -> knobs that differ from these (any of :data:`VARIANT_KNOBS`), each cross-fitted
    beside the selector (``<checkpoint>/<ladder>/selector/variants/<name>``) and a row of the same
    run's frontier table, "selector (<name>)", on the same questions and folds, with its paired
    interval against the selector under the table (issue 49). The deployed directory is the selector's."""

    depth: int = 8
    per_chunk: int = 24
    plans: int = 48
    cosine: bool = True
    params: dict = field(default_factory=dict)
    trim_of: str | None = "actions"
    evidence: str = "median"
    transfer_evidence: str = "document"  # chosen on the leave-one-set-out splits (docs/results.md)
    transfer_lambda: str = "learned"  # chosen on the leave-one-set-out splits (docs/results.md)
    transfer_features: str = "within_question"  # chosen by the worst held-out shape (docs/results.md)
    context: bool = False
    variants: dict = field(default_factory=dict)

    TITLE: ClassVar[str] = "the evidence selector"
    HINT: ClassVar[str] = ""
    FORMAT: ClassVar[str] = "mogg-evidence-selector/1"
    ROUTE_FLAGS: ClassVar[tuple[str, ...]] = ("budget", "cost_weight", "here", "unguarded", "options")

    def __post_init__(self) -> None:
        for k in ("depth", "per_chunk", "plans"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"frontier.routers.selector.{k}={v!r}: must be an integer >= 1")
        for k in ("cosine", "context"):
            if not isinstance(getattr(self, k), bool):
                raise ValueError(f"frontier.routers.selector.{k}={getattr(self, k)!r}: must be true or false")
        if not isinstance(self.params, dict):
            raise ValueError(f"frontier.routers.selector.params={self.params!r}: LightGBM knobs as a mapping")
        if self.trim_of is not None and not isinstance(self.trim_of, str):
            raise ValueError(f"frontier.routers.selector.trim_of={self.trim_of!r}: a budget router's name or null")
        for k in ("evidence", "transfer_evidence"):
            if getattr(self, k) not in EVIDENCE:
                raise ValueError(f"frontier.routers.selector.{k}={getattr(self, k)!r}: one of {EVIDENCE}")
        if self.transfer_features not in VIEWS:
            raise ValueError(f"frontier.routers.selector.transfer_features={self.transfer_features!r}: one of {VIEWS}")
        if self.transfer_lambda not in LAMBDA_RULES:
            raise ValueError(f"frontier.routers.selector.transfer_lambda={self.transfer_lambda!r}: one of {LAMBDA_RULES}")
        self.params = check_params(dict(self.params))
        self.variants = {str(n): dict(v or {}) for n, v in dict(self.variants or {}).items()}
        for n, v in self.variants.items():
            if not VARIANT_NAME.fullmatch(n):
                raise ValueError(f"frontier.routers.selector.variants: {n!r} is not a variant name (letters, digits, _ . -)")
            bad = sorted(set(v) - set(VARIANT_KNOBS))
            if bad:
                raise ValueError(f"frontier.routers.selector.variants.{n}: {', '.join(bad)} cannot vary (one of "
                                 f"{', '.join(VARIANT_KNOBS)})")
            self.variant(n)  # its knobs checked like the selector's

    def variant(self, name: str) -> "EvidenceSelectorKind":
        """The selector with variant ``name``'s knobs (no route + trim, no variants of its own)."""
        over = dict(self.variants[name])
        if "params" in over:
            over["params"] = {**self.params, **dict(over["params"] or {})}
        return dataclasses.replace(self, **over, trim_of=None, variants={})

    def check(self, fs) -> None:
        if self.depth > fs.depth:
            raise ValueError(f"frontier.routers.selector.depth={self.depth} reads deeper than frontier.depth={fs.depth} "
                             "retrieves; set frontier.routers.selector.depth <= frontier.depth (or raise frontier.depth)")
        slots = [k.slot for k in fs.routers if not getattr(k, "trim_of", None)]
        if self.trim_of is not None and self.trim_of not in slots:
            raise ValueError(f"frontier.routers.selector.trim_of={self.trim_of!r}: no such chunk-level router in "
                             f"frontier.routers ({', '.join(slots) or 'none'}); name one, or set it to null "
                             "(no route + trim)")

    def train(self, ctx: RunContext, ladder: LadderFrontier, out_dir: Path) -> dict:
        info = train_selector(ctx, ladder.prep, self, out_dir)
        for name in self.variants:
            train_selector(ctx, ladder.prep, self.variant(name), Path(out_dir) / VARIANTS / name)
        return info

    def policy(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path, chunk=None):
        fs = ladder.fs
        reading = reading_policies(ctx, ladder.prep, self, fold_dir, chunk, ladder.space, fs.budgets, ctx.retrain,
                                   fs.guard_se)
        for name in self.variants:
            other = reading_policies(ctx, ladder.prep, self.variant(name), Path(fold_dir) / VARIANTS / name, None,
                                     ladder.space, fs.budgets, ctx.retrain, fs.guard_se)
            reading.variants[f"selector ({name})"] = other.selector
        return reading

    def fit_final(self, ctx: RunContext, name: str, ladder: LadderFrontier, fold_dir: Path) -> dict:
        from mogg.run.budget.selector.final import fit_final_selector

        return fit_final_selector(ctx, name, ladder, self, fold_dir)

    def fit_transfer(self, ctx: RunContext, name: str, sources: dict[str, LadderFrontier], fold_dir: Path
                     ) -> dict:
        from mogg.run.budget.selector.transfer import fit_transfer_selector

        return fit_transfer_selector(ctx, name, sources, self, fold_dir, ctx.source_weights)

    def transferred(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path):
        """With ``train_sources`` and their selector (``<fold_dir>/transfer``): budget -> the transferred
        selector's rows on this set (each evidence estimate) and the training sets' envelope, all
        label-free (:mod:`mogg.run.budget.selector.transfer`)."""
        from mogg.run.budget.selector.transfer import TRANSFER_SELECTOR, transferred_rows

        if not ctx.train_sources:
            return None
        d = Path(fold_dir) / TRANSFER_SELECTOR
        if not d.is_dir():
            raise FileNotFoundError(f"no transfer evidence selector in {d}: run `{ctx.retrain}` (train.py with "
                                    "router.fit=all or both)")
        return transferred_rows(ctx, ladder, self, d)

    @classmethod
    def session(cls, directory: Path, artifacts="auto", overrides=(), data_dir=None, corpus=()):
        from mogg.run.budget.selector.session import SelectorSession

        return SelectorSession.from_checkpoint(directory, artifacts, overrides, data_dir, corpus)
