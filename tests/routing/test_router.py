import numpy as np
import pytest
import torch

from mogg.routing.fitting.folds import make_folds, split_train_val
from mogg.routing.inputs.features import parse_groups, score_features
from mogg.routing.inputs.labels import soft_labels
from mogg.routing.networks.training import TrainerConfig, fit_router
from mogg.search import Hits


def _data(n=240, d=6, seed=0):
    # the best level is a deterministic function of the first two features
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    best = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0).astype(int)  # 4 levels
    scores = np.eye(4)[best] + 0.01 * rng.random((n, 4))
    return x, soft_labels(scores)


def test_router_learns_and_is_deterministic(tmp_path):
    x, y = _data()
    tc = TrainerConfig(max_epochs=150, batch_size=64, patience=0)
    kw = {"hidden": 16, "dropout": 0.0, "lr": 1e-2, "weight_decay": 0.0, "objective": "bce"}
    r1, _ = fit_router(x[:200], y[:200], x[200:], y[200:], kw, tc, seed=3, ckpt_dir=tmp_path / "a")
    r2, _ = fit_router(x[:200], y[:200], x[200:], y[200:], kw, tc, seed=3, ckpt_dir=tmp_path / "b")
    w1, w2 = r1.weights(x[200:]), r2.weights(x[200:])
    assert np.allclose(w1, w2)  # same seed, same router
    assert (w1.argmax(1) == y[200:].argmax(1)).mean() > 0.8  # held-out accuracy of the learnable rule


def test_early_stopping_restores_best(tmp_path):
    x, y = _data(n=120)
    r, summary = fit_router(x[:100], y[:100], x[100:], y[100:], {"hidden": 64, "dropout": 0.0, "lr": 1e-2, "weight_decay": 0.0, "objective": "bce"},
                            TrainerConfig(max_epochs=400, batch_size=100, patience=10), seed=0, ckpt_dir=tmp_path)
    assert summary["epochs"] < 399 and "best_val_loss" in summary
    loss = torch.nn.functional.binary_cross_entropy(torch.as_tensor(r.weights(x[100:])), torch.as_tensor(y[100:]))
    assert float(loss) == pytest.approx(summary["best_val_loss"], rel=1e-4)


def test_folds_and_splits():
    f = make_folds(103, 5, seed=1)
    assert np.bincount(f).tolist() == [21, 21, 21, 20, 20]
    assert np.array_equal(f, make_folds(103, 5, seed=1)) and not np.array_equal(f, make_folds(103, 5, seed=2))
    tr, va = split_train_val(np.flatnonzero(f != 0), 0.2, seed=0)
    assert not set(tr) & set(va) and len(tr) + len(va) == (f != 0).sum()
    with pytest.raises(ValueError):
        make_folds(10, 1, 0)


def test_retrieval_features_scale_free():
    ids = np.array([[[0, 1], [2, -1]]])
    sc = np.array([[[4.0, 2.0], [8.0, -np.inf]]], dtype=np.float32)
    f = score_features(Hits(ids, sc))
    assert np.allclose(f[0, :4], [0.5, 0.25, 1.0, 0.0])
    f2 = score_features(Hits(ids, sc * 3))
    assert np.allclose(f[0, :4], f2[0, :4])


def test_input_groups_and_aliases():
    assert parse_groups("retrieval") == ("scores", "agreement")
    assert parse_groups("retrieval+lengths") == ("scores", "agreement", "lengths")
    assert parse_groups(["query+retrieval", "scores"]) == ("query", "scores", "agreement")
    with pytest.raises(ValueError, match="unknown router input 'lenghts'"):
        parse_groups("retrieval+lenghts")


def test_a_logged_fit_warns_nothing_and_its_run_ends_with_it(tmp_path, monkeypatch):
    """Issue 61's last warnings: a fit with a logger warned that its epochs were fewer than Lightning's
    logging interval (a step is an epoch here), and the next WandbLogger of the process (the next
    ladder's folds, evaluate_after=true's evaluation) joined the folds' run ("a wandb run already in
    progress"), logging under its name: the cross-fit now ends its run (routing.fitting.kfold.crossfit)."""
    import warnings

    from lightning.pytorch.loggers import WandbLogger

    from mogg.routing.networks.training import end_run

    monkeypatch.setenv("WANDB_SILENT", "true")
    x, y = _data(n=60)
    kw = {"hidden": 8, "dropout": 0.0, "lr": 1e-2, "weight_decay": 0.0, "objective": "bce"}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = WandbLogger(project="mogg-test", name="folds", id="folds-1", offline=True, save_dir=str(tmp_path))
        fit_router(x[:50], y[:50], x[50:], y[50:], kw, TrainerConfig(max_epochs=2, batch_size=32), seed=0,
                   logger=first)
        end_run(first)
        second = WandbLogger(project="mogg-test", name="evaluate", id="evaluate-1", offline=True, save_dir=str(tmp_path))
        assert second.experiment.id == "evaluate-1"  # its own run, not the folds' one
        end_run(second)
    assert [f"{w.category.__name__}: {w.message}" for w in seen] == []
    end_run(WandbLogger(project="mogg-test", offline=True, save_dir=str(tmp_path)))  # never started: nothing to end


def test_a_fit_raises_no_known_harmless_lightning_warning(tmp_path, monkeypatch):
    """Issue 61: 174 warnings a test run, nearly all Lightning's "`srun` ... not used" (twice a fit
    wherever SLURM's srun is installed). A fit now raises none (a stand-in srun on PATH here), and a
    warning raised outside a fit still shows: they are silenced where Lightning raises them."""
    import os
    import warnings

    srun = tmp_path / "bin" / "srun"
    srun.parent.mkdir()
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{srun.parent}{os.pathsep}{os.environ['PATH']}")
    x, y = _data(n=60)
    kw = {"hidden": 8, "dropout": 0.0, "lr": 1e-2, "weight_decay": 0.0, "objective": "bce"}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fit_router(x[:50], y[:50], x[50:], y[50:], kw, TrainerConfig(max_epochs=2, batch_size=32), seed=0,
                   ckpt_dir=tmp_path / "ckpt")
        warnings.warn("The `srun` command is available on your system but is not used (a test's own)", UserWarning,
                      stacklevel=1)
    assert [str(w.message) for w in seen] == ["The `srun` command is available on your system but is not used "
                                              "(a test's own)"]
