"""Issue 38: reading inside the chunk. Candidates and labels by hand on a toy ladder, the budgeted
selection against a per-question brute force, the cost weight's calibration, the sentence oracle
against brute force, the scorer's save/load, and the selector experiment end to end."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import ROOT, compose

from mogg.core.metrics import token_prf
from mogg.evaluation.frontier import calibrate_lambda, oracle_at
from mogg.ladders.base import Ladder, Units, partition_level
from mogg.routing.plans import decide
from mogg.run.budget.selector.candidates import Lexicon, candidates, evidence_overlap, features
from mogg.run.budget.selector.plans import estimated_f1, plan_table, rank_candidates
from mogg.search import Hits


def _ladder() -> Ladder:
    """Two documents of three sentences; level 0 = sentences, level 1 = documents."""
    text = ["Aspirin inhibits platelet aggregation.", "It is given after a heart attack.", "The dose is low.",
            "Warfarin needs monitoring of the INR.", "Vitamin K reverses warfarin.", "Bleeding is the main risk."]
    units = Units(text=text, doc=np.array([0, 0, 0, 1, 1, 1]), doc_ids=["asp", "war"])
    docs = partition_level("doc", np.array([0, 0, 0, 1, 1, 1]))
    sent = partition_level("1sent", np.arange(6))
    return Ladder(method="toy", units=units, levels=[sent, docs], meta={})


def test_candidates_and_labels_by_hand():
    from mogg.run.budget.selector.candidates import feature_names

    lad = _ladder()
    q = ["What reverses warfarin?"]
    # level 0: sentence 4 then 0 retrieved; level 1: document 1 (units 3-5)
    hits = Hits(np.array([[[4, 0], [1, -1]]]), np.array([[[2.0, 1.0], [3.0, -np.inf]]], dtype=np.float32))
    lex = Lexicon(lad, q)
    c = candidates(lad, hits, lex, depth=2, per_chunk=24)
    assert c.unit.tolist() == [0, 3, 4, 5] and c.q.tolist() == [0, 0, 0, 0]
    np.testing.assert_allclose(c.score[:, 0], [0.5, 0.0, 1.0, 0.0])  # relative to the level's top score
    np.testing.assert_allclose(c.score[:, 1], [0.0, 1.0, 1.0, 1.0])
    assert c.rank[:, 0].tolist() == [1, -1, 0, -1] and c.rank[:, 1].tolist() == [-1, 0, 0, 0]
    ev = ["Vitamin K reverses warfarin and the INR falls."]
    o = evidence_overlap(c, lex, ev)
    # by hand: unit 0 shares nothing; unit 3 "warfarin needs monitoring of the inr" shares warfarin, of?, the, inr
    from mogg.core.text import tokenize

    def clipped(u: str, e: str) -> int:
        from collections import Counter

        cu, ce = Counter(tokenize(u)), Counter(tokenize(e))
        return sum(min(n, ce[w]) for w, n in cu.items())

    assert o.tolist() == [clipped(lad.units.text[u], ev[0]) for u in c.unit]
    assert o[2] == len(tokenize(lad.units.text[4]))  # the evidence sentence itself: every token is gold
    import warnings

    with warnings.catch_warnings():  # options absent (NaN) is expected, not a RuntimeWarning (issue 50)
        warnings.simplefilter("error")
        x = features(lad, c, lex, context=False)
    names = feature_names(lad.level_names, False)
    opt_cols = [names.index(n) for n in ("option_match", "option_match_rel", "doc_option_match", "doc_option_match_rel")]
    assert x.shape == (4, 4 + 24) and np.isfinite(np.delete(x, opt_cols, axis=1)).all()
    assert np.isnan(evidence_overlap(c, lex, [""])).all()  # no evidence: no label
    # no options: the option columns are missing (NaN), not "matches nothing" (0): a set without
    # options must not read as a corner of one with them (issue 48)
    assert np.isnan(x[:, opt_cols]).all()


def test_the_context_columns_against_brute_force():
    """Issue 49: the neighbours' and the document's columns, per row, against a loop over rows."""
    from mogg.run.budget.selector.candidates import CONTEXT_FEATURES, feature_names

    lad = _ladder()
    qs = ["What reverses warfarin?", "Who takes aspirin?"]
    # question 0 sees units 0 and 3-5 (document 1 whole), question 1 units 0-2 and 4
    hits = Hits(np.array([[[4, 0], [1, -1]], [[4, -1], [0, -1]]]),
                np.array([[[2.0, 1.0], [3.0, -np.inf]], [[1.0, -np.inf], [2.0, -np.inf]]], dtype=np.float32))
    lex = Lexicon(lad, qs)
    c = candidates(lad, hits, lex, depth=2, per_chunk=24)
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(len(lad.units), 8))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    qe = rng.normal(size=(2, 8))
    qe /= np.linalg.norm(qe, axis=1, keepdims=True)
    x = features(lad, c, lex, emb[c.unit], qe, context=True)
    names = feature_names(lad.level_names, context=True)
    assert x.shape[1] == len(names) == len(feature_names(lad.level_names, False)) + len(CONTEXT_FEATURES)
    assert features(lad, c, lex, emb[c.unit], qe, context=False).shape[1] == len(feature_names(lad.level_names, False))
    col = {n: x[:, names.index(n)] for n in CONTEXT_FEATURES}
    cos = x[:, names.index("cosine")]
    match = x[:, names.index("match")]
    rows = {(int(q), int(u)): i for i, (q, u) in enumerate(zip(c.q, c.unit))}
    doc = lad.units.doc
    for i, (q, u) in enumerate(zip(c.q.tolist(), c.unit.tolist())):
        def nb(v, off, q=q, u=u):
            j = rows.get((q, u + off))
            return v[j] if j is not None and doc[u + off] == doc[u] else np.nan
        for name, off in (("prev_cosine", -1), ("next_cosine", 1)):
            np.testing.assert_allclose(col[name][i], nb(cos, off), rtol=1e-6)
        for name, v in (("window_cosine", cos), ("window_match", match)):
            near = [nb(v, o) for o in (-2, -1, 1, 2) if 0 <= u + o < len(doc)]
            near = [a for a in near if not np.isnan(a)]
            np.testing.assert_allclose(col[name][i], max(near) if near else np.nan, rtol=1e-6)
        same = [j for (qq, uu), j in rows.items() if qq == q and doc[uu] == doc[u]]
        np.testing.assert_allclose(col["doc_cosine_mean"][i], np.mean(cos[same]), rtol=1e-5)
        assert col["doc_cosine_rank"][i] == sum(cos[j] > cos[i] for j in same)


def test_the_option_features_by_hand():
    """A unit's share of the IDF mass of its question's answer-option words, and its document's best."""
    from mogg.run.budget.selector.candidates import feature_names

    lad = _ladder()
    q = ["What reverses warfarin?"]
    hits = Hits(np.array([[[4, 0], [1, -1]]]), np.array([[[2.0, 1.0], [3.0, -np.inf]]], dtype=np.float32))
    lex = Lexicon(lad, q, ["Vitamin K Aspirin Heparin"])
    c = candidates(lad, hits, lex, depth=2, per_chunk=24)
    x = features(lad, c, lex, context=False)
    names = feature_names(lad.level_names, False)
    from mogg.core.text import tokenize

    opt = set(tokenize("Vitamin K Aspirin Heparin", stopwords=True))
    idf = {w: lex.idf[lex.vocab[w]] for w in opt}
    mass = sum(idf.values())
    want = [sum(idf[w] for w in opt & set(tokenize(lad.units.text[u], stopwords=True))) / mass for u in c.unit]
    np.testing.assert_allclose(x[:, names.index("option_match")], want, rtol=1e-6)
    # units 3-5 are one document: each carries the document's best option match
    np.testing.assert_allclose(x[1:, names.index("doc_option_match")], max(want[1:]), rtol=1e-6)
    assert want[2] > 0 and want[1] == 0  # "Vitamin K reverses warfarin." names an option; unit 3 none


