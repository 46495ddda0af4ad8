"""The frontier evaluation: prefix F1 engine, envelope, oracle frontier, matched cost, actions."""

import itertools
import re
import sys

import numpy as np
import pytest

from mogg.core.metrics import token_prf
from mogg.core.text import tokenize
from mogg.evaluation.prefix import prefix_table


def _random_streams(rng, n_q=12, depth=4, vocab=30):
    words = [f"w{i}" for i in range(vocab)]
    streams, evidence = [], []
    for _ in range(n_q):
        n_snip = int(rng.integers(0, depth + 2))
        streams.append([" ".join(rng.choice(words, int(rng.integers(1, 9)))) + "." for _ in range(n_snip)])
        evidence.append(" ".join(rng.choice(words, int(rng.integers(0, 12)))))
    return streams, evidence


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("caps,max_tokens", [((None, 3, 7, 100), 20), ((3, 7), None), ((None, 5), None)])
def test_prefix_table_equals_token_prf_of_each_prefix(seed, caps, max_tokens):
    # (the streams are cut where no configuration reads on: at max_tokens, at the largest cap, or not at all)
    rng = np.random.default_rng(seed)
    streams, evidence = _random_streams(rng)
    depth = 4
    t = prefix_table(streams, evidence, depth, caps, max_tokens=max_tokens)
    assert t.shape == (len(streams), depth, len(caps))
    for k, (c, cap) in itertools.product(range(1, depth + 1), enumerate(caps)):
        lim = min((x for x in (cap, max_tokens) if x is not None), default=None)
        # the reference: the first k snippets joined, cut to exactly ``lim`` tokens
        ctx = [" ".join(tokenize(" ".join(s[:k]))[:lim]) for s in streams]
        p, r, f = token_prf(ctx, evidence)
        np.testing.assert_allclose(t.f1[:, k - 1, c], f, equal_nan=True)
        np.testing.assert_allclose(t.recall[:, k - 1, c], r, equal_nan=True)
        np.testing.assert_array_equal(t.tokens[:, k - 1, c], [len(tokenize(x)) for x in ctx])


def test_prefix_table_without_any_evidence_counts_tokens_and_leaves_f1_undefined():
    # questions without labels (mogg-route's action router reads only the tokens): an IndexError before
    t = prefix_table([["alpha beta gamma", "delta"], ["epsilon"]], ["", ""], 2, (None, 2))
    np.testing.assert_array_equal(t.tokens[:, :, 0], [[3, 4], [1, 1]])
    np.testing.assert_array_equal(t.tokens[:, :, 1], [[2, 2], [1, 1]])
    assert np.isnan(t.f1).all()


def test_prefix_table_rejects_bad_input():
    with pytest.raises(ValueError, match="streams but"):
        prefix_table([["a"]], [], 2)
    with pytest.raises(ValueError, match="depth"):
        prefix_table([["a"]], ["a"], 0)
    with pytest.raises(ValueError, match="caps"):
        prefix_table([["a"]], ["a"], 1, caps=(0,))


# ---------------------------------------------------------------------------------------------
# envelope, matched cost, oracle frontier, lambda calibration

from mogg.evaluation.frontier import (
    calibrate_lambda,
    choose_config,
    crossfit_choice,
    oracle_at,
    oracle_frontier,
    paired_interval,
    share_kept,
)


def test_choose_config_hand_computed():
    # 4 questions, 3 configurations: mean tokens 50 / 100 / 200, mean F1 0.4 / 0.6 / 0.7
    f1 = np.array([[0.4, 0.6, 0.8], [0.4, 0.6, 0.6], [0.4, 0.6, 0.7], [0.4, 0.6, 0.7]])
    tok = np.array([[50, 100, 200]] * 4, dtype=float)
    rows = np.arange(4)
    assert choose_config(f1, tok, rows, 49) == 0  # nothing fits: the cheapest
    assert choose_config(f1, tok, rows, 99) == 0
    assert choose_config(f1, tok, rows, 100) == 1
    assert choose_config(f1, tok, rows, 1000) == 2
    # a tie in F1: the cheaper configuration
    assert choose_config(np.array([[0.5, 0.5]]), np.array([[80.0, 40.0]]), np.arange(1), 100) == 1


