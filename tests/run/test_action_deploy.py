"""The deployable action router (issue 40): the final fit's directory, ``mogg-route --budget``."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from test_frontier import _frontier_overrides


@pytest.fixture(scope="module")
def final(tmp_path_factory, mirage):
    from conftest import compose

    from mogg.run.app import train

    tmp = tmp_path_factory.mktemp("act")
    # smaller than test_frontier's: 3 folds of 8 epochs, k <= 3, two caps (the default run's minutes)
    cfg = compose(_frontier_overrides(tmp, mirage, ["router.fit=all", "run_name=act", "trainer.max_epochs=5",
                                                    "frontier.routers.actions.max_epochs=8", "frontier.depth=3",
                                                    "frontier.caps=[null,32]"]))
    out = train(cfg)
    return tmp, cfg, out


def test_the_final_fit_writes_one_deployable_directory(final):
    from mogg.core.artifacts import read_manifest
    from mogg.run.budget.actions.deploy import DeployedActions

    tmp, cfg, out = final
    d = tmp / "ckpt" / "act" / "mog" / "actions" / "final"
    assert out["mog"]["actions"]["final"]["dir"] == str(d)
    read_manifest(d)  # every file checksummed
    dep = DeployedActions.load(d)
    assert dep.calibrated() == [64, 128, 256, 512]
    for p in dep.budgets.values():
        assert p["deploy"] in ("router", "envelope") and p["lambda"] >= 0
        assert p["envelope_config"] == dep.space.describe(p["envelope"])
        assert set(p["guard"]) >= {"gain", "se", "n", "tokens"}
    assert len(dep.decisions["ids"]) == 60 and 0 < len(dep.decisions["val"]) < 60
    assert dep.spec["frontier"]["depth"] == 3 and dep.spec["levels"]


def test_routing_the_training_questions_reproduces_the_final_fits_decisions(final, mirage):
    from mogg.run.budget.actions.deploy import DeployedActions
    from mogg.run.budget.actions.session import ActionSession
    from mogg.run.budget.shared import action_table_of
    from mogg.run.frontier_stage import frontier_settings
    from mogg.run.prepare_stage import prepare_all

    tmp, cfg, _ = final
    d = tmp / "ckpt" / "act" / "mog" / "actions" / "final"
    session = ActionSession.from_checkpoint(d, artifacts=tmp / "artifacts", data_dir=mirage.parent)
    prep = prepare_all(cfg)["mog"]
    dep = DeployedActions.load(d)
    assert dep.decisions["ids"] == list(prep.query_ids)
    # the session's inputs are the training run's, bit for bit
    space, table, xq, xa = action_table_of(prep, frontier_settings(cfg))
    _, sq, sa, st = session.inputs(prep.questions)
    np.testing.assert_array_equal(sq, xq)
    np.testing.assert_array_equal(sa, xa)
    np.testing.assert_array_equal(st, table.tokens)
    val = np.array([dep.decisions["ids"].index(i) for i in dep.decisions["val"]])
    for b in dep.calibrated():
        records, summary = session.route(prep.questions, prep.query_ids, budget=b)
        got = np.array([r["action"] for r in records])
        np.testing.assert_array_equal(got, dep.decisions["budgets"][b])
        # each record's tokens are its context's: the table's for its action, or fewer where the cap
        # cut a snippet mid-sentence and the record cut it back to the sentence end (issue 50)
        tok, want = np.array([r["tokens"] for r in records]), table.tokens[np.arange(60), got]
        cut = np.array([any(c.get("cut") for c in r["context"]) for r in records])
        np.testing.assert_array_equal(tok[~cut], want[~cut])
        assert (tok[cut] <= want[cut]).all()
        for r in records:
            desc = space.describe(r["action"])
            assert (r["level"], r["k"], r["cap"]) == (desc["level"], desc["k"], desc["cap"])
            assert len(r["context"]) <= r["k"]
            assert r["reads"].startswith("the top") and r["level"] in r["reads"]
            assert f"B = {b}" in r["why"] and ("kept the fixed envelope" in r["why"]) == (r["decided_by"] == "envelope")
            assert r["relevance"] is None or 0 <= r["relevance"] <= 1
            for c in r["context"]:
                if c.get("cut"):  # cut back to a sentence end (or one long sentence kept at the token cut)
                    assert c["text"].rstrip()[-1] in ".!?\"')]" or not re.search(r"[.!?]\s", c["text"])
        # on the calibration questions the mean tokens stay within B (+5%): lambda (or the envelope)
        # was chosen there to read at most B; it may read less where less reads better
        assert np.mean([records[i]["tokens"] for i in val]) <= 1.05 * b
        assert summary["budget"] == b and summary["mean_tokens"] == pytest.approx(tok.mean())
    # a hard cap: no context over it
    records, _ = session.route(prep.questions[:10], budget=512, max_tokens=40)
    assert max(r["tokens"] for r in records) <= 40


def test_spending_the_budget_on_the_routed_questions_reads_within_5_percent_of_it(final, mirage):
    """``--calibrate-here``: lambda re-chosen on the routed questions (the calibration questions are
    the routed ones), so their mean tokens are within 5% of B (never over it) wherever B binds the
    router, i.e. where its utility argmax alone would read more; where it does not (lambda 0) the
    router reads its argmax. Guarded, the envelope chosen on these questions' tokens stays within B."""
    from mogg.routing.plans import decide
    from mogg.run.budget.actions.session import ActionSession
    from mogg.run.prepare_stage import prepare_all

    tmp, cfg, _ = final
    session = ActionSession.from_checkpoint(tmp / "ckpt" / "act" / "mog" / "actions" / "final",
                                            artifacts=tmp / "artifacts", data_dir=mirage.parent)
    prep = prepare_all(cfg)["mog"]
    dep = session.deployed
    _, xq, xa, tokens = session.inputs(prep.questions)
    util = dep.router.utilities(xq, xa)
    binding = 0
    for b in dep.calibrated():
        records, summary = session.route(prep.questions, prep.query_ids, budget=b, here=True, unguarded=True)
        mean = float(np.mean([r["tokens"] for r in records]))
        assert summary["mean_tokens"] == pytest.approx(mean) and summary["calibrated_here"]
        assert mean <= b + 1e-9
        argmax = decide(util, tokens, 0.0)
        if tokens[np.arange(len(tokens)), argmax].mean() > b:  # B binds: lambda > 0 spends it
            binding += 1
            assert summary["lambda"] > 0 and mean >= 0.95 * b, (b, mean, summary["lambda"])
        else:
            assert [r["action"] for r in records] == argmax.tolist()
        # guarded: the router or the training questions' best configuration within B on these questions
        records, summary = session.route(prep.questions, prep.query_ids, budget=b, here=True)
        assert summary["mean_tokens"] <= b + 1e-9
        if summary["deployed"] == "envelope":
            assert {r["action"] for r in records} == {summary["envelope"]}
            assert summary["envelope"] == dep.envelope_here(tokens, b)
    assert binding >= 2  # the small budgets bind on this toy: the 5% check ran


