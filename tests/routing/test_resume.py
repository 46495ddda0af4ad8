"""Preemption: kill router training with a real signal, resume from last.ckpt, same result."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from folders import PATH

from mogg.routing.networks.training import TrainerConfig, fit_routers

SCRIPT = textwrap.dedent("""
    import sys, time, numpy as np, lightning as L
    from pathlib import Path
    from mogg.routing.networks import training as T
    from mogg.routing.networks import lightning_module as LM
    epoch_end = LM.StackedRouterModule.on_train_epoch_end
    def stall(self):  # at the end of epoch 37, signal the test and wait to be killed
        epoch_end(self)
        if self.current_epoch == 37:
            Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
            (Path(sys.argv[1]) / "STALLED").write_text(str(sorted(p.name for p in Path(sys.argv[1]).iterdir())))
            time.sleep(120)
    LM.StackedRouterModule.on_train_epoch_end = stall
    from test_resume import FITS, KW, TC, data
    x, ys = data()
    T.fit_routers(x, ys, *FITS, KW, TC, ckpt_dir=Path(sys.argv[1]))
""")


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(150, 8)).astype(np.float32)
    signal = (np.eye(4)[(x[:, 0] > 0) + 2 * (x[:, 1] > 0)] * 0.8).astype(np.float32)
    noise = ((rng.random((150, 4)) > 0.5) * 0.8).astype(np.float32)
    return x, [signal, noise]


# two folds trained as one model: fold 1 (noise) stops early, fold 0 goes on past the kill
FITS = ([np.arange(0, 100), np.arange(30, 130)], [np.arange(100, 150), np.r_[0:30, 130:150]], [7, 8])
KW = {"hidden": 16, "dropout": 0.3, "lr": 1e-2, "weight_decay": 1e-4, "objective": "bce"}
TC = TrainerConfig(max_epochs=200, batch_size=32, patience=25, checkpoint_every=1)


def test_kill_and_resume_matches_uninterrupted(tmp_path):
    x, ys = data()
    ref = fit_routers(x, ys, *FITS, KW, TC, ckpt_dir=tmp_path / "ref")
    assert ref[1][1]["epochs"] < 37 < ref[0][1]["epochs"]  # the kill falls between the two folds' stops

    ck = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*PATH, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(ck)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
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

    resumed = fit_routers(x, ys, *FITS, KW, TC, ckpt_dir=ck)
    for (r_ref, s_ref), (r_res, s_res) in zip(ref, resumed):
        assert s_res["epochs"] == s_ref["epochs"]
        assert s_res["best_val_loss"] == pytest.approx(s_ref["best_val_loss"], rel=1e-6)
        assert np.allclose(r_res.weights(x), r_ref.weights(x), atol=1e-6)
