"""All folds as one stacked model (issue 23): each fold's router equals the one trained alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mogg.routing.networks.mlp import RouterMLP
from mogg.routing.networks.stacked import StackedAdam, StackedMLP
from mogg.routing.networks.training import TrainerConfig, fit_router, fit_routers


def _toy(n=230, d=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    best = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0).astype(int)
    y = (np.eye(4)[best] + 0.3 * rng.normal(size=(n, 4))).astype(np.float32)  # utilities with noise
    return x, y


def _folds(n, sizes, seed=1):
    """Unequal train sets (so batches pad and some folds run out of rows before others) and val sets."""
    rng = np.random.default_rng(seed)
    out = []
    for n_train, n_val in sizes:
        p = rng.permutation(n)
        out.append((np.sort(p[:n_train]), np.sort(p[n_train:n_train + n_val])))
    return out


@pytest.mark.parametrize("objective,dropout", [("utility", 0.2), ("bce", 0.0), ("listwise", 0.3)])
def test_batched_folds_equal_folds_trained_alone(objective, dropout):
    x, y = _toy()
    if objective == "bce":
        y = (y == y.max(1, keepdims=True)).astype(np.float32) * 0.8
    # 150 and 97 rows in batches of 40: 4 vs 3 steps per epoch; one fold with noise-only targets stops early
    folds = _folds(len(x), [(150, 40), (97, 30), (120, 35)])
    targets = [y, y, np.random.default_rng(5).normal(size=y.shape).astype(np.float32) if objective != "bce" else y]
    kw = {"hidden": 16, "dropout": dropout, "lr": 1e-2, "weight_decay": 1e-4, "objective": objective}
    tc = TrainerConfig(max_epochs=120, batch_size=40, patience=12)
    seeds = [3, 11, 5]
    together = fit_routers(x, targets, [f[0] for f in folds], [f[1] for f in folds], seeds, kw, tc)
    for (tr, va), t, seed, (r_stacked, s_stacked) in zip(folds, targets, seeds, together):
        r_alone, s_alone = fit_router(x[tr], t[tr], x[va], t[va], kw, tc, seed=seed)
        assert s_stacked["epochs"] == s_alone["epochs"]
        assert s_stacked["best_val_loss"] == pytest.approx(s_alone["best_val_loss"], rel=1e-5, abs=1e-6)
        with torch.no_grad():
            za, zs = r_alone(torch.as_tensor(x)), r_stacked(torch.as_tensor(x))
        assert torch.allclose(za, zs, atol=1e-5), (za - zs).abs().max()


def test_per_fold_early_stopping_keeps_each_folds_best_weights():
    x, y = _toy()
    folds = _folds(len(x), [(150, 40), (150, 40)])
    noise = np.random.default_rng(7).normal(size=y.shape).astype(np.float32)
    kw = {"hidden": 16, "dropout": 0.0, "lr": 1e-2, "weight_decay": 0.0, "objective": "utility"}
    tc = TrainerConfig(max_epochs=300, batch_size=64, patience=10)
    (r_sig, s_sig), (r_noise, s_noise) = fit_routers(x, [y, noise], [f[0] for f in folds], [f[1] for f in folds],
                                                     [0, 0], kw, tc)
    # the fold with nothing to learn stops long before the one with a signal, which goes on alone
    assert s_noise["epochs"] < s_sig["epochs"] < 300
    for r, t, (_, va), s in ((r_sig, y, folds[0], s_sig), (r_noise, noise, folds[1], s_noise)):
        with torch.no_grad():  # the kept weights are the best epoch's: their val loss is the best val loss
            v = float((r(torch.as_tensor(x[va])) - torch.as_tensor(t[va])).square().mean())
        assert v == pytest.approx(s["best_val_loss"], rel=1e-5)


def test_stacked_adam_steps_active_folds_as_torch_adam_and_leaves_the_others():
    torch.manual_seed(0)
    w = torch.randn(3, 4, 5)
    grads = [torch.randn(3, 4, 5) for _ in range(4)]
    active = [torch.tensor([True, True, True]), torch.tensor([True, False, True]), torch.tensor([True, True, False]),
              torch.tensor([True, True, True])]
    p = torch.nn.Parameter(w.clone())
    opt = StackedAdam([p], lr=0.05, weight_decay=0.01)
    refs = [torch.nn.Parameter(w[k].clone()) for k in range(3)]
    ref_opts = [torch.optim.Adam([r], lr=0.05, weight_decay=0.01) for r in refs]
    for g, a in zip(grads, active):
        p.grad = g.clone()
        opt.step(active=a)
        for k in range(3):
            if a[k]:  # an inactive fold: torch's Adam would not be stepped either
                refs[k].grad = g[k].clone()
                ref_opts[k].step()
    for k in range(3):
        assert torch.allclose(p.detach()[k], refs[k].detach(), atol=1e-6)
    assert opt.state[p]["step"].tolist() == [4.0, 3.0, 3.0]


def test_stacked_forward_equals_each_router():
    torch.manual_seed(0)
    routers = [RouterMLP(5, 3, hidden=8, dropout=0.1) for _ in range(3)]
    for r in routers:
        r.set_normalization(torch.randn(40, 5) * 3 + 1)
    s = StackedMLP(routers)
    x = torch.randn(3, 7, 5)
    with torch.no_grad():
        z = s(x)
        for k, r in enumerate(routers):
            assert torch.allclose(z[k], r.eval()(x[k]), atol=1e-6)
    lin = [RouterMLP(5, 3, hidden=0, dropout=0.0) for _ in range(2)]  # the linear router stacks too
    with torch.no_grad():
        assert torch.allclose(StackedMLP(lin)(x[:2])[1], lin[1](x[1]), atol=1e-6)
    with pytest.raises(ValueError, match="differ in shape"):
        StackedMLP([RouterMLP(5, 3, hidden=8), RouterMLP(5, 3, hidden=4)])


def test_dropout_masks_are_drawn_once_per_epoch_and_the_same_on_every_cpu():
    """A fold's epoch draw, sliced by steps, is what drawing step by step gives; and the masks are
    pinned bytes: a 64-bit uniform per element against the keep rate (torch's serial CPU sampler),
    not bernoulli_, whose MKL path (in some torch builds) ignores the generator."""
    import hashlib

    torch.manual_seed(0)
    net = StackedMLP([RouterMLP(6, 3, hidden=16, dropout=0.2) for _ in range(2)])
    gens = lambda: [torch.Generator().manual_seed(12345), torch.Generator().manual_seed(7)]  # noqa: E731
    whole = net.dropout_draws(gens(), [113, 40])
    g = gens()
    steps = [net.dropout_draws(g, [50, 40]), net.dropout_draws(g, [63, 0])]  # two steps from the same generators
    assert torch.equal(whole[0], torch.cat([steps[0][0], steps[1][0]])) and torch.equal(whole[1], steps[0][1])
    masks = net.step_masks(whole, [50, 40], [63, 0], 63)  # the second step: fold 1 has no rows left
    assert torch.equal(masks[0], whole[0][50:]) and not masks[1].any()
    assert [hashlib.sha256(d.numpy().tobytes()).hexdigest()[:16] for d in whole] == ["63b96aad7272587f",
                                                                                    "cfd92c108a316dd5"]
    assert set(torch.unique(whole[0]).tolist()) == {0.0, 1.25}  # kept units scaled by 1 / (1 - dropout)
    assert net.dropout_draws(gens(), [3, 3]) is not None
    assert StackedMLP([RouterMLP(6, 3, hidden=16, dropout=0.0)]).dropout_draws(gens()[:1], [3]) is None
