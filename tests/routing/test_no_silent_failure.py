"""Issue 24, item 1: a router whose outputs are not finite is an error, never a silent report.

Each test failed before the fix: a 1e30 learning rate exited 0 with a `mog_router 0.000` row,
a zero spread or overflowing weights routed NaN weights, a constant feature was scaled by 1e6.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from conftest import ROOT
from test_router_model import SETTINGS, TC, _spec, _toy

from mogg.core.artifacts import ArtifactError
from mogg.routing.fitting.kfold import RouterTrainingError, train_router
from mogg.routing.networks.mlp import RouterMLP
from mogg.routing.router_dir import TrainedRouter

# Runs train.py with the router's loss turned to NaN (a model that diverged): fault injection.
DIVERGE = textwrap.dedent("""
    import runpy, sys
    from mogg.routing.inputs import objectives
    real = objectives.row_loss
    objectives.row_loss = lambda *a, **k: real(*a, **k) * float("nan")
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")


def test_train_cli_with_a_diverging_router_fails_naming_fold_and_directory(tmp_path):
    cmd = [sys.executable, "-c", DIVERGE, str(ROOT / "train.py"), "experiment=generic_example",
           f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}", f"paths.reports={tmp_path / 'r'}",
           f"paths.outputs={tmp_path / 'o'}", f"questions.path={ROOT / 'examples/generic/questions.jsonl'}",
           f"corpus.sources.0.paths={ROOT / 'examples/generic/corpus.jsonl'}", "trainer.max_epochs=20",
           "router.fit=both", "evaluate_after=true"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "RouterTrainingError: router fold 0" in p.stderr and str(tmp_path / "c") in p.stderr
    assert "never finite" in p.stderr and "router.lr" in p.stderr
    assert not (tmp_path / "r").exists()  # no report with a 0.000 router row


def test_non_finite_training_is_an_error():
    x, labels, u, qs = _toy()
    bad = type(SETTINGS)(**SETTINGS.__dict__)
    bad.lr = 1e30  # past the knob's validation (issue 24 item 7): a router that diverges
    with pytest.raises(FloatingPointError, match="never finite"):
        train_router(x, labels, u, qs, np.arange(120), np.arange(120, 140), bad, TC, 3, _spec())
    x = x.copy()
    x[5, 2] = np.nan
    with pytest.raises(FloatingPointError, match="NaN or inf"):
        train_router(x, labels, u, qs, np.arange(120), np.arange(120, 140), SETTINGS, TC, 3, _spec())
    assert issubclass(RouterTrainingError, RuntimeError)


def test_constant_feature_gets_unit_spread_not_a_millionfold_scale(caplog):
    m = RouterMLP(3, 2, hidden=4, dropout=0.0)
    x = torch.tensor([[1.0, 5.0, 0.0], [2.0, 5.0, 1.0], [3.0, 5.0, 0.0]])
    with caplog.at_level(logging.INFO, logger="mogg.routing.networks.mlp"):
        m.set_normalization(x)
    assert m.std[1].item() == 1.0 and "1 column(s) take one value" in caplog.text and ": 1;" in caplog.text
    # a new question whose constant column moved by 1 is one unit away, not a million
    z = (torch.tensor([[2.0, 6.0, 0.0]]) - m.mean) / m.std
    assert z.abs().max().item() < 10


def test_zero_spread_and_overflowing_outputs_are_refused(tmp_path):
    x, labels, u, qs = _toy()
    r = train_router(x, labels, u, qs, np.arange(120), np.arange(120, 140), SETTINGS, TC, 3, _spec())
    with torch.no_grad():
        r.module.std[0] = 0.0
    r.save(tmp_path / "zero")  # a valid manifest over a zero spread
    with pytest.raises(ArtifactError, match=r"zero/router.safetensors: input spread 'std' has 1 value"):
        TrainedRouter.load(tmp_path / "zero")
    with torch.no_grad():
        r.module.std[0] = 1.0
        r.module.net[0].weight.mul_(1e30)  # finite weights whose outputs overflow float32
        r.module.net[-1].weight.mul_(1e30)
    r.save(tmp_path / "huge")
    loaded = TrainedRouter.load(tmp_path / "huge")
    with pytest.raises(FloatingPointError, match=r"huge: non-finite outputs for \d+ of 20 question"):
        loaded.route(x[140:])


