"""The budget-router interface: what the frontier stage, ``train.py`` and ``mogg-route`` ask of a
learned budget router, whatever it learns. Its three parts stand side by side in ``run/budget/``:

* **the kind** (here): one class, a dataclass of its knobs (each field its default, check and doc:
  :func:`mogg.core.knobs.knob`) subclassing :class:`BudgetRouter`, and one config file
  (``conf/frontier/routers/<kind>.yaml``: ``<kind>: {_target_: module.Class}``, its defaults from
  the fields); built from ``frontier.routers`` by :func:`mogg.run.budget.registry.budget_routers`;
* **its policy**, the guard's view of it (re-exported here: :class:`BudgetPolicy`, the rows a
  kind gives the frontier table, and :class:`Learned`, per-question plans the guard deploys at a
  budget; both are defined in :mod:`mogg.evaluation.frontier_guard`, beside the table that reads
  them, since the evaluation layer cannot import this one);
* **its deployed directory**: written by :meth:`BudgetRouter.save_deployed` (or a kind's own
  ``save``), opened and checked by :mod:`mogg.run.budget.deployed` (manifest, seal, format, the
  budgets) and :mod:`mogg.run.budget.bounds` (every number), its kind found again by
  :func:`mogg.run.registry.deployed_kind`.

Neither kind imports the other (``tests/docs/test_layers.py``); what they share is here or below.
The run's ``frontier.routers`` holds the kinds it trains, in the report's order
(``frontier/routers=[actions,selector]``), and each keeps its checkpoints in
``<checkpoint>/<ladder>/<kind>/``. The spine calls:

* :meth:`BudgetRouter.train`: the cross-fit on one ladder's prepared questions;
* :meth:`BudgetRouter.policy`: its out-of-fold plans as a :class:`BudgetPolicy` (the frontier
  table's rows);
* :meth:`BudgetRouter.fit_final` / :meth:`BudgetRouter.fit_transfer`: the directory one deploys
  (``router.fit=all``), on this set or on ``train_sources`` (None: the kind has none);
* :meth:`BudgetRouter.transferred`: rows of a router fixed before this set was seen;
* :meth:`BudgetRouter.session`: ``mogg-route`` on a deployed directory, whose ``deploy.json``
  names the kind (:func:`mogg.run.registry.deployed_kind`).

How to add a kind: ``docs/extending.md``, "Add a budget router kind".
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import ClassVar

from mogg.evaluation.frontier_guard import BudgetPolicy, Learned, TableAt
from mogg.run.context import RunContext

__all__ = ["ALL_LADDERS", "FINAL_DIR", "TRANSFER_DIR", "BudgetPolicy", "BudgetRouter", "LadderFrontier", "Learned",
           "TableAt"]

# the all-ladders router's folder: one action space over every ladder's (level, k, cap), so a kind that
# spans ladders picks the ladder too; its checkpoints live beside the ladders' as <run>/<ALL_LADDERS>/<kind>
ALL_LADDERS = "all_ladders"
# a kind's deployed directories under <run>/<ladder>/<kind>/, beside its cross-fit's fold<k>: the final fit on
# this set's questions (router.fit=all|both; BudgetRouter.fit_final) and the one on train_sources (fit_transfer)
FINAL_DIR, TRANSFER_DIR = "final", "transfer"

class LadderFrontier:
    """One ladder's prepared questions under the frontier settings, with the fixed action table
    computed once and shared by every kind (:attr:`action_table`: space, table, query inputs, action
    features; :func:`mogg.run.budget.shared.action_table_of`)."""

    def __init__(self, prep, fs):
        self.prep, self.fs = prep, fs

    @cached_property
    def action_table(self):
        from mogg.run.budget.shared import action_table_of

        return action_table_of(self.prep, self.fs)

    @property
    def space(self):
        return self.action_table[0]

    @property
    def table(self):
        return self.action_table[1]


class BudgetRouter:
    """A learned budget router (see the module doc). Subclasses are dataclasses of their knobs;
    ``slot`` (its key under ``frontier.routers``, also its checkpoint folder) is set when the
    frontier settings build it."""

    TITLE: ClassVar[str] = "budget router"  # how messages name it
    HINT: ClassVar[str] = ""  # what a refused mogg-route option should be instead
    FORMAT: ClassVar[str] = ""  # its deployed directory's deploy.json format
    ROUTE_FLAGS: ClassVar[tuple[str, ...]] = ("budget", "cost_weight", "unguarded")  # what its session's route takes
    spans_ladders: ClassVar[bool] = False  # can it choose the ladder too (train_joint / evaluate_joint)
    slot: str = ""

    def knobs(self) -> dict:
        """Its knobs that change a trained router (hashed into its cross-fit's run id)."""
        import dataclasses

        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def trims(self) -> str | None:
        """A kind that reads inside the chunk: the slot of the chunk-level kind whose plans it trims
        (route + trim, evaluated after that kind), or None."""
        return None

    def check(self, fs) -> None:
        """Refuse knobs this kind cannot honour under the frontier settings ``fs`` (checked when
        they are built: a selector deeper than the frontier retrieves, one trimming no router)."""

    def train(self, ctx: RunContext, ladder: LadderFrontier, out_dir: Path) -> dict:
        """Cross-fit on one ladder into ``out_dir``: ``{"folds": [...], "run_id": ...}``."""
        raise NotImplementedError

    def policy(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path, chunk=None):
        """Its out-of-fold plans from the cross-fit in ``fold_dir`` as a :class:`BudgetPolicy`;
        ``chunk``: the plans of a chunk-level router evaluated before it (a :class:`Learned`), or None."""
        raise NotImplementedError

    def fit_final(self, ctx: RunContext, name: str, ladder: LadderFrontier, fold_dir: Path) -> dict | None:
        """The deployable directory on this set (``fold_dir/final``: :data:`FINAL_DIR`); None: the kind deploys none."""
        return None

    def fit_transfer(self, ctx: RunContext, name: str, sources: dict[str, LadderFrontier], fold_dir: Path
                     ) -> dict | None:
        """The deployable directory trained on ``train_sources``; None: the kind has no transfer fit."""
        return None

    def transferred(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path):
        """budget -> {row: (F1 [Q], tokens [Q], config)} of its transfer fit on this set, or None."""
        return None

    def train_joint(self, ctx: RunContext, ladders: dict[str, LadderFrontier], out_dir: Path) -> dict:
        """Cross-fit over every ladder at once (``spans_ladders``)."""
        raise NotImplementedError(f"{self.TITLE} does not choose the ladder")

    def evaluate_joint(self, ctx: RunContext, ladders: dict[str, LadderFrontier], fold_dir: Path,
                       report_dir: Path) -> tuple[dict, list[str]]:
        """The frontier across ladders (``spans_ladders``): its dictionary and report section."""
        raise NotImplementedError(f"{self.TITLE} does not choose the ladder")

    @staticmethod
    def summary_line(summary: dict) -> str:
        """``mogg-route``'s last line: how many questions, at what budget, what was deployed, mean tokens."""
        if not summary.get("n"):
            return f"routed no question ({summary.get('n_empty', 0)} empty)"
        at = f"B={summary['budget']}" if summary.get("budget") is not None else f"lambda={summary.get('lambda', 0):g}"
        if summary.get("calibrated_here"):
            at += f", calibrated on these questions (lambda={summary['lambda']:g})"
        empty = f" ({summary['n_empty']} empty left out)" if summary.get("n_empty") else ""
        return (f"routed {summary['n']} questions at {at} ({summary.get('deployed', '?')} deployed): mean tokens "
                f"{summary.get('mean_tokens', float('nan')):.1f}{empty}")

    @classmethod
    def save_deployed(cls, directory: Path, deploy: dict, write=None, config: dict | None = None) -> Path:
        """Write a deployed directory as every kind must: ``deploy.json`` (``deploy`` with
        ``"kind"`` naming this class) plus what ``write(tmp)`` adds (weights, plans), atomically, with
        a manifest and ``deploy.json`` sealed over every other file (:mod:`mogg.core.seal`), so
        ``mogg-route`` verifies it before it looks the kind up. ``config``: what names the content
        (a retrain with other settings replaces the directory)."""
        from mogg.core.artifacts import config_hash, strict_json, write_artifact
        from mogg.core.seal import seal_holder

        deploy = {**deploy, "kind": f"{cls.__module__}:{cls.__qualname__}"}

        def writer(tmp: Path) -> None:
            if write is not None:
                write(tmp)
            (tmp / "deploy.json").write_text(strict_json(deploy, indent=1))
            seal_holder(tmp, "deploy.json")  # last: the seal covers every other file

        return write_artifact(Path(directory), writer, config or {"kind": deploy["kind"], "content": config_hash(deploy)})

    @classmethod
    def session(cls, directory: Path, artifacts="auto", overrides=(), data_dir=None, corpus=()):
        """A routing session over its deployed ``directory`` (``route(questions, ids, **flags)``
        with the flags of :attr:`ROUTE_FLAGS`: budget, cost_weight, max_tokens, here, unguarded,
        options, unit); ``corpus``: the files of the corpus to route (``mogg-route --corpus``)."""
        raise NotImplementedError(f"{cls.TITLE} has no deployed form")
