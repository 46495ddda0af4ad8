"""The action router's scorer, the model that scores (:class:`ActionScorer`; :class:`ActionRouter`: a fitted
one with its input standardisation and its directory files). The router chooses granularity and amount together.

An *action* is a fixed configuration (level, k, token cap): its context is the first k chunks of
the level's own ranking cut to the cap, its label the evidence F1 of that context (the metric
labels, generalised from one column per level to one per action) and its cost its tokens, which
are known after retrieval, not predicted. One small MLP scores every (question, action) pair from
the question's router inputs and the action's own features (its tokens, the retrieval scores of
its chunks, level/k/cap one-hots), so all actions share what they learn. The decision is

    a*(q) = argmax_a  u_hat(q, a) - lambda * tokens(q, a)        (optionally tokens <= max_tokens)

with lambda calibrated on validation questions to a mean-token target
(:func:`mogg.evaluation.frontier.calibrate_lambda`) or set directly.

Losses (``frontier.routers.actions.loss``): ``utility`` regresses F1 (MSE); ``bce`` fits F1 as a
soft Bernoulli target (the sigmoid of the output is the utility); ``listwise`` adds a softmax cross-entropy over the actions
towards softmax(F1 / 0.05) to the utility regression (the regression keeps the scores in F1 units,
which the cost trade-off needs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from mogg.core.artifacts import ArtifactError, atomic_path, strict_json
from mogg.core.bounded import integer, number, read_json
from mogg.run.budget.actions import LOSSES
from mogg.run.budget.actions.backprop import Weights, scores, split_columns

log = logging.getLogger(__name__)



class ActionScorer(nn.Module):
    """u_hat(q, a) = MLP([query inputs, action features]) for every action at once: [B, A].

    The stored form of one scorer (``net``: Linear, ReLU, dropout's slot, Linear, ReLU, Linear; the
    state dict of ``actions.safetensors``). Fitting is :mod:`mogg.run.budget.actions.fit` (its dropout is
    a seeded hash, :mod:`mogg.run.budget.actions._jit`), scoring :mod:`mogg.run.budget.actions.backprop`'s split
    first layer; ``forward`` scores without dropout.
    """

    def __init__(self, d_query: int, d_action: int, hidden: int, dropout: float):
        super().__init__()
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_query, self.d_action, self.hidden, self.dropout = d_query, d_action, hidden, dropout
        self.net = nn.Sequential(nn.Linear(d_query + d_action, 2 * hidden), nn.ReLU(), nn.Identity(),
                                 nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def weights(self, var: np.ndarray, const: np.ndarray) -> Weights:
        """The weights with the first layer split into the query's, the varying action columns' (``var``)
        and the action-only columns' (``const``) parts (:class:`mogg.run.budget.actions.backprop.Weights`)."""
        w1, dq = self.net[0].weight.detach(), self.d_query
        return Weights(w1[:, :dq], w1[:, dq + var], w1[:, dq + const], self.net[0].bias.detach(),
                       self.net[3].weight.detach(), self.net[3].bias.detach(), self.net[5].weight.detach()[0],
                       self.net[5].bias.detach())

    def forward(self, xq: torch.Tensor, xa: torch.Tensor) -> torch.Tensor:
        """``xq`` [B, Dq], ``xa`` [B, A, Da] (standardised) -> scores [B, A], no dropout."""
        every = np.arange(xa.shape[2])
        return scores(self.weights(every, every[:0]), xq, xa, xa.new_zeros(xa.shape[1], 0))