def test_a_budget_it_was_not_calibrated_for_is_refused_with_the_list(final):
    from mogg.run.budget.actions.deploy import DeployedActions

    tmp, _, _ = final
    dep = DeployedActions.load(tmp / "ckpt" / "act" / "mog" / "actions" / "final")
    with pytest.raises(ValueError, match="64, 128, 256, 512"):
        dep.plan(100)
    with pytest.raises(ValueError, match="not both"):
        dep.plan(64, 0.1)
    with pytest.raises(ValueError, match=">= 0"):
        dep.plan(cost_weight=-1)
    assert dep.plan(cost_weight=0.0) == {"lambda": 0.0, "deploy": "router", "envelope": None, "budget": None,
                                         "here": False}
    with pytest.raises(ValueError, match="needs a budget"):
        dep.plan(cost_weight=0.1, here=True)


def test_mogg_route_budget_through_the_cli(final, mirage, tmp_path, capsys, caplog, monkeypatch):
    from mogg.run.route import main

    tmp, cfg, _ = final
    d = tmp / "ckpt" / "act" / "mog" / "actions" / "final"
    q = tmp_path / "q.jsonl"
    q.write_text('{"id": "a", "question": "Is aspirin associated with preeclampsia?"}\n'
                 '{"id": "b", "question": "Does smoking cause lung cancer?"}\n')
    out = tmp_path / "routed.jsonl"
    base = ["--checkpoint", str(d), "--artifacts", str(tmp / "artifacts"), "--data-dir", str(mirage.parent)]
    assert main([*base, "--budget", "128", "--out", str(out), str(q)]) == 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in recs] == ["a", "b"]
    for r in recs:
        assert {"level", "k", "cap", "tokens", "context", "decided_by"} <= set(r)
    # a question with no indexable word: an explicit empty record, left out of the mean
    q2 = tmp_path / "q2.jsonl"
    q2.write_text('{"id": "e", "question": "???"}\n' + q.read_text())
    assert main([*base, "--budget", "64", "--out", str(out), str(q2)]) == 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert recs[0] == {"id": "e", "question": "???", "context": [], "empty": True,
                       "reason": "no indexable word: the retrievers have nothing to search with"}
    assert [r["id"] for r in recs] == ["e", "a", "b"] and all("tokens" in r for r in recs[1:])
    assert main([*base, "--budget", "100", str(q)]) == 2
    assert "64, 128, 256, 512" in capsys.readouterr().err
    # --budget on a level router's directory: one line saying which directory it needs
    assert main(["--checkpoint", str(tmp / "ckpt" / "act" / "mog" / "final"), "--budget", "128", str(q)]) == 2
    assert "action router" in capsys.readouterr().err
    assert main(["--checkpoint", str(tmp / "ckpt" / "act" / "mog" / "final"), "--calibrate-here", str(q)]) == 2
    assert "action router" in capsys.readouterr().err
    # the evidence unit is the evidence selector's: refused on the action router, and said so
    assert main([*base, "--budget", "64", "--calibrate-here", "--evidence-unit", "section", str(q)]) == 2
    assert "--evidence-unit does not apply to the action router" in capsys.readouterr().err
    # spending B on a new batch: lambda re-chosen on it, said in the log line
    with caplog.at_level("INFO", logger="mogg.run.route"):
        assert main([*base, "--budget", "64", "--calibrate-here", "--unguarded", "--out", str(out), str(q)]) == 0
    assert "calibrated on these questions" in caplog.text
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert np.mean([r["tokens"] for r in recs]) <= 64 and {r["decided_by"] for r in recs} == {"router"}


