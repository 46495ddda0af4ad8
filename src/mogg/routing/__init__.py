"""Routing: what a router reads, what it is trained on, the router kinds, and how they are fitted.

By role:

* ``inputs``: the feature matrix (``features``: ``FeatureRecipe``), soft labels (``labels``:
  ``SoftLabeler``), objectives (``objectives``: one class per objective);
* ``kinds``: the router-kind interface (``base``: ``RouterKind``, ``RouterNetwork``), the default
  MLP kind (``mlp``) and the registry that finds a saved router's network (``registry``);
* ``networks``: the MLP network (``mlp``), all folds as one stacked model (``stacked``,
  ``lightning_module``, ``training``);
* ``fitting``: folds (``folds``), k-fold fits and the final fit (``kfold``), many question sets
  (``sources``, ``experts``);
* ``plans``: what every budget router shares (the (level, k, cap) chunk plans, the choice
  argmax u - lambda * tokens and lambda's calibration; the kinds themselves are packages in
  :mod:`mogg.run.budget`); ``profiles``: eq. 1 profiles (which levels vote);
* ``experimental``: kinds measured as no gain (docs/routers.md), reachable by their config only;
* ``router_dir`` (a trained router's directory, ``TrainedRouter``), ``spec_check`` (its spec's checks).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "inputs.features": ("FeatureRecipe", "parse_groups", "compute_features"),
    "inputs.labels": ("SoftLabeler", "soft_labels"),
    "inputs.objectives": ("Objective", "get_objective"),
    "kinds.base": ("RouterKind", "RouterNetwork"),
    "kinds.mlp": ("MLPRouter",),
    "networks.mlp": ("RouterMLP",),
    "router_dir": ("TrainedRouter", "Routing", "RouterMismatch"),
    "networks.training": ("TrainerConfig", "fit_router", "fit_routers", "FitError"),
    "networks.stacked": ("StackedMLP", "StackedAdam"),
    "fitting.kfold": ("RouterTrainingError", "crossfit", "fit_all", "predict_crossfit", "train_router", "train_routers"),
    "fitting.folds": ("make_folds", "CrossFit"),
    "fitting.sources": ("Source", "fit_sources"),
    "plans": ("ActionSpace", "decide", "calibrate_lambda"),
    "profiles": ("ProfileSpace",),
})