def test_crossfit_choice_chooses_on_the_other_folds():
    # fold 0 (rows 0-1) prefers config 1, fold 1 (rows 2-3) config 0: each fold gets the other's choice
    f1 = np.array([[0.1, 0.9], [0.1, 0.9], [0.9, 0.1], [0.9, 0.1]])
    tok = np.full((4, 2), 10.0)
    f, t, c = crossfit_choice(f1, tok, np.array([0, 0, 1, 1]), 100)
    assert c.tolist() == [0, 0, 1, 1] and f.tolist() == [0.1, 0.1, 0.1, 0.1] and t.tolist() == [10] * 4


def _brute_force(f1, tok, budget):
    best = -1.0
    for combo in itertools.product(range(f1.shape[1]), repeat=f1.shape[0]):
        rows = np.arange(len(combo))
        if tok[rows, combo].mean() <= budget + 1e-9:
            best = max(best, f1[rows, combo].mean())
    return best


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_oracle_frontier_points_are_brute_force_optima(seed):
    rng = np.random.default_rng(seed)
    f1 = rng.random((5, 4)).round(2)
    tok = rng.integers(1, 40, size=(5, 4)).astype(float)
    xs, ys = oracle_frontier(f1, tok)
    assert np.all(np.diff(xs) > 0) and np.all(np.diff(ys) > 0)  # Pareto: more tokens, more F1
    for x, y in zip(xs, ys):
        assert y == pytest.approx(_brute_force(f1, tok, x), abs=1e-12)
    # the cheapest and the best points are the brute-force extremes
    assert ys[-1] == pytest.approx(f1.max(axis=1).mean())
    assert xs[0] == pytest.approx(tok.min(axis=1).mean()) or ys[0] >= _brute_force(f1, tok, tok.min(axis=1).mean())


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_oracle_at_budget_between_lagrangian_points_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    f1 = rng.random((6, 4)).round(2)
    tok = rng.integers(1, 40, size=(6, 4)).astype(float)
    xs, ys = oracle_frontier(f1, tok)
    for budget in np.linspace(tok.min(1).mean(), tok.max(1).mean(), 9):
        t, f = oracle_at(f1, tok, budget)
        step = ys[xs <= budget + 1e-9].max()
        best = _brute_force(f1, tok, budget)
        assert t <= budget + 1e-9 and step - 1e-12 <= f <= best + 1e-12
        assert f >= best - 1.0 / len(f1)  # at most one question's move below the optimum
    assert np.isnan(oracle_at(f1, tok, tok.min(1).mean() - 1)[1])


@pytest.mark.parametrize("target", [60.0, 120.0, 250.0])
def test_lambda_calibration_hits_the_validation_target(target):
    rng = np.random.default_rng(0)
    n, a = 400, 40
    tok = rng.uniform(10, 600, size=(n, a))
    util = np.log1p(tok) / 7 + rng.normal(0, 0.05, size=(n, a))  # utility grows with tokens
    lam = calibrate_lambda(util, tok, target)
    spent = tok[np.arange(n), np.argmax(util - (lam + 1e-9) * tok, axis=1)].mean()
    assert spent <= target and spent >= 0.95 * target


def test_lambda_zero_when_the_utility_argmax_fits():
    util = np.array([[0.9, 0.1]])
    assert calibrate_lambda(util, np.array([[10.0, 500.0]]), 50) == 0.0


def test_paired_interval_covers_a_constant_shift():
    a = np.linspace(0, 1, 200)
    d, lo, hi = paired_interval(a + 0.1, a, n_boot=200)
    assert d == pytest.approx(0.1) and lo == pytest.approx(0.1) and hi == pytest.approx(0.1)


# ---------------------------------------------------------------------------------------------
# the real configs, shrunk: action labels, deep search, train -> evaluate

def _frontier_overrides(tmp_path, mirage, extra=()):
    return [
        "experiment=frontier", "data=pubmedqa",
        f"paths.data_dir={mirage.parent}",
        f"paths.artifacts={tmp_path / 'artifacts'}",
        f"paths.checkpoints={tmp_path / 'ckpt'}",
        f"paths.reports={tmp_path / 'reports'}",
        "questions.limit=60",
        "corpus.sources.1.min_chars=400",
        "n_folds=3",
        "trainer.max_epochs=20",
        "frontier.depth=4",
        "frontier.caps=[null,32,64]",
        "frontier.n_boot=100",
        "frontier.routers.actions.max_epochs=15",
        "run_name=fr",
        *extra,
    ]