def test_a_long_chunk_contributes_its_units_closest_to_the_question():
    lad = _ladder()
    hits = Hits(np.array([[[-1], [1]]]), np.array([[[-np.inf], [1.0]]], dtype=np.float32))
    lex = Lexicon(lad, ["warfarin reversal vitamin"])
    c = candidates(lad, hits, lex, depth=1, per_chunk=1)
    assert c.unit.tolist() == [4]  # "Vitamin K reverses warfarin." shares the most IDF mass


def _brute_best_prefix(p, t, e, lam):
    """Per question: the best prefix (in greedy order) of F1_hat - lam * T, by plain Python."""
    best, arg = -np.inf, 0
    for k in range(1, len(p) + 1):
        g = sum(p[i] * t[i] for i in range(k))
        tt = sum(t[:k])
        v = 2 * g / (tt + e) - lam * tt
        if v > best + 1e-12:
            best, arg = v, k - 1
    return arg


@pytest.mark.parametrize("seed", range(5))
def test_budgeted_selection_equals_a_per_question_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_q, n = 7, 40
    q = np.sort(rng.integers(0, n_q, n))
    pred, tok = rng.random(n), rng.integers(1, 40, n).astype(float)
    unit = np.arange(n)
    ranked = rank_candidates(q, pred, tok, unit, n_q, 6)
    for lam in (0.0, 1e-3, 1e-2):
        util = estimated_f1(ranked, pred, tok, np.arange(n_q), 30.0)
        spend = np.where(ranked.rows >= 0, tok[np.maximum(ranked.rows, 0)], 0).cumsum(axis=1)
        got = decide(util, spend, lam)
        for i in range(n_q):
            rows = [r for r in ranked.rows[i] if r >= 0]
            if not rows:
                assert got[i] == 0
                continue
            # the ranking itself: density descending, ties fewer tokens, then the unit
            assert rows == sorted(np.flatnonzero(q == i), key=lambda r: (-pred[r], tok[r], r))[:6]
            assert got[i] == _brute_best_prefix(np.clip(pred[rows], 0, 1), tok[rows], 30.0, lam)


