"""The router network: an MLP from router inputs to one logit per level.

What the inputs are is a :class:`mogg.routing.features.FeatureRecipe`; how logits become eq. 1
weights is the objective's business (:mod:`mogg.routing.objectives`); saving, loading and
applying a trained router is :class:`mogg.routing.model.TrainedRouter`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


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
        """Fit the standardisation on training inputs [N, D]."""
        self.mean.copy_(x.mean(0))
        self.std.copy_(x.std(0, unbiased=False).clamp_min(1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)

    @torch.inference_mode()
    def weights(self, x: np.ndarray) -> np.ndarray:
        """sigmoid(logits) float64 [N, L] for inputs [N, D] (the BCE objective's weights)."""
        self.eval()
        return torch.sigmoid(self(torch.as_tensor(x, dtype=torch.float32))).double().numpy()
