"""Eq. 1 profiles: the router chooses which levels vote, not only the level it injects.

MoG's eq. 1 scores a unit by ``sum_l w_l * t_rs(c)_l`` and eq. 2 injects the chunk of level
``g = argmax_l w_l`` that holds it, so a weight vector fixes two things: the granularity ``g`` and
which levels' rankings vote for what is read. A level router with softmax weights couples them
(the votes are whatever its utilities' softmax gives). With profiles the router chooses among
*actions* ``(profile, g)``, each a fixed weight vector:

* ``own``: only level g votes (the fixed level's own top-k: ``w = one_hot(g)``);
* ``all``: every level votes equally (fusion of the whole ladder, chunks injected at g);
* ``coarser``: levels g..L-1 vote (a unit inside a well-scored larger chunk rises);
* ``finer``: levels 0..g vote (a chunk holding well-scored sentences rises);
* ``near``: levels g-1..g+1 vote.

Voting levels get equal weight and g a tie-break of 1e-3 so eq. 2 injects at g. An action's
utility is the evidence F1 of its eq. 1-2 selection (:func:`mogg.run.pipeline.profile_f1`), the
router regresses those (any objective) and picks the argmax action; its eq. 1 weights are then the
action's vector, so evaluation, budgets and readers treat it like any weight policy.

Measured (docs/results.md, "Eq. 1 profiles"): over all five profiles the router closes more of the
best-fixed-to-oracle level gap on PubMedQA*, MedMCQA and COVID-QA than softmax weights over levels;
the report also gives the best fixed action and the action oracle, the stricter baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PROFILES = ("own", "all", "coarser", "finer", "near")
TIE = 1e-3  # g's extra weight: eq. 2 injects at g, the votes stay equal to 0.1%


def profile_vector(profile: str, level: int, n_levels: int) -> np.ndarray:
    """Eq. 1 weights float64 [L] of action (``profile``, ``level``), summing to 1."""
    if profile not in PROFILES:
        raise ValueError(f"unknown eq. 1 profile {profile!r}; choose from {PROFILES}")
    if not 0 <= level < n_levels:
        raise ValueError(f"level {level} out of range for {n_levels} levels")
    w = np.zeros(n_levels)
    lo, hi = {"own": (level, level), "all": (0, n_levels - 1), "coarser": (level, n_levels - 1),
              "finer": (0, level), "near": (max(level - 1, 0), min(level + 1, n_levels - 1))}[profile]
    w[lo : hi + 1] = 1.0
    if hi > lo:
        w[level] += TIE
    return w / w.sum()


def check_profiles(profiles) -> tuple[str, ...]:
    """``router.profiles`` as a tuple (empty: the level router with softmax weights)."""
    if profiles is None:
        return ()
    if isinstance(profiles, str):
        profiles = [p for p in profiles.replace("+", ",").split(",") if p]
    out = tuple(str(p) for p in profiles)
    bad = [p for p in out if p not in PROFILES]
    if bad or len(set(out)) != len(out):
        raise ValueError(f"router.profiles must be distinct names from {PROFILES} (or null), got {list(out)}")
    return out


@dataclass(frozen=True)
class ProfileSpace:
    """Actions ``(profile, level)``, profile-major: action ``a`` is profile ``a // L``, level ``a % L``."""

    profiles: tuple[str, ...]
    n_levels: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", check_profiles(self.profiles))
        if not self.profiles or self.n_levels < 1:
            raise ValueError("a profile space needs at least one profile and one level")

    @property
    def n(self) -> int:
        return len(self.profiles) * self.n_levels

    def matrix(self) -> np.ndarray:
        """Every action's eq. 1 weights, float64 [A, L]."""
        return np.stack([profile_vector(p, g, self.n_levels) for p in self.profiles for g in range(self.n_levels)])

    def weights(self, actions: np.ndarray) -> np.ndarray:
        """Eq. 1 weights [Q, L] of one action per question (int [Q])."""
        return self.matrix()[np.asarray(actions, dtype=np.int64)]

    def level(self, actions: np.ndarray) -> np.ndarray:
        """The level eq. 2 injects, int64 [Q]."""
        return np.asarray(actions, dtype=np.int64) % self.n_levels

    def action_of(self, weights: np.ndarray) -> np.ndarray:
        """The action whose vector each row of ``weights`` [Q, L] is, int64 [Q] (the nearest one)."""
        d = ((np.asarray(weights, dtype=np.float64)[:, None, :] - self.matrix()[None]) ** 2).sum(axis=2)
        return d.argmin(axis=1)

    def names(self, level_names: Sequence[str]) -> list[str]:
        """``<profile>@<level>`` per action (``own@L3:8sent`` is the fixed level)."""
        return [f"{p}@{lv}" for p in self.profiles for lv in level_names]
