"""SLURM's SIGTERM ends a job at once and without a result; the requeued job resumes.

SLURM sends SIGTERM when it requeues a job (``scontrol requeue``, preemption with
``PreemptMode=REQUEUE``, a node failure) or cancels it (``scancel``), and SIGKILL ``KillWait``
seconds later (30 s by default). submitit's job wrapper ignores SIGTERM ("Bypassing signal
SIGTERM"): a task that kept running was killed with nothing saved, and one that finished inside
the grace period wrote its result, so the sweep returned, and SLURM ran it again afterwards.

Inside a SLURM job (``SLURM_JOB_ID`` set), :func:`sigterm_ends_job` makes SIGTERM raise
:class:`Preempted`: the job stops where it is, the atomic writers remove their staging folders,
and no result is written (``Preempted`` is a ``SystemExit``, which neither Hydra nor submitit
records as one), so a sweep waits for the requeued run, and a cancelled task shows as CANCELLED.
Nothing is lost: every artifact is published whole or not at all (a requeued shard task skips
finished shards), and a router fit checkpoints at every epoch's end (``trainer.checkpoint_every``).
A Lightning fit stops at its next epoch's end instead (:func:`deferred`; Lightning's own
SIGTERM handler raises there), so its ``last.ckpt`` is never cut mid-write.

A time limit has one owner of its warning signal (``trainer.requeue``), never two: submitit's USR2
with the launcher (``submitit``), or the job itself with ``slurm/train.sbatch`` (``job``:
:func:`requeue_on_usr1` asks SLURM to requeue the job, whose SIGTERM then stops it as above).
Lightning's own auto-requeue is not used: it saves a checkpoint from inside its USR1 handler, which
can land inside the epoch's own ``last.ckpt`` save and fail the job (an AttributeError in fsspec's
nested transaction, seen on the local cluster); the per-epoch checkpoint already holds the fit.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

EXIT_STATUS = 128 + signal.SIGTERM  # what a shell reports for a process ended by SIGTERM


class Preempted(SystemExit):
    """A SLURM job stopped by SIGTERM (requeue, preemption or cancel): exit without a result."""

    def __init__(self, what: str):
        super().__init__(EXIT_STATUS)
        self.what = what

    def __str__(self) -> str:
        return f"stopped by SIGTERM ({self.what})"


_deferring: list[str] = []  # what will stop on its own (innermost last); empty: stop at once
_received: list[bool] = [False]  # a SIGTERM arrived while deferred


def _job() -> str:
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if job:
        return f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID', '?')}"
    return os.environ.get("SLURM_JOB_ID", "?")


def _on_sigterm(signum, frame) -> None:
    if _deferring:
        _received[0] = True
        log.warning("SIGTERM (SLURM job %s: requeue, preemption or cancel): %s", _job(), _deferring[-1])
        return
    log.warning("SIGTERM (SLURM job %s: requeue, preemption or cancel): stopping now, without a result; a requeued "
                "run resumes (finished artifacts are reused, a fit resumes from its last.ckpt)", _job())
    raise Preempted(f"SLURM job {_job()}")


@contextmanager
def sigterm_ends_job() -> Iterator[None]:
    """Inside a SLURM job, SIGTERM raises :class:`Preempted` for the block (the handler before it is
    restored after); elsewhere, or off the main thread, nothing changes."""
    if not os.environ.get("SLURM_JOB_ID") or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextmanager
def deferred(how: str) -> Iterator[None]:
    """While the block runs, SIGTERM is left to code that stops on its own at a safe point (``how``
    says where, for the log): a Lightning fit raises at its next epoch's end, after the checkpoint.
    A block that ends normally after a SIGTERM (a fit in its last epoch) raises :class:`Preempted`
    on leaving: the job must not go on to write a result SLURM is about to run again."""
    _deferring.append(how)
    try:
        yield
    finally:
        _deferring.pop()
        received = _received[0]
        _received[0] = received and bool(_deferring)  # an outer deferred block still owes the exit
    if received and not _deferring:
        raise Preempted(f"SLURM job {_job()}")


def _requeue(signum, frame) -> None:
    job = _job()
    log.warning("%s: asking SLURM to requeue job %s (its SIGTERM then stops the job at the next safe point)",
                signal.Signals(signum).name, job)
    try:
        res = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.error("scontrol requeue %s failed (%s): the job runs on until SLURM stops it", job, e)
        return
    if res.returncode:
        log.error("scontrol requeue %s failed (%s): the job runs on until SLURM stops it", job,
                  (res.stderr or res.stdout).strip())


@contextmanager
def requeue_on_usr1(enabled: bool) -> Iterator[None]:
    """With ``enabled``, inside a SLURM job: SIGUSR1 (``sbatch --signal=SIGUSR1@90``: 90 s before the
    time limit) requeues the job for the block (``scontrol requeue``; SLURM's SIGTERM follows and
    :func:`sigterm_ends_job` stops the job). Otherwise nothing changes."""
    if not enabled or not os.environ.get("SLURM_JOB_ID") or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGUSR1, _requeue)
    try:
        yield
    finally:
        signal.signal(signal.SIGUSR1, before)