def test_the_cost_weight_is_calibrated_to_the_validation_target():
    rng = np.random.default_rng(1)
    n_q, k = 300, 30
    p = np.sort(rng.random((n_q, k)), axis=1)[:, ::-1]
    t = rng.integers(5, 40, (n_q, k)).astype(float)
    util = 2 * np.cumsum(p * t, 1) / (np.cumsum(t, 1) + 80.0)
    spend = np.cumsum(t, 1)
    free = spend[np.arange(n_q), decide(util, spend, 0.0)].mean()  # what the estimate reads unpenalised
    for target in (40.0, 120.0, 0.8 * free, 2 * free):
        lam = calibrate_lambda(util, spend, target)
        mean = spend[np.arange(n_q), decide(util, spend, lam)].mean()
        if target < free:  # the budget binds: spent to within 5% of it, never over
            assert 0.95 * target <= mean <= target + 1e-9, (target, mean)
        else:  # it does not: nothing is paid for tokens (lambda 0), less than B is read
            assert lam == 0.0 and mean == pytest.approx(free)


def test_the_sentence_oracle_against_brute_force():
    """Plans' true F1 equal token_prf of each prefix; the oracle over them is the brute-force best
    assignment under the mean budget, up to one question's move (oracle_at's guarantee)."""
    texts = ["alpha beta gamma", "delta", "alpha alpha", "epsilon zeta eta theta", "beta", "gamma delta"]
    unit = np.arange(6)
    q = np.array([0, 0, 0, 1, 1, 1])
    ev = ["alpha beta gamma delta", "beta epsilon"]
    density = np.array([1.0, 1.0, 0.5, 0.25, 1.0, 0.5])
    tok = np.array([3, 1, 2, 4, 1, 2], dtype=float)
    ranked = rank_candidates(q, density, tok, unit, 2, 3)
    f1, spend = plan_table(ranked, texts, unit, ev, np.arange(2))
    for i in range(2):
        for k in range(3):
            ctx = " ".join(texts[r] for r in ranked.rows[i][:k + 1])
            assert f1[i, k] == pytest.approx(token_prf([ctx], [ev[i]])[2][0])
    for budget in (2.0, 3.0, 4.5):
        best = max((f1[0, a] + f1[1, b]) / 2 for a, b in itertools.product(range(3), range(3))
                   if (spend[0, a] + spend[1, b]) / 2 <= budget + 1e-9)
        tx, fy = oracle_at(f1, spend, budget)
        assert tx <= budget + 1e-9 and fy <= best + 1e-9
        assert fy >= best - (f1.max() - f1.min()) / 2 - 1e-9


