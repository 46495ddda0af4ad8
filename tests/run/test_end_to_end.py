"""The real Hydra configs, shrunk: prepare -> train (cross-fit) -> evaluate -> report."""

import json

import numpy as np
import pytest
from conftest import compose

from mogg.core.artifacts import ArtifactError
from mogg.run.app import evaluate, train
from mogg.run.prepare_stage import prepare_all
from mogg.run.router_store import load_router_predictions


def _overrides(tmp_path, mirage, extra=()):
    return [
        f"paths.data_dir={mirage.parent}",
        f"paths.artifacts={tmp_path / 'artifacts'}",
        f"paths.checkpoints={tmp_path / 'ckpt'}",
        f"paths.reports={tmp_path / 'reports'}",
        "questions.limit=60",
        "corpus.sources.1.min_chars=400",  # fewer distractors: keeps the test fast
        "n_folds=3",
        "trainer.max_epochs=30",
        "trainer.patience=5",
        "run_name=e2e",
        *extra,
    ]


def test_train_then_evaluate(tmp_path, mirage):
    cfg = compose(_overrides(tmp_path, mirage))
    out = train(cfg)
    ck = tmp_path / "ckpt" / "e2e" / "mog"
    folds = json.loads((ck / "folds.json").read_text())["folds"]
    # train / val / test of every fold are disjoint, and the tests partition the questions
    tests = [set(f["test"]) for f in folds]
    assert sum(map(len, tests)) == 60 and len(set().union(*tests)) == 60
    for f in folds:
        assert not (set(f["train"]) & set(f["test"])) and not (set(f["val"]) & set(f["test"]))
        assert not (set(f["train"]) & set(f["val"]))
    assert (ck / "fold0" / "router.safetensors").exists() and out["mog"]["epochs"]

    summaries = evaluate(cfg)
    s = summaries["mog"]
    pols = s["policies"]
    assert {"mog_router", "mog_prior", "oracle", "random", "topk_all", "labels"} <= set(pols)
    assert sum(p.startswith("fixed:") for p in pols) == 5
    best = max(v["f1"]["mean"] for k, v in pols.items() if k.startswith("fixed:"))
    assert pols["oracle"]["f1"]["mean"] >= best  # the oracle picks the best level per question
    rep = tmp_path / "reports" / "e2e"
    for f in ("metrics.json", "results.md", "results.csv", "records.jsonl", "policies.png", "levels.png"):
        assert (rep / f).stat().st_size > 0
    recs = [json.loads(line) for line in (rep / "records.jsonl").read_text().splitlines()]
    assert len(recs) == 60 and recs[0]["fold"] in (0, 1, 2)
    assert set(recs[0]["policies"]["mog_router"]) >= {"context", "f1", "levels", "docs"}


def test_router_refused_on_other_data(tmp_path, mirage):
    cfg = compose(_overrides(tmp_path, mirage))
    train(cfg)
    other = compose(_overrides(tmp_path, mirage, ["labels=tfidf"]))
    prep = prepare_all(other)["mog"]
    with pytest.raises(ArtifactError, match="different data"):
        load_router_predictions(other, "mog", prep)


def test_baselines_only_and_generic_format(tmp_path, mirage):
    # the generic jsonl pair runs by config alone
    from mogg.data.qa import PubMedQAStar

    items = PubMedQAStar(str(mirage / "benchmark.json"), str(mirage / "rawdata/pubmedqa/data/test_set.json"), limit=12).load()
    qa = tmp_path / "qa.jsonl"
    corpus = tmp_path / "corpus.jsonl"
    with open(qa, "w") as f:
        for it in items:
            f.write(json.dumps({"id": it.id, "question": it.question, "options": it.options, "answer": it.answer,
                                "gold_doc_ids": it.gold_doc_ids, "gold_evidence": it.gold_evidence}) + "\n")
    with open(corpus, "w") as f:
        for it in items:
            f.write(json.dumps({"id": it.gold_doc_ids[0], "title": "", "content": it.evidence_text}) + "\n")
        for i in range(30):
            f.write(json.dumps({"id": f"x{i}", "title": "Noise", "content": f"Unrelated passage number {i}. It talks about weather."}) + "\n")
    ov = [
        f"paths.artifacts={tmp_path / 'a'}", f"paths.reports={tmp_path / 'r'}", "run_name=gen",
        "questions=generic", f"questions.path={qa}", "corpus=jsonl", f"corpus.sources.0.paths={corpus}",
        "use_router=false",
    ]
    from mogg.data.leakage import LeakageError

    with pytest.raises(LeakageError, match="12 gold documents .by id. for 12 questions"):
        evaluate(compose(ov))  # the corpus holds every gold abstract: refused unless declared
    s = evaluate(compose(ov + ["corpus.allow_gold=true"]))["mog"]
    assert "gold-context setting (corpus.allow_gold=true)" in (tmp_path / "r" / "gen" / "results.md").read_text()
    assert s["policies"]["oracle"]["gold_hit"]["mean"] == 1.0
    assert np.isfinite(s["policies"]["fixed:doc"]["f1"]["mean"])