def test_action_labels_equal_fixed_policy_f1(tmp_path, mirage):
    from conftest import compose

    from mogg.run.budget.shared import action_table_of
    from mogg.run.frontier_stage import frontier_settings
    from mogg.run.prepare_stage import prepare_all
    from mogg.selection import cap_contexts, fixed_level_select

    cfg = compose(_frontier_overrides(tmp_path, mirage, ["max_context_tokens=300"]))
    prep = prepare_all(cfg)["mog"]
    fs = frontier_settings(cfg)
    # the deep search's first k_r hits are the k_r search's
    np.testing.assert_array_equal(prep.deep.ids[:, :, : prep.k_r], prep.hits.ids)
    space, table, xq, xa = action_table_of(prep, fs)
    assert table.f1.shape == (60, space.n) and xa.shape[:2] == (60, space.n) and len(xq) == 60
    names = space.names()
    evidence = [it.evidence_text for it in prep.items]
    for j, lv in enumerate(prep.ladder.level_names):
        for k in (1, 2, 3, 4):
            a = names.index(f"{lv} k={k}")
            ctx, _ = cap_contexts(fixed_level_select(prep.ladder, prep.deep, j, k).contexts(prep.ladder), 300)
            np.testing.assert_allclose(table.f1[:, a], token_prf([" ".join(c) for c in ctx], evidence)[2])
        # at k = k_r = 2 (the report's fixed policy) the label is the pipeline's own fixed F1
        np.testing.assert_allclose(table.f1[:, names.index(f"{lv} k={cfg.k}")], prep.fixed_f1[:, j])


def test_frontier_train_then_evaluate(tmp_path, mirage):
    import json

    from conftest import compose

    from mogg.run.app import evaluate, train

    cfg = compose(_frontier_overrides(tmp_path, mirage))
    out = train(cfg)
    assert out["mog"]["actions"]["folds"] == 3
    assert (tmp_path / "ckpt" / "fr" / "mog" / "actions" / "fold0" / "actions.safetensors").exists()
    s = evaluate(cfg)["mog"]
    fr = s["frontier"]
    assert set(fr["budgets"]) == {64, 128, 256, 512} and fr["n"] == 60
    # the action space under its own name ("actions" is a budget-router kind's slot: issue 61)
    assert fr["action_space"]["depth"] == 4 and "actions" not in fr
    row = fr["budgets"][128]
    assert {"envelope", "envelope (hindsight)", "router", "topk_all", "mog_router (eq. 1-2)", "oracle"} <= set(row)
    for b, r in fr["budgets"].items():
        # the oracle frontier is a ceiling on every deployable policy at its budget
        assert r["oracle"]["f1"]["mean"] >= r["envelope (hindsight)"]["f1"]["mean"] - 1e-9
        assert r["envelope (hindsight)"]["tokens"]["mean"] <= b
    rep = tmp_path / "reports" / "fr"
    md = (rep / "results.md").read_text()
    assert "F1 at matched reading cost" in md and (rep / "mog_frontier.png").stat().st_size > 0
    assert "frontier" in json.loads((rep / "metrics.json").read_text())["mog"]


def test_truncate_tokens_is_an_exact_token_prefix():
    # before: cut at whitespace, so "IL-6/IL-10 x" capped at 2 read 0 tokens and an unbroken
    # piece longer than the cap was kept whole
    from mogg.core.text import count_tokens, truncate_tokens

    assert truncate_tokens("IL-6/IL-10 levels rose", 2) == "IL-6"
    assert count_tokens(truncate_tokens("a-b-c-d-e-f", 3)) == 3
    assert truncate_tokens("short text", 5) == "short text" and truncate_tokens("x y", 0) == ""


