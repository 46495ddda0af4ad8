"""Eq. 1 profiles (mogg.routing.profiles): action weights, action utilities against brute force,
routing over actions, and train -> evaluate through the real configs."""

from __future__ import annotations

import numpy as np
import pytest

from mogg.routing.profiles import PROFILES, ProfileSpace, check_profiles, profile_vector


def test_each_profile_lets_the_right_levels_vote_and_injects_at_its_level():
    L = 5
    for g in range(L):
        for p in PROFILES:
            w = profile_vector(p, g, L)
            assert w.sum() == pytest.approx(1.0) and int(np.argmax(w)) == g  # eq. 2 injects at g
        assert np.flatnonzero(profile_vector("own", g, L)).tolist() == [g]
        assert np.flatnonzero(profile_vector("all", g, L)).tolist() == list(range(L))
        assert np.flatnonzero(profile_vector("coarser", g, L)).tolist() == list(range(g, L))
        assert np.flatnonzero(profile_vector("finer", g, L)).tolist() == list(range(g + 1))
        assert np.flatnonzero(profile_vector("near", g, L)).tolist() == list(range(max(g - 1, 0), min(g + 2, L)))
        votes = profile_vector("all", g, L)  # the voters weigh equally (g only breaks the tie)
        assert votes.max() / np.delete(votes, g).min() == pytest.approx(1.001)
    space = ProfileSpace(("own", "coarser"), 3)
    assert space.n == 6 and space.names(["a", "b", "c"])[4] == "coarser@b"
    np.testing.assert_array_equal(space.level([0, 4, 5]), [0, 1, 2])
    np.testing.assert_allclose(space.weights([1]), [[0, 1, 0]])


def test_bad_profiles_are_refused_and_the_setting_parses():
    from mogg.routing.kinds.mlp import MLPRouter

    assert check_profiles("own+all") == ("own", "all") and check_profiles(None) == ()
    for bad in (["own", "own"], ["widest"]):
        with pytest.raises(ValueError, match="router.profiles"):
            check_profiles(bad)
    with pytest.raises(ValueError, match="unknown eq. 1 profile"):
        profile_vector("widest", 0, 3)
    s = MLPRouter(profiles=["own", "all"])
    assert s.profiles == ("own", "all") and s.key()["profiles"] == ["own", "all"]
    assert "profiles" not in MLPRouter().key()  # level routers keep their run ids
    from mogg.routing.kinds.base import RouterKind

    class OnePerLevel(RouterKind):  # a kind that reads one input per level cannot score eq. 1 actions
        profiles_ok = False

    with pytest.raises(ValueError, match="router.profiles needs a router that scores one output per action"):
        OnePerLevel(profiles=["own"])


def test_a_router_over_actions_gives_its_actions_weights_and_falls_back_to_an_action():
    import torch

    from mogg.routing.networks.mlp import RouterMLP
    from mogg.routing.router_dir import TrainedRouter

    space = ProfileSpace(("own", "all"), 3)
    z = np.array([[0.0, 0, 0, 0, 3, 0], [2.0, 0, 0, 0, 0, 0.5]])
    class Fixed(RouterMLP):  # the network's outputs set by hand
        def __init__(self):
            super().__init__(2, space.n, 0, 0.0)

        def forward(self, x):
            return torch.as_tensor(z[: len(x)])

    spec = {"levels": ["a", "b", "c"], "network": {"in_dim": 2, "n_levels": 6}, "objective": "utility",
            "profiles": ["own", "all"], "prior": [0, 0, 0, 0, 1.0, 0],
            "decision": {"rule": "argmax", "fallback_level": 4, "margin": 1.0}}
    r = TrainedRouter(Fixed(), spec).route(np.zeros((2, 2)))
    np.testing.assert_allclose(r.weights, space.weights([4, 0]))
    np.testing.assert_array_equal(r.level, [1, 0])
    # fallback: question 2's best action (0, advantage 2 over action 4's 0) beats the margin; question 1's is action 4 itself
    np.testing.assert_allclose(r.fallback_weights, space.weights([4, 0]))
    r = TrainedRouter(Fixed(), {**spec, "decision": {**spec["decision"], "margin": 5.0}}).route(np.zeros((2, 2)))
    np.testing.assert_allclose(r.fallback_weights, space.weights([4, 4]))
    np.testing.assert_allclose(r.prior[0], space.weights([4])[0])
    np.testing.assert_array_equal(space.action_of(space.weights([5, 0, 3])), [5, 0, 3])


