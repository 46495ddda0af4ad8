"""Budget plans, shared by every budget router kind and the frontier evaluation: what a question
may read and how one plan is chosen at a budget.

An *action* is a fixed chunk plan (level, k, token cap): the first k chunks of the level's own
ranking cut to the cap (:class:`ActionSpace`; the envelope a kind reading inside the chunk falls back to is one of them).
A kind scores each plan (u_hat: a predicted F1) and the choice is

    a*(q) = argmax_a  u_hat(q, a) - lambda * tokens(q, a)        (optionally tokens <= max_tokens)

(:func:`decide`), with lambda calibrated on validation questions to a mean-token target
(:func:`calibrate_lambda`) or set directly. :func:`action_features` gives each (question, action)
pair the features any kind may read (its tokens, its chunks' retrieval scores, one-hots).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ActionSpace:
    """Actions = every (level, k, cap): flattened in that order (level-major)."""

    level_names: list[str]
    depth: int  # k = 1..depth
    caps: list[int | None]

    @property
    def n(self) -> int:
        return len(self.level_names) * self.depth * len(self.caps)

    def grid(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(level index, k - 1, cap index) of every action, int64 [A] each."""
        lv, kk, cp = np.meshgrid(np.arange(len(self.level_names)), np.arange(self.depth), np.arange(len(self.caps)),
                                 indexing="ij")
        return lv.ravel(), kk.ravel(), cp.ravel()

    def names(self) -> list[str]:
        lv, kk, cp = self.grid()
        return [f"{self.level_names[a]} k={b + 1}" + ("" if self.caps[c] is None else f" cap={self.caps[c]}")
                for a, b, c in zip(lv, kk, cp)]

    def describe(self, a: int) -> dict:
        lv, kk, cp = (x[a] for x in self.grid())
        return {"level": self.level_names[lv], "level_index": int(lv), "k": int(kk) + 1, "cap": self.caps[cp]}

    def to_json(self) -> dict:
        return {"level_names": list(self.level_names), "depth": self.depth, "caps": list(self.caps)}

    @classmethod
    def from_json(cls, d: dict) -> "ActionSpace":
        return cls(list(d["level_names"]), int(d["depth"]), list(d["caps"]))


def action_features(space: ActionSpace, deep_scores: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Per (question, action) features [Q, A, F]: log tokens of the action, the relative score of
    its k-th chunk and the mean relative score of its k chunks (scores / the level's top score),
    the level's log top score, and level / k / cap one-hots. ``deep_scores`` [Q, L, depth] are the
    retrieval scores at the frontier depth (-inf padding), ``tokens`` [Q, A]."""
    lv, kk, cp = space.grid()
    s = np.where(np.isfinite(deep_scores), deep_scores, 0.0).astype(np.float64)
    top = s[:, :, :1]
    rel = s / np.where(np.abs(top) > 1e-12, np.abs(top), 1.0)  # [Q, L, depth]
    cum = np.cumsum(rel, axis=2) / np.arange(1, space.depth + 1)
    n_q = len(tokens)
    dense = np.stack([np.log1p(tokens), rel[:, lv, kk], cum[:, lv, kk],
                      np.sign(top[:, lv, 0]) * np.log1p(np.abs(top[:, lv, 0]))], axis=2)
    onehot = np.concatenate([np.eye(len(space.level_names))[lv], np.eye(space.depth)[kk], np.eye(len(space.caps))[cp]], 1)
    return np.concatenate([dense, np.broadcast_to(onehot, (n_q, *onehot.shape))], axis=2)


def lagrangian_choice(score: np.ndarray, tokens: np.ndarray, lam: float) -> np.ndarray:
    """argmax_a score - lam * tokens per row (ties: fewer tokens, then the first action)."""
    # a tiny extra cost per token breaks ties towards the cheaper action
    return np.argmax(score - (lam + 1e-9) * tokens, axis=1)


def calibrate_lambda(util: np.ndarray, tokens: np.ndarray, target: float, iters: int = 60) -> float:
    """The smallest cost weight lambda >= 0 whose decisions argmax u - lambda * tokens read at most
    ``target`` mean tokens on these rows (validation). Mean tokens fall with lambda, so bisection
    (in log lambda) finds the boundary; lambda = 0 when even the utility argmax fits."""
    rows = np.arange(len(util))

    def spend(lam: float) -> float:
        return float(tokens[rows, lagrangian_choice(util, tokens, lam)].mean())

    if spend(0.0) <= target:
        return 0.0
    lo, hi = -12.0, 1.0  # log10 lambda; at 10 per token every row takes its cheapest action
    if spend(10**hi) > target:
        return 10**hi
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if spend(10**mid) <= target else (mid, hi)
    return 10**hi


def decide(util: np.ndarray, tokens: np.ndarray, lam: float, max_tokens: float | None = None) -> np.ndarray:
    """The chosen action per question: argmax u - lam * tokens, among actions within
    ``max_tokens`` (the cheapest action where none is)."""
    if max_tokens is None:
        return lagrangian_choice(util, tokens, lam)
    over = tokens > max_tokens
    u = np.where(over, -np.inf, util)
    a = lagrangian_choice(np.where(np.isinf(u), -1e30, u), tokens, lam)
    none = over.all(axis=1)
    a[none] = np.argmin(tokens[none], axis=1)
    return a
