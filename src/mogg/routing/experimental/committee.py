"""Bagged router committees (``router.members``): which rows each member trains and early-stops
on, and the out-of-bag outputs a committee's decision rule is tuned on.

The committee kind (``router=committee``, :class:`CommitteeRouter`) trains every member of every
router as one stacked model; its network (:class:`RouterCommittee`) is the mean of its members'
outputs. Experimental: measured in ``docs/routers.md`` ("Committees"), 5 or 10 members gain +0.001 to
+0.003 evidence F1 at equal k (beyond two standard errors on MedMCQA only) and nothing at matched
context tokens (within 0.004 on every set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from mogg.routing.kinds.mlp import MLPRouter
from mogg.routing.networks.base import RouterNetwork
from mogg.routing.networks.mlp import RouterMLP

MEMBER_SEED = 104_729  # member m trains under seed + m * MEMBER_SEED: clear of the folds' seed + k


def member_fits(fit, members: int) -> list:
    """The committee of ``fit`` (a :class:`mogg.routing.fitting.kfold.Fit`: rows ``train``, ``val``, a
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


@dataclass
class CommitteeRouter(MLPRouter):
    """The MLP router as a bagged committee of ``members`` networks (``router=committee``): each
    draws its own validation slice from the fit's rows and its own seed (:func:`member_fits`);
    the router's output is their mean and its decision rule is tuned on their out-of-bag outputs."""

    members: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.members, int) and not isinstance(self.members, bool) and self.members >= 1):
            raise ValueError(f"router.members must be an integer >= 1 (networks in the committee), got {self.members!r}")

    def kind_key(self) -> dict:
        return {"members": self.members} if self.members != 1 else {}  # one member: the MLP's key and run ids

    def fit_networks(self, x, targets, fits, trainer, ckpt_dir, logger=False, names=None) -> list[tuple]:
        from mogg.routing.networks.training import FitError

        m = self.members
        plan = [member_fits(f, m) for f in fits]  # [F][M]
        flat = [g for group in plan for g in group]
        try:
            trained = super().fit_networks(x, [t for t in targets for _ in range(m)], flat, trainer, ckpt_dir, logger, names)
        except FitError as e:  # name the router (the fit), not its position among all members
            raise FitError(e.index // m, f"{e}" + (f" (committee member {e.index % m})" if m > 1 else "")) from e
        out = []
        for i, group in enumerate(plan):
            nets = [(net, s) for net, s, _ in trained[i * m:(i + 1) * m]]
            if m == 1:
                out.append((*nets[0], None))
                continue
            members = [r for r, _ in nets]
            out.append((RouterCommittee.of(members), committee_summary([s for _, s in nets]),
                        out_of_bag(members, group, x)))
        return out


class RouterCommittee(nn.Module, RouterNetwork):
    """``members`` :class:`RouterMLP` of one shape whose logits [B, L] are the mean of theirs.

    A bagged committee (``router.members``): each member was trained on its own draw of the fit's
    rows (:func:`mogg.routing.experimental.committee.member_fits`) and carries its own standardisation; the mean
    of their outputs is a lower-variance estimate of each level's utility than any one of them.
    """

    def __init__(self, in_dim: int, n_levels: int, hidden: int = 64, dropout: float = 0.2, members: int = 2):
        super().__init__()
        if members < 2:
            raise ValueError(f"a committee needs >= 2 members, got {members} (one network is a RouterMLP)")
        self.members = nn.ModuleList(RouterMLP(in_dim, n_levels, hidden, dropout) for _ in range(members))
        self.hparams = {**self.members[0].hparams, "members": members}

    @classmethod
    def of(cls, routers: list[RouterMLP]) -> "RouterCommittee":
        """The committee of trained ``routers`` (their weights and standardisations copied)."""
        h = routers[0].hparams
        c = cls(h["in_dim"], h["n_levels"], h["hidden"], h["dropout"], len(routers))
        for mine, r in zip(c.members, routers):
            mine.load_state_dict(r.state_dict())
        return c.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([m(x) for m in self.members]).mean(dim=0)  # [M, B, L] -> [B, L]; M networks, not rows

    weights = RouterMLP.weights
    logits = RouterMLP.logits

    @classmethod
    def from_hparams(cls, net: dict) -> "RouterCommittee":
        return cls(net["in_dim"], net["n_levels"], net["hidden"], net["dropout"], int(net["members"]))
