"""Sweep collection: the paired router comparison between two runs or seed groups."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mogg.evaluation.collect import main, paired


def _run(d, f1s):
    d.mkdir(parents=True)
    (d / "records.jsonl").write_text("".join(
        json.dumps({"ladder": "mog", "id": str(i), "policies": {"mog_router": {"f1": v}}}) + "\n" for i, v in enumerate(f1s)))


def test_paired_difference_averages_seeds_then_pairs_questions(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.uniform(size=(2, 50))
    b = a + rng.normal(0.05, 0.02, size=(2, 50))
    for s in range(2):
        _run(tmp_path / f"mlp_s{s}", a[s])
        _run(tmp_path / f"cross_s{s}", b[s])
    _run(tmp_path / "mlp_s1x", np.zeros(50))  # not of the group: a name that only starts like it
    r = paired(tmp_path, "mlp", "cross")["mog"]
    d = b.mean(0) - a.mean(0)
    assert r["n"] == 50 and r["seeds"] == [2, 2]
    assert r["mean"] == pytest.approx(d.mean()) and r["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(50))
    assert r["wins"] == (d > 0).sum() and r["losses"] == (d < 0).sum()
    assert paired(tmp_path, "mlp_s0", "cross_s0")["mog"]["mean"] == pytest.approx((b[0] - a[0]).mean())
    with pytest.raises(FileNotFoundError, match="no run nope"):
        paired(tmp_path, "nope", "cross")
    assert main(["--reports", str(tmp_path), "--paired", "mlp", "cross"]) == 0


def test_runs_of_a_router_over_eq1_actions_add_the_action_gap_columns(tmp_path):
    def metrics(d, router, extra):
        d.mkdir(parents=True)
        pol = {"mog_router": {"f1": {"mean": router}}, "fixed:a": {"f1": {"mean": 0.4}}, "oracle": {"f1": {"mean": 0.6}}}
        pol.update({k: {"f1": {"mean": v}} for k, v in extra.items()})
        s = {"policies": pol, "best_fixed": "fixed:a", "n_questions": 10, "gap_closed": {"mog_router": (router - 0.4) / 0.2}}
        if extra:
            s["action_gap_closed"] = {"mog_router": (router - extra["best_action"]) / (extra["action_oracle"] - extra["best_action"])}
        (d / "metrics.json").write_text(json.dumps({"mog": s}))

    metrics(tmp_path / "levels_s0", 0.5, {})
    metrics(tmp_path / "levels_only_s0", 0.5, {})
    metrics(tmp_path / "prof_s0", 0.55, {"best_action": 0.45, "action_oracle": 0.7})
    metrics(tmp_path / "prof_s1", 0.6, {"best_action": 0.45, "action_oracle": 0.7})
    assert main(["--reports", str(tmp_path), "--pattern", "levels_only_s*", "--out", str(tmp_path / "c1")]) == 0
    assert "action gap closed" not in (tmp_path / "c1" / "summary.md").read_text()  # level routers: table unchanged
    assert main(["--reports", str(tmp_path), "--pattern", "*_s*", "--out", str(tmp_path / "c2")]) == 0
    lines = (tmp_path / "c2" / "summary.md").read_text().splitlines()
    assert lines[0].endswith("| best action | action oracle | action gap closed |")
    prof = next(ln for ln in lines if ln.startswith("| prof |"))
    assert prof.endswith("| 0.450 ± 0.000 | 0.700 ± 0.000 | +50% ± 14% |")  # (0.575 - 0.45) / 0.25, sd of 40% and 60%
    assert next(ln for ln in lines if ln.startswith("| levels |")).endswith("| - | - | - |")