@pytest.fixture(scope="module")
def small_run(tmp_path_factory, mirage):
    """train + evaluate router=profiles on 40 PubMedQA* questions through the real configs."""
    from conftest import compose

    from mogg.run.app import evaluate, train

    tmp = tmp_path_factory.mktemp("profiles")
    base = [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp / 'artifacts'}", f"paths.checkpoints={tmp / 'ckpt'}",
            f"paths.reports={tmp / 'reports'}", "questions.limit=40", "corpus.sources.1.min_chars=400", "n_folds=2",
            "budgets=[]", "router=profiles", "run_name=prof", "trainer.max_epochs=30", "router.fit=both"]
    cfg = compose(base)
    train(cfg)
    return cfg, evaluate(cfg)["mog"], tmp, base


def test_action_utilities_equal_scoring_each_actions_selection(small_run):
    """profile_f1 against brute force: every action scored through the evaluation's own
    selection + metric path; the ``own`` actions are the fixed levels."""
    from mogg.evaluation.policies import score_selection
    from mogg.run.prepare_stage import prepare_all
    from mogg.selection import mog_select

    cfg, _, _, _ = small_run
    prep = prepare_all(cfg)["mog"]
    space = ProfileSpace(prep.profiles, prep.ladder.n_levels)
    assert prep.profile_f1.shape == (len(prep.items), space.n) and prep.profile_labels.shape == prep.profile_f1.shape
    for a, w in enumerate(space.matrix()):
        W = np.broadcast_to(w, (len(prep.items), len(w)))
        ref = score_selection(prep, mog_select(prep.ladder, prep.hits, W, cfg.k), space.level(np.full(len(W), a)), W)
        np.testing.assert_allclose(prep.profile_f1[:, a], ref.metrics["f1"], atol=1e-12, err_msg=space.names(prep.ladder.level_names)[a])
    np.testing.assert_allclose(prep.profile_f1[:, : space.n_levels], prep.fixed_f1, atol=1e-12)
    labels, utilities = prep.router_targets()
    assert utilities is prep.profile_f1 and labels is prep.profile_labels


def test_router_profiles_trains_and_evaluates_through_the_real_configs(small_run):
    _, s, tmp, _ = small_run
    pols = s["policies"]
    for name in ("mog_router", "best_action", "action_oracle", "oracle"):
        assert name in pols
    # the router's chosen actions can never beat the action oracle, nor the best fixed action beat it
    assert pols["mog_router"]["f1"]["mean"] <= pols["action_oracle"]["f1"]["mean"] + 1e-12
    assert pols["best_action"]["f1"]["mean"] <= pols["action_oracle"]["f1"]["mean"] + 1e-12
    assert "@" in s["best_action"] and np.isfinite(s["action_gap_closed"]["mog_router"])
    md = (tmp / "reports" / "prof" / "results.md").read_text()
    assert "over eq. 1 actions (router.profiles)" in md and "| best_action |" in md


def test_profiles_need_metric_labels(small_run):
    from conftest import compose

    from mogg.run.prepare_stage import prepare_all

    *_, base = small_run
    with pytest.raises(ValueError, match="router.profiles needs labels=metric"):
        prepare_all(compose([*base, "labels=tfidf"]))


def test_mogg_route_names_the_action_a_saved_profile_router_chose(small_run, mirage):
    from mogg.run.route import RoutingSession

    _, _, tmp, _ = small_run
    session = RoutingSession.from_checkpoint(tmp / "ckpt" / "prof" / "mog" / "final", tmp / "artifacts", data_dir=mirage.parent)
    rec = session.route(["Does aspirin lower the risk of a second stroke?"])[0]
    profile, level = rec["action"].split("@")
    assert profile in PROFILES and level == rec["level_name"] and rec["context"]
    w = np.array(list(rec["weights"].values()))
    names = session.index.ladder.level_names
    np.testing.assert_allclose(w, profile_vector(profile, names.index(level), len(names)), atol=1e-6)


