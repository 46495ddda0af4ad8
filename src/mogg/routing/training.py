"""Router training with Lightning on cached arrays: one fit, resumable, deterministic.

Inputs and targets are small in-memory tensors, so an epoch is a handful of optimizer steps and
1000 epochs take seconds. The Lightning classes are in :mod:`mogg.routing.lightning_module`,
imported by a fit only (evaluation never pays Lightning's import). Cross-fitting and the final fit on all questions are in
:mod:`mogg.routing.crossfit`.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mogg.routing.router import RouterMLP
from mogg.threads import single_threaded

log = logging.getLogger(__name__)


@dataclass
class TrainerConfig:
    """Knobs of one router fit (all explicit so a sweep can change any of them)."""

    max_epochs: int = 1000
    batch_size: int = 128
    patience: int = 50  # epochs without val_loss improvement before stopping; 0 disables
    val_fraction: float = 0.15
    accelerator: str = "cpu"  # the router is tiny: the GPU only adds transfer latency
    deterministic: bool = True
    checkpoint_every: int = 0  # epochs between Lightning checkpoints on disk (0 = none; best is kept in memory)
    requeue: str = "none"  # who requeues a preempted SLURM job: "lightning" (SLURMEnvironment) | "submitit" | "none"


class TensorBatches:
    """Seeded mini-batches over in-memory tensors: a DataLoader without worker/collate overhead
    (which costs more than the optimizer step for a router this small). The shuffle of epoch e
    depends only on (seed, e), so a resumed run sees the same batches."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, shuffle: bool, seed: int):
        self.x = torch.as_tensor(x, dtype=torch.float32)
        self.y = torch.as_tensor(y, dtype=torch.float32)
        self.batch_size, self.shuffle = max(1, min(batch_size, len(self.x))), shuffle
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-len(self.x) // self.batch_size)

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        idx = torch.randperm(len(self.x), generator=gen) if self.shuffle else torch.arange(len(self.x))
        for i in range(0, len(idx), self.batch_size):
            b = idx[i : i + self.batch_size]
            yield self.x[b], self.y[b]


def fit_router(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_val: np.ndarray | None,
    y_val: np.ndarray | None,
    module_kwargs: dict,
    trainer: TrainerConfig,
    seed: int,
    ckpt_dir: Path | None = None,
    logger=False,
) -> tuple[RouterMLP, dict]:
    """Train one router; returns the best-on-validation module and a small summary dict."""
    # Lightning (with torchmetrics, transformers, sympy) takes seconds to import: only a fit needs it
    import lightning as L
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from mogg.routing.lightning_module import BestState, EpochSeed, RouterModule

    L.seed_everything(seed, workers=True, verbose=False)
    # Lightning announces devices and tips at INFO on every fit: noise for 5-fold x sweeps.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    module = RouterModule(in_dim=x_train.shape[1], n_levels=y_train.shape[1], **module_kwargs)
    module.router.set_normalization(torch.as_tensor(x_train, dtype=torch.float32))
    has_val = x_val is not None and len(x_val) > 0
    best = BestState()
    train_dl = TensorBatches(x_train, y_train, trainer.batch_size, True, seed)
    val_dl = TensorBatches(x_val, y_val, len(x_val), False, seed) if has_val else None
    callbacks: list = [EpochSeed(seed, [train_dl])] + ([best] if has_val else [])
    if has_val and trainer.patience > 0:
        callbacks.append(EarlyStopping(monitor="val_loss", mode="min", patience=trainer.patience))
    if trainer.checkpoint_every > 0:
        callbacks.append(ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=1, every_n_epochs=trainer.checkpoint_every))
    t = L.Trainer(
        max_epochs=trainer.max_epochs,
        accelerator=trainer.accelerator,
        devices=1,
        deterministic=trainer.deterministic,
        logger=logger,
        callbacks=callbacks,
        enable_checkpointing=trainer.checkpoint_every > 0,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(ckpt_dir) if ckpt_dir else None,
        num_sanity_val_steps=0,
        plugins=_requeue_plugins(trainer.requeue),
    )
    last = Path(ckpt_dir) / "last.ckpt" if ckpt_dir else None
    resume = str(last) if (trainer.checkpoint_every > 0 and last is not None and last.is_file()) else None
    if resume:
        log.info("resuming router training from %s", resume)
    # a few-thousand-parameter MLP: threads only add synchronisation (and spin under contention)
    with single_threaded(), warnings.catch_warnings():
        # Lightning's own use of a deprecated torch pytree API: third-party noise on every fit
        warnings.filterwarnings("ignore", message=r".*LeafSpec.*")
        t.fit(module, train_dl, val_dl, ckpt_path=resume)
    summary = {"epochs": int(t.current_epoch)}
    train_loss = t.callback_metrics.get("train_loss")
    if has_val and best.state is None:
        raise FloatingPointError(
            f"the validation loss was never finite (last training loss {train_loss}); lower router.lr "
            f"(now {module_kwargs.get('lr')}) or check the router inputs")
    if best.state is not None:
        module.load_state_dict(best.state)
        summary["best_val_loss"] = best.best
    elif train_loss is not None and not torch.isfinite(torch.as_tensor(train_loss)).all():
        raise FloatingPointError(f"the training loss is {float(train_loss)}; lower router.lr (now {module_kwargs.get('lr')})")
    bad = [k for k, v in module.state_dict().items() if not torch.isfinite(v).all()]
    if bad:
        raise FloatingPointError(f"non-finite router weights after training ({', '.join(bad)})")
    return module.router.eval(), summary


def _requeue_plugins(requeue: str) -> list:
    """One owner of SLURM's preemption signal: Lightning requeues itself, or submitit does (then
    Lightning must not also act on the signal), or nobody."""
    if requeue not in ("none", "lightning", "submitit"):
        raise ValueError(f"requeue must be none|lightning|submitit, got {requeue!r}")
    if requeue == "none":
        return []
    from lightning.pytorch.plugins.environments import SLURMEnvironment

    return [SLURMEnvironment(auto_requeue=requeue == "lightning")]
