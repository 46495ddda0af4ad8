"""Source experts (router.transfer=experts, #22): the k-NN support against brute force, the gate,
routing each question with the source it resembles, the fallback outside the support, declining
a set, and the router directory's round trip."""

import numpy as np
import pytest

from mogg.core.artifacts import ArtifactError
from mogg.routing.fitting.experts import ExpertsRouter, SourceGate, Support, load_router
from mogg.routing.fitting.sources import Source, fit_experts, fit_sources
from mogg.routing.kinds.mlp import MLPRouter
from mogg.routing.networks.training import TrainerConfig
from mogg.routing.router_dir import TrainedRouter

TRAINER = TrainerConfig(max_epochs=150, patience=20, batch_size=64, val_fraction=0.2)


def test_support_distances_and_threshold_equal_brute_force():
    rng = np.random.default_rng(0)
    ref, q, k = rng.normal(size=(60, 3)).astype(np.float32), rng.normal(size=(7, 3)).astype(np.float32), 4
    sup = Support.fit(ref, k, 0.9)
    d = np.sqrt(((q[:, None] - ref[None]) ** 2).sum(-1))
    np.testing.assert_allclose(sup.distance(q), np.sort(d, 1)[:, :k].mean(1), rtol=1e-5)
    own = np.sqrt(((ref[:, None] - ref[None]) ** 2).sum(-1))
    loo = np.sort(own, 1)[:, 1:k + 1].mean(1)  # each row's own zero distance left out
    assert sup.threshold == pytest.approx(np.quantile(loo, 0.9), rel=1e-5)
    assert sup.inside(ref).mean() >= 0.9  # (with its own zero distance a training row is nearer still)
    assert not sup.inside(ref + 100).any()


def test_gate_separates_sources_and_binary_matches_sklearn():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(80, 3)), rng.normal(size=(40, 3)) + [5.0, 0, 0]
    gate = SourceGate.fit([a, b], ["a", "b"], seed=0)
    p = gate.proba(np.r_[a, b])
    assert p.shape == (120, 2) and np.allclose(p.sum(1), 1)
    assert p[:80, 0].mean() > 0.9 and p[80:, 1].mean() > 0.9
    x = np.r_[a, b]
    ref = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000, random_state=0).fit(
        gate.standardise(x), np.r_[np.zeros(80), np.ones(40)])
    np.testing.assert_allclose(p, ref.predict_proba(gate.standardise(x)), atol=1e-8)


def _toy(name, n, seed, shift, flip):
    """Two levels; the better one is read from input 1, with the opposite sign in the two sources;
    the sources sit apart along input 0 (the gate can tell them apart)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    x[:, 0] += shift
    p = 1 / (1 + np.exp(-4 * x[:, 1] * (-1 if flip else 1)))
    u = np.c_[p, 1 - p]
    return Source(name, x.astype(np.float32), np.eye(2)[u.argmax(1)].astype(np.float32), u,
                  [f"{name} question {i}?" for i in range(n)])


@pytest.fixture(scope="module")
def experts(tmp_path_factory):
    d = tmp_path_factory.mktemp("experts")
    settings = MLPRouter(transfer="experts", support=0.99, decline=0.5)
    srcs = [_toy("a", 300, 0, -3.0, False), _toy("b", 300, 1, 3.0, True)]
    spec = {"levels": ["l0", "l1"]}
    members = {s.name: fit_sources([s], 0, settings, TRAINER, d / f"final@{s.name}", spec) for s in srcs}
    router = fit_experts(srcs, members, 0, settings, TRAINER, d / "final", spec)
    return router, members, d


def test_each_question_is_routed_by_the_source_it_resembles(experts):
    router, members, _ = experts
    for name, seed, shift, flip in (("a", 5, -3.0, False), ("b", 6, 3.0, True)):
        t = _toy(name, 200, seed, shift, flip)
        r = router.route(t.x)
        assert not router.last_declined and router.last_outside < 0.1
        right = (r.level == t.utilities.argmax(1)).mean()
        assert right > 0.85, (name, right)
        # a question from one source is routed as that source's own router routes it
        assert (r.level == members[name].route(t.x).level).mean() > 0.95
    # the pooled rule would need the interaction of inputs 0 and 1; each expert reads input 1 alone
    assert router.spec["network"]["kind"] == "experts" and router.spec["provenance"]["fit"]["kind"] == "experts"


def test_outside_the_support_takes_the_fallback_and_a_foreign_set_is_declined(experts):
    router, _, _ = experts
    fb = router.decision["fallback_level"]
    t = _toy("a", 100, 7, -3.0, False)
    far = t.x.copy()
    far[:40] += 50.0  # 40% of the set far from both sources
    r = router.route(far)
    assert not router.last_declined and router.last_outside == pytest.approx(0.4, abs=0.03)  # 1% of the rest lie beyond q=0.99
    assert (r.level[:40] == fb).all() and not r.routed[:40].any()
    np.testing.assert_array_equal(r.argmax_weights[:40], np.eye(2)[[fb] * 40])
    assert (r.level[40:] == t.utilities[40:].argmax(1)).mean() > 0.8
    far[:70] = t.x[:70] + 50.0  # 70% outside > decline 0.5: the whole set takes the fallback
    r = router.route(far)
    assert router.last_declined and (r.level == fb).all() and not r.routed.any()
    assert "declined the set" in router.support_note()


def test_experts_directory_round_trip_and_damage(experts):
    router, _, d = experts
    loaded = load_router(d / "final")
    assert isinstance(loaded, ExpertsRouter) and set(loaded.members) == {"a", "b"}
    x = _toy("a", 50, 9, -3.0, False).x
    a, b = router.route(x), loaded.route(x)
    np.testing.assert_allclose(a.weights, b.weights)
    np.testing.assert_allclose(a.logits, b.logits, rtol=1e-6)
    assert loaded.overlap(["a question 3?", "b question 299?", "unseen?"]) == 2
    assert loaded.decision == router.decision
    with pytest.raises(ArtifactError, match="source-experts router: load it with mogg.routing.fitting.experts.load_router"):
        TrainedRouter.load(d / "final")
    assert type(load_router(d / "final@a")) is TrainedRouter  # one network loads as before
    (d / "final" / "experts.safetensors").write_bytes(b"broken")
    with pytest.raises(ArtifactError, match="experts.safetensors"):
        load_router(d / "final")


def test_transfer_settings_refused_clearly():
    with pytest.raises(ValueError, match="router.transfer must be one of"):
        MLPRouter(transfer="mixture")
    with pytest.raises(ValueError, match="router.support"):
        MLPRouter(support=0.0)
    assert "transfer" not in MLPRouter(transfer="experts").key()  # members' fits are shared with pooled runs
