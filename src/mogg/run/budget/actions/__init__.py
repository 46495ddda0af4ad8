"""The cost-aware action router, a budget-router kind in one package: per question a score for every
fixed (level, k, cap) chunk plan, read at ``argmax u - lambda * tokens``.

``kind`` (its knobs and the interface the spine calls: :class:`ActionRouterKind`), ``network`` (the
scorer and its directory files), ``scorer`` + ``_jit`` (the scorer's arithmetic, fit and routing
alike), ``fit`` (all folds as one stacked fit), ``folds`` (the cross-fit), ``policy`` (its frontier
rows: the guarded router policy), ``final`` (the deployable directory, on this set or on
``train_sources``), ``deploy`` (that directory: :class:`DeployedActions`), ``session`` (``mogg-route``
on it). What it shares with the other kinds lives below it (:mod:`mogg.routing.plans`,
:mod:`mogg.evaluation.frontier_guard`, :mod:`mogg.run.budget.shared`).

Names are imported lazily, so ``_target_: mogg.run.budget.actions.ActionRouterKind`` loads the kind
on first use.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {"kind": ("ActionRouterKind",)})

NODE = "frontier.routers.actions"  # where its knobs are set (the messages that name one say so)
LOSSES = ("utility", "bce", "listwise")  # the scorer's losses (frontier.routers.actions.loss: mogg.run.budget.actions.network)
