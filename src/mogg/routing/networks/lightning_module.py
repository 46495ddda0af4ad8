"""The routers' LightningModule: ``F`` routers (the folds of a cross-fit, or one) trained as one.

Imported by :func:`mogg.routing.networks.training.fit_routers` only: Lightning's import costs seconds
that evaluation and mogg-route do not need to pay. The stacking itself (weights, masks, Adam)
is :mod:`mogg.routing.networks.stacked`; this module adds the epoch loop's bookkeeping: per-fold batches,
per-fold early stopping with each fold's best weights, and the logged losses. Everything a
resumed run needs (weights, Adam moments and step counts, best weights, patience counters) is
a parameter, buffer or optimizer state, so Lightning's checkpoints carry it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import lightning as L
import numpy as np
import torch

from mogg.routing.inputs import objectives
from mogg.routing.networks.mlp import RouterMLP
from mogg.routing.networks.stacked import StackedAdam, StackedMLP, epoch_seed

log = logging.getLogger(__name__)


class ResumedAt(L.Callback):
    """Logs the epoch a fit resumed from ``last.ckpt`` starts at, as Lightning restored it (what a
    requeued job's log shows)."""

    def __init__(self, path: str):
        self.path = path

    def on_train_start(self, trainer, pl_module) -> None:
        log.info("resumed router training from %s at epoch %d of %d (the epochs before it restored)",
                 self.path, trainer.current_epoch, trainer.max_epochs)


class EpochTicks:
    """A loader of one item per epoch: the module draws the epoch's batches itself (per fold,
    from (seed, epoch)) and validates at its end, so Lightning's per-batch machinery runs once
    per epoch, not per step."""

    def __iter__(self):
        yield torch.zeros(1)

    def __len__(self) -> int:
        return 1


def _padded(rows: Sequence) -> tuple[torch.Tensor, torch.Tensor]:
    """Row indices [F, max n] (padding 0) and their validity mask [F, max n]."""
    rows = [torch.as_tensor(np.asarray(r, dtype=np.int64)) if not isinstance(r, torch.Tensor) else r for r in rows]
    width = max(1, max(len(r) for r in rows))
    if all(len(r) == width for r in rows):  # equal folds (the usual cross-fit): no padding
        return torch.stack(rows), torch.ones(len(rows), width, dtype=torch.bool)
    idx = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for k, r in enumerate(rows):  # F folds
        idx[k, : len(r)] = r
        mask[k, : len(r)] = True
    return idx, mask


class StackedRouterModule(L.LightningModule):
    """``routers`` (initialised and standardised, one per fold) trained on rows ``train[k]`` of
    ``x`` [N, D] against ``targets[k]`` [N, L], early-stopped per fold on rows ``val[k]``.

    ``seeds[k]`` seeds fold k's shuffles and dropout per epoch; ``patience`` 0 disables early
    stopping (the best-on-validation weights are still kept).
    """

    def __init__(self, routers: Sequence[RouterMLP], x: np.ndarray, targets: np.ndarray, train: Sequence[np.ndarray],
                 val: Sequence[np.ndarray], seeds: Sequence[int], *, batch_size: int, patience: int, objective: str,
                 lr: float, weight_decay: float):
        super().__init__()
        # Manual optimisation: the same Adam steps without Lightning's automatic-optimisation
        # closure, whose per-step bookkeeping costs ~10x the arithmetic of routers this small.
        self.automatic_optimization = False
        self.net = StackedMLP(routers)
        f = self.net.n_folds
        self.objective = objectives.check_objective(objective)
        self.lr, self.weight_decay, self.patience = lr, weight_decay, int(patience)
        self.seeds = [int(s) for s in seeds]
        self.x = torch.as_tensor(x, dtype=torch.float32)  # [N, D]
        self.t = torch.as_tensor(targets, dtype=torch.float32)  # [F, N, L]
        self.train_rows = [torch.as_tensor(np.asarray(r, dtype=np.int64)) for r in train]
        self.batch = [max(1, min(batch_size, len(r))) for r in train]
        self.val_idx, self.val_mask = _padded(val)
        self.has_val = bool(self.val_mask.any())
        self.register_buffer("best_loss", torch.full((f,), math.inf))
        self.register_buffer("wait", torch.zeros(f, dtype=torch.long))
        self.register_buffer("stopped", torch.zeros(f, dtype=torch.bool))
        self.register_buffer("stop_epoch", torch.zeros(f, dtype=torch.long))  # epochs run when a fold stopped
        self.register_buffer("train_loss", torch.zeros(f))  # each fold's last epoch mean
        for name, p in self.net.named_parameters():
            self.register_buffer(f"best_{name}", p.detach().clone())
        self._loss_sum, self._loss_n = torch.zeros(f, dtype=torch.float64), torch.zeros(f)

    def configure_optimizers(self):
        return StackedAdam(self.net.parameters(), lr=self.lr, weight_decay=self.weight_decay)

    def training_step(self, batch, _):
        e, f = self.current_epoch, self.net.n_folds
        shuffles = [torch.Generator().manual_seed(epoch_seed(s, e)) for s in self.seeds]
        drops = [torch.Generator().manual_seed(epoch_seed(s, e)) for s in self.seeds]
        perms = [r[torch.randperm(len(r), generator=g)] for r, g in zip(self.train_rows, shuffles)]
        n_steps = max(-(-len(p) // b) for p, b in zip(perms, self.batch))
        keep = self.net.dropout_draws(drops, [len(p) for p in perms])  # the epoch's masks, one draw per fold
        opt = self.optimizers()
        folds = torch.arange(f).unsqueeze(1)
        for s in range(n_steps):  # mini-batch steps of this epoch (a few), all folds at once
            idx, mask = _padded([p[s * b:(s + 1) * b] for p, b in zip(perms, self.batch)])
            counts = mask.sum(1)
            active = (counts > 0) & ~self.stopped
            if not active.any():
                continue
            drop = self.net.step_masks(keep, [s * b for b in self.batch], counts.tolist(), idx.shape[1])
            z = self.net(self.x[idx], drop)  # [F, B, L]
            per_row = objectives.row_loss(self.objective, z, self.t[folds, idx]) * mask
            per_fold = per_row.sum(1) / counts.clamp_min(1)
            opt.zero_grad()
            self.manual_backward(per_fold[active].sum())
            opt.step(active=active)
            self._loss_sum.add_(torch.where(active, per_fold.detach() * counts, 0).double())
            self._loss_n.add_(torch.where(active, counts, 0))
        if self.has_val:
            # validated here, after the epoch's steps, rather than in Lightning's validation loop,
            # whose per-epoch machinery costs more than the arithmetic (same values, same order)
            with torch.no_grad():
                self._validate()

    def on_train_epoch_end(self):
        ran = self._loss_n > 0
        if ran.any():
            self.train_loss.copy_(torch.where(ran, self._loss_sum / self._loss_n.clamp_min(1), self.train_loss).float())
            if self.trainer.loggers:
                self.log("train_loss", float(self.train_loss[ran].mean()))
        self._loss_sum.zero_()
        self._loss_n.zero_()

    def _validate(self) -> None:
        """Each running fold's validation loss; keep its best weights, stop it when it stops improving."""
        running = ~self.stopped
        f = self.net.n_folds
        z = self.net(self.x[self.val_idx])  # eval: no dropout
        per_row = objectives.row_loss(self.objective, z, self.t[torch.arange(f).unsqueeze(1), self.val_idx]) * self.val_mask
        v = per_row.sum(1) / self.val_mask.sum(1).clamp_min(1)
        better = running & (v < self.best_loss)  # strict, as Lightning's EarlyStopping (NaN never improves)
        self.best_loss.copy_(torch.where(better, v, self.best_loss))
        for name, p in self.net.named_parameters():
            best = getattr(self, f"best_{name}")
            best.copy_(torch.where(better.view((f,) + (1,) * (p.dim() - 1)), p.detach(), best))
        self.wait.copy_(torch.where(better, 0, torch.where(running, self.wait + 1, self.wait)))
        stop = running & (~torch.isfinite(v) | ((self.wait >= self.patience) if self.patience > 0 else False))
        self.stop_epoch.copy_(torch.where(stop, self.current_epoch + 1, self.stop_epoch))
        self.stopped.logical_or_(stop)
        if self.trainer.loggers:  # Lightning's logging costs more than this epoch's arithmetic: only for a logger
            self.log("val_loss", float(v[running].mean()), on_step=False, on_epoch=True, batch_size=1)
            if f > 1:
                self.log_dict({f"val_loss/fold{k}": float(v[k]) for k in range(f) if running[k]},
                              on_step=False, on_epoch=True, batch_size=1)
        if bool(self.stopped.all()):
            self.trainer.should_stop = True

