"""The deployable evidence selector (issue 40): the final fit's directory, ``mogg-route --budget``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_frontier import _frontier_overrides


@pytest.fixture(scope="module")
def final(tmp_path_factory, mirage):
    from conftest import compose

    from mogg.run.app import train

    tmp = tmp_path_factory.mktemp("sel")
    cfg = compose(_frontier_overrides(tmp, mirage, ["router.fit=all", "run_name=sel", "trainer.max_epochs=3",
                                                    "frontier.routers.actions.max_epochs=3", "frontier.depth=3",
                                                    "frontier.caps=[null,32]", "frontier/routers=[actions,selector]",
                                                    "frontier.routers.selector.depth=3",
                                                    "frontier.routers.selector.cosine=false",
                                                    "+frontier.routers.selector.params={n_estimators: 30, min_child_samples: 5}"]))
    out = train(cfg)
    return tmp, cfg, out


def test_the_final_fit_writes_one_deployable_selector(final):
    from mogg.core.artifacts import read_manifest
    from mogg.run.budget.selector.deploy import DeployedSelector, is_selector_dir

    tmp, cfg, out = final
    d = tmp / "ckpt" / "sel" / "mog" / "selector" / "final"
    assert out["mog"]["selector"]["final"]["dir"] == str(d) and is_selector_dir(d)
    assert not is_selector_dir(tmp / "ckpt" / "sel" / "mog" / "actions" / "final")  # the action router's
    read_manifest(d)
    dep = DeployedSelector.load(d)
    assert dep.calibrated() == [64, 128, 256, 512]
    for p in dep.deploy["budgets"].values():
        assert p["deploy"] in ("router", "envelope") and p["lambda"] >= 0
        assert set(p["guard"]) >= {"gain", "se", "n", "tokens"}
    assert len(dep.decisions["ids"]) == 60 and 0 < len(dep.decisions["val"]) < 60
    assert dep.deploy["evidence_len"] > 0 and dep.booster.num_trees() >= 1


def test_routing_the_training_questions_reproduces_the_selectors_decisions(final, mirage):
    from mogg.run.budget.selector.kind import EvidenceSelectorKind
    from mogg.run.budget.selector.session import SelectorSession
    from mogg.run.prepare_stage import prepare_all

    tmp, cfg, _ = final
    d = tmp / "ckpt" / "sel" / "mog" / "selector" / "final"
    session = SelectorSession.from_checkpoint(d, artifacts=tmp / "artifacts", data_dir=mirage.parent,
                                              kind=EvidenceSelectorKind)
    prep = prepare_all(cfg)["mog"]
    dep = session.deployed
    assert dep.decisions["ids"] == list(prep.query_ids)
    opts = [" ".join(it.options.values()) for it in prep.items]
    for b in dep.calibrated():
        records, summary = session.route(prep.questions, prep.query_ids, budget=b, options=opts)
        assert [r["plan"] for r in records] == dep.decisions["budgets"][str(b)]
        for r in records:
            if r["decided_by"] == "selector":
                assert len(r["context"]) == r["plan"] + 1 and [c["rank"] for c in r["context"]] == list(range(r["plan"] + 1))
            else:
                assert r["plan"] == -1 and r["envelope"]["level"] in prep.ladder.level_names
        assert summary["mean_tokens"] == pytest.approx(np.mean([r["tokens"] for r in records]))
        # the selector's own plans (also where the guard kept the envelope): the fit's, reproduced
        own, _ = session.route(prep.questions, prep.query_ids, budget=b, options=opts, unguarded=True)
        assert [r["plan"] for r in own] == dep.decisions["selector"][str(b)]
        assert {r["decided_by"] for r in own} == {"selector"}
    # a cost weight: the selector itself at every question; a larger weight reads no more
    few, _ = session.route(prep.questions[:20], budget=None, cost_weight=1.0, options=opts[:20])
    many, _ = session.route(prep.questions[:20], budget=None, cost_weight=0.0, options=opts[:20])
    assert sum(r["tokens"] for r in few) <= sum(r["tokens"] for r in many)
    with pytest.raises(ValueError, match="64, 128, 256, 512"):
        session.route(prep.questions[:2], budget=100)


def test_mogg_route_applies_the_selector(final, mirage, tmp_path, capsys):
    from mogg.run.route import main

    tmp, _, _ = final
    d = tmp / "ckpt" / "sel" / "mog" / "selector" / "final"
    q = tmp_path / "q.jsonl"
    q.write_text('{"id": "a", "question": "Is aspirin associated with preeclampsia?"}\n'
                 '{"id": "b", "question": "Does smoking cause lung cancer?", "options": {"A": "yes", "B": "no"}}\n')
    out = tmp_path / "routed.jsonl"
    base = ["--checkpoint", str(d), "--artifacts", str(tmp / "artifacts"), "--data-dir", str(mirage.parent)]
    assert main([*base, "--budget", "128", "--out", str(out), str(q)]) == 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in recs] == ["a", "b"]
    assert all({"plan", "tokens", "decided_by", "context"} <= set(r) and r["context"] for r in recs)
    # issue 48: lambda chosen on the routed questions' own token counts (no labels), the budget kept
    here = tmp_path / "here.jsonl"
    assert main([*base, "--budget", "128", "--calibrate-here", "--unguarded", "--out", str(here), str(q)]) == 0
    recs = [json.loads(x) for x in here.read_text().splitlines()]
    assert [r["id"] for r in recs] == ["a", "b"] and {r["decided_by"] for r in recs} == {"selector"}
    assert np.mean([r["tokens"] for r in recs]) <= 128 * 1.05
    # an in-set directory reads its own corpus: no evidence unit to declare, said so
    capsys.readouterr()
    assert main([*base, "--budget", "128", "--calibrate-here", "--evidence-unit", "section", str(q)]) == 2
    assert "this directory is in-set" in capsys.readouterr().err
