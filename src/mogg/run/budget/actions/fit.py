"""The action router's folds as one stacked fit (a single fit is the case of one fold).

``F`` action scorers of one shape keep their weights along a leading fold axis
(:class:`ScorerStack`) and step together under one :class:`mogg.routing.networks.stacked.StackedAdam`
(AdamW, a step count per fold). Every fold sees exactly what it would see trained alone: its
initialisation (an :class:`ActionScorer` built under its seed), its standardisation (its training
rows' means and spreads), its shuffles (a generator seeded by its seed, one permutation per epoch,
as the fit always drew them), its dropout masks (a hash of its seed, the epoch, the question and
the unit: :mod:`mogg.run.budget.actions._jit`), its loss over its own rows, and its own early stopping
(patience on its validation loss, its best epoch's weights kept). A fold that stopped takes no
more steps and computes nothing.

Each fold's forward and backward pass runs on its own batch (a loop over the F folds within a
step, not over rows): a step is ~30k-130k (question, action) pairs per fold, whose matrix products
take milliseconds, so stacking them in one ``bmm`` would save no overhead worth having, would pad
unequal batches and would cost the bit-for-bit equality of a fold in the stack and the fold alone
(same shapes, same products), which ``tests/run/test_stacked_actions.py`` checks.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from mogg.core.progress import Heartbeat, progress, stop_horizon
from mogg.routing.networks.stacked import StackedAdam, epoch_seed
from mogg.run.budget.actions import NODE, backprop
from mogg.run.budget.actions._jit import mix64
from mogg.run.budget.actions.backprop import Dropout, Weights
from mogg.run.budget.actions.scorer import ActionRouter, ActionScorer, _loss

log = logging.getLogger(__name__)

# Part of a cross-fit's run id (mogg.run.budget.actions.folds): folds fitted by an earlier fit (other
# dropout draws, other rounding) are refitted, not reused.
FIT_CODE = "stacked-2"  # 2: ReLU units (GELU before issue 37)


class ScorerStack(nn.Module):
    """``F`` :class:`ActionScorer` of one shape as stacked weights, the first layer split by input part
    (:class:`mogg.run.budget.actions.backprop.Weights`; ``var`` / ``const``: the action-feature columns that vary
    across questions and those that do not)."""

    def __init__(self, scorers: Sequence[ActionScorer], var: np.ndarray, const: np.ndarray):
        super().__init__()
        self.d_query, self.var, self.const = scorers[0].d_query, np.asarray(var), np.asarray(const)
        nets = [s.net for s in scorers]
        w1 = torch.stack([n[0].weight.detach() for n in nets])  # [F, 2H, Dq + Da]
        dq = self.d_query
        parts = {"wq": w1[:, :, :dq], "wv": w1[:, :, dq + self.var], "wc": w1[:, :, dq + self.const],
                 "b1": torch.stack([n[0].bias.detach() for n in nets]),
                 "w2": torch.stack([n[3].weight.detach() for n in nets]),
                 "b2": torch.stack([n[3].bias.detach() for n in nets]),
                 "w3": torch.stack([n[5].weight.detach()[0] for n in nets]),
                 "b3": torch.stack([n[5].bias.detach() for n in nets])}
        for name in Weights._fields:
            self.register_parameter(name, nn.Parameter(parts[name].contiguous().clone()))
        self.hidden, self.dropout = scorers[0].hidden, scorers[0].dropout

    def fold(self, k: int, state: dict | None = None) -> Weights:
        """Fold ``k``'s weights (views of the live ones, or of a stacked ``state``)."""
        src = state if state is not None else {n: p.detach() for n, p in self.named_parameters()}
        return Weights(*(src[n][k] for n in Weights._fields))

    def scorer(self, k: int, state: dict | None = None) -> ActionScorer:
        """Fold ``k`` as an :class:`ActionScorer` (the first layer's parts put back in their columns)."""
        w = self.fold(k, state)
        s = ActionScorer(self.d_query, len(self.var) + len(self.const), self.hidden, self.dropout)
        with torch.no_grad():
            w1 = s.net[0].weight
            w1[:, :self.d_query] = w.wq
            w1[:, self.d_query + self.var] = w.wv
            w1[:, self.d_query + self.const] = w.wc
            s.net[0].bias.copy_(w.b1)
            s.net[3].weight.copy_(w.w2)
            s.net[3].bias.copy_(w.b2)
            s.net[5].weight.copy_(w.w3[None])
            s.net[5].bias.copy_(w.b3)
        return s.eval()


def _spread(a: np.ndarray, axis) -> np.ndarray:
    s = a.std(axis=axis)
    return np.where(s > 1e-9, s, 1.0)  # constant columns (a one-hot never set) stay as they are


