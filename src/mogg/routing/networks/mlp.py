"""The MLP router's network: from router inputs to one logit per level.

What the inputs are is a :class:`mogg.routing.inputs.features.FeatureRecipe`; how logits become eq. 1
weights is the objective's business (:mod:`mogg.routing.inputs.objectives`); saving, loading and
applying a trained router is :class:`mogg.routing.router_dir.TrainedRouter`.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch import nn

from mogg.routing.networks.base import RouterNetwork


def standardisation(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Column mean, spread and flatness of inputs [N, D]; a column constant on these rows (spread ~0)
    gets unit spread: clamping it to a tiny spread would scale any later difference by ~1e6."""
    std = x.std(0, unbiased=False)
    flat = std <= 1e-6 * x.abs().amax(0).clamp_min(1.0)
    return x.mean(0), torch.where(flat, torch.ones_like(std), std), flat


def warn_flat(flat: torch.Tensor, routers: int = 1, of: int = 1, names=None) -> None:
    """One warning for input columns constant on the training rows (bool [D]) of ``routers`` of
    ``of`` routers, each named (``names``: a name per column, e.g. ``FeatureRecipe.column_names``)."""
    if flat.any():
        who = "" if of == 1 else f" of {routers} of {of} routers"
        cols = torch.nonzero(flat).flatten().tolist()
        named = [f"{i} ({names[i]})" if names is not None and i < len(names) else str(i) for i in cols[:10]]
        # expected, not a fault (e.g. a set whose questions all lack answer options): info, said plainly
        logging.getLogger(__name__).info(
            "router inputs: %d column(s) take one value on every training question%s: %s%s; kept (unit spread), "
            "they cannot move these routers' decisions", int(flat.sum()), who, ", ".join(named), " ..." if len(cols) > 10 else "")


class RouterMLP(nn.Module, RouterNetwork):
    """Standardise -> Linear -> ReLU -> Dropout -> Linear -> logits [B, L].

    ``hidden=0`` gives a linear router. Feature mean/std live in buffers so the saved weights
    carry the standardisation.
    """

    def __init__(self, in_dim: int, n_levels: int, hidden: int = 64, dropout: float = 0.2):
        super().__init__()
        self.register_buffer("mean", torch.zeros(in_dim))
        self.register_buffer("std", torch.ones(in_dim))
        if hidden > 0:
            self.net = nn.Sequential(
                nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, n_levels)
            )
        else:
            self.net = nn.Sequential(nn.Dropout(dropout), nn.Linear(in_dim, n_levels))
        self.hparams = {"in_dim": in_dim, "n_levels": n_levels, "hidden": hidden, "dropout": dropout}

    def set_normalization(self, x: torch.Tensor, warn: bool = True) -> torch.Tensor:
        """Fit the standardisation on training inputs [N, D]. A column constant on these rows
        (spread ~0) gets unit spread, logged (``warn``; returned either way, bool [D]): clamping it
        to a tiny spread would scale any later difference in that column by ~1e6 and blow the
        router up on new questions."""
        if not torch.isfinite(x).all():
            raise FloatingPointError("router inputs hold NaN or inf; check the feature extraction")
        mean, std, flat = standardisation(x)
        self.mean.copy_(mean)
        if warn:
            warn_flat(flat)
        self.std.copy_(std)
        return flat

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)

    @classmethod
    def from_hparams(cls, net: dict) -> "RouterMLP":
        return cls(net["in_dim"], net["n_levels"], net["hidden"], net["dropout"])

    @torch.inference_mode()
    def logits(self, x) -> np.ndarray:
        """z float64 [Q, L] for inputs [Q, D]."""
        self.eval()
        return self(torch.as_tensor(np.asarray(x), dtype=torch.float32)).double().numpy()

    @torch.inference_mode()
    def weights(self, x: np.ndarray) -> np.ndarray:
        """sigmoid(logits) float64 [N, L] for inputs [N, D] (the BCE objective's weights)."""
        self.eval()
        return torch.sigmoid(self(torch.as_tensor(x, dtype=torch.float32))).double().numpy()
