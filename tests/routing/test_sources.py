"""Many sources, one router (#22): score normalisation across corpora, stacking with per-set
weights, the candidates' similarity inputs, and leave-one-set-out through the real configs."""

import numpy as np
import pytest
from conftest import compose
from fakes import BagOfWordsEncoder

from mogg.routing.fitting.experts import ExpertsRouter, load_router
from mogg.routing.fitting.sources import Source, repeats, stack_sources
from mogg.routing.inputs.features import FeatureRecipe, candidate_similarity, score_features
from mogg.run.app import evaluate, train
from mogg.search import Hits


def _hits(scale: float, seed: int = 0, n_q: int = 6, n_l: int = 4, k_r: int = 3) -> Hits:
    rng = np.random.default_rng(seed)
    scores = np.sort(rng.uniform(0.5, 4.0, (n_q, n_l, k_r)), axis=2)[:, :, ::-1] * scale
    ids = rng.integers(0, 5, (n_q, n_l, k_r))
    ids[0, 1, 2] = -1  # padding
    return Hits(ids=ids, scores=scores.astype(np.float32))


def test_question_normalisation_makes_score_scales_comparable():
    """Two corpora whose retriever scores differ by a factor of 10 (e.g. BM25 on longer
    documents): with ``normalise=question`` the router sees the same inputs, without it not."""
    a, b = _hits(1.0), _hits(10.0)
    np.testing.assert_allclose(score_features(a, "question"), score_features(b, "question"), rtol=1e-5, atol=1e-6)
    assert not np.allclose(score_features(a, "none"), score_features(b, "none"))
    # the relative part is the same under both; only the per-level top-1 column changes
    n_rel = a.shape[1] * a.shape[2]
    np.testing.assert_allclose(score_features(a, "none")[:, :n_rel], score_features(a, "question")[:, :n_rel])


def test_recipe_keeps_normalise_and_old_routers_load_as_none():
    r = FeatureRecipe.make("retrieval+lengths", 3, 4, normalise="question")
    assert FeatureRecipe.from_json(r.to_json()) == r
    old = FeatureRecipe.make("retrieval+lengths", 3, 4)
    assert "normalise" not in old.to_json()  # data keys and router files from before the option are unchanged
    assert FeatureRecipe.from_json(old.to_json()).normalise == "none"
    with pytest.raises(ValueError, match="normalise"):
        FeatureRecipe.make("retrieval", 3, 4, normalise="set")


def _source(name, n, seed, width=5, levels=3, weight=1.0, spread=1.0):
    rng = np.random.default_rng(seed)
    u = rng.uniform(0, spread, (n, levels))
    return Source(name, rng.normal(size=(n, width)).astype(np.float32), np.eye(levels)[u.argmax(1)].astype(np.float32), u,
                  [f"{name} question {i}?" for i in range(n)], weight)


def test_stack_sources_weights_splits_and_scales():
    big, small = _source("big", 200, 0, spread=0.5), _source("small", 50, 1, spread=0.05)
    assert repeats([200, 50], [1.0, 1.0]) == [1, 4] and repeats([200, 50], [1.0, 0.25]) == [1, 1]
    st = stack_sources([big, small], val_fraction=0.2, seed=0)
    train, val = st["train"], st["val"]
    assert not set(train) & set(val)  # a repeated row never sits on both sides
    n_small_train = np.sum(train >= 200)
    assert n_small_train == 4 * 40 and np.sum(train < 200) == 160  # equal weights: the small set counts as much
    assert sorted(np.r_[np.unique(train), val].tolist()) == list(range(250))
    # per-set utility scale: both sets' centred utilities have unit spread after stacking
    for rows in (slice(0, 200), slice(200, 250)):
        c = st["utilities"][rows] - st["utilities"][rows].mean(axis=1, keepdims=True)
        assert c.std() == pytest.approx(1.0, rel=1e-6)
    with pytest.raises(ValueError, match="one ladder builder and one recipe"):
        stack_sources([big, _source("wide", 30, 2, width=6)], 0.2, 0)
    with pytest.raises(ValueError, match="weight must be > 0"):
        _source("bad", 10, 3, weight=0.0)
    with pytest.raises(ValueError, match="unique"):
        stack_sources([big, big], 0.2, 0)


class _Ladder:
    def __init__(self, texts):
        self._t, self.n_levels = texts, len(texts)

    def texts(self, j):
        return self._t[j]


def test_candidate_similarity_equals_brute_force():
    words = str.split
    enc = BagOfWordsEncoder(16, {"fake": 1}, words, lambda w: sum(map(ord, w)))
    ladder = _Ladder([["aspirin heart", "lung cancer smoking", "fever child"],
                      ["aspirin heart attack risk in adults", "smoking and lung cancer in men"]])
    ids = np.array([[[0, 1], [1, -1]], [[2, 0], [0, 1]]])
    hits = Hits(ids=ids, scores=np.ones(ids.shape, dtype=np.float32))
    qs = ["aspirin heart", "lung cancer"]
    q = enc.encode(qs)
    calls = []
    sim = candidate_similarity(hits, ladder, q, lambda t: calls.append(len(t)) or enc.encode(t))
    assert len(calls) == 2  # one encoder call per level, distinct chunks only
    for i in range(2):
        for j in range(2):
            for r in range(2):
                c = ids[i, j, r]
                if c < 0:
                    assert sim[i, j, r] == 0
                    continue
                e = enc.encode([ladder.texts(j)[c]])[0]
                want = float(q[i] @ e / (np.linalg.norm(q[i]) * np.linalg.norm(e)))
                assert sim[i, j, r] == pytest.approx(want, abs=1e-6)


