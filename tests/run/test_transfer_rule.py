"""Issue 58: the transfer rule a directory deploys is chosen by its worst held-out shape, not its mean."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mogg.run.budget.selector.transfer_rule import choose_rule, rule_markdown, rule_of

BUDGETS = (64, 128, 256, 512)


def _run(reports, name, rows: dict[str, float], n=200, seed=0):
    """A frontier run's report: per policy the same F1 at every budget (+ noise), tokens = B."""
    rng = np.random.default_rng(seed)
    d = reports / name
    d.mkdir(parents=True)
    ids = np.array([f"q{i}" for i in range(n)])
    arrays = {"ids": ids, "budgets": np.array(BUDGETS)}
    budgets = {}
    for pol, f1 in rows.items():
        x = np.clip(f1 + rng.normal(0, 0.02, n), 0, 1)
        arrays[f"policy:{pol}"] = np.stack([np.stack([x, np.full(n, float(b))]) for b in BUDGETS])
        for b in BUDGETS:
            budgets.setdefault(str(b), {})[pol] = {"f1": {"mean": float(x.mean())}, "tokens": {"mean": float(b)}}
    np.savez(d / "mog_frontier_questions.npz", **arrays)
    (d / "metrics.json").write_text(json.dumps({"mog": {"frontier": {"budgets": budgets}}}))


def test_the_rule_with_the_best_worst_shape_is_chosen_not_the_best_mean(tmp_path):
    mean_winner, worst_winner = "transferred selector (deployed: E document, lambda learned)", "transferred selector (E median)"
    for seed in (0, 1):
        _run(tmp_path, f"loso_shapes_a_s{seed}", {"envelope": 0.5, "training sets' envelope": 0.4,
                                                  mean_winner: 0.65, worst_winner: 0.52}, seed=seed)
        _run(tmp_path, f"loso_shapes_b_s{seed}", {"envelope": 0.5, "training sets' envelope": 0.4,
                                                  mean_winner: 0.42, worst_winner: 0.50}, seed=seed + 5)
    res = choose_rule(tmp_path, "loso_shapes_*")
    assert res["chosen"] == ("median", "here")  # worst shape -0.00x beats -0.08, though its mean is lower
    assert res["worst"][("document", "learned")][0] == "loso_shapes_b"
    t = res["table"][("median", "here")]
    assert t["loso_shapes_a"]["above_training"] == 4 and t["loso_shapes_a"]["seeds"] == 2
    md = rule_markdown(res)
    assert "E median, lambda here **(chosen)**" in md and "loso_shapes_b" in md


def test_a_worst_shape_tie_inside_the_noise_goes_to_the_best_next_worst_shape(tmp_path):
    a, b = "transferred selector (E predicted, lambda learned)", "transferred selector (E document, lambda learned)"
    for shape, (fa, fb) in {"c": (0.3305, 0.330), "m": (0.40, 0.48), "p": (0.53, 0.51)}.items():
        _run(tmp_path, f"loso_shapes_{shape}_s0", {"envelope": 0.5, "training sets' envelope": 0.3, a: fa, b: fb})
    res = choose_rule(tmp_path, "loso_shapes_*")
    assert res["worst"][("predicted", "learned")][0] == res["worst"][("document", "learned")][0] == "loso_shapes_c"
    assert res["worst"][("predicted", "learned")][1] > res["worst"][("document", "learned")][1]  # a hair better there
    assert set(res["tied"]) == {("predicted", "learned"), ("document", "learned")}
    assert res["chosen"] == ("document", "learned")  # its next-worst shape (m) is far better


def test_rule_names_parse_and_one_shape_is_refused(tmp_path):
    assert rule_of("transferred selector (E predicted)") == ("predicted", "here")
    assert rule_of("transferred selector (E median, lambda learned)") == ("median", "learned")
    assert rule_of("transferred selector (deployed: E document, lambda here)") == ("document", "here")
    assert rule_of("transferred selector (deployed: E document, lambda fits)") == ("document", "fits")
    assert rule_of("training sets' envelope") is None
    _run(tmp_path, "loso_shapes_a_s0", {"envelope": 0.5, "training sets' envelope": 0.4,
                                        "transferred selector (E median)": 0.5})
    from mogg.evaluation.collect_frontier import FrontierCollectError

    with pytest.raises(FrontierCollectError, match="1 held-out shape"):
        choose_rule(tmp_path, "loso_shapes_*")
