"""Bagged router committees (``router.members``): which rows each member trains and early-stops
on, and the out-of-bag outputs a committee's decision rule is tuned on.

The committee network (the mean of its members' outputs) is :class:`mogg.routing.router.RouterCommittee`;
:func:`mogg.routing.crossfit.train_routers` trains every member of every router as one stacked
model. Measured in ``docs/routers.md`` ("Committees").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from mogg.routing.router import RouterMLP

MEMBER_SEED = 104_729  # member m trains under seed + m * MEMBER_SEED: clear of the folds' seed + k


def member_fits(fit, members: int) -> list:
    """The committee of ``fit`` (a :class:`mogg.routing.crossfit.Fit`: rows ``train``, ``val``, a
    ``seed``). Member 0 is ``fit`` itself (one member is the plain router); member m > 0 draws its
    own validation slice, as large as fit's, from fit's rows (train + val, seeded by (seed, m)) and
    trains under its own seed. Every row is trained on by most members and held out by some:
    bagging over the early-stopping slice."""
    out = [fit]
    pool = np.concatenate([fit.train, fit.val])
    n_val = len(fit.val)
    for m in range(1, members):
        perm = np.random.default_rng([fit.seed, m]).permutation(pool)
        out.append(replace(fit, train=np.sort(perm[n_val:]), val=np.sort(perm[:n_val]), seed=fit.seed + m * MEMBER_SEED))
    return out


def out_of_bag(nets: Sequence[RouterMLP], fits: Sequence, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows some member held out (``fits[m].val``, sorted int64 [U]) and, per row, the mean output
    [U, L] of the members that held it out: no member that trained on a row speaks for it."""
    rows = np.unique(np.concatenate([f.val for f in fits])).astype(np.int64)
    z_sum, count = np.zeros((len(rows), nets[0].hparams["n_levels"])), np.zeros(len(rows))
    with torch.inference_mode():
        for net, f in zip(nets, fits):  # M members, each over its own held-out rows
            pos = np.searchsorted(rows, f.val)
            z_sum[pos] += net.eval()(torch.as_tensor(np.asarray(x[f.val]), dtype=torch.float32)).double().numpy()
            count[pos] += 1
    return rows, z_sum / np.maximum(count, 1)[:, None]


def committee_summary(summaries: Sequence[dict]) -> dict:
    """One training summary for a committee: the longest member's epochs, the members' mean best
    validation loss (each on its own slice) and every member's own summary."""
    out = {"epochs": max(s["epochs"] for s in summaries), "members": list(summaries)}
    if all("best_val_loss" in s for s in summaries):
        out["best_val_loss"] = float(np.mean([s["best_val_loss"] for s in summaries]))
    return out