def test_selector_folds_save_load_and_predict_out_of_fold(tmp_path):
    from mogg.run.budget.selector.folds import crossfit_selector, predict_selector_folds

    rng = np.random.default_rng(0)
    n_q, per = 60, 8
    q = np.repeat(np.arange(n_q), per)
    x = rng.normal(size=(len(q), 5)).astype(np.float32)
    y = np.clip(0.5 + 0.4 * x[:, 0] + 0.05 * rng.normal(size=len(q)), 0, 1)
    tok = rng.integers(5, 30, len(q)).astype(float)
    ids = [f"q{i}" for i in range(n_q)]
    info = crossfit_selector(x, y, tok, q, np.full(n_q, 40.0), ids, 3, 0, {"n_estimators": 60}, 0.2, tmp_path)
    sf = predict_selector_folds(x, q, ids, tmp_path)
    assert np.isfinite(sf.pred).all() and np.corrcoef(sf.pred, y)[0, 1] > 0.8  # learned, out of fold
    assert [len(v[0]) for v in sf.val] == [len(f["val"]) for f in info["folds"]]
    again = crossfit_selector(x, y, tok, q, np.full(n_q, 40.0), ids, 3, 0, {"n_estimators": 60}, 0.2, tmp_path)
    assert again == info  # the same run: reused
    assert not list(tmp_path.rglob("*.pkl")) and (tmp_path / "fold0" / "model.txt").read_text().startswith("tree")


@pytest.mark.slow
def test_the_selector_experiment_runs_end_to_end(tmp_path):
    from mogg.run.app import train

    cfg = compose(["experiment=selector", "data=pubmedqa", "debug=tiny", "questions.limit=60", "frontier.routers.selector.cosine=false",
                   f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
                   f"paths.reports={tmp_path / 'r'}", "frontier.routers.actions.max_epochs=3", "evaluate_after=true",
                   "+frontier.routers.selector.params.n_estimators=20",
                   "+frontier.routers.selector.variants.ctx={context: true}", "+frontier.routers.selector.variants.doc={evidence: document}"])
    train(cfg)
    md = (tmp_path / "r" / "debug" / "results.md").read_text()
    for row in ("| selector |", "| selector (unguarded) |", "| route + trim |", "| sentence oracle |",
                "| selector (ctx) |", "| selector (doc) |"):  # the kind's variants: rows of the same run (issue 49)
        assert row in md
    assert "selector (ctx) against the selector (same questions, paired 95% interval): B=" in md
    assert (tmp_path / "c" / "debug" / "mog" / "selector" / "variants" / "ctx" / "folds.json").is_file()
    assert (tmp_path / "r" / "debug" / "mog_frontier_questions.npz").is_file()
    assert ROOT.exists()


def test_a_selector_variant_is_checked_like_the_selector():
    from mogg.run.budget.selector import EvidenceSelectorKind

    k = EvidenceSelectorKind(params={"n_estimators": 20}, variants={"deep": {"depth": 4, "params": {"num_leaves": 7}}})
    v = k.variant("deep")
    assert v.depth == 4 and v.params["n_estimators"] == 20 and v.params["num_leaves"] == 7 and not v.variants
    assert v.trim_of is None and k.depth == 8
    with pytest.raises(ValueError, match="trim_of cannot vary"):
        EvidenceSelectorKind(variants={"x": {"trim_of": None}})
    with pytest.raises(ValueError, match="evidence="):
        EvidenceSelectorKind(variants={"x": {"evidence": "mean"}})
    with pytest.raises(ValueError, match="not a variant name"):
        EvidenceSelectorKind(variants={"a/b": {"context": True}})


def test_the_selector_on_the_generic_example(tmp_path):
    """The selector stage through the real configs on the 12 generic questions (seconds)."""
    from mogg.run.app import train

    cfg = compose(["experiment=generic_example", "frontier=matched", "frontier/routers=[actions,selector]",
                   "frontier.routers.selector.cosine=false", "+frontier.routers.selector.params={n_estimators: 10, min_child_samples: 2}", "frontier.routers.actions.max_epochs=3",
                   f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
                   f"paths.reports={tmp_path / 'r'}", "evaluate_after=true", "budgets=[]"])
    train(cfg)
    md = (tmp_path / "r" / "generic_example" / "results.md").read_text()
    assert "| selector |" in md and "| sentence oracle |" in md and "ms per question" in md
    assert (tmp_path / "c" / "generic_example" / "mog" / "selector" / "folds.json").is_file()
