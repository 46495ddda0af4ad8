"""The cost-aware action router, a budget-router kind in one package: per question a score for every
fixed (level, k, cap) chunk plan, read at ``argmax u - lambda * tokens``.

Its modules, named as the other kinds' are (a name means the same job in every kind): ``kind`` (its
knobs and the interface the spine calls: :class:`ActionRouterKind`), ``scorer`` (the model that
scores, and its directory files), ``folds`` (the cross-fit), ``policy`` (its frontier rows: the
guarded router policy), ``final`` (the final fit on this set), ``transfer`` (the fit on
``train_sources``, read on a new set), ``deploy`` (the deployed directory:
:class:`DeployedActions`), ``session`` (``mogg-route`` on it); its own: ``fit`` (all folds' scorers
as one stacked fit), ``backprop`` + ``_jit`` (the scorer's forward and backward arithmetic, fit and
routing alike). What it shares with the other kinds lives beside it in :mod:`mogg.run.budget` or
below (:mod:`mogg.routing.plans`, :mod:`mogg.evaluation.frontier_guard`).

Names are imported lazily, so ``_target_: mogg.run.budget.actions.ActionRouterKind`` loads the kind
on first use.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {"kind": ("ActionRouterKind",)})

NODE = "frontier.routers.actions"  # where its knobs are set (the messages that name one say so)
LOSSES = ("utility", "bce", "listwise")  # the scorer's losses (frontier.routers.actions.loss: mogg.run.budget.actions.scorer)