@pytest.mark.slow  # 15 s: two ladders prepared and fitted (the default run stays under 10 minutes)
def test_all_ladders_router_chooses_the_ladder_too(tmp_path, mirage):
    import json

    from conftest import compose

    from mogg.run.app import evaluate, train
    from mogg.run.budget.actions.kind import all_ladders_actions
    from mogg.run.budget.shared import action_table_of
    from mogg.run.frontier_stage import ALL_LADDERS, frontier_settings, ladder_frontier
    from mogg.run.prepare_stage import prepare_all

    cfg = compose(_frontier_overrides(tmp_path, mirage, ["+ladder@ladders.mogg=mogg"]))
    out = train(cfg)
    assert out[ALL_LADDERS]["actions"]["folds"] == 3
    # the all-ladders action table is the ladders' tables side by side, in the space's order
    fs = frontier_settings(cfg)
    preps = prepare_all(cfg)
    space, table, xq, xa, per = all_ladders_actions({n: ladder_frontier(p, fs) for n, p in preps.items()})
    own = {n: action_table_of(p, fs)[1] for n, p in preps.items()}
    np.testing.assert_array_equal(table.f1, np.concatenate([own["mog"].f1, own["mogg"].f1], 1))
    assert space.n == table.f1.shape[1] == xa.shape[1] and space.names()[0].startswith("mog/")
    assert xq.shape[1] == sum(action_table_of(p, fs)[2].shape[1] for p in preps.values())
    evaluate(cfg)
    rep = tmp_path / "reports" / "fr"
    cross = json.loads((rep / f"{ALL_LADDERS}_frontier.json").read_text())
    for b, row in cross["budgets"].items():
        assert "router" in row and "mog envelope" in row and "mogg envelope" in row
        # choosing among both ladders in hindsight is never worse than either ladder's hindsight choice
        for n in ("mog", "mogg"):
            ladder = json.loads((rep / "metrics.json").read_text())[n]["frontier"]["budgets"][b]
            assert row["envelope (hindsight)"]["f1"]["mean"] >= ladder["envelope (hindsight)"]["f1"]["mean"] - 1e-9
            # the oracle over a superset of actions: within one question's move (1/Q) of above
            assert row["oracle"]["f1"]["mean"] >= ladder["oracle"]["f1"]["mean"] - 1.0 / cross["n"]
    md = (rep / "results.md").read_text()
    assert f"{ALL_LADDERS}" in md and (rep / f"{ALL_LADDERS}_frontier.png").stat().st_size > 0
    assert (rep / "ladders_frontier.png").stat().st_size > 0  # one plot across ladders
    # frontier.budget_routers=false: the same run evaluates the families only (no action router needed)
    s = evaluate(compose(_frontier_overrides(tmp_path, mirage, ["+ladder@ladders.mogg=mogg",
                                                                "frontier.budget_routers=false"])))
    assert set(s) == {"mog", "mogg"} and all("frontier" in v for v in s.values())
    assert "router" not in s["mogg"]["frontier"]["budgets"][64]


