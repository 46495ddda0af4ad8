"""The action router's folds as one stacked fit (issue 37): each fold equals the fold fitted alone,
a fold that stops early keeps its own best weights, and the hand-written backward pass, the
split first layer, the hashed dropout and AdamW equal their references."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np
import pytest
import torch
from torch import nn

from mogg.routing.networks.stacked import StackedAdam
from mogg.routing.plans import decide
from mogg.run.budget.actions import backprop
from mogg.run.budget.actions._jit import GOLDEN, dropout_rows_
from mogg.run.budget.actions.fit import fit_action_router, fit_action_routers
from mogg.run.budget.actions.kind import ActionRouterKind
from mogg.run.budget.actions.scorer import ActionRouter, ActionScorer, _loss

KW = {"hidden": 8, "lr": 1e-2, "weight_decay": 1e-3, "batch_size": 16, "max_epochs": 60, "patience": 5}


def kind(**knobs) -> ActionRouterKind:
    """The fit's knobs travel as the kind (no keyword splat with defaults of its own): KW over the kind's."""
    return ActionRouterKind(**{**KW, **knobs})


def _toy(n=200, n_actions=12, seed=0, noise_from=None):
    """Query inputs [n, 5], action features [n, A, 7] (3 varying per question, 4 one-hot columns
    equal for every question, as :func:`mogg.routing.plans.action_features` builds them) and F1-like
    labels in [0, 1]; rows >= ``noise_from`` get labels that are pure noise."""
    rng = np.random.default_rng(seed)
    xq = rng.normal(size=(n, 5))
    dense = rng.normal(size=(n, n_actions, 3))
    onehot = np.broadcast_to(np.eye(n_actions)[:, :4], (n, n_actions, 4))
    xa = np.concatenate([dense, onehot], axis=2)
    y = 1 / (1 + np.exp(-(2 * xq[:, :1] + dense[:, :, 0] - dense[:, :, 1] * xq[:, 1:2])))
    y = np.clip(y + 0.05 * rng.normal(size=y.shape), 0, 1)
    if noise_from is not None:
        y[noise_from:] = rng.random(y[noise_from:].shape)
    y[7] = np.nan  # a question without evidence: left out of training and validation
    return xq, xa, y


def _same_weights(a: ActionRouter, b: ActionRouter) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("loss,dropout", [("utility", 0.2), ("bce", 0.0), ("listwise", 0.3)])
def test_stacked_folds_equal_folds_fitted_alone(loss, dropout):
    xq, xa, y = _toy()
    # unequal train sets (70, 55, 64 rows in batches of 16: 5, 4 and 4 steps an epoch) and val sets
    trains = [np.arange(0, 70), np.arange(40, 95), np.arange(80, 144)]
    vals = [np.arange(150, 170), np.arange(170, 185), np.arange(0, 12)]
    seeds = [3, 11, 5]
    kw = kind(loss=loss, dropout=dropout)
    stacked = fit_action_routers(xq, xa, y, trains, vals, seeds, kw)
    assert len({r.summary["epochs"] for r in stacked}) > 1  # the folds stop at different epochs
    tokens = np.abs(xa[:, :, 0]) * 10
    for tr, va, seed, rs in zip(trains, vals, seeds, stacked):
        alone = fit_action_router(xq, xa, y, tr, va, kw, seed=seed)
        for key in ("epochs", "best_epoch", "best_val_loss", "n_train", "n_val"):
            assert rs.summary[key] == alone.summary[key], key
        assert _same_weights(rs, alone)  # bit for bit: same shapes, same products, same draws
        ua, us = alone.utilities(xq, xa), rs.utilities(xq, xa)
        np.testing.assert_array_equal(ua, us)
        for lam in (0.0, 1e-3, 1e-2):
            np.testing.assert_array_equal(decide(ua, tokens, lam), decide(us, tokens, lam))
    # the equality is not vacuous: the same fold under another seed is another router
    other = fit_action_router(xq, xa, y, trains[0], vals[0], kw, seed=4)
    assert not _same_weights(other, stacked[0])


def test_a_fold_that_stops_early_keeps_its_own_best_weights():
    xq, xa, y = _toy(n=240, noise_from=120)
    trains, vals = [np.arange(0, 95), np.arange(120, 215)], [np.arange(95, 120), np.arange(215, 240)]
    kw = kind(dropout=0.1, max_epochs=150, patience=4, lr=5e-3)
    sig, noise = fit_action_routers(xq, xa, y, trains, vals, [0, 1], kw)
    # the fold with nothing to learn stops (patience after its best epoch) long before the other
    s = noise.summary
    assert s["epochs"] == s["best_epoch"] + 1 + kw.patience
    assert s["epochs"] + 5 < sig.summary["epochs"]
    assert _same_weights(noise, fit_action_router(xq, xa, y, trains[1], vals[1], kw, seed=1))
    # its weights are its best epoch's: the fold alone, stopped right after that epoch, ends on them
    at_best = fit_action_router(xq, xa, y, trains[1], vals[1],
                                dataclasses.replace(kw, max_epochs=s["best_epoch"] + 1, patience=0), seed=1)
    assert at_best.summary["best_epoch"] == s["best_epoch"] and _same_weights(noise, at_best)
    # (the last epoch's weights, patience epochs later, would fail that) and score its best validation loss
    for r in (noise, sig):
        va = vals[1] if r is noise else vals[0]
        u = torch.as_tensor(r.utilities(xq[va], xa[va]), dtype=torch.float32)
        assert float(_loss("utility", u, torch.as_tensor(y[va], dtype=torch.float32))) == pytest.approx(
            r.summary["best_val_loss"], rel=1e-6)


def _reference_forward(scorer: ActionScorer, q, a, mask=None):
    """The scorer as written: concatenation, nn.Linear, GELU, dropout as an explicit mask."""
    x = torch.cat([q[:, None, :].expand(-1, a.shape[1], -1), a], dim=2)
    net = scorer.net
    h = net[1](net[0](x))
    if mask is not None:
        h = h * mask
    return net[5](net[4](net[3](h))).squeeze(-1)


@pytest.mark.parametrize("objective", ["utility", "bce", "listwise"])
def test_hand_written_backward_equals_autograd(objective):
    torch.manual_seed(0)
    b, n_a, dq, dv, dc = 5, 9, 4, 3, 6
    scorer = ActionScorer(dq, dv + dc, hidden=8, dropout=0.25)
    q, v = torch.randn(b, dq), torch.randn(b, n_a, dv)
    c = torch.randn(n_a, dc)
    y = torch.rand(b, n_a)
    var, const = np.arange(dv), np.arange(dv, dv + dc)
    drop = backprop.Dropout.of(1234, np.array([3, 17, 2, 40, 9]), 0.25)
    mask = drop.apply_(torch.ones(b * n_a, 16)).view(b, n_a, 16)
    assert 0 < int((mask == 0).sum()) < mask.numel()
    # reference: autograd through the plain module, with the kernel's mask
    params = list(scorer.parameters())
    a = torch.cat([v, c[None].expand(b, -1, -1)], dim=2)
    ref_loss = _loss(objective, _reference_forward(scorer, q, a, mask), y)
    ref = torch.autograd.grad(ref_loss, params)
    # hand-written
    w = scorer.weights(var, const)
    with torch.no_grad():
        out, cache = backprop.forward(w, q, v, c, drop)
    z = out.detach().requires_grad_()
    loss = _loss(objective, z, y)
    assert float(loss.detach()) == pytest.approx(float(ref_loss.detach()), rel=1e-5)
    g_out, = torch.autograd.grad(loss, z)
    with torch.no_grad():
        g = backprop.backward(w, cache, g_out, q, v, c, drop)
    g_w1 = torch.cat([g.wq, g.wv, g.wc], dim=1)
    for mine, theirs in zip([g_w1, g.b1, g.w2, g.b2, g.w3[None], g.b3], ref):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-6)


def test_split_first_layer_scores_equal_the_concatenated_mlp():
    xq, xa, _ = _toy(n=30)
    torch.manual_seed(2)
    scorer = ActionScorer(xq.shape[1], xa.shape[2], hidden=16, dropout=0.1)
    with torch.no_grad():
        for p in scorer.parameters():
            p.normal_()
    r = ActionRouter(scorer, "utility", xq.mean(0), xq.std(0), xa.mean((0, 1)), np.ones(xa.shape[2]), {})
    q, a = (torch.as_tensor(x, dtype=torch.float32) for x in ((xq - r.mean_q) / r.std_q, (xa - r.mean_a) / r.std_a))
    with torch.no_grad():
        ref = _reference_forward(scorer, q, a).numpy()
        torch.testing.assert_close(scorer(q, a), torch.as_tensor(ref), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(r.utilities(xq, xa), ref, rtol=1e-5, atol=1e-4)
    assert [list(x) for x in backprop.split_columns(xa)] == [[0, 1, 2], [3, 4, 5, 6]]


def _splitmix_reference(key: int, row: int, width: int) -> np.ndarray:
    """The 53-bit uniforms of one row's units, in numpy's uint64 arithmetic (wraps mod 2**64)."""
    with np.errstate(over="ignore"):
        z = np.uint64(key) + (np.uint64(row) * np.uint64(width) + np.arange(1, width + 1, dtype=np.uint64)) * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z >> np.uint64(11)


def test_hashed_dropout_equals_its_reference_and_keeps_its_rate():
    keep = 0.9
    drop = backprop.Dropout.of(987654321, np.array([5, 0, 2_000_000, 5]), 1 - keep)
    x = torch.ones(4, 3000)
    drop.apply_(x)
    for i, row in enumerate(drop.rows):
        kept = _splitmix_reference(drop.key, int(row), 3000) < drop.keep53
        np.testing.assert_array_equal(x[i].numpy(), np.where(kept, np.float32(1) / np.float32(keep), 0))
    torch.testing.assert_close(x[0], x[3], rtol=0, atol=0)  # a mask is a function of (key, question, unit)
    big = torch.ones(200, 5000)
    backprop.Dropout.of(7, np.arange(200), 1 - keep).apply_(big)
    assert abs(float((big > 0).double().mean()) - keep) < 0.002
    # pinned: the same masks on every machine and thread count
    assert hashlib.sha256(x.numpy().tobytes()).hexdigest()[:16] == _PINNED
    y = torch.ones(4, 3000)
    dropout_rows_(y.numpy(), np.uint64(987654322), drop.rows, drop.keep53, drop.scale)
    assert not torch.equal(x, y)  # another key, another mask


_PINNED = "6c0504ac3738d7e9"


def test_stacked_adamw_steps_active_folds_as_torch_adamw_and_leaves_the_others():
    torch.manual_seed(0)
    w = torch.randn(3, 4, 5)
    grads = [torch.randn(3, 4, 5) for _ in range(5)]
    active = [[1, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 1], [1, 1, 1]]
    p = nn.Parameter(w.clone())
    opt = StackedAdam([p], lr=0.05, weight_decay=0.1, decoupled=True)
    refs = [nn.Parameter(w[k].clone()) for k in range(3)]
    ref_opts = [torch.optim.AdamW([r], lr=0.05, weight_decay=0.1) for r in refs]
    for g, a in zip(grads, active):
        p.grad = g.clone()
        opt.step(active=torch.tensor(a, dtype=torch.bool))
        for k in range(3):
            if a[k]:
                refs[k].grad = g[k].clone()
                ref_opts[k].step()
            torch.testing.assert_close(p.detach()[k], refs[k].detach(), rtol=1e-6, atol=1e-7)
    plain = nn.Parameter(w.clone())  # L2 Adam (the level routers') is another update
    l2 = StackedAdam([plain], lr=0.05, weight_decay=0.1)
    plain.grad = grads[0].clone()
    l2.step()
    p2 = nn.Parameter(w.clone())
    dec = StackedAdam([p2], lr=0.05, weight_decay=0.1, decoupled=True)
    p2.grad = grads[0].clone()
    dec.step()
    assert not torch.allclose(plain, p2)


def test_crossfit_actions_saves_every_fold_and_predicts_out_of_fold(tmp_path):
    from mogg.routing.plans import ActionSpace
    from mogg.run.budget.actions.folds import crossfit_actions, predict_action_folds

    xq, xa, y = _toy(n=120)
    space = ActionSpace(["a", "b", "c"], 2, [None, 8])
    ids = [f"q{i}" for i in range(len(xq))]
    fit = kind(max_epochs=15, loss="utility")
    info = crossfit_actions(xq, xa, y, space, ids, 3, 0, fit, 0.2, tmp_path)
    assert json.loads((tmp_path / "folds.json").read_text())["run_id"] == info["run_id"]
    af = predict_action_folds(xq, xa, ids, tmp_path, space)
    for k, f in enumerate(info["folds"]):
        r, spec = ActionRouter.load(tmp_path / f"fold{k}")
        assert spec["run_id"] == info["run_id"] and spec["fold"] == k
        rows = np.array([ids.index(q) for q in f["test"]])
        np.testing.assert_array_equal(af.util[rows], r.utilities(xq[rows], xa[rows]))
        train = np.array([ids.index(q) for q in f["train"]])
        val = np.array([ids.index(q) for q in f["val"]])
        assert _same_weights(r, fit_action_router(xq, xa, y, train, val, fit, seed=k))  # seed + k, seed 0
    again = crossfit_actions(xq, xa, y, space, ids, 3, 0, fit, 0.2, tmp_path)  # same run: reused, not refitted
    assert again == json.loads((tmp_path / "folds.json").read_text())


def test_action_folds_trained_with_other_settings_are_refused(tmp_path):
    """Issue 35: evaluation used whatever action folds a run's folder held (a frontier report under
    frontier.routers.actions.hidden=8 equalled the default's, byte for byte)."""
    from mogg.routing.fitting.folds import StaleRouters
    from mogg.routing.plans import ActionSpace
    from mogg.run.budget.actions.folds import action_key, crossfit_actions, predict_action_folds

    xq, xa, y = _toy(n=60)
    space = ActionSpace(["a", "b", "c"], 2, [None, 8])
    ids = [f"q{i}" for i in range(len(xq))]
    fit = kind(max_epochs=3, loss="utility")
    crossfit_actions(xq, xa, y, space, ids, 3, 0, fit, 0.2, tmp_path, "data")
    same = action_key(xq, xa, y, space, 3, 0, fit, 0.2, "data")
    predict_action_folds(xq, xa, ids, tmp_path, space, same, "retrain")  # the trained settings: fine
    for other, name in ((kind(max_epochs=3, hidden=16), "frontier.routers.actions.hidden"), (fit, "seed")):
        key = action_key(xq, xa, y, space, 3, 1 if name == "seed" else 0, other, 0.2, "data")
        with pytest.raises(StaleRouters, match=name.replace(".", r"\.") + r".*Retrain: python train\.py x=1"):
            predict_action_folds(xq, xa, ids, tmp_path, space, key, "python train.py x=1")