@pytest.mark.slow
def test_full_pubmedqa_router_beats_best_fixed(tmp_path, mirage):
    """The headline claim, on all 500 PubMedQA* questions (about a minute on 2 cores)."""
    cfg = compose([
        f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
        f"paths.reports={tmp_path / 'r'}", "experiment=pubmedqa",
    ])
    train(cfg)
    s = evaluate(cfg)["mog"]
    fixed = s["policies"][s["best_fixed"]]["f1"]
    router = s["policies"]["mog_router"]["f1"]
    assert router["mean"] - fixed["mean"] > 2 * max(router["se"], fixed["se"])
    assert s["gap_closed"]["mog_router"] >= 0.5


def test_multi_corpus_merges_per_corpus_topk(tmp_path, mirage):
    """Two corpora searched separately: each contributes its own top-k_r per level."""
    from hydra.utils import instantiate

    from mogg.ladders.store import build_ladder
    from mogg.run.prepare_stage import prepare_all
    from mogg.search import level_retrievers, search_levels

    ov = [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'a'}", "corpus=medcorp_local",
          "corpus.corpora.medmcqa.sources.0.min_chars=400", "questions.limit=40", "use_router=false"]
    cfg = compose(ov)
    prep = prepare_all(cfg)["mog"]
    assert prep.hits.shape == (40, 5, 6)  # k_r=3 from each of 2 corpora
    pub = instantiate(cfg.corpus).parts[0][1]
    lad, key = build_ladder(pub, instantiate(cfg.ladders.mog), tmp_path / "a")
    ref = search_levels(level_retrievers(lad, instantiate(cfg.retriever), tmp_path / "a", key), [it.question for it in prep.items], 3)
    n_pub = np.array([len(lv) for lv in lad.levels])
    for lvl in range(5):
        from_pub = prep.hits.ids[:, lvl][prep.hits.ids[:, lvl] < n_pub[lvl]].reshape(40, 3)
        assert np.array_equal(np.sort(from_pub, 1), np.sort(ref.ids[:, lvl], 1))
    assert (np.diff(prep.hits.scores, axis=2) <= 0).all()  # merged per level by score
    s = evaluate(compose(ov + [f"paths.reports={tmp_path / 'r'}"]))["mog"]
    assert s["policies"]["oracle"]["gold_hit"]["mean"] > 0.9


@pytest.mark.slow  # 45 s: every ladder builder through one report (the default run stays under 10 minutes)
def test_all_ladders_one_report(tmp_path, mirage):
    """MoG, MoGG and RAPTOR (offline extractive summaries) in one evaluate.py report, with the
    tree policies next to the fixed levels."""
    ov = [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'a'}", f"paths.reports={tmp_path / 'r'}",
          "experiment=all_ladders", "questions.limit=30", "corpus.sources.1.min_chars=2000", "use_router=false",
          "ladders.raptor.umap_neighbors=5", "ladders.raptor.max_layers=2", "ladders.raptor.leaf_tokens=300",
          "encoder.max_length=32"]  # MiniLM on 2 CPU cores: ~40 ms a 100-token leaf; 32 tokens keep the test short
    s = evaluate(compose(ov))
    assert set(s) == {"mog", "mogg", "raptor"}
    pols = s["raptor"]["policies"]
    assert {"collapsed_tree", "tree_traversal", "fixed:leaf:300tok", "fixed:layer1"} <= set(pols)
    assert pols["collapsed_tree"]["ctx_tokens"]["mean"] <= 300
    md = (tmp_path / "r" / "all_ladders" / "results.md").read_text()
    assert "Graph of `mogg`" in md and "Tree of `raptor`" in md


def test_generic_example_experiment(tmp_path):
    """The shipped generic-format example trains and evaluates by config alone (no MIRAGE needed)."""
    from conftest import ROOT

    ov = ["experiment=generic_example", f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
          f"paths.reports={tmp_path / 'r'}", f"questions.path={ROOT / 'examples/generic/questions.jsonl'}",
          f"corpus.sources.0.paths={ROOT / 'examples/generic/corpus.jsonl'}", "trainer.max_epochs=30"]
    cfg = compose(ov)
    train(cfg)
    s = evaluate(cfg)["mog"]
    assert s["n_questions"] == 12 and s["policies"]["mog_router"]["f1"]["n"] == 12
    assert s["policies"]["oracle"]["gold_hit"]["mean"] == 1.0


def test_evaluation_logged_to_wandb_offline(tmp_path, monkeypatch):
    """logger=wandb: the evaluation's metrics are logged to an offline run (no network)."""
    from conftest import ROOT

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    ov = ["experiment=generic_example", f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
          f"paths.reports={tmp_path / 'r'}", f"paths.outputs={tmp_path / 'o'}", "use_router=false", "logger=wandb",
          f"questions.path={ROOT / 'examples/generic/questions.jsonl'}",
          f"corpus.sources.0.paths={ROOT / 'examples/generic/corpus.jsonl'}"]
    evaluate(compose(ov))
    import wandb

    # run.finish() returns before wandb's service has written the transaction log; teardown
    # waits for the service to exit, so the file is complete (reading earlier raced the writer)
    wandb.teardown()
    runs = list((tmp_path / "o" / "wandb").glob("offline-run-*/*.wandb"))
    assert len(runs) == 1
    blob = runs[0].read_bytes()  # the offline run's records (protobuf keeps the keys as plain strings)
    assert b"mog/oracle/f1" in blob and b"mog/fixed:L2:4sent/gap_closed" in blob
