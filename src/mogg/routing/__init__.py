"""Routing: what a router reads, what it is trained on, and the router itself.

``features`` (router inputs, ``FeatureRecipe``), ``labels`` (soft labels, ``SoftLabeler``),
``objectives`` (one class per objective), ``router`` (the MLP), ``model`` (a trained router's
directory, ``TrainedRouter``), ``training`` + ``stacked`` + ``lightning_module`` (all folds as one
stacked model under Lightning), ``crossfit`` (folds, the final fit), ``sources`` (many question
sets, one router), ``actions`` + ``action_folds`` (the frontier's cost-aware action router).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "FeatureRecipe": "features",
    "parse_groups": "features",
    "compute_features": "features",
    "SoftLabeler": "labels",
    "soft_labels": "labels",
    "Objective": "objectives",
    "get_objective": "objectives",
    "RouterMLP": "router",
    "TrainedRouter": "model",
    "Routing": "model",
    "RouterMismatch": "model",
    "TrainerConfig": "training",
    "fit_router": "training",
    "fit_routers": "training",
    "FitError": "training",
    "StackedMLP": "stacked",
    "StackedAdam": "stacked",
    "RouterSettings": "settings",
    "RouterTrainingError": "crossfit",
    "crossfit": "crossfit",
    "fit_all": "crossfit",
    "predict_crossfit": "crossfit",
    "train_router": "crossfit",
    "train_routers": "crossfit",
    "make_folds": "crossfit",
    "Source": "sources",
    "fit_sources": "sources",
    "ActionSpace": "actions",
    "ActionRouter": "actions",
    "crossfit_actions": "action_folds",
    "predict_action_folds": "action_folds",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
