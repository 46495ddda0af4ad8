"""The router's LightningModule and its callbacks (imported by :func:`mogg.routing.training.fit_router`
only: Lightning's import costs seconds that evaluation and mogg-route do not need to pay)."""

from __future__ import annotations

import lightning as L
import torch

from mogg.routing import objectives
from mogg.routing.router import RouterMLP


class BestState(L.Callback):
    """Keep the best-on-validation weights in memory (a file write per epoch would dominate the
    run time of a router this small); saved inside Lightning checkpoints so a resumed run keeps it."""

    def __init__(self, monitor: str = "val_loss"):
        self.monitor, self.best, self.state = monitor, float("inf"), None

    def on_validation_end(self, trainer, module):
        v = trainer.callback_metrics.get(self.monitor)
        if v is not None and float(v) < self.best:
            self.best = float(v)
            self.state = {k: t.detach().clone() for k, t in module.state_dict().items()}

    def state_dict(self) -> dict:
        return {"best": self.best, "state": self.state}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.state = state["best"], state["state"]


class EpochSeed(L.Callback):
    """Reseed torch (dropout) at every epoch from (seed, epoch): a run resumed from a checkpoint
    replays exactly the epochs an uninterrupted run would have had."""

    def __init__(self, seed: int, loaders: list | None = None):
        self.seed, self.loaders = seed, loaders or []

    def on_train_epoch_start(self, trainer, module):
        seed = self.seed * 100_003 + trainer.current_epoch
        # torch.manual_seed also queues a CUDA reseed, recording a stack trace each time CUDA is
        # not initialised (~1 ms per epoch here); the CPU generator is all a CPU fit draws from
        if torch.cuda.is_initialized():
            torch.manual_seed(seed)
        else:
            torch.default_generator.manual_seed(seed)
        for dl in self.loaders:  # the shuffle is drawn lazily, at the epoch's first batch
            dl.set_epoch(trainer.current_epoch)


class RouterModule(L.LightningModule):
    """The router under one of :data:`mogg.routing.objectives.OBJECTIVES`; Adam (paper: lr 1e-3).

    Targets are soft labels (``bce``) or standardised centred utilities (``utility``,
    ``listwise``); validation uses the same loss, so early stopping follows the objective.
    """

    # no defaults here: RouterSettings (mogg.routing.crossfit) holds the one default of each knob
    def __init__(self, in_dim: int, n_levels: int, *, hidden: int, dropout: float, lr: float, weight_decay: float,
                 objective: str):
        super().__init__()
        # Manual optimisation: the same Adam steps (zero_grad, backward, step) without Lightning's
        # automatic-optimisation closure, whose per-step bookkeeping cost ~10x the arithmetic of
        # a router this small. The loss is logged once per epoch (its batch-weighted mean, the
        # value on_epoch=True logging reports).
        self.automatic_optimization = False
        self._loss_sum, self._loss_n = 0.0, 0
        self.save_hyperparameters()
        self.router = RouterMLP(in_dim, n_levels, hidden, dropout)
        self.objective = objectives.check_objective(objective)

    def forward(self, x):
        return self.router(x)

    def training_step(self, batch, _):
        x, y = batch
        opt = self.optimizers()
        opt.zero_grad()
        loss = objectives.loss(self.objective, self(x), y)
        self.manual_backward(loss)
        opt.step()
        self._loss_sum += float(loss.detach()) * len(x)
        self._loss_n += len(x)

    def on_train_epoch_end(self):
        if self._loss_n:
            self.log("train_loss", self._loss_sum / self._loss_n)
        self._loss_sum, self._loss_n = 0.0, 0

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_loss", objectives.loss(self.objective, self(x), y), on_epoch=True, prog_bar=False, batch_size=len(x))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