def _loss(loss: str, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The scorer's training loss ``loss`` (one of :data:`mogg.run.budget.actions.LOSSES`) of scores ``z`` against F1 ``y``."""
    if loss == "utility":
        return ((z - y) ** 2).mean()
    if loss == "bce":
        return nn.functional.binary_cross_entropy_with_logits(z, y)
    target = torch.softmax(y / 0.05, dim=1)
    return -(target * torch.log_softmax(z / 0.05, dim=1)).sum(1).mean() * 0.01 + ((z - y) ** 2).mean()


@dataclass
class ActionRouter:
    """A fitted action scorer with its input standardisation; :meth:`utilities` -> [Q, A]."""

    model: ActionScorer
    loss: str  # frontier.routers.actions.loss it was fitted with (under bce its outputs are logits)
    mean_q: np.ndarray
    std_q: np.ndarray
    mean_a: np.ndarray
    std_a: np.ndarray
    summary: dict

    def utilities(self, xq: np.ndarray, xa: np.ndarray) -> np.ndarray:
        """Predicted F1 of every action [Q, A] (sigmoid of the output under ``bce``), by the fit's own
        arithmetic (:func:`mogg.run.budget.actions.backprop.scores`: action-only columns once per action)."""
        if not len(xq):
            return np.zeros((0, xa.shape[1]))
        var, const = split_columns(xa)
        q = torch.as_tensor((xq - self.mean_q) / self.std_q, dtype=torch.float32)
        v = torch.as_tensor((xa[:, :, var] - self.mean_a[var]) / self.std_a[var], dtype=torch.float32)
        c = torch.as_tensor((xa[:1, :, const] - self.mean_a[const]) / self.std_a[const], dtype=torch.float32)
        z = scores(self.model.weights(var, const), q, v, c.reshape(xa.shape[1], len(const))).numpy().astype(np.float64)
        if not np.isfinite(z).all():
            raise FloatingPointError(f"action router: non-finite utilities for {int((~np.isfinite(z)).any(1).sum())} "
                                     f"of {len(z)} question(s); its inputs or weights are out of range: retrain it")
        return 1 / (1 + np.exp(-z)) if self.loss == "bce" else z

    def save(self, directory: Path, extra: dict | None = None) -> None:
        """``actions.safetensors`` (weights and standardisation) + ``actions.json`` (the rest)."""
        from safetensors.torch import save_file

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        tensors = {f"net.{k}": v.contiguous() for k, v in self.model.state_dict().items()}
        for name in ("mean_q", "std_q", "mean_a", "std_a"):
            tensors[name] = torch.tensor(getattr(self, name), dtype=torch.float64)
        with atomic_path(d / "actions.safetensors") as tmp:
            save_file(tensors, str(tmp))
        spec = {"network": {"kind": "actions", "d_query": self.model.d_query, "d_action": self.model.d_action,
                            "hidden": self.model.hidden, "dropout": self.model.dropout, "activation": "relu"},
                "loss": self.loss, "training": self.summary, **(extra or {})}
        with atomic_path(d / "actions.json") as tmp:
            tmp.write_text(strict_json(spec, indent=1))

    @classmethod
    def load(cls, directory: Path) -> tuple["ActionRouter", dict]:
        from safetensors.torch import load_file

        d = Path(directory)
        try:
            spec = read_json(d / "actions.json")  # bounded depth and size
        except ArtifactError as e:
            raise ValueError(f"{d / 'actions.json'}: unreadable ({e}); retrain the action router") from None
        net = spec.get("network") if isinstance(spec, dict) else None
        if not isinstance(net, dict) or net.get("kind") != "actions":
            raise ValueError(f"{d}: not an action router (network kind {(net or {}).get('kind')!r})")
        if net.get("activation", "gelu") != "relu":  # scorers saved before issue 37 used GELU
            raise ValueError(f"{d}: an action router with {net.get('activation', 'gelu')} units (saved by an older "
                             "mogg); this one scores with ReLU: retrain it with `python train.py` and the same overrides")
        try:  # the network is built from these before any weight is read: bounded first
            for k in ("d_query", "d_action", "hidden"):
                integer(net.get(k), str(d / "actions.json"), f"network.{k}", 1, 1 << 16)
            number(net.get("dropout"), str(d / "actions.json"), "network.dropout", 0.0, 1.0)
        except ArtifactError as e:
            raise ValueError(str(e)) from None
        try:
            tensors = load_file(str(d / "actions.safetensors"))
        except Exception as e:  # a truncated or foreign file (SafetensorError)
            raise ValueError(f"{d / 'actions.safetensors'}: cannot be read ({e}); retrain the action router") from None
        try:
            model = ActionScorer(net["d_query"], net["d_action"], net["hidden"], net["dropout"])
            model.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("net.")})
            arrays = {n: tensors[n].numpy() for n in ("mean_q", "std_q", "mean_a", "std_a")}
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise ValueError(f"{d / 'actions.safetensors'}: weights do not fit actions.json ({e}); retrain the action "
                             "router") from None
        bad = [k for k, v in tensors.items() if not torch.isfinite(v).all()]
        bad += [n for n in ("std_q", "std_a") if not (arrays[n] > 0).all()]
        if bad:
            raise ValueError(f"{d / 'actions.safetensors'}: non-finite or non-positive values in {', '.join(bad)}; "
                             "the action router is unusable, retrain it")
        loss = spec.get("loss", spec.get("objective"))  # "objective": a scorer saved before issue 61 named it so
        if loss not in LOSSES:
            raise ValueError(f"{d / 'actions.json'}: loss {loss!r} is not one of {LOSSES}; retrain the action router")
        return cls(model, loss, summary=spec.get("training", {}), **arrays), spec