def test_a_profile_router_applied_elsewhere_falls_back_to_its_training_sets_best_action(small_run):
    from conftest import compose

    from mogg.run.app import evaluate

    _, _, tmp, base = small_run
    cfg = compose([*base, "run_name=applied", f"router.checkpoint={tmp / 'ckpt' / 'prof'}", "router.allow_overlap=true",
                   "router.fit=all"])
    pols = evaluate(cfg)["mog"]["policies"]
    assert "mog_transfer" in pols and "source_best_fixed" in pols
    md = (tmp / "reports" / "applied" / "results.md").read_text()
    assert "the best fixed action on" in md and "source_best_fixed is " in md


def test_a_router_over_actions_learns_when_the_vote_pays(tmp_path):
    """Toy: one input says whether every level's vote (``all@1``) or the level alone (``own@2``)
    gives the better context; the utilities of the other actions are noise. Cross-fitted, the
    router over actions picks the right one on >= 95% of held-out questions."""
    from mogg.routing.fitting.kfold import crossfit, predict_crossfit
    from mogg.routing.kinds.mlp import MLPRouter
    from mogg.routing.networks.training import TrainerConfig

    rng = np.random.default_rng(0)
    n, space = 400, ProfileSpace(("own", "all"), 3)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    x[:, 0] = np.sign(x[:, 0]) * (0.5 + np.abs(x[:, 0]))  # a clear margin: the toy tests the mapping, not the boundary
    vote = x[:, 0] > 0
    u = rng.uniform(0.0, 0.3, size=(n, space.n))
    u[vote, 4] = 0.9  # all@1
    u[~vote, 2] = 0.9  # own@2
    ids = [str(i) for i in range(n)]
    labels = np.eye(space.n)[u.argmax(1)]
    s = MLPRouter(profiles=["own", "all"], hidden=16)
    crossfit(x, labels, u, ids, ids, 4, 0, s, TrainerConfig(max_epochs=200, patience=20), tmp_path,
             {"levels": ["a", "b", "c"]})
    r = predict_crossfit(x, ids, tmp_path)
    chosen = space.action_of(r.weights)
    assert (chosen == u.argmax(1)).mean() >= 0.95
    np.testing.assert_array_equal(r.level, space.level(chosen))


def test_the_vote_envelope_is_the_fixed_table_plus_every_profiles_ranking(tmp_path, mirage):
    """frontier + router.profiles: the family of fixed (profile, level, k, cap) holds the fixed
    table's columns unchanged, and a voted column equals scoring its eq. 1-2 selection directly."""
    from conftest import compose
    from test_frontier import _frontier_overrides

    from mogg.core.metrics import token_prf
    from mogg.evaluation.frontier import choose_config
    from mogg.run.budget.shared import action_table_of
    from mogg.run.frontier_stage import frontier_settings, vote_envelope
    from mogg.run.prepare_stage import prepare_all
    from mogg.selection import mog_select

    cfg = compose(_frontier_overrides(tmp_path, mirage, ["router=profiles"]))
    prep, fs = prepare_all(cfg)["mog"], frontier_settings(cfg)
    _, table, _, _ = action_table_of(prep, fs)
    fam = vote_envelope(prep, fs, table)
    n_fixed = table.f1.shape[1]
    np.testing.assert_array_equal(fam.f1[:, :n_fixed], table.f1)
    assert fam.f1.shape[1] == n_fixed * len(prep.profiles) and not fam.fixed  # own = the fixed table
    space = ProfileSpace(prep.profiles, prep.ladder.n_levels)
    a = space.names(prep.ladder.level_names).index("all@" + prep.ladder.level_names[1])
    col = fam.configs.index(f"all@{prep.ladder.level_names[1]} k=3")
    sel = mog_select(prep.ladder, prep.deep, space.weights(np.full(len(prep.items), a)), 3)
    ref = token_prf(sel.contexts(prep.ladder), [it.evidence_text for it in prep.items])[2]
    np.testing.assert_allclose(fam.f1[:, col], ref, atol=1e-12)
    rows = np.arange(len(prep.items))
    for b in fs.budgets:  # a superset of the envelope's configurations: never worse in hindsight
        assert fam.f1[:, choose_config(fam.f1, fam.tokens, rows, b)].mean() >= \
            table.f1[:, choose_config(table.f1, table.tokens, rows, b)].mean() - 1e-12