def fit_action_routers(xq: np.ndarray, xa: np.ndarray, y: np.ndarray, trains: Sequence[np.ndarray],
                       vals: Sequence[np.ndarray], seeds: Sequence[int], kind) -> list[ActionRouter]:
    """Fit ``F = len(trains)`` action routers as one stacked model, under the knobs of ``kind`` (a
    :class:`mogg.run.budget.actions.ActionRouterKind`, which declares and checks them): router k on rows ``trains[k]``
    ([Q, Dq] query inputs, [Q, A, Da] action features, [Q, A] F1 labels), seeded by ``seeds[k]``,
    early stopping on its validation loss over rows ``vals[k]`` (its best epoch's weights kept; the
    training loss where it has no validation rows). Questions without evidence (NaN labels) are left
    out. Router k equals the one fitted alone (``F = 1``) bit for bit.

    Raises :class:`mogg.routing.networks.training.FitError` (a ``FloatingPointError``, ``index`` = k) where
    router k's validation loss was never finite.
    """
    loss, hidden, dropout, lr, weight_decay = kind.loss, kind.hidden, kind.dropout, kind.lr, kind.weight_decay
    batch_size, max_epochs, patience = kind.batch_size, kind.max_epochs, kind.patience
    n_f = len(trains)
    if not (n_f == len(vals) == len(seeds)) or n_f < 1:
        raise ValueError(f"one train, val and seed per router: got {n_f}, {len(vals)}, {len(seeds)}")
    ok = ~np.isnan(y).any(axis=1)
    trains = [np.asarray(t, dtype=np.int64)[ok[t]] for t in trains]
    vals = [np.asarray(v, dtype=np.int64)[ok[v]] for v in vals]
    if any(not len(t) for t in trains):
        raise ValueError("no training question with gold evidence: the action router needs F1 labels")
    var, const = backprop.split_columns(xa)
    routers, inputs = [], []
    for k in range(n_f):  # each fold's own initialisation (under its seed) and standardisation: F folds
        torch.manual_seed(seeds[k])
        tr = trains[k]
        r = ActionRouter(ActionScorer(xq.shape[1], xa.shape[2], hidden, dropout), loss, xq[tr].mean(0),
                         _spread(xq[tr], 0), xa[tr].mean((0, 1)), _spread(xa[tr], (0, 1)), {})
        routers.append(r)
        inputs.append(_standardised(r, xq, xa, var, const))
    net = ScorerStack([r.model for r in routers], var, const)
    opt = StackedAdam(net.parameters(), lr=lr, weight_decay=weight_decay, decoupled=True)
    for p in net.parameters():
        p.grad = torch.zeros_like(p)
    best_w = {n: p.detach().clone() for n, p in net.named_parameters()}
    y_t = torch.as_tensor(np.nan_to_num(y), dtype=torch.float32)  # NaN rows are never read
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    watch = [v if len(v) else t for t, v in zip(trains, vals)]  # no validation rows: watch the training loss
    best = np.full(n_f, math.inf)
    best_epoch, bad, epochs = np.zeros(n_f, dtype=np.int64), np.zeros(n_f, dtype=np.int64), np.zeros(n_f, dtype=np.int64)
    stopped = np.zeros(n_f, dtype=bool)
    bs = max(1, int(batch_size))
    # the bar counts to the epoch early stopping ends the fit at unless a fold improves (it grows when one
    # does), not to max_epochs: its ETA is then the time to that epoch, not to a cap the fit rarely reaches
    horizon = stop_horizon(0, bad, patience, max_epochs)
    bar = progress(total=horizon, desc=f"action router ({n_f} fold{'s' if n_f > 1 else ''})", unit="epoch")
    heart = Heartbeat(log)  # a batch log (no bar) hears from the cross-fit every 15 s
    with torch.no_grad(), bar:
        for epoch in range(max_epochs):
            run = np.flatnonzero(~stopped)
            if not len(run):
                break
            bar.update()
            # the bar says what its total is: the epoch early stopping ends the fit at, as things stand
            bar.set_postfix_str(f"{len(run)} training; ends at the total unless one improves (cap {max_epochs})",
                                refresh=False)
            perms = {k: trains[k][torch.randperm(len(trains[k]), generator=gens[k]).numpy()] for k in run}
            keys = {k: int(mix64(epoch_seed(int(seeds[k]), epoch))) for k in run}
            n_run = len(run)
            for s in range(max(math.ceil(len(perms[k]) / bs) for k in run)):  # a few steps per epoch
                heart.beat(lambda e=epoch + 1, n=n_run, h=horizon: f"action router: epoch {e}, stops by epoch {h} "
                           f"unless a fold improves (cap {max_epochs}), {n} of {n_f} fold(s) still training")
                active = torch.zeros(n_f, dtype=torch.bool)  # folds with rows in this step (a fold alone: the same steps)
                for k in run:  # the F folds, each on its own batch
                    rows = perms[k][s * bs:(s + 1) * bs]
                    if len(rows):
                        _fold_step(net, k, inputs[k], rows, y_t, loss, keys[k], dropout)
                        active[k] = True
                opt.step(active=active)
            for k in run:  # validation, early stopping: per fold
                v = _val_loss(net.fold(k), inputs[k], watch[k], y_t, loss)
                epochs[k] = epoch + 1
                if v < best[k] - 1e-6:
                    best[k], best_epoch[k], bad[k] = v, epoch, 0
                    for n, p in net.named_parameters():
                        best_w[n][k].copy_(p[k])
                else:
                    bad[k] += 1
                    stopped[k] = bool(patience) and bad[k] >= patience
                    if stopped[k]:  # a line as each fold ends: a log shows the cross-fit moving
                        log.info("action router fold %d of %d stopped at epoch %d (best %d, val loss %.4f)", k + 1, n_f,
                                 epoch + 1, best_epoch[k] + 1, best[k])
            horizon = stop_horizon(epoch + 1, bad[~stopped], patience, max_epochs)
            if horizon != bar.total:
                bar.total = horizon
                bar.refresh()
    for k, r in enumerate(routers):
        if not math.isfinite(best[k]):
            from mogg.routing.networks.training import FitError

            raise FitError(k, f"the validation loss was never finite; lower {NODE}.lr (now {lr})")
        r.model = net.scorer(k, best_w)
        r.summary = {"epochs": int(epochs[k]), "best_epoch": int(best_epoch[k]), "best_val_loss": float(best[k]),
                     "n_train": int(len(trains[k])), "n_val": int(len(vals[k])), "seed": int(seeds[k]), "lr": lr,
                     "weight_decay": weight_decay, "batch_size": batch_size, "patience": patience,
                     "max_epochs": max_epochs}
        if not len(vals[k]):
            log.warning("action router: no validation questions; early stopping watched the training loss")
    return routers


