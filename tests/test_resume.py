"""Preemption: kill router training with a real signal, resume from last.ckpt, same result."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from mogg.routing.training import TrainerConfig, fit_router

SCRIPT = textwrap.dedent("""
    import sys, time, numpy as np, lightning as L
    from pathlib import Path
    from mogg.routing import training as T
    from mogg.routing import lightning_module as LM
    def stall(self, trainer, module):  # at epoch 37, signal the test and wait to be killed
        if trainer.current_epoch == 37:
            Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
            (Path(sys.argv[1]) / "STALLED").write_text(str(sorted(p.name for p in Path(sys.argv[1]).iterdir())))
            time.sleep(120)
    LM.EpochSeed.on_train_epoch_end = stall
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 8)).astype(np.float32); y = (rng.random((120, 4)) > 0.5) * 0.8
    T.fit_router(x[:100], y[:100], x[100:], y[100:], {"hidden": 16, "dropout": 0.3, "lr": 1e-2, "weight_decay": 1e-4, "objective": "bce"},
                 T.TrainerConfig(max_epochs=200, batch_size=32, patience=0, checkpoint_every=1), seed=7, ckpt_dir=Path(sys.argv[1]))
""")


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 8)).astype(np.float32)
    y = (rng.random((120, 4)) > 0.5) * 0.8
    return x, y


KW = {"hidden": 16, "dropout": 0.3, "lr": 1e-2, "weight_decay": 1e-4, "objective": "bce"}
TC = TrainerConfig(max_epochs=200, batch_size=32, patience=0, checkpoint_every=1)


def test_kill_and_resume_matches_uninterrupted(tmp_path):
    x, y = _data()
    ref, ref_sum = fit_router(x[:100], y[:100], x[100:], y[100:], KW, TC, seed=7, ckpt_dir=tmp_path / "ref")

    ck = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(ck)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not (ck / "STALLED").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, "training finished before it could be killed: " + proc.stderr.read().decode()[-2000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (ck / "last.ckpt").exists()

    import torch
    killed_epoch = torch.load(ck / "last.ckpt", map_location="cpu", weights_only=True)["epoch"]
    assert 30 <= killed_epoch <= 38, (killed_epoch, (ck / "STALLED").read_text())  # last.ckpt is from mid-run

    resumed, res_sum = fit_router(x[:100], y[:100], x[100:], y[100:], KW, TC, seed=7, ckpt_dir=ck)
    assert res_sum["epochs"] == ref_sum["epochs"]
    assert res_sum["best_val_loss"] == pytest.approx(ref_sum["best_val_loss"], rel=1e-6)
    assert np.allclose(resumed.weights(x), ref.weights(x), atol=1e-6)
