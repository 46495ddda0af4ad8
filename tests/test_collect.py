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
