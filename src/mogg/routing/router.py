"""The router network: an MLP from router inputs to one logit per level.

What the inputs are is a :class:`mogg.routing.features.FeatureRecipe`; how logits become eq. 1
weights is the objective's business (:mod:`mogg.routing.objectives`); saving, loading and
applying a trained router is :class:`mogg.routing.model.TrainedRouter`.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch import nn


def standardisation(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Column mean, spread and flatness of inputs [N, D]; a column constant on these rows (spread ~0)
    gets unit spread: clamping it to a tiny spread would scale any later difference by ~1e6."""
    std = x.std(0, unbiased=False)
    flat = std <= 1e-6 * x.abs().amax(0).clamp_min(1.0)
    return x.mean(0), torch.where(flat, torch.ones_like(std), std), flat


class RouterMLP(nn.Module):
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

    def set_normalization(self, x: torch.Tensor) -> None:
        """Fit the standardisation on training inputs [N, D]. A column constant on these rows
        (spread ~0) gets unit spread, logged: clamping it to a tiny spread would scale any later
        difference in that column by ~1e6 and blow the router up on new questions."""
        if not torch.isfinite(x).all():
            raise FloatingPointError("router inputs hold NaN or inf; check the feature extraction")
        mean, std, flat = standardisation(x)
        self.mean.copy_(mean)
        if flat.any():
            logging.getLogger(__name__).warning(
                "router inputs: %d column(s) constant on the training rows (%s): unit spread, they carry no signal",
                int(flat.sum()), ", ".join(str(i) for i in torch.nonzero(flat).flatten().tolist()[:10]))
        self.std.copy_(std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)

    @torch.inference_mode()
    def weights(self, x: np.ndarray) -> np.ndarray:
        """sigmoid(logits) float64 [N, L] for inputs [N, D] (the BCE objective's weights)."""
        self.eval()
        return torch.sigmoid(self(torch.as_tensor(x, dtype=torch.float32))).double().numpy()
