"""The action scorer's arithmetic (backprop): forward and backward of one MLP over every (question, action).

The scorer (:class:`mogg.run.budget.actions.scorer.ActionScorer`) is

    u(q, a) = w3 . relu(W2 drop(relu(W1 [x_q, x_a] + b1)) + b2) + b3

over [B questions, A actions] at once: ~150k (question, action) pairs a step. Two facts make it
cheaper than the concatenation ``[x_q, x_a]`` pushed through ``nn.Linear``:

- the first layer is linear, so ``W1 [x_q, x_a] = Wq x_q + Wa x_a``: the question's part is one
  [B, 2H] product per question, not per (question, action);
- most action features (the level / k / cap one-hots) are the same for every question, so their
  part is one [A, 2H] product per step; only the few that vary (tokens, retrieval scores) are a
  per-pair product (``v`` [B, A, Dv], ``c`` [A, Dc]: :func:`split_columns`).

Same function, other float rounding (the sums run in another order). The backward pass is written
out (autograd kept every intermediate and summed the broadcasts in extra passes); the dropout mask
is a hash recomputed in the backward pass (:mod:`mogg.run.budget.actions._jit`). ReLU, not GELU (as
until issue 37): GELU's erf and its derivative took ~40% of a fit step (5.5 and 4.0 ms on [28k, 64]
against 0.15 ms for ReLU), for no better frontier (docs/benchmarks.md, "The frontier, profiled").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch.nn import functional as F

from mogg.run.budget.actions._jit import dropout_rows_, layer1_, layer1_grads

# Fixed parts of a batch's questions whose first-layer gradients are summed in order (any thread
# count gives the same sums)
_PARTS = 8


class Weights(NamedTuple):
    """One scorer's weights, the first layer split by input part: ``wq`` [2H, Dq], ``wv`` [2H, Dv],
    ``wc`` [2H, Dc], ``b1`` [2H], ``w2`` [H, 2H], ``b2`` [H], ``w3`` [H], ``b3`` [1]."""

    wq: torch.Tensor
    wv: torch.Tensor
    wc: torch.Tensor
    b1: torch.Tensor
    w2: torch.Tensor
    b2: torch.Tensor
    w3: torch.Tensor
    b3: torch.Tensor


@dataclass
class Dropout:
    """One fold's dropout in one epoch: ``key`` (its hash key), the batch's question ``rows``
    (int64 [B], the hash's counters), ``keep53`` = keep * 2**53 and the kept units' ``scale``."""

    key: int
    rows: np.ndarray
    keep53: np.uint64
    scale: np.float32

    @classmethod
    def of(cls, key: int, rows: np.ndarray, p: float) -> "Dropout":
        keep = 1.0 - p
        return cls(key, np.ascontiguousarray(rows, dtype=np.int64), np.uint64(int(keep * 2.0**53)),
                   np.float32(1.0) / np.float32(keep))

    def apply_(self, x: torch.Tensor) -> torch.Tensor:
        """Zero the dropped units of ``x`` [B * A, W] (question-major) and scale the kept ones, in place."""
        dropout_rows_(x.view(len(self.rows), -1).numpy(), np.uint64(self.key), self.rows, self.keep53, self.scale)
        return x


_NO_DROP = Dropout(0, np.zeros(0, dtype=np.int64), np.uint64(0), np.float32(1))


def split_columns(xa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the action-feature columns that vary across questions and of those that do not
    (equal for every question, per action: the one-hots), int64 each. ``xa`` [Q, A, Da]."""
    same = (xa == xa[:1]).all(axis=(0, 1)) if len(xa) else np.ones(xa.shape[2], dtype=bool)
    return np.flatnonzero(~same), np.flatnonzero(same)


class Cache(NamedTuple):
    """What the backward pass reads of the forward pass (pairs P = B * A, question-major)."""

    h1: torch.Tensor  # [P, 2H] relu(z1) after dropout (z1 itself is not kept: h1 > 0 says where it passed)
    z2: torch.Tensor  # [P, H]
    h2: torch.Tensor  # [P, H]


def forward(w: Weights, q: torch.Tensor, v: torch.Tensor, c: torch.Tensor,
            drop: Dropout | None = None) -> tuple[torch.Tensor, Cache]:
    """Scores [B, A] of standardised inputs ``q`` [B, Dq], ``v`` [B, A, Dv], ``c`` [A, Dc]."""
    b, a = v.shape[0], v.shape[1]
    qp = torch.addmm(w.b1, q, w.wq.T)  # [B, 2H]: once per question
    cp = c @ w.wc.T  # [A, 2H]: once per action
    h1 = torch.empty(b, a, qp.shape[1])
    # relu(qp[b] + cp[a] + the per-pair part v[b, a] @ Wv^T (Dv columns)) with the dropout mask,
    # written once: [P, 2H] (a separate relu and mask pass over it cost ~10% of a fit)
    d = drop or _NO_DROP
    layer1_(h1.numpy(), qp.numpy(), cp.numpy(), v.contiguous().numpy(), w.wv.T.contiguous().numpy(),
            np.uint64(d.key), d.rows if drop is not None else np.zeros(b, dtype=np.int64), d.keep53, d.scale,
            drop is not None)
    h1 = h1.view(b * a, -1)
    z2 = torch.addmm(w.b2, h1, w.w2.T)  # [P, H]
    h2 = F.relu(z2)
    out = torch.addmv(w.b3, h2, w.w3)  # [P]
    return out.view(b, a), Cache(h1, z2, h2)


def backward(w: Weights, cache: Cache, g_out: torch.Tensor, q: torch.Tensor, v: torch.Tensor, c: torch.Tensor,
             drop: Dropout | None = None) -> Weights:
    """Gradients of a loss whose gradient in the scores is ``g_out`` [B, A] (what autograd gives
    for :func:`forward`, to float rounding)."""
    b, a = v.shape[0], v.shape[1]
    g = g_out.reshape(-1)  # [P]
    gw3 = torch.mv(cache.h2.T, g)
    gb3 = g.sum().reshape(1)
    # relu's derivative as torch's own fused kernel (grad where z > 0, else 0): a mul_ by the bool
    # mask z > 0 built the mask and promoted it, 2.7 of a 20 s fit
    g_z2 = torch.ops.aten.threshold_backward(torch.outer(g, w.w3), cache.z2, 0)  # [P, H]
    gw2 = (cache.h1.T @ g_z2).T  # [H, 2H] (this operand order: ~20% faster in MKL than g_z2.T @ h1)
    gb2 = g_z2.sum(0)
    g_h1 = g_z2 @ w.w2  # [P, 2H]
    # one pass: relu's and the mask's derivative (scale where h1 > 0: active and kept), then the
    # gradient summed over the actions per question [B, 2H] (the query part's), over the questions
    # per action [A, 2H] (the action-only part's) and against the varying features [Dv, 2H]
    scale = drop.scale if drop is not None else np.float32(1.0)
    g_qp, g_cp, g_v = (torch.from_numpy(x) for x in layer1_grads(
        g_h1.view(b, a, -1).numpy(), cache.h1.view(b, a, -1).numpy(), v.contiguous().numpy(), scale, _PARTS))
    return Weights(g_qp.T @ q, g_v.T, g_cp.T @ c, g_qp.sum(0), gw2, gb2, gw3, gb3)


def scores(w: Weights, q: torch.Tensor, v: torch.Tensor, c: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """:func:`forward` without dropout over ``chunk`` questions at a time (bounded memory): [B, A]."""
    with torch.no_grad():
        return torch.cat([forward(w, q[i:i + chunk], v[i:i + chunk], c)[0] for i in range(0, len(q), chunk)]) \
            if len(q) else torch.zeros(0, v.shape[1])