def test_action_router_refuses_non_finite(tmp_path):
    from mogg.run.budget.actions.fit import fit_action_router
    from mogg.run.budget.actions.kind import ActionRouterKind
    from mogg.run.budget.actions.scorer import ActionRouter

    rng = np.random.default_rng(0)
    xq, xa, y = rng.normal(size=(40, 3)), rng.normal(size=(40, 4, 2)), rng.random((40, 4))
    wild = ActionRouterKind(max_epochs=5)
    wild.lr = 1e30  # past the knob's check (0 < lr <= 10), as a caller that set it after building the kind
    with pytest.raises(FloatingPointError, match="never finite"):
        fit_action_router(xq, xa, y, np.arange(30), np.arange(30, 40), wild)
    r = fit_action_router(xq, xa, y, np.arange(30), np.arange(30, 40), ActionRouterKind(max_epochs=3))
    r.std_a = np.zeros_like(r.std_a)
    r.save(tmp_path / "a")
    with pytest.raises(ValueError, match="non-positive values in std_a"):
        ActionRouter.load(tmp_path / "a")


# ---------------------------------------------------------------------------------------------
# item 8: strict JSON, files with the umask's mode


def test_reports_are_strict_json_and_follow_the_umask(tmp_path):
    import json
    import os

    from mogg.evaluation.report import write_report

    ok = {"mean": 0.5, "se": 0.1, "n": 3}
    pol = {m: dict(ok) for m in ("f1", "precision", "recall", "label_sim", "ctx_tokens")}
    pol["gold_hit"] = {"mean": float("nan"), "se": float("nan"), "n": 0}  # a mean over no questions
    pol["level_share"] = [1.0]
    summaries = {"mog": {"policies": {"fixed:L0": pol}, "best_fixed": "fixed:L0", "levels": ["L0"],
                         "n_questions": np.int64(3)}}
    old = os.umask(0o022)
    try:
        write_report(tmp_path, summaries, [{"id": "q", "f1": np.float64("nan")}])
    finally:
        os.umask(old)

    def strict(text: str):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))

    m = strict((tmp_path / "metrics.json").read_text())
    assert m["mog"]["policies"]["fixed:L0"]["gold_hit"]["mean"] is None and m["mog"]["n_questions"] == 3
    assert strict((tmp_path / "records.jsonl").read_text().splitlines()[0])["f1"] is None
    for name in ("metrics.json", "results.md", "records.jsonl"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name


def test_artifact_directories_follow_the_umask(tmp_path):
    import os

    from mogg.core.artifacts import write_artifact

    old = os.umask(0o022)
    try:
        d = write_artifact(tmp_path / "art", lambda t: (t / "x.txt").write_text("x"), {"k": 1})
    finally:
        os.umask(old)
    assert d.stat().st_mode & 0o777 == 0o755


# ---------------------------------------------------------------------------------------------
# item 7: unvalidated values


@pytest.mark.parametrize("override, message", [
    ("use_router=maybe", "use_router='maybe': must be true or false"),
    ("evaluate_after=yes", "evaluate_after='yes': must be true or false"),
    ("frontier=matched frontier.guard=2", "frontier.guard=2: must be true or false"),
    ("router.lr=1e30", "router.lr=1e+30: the learning rate must be in (0, 10]"),
    ("threads=0", "threads"),
])
def test_unvalidated_values_are_refused_by_the_cli(tmp_path, override, message):
    cmd = [sys.executable, str(ROOT / "train.py"), "experiment=generic_example", f"paths.artifacts={tmp_path / 'a'}",
           f"paths.checkpoints={tmp_path / 'c'}", f"paths.reports={tmp_path / 'r'}", f"paths.outputs={tmp_path / 'o'}",
           f"questions.path={ROOT / 'examples/generic/questions.jsonl'}",
           f"corpus.sources.0.paths={ROOT / 'examples/generic/corpus.jsonl'}", *override.split()]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and message in p.stderr, p.stderr[-1500:]
    assert not (tmp_path / "a").exists()  # refused before any work


def test_router_checkpoint_without_the_router_is_refused():
    """Before: `router.checkpoint=DIR use_router=false` evaluated without the router, silently
    (no transfer row, no warning)."""
    from conftest import compose

    from mogg.core.runconfig import check_run_config

    cfg = compose(["experiment=pubmedqa", "router.checkpoint=checkpoints/pubmedqa", "use_router=false"])
    with pytest.raises(ValueError, match="would not be used"):
        check_run_config(cfg, "evaluate")
    check_run_config(compose(["experiment=pubmedqa", "use_router=false"]), "evaluate")
