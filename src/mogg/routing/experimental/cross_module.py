"""The cross router's LightningModule (imported by a fit only: Lightning takes seconds to import).

One epoch is one Lightning step (:class:`mogg.routing.networks.lightning_module.EpochTicks`): the module
draws the epoch's shuffle and dropout from (seed, epoch), takes its mini-batch steps, then
validates; so a resumed run replays exactly the epochs a fresh one would. The best weights, best
loss and patience counter travel in Lightning's checkpoints (``on_save_checkpoint``).
"""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import torch

from mogg.routing.experimental.pairs import PairStates
from mogg.routing.inputs import objectives
from mogg.routing.networks.lightning_module import EpochTicks
from mogg.routing.networks.stacked import epoch_seed


class CrossModule(L.LightningModule):
    """Fit ``router`` (a :class:`mogg.routing.experimental.cross.CrossRouter`) on rows ``train`` of ``states`` to ``targets`` [N, L]; early-stop on ``val``."""

    def __init__(self, router: torch.nn.Module, states: PairStates, targets: np.ndarray, train: np.ndarray, val: np.ndarray,
                 seed: int, *, objective: str, lr: float, encoder_lr: float, weight_decay: float, batch_size: int,
                 patience: int):
        super().__init__()
        self.automatic_optimization = False
        self.router = router
        self.states = states  # not a module attribute Lightning saves: the data, rebuilt on resume
        self.t = torch.as_tensor(np.asarray(targets), dtype=torch.float32)
        self.train_rows = torch.as_tensor(np.asarray(train, dtype=np.int64))
        self.val_rows = torch.as_tensor(np.asarray(val, dtype=np.int64))
        self.seed, self.batch = int(seed), max(1, min(int(batch_size), len(self.train_rows)))
        self.objective = objectives.check_objective(objective)
        self.lr, self.encoder_lr, self.weight_decay, self.patience = lr, encoder_lr, weight_decay, int(patience)
        self.best_loss, self.wait, self.stop_epoch = math.inf, 0, 0
        self.best_state = {k: v.detach().clone() for k, v in router.state_dict().items()}

    def epoch_loader(self) -> EpochTicks:
        return EpochTicks()

    def configure_optimizers(self):
        groups = [{"params": list(self.router.head.parameters()), "lr": self.lr}]
        if len(self.router.top):
            groups.append({"params": list(self.router.top.parameters()), "lr": self.encoder_lr})
        return torch.optim.AdamW(groups, weight_decay=self.weight_decay)

    def _loss(self, rows: torch.Tensor) -> torch.Tensor:
        ex = self.states.extra
        z = self.router(self.states.hidden[rows].to(self.device), self.states.mask[rows].to(self.device),
                        None if ex is None else ex[rows].to(self.device))
        return objectives.row_loss(self.objective, z, self.t[rows].to(self.device)).mean()

    def training_step(self, batch, _):
        s = epoch_seed(self.seed, self.current_epoch)
        perm = self.train_rows[torch.randperm(len(self.train_rows), generator=torch.Generator().manual_seed(s))]
        torch.manual_seed(s)  # the blocks' and the head's dropout in this epoch
        self.router.train()
        opt = self.optimizers()
        total = 0.0
        for a in range(0, len(perm), self.batch):
            loss = self._loss(perm[a:a + self.batch])
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
            total += float(loss.detach()) * len(perm[a:a + self.batch])
        if self.trainer.loggers:
            self.log("train_loss", total / len(perm))
        if len(self.val_rows):
            self._validate()

    @torch.no_grad()
    def _validate(self) -> None:
        self.router.eval()
        n, total = len(self.val_rows), 0.0
        for a in range(0, n, 64):
            rows = self.val_rows[a:a + 64]
            total += float(self._loss(rows)) * len(rows)
        v = total / n
        if self.trainer.loggers:
            self.log("val_loss", v, on_step=False, on_epoch=True, batch_size=1)
        if v < self.best_loss:  # strict: NaN never improves
            self.best_loss, self.wait = v, 0
            self.best_state = {k: t.detach().clone() for k, t in self.router.state_dict().items()}
        else:
            self.wait += 1
        if not math.isfinite(v) or (self.patience > 0 and self.wait >= self.patience):
            self.stop_epoch = self.current_epoch + 1
            self.trainer.should_stop = True

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["mogg_cross"] = {"best_loss": self.best_loss, "wait": self.wait, "stop_epoch": self.stop_epoch,
                                    "best_state": self.best_state}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        c = checkpoint["mogg_cross"]
        self.best_loss, self.wait, self.stop_epoch = float(c["best_loss"]), int(c["wait"]), int(c["stop_epoch"])
        self.best_state = c["best_state"]
