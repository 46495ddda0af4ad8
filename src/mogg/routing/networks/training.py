"""Router training with Lightning on cached arrays: resumable, deterministic, all folds at once.

Inputs and targets are small in-memory tensors, so an epoch is a handful of optimizer steps and
1000 epochs take seconds; a cross-fit's folds train as one stacked model
(:mod:`mogg.routing.networks.stacked`), one fit being the case of one fold. The Lightning classes are in :mod:`mogg.routing.networks.lightning_module`,
imported by a fit only (evaluation never pays Lightning's import). Cross-fitting and the final fit on all questions are in
:mod:`mogg.routing.fitting.kfold`.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mogg.core.preemption import Preempted, deferred
from mogg.core.threads import single_threaded
from mogg.routing.networks.mlp import RouterMLP, warn_flat

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
    requeue: str = "none"  # who owns a SLURM time limit's warning signal: "submitit" (USR2) | "job" (USR1) | "none"


class FitError(FloatingPointError):
    """One router of a (stacked) fit diverged; ``index`` says which (its position in the fit)."""

    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index = index


def fit_routers(
    x: np.ndarray,
    targets: Sequence[np.ndarray],
    train: Sequence[np.ndarray],
    val: Sequence[np.ndarray],
    seeds: Sequence[int],
    module_kwargs: dict,
    trainer: TrainerConfig,
    ckpt_dir: Path | None = None,
    logger=False,
    names: Sequence[str] | None = None,
) -> list[tuple[RouterMLP, dict]]:
    """Train ``F = len(train)`` routers as one stacked model (:mod:`mogg.routing.networks.stacked`).
    ``names``: a name per input column (the constant-column warning says which inputs).

    Router k fits rows ``train[k]`` of ``x`` [N, D] to ``targets[k]`` [N, L], early-stops on rows
    ``val[k]`` and is seeded by ``seeds[k]``: the result is the one :func:`fit_router` gives it
    alone, to float rounding. Returns each router at its best validation loss (its last weights
    without validation rows) and a summary (``epochs``, ``best_val_loss``).
    """
    # Lightning (with torchmetrics, transformers, sympy) takes seconds to import: only a fit needs it
    import lightning as L
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from mogg.routing.networks.lightning_module import EpochTicks, StackedRouterModule

    f = len(train)
    if not (f == len(targets) == len(val) == len(seeds)) or f < 1:
        raise ValueError(f"one target, train, val and seed per router: got {len(targets)}, {f}, {len(val)}, {len(seeds)}")
    mk = {k: v for k, v in module_kwargs.items() if k in ("hidden", "dropout")}
    x_t = torch.as_tensor(x, dtype=torch.float32)
    routers, flat = [], []
    for k in range(f):  # each fold's own initialisation (under its seed) and standardisation
        torch.manual_seed(seeds[k])
        r = RouterMLP(x.shape[1], targets[k].shape[1], **mk)
        flat.append(r.set_normalization(x_t[torch.as_tensor(np.asarray(train[k], dtype=np.int64))], warn=False))
        routers.append(r)
    flat = torch.stack(flat)  # [F, D]: one warning for the fit, not one per fold and committee member
    warn_flat(flat.any(0), int(flat.any(1).sum()), f, names)
    L.seed_everything(seeds[0], workers=True, verbose=False)
    module = StackedRouterModule(routers, x, np.stack(targets), train, val, seeds, batch_size=trainer.batch_size,
                                 patience=trainer.patience, objective=module_kwargs["objective"],
                                 lr=module_kwargs["lr"], weight_decay=module_kwargs["weight_decay"])
    t, resume = lightning_trainer(trainer, trainer.max_epochs, ckpt_dir, logger)
    # few-thousand-parameter MLPs: threads only add synchronisation (and spin under contention); a SLURM
    # SIGTERM stops the fit at its next epoch's end, after that epoch's checkpoint (mogg.core.preemption)
    with single_threaded(), lightning_noise_off(resuming=resume is not None), deferred("the router fit stops at its next epoch's end"):
        t0 = time.perf_counter()
        try:
            t.fit(module, EpochTicks(), ckpt_path=resume)
        except SIGTERMException:  # Lightning's SystemExit(None) would read as a success: no result, exit 143
            log.warning("router fit stopped by SIGTERM after epoch %d (%s); exiting without a result",
                        t.current_epoch - 1, f"last.ckpt in {ckpt_dir}" if trainer.checkpoint_every > 0 else
                        "no checkpoint: trainer.checkpoint_every=0, a rerun starts the fit over")
            raise Preempted(f"router fit at epoch {t.current_epoch}") from None
    log.info("trained %d router(s) as one model: %d epochs in %.2f s", f, t.current_epoch, time.perf_counter() - t0)
    out = []
    best = {name: getattr(module, f"best_{name}") for name, _ in module.net.named_parameters()}
    for k, r in enumerate(routers):
        has_val = len(val[k]) > 0
        summary = {"epochs": int(module.stop_epoch[k]) if module.stopped[k] else int(t.current_epoch)}
        if has_val and not math.isfinite(float(module.best_loss[k])):
            raise FitError(k, f"the validation loss was never finite (last training loss {float(module.train_loss[k])}); "
                              f"lower router.lr (now {module_kwargs.get('lr')}) or check the router inputs")
        if has_val:
            module.net.copy_into(k, r, best)
            summary["best_val_loss"] = float(module.best_loss[k])
        else:
            if not math.isfinite(float(module.train_loss[k])):
                raise FitError(k, f"the training loss is {float(module.train_loss[k])}; lower router.lr "
                                  f"(now {module_kwargs.get('lr')})")
            module.net.copy_into(k, r)
        bad = [n for n, v in r.state_dict().items() if not torch.isfinite(v).all()]
        if bad:
            raise FitError(k, f"non-finite router weights after training ({', '.join(bad)})")
        out.append((r.eval(), summary))
    return out


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
    n_val = 0 if x_val is None else len(x_val)
    x = x_train if not n_val else np.concatenate([x_train, x_val])
    y = y_train if not n_val else np.concatenate([y_train, y_val])
    rows = np.arange(len(x_train)), np.arange(len(x_train), len(x_train) + n_val)
    return fit_routers(x, [y], [rows[0]], [rows[1]], [seed], module_kwargs, trainer, ckpt_dir, logger)[0]


@contextmanager
def lightning_noise_off(resuming: bool = False) -> Iterator[None]:
    """Lightning's known-harmless warnings off, by message and category, while a ``Trainer`` is built and fits
    (around each call, not globally: a warning anyone else raises still shows), so that a warning in
    a run or a test run means something (issue 61: 174 a test run, nearly all of them these):

    - "The `srun` command is available on your system but is not used": Lightning's SLURM detection,
      twice a fit (the ``Trainer`` and ``fit``'s checkpoint path) wherever ``srun`` is installed. It
      warns of multi-process jobs hanging without ``srun``; every mogg fit is one process on one
      device (``devices=1``), so there is nothing to launch with ``srun``.
    - "LeafSpec": Lightning's own use of a deprecated torch pytree API, on every fit.
    - ``resuming``: "Checkpoint directory ... exists and is not empty": it holds the ``last.ckpt``
      the fit resumes from (a fresh fit still gets the warning).
    """
    from lightning.fabric.utilities.warnings import PossibleUserWarning  # the srun warning's own class

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"The `srun` command is available on your system but is not used",
                                category=PossibleUserWarning)
        warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)  # torch's @deprecated
        if resuming:
            warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty", category=UserWarning)
        yield


def lightning_trainer(trainer: TrainerConfig, max_epochs: int, ckpt_dir: Path | None, logger=False):
    """A Lightning ``Trainer`` for one router fit and the checkpoint to resume from (None: a fresh
    fit): checkpoints every ``trainer.checkpoint_every`` epochs in ``ckpt_dir``, SLURM requeue per
    ``trainer.requeue``, no progress bar or model summary."""
    import lightning as L

    # Lightning announces devices and tips at INFO on every fit: noise for 5-fold x sweeps.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    last = Path(ckpt_dir) / "last.ckpt" if ckpt_dir else None
    resume = str(last) if (trainer.checkpoint_every > 0 and last is not None and last.is_file()) else None
    callbacks: list = []
    if trainer.checkpoint_every > 0:
        from lightning.pytorch.callbacks import ModelCheckpoint

        callbacks.append(ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=1, every_n_epochs=trainer.checkpoint_every))
    if resume:
        from mogg.routing.networks.lightning_module import ResumedAt

        callbacks.append(ResumedAt(resume))
    with lightning_noise_off():  # Lightning's SLURM check warns here (and again in fit)
        t = L.Trainer(
            max_epochs=max_epochs,
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
            # a step is an epoch (the module batches inside it), and the losses are logged at each epoch's
            # end: Lightning's default interval of 50 steps warned of fits shorter than 50 epochs
            log_every_n_steps=1,
            plugins=_requeue_plugins(trainer.requeue),
        )
    return t, resume


def end_run(logger) -> None:
    """Close an experiment logger's run once the fit it logged is over (a wandb run: finalised and
    finished; a run never started is left alone). Left open, the next ``WandbLogger`` of the process
    (the next ladder's folds, the evaluation of ``evaluate_after=true``) joined it instead of starting
    its own, under the first run's name and id (wandb warned: "a wandb run already in progress")."""
    if not logger:
        return
    if hasattr(logger, "finalize"):
        logger.finalize("success")
    run = getattr(logger, "_experiment", None)  # not .experiment: that would start a run to close it
    if run is not None and hasattr(run, "finish"):
        run.finish()


REQUEUE = ("none", "submitit", "job")


def check_requeue(requeue: str) -> None:
    """``trainer.requeue`` names one owner of a SLURM time limit's warning signal: submitit (USR2)
    or the job itself (USR1, :func:`mogg.core.preemption.requeue_on_usr1`), or none; never Lightning
    (its auto-requeue checkpoints inside the signal handler: :mod:`mogg.core.preemption`)."""
    if requeue == "lightning":
        raise ValueError("trainer.requeue=lightning: Lightning's auto-requeue saves a checkpoint inside its signal "
                         "handler, which can break the epoch's own checkpoint; use trainer.requeue=job (the job "
                         "requeues itself on USR1, as slurm/train.sbatch does)")
    if requeue not in REQUEUE:
        raise ValueError(f"trainer.requeue must be {'|'.join(REQUEUE)}, got {requeue!r}")


def _requeue_plugins(requeue: str) -> list:
    """Lightning's SLURM environment without its auto-requeue (the owner is submitit or the job)."""
    check_requeue(requeue)
    if requeue == "none":
        return []
    from lightning.pytorch.plugins.environments import SLURMEnvironment

    return [SLURMEnvironment(auto_requeue=False)]