def test_an_edited_deploy_file_is_refused(final, tmp_path):
    import shutil

    from mogg.core.artifacts import ArtifactError
    from mogg.run.budget.actions.deploy import DeployedActions

    tmp, _, _ = final
    d = tmp_path / "copy"
    shutil.copytree(tmp / "ckpt" / "act" / "mog" / "actions" / "final", d)
    p = d / "deploy.json"
    spec = json.loads(p.read_text())
    spec["budgets"]["64"]["lambda"] = 0.0
    p.write_text(json.dumps(spec))
    with pytest.raises(ArtifactError, match="deploy.json"):
        DeployedActions.load(d)


def test_a_retrain_with_other_settings_replaces_the_directory(final, tmp_path):
    """Before: the manifest's config held only the format and the data key, so a second fit with
    another seed or other knobs was adopted as "already published" and the old directory stayed."""
    import shutil

    from mogg.run.budget.actions.deploy import DeployedActions

    tmp, _, _ = final
    d = tmp_path / "dep"
    shutil.copytree(tmp / "ckpt" / "act" / "mog" / "actions" / "final", d)
    dep = DeployedActions.load(d)
    dep.budgets[64] = {**dep.budgets[64], "lambda": dep.budgets[64]["lambda"] + 1.0}
    dep.save(d)
    assert DeployedActions.load(d).budgets[64]["lambda"] == dep.budgets[64]["lambda"]
