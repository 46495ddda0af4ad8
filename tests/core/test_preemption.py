"""SLURM's SIGTERM (requeue, preemption, cancel) ends a job at once and without a result; a router
fit stops at its next epoch's end, after that epoch's checkpoint, and the requeued fit resumes from
``last.ckpt`` to the uninterrupted result (issue 60). Against a real scheduler: tests/cli/test_cluster.py."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from folders import PATH
from test_resume import FITS, KW, TC, data

from mogg.core.preemption import EXIT_STATUS, Preempted, deferred, sigterm_ends_job
from mogg.routing.networks.training import fit_routers

main_thread_only = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                      reason="signal handlers are set on the main thread only")


def test_outside_slurm_sigterm_keeps_its_handler(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_ends_job():
        assert signal.getsignal(signal.SIGTERM) is before


@main_thread_only
def test_in_a_slurm_job_sigterm_raises_and_the_handler_is_restored(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Preempted) as err, sigterm_ends_job():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here
    assert err.value.code == EXIT_STATUS and "SLURM job 7" in str(err.value)
    assert signal.getsignal(signal.SIGTERM) is before


@main_thread_only
def test_a_deferred_block_that_finishes_after_sigterm_still_ends_the_job(monkeypatch):
    """A fit in its last epoch when SIGTERM comes ends normally: the job must not go on to write a
    result that SLURM is about to run again."""
    monkeypatch.setenv("SLURM_JOB_ID", "8")
    done = []
    with pytest.raises(Preempted), sigterm_ends_job():
        with deferred("the block stops on its own"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            done.append("the block ran to its end")
        done.append("after the block")
    assert done == ["the block ran to its end"]


FIT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from mogg.core.runconfig import cli_errors
    from mogg.routing.networks import lightning_module as LM
    from mogg.routing.networks import training as T
    epoch_end = LM.StackedRouterModule.on_train_epoch_end
    def stall(self):  # at the end of epoch 37, signal the test and wait for its SIGTERM
        epoch_end(self)
        if self.current_epoch == 37:
            (Path(sys.argv[1]) / "STALLED").write_text("")
            while not self.trainer.received_sigterm:
                time.sleep(0.05)
    LM.StackedRouterModule.on_train_epoch_end = stall
    from test_resume import FITS, KW, TC, data
    x, ys = data()
    with cli_errors("train.py"):
        T.fit_routers(x, ys, *FITS, KW, TC, ckpt_dir=Path(sys.argv[1]))
    print("FINISHED")
""")


def test_sigterm_mid_fit_checkpoints_the_epoch_and_the_requeued_fit_resumes(tmp_path, caplog):
    x, ys = data()
    ref = fit_routers(x, ys, *FITS, KW, TC, ckpt_dir=tmp_path / "ref")
    ck = tmp_path / "run"
    ck.mkdir()
    env = {**os.environ, "SLURM_JOB_ID": "9",
           "PYTHONPATH": os.pathsep.join([*PATH, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", FIT, str(ck)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, text=True)
    deadline = time.time() + 120
    while not (ck / "STALLED").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, "the fit ended before its SIGTERM: " + proc.stdout.read()[-2000:]
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == EXIT_STATUS and "FINISHED" not in out, out[-2000:]
    assert "SIGTERM (SLURM job 9" in out and "stops at its next epoch's end" in out

    import torch
    assert torch.load(ck / "last.ckpt", map_location="cpu", weights_only=True)["epoch"] == 37  # the epoch it stopped in
    with caplog.at_level("INFO", logger="mogg.routing.networks.lightning_module"):
        resumed = fit_routers(x, ys, *FITS, KW, TC, ckpt_dir=ck)
    assert f"resumed router training from {ck / 'last.ckpt'} at epoch 38 of {TC.max_epochs}" in caplog.text
    for (r_ref, s_ref), (r_res, s_res) in zip(ref, resumed):
        assert s_res["epochs"] == s_ref["epochs"]
        assert s_res["best_val_loss"] == pytest.approx(s_ref["best_val_loss"], rel=1e-6)
        assert np.allclose(r_res.weights(x), r_ref.weights(x), atol=1e-6)


def test_trainer_requeue_lightning_is_refused_with_its_reason():
    from mogg.routing.networks.training import check_requeue

    for ok in ("none", "submitit", "job"):
        check_requeue(ok)
    with pytest.raises(ValueError, match="inside its signal handler.*trainer.requeue=job"):
        check_requeue("lightning")


@main_thread_only
def test_usr1_requeues_the_job_when_the_job_owns_the_signal(monkeypatch):
    from mogg.core import preemption

    calls = []
    monkeypatch.setattr(preemption.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, "", ""))
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "40")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    before = signal.getsignal(signal.SIGUSR1)
    with preemption.requeue_on_usr1(False):
        assert signal.getsignal(signal.SIGUSR1) is before
    with preemption.requeue_on_usr1(True):
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.05)
    assert calls == [["scontrol", "requeue", "40_3"]] and signal.getsignal(signal.SIGUSR1) is before