def test_the_cross_fit_says_when_each_fold_stops_and_bars_follow_one_rule(caplog, monkeypatch):
    """Issue 50: the action router's cross-fit was silent for minutes, its fold lines all at the end;
    now each fold logs the epoch it stops at, and every bar follows MOGG_PROGRESS (1: on, 0: off,
    unset: a terminal only)."""
    from mogg.core.progress import progress, progress_disabled

    xq, xa, y = _toy(n=240, noise_from=120)
    trains, vals = [np.arange(0, 95), np.arange(120, 215)], [np.arange(95, 120), np.arange(215, 240)]
    with caplog.at_level("INFO", logger="mogg.run.budget.actions.fit"):
        routers = fit_action_routers(xq, xa, y, trains, vals, [0, 1], kind(max_epochs=30, patience=2))
    lines = [r.getMessage() for r in caplog.records if "stopped at epoch" in r.getMessage()]
    assert sorted(lines) == sorted(f"action router fold {k + 1} of 2 stopped at epoch {r.summary['epochs']} "
                                   f"(best {r.summary['best_epoch'] + 1}, val loss {r.summary['best_val_loss']:.4f})"
                                   for k, r in enumerate(routers) if r.summary["epochs"] < 30)
    assert lines  # the noise fold stops early
    for value, want in (("1", False), ("0", True), ("", None)):
        monkeypatch.setenv("MOGG_PROGRESS", value)
        assert progress_disabled() is want
    monkeypatch.setenv("MOGG_PROGRESS", "0")
    assert progress(total=3).disable


