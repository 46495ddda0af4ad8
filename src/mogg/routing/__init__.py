"""Routing: what a router reads, what it is trained on, and the router itself.

``features`` (router inputs, ``FeatureRecipe``), ``labels`` (soft labels, ``SoftLabeler``),
``objectives`` (one class per objective), ``router`` (the MLP, a committee of MLPs), ``committee``
(the committee's members' rows, ``router.members``), ``model`` (a trained router's
directory, ``TrainedRouter``), ``training`` + ``stacked`` + ``lightning_module`` (all folds as one
stacked model under Lightning), ``crossfit`` (folds, the final fit), ``sources`` (many question
sets, one router), ``actions`` + ``action_folds`` (the frontier's cost-aware action router; its
folds as one stacked fit in ``action_fit``, the scorer's arithmetic in ``action_mlp``).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "features": ("FeatureRecipe", "parse_groups", "compute_features"),
    "labels": ("SoftLabeler", "soft_labels"),
    "objectives": ("Objective", "get_objective"),
    "router": ("RouterMLP", "RouterCommittee"),
    "committee": ("member_fits",),
    "model": ("TrainedRouter", "Routing", "RouterMismatch"),
    "training": ("TrainerConfig", "fit_router", "fit_routers", "FitError"),
    "stacked": ("StackedMLP", "StackedAdam"),
    "settings": ("RouterSettings",),
    "crossfit": ("RouterTrainingError", "crossfit", "fit_all", "predict_crossfit", "train_router", "train_routers",
                  "make_folds"),
    "sources": ("Source", "fit_sources"),
    "actions": ("ActionSpace", "ActionRouter"),
    "action_folds": ("crossfit_actions", "predict_action_folds"),
    "action_fit": ("fit_action_routers", "fit_action_router"),
})