def _ov(tmp_path, mirage, *extra):
    return [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'artifacts'}",
            f"paths.checkpoints={tmp_path / 'ckpt'}", f"paths.reports={tmp_path / 'reports'}",
            "n_folds=2", "trainer.max_epochs=20", "trainer.patience=3", "budgets=[]", *extra]


def test_train_sources_refused_clearly(tmp_path, mirage):
    cfg = compose(_ov(tmp_path, mirage, "experiment=loso", "heldout_set=medmcqa", "train_sources.pubmedqa.weight=-1"))
    with pytest.raises(ValueError, match="train_sources.pubmedqa.weight must be a number > 0"):
        train(cfg)
    cfg = compose(_ov(tmp_path, mirage, "experiment=loso", "heldout_set=medmcqa", "train_questions={limit:3}"))
    with pytest.raises(ValueError, match="train_questions .* or train_sources"):
        train(cfg)
    # the held-out set chosen with data= (not heldout_set=) trained on the set it is read on: before
    # issue 61 the run went ahead, its "transferred" rows in-set
    cfg = compose(_ov(tmp_path, mirage, "experiment=loso", "data=covidqa"))
    with pytest.raises(ValueError, match="train_sources.covidqa is this run's own question set"):
        train(cfg)
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize("transfer", ["experts", pytest.param("pooled", marks=pytest.mark.slow)])  # pooled: slow, 10 s
def test_leave_one_set_out_report(tmp_path, mirage, transfer):
    """experiment=loso heldout_set=medmcqa shrunk: two sources over two corpora, one router on both
    (source experts, the experiment's default, or pooled), one per source, the held-out set
    cross-fitted too; one report with every row."""
    ov = _ov(tmp_path, mirage, "experiment=loso", "heldout_set=medmcqa", f"router.transfer={transfer}",
             "questions.min_chars=400", "questions.limit=40",
             "corpus.sources.1.min_chars=400", "train_sources.pubmedqa.questions.limit=50",
             "train_sources.pubmedqa.corpus.sources.1.min_chars=400", "train_sources.covidqa.questions.limit=50")
    cfg = compose(ov)
    out = train(cfg)["mog"]
    assert set(out["sources"]) == {"pubmedqa", "covidqa"}
    s = evaluate(cfg)["mog"]
    assert {"mog_router", "mog_transfer", "mog_transfer@pubmedqa", "mog_transfer@covidqa",
            "source_best_fixed"} <= set(s["policies"])
    md = (tmp_path / "reports" / "loso_medmcqa" / "results.md").read_text()
    for row in ("## Leave-one-set-out: `mog`", "router trained on the sets pubmedqa + covidqa",
                "router trained on pubmedqa only", "router trained on covidqa only",
                "best fixed level chosen on the sets pubmedqa + covidqa", "n = 40 questions"):
        assert row in md
    final = load_router(tmp_path / "ckpt" / "loso_medmcqa" / "mog" / "final")
    assert isinstance(final, ExpertsRouter) == (transfer == "experts")
    assert ("source experts (pubmedqa + covidqa)" in md) == (transfer == "experts")


@pytest.mark.slow  # ~25 s idle (three sets prepared, two cross-fits, the transfer fit): pytest -m slow
def test_leave_one_set_out_at_matched_cost(tmp_path, mirage):
    """Issue 40: experiment=loso_frontier heldout_set=medmcqa shrunk: the action router trained on the two other
    sets (actions/transfer), and the held-out frontier table with the transferred router and the
    training sets' envelope, both within B in the held-out set's own tokens."""
    import json

    from mogg.run.budget.actions.deploy import DeployedActions

    ov = _ov(tmp_path, mirage, "experiment=loso_frontier", "heldout_set=medmcqa", "questions.min_chars=400",
             "questions.limit=40",
             "corpus.sources.1.min_chars=400", "train_sources.pubmedqa.questions.limit=50",
             "train_sources.pubmedqa.corpus.sources.1.min_chars=400", "train_sources.covidqa.questions.limit=50",
             "frontier.depth=3", "frontier.caps=[null,32,64]", "frontier.n_boot=50", "frontier.routers.actions.max_epochs=8")
    cfg = compose(ov)
    out = train(cfg)["mog"]
    dep = DeployedActions.load(tmp_path / "ckpt" / "loso_frontier_medmcqa" / "mog" / "actions" / "transfer")
    assert out["actions"]["transfer"]["budgets"] == {b: p["deploy"] for b, p in dep.budgets.items()}
    assert dep.spec["fit"]["sources"] == ["pubmedqa", "covidqa"] and len(dep.spec["configs"]["train_f1"]) == dep.space.n
    fr = evaluate(cfg)["mog"]["frontier"]
    for b, row in fr["budgets"].items():
        t, e = row["transferred router"], row["training sets' envelope"]
        assert e["tokens"]["mean"] <= b + 1e-9  # the training sets' best configuration that fits B here
        assert t["config"] == f"{dep.budgets[b]['deploy']} deployed"
        if dep.budgets[b]["deploy"] == "envelope":  # the guard kept the envelope: the same contexts
            assert t["f1"]["mean"] == e["f1"]["mean"] and t["vs_training_envelope"]["mean"] == 0
        else:
            assert t["tokens"]["mean"] <= b + 1e-6  # lambda recalibrated to B on the held-out set's tokens
    md = (tmp_path / "reports" / "loso_frontier_medmcqa" / "results.md").read_text()
    assert "| transferred router |" in md and "| training sets' envelope |" in md
    assert "The transferred router (trained on the other sets" in md
    assert "transferred router" in json.loads((tmp_path / "reports" / "loso_frontier_medmcqa" / "metrics.json")
                                              .read_text())["mog"]["frontier"]["budgets"]["64"]
