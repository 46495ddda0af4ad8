"""A SLURM sweep that reports a failed array task when it fails, not after the others.

``hydra/launcher=slurm`` (``conf/hydra/launcher/slurm.yaml``; the Hydra plugin is
``hydra_plugins.mogg_slurm_launcher``, Hydra finds launchers only there) submits a sweep as one
job array through submitit, as hydra-submitit-launcher does, but waits for its tasks together: hydra-submitit
reads the results in task order, so task 7 failing in its first minute was reported only once
tasks 0-6 had finished, hours later in a large build. Here every task that fails (an error, a
crash, a time limit, ``scancel``) is logged at ERROR as soon as its result or ``sacct`` says so,
with its index, overrides, state and log file; the other tasks run on (their results are
artifacts, checkpoints and reports that a rerun reuses), and the sweep then fails naming every
failed task. A task requeued by SLURM (preemption, ``scontrol requeue``) is not a failure: it is
waited for until its rerun finishes (:mod:`mogg.core.preemption`).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

log = logging.getLogger(__name__)

POLL_S = 10.0  # one sacct call for the whole array this often (submitit's own refresh slows to minutes)
_EXECUTOR_KEYS = ("submitit_folder", "max_num_timeout")  # the executor's own arguments, not sbatch's


class SweepTasksFailed(RuntimeError):
    """Tasks of a SLURM sweep that failed, were cancelled or killed (each was logged when it did)."""


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
    """``launcher.launch`` (a hydra-submitit ``SlurmLauncher``, set up by Hydra): one array task per job
    of the sweep, submitted as hydra-submitit submits them, then :func:`wait` for them all."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    assert launcher.config is not None and job_overrides
    params = launcher.params
    executor = submitit.AutoExecutor(folder=params["submitit_folder"], cluster="slurm",
                                     slurm_max_num_timeout=params.get("max_num_timeout", 0))
    generic = set(OmegaConf.structured(BaseQueueConf).keys())  # the executor's unprefixed parameters
    executor.update_parameters(**{k if k in generic else f"slurm_{k}": v for k, v in params.items()
                                  if k not in _EXECUTOR_KEYS})
    sweep = launcher.config.hydra.sweep
    sweep_dir = Path(str(sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if "mode" in sweep:
        os.chmod(sweep_dir, mode=int(str(sweep.mode), 8))
    numbered = [(initial_job_idx + i, list(o)) for i, o in enumerate(job_overrides)]
    log.info("SLURM sweep of %d jobs, output dir %s", len(numbered), sweep_dir)
    for idx, overrides in numbered:
        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
    n, state = len(numbered), Singleton.get_state()
    # the arguments of the launcher's __call__, one list per argument: what each task runs
    jobs = executor.map_array(launcher, [o for _, o in numbered], ["hydra.sweep.dir"] * n, [i for i, _ in numbered],
                              [f"job_id_for_{i}" for i, _ in numbered], [state] * n)
    log.info("submitted job array %s (logs in %s)", jobs[0].job_id.split("_")[0], jobs[0].paths.folder.parent)
    return wait(jobs, numbered)


def _describe(job: Any, idx: int, overrides: list[str]) -> str:
    return f"#{idx} ({' '.join(filter_overrides(overrides))}), SLURM job {job.job_id}"


def _last_error(path: Path) -> str:
    """The last line a task wrote to stderr that is not SLURM's own (the entry points end a failed
    run with one line: ``build.py: ValueError: ...``)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    ours = [ln.strip() for ln in lines if ln.strip() and not ln.startswith(("srun:", "slurmstepd"))]
    return ours[-1] if ours else "nothing on stderr"


def _outcome(job: Any) -> tuple[Any, str | None]:
    """(the task's Hydra ``JobReturn`` or None, why it failed or None) for a finished task."""
    if not job.paths.result_pickle.exists() and job.state.split()[0].upper() != "COMPLETED":
        # killed, cancelled, out of time or memory, or a SystemExit (mogg's one-line errors): no result;
        # submitit's results() would wait 15 s for a result file that will not come
        return None, f"{job.state}: {_last_error(job.paths.stderr)}"
    try:
        ret = job.results()[0]
    except Exception as e:  # a result file that says error, or none after all
        return None, f"{job.state}: {str(e).strip().splitlines()[0]}"
    if ret.status == JobStatus.FAILED:  # the task raised; Hydra recorded the error as its result
        return ret, f"{type(ret._return_value).__name__}: {ret._return_value}"
    return ret, None


def wait(jobs: Sequence[Any], numbered: Sequence[tuple[int, list[str]]], poll_s: float = POLL_S) -> list[JobReturn]:
    """Wait for submitit ``jobs`` (task ``numbered[i]`` = (index, overrides) is ``jobs[i]``); log each
    failure when it happens; return the tasks' results, or, once all are done, write one line naming
    every failed task and exit with status 1 (as a failed command does; Hydra would add a traceback)."""
    results: list[Any] = [None] * len(jobs)
    failed: list[str] = []
    pending = set(range(len(jobs)))
    last_poll = 0.0
    while pending:
        if time.monotonic() - last_poll >= poll_s:
            jobs[0].watcher.update()  # one sacct call for every task of the array
            last_poll = time.monotonic()
        for i in sorted(pending):
            job = jobs[i]
            if not job.done():
                continue
            pending.discard(i)
            what = _describe(job, *numbered[i])
            results[i], why = _outcome(job)
            if why is None:
                log.info("task %s done (%d of %d still running or queued)", what, len(pending), len(jobs))
                continue
            failed.append(f"{what}: {why}")
            log.error("task %s failed: %s (log %s); %d of %d tasks still running or queued", what, why,
                      job.paths.stderr, len(pending), len(jobs))
        if pending:
            time.sleep(min(1.0, poll_s))
    if failed:
        sys.stderr.write(f"{SweepTasksFailed(f'{len(failed)} of {len(jobs)} tasks failed: ' + '; '.join(failed))}\n")
        raise SystemExit(1)
    return results
