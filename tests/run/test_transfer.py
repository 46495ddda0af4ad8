"""A router trained on one question set routes another: the real configs, shrunk.

Set A = the first PubMedQA* questions, set B = MedMCQA questions with explanations as gold
evidence, over one corpus (PubMedQA* abstracts + the longer MedMCQA explanations).
"""

import json
import subprocess
import sys

import pytest
from conftest import compose

from mogg.core.artifacts import ArtifactError
from mogg.routing.router_dir import RouterMismatch
from mogg.run.app import evaluate, train


def _ov(tmp_path, mirage, *extra):
    return [
        f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'artifacts'}",
        f"paths.checkpoints={tmp_path / 'ckpt'}", f"paths.reports={tmp_path / 'reports'}",
        "corpus.sources.1.min_chars=400", "n_folds=3", "trainer.max_epochs=40", "trainer.patience=5", *extra,
    ]


A = ["questions.limit=60", "run_name=a"]
B = ["questions=medmcqa_exp", "questions.min_chars=400", "questions.limit=45", "run_name=b"]


@pytest.fixture(scope="module")
def trained_a(tmp_path_factory, mirage):
    tmp = tmp_path_factory.mktemp("transfer")
    out = train(compose(_ov(tmp, mirage, *A, "router.fit=all")))
    assert out["mog"]["final"].endswith("a/mog/final")
    return tmp


def test_router_trained_on_a_routes_b(trained_a, mirage):
    tmp = trained_a
    assert not (tmp / "ckpt" / "a" / "mog" / "folds.json").exists()  # fit=all: no cross-fit
    cfg = compose(_ov(tmp, mirage, *B, f"router.checkpoint={tmp / 'ckpt' / 'a'}"))
    s = evaluate(cfg)["mog"]  # B was never cross-fitted: only the applied router is reported
    pols = s["policies"]
    assert {"mog_transfer", "mog_transfer[fallback]", "source_best_fixed", "oracle"} <= set(pols)
    assert "mog_router" not in pols and pols["mog_transfer"]["f1"]["n"] == 45
    md = (tmp / "reports" / "b" / "results.md").read_text()
    assert "## Transfer: `mog`" in md and "best fixed level chosen on the source set" in md and "n = 45 questions" in md
    rec = json.loads((tmp / "reports" / "b" / "records.jsonl").read_text().splitlines()[0])
    assert set(rec["routers"]["mog_transfer"]) == {"weights", "level", "router_choice_kept", "logits"}


def test_router_refused_on_its_own_questions_and_on_another_ladder(trained_a, mirage):
    tmp = trained_a
    ck = f"router.checkpoint={tmp / 'ckpt' / 'a'}"
    with pytest.raises(ArtifactError, match="trained on 60 of these 60 questions"):
        evaluate(compose(_ov(tmp, mirage, *A, ck, "run_name=a_again")))
    # with the overlap declared it runs, and the report says so
    s = evaluate(compose(_ov(tmp, mirage, *A, ck, "run_name=a_again", "router.allow_overlap=true")))
    assert "mog_transfer" in s["mog"]["policies"]
    assert "trained on 60 of these 60 questions" in (tmp / "reports" / "a_again" / "results.md").read_text()
    with pytest.raises(RouterMismatch, match="trained for levels"):
        evaluate(compose(_ov(tmp, mirage, *B, ck, "ladders.mog.n_levels=3")))
    with pytest.raises(RouterMismatch, match="k_r=3; this run retrieves k_r=4"):
        evaluate(compose(_ov(tmp, mirage, *B, ck, "k_r=4")))
    with pytest.raises(ValueError, match="router.fit=all trains one router on every question"):
        evaluate(compose(_ov(tmp, mirage, *A, "router.fit=all")))


def test_transfer_experiment_one_report(tmp_path, mirage):
    """experiment=transfer_*: the final router on A, the cross-fit on B, both in B's report."""
    ov = _ov(tmp_path, mirage, "experiment=transfer_pubmedqa_to_medmcqa", "train_questions.limit=60",
             "questions.min_chars=400", "questions.limit=45")
    cfg = compose(ov)
    train(cfg)
    s = evaluate(cfg)["mog"]
    assert {"mog_router", "mog_prior", "mog_transfer", "source_best_fixed"} <= set(s["policies"])
    md = (tmp_path / "reports" / "transfer_pubmedqa_to_medmcqa" / "results.md").read_text()
    for row in ("in-set cross-fitted router", "transferred router", "best fixed level chosen on the source set",
                "in hindsight", "oracle level"):
        assert row in md


def test_mogg_route_cli_routes_new_questions(trained_a, mirage, tmp_path):
    tmp = trained_a
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"id": "n1", "question": "Which nerve supplies the deltoid muscle?"}) + "\n"
                     + "Does smoking increase the risk of bladder cancer?\n")
    router_dir = tmp / "ckpt" / "a" / "mog" / "final"
    cmd = [sys.executable, "-m", "mogg.run.route", "--checkpoint", str(router_dir), "--questions", str(qfile),
           "--artifacts", str(tmp / "artifacts")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    recs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["id"] for r in recs] == ["n1", "2"]
    for r in recs:
        assert r["level_name"] in r["weights"] and 1 <= len(r["context"]) <= 2
        assert {"level", "chunk", "doc_id", "text"} <= set(r["context"][0]) and not r["seen_in_training"]
    # stdin, and a clear error for a directory that is not a router
    out = subprocess.run(cmd[:5] + ["--artifacts", str(tmp / "artifacts")], input="Is aspirin useful in preeclampsia?\n",
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 1
    bad = subprocess.run([sys.executable, "-m", "mogg.run.route", "--checkpoint", str(tmp)], input="q?\n",
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "not a router directory" in bad.stderr
