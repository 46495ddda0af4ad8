"""Objectives, the fallback rule and the router as a saved model (hand-computed examples)."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from mogg.core.artifacts import ArtifactError, write_artifact
from mogg.routing.fitting.kfold import train_router
from mogg.routing.inputs import objectives as obj
from mogg.routing.kinds.mlp import MLPRouter
from mogg.routing.networks.training import TrainerConfig
from mogg.routing.router_dir import RouterMismatch, TrainedRouter


def test_expected_utility_loss_hand_example():
    # softmax([0, ln 3]) = [0.25, 0.75]; softmax([0, 0, 0]) pads nothing: one row per question
    z = torch.tensor([[0.0, float(np.log(3.0))], [0.0, 0.0]])
    u = torch.tensor([[1.0, 0.0], [2.0, -2.0]])
    # row 1: -(0.25 * 1 + 0.75 * 0) = -0.25; row 2: -(0.5 * 2 - 0.5 * 2) = 0; mean = -0.125
    assert float(obj.expected_utility_loss(z, u)) == pytest.approx(-0.125)
    assert float(obj.loss("listwise", z, u)) == pytest.approx(-0.125)
    # the gradient moves probability towards the better level, in proportion to the gap
    z = z.clone().requires_grad_(True)
    obj.expected_utility_loss(z, u).backward()
    assert z.grad[0, 0] < 0 < z.grad[0, 1]  # descending raises z[0, 0] (utility 1)


def test_utility_targets_centred_and_scaled():
    u = np.array([[0.2, 0.4, 0.6], [0.5, 0.5, 0.5]])
    c = u - u.mean(1, keepdims=True)  # [[-0.2, 0, 0.2], [0, 0, 0]]
    s = obj.utility_scale(u)
    assert s == pytest.approx(c.std())
    assert np.allclose(obj.targets("utility", np.zeros_like(u), u, s), c / s)
    labels = np.array([[0, 0.2, 0.8], [0.8, 0.2, 0]])
    assert np.allclose(obj.targets("bce", labels, u, s), labels)
    assert obj.utility_scale(np.ones((3, 2))) == 1.0  # all levels equal: no division by zero
    with pytest.raises(ValueError, match="router.objective"):
        obj.targets("hinge", labels, u, s)


def test_weights_per_objective():
    z = np.array([[0.0, np.log(3.0)]])
    assert np.allclose(obj.weights("bce", z), [[0.5, 0.75]])
    assert np.allclose(obj.weights("utility", z), [[0.25, 0.75]])
    assert np.allclose(obj.weights("listwise", z, temperature=0.5), [[0.1, 0.9]])  # softmax([0, 2 ln 3])


def test_fallback_rule_hand_example():
    # 4 validation questions, 3 levels, the fallback (best fixed) level is 1
    u = np.array([[0.9, 0.5, 0.1],    # routing to 0 gains 0.4
                  [0.4, 0.5, 0.1],    # routing to 0 loses 0.1
                  [0.1, 0.5, 0.8],    # routing to 2 gains 0.3
                  [0.1, 0.5, 0.45]])  # routing to 2 loses 0.05
    choice = np.array([0, 0, 2, 2])
    adv = np.array([0.9, 0.2, 0.6, 0.1])  # confident where right, unsure where wrong
    m = obj.tune_margin(adv, choice, u, fallback_level=1, n_grid=5)
    # route exactly the questions with adv > m: {0.9, 0.6} -> utility (0.9 + 0.5 + 0.8 + 0.5) / 4
    assert 0.2 <= m < 0.6
    assert obj.tune_margin(adv, choice, u, 1, n_grid=5) == m  # deterministic
    # when routing never helps, the margin is +inf (always fall back)
    assert obj.tune_margin(adv, np.array([0, 0, 0, 0]), np.array([[0.0, 1.0, 0.0]] * 4), 1) == np.inf

    logits = np.array([[2.0, 0.0, -1.0], [0.1, 0.0, -1.0]])  # utility objective: advantages 2.0 and 0.1
    w, routed = obj.decide("utility", logits, 1.0, "fallback", fallback_level=1, margin=0.5)
    assert routed.tolist() == [True, False]
    assert np.allclose(w[0], obj.softmax(logits[:1])[0]) and np.allclose(w[1], [0, 1, 0])
    w, routed = obj.decide("utility", logits, 1.0, "argmax", 1, 0.5)
    assert routed.all() and np.allclose(w, obj.softmax(logits))


def _toy(n=160, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    best = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)  # 3 levels
    u = 0.3 + 0.5 * np.eye(3)[best] + 0.05 * rng.random((n, 3))
    labels = np.zeros_like(u)
    labels[np.arange(n), best] = 0.8
    return x, labels, u, [f"question number {i}?" for i in range(n)]


def _spec(levels=("a", "b", "c")):
    return {"levels": list(levels), "recipe": {"groups": ["scores"], "hits_per_level": 2, "n_levels": len(levels), "version": 2,
                                               "encoder": None, "encoder_config": None},
            "compat": {"ladder_key": {"builder": {"n": 3}, "corpus": {"files": [{"sha256": "abc", "path": "/x"}]}},
                       "retriever": {"k1": 1.5}, "k_r": 2},
            "provenance": {"questions_name": "toy", "n_questions": 160}}


SETTINGS = MLPRouter(objective="utility", hidden=8, dropout=0.0, lr=1e-2, weight_decay=0.0)
TC = TrainerConfig(max_epochs=200, batch_size=64, patience=0)


@pytest.fixture(scope="module")
def saved_router(tmp_path_factory):
    x, labels, u, qs = _toy()
    d = tmp_path_factory.mktemp("router") / "final"
    r = train_router(x, labels, u, qs, np.arange(120), np.arange(120, 140), SETTINGS, TC, 3, _spec())
    r.save(d)
    return d, x


def test_router_learns_utility_and_tunes_margin(saved_router):
    d, x = saved_router
    r = TrainedRouter.load(d)
    _, labels, u, _ = _toy()
    out = r.route(x[140:])
    assert (out.level == labels[140:].argmax(1)).mean() > 0.8
    assert r.decision["fallback_level"] == int(u[:140].mean(0).argmax())
    assert np.isfinite(r.decision["margin"]) or r.decision["margin"] in (np.inf, -np.inf)
    assert np.allclose(out.weights.sum(1), 1.0)  # softmax weights for the utility objective


def test_router_reloads_identically_in_a_fresh_process(saved_router):
    d, x = saved_router
    new = np.random.default_rng(9).normal(size=(7, 5)).astype(np.float32)  # questions it never saw
    here = TrainedRouter.load(d).route(new)
    code = textwrap.dedent(f"""
        import json, sys, numpy as np
        from mogg.routing.router_dir import TrainedRouter
        x = np.array(json.loads(sys.stdin.read()), dtype=np.float32)
        r = TrainedRouter.load({str(d)!r}).route(x)
        print(json.dumps({{"w": r.weights.tolist(), "f": r.fallback_weights.tolist(), "l": r.level.tolist()}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(new.tolist()), capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert np.array_equal(np.array(got["w"]), here.weights)
    assert np.array_equal(np.array(got["f"]), here.fallback_weights) and got["l"] == here.level.tolist()


def test_corrupt_or_non_finite_router_is_refused_naming_the_file(saved_router, tmp_path):
    import shutil

    d, x = saved_router
    bad = tmp_path / "flipped"
    shutil.copytree(d, bad)
    raw = bytearray((bad / "router.safetensors").read_bytes())
    raw[-5] ^= 0xFF
    (bad / "router.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="router.safetensors fails its sha256"):
        TrainedRouter.load(bad)
    (bad / "router.safetensors").write_bytes(bytes(raw[:100]))  # truncated
    with pytest.raises(ArtifactError, match="router.safetensors"):
        TrainedRouter.load(bad)

    r = TrainedRouter.load(d)
    with torch.no_grad():
        r.module.net[-1].bias[0] = float("nan")
    nan_dir = tmp_path / "nan"
    r.save(nan_dir)  # a valid manifest over a NaN weight
    with pytest.raises(ArtifactError, match=r"nan/router.safetensors: non-finite values in net.3.bias"):
        TrainedRouter.load(nan_dir)
    with pytest.raises(ArtifactError, match="not a router directory"):
        TrainedRouter.load(tmp_path)


def test_compatibility_checks(saved_router):
    d, _ = saved_router
    r = TrainedRouter.load(d)
    key = _spec()["compat"]["ladder_key"]
    assert r.check_compatible(["a", "b", "c"], key, {"k1": 1.5}, 2) == []
    with pytest.raises(RouterMismatch, match=r"trained for levels \['a', 'b', 'c'\]; this ladder has \['a', 'b'\]"):
        r.check_compatible(["a", "b"], key, {"k1": 1.5}, 2)
    with pytest.raises(RouterMismatch, match="differing fields: b.n"):
        r.check_compatible(["a", "b", "c"], {**key, "builder": {"n": 4}}, {"k1": 1.5}, 2)
    with pytest.raises(RouterMismatch, match="another retriever; differing fields: k1"):
        r.check_compatible(["a", "b", "c"], key, {"k1": 1.2}, 2)
    with pytest.raises(RouterMismatch, match="k_r=2; this run retrieves k_r=3"):
        r.check_compatible(["a", "b", "c"], key, {"k1": 1.5}, 3)
    # the same corpus content at another path is the same corpus; other content is tolerated with a note
    moved = {"builder": {"n": 3}, "corpus": {"files": [{"sha256": "abc", "path": "/elsewhere"}]}}
    assert r.check_compatible(["a", "b", "c"], moved, {"k1": 1.5}, 2) == []
    other = {"builder": {"n": 3}, "corpus": {"files": [{"sha256": "def", "path": "/x"}]}}
    assert "another corpus" in r.check_compatible(["a", "b", "c"], other, {"k1": 1.5}, 2)[0]
    with pytest.raises(RouterMismatch, match=r"expects \[Q, 5\]"):
        r.route(np.zeros((2, 4)))


def test_overlap_with_training_questions(saved_router):
    d, _ = saved_router
    r = TrainedRouter.load(d)
    assert r.overlap(["Question  number 3?", "a new one"]) == 1  # case and whitespace folded
    assert r.overlap(["question number 150?"]) == 0  # held out of train and val


def test_settings_validate():
    with pytest.raises(ValueError, match="router.fit"):
        MLPRouter(fit="some")
    with pytest.raises(ValueError, match="router.decision"):
        MLPRouter(decision="max")
    with pytest.raises(ValueError, match="temperature"):
        MLPRouter(temperature=0)


def test_foreign_format_refused(tmp_path):
    def w(t):
        (t / "router.json").write_text(json.dumps({"format": "mogg-router/1"}))

    write_artifact(tmp_path / "old", w, {"x": 1})
    with pytest.raises(ArtifactError, match="format 'mogg-router/1'"):
        TrainedRouter.load(tmp_path / "old")


@pytest.mark.parametrize("kind,why", [("no.such.module:Net", "is not a known kind"),
                                      ("mogg.routing.kinds.base:RouterKind", "is not a RouterNetwork; retrain"),
                                      ("tree", r"is not a kind \(\"package.module:Class\"\); retrain")])
def test_a_network_kind_that_cannot_be_built_is_refused_with_how_to_retrain(saved_router, tmp_path, kind, why):
    """router.json names its network's class (mogg.routing.kinds.registry): one that is gone or is
    not a router network is refused naming the file, before any weight is read, and nothing the
    directory names is imported (mogg.core.trusted.resolve_kind)."""
    d, _ = saved_router
    r = TrainedRouter.load(d)
    r.spec["network"] = {**r.spec["network"], "kind": kind}
    r.save(tmp_path / "k")
    with pytest.raises(ArtifactError, match=rf"k/router.json: network.kind='{kind}' {why}"):
        TrainedRouter.load(tmp_path / "k")
    assert "no" not in sys.modules


def test_networks_saved_before_router_kinds_are_found_by_their_old_names():
    """The MLP (no kind), a committee (members > 1, no kind) and the cross router ("cross") saved
    before mogg.routing.kinds existed map to their classes, wherever those classes now live."""
    from mogg.routing.kinds.registry import network_class

    mlp = {"in_dim": 3, "n_levels": 2, "hidden": 4, "dropout": 0.0}
    assert network_class(mlp).__name__ == "RouterMLP"
    assert network_class({**mlp, "members": 3}).__name__ == "RouterCommittee"
    assert network_class({"kind": "cross"}).__name__ == "CrossRouter"