def _standardised(r: ActionRouter, xq: np.ndarray, xa: np.ndarray, var: np.ndarray, const: np.ndarray
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Router ``r``'s standardised inputs of every question: query [Q, Dq], varying action features
    [Q, A, Dv] and the action-only ones [A, Dc] (equal for every question: row 0's)."""
    q = torch.as_tensor((xq - r.mean_q) / r.std_q, dtype=torch.float32)
    v = torch.as_tensor((xa[:, :, var] - r.mean_a[var]) / r.std_a[var], dtype=torch.float32)
    c = torch.as_tensor((xa[0][:, const] - r.mean_a[const]) / r.std_a[const], dtype=torch.float32) if len(xa) else \
        torch.zeros(xa.shape[1], len(const))
    return q, v, c


def _fold_step(net: ScorerStack, k: int, inputs: tuple, rows: np.ndarray, y: torch.Tensor, loss: str,
               key: int, dropout: float) -> None:
    """Fold ``k``'s forward and backward pass on question ``rows``: its gradients into ``net``'s
    ``.grad[k]`` (the loss's gradient in the [B, A] scores by autograd, the MLP's by hand)."""
    q_all, v_all, c = inputs
    idx = torch.from_numpy(rows)
    q, v = q_all[idx], v_all[idx]
    drop = Dropout.of(key, rows, dropout) if dropout > 0 else None
    w = net.fold(k)
    out, cache = backprop.forward(w, q, v, c, drop)
    with torch.enable_grad():
        z = out.requires_grad_()
        g_out, = torch.autograd.grad(_loss(loss, z, y[idx]), z)
    grads = backprop.backward(w, cache, g_out, q, v, c, drop)
    for name, g in zip(Weights._fields, grads):
        getattr(net, name).grad[k].copy_(g)


def _val_loss(w: Weights, inputs: tuple, rows: np.ndarray, y: torch.Tensor, loss: str) -> float:
    """One fold's loss over question ``rows`` without dropout (its early stopping's criterion)."""
    q_all, v_all, c = inputs
    idx = torch.from_numpy(rows)
    return float(_loss(loss, backprop.scores(w, q_all[idx], v_all[idx], c), y[idx]))


def fit_action_router(xq: np.ndarray, xa: np.ndarray, y: np.ndarray, train: np.ndarray, val: np.ndarray, kind,
                      seed: int = 0) -> ActionRouter:
    """Fit on rows ``train`` ([Q, Dq] query inputs, [Q, A, Da] action features, [Q, A] F1 labels),
    early stopping on the validation loss over rows ``val`` (the best epoch's weights are kept):
    :func:`fit_action_routers` with one fold under ``kind``'s knobs. Questions without evidence (NaN
    labels) are left out."""
    return fit_action_routers(xq, xa, y, [train], [val], [seed], kind)[0]
