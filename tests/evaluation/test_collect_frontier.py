"""Issue 37: the frontier over seeds (collect --frontier), pooled question by question."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mogg.evaluation.collect import main
from mogg.evaluation.collect_frontier import FrontierCollectError, collect_frontier, pooled_difference


def _run(d, ids, env, router, budgets=(64, 128), **extra):
    """A frontier run's metrics.json and per-question file: F1 [n_budgets, n] per policy (tokens 10);
    ``extra``: more policies by name."""
    d.mkdir(parents=True)
    pols = (("envelope", env), ("router", router), ("oracle", router + 0.1), *extra.items())
    fr = {"budgets": {str(b): {p: {"f1": {"mean": float(v[i].mean())}, "tokens": {"mean": 10.0}} for p, v in pols}
                      for i, b in enumerate(budgets)}}
    (d / "metrics.json").write_text(json.dumps({"mog": {"policies": {}, "frontier": fr}}))
    tok = np.full_like(env, 10.0)
    np.savez(d / "mog_frontier_questions.npz", ids=np.array(ids), budgets=np.array(budgets),
             **{f"policy:{p}": np.stack([v, tok], 1) for p, v in pols if p != "oracle"})


def test_seeds_are_pooled_question_by_question(tmp_path):
    rng = np.random.default_rng(0)
    ids = [f"q{i}" for i in range(40)]
    env = rng.uniform(size=(3, 2, 40))
    router = env + rng.normal(0.05, 0.1, size=(3, 2, 40))
    perm = rng.permutation(40)  # a run may list its questions in another order
    for s in range(3):
        order = perm if s == 1 else np.arange(40)
        _run(tmp_path / f"fr_s{s}", [ids[i] for i in order], env[s][:, order], router[s][:, order])
    rows = collect_frontier(tmp_path, "fr_*")
    r = next(x for x in rows if x["policy"] == "router" and x["budget"] == 128)
    d = (router - env)[:, 1].mean(axis=0)  # per question, averaged over seeds
    assert r["seeds"] == 3 and r["n"] == 40
    assert r["diff_mean"] == pytest.approx(d.mean())
    assert r["diff_lo"] < d.mean() < r["diff_hi"]
    assert r["f1"] == pytest.approx(router[:, 1].mean(axis=1).mean())
    assert r["f1_sd"] == pytest.approx(router[:, 1].mean(axis=1).std(ddof=1))
    p = pooled_difference([(router - env)[s, 1] for s in range(3)])
    assert p["mean"] == pytest.approx(d.mean()) and len(p["seeds"]) == 3
    assert main(["--reports", str(tmp_path), "--frontier", "--pattern", "fr_*", "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "frontier_summary.md").read_text()
    assert "### fr (mog; n = 40, 3 seeds)" in md and "| oracle |" in md
    # --versus: the intervals against another policy (leave-one-set-out: the training sets' envelope)
    rows = collect_frontier(tmp_path, "fr_*", ("envelope", "router"), versus="router")
    e = next(x for x in rows if x["policy"] == "envelope" and x["budget"] == 128)
    assert e["diff_mean"] == pytest.approx(-d.mean()) and "diff_mean" not in next(
        x for x in rows if x["policy"] == "router" and x["budget"] == 128)
    assert main(["--reports", str(tmp_path), "--frontier", "--pattern", "fr_*", "--out", str(tmp_path / "v"),
                 "--policies", "envelope;router", "--versus", "router"]) == 0
    assert "difference to the router" in (tmp_path / "v" / "frontier_summary.md").read_text()


def test_seeds_over_different_questions_are_refused(tmp_path, capsys):
    a = np.zeros((2, 5))
    _run(tmp_path / "fr_s0", [f"q{i}" for i in range(5)], a, a)
    _run(tmp_path / "fr_s1", [f"q{i}" for i in range(1, 6)], a, a)
    with pytest.raises(FrontierCollectError, match="different questions"):
        collect_frontier(tmp_path, "fr_*")
    assert main(["--reports", str(tmp_path), "--frontier", "--pattern", "fr_*"]) == 2
    assert "different questions" in capsys.readouterr().err


def test_kept_is_the_share_of_one_policy_s_gain_another_keeps_pooled_over_seeds(tmp_path, capsys):
    """--kept selector (issue 58's bars: "keeps at least 90% of the in-set selector's gain over the envelope"): each
    shown policy's mean gain over --versus over the selector's, both pooled over seeds question by question; a
    run without the policy named is refused, as --versus's is."""
    from mogg.evaluation.frontier import share_kept

    rng = np.random.default_rng(1)
    ids = [f"q{i}" for i in range(60)]
    env = rng.uniform(size=(2, 2, 60))
    sel = env + rng.normal(0.10, 0.05, size=(2, 2, 60))
    dep = env + rng.normal(0.06, 0.05, size=(2, 2, 60))
    for s in range(2):
        _run(tmp_path / f"fr_s{s}", ids, env[s], dep[s], selector=sel[s])
    rows = collect_frontier(tmp_path, "fr_*", ("envelope", "router", "selector"), kept="selector")
    r = next(x for x in rows if x["policy"] == "router" and x["budget"] == 128)
    gain, ref = (dep - env)[:, 1].mean(axis=0), (sel - env)[:, 1].mean(axis=0)  # per question, over the seeds
    assert r["kept_of"] == "selector" and r["kept_share"] == pytest.approx(gain.mean() / ref.mean())
    assert r["kept_lo"] < r["kept_share"] < r["kept_hi"] and r["kept_reference"] == pytest.approx(ref.mean())
    assert r["kept_share"] == pytest.approx(share_kept(gain, ref, 2000)["share"])
    assert "kept_of" not in next(x for x in rows if x["policy"] == "selector" and x["budget"] == 128)
    assert main(["--reports", str(tmp_path), "--frontier", "--pattern", "fr_*", "--out", str(tmp_path / "k"),
                 "--policies", "envelope;router;selector", "--kept", "selector"]) == 0
    md = (tmp_path / "k" / "frontier_summary.md").read_text()
    assert "Share of the selector's gain over the envelope kept" in md
    r64 = next(x for x in rows if x["policy"] == "router" and x["budget"] == 64)
    assert f"| router | {r64['kept_share']:.0%} [{r64['kept_lo']:.0%}, {r64['kept_hi']:.0%}] |" in md
    from mogg.evaluation.frontier_render import kept_cell

    assert kept_cell({"share": -0.003, "lo": -0.05, "hi": 0.04}) == "0% [-5%, 4%]"  # never "-0%"
    assert kept_cell(None) == kept_cell({"share": float("nan")}) == "-"
    assert main(["--reports", str(tmp_path), "--frontier", "--pattern", "fr_*", "--kept", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["--reports", str(tmp_path), "--pattern", "fr_*", "--kept", "selector"]) == 2  # not a frontier table


def test_the_collection_draws_each_policy_s_f1_and_its_share_kept(tmp_path):
    """frontier_summary.png: frontier_series gives every collected policy's F1 per budget (mean ± sd over seeds) and,
    with --kept, the share kept of the policies that keep one (not the reference, nor --versus); a share with no
    gain to keep (NaN) is drawn as a gap, and the png is written beside the table."""
    from mogg.evaluation.collect_frontier import frontier_series

    rng = np.random.default_rng(2)
    ids = [f"q{i}" for i in range(50)]
    env = rng.uniform(size=(2, 2, 50))
    sel = env + rng.normal(0.10, 0.05, size=(2, 2, 50))
    sel[:, 0] = env[:, 0]  # B = 64: the selector has no gain to keep
    dep = env + rng.normal(0.05, 0.05, size=(2, 2, 50))
    for s in range(2):
        _run(tmp_path / f"fr_s{s}", ids, env[s], dep[s], selector=sel[s])
    rows = collect_frontier(tmp_path, "fr_*", ("envelope", "router", "selector"), kept="selector")
    f1 = frontier_series(rows)[("fr", "mog")]
    assert set(f1) == {"envelope", "router", "selector", "oracle"}
    b, v, lo, hi = f1["router"]
    assert list(b) == [64, 128] and v == pytest.approx(dep.mean(axis=2).mean(axis=0))
    assert hi - v == pytest.approx(v - lo) and (hi - v) == pytest.approx(dep.mean(axis=2).std(axis=0, ddof=1))
    kept = frontier_series(rows, "kept")[("fr", "mog")]
    assert set(kept) == {"router"}
    r128 = next(x for x in rows if x["policy"] == "router" and x["budget"] == 128)
    assert np.isnan(kept["router"][1][0]) and kept["router"][1][1] == pytest.approx(r128["kept_share"])
    assert main(["--reports", str(tmp_path), "--frontier", "--pattern", "fr_*", "--out", str(tmp_path / "p"),
                 "--policies", "envelope;router;selector", "--kept", "selector"]) == 0
    png = (tmp_path / "p" / "frontier_summary.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