@pytest.mark.parametrize("router_knows", [True, False])
def test_guard_pools_validation_without_the_folds_own_test_rows(router_knows):
    from mogg.evaluation.frontier import Family
    from mogg.run.budget.actions.policy import RouterFolds, route_at

    rng = np.random.default_rng(0)
    n = 300
    f1 = np.c_[np.full(n, 0.5), (0.5 + rng.normal(0.0, 0.3, n)).clip(0, 1)]
    tok = np.full((n, 2), 10.0)
    fam = Family("fixed", f1, tok, ["a", "b"], True)
    fold = np.repeat([0, 1, 2], n // 3)
    # fold j validates on rows of the other folds; its router knows (or inverts) which config is better
    val_rows = [np.r_[100:130, 200:230], np.r_[0:30, 230:260], np.r_[30:60, 130:160]]
    util = f1.copy() if router_knows else -f1
    r = RouterFolds(util, fold, [(v, util[v]) for v in val_rows], guard=True, guard_se=1.0)
    rf, rt, src, names, facts = route_at(r, fam, 64)
    envs = [fam.configs.index(f["envelope"]) for f in facts]
    for k, fact in enumerate(facts):
        # the pooled slice: every fold j's validation rows that are not fold k's test rows,
        # fold j's router against fold j's envelope
        pool = [v[fold[v] != k] for v in val_rows]
        d = np.concatenate([f1[p, util[p].argmax(1)] - f1[p, envs[j]] for j, p in enumerate(pool)])
        g = fact["guard"][0]
        assert g["n"] == len(d) and g["gain"] == pytest.approx(d.mean())
        passed = d.mean() > d.std(ddof=1) / np.sqrt(len(d))
        rows = fold == k
        assert passed == router_knows  # a router that knows wins clearly; one that inverts never passes
        assert (src[rows] == (0 if passed else -1)).all()
        expect = f1[rows, util[rows].argmax(1)] if passed else f1[rows, envs[k]]
        np.testing.assert_array_equal(rf[rows], expect)


def test_router_policy_deploys_a_routed_family_that_wins_on_validation():
    from mogg.evaluation.frontier import Family
    from mogg.run.budget.actions.policy import RouterFolds, route_at

    rng = np.random.default_rng(1)
    n = 300
    f1 = np.c_[np.full(n, 0.5), np.full(n, 0.4)]
    tok = np.full((n, 2), 10.0)
    fam = Family("fixed", f1, tok, ["a", "b"], True)
    fold = np.repeat([0, 1, 2], n // 3)
    val_rows = [np.r_[100:130, 200:230], np.r_[0:30, 230:260], np.r_[30:60, 130:160]]
    util = rng.random((n, 2))  # an action router that knows nothing: never passes the guard
    r = RouterFolds(util, fold, [(v, util[v]) for v in val_rows], guard=True, guard_se=1.0)
    # a routed family (eq. 1-2 under the level router) with one configuration 0.1 above the envelope
    mixed = Family("eq12", (0.6 + rng.normal(0, 0.05, (n, 2))).clip(0, 1) - np.r_[0.0, 0.3], np.full((n, 2), 9.0),
                   ["k=1", "k=2"], routed=True)
    rf, rt, src, names, facts = route_at(r, fam, 64, [mixed])
    assert names == ["action router", "eq12"] and (src == 1).all()
    np.testing.assert_allclose(rf, mixed.f1[:, 0]) and np.testing.assert_allclose(rt, 9.0)
    assert all(f["deployed"] == "eq12" for f in facts)
    # over budget: the family's configurations read 9 tokens, the budget 5: the cheapest is deployed, no win
    _, _, src, _, _ = route_at(r, fam, 5, [Family("eq12", mixed.f1, np.full((n, 2), 50.0), ["k=1", "k=2"], routed=True)])
    assert (src != 1).all()


def test_action_router_dropout_is_the_fits_seeded_hash_not_a_torch_module():
    """The action scorer's dropout is drawn by its fit (a hash of seed, epoch, question and unit:
    tests/run/test_stacked_actions.py pins it), never by nn.Dropout's bernoulli_, whose MKL path in some
    torch builds ignores the seed; the stored scorer scores without dropout."""
    import torch
    from torch import nn

    from mogg.run.budget.actions.scorer import ActionScorer

    s = ActionScorer(3, 2, hidden=4, dropout=0.5).train()
    assert not any(isinstance(m, nn.Dropout) for m in s.modules())
    q, a = torch.randn(4, 3), torch.randn(4, 5, 2)
    torch.testing.assert_close(s(q, a), s.eval()(q, a), rtol=0, atol=0)
    with pytest.raises(ValueError, match="dropout must be in"):
        ActionScorer(3, 2, hidden=4, dropout=1.0)


def test_the_action_routers_objective_is_set_in_its_own_node_only():
    """All of the action router's knobs live in ``frontier.routers.actions``: ``router.objective``
    (the level router's) used to set its objective from another node."""
    from conftest import compose

    from mogg.run.frontier_stage import frontier_settings

    def knobs(*over):
        (kind,) = frontier_settings(compose(["experiment=frontier", "data=pubmedqa", *over])).routers
        return kind.knobs()

    assert knobs("router.objective=bce")["loss"] == "utility"
    assert knobs("frontier.routers.actions.loss=listwise")["loss"] == "listwise"  # one name, config to fit
    with pytest.raises(ValueError, match="frontier.routers.actions.loss"):
        knobs("frontier.routers.actions.loss=nope")
    with pytest.raises(ValueError, match="renamed frontier.routers.actions.loss"):  # named apart from router.objective
        knobs("+frontier.routers.actions.objective=bce")


def test_a_knob_a_kind_cannot_honour_is_refused():
    """The selector deeper than the frontier retrieves, or trimming a router the run lacks, is
    refused (that each knob is declared once, in its field: tests/core/test_knobs.py)."""
    from conftest import compose

    from mogg.run.frontier_stage import frontier_settings

    with pytest.raises(ValueError, match="selector.depth=9 reads deeper than frontier.depth=8"):
        frontier_settings(compose(["experiment=selector", "data=pubmedqa", "frontier.routers.selector.depth=9"]))
    with pytest.raises(ValueError, match="trim_of='actions': no such chunk-level router"):
        frontier_settings(compose(["experiment=frontier", "data=pubmedqa", "frontier/routers=[selector]"]))


@pytest.mark.parametrize("override, message", [
    ("frontier.routers.actions.lr=0", "frontier.routers.actions.lr=0: out of range"),
    ("+frontier.routers.actions.nope=1", "frontier.routers.actions.nope is not a knob of ActionRouterKind"),
    ("frontier.routers.actions._target_=nope.Kind", "cannot be imported"),
    ("frontier.routers.actions._target_=mogg.run.budget.base.LadderFrontier", "is not a budget router kind"),
    ("frontier.routers.actions=5", "a budget router node"),
    ("+frontier.fit.lr=1", "it moved: frontier.routers.actions"),  # the node before budget router kinds
    ("+frontier.selector.depth=2", "it moved: frontier/routers=[actions,selector]"),
])
def test_a_bad_budget_router_node_is_refused_naming_it(override, message):
    from conftest import compose

    from mogg.run.frontier_stage import frontier_settings

    with pytest.raises(ValueError, match=re.escape(message)):
        frontier_settings(compose(["experiment=frontier", "data=pubmedqa", override]))


def test_the_budget_routers_are_built_in_the_reports_order():
    from conftest import compose

    from mogg.run.budget.actions.kind import ActionRouterKind
    from mogg.run.budget.selector.kind import EvidenceSelectorKind
    from mogg.run.frontier_stage import frontier_settings

    fs = frontier_settings(compose(["experiment=selector", "data=pubmedqa", "frontier.routers.selector.plans=7"]))
    assert [type(k) for k in fs.routers] == [ActionRouterKind, EvidenceSelectorKind]
    assert [k.slot for k in fs.routers] == ["actions", "selector"] and fs.routers[1].plans == 7
    only = frontier_settings(compose(["experiment=frontier", "data=pubmedqa", "frontier/routers=[selector]",
                                      "frontier.routers.selector.trim_of=null"]))
    assert [k.slot for k in only.routers] == ["selector"]


def test_mogg_route_refuses_a_deployed_directory_whose_kind_is_gone(tmp_path, capsys):
    import json

    from mogg.core.artifacts import write_artifact
    from mogg.core.seal import seal_holder
    from mogg.run.route import main

    def write(tmp):
        (tmp / "deploy.json").write_text(json.dumps({"kind": "gone.module:OldKind", "budgets": {}}))
        seal_holder(tmp, "deploy.json")

    d = write_artifact(tmp_path / "final", write, {"kind": "gone"})  # intact and sealed: only the kind is gone
    q = tmp_path / "q.txt"
    q.write_text("Is aspirin useful?\n")
    assert main(["--checkpoint", str(d), "--budget", "64", str(q)]) == 2
    err = capsys.readouterr().err
    assert "kind='gone.module:OldKind' is not a known kind" in err and "gone" not in sys.modules


def test_the_matched_cost_table_bolds_only_what_its_interval_shows_and_says_so():
    """Issue 50: a cell with the interval [+0.000, +0.007] was bold, the hindsight envelope (a
    ceiling) was bold, no line said what bold means, and a row without a curve (route + trim) or a
    learned kind's ceiling (the sentence oracle) read "tokens to reach: never" above the target."""
    import numpy as np

    from mogg.evaluation.frontier_render import frontier_section

    class Reads:  # a learned kind's policy: its own ceiling, the sentence oracle
        ceilings = ("sentence oracle",)
        STYLES, HEADLINE, RULE = {"selector": {}}, ("selector",), ""

        def notes(self, fr, budgets):
            return [], []

    def row(f1, tok, lo=None):
        r = {"f1": {"mean": f1, "se": 0.01}, "tokens": {"mean": tok}}
        if lo is not None:
            r["vs_envelope"] = {"mean": lo + 0.004, "lo": lo, "hi": lo + 0.008}
        return r

    fr = {"n": 100, "n_dropped": 0, "reach_target": 0.9, "area": {"selector": 0.5, "oracle": 1.0},
          "reach": {"envelope": 200.0, "selector": 150.0, "oracle": 120.0, "sentence oracle": 110.0, "route + trim": 250.0},
          "budgets": {b: {"envelope": row(0.5, b), "envelope (hindsight)": row(0.52, b, 0.01),
                          "selector": row(0.6, b, 0.0004 if b == 64 else 0.002), "oracle": row(0.7, b, 0.05),
                          "sentence oracle": row(0.8, b, 0.09), "route + trim": row(0.55, b, 0.003)} for b in (64, 128)}}
    md = "\n".join(frontier_section("mog", fr, [64, 128], [Reads()]))
    cells = {ln.split(" | ")[0][2:]: ln.split(" | ")[1:] for ln in md.splitlines() if ln.startswith("| ") and "---" not in ln}
    assert not cells["selector"][0].startswith("**") and "[+0.000, +0.008]" in cells["selector"][0]  # 0.0004 prints 0.000
    assert cells["selector"][1].startswith("**")  # [+0.002, ...]
    for ceiling in ("envelope (hindsight)", "oracle", "sentence oracle"):  # above the envelope, yet never bold
        assert not any(c.startswith("**") for c in cells[ceiling]), ceiling
    assert cells["route + trim"][1].startswith("**") and cells["route + trim"][-1] == "250 |"
    assert "**Bold**: above the envelope beyond the paired 95% interval" in md
    assert "Ceilings, never bold (they choose with the test questions' labels): envelope (hindsight), oracle, sentence oracle" in md
    assert np.isnan(fr["area"].get("route + trim", np.nan))


def test_tokens_to_reach_is_computed_for_every_row_of_the_table(tmp_path, mirage):
    """Issue 50: "tokens to reach: never" for the sentence oracle (0.985) and route + trim (0.937),
    both above the envelope's best (0.936): a learned kind's ceiling and a row without a curve now
    get it from the grid or the table's budgets."""
    import numpy as np
    from conftest import compose

    from mogg.run.app import evaluate, train

    # short fits: the test reads which rows get a reach, not how good the routers are
    cfg = compose(_frontier_overrides(tmp_path, mirage) + ["frontier/routers=[actions,selector]",
                                                           "frontier.routers.selector.depth=4",
                                                           "frontier.routers.actions.max_epochs=4", "trainer.max_epochs=3",
                                                           "frontier.routers.selector.cosine=false"])
    train(cfg)
    fr = evaluate(cfg)["mog"]["frontier"]
    target = fr["reach_target"]
    for name in fr["budgets"][64]:
        assert name in fr["reach"], name
        best = max(fr["budgets"][b][name]["f1"]["mean"] for b in fr["budgets"])
        if best >= target and name not in fr.get("curves", {}) and name != "oracle":
            assert not np.isnan(fr["reach"][name]), f"{name} reaches {target} at a table budget, yet 'never'"


def test_a_second_experiment_reuses_the_action_folds_another_run_trained(tmp_path, mirage, caplog):
    """Issue 50: selector_pubmedqa re-trained the action folds frontier_pubmedqa had just trained
    (checkpoints keyed by run name). Folds are kept in the artifact store by run id (data, folds,
    seed, knobs, code) and copied in, said in the log; other knobs train anew."""
    from conftest import compose

    from mogg.run.app import train

    short = ["frontier.routers.actions.max_epochs=4", "trainer.max_epochs=3"]
    train(compose(_frontier_overrides(tmp_path, mirage) + short + ["run_name=first"]))
    first = tmp_path / "ckpt" / "first" / "mog" / "actions"
    with caplog.at_level("INFO", logger="mogg.routing.fitting.folds"):  # another experiment's run, the same folds
        train(compose(_frontier_overrides(tmp_path, mirage) + short + ["run_name=second", "router.fit=both"]))
    second = tmp_path / "ckpt" / "second" / "mog" / "actions"
    assert "already trained by another run: reused" in caplog.text
    for f in sorted(first.rglob("*")):
        if f.is_file():
            assert (second / f.relative_to(first)).read_bytes() == f.read_bytes(), f
    caplog.clear()
    with caplog.at_level("INFO", logger="mogg.routing.fitting.folds"):
        train(compose(_frontier_overrides(tmp_path, mirage) + short + ["run_name=third", "frontier.routers.actions.lr=0.002"]))
    assert "reused" not in caplog.text  # another knob: other folds
    assert (tmp_path / "ckpt" / "third" / "mog" / "actions" / "folds.json").is_file()


def test_the_budgets_plot_says_why_the_oracle_falls_below_a_fixed_level(tmp_path):
    """Issue 50: in ``<ladder>_budgets.png`` the oracle line fell below a fixed level at 256 tokens
    with no word of why; the plot now says it (and nothing where the oracle never dips)."""
    from mogg.evaluation.budgets import oracle_dip_note, plot_budgets

    def cell(f):
        return {"f1": {"mean": f, "se": 0.01, "n": 10}, "tokens": {"mean": 100.0, "se": 1.0, "n": 10}}

    table = {"fixed:L0": {128: cell(0.5), 256: cell(0.7)}, "fixed:L1": {128: cell(0.4), 256: cell(0.6)},
             "oracle": {128: cell(0.6), 256: cell(0.65)}}
    note = oracle_dip_note(table, [128, 256])
    assert note is not None and "256 tokens (fixed:L0)" in note and "128" not in note and "cut" in note
    table["oracle"][256] = cell(0.75)
    assert oracle_dip_note(table, [128, 256]) is None
    table["oracle"][256] = cell(0.65)
    plot_budgets("mog", table, [128, 256], tmp_path / "b.png")
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_share_kept_is_the_ratio_of_the_mean_gains_and_nan_without_a_gain_to_keep():
    """share_kept: mean(gain) / mean(reference gain), paired rows (NaN in either dropped), an interval over the
    same resampled questions (a policy that keeps half of every question's gain keeps exactly half in every draw),
    and NaN where the reference is not above the base beyond its interval."""
    rng = np.random.default_rng(3)
    ref = rng.uniform(0.05, 0.2, size=300)
    k = share_kept(0.5 * ref, ref, n_boot=300)
    assert (k["share"], k["lo"], k["hi"], k["n"]) == pytest.approx((0.5, 0.5, 0.5, 300))
    assert k["reference"]["mean"] == pytest.approx(ref.mean()) and k["reference"]["lo"] > 0
    noisy = ref * rng.uniform(0, 1.6, size=300)
    k = share_kept(noisy, ref, n_boot=300)
    assert k["share"] == pytest.approx(noisy.mean() / ref.mean()) and k["lo"] < k["share"] < k["hi"]
    with_nan = np.r_[noisy, np.nan, 1.0]
    assert share_kept(with_nan, np.r_[ref, 1.0, np.nan], n_boot=300)["share"] == pytest.approx(k["share"])
    none = share_kept(noisy, rng.normal(0, 0.1, size=300), n_boot=300)  # no gain to keep
    assert np.isnan(none["share"]) and np.isnan(none["lo"]) and none["n"] == 300
    assert np.isnan(share_kept(np.array([]), np.array([]), n_boot=10)["share"])


def test_share_kept_reads_a_gain_to_keep_as_the_tables_bold_it():
    """A reference gain whose lower bound is above 0 but prints as +0.000 is not a gain to keep: the share and the
    tables' bold (names.beyond_zero) say the same (share_kept tested ``lo > 0`` before and gave a share of a gain the
    table shows level with the envelope)."""
    ref = np.full(200, 0.0003)  # every draw's mean is 0.0003: lo > 0, printed +0.000
    k = share_kept(0.5 * ref, ref, n_boot=100)
    assert k["reference"]["lo"] == pytest.approx(0.0003) and np.isnan(k["share"])
    assert share_kept(0.5 * ref + 0.1, ref + 0.1, n_boot=100)["share"] == pytest.approx(0.10015 / 0.1003)


def test_one_draw_behind_every_interval_over_questions():
    """paired_interval, share_kept and collect's pooled_difference resample questions through bootstrap_means: the
    same seed gives the same draws, so a difference's interval and a share over it agree draw for draw."""
    from mogg.evaluation.collect_frontier import pooled_difference
    from mogg.evaluation.frontier import bootstrap_means

    rng = np.random.default_rng(5)
    a, b = rng.uniform(size=120), rng.uniform(size=120)
    boots = bootstrap_means(np.stack([a - b, a, b], axis=1), 500, seed=2)
    assert boots.shape == (500, 3) and np.allclose(boots[:, 0], boots[:, 1] - boots[:, 2])
    d, lo, hi = paired_interval(a, b, 500, seed=2)
    assert (lo, hi) == pytest.approx((np.quantile(boots[:, 0], 0.025), np.quantile(boots[:, 0], 0.975)))
    p = pooled_difference([a - b, a - b], n_boot=500, seed=2)
    assert (p["lo"], p["hi"]) == pytest.approx((lo, hi)) and p["mean"] == pytest.approx(d)