def test_a_heartbeat_logs_at_most_once_per_interval_and_builds_its_text_only_then(caplog):
    """Issue 50: a batch log (no bars) hears from a long loop; the text is built only when logged."""
    import logging

    from mogg.core.progress import Heartbeat

    log = logging.getLogger("mogg.test.heartbeat")
    built = []

    def text():
        built.append(1)
        return "still going"

    with caplog.at_level(logging.INFO, logger="mogg.test.heartbeat"):
        slow = Heartbeat(log, every=3600.0)
        assert not any(slow.beat(text) for _ in range(100)) and not built  # nothing within the interval
        fast = Heartbeat(log, every=0.0)
        assert fast.beat(text) and fast.beat(text)
    assert [r.getMessage() for r in caplog.records] == ["still going", "still going"] and len(built) == 2


class _Bar:
    """A stand-in for the tqdm bar: what it was told to show."""

    def __init__(self, total=None, **_):
        self.total, self.n, self.totals = total, 0, [total]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        self.n += n

    def set_postfix_str(self, text, **k):
        self.postfix = text

    def refresh(self):
        self.totals.append(self.total)


def test_the_epoch_bar_counts_to_where_early_stopping_ends_the_fit(monkeypatch):
    """Issue 61: the bar counted to max_epochs ("4/200 [00:33<16:01]") for fits that stopped at 39;
    its total is now the epoch early stopping ends the fit at unless a fold improves, and the bar
    ends full at the epoch the fit stopped."""
    from mogg.run.budget.actions import fit as fit_mod

    bars = []
    monkeypatch.setattr(fit_mod, "progress", lambda **kw: bars.append(_Bar(**kw)) or bars[-1])
    xq, xa, y = _toy(n=160, noise_from=80)  # noise labels: the folds stop within a few epochs
    trains, vals = [np.arange(80, 120), np.arange(100, 140)], [np.arange(140, 150), np.arange(150, 160)]
    routers = fit_action_routers(xq, xa, y, trains, vals, [0, 1], kind(max_epochs=200, patience=3))
    ran = max(r.summary["epochs"] for r in routers)
    assert ran < 200  # early stopping ended it
    bar, = bars
    assert bar.totals[0] == 3 and max(bar.totals) < 200  # never the cap the fit did not reach
    assert bar.n == bar.total == ran  # full when the fit ends
    assert bar.postfix.endswith("training; ends at the total unless one improves (cap 200)")  # says what the total is


def test_stop_horizon():
    from mogg.core.progress import stop_horizon

    assert stop_horizon(0, [0, 0], 15, 200) == 15
    assert stop_horizon(30, [2, 9], 15, 200) == 43  # the fold that improved 2 epochs ago stops last
    assert stop_horizon(195, [0], 15, 200) == 200  # never past the cap
    assert stop_horizon(30, [4], 0, 200) == 200  # no early stopping: the cap
    assert stop_horizon(30, [], 15, 200) == 30  # nothing still training
