"""Evidence F1 against reading cost: policy families, the fixed envelope, the oracle frontier.

A *family* is a policy along its amount knobs: per question, one column per configuration
(a fixed level at k = 1..K and a token cap; top-k over all levels at k; ...) with its evidence F1
and its context tokens ([Q, A] each, from :func:`mogg.evaluation.prefix.prefix_table`).

- **Matched cost.** At a budget B a family deploys one configuration: the one with the best mean
  F1 among those whose mean tokens are <= B *on the training folds* (the cheapest one if none
  fits), scored on the held-out fold (:func:`crossfit_choice`). The **fixed envelope** is this
  rule over every fixed level's configurations at once: what a practitioner deploys with the same
  data. The *hindsight* envelope chooses on the test questions themselves (labelled so).
- **Oracle frontier.** Per question any configuration, under a mean-token constraint: the
  Lagrangian solutions argmax_a F1(q, a) - lambda * tokens(q, a) for a sweep of lambda. Each such
  point is the exact optimum for its own mean tokens (any assignment reading no more tokens has
  no higher mean F1; tests check it by brute force); the oracle at B is the best point <= B.
- **Paired intervals.** Differences between two policies are bootstrapped over questions (the
  same resampled questions for both), 95% percentile intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mogg.evaluation.names import beyond_zero
from mogg.routing.plans import calibrate_lambda, lagrangian_choice  # noqa: F401 (calibrate_lambda: re-exported)


@dataclass
class Family:
    """One policy family: per question and configuration, evidence F1 and context tokens."""

    name: str
    f1: np.ndarray  # float [Q, A]
    tokens: np.ndarray  # float [Q, A]
    configs: list[str]  # A names, e.g. "8sent k=2 cap=64"
    fixed: bool = False  # a fixed-level family (part of the envelope)
    meta: dict = field(default_factory=dict)  # per-config arrays, e.g. level/k/cap indices
    routed: bool = False  # driven by a trained router (a candidate of the router policy, see route_at)

    def __post_init__(self) -> None:
        if self.f1.shape != self.tokens.shape or self.f1.shape[1] != len(self.configs):
            raise ValueError(f"{self.name}: f1 {self.f1.shape}, tokens {self.tokens.shape} and "
                             f"{len(self.configs)} configs disagree")


def merge_families(name: str, families: list[Family], fixed: bool = True) -> Family:
    """One family whose configurations are all of ``families``' (the envelope's candidates)."""
    return Family(name, np.concatenate([f.f1 for f in families], 1), np.concatenate([f.tokens for f in families], 1),
                  [c for f in families for c in f.configs], fixed,
                  {k: np.concatenate([f.meta[k] for f in families]) for k in families[0].meta
                   if all(k in f.meta for f in families)})


def choose_config(f1: np.ndarray, tokens: np.ndarray, rows: np.ndarray, budget: float) -> int:
    """The configuration with the best mean F1 over ``rows`` among those reading <= ``budget``
    mean tokens there (ties: fewer tokens, then the first); the cheapest if none fits."""
    m_tok = tokens[rows].mean(axis=0)
    m_f1 = np.nan_to_num(np.nanmean(f1[rows], axis=0), nan=-1.0) if len(rows) else np.zeros(f1.shape[1])
    ok = m_tok <= budget + 1e-9
    if not ok.any():
        return int(np.argmin(m_tok))
    cand = np.flatnonzero(ok)
    order = np.lexsort((cand, m_tok[cand], -m_f1[cand]))
    return int(cand[order[0]])


def crossfit_choice(f1: np.ndarray, tokens: np.ndarray, folds: np.ndarray, budget: float
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per question: the F1 and tokens of the configuration chosen on the *other* folds at
    ``budget``, and which configuration that was (int [Q])."""
    choice = np.empty(len(folds), dtype=np.int64)
    for k in np.unique(folds):
        test = folds == k
        choice[test] = choose_config(f1, tokens, np.flatnonzero(~test), budget)
    rows = np.arange(len(folds))
    return f1[rows, choice], tokens[rows, choice], choice


LAMBDAS = np.r_[0.0, np.geomspace(1e-7, 10.0, 800)]


def oracle_frontier(f1: np.ndarray, tokens: np.ndarray, lambdas: np.ndarray = LAMBDAS
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The oracle frontier's points (mean tokens, mean F1), sorted by tokens, Pareto-filtered.
    Questions without evidence (NaN F1) are dropped."""
    keep = ~np.isnan(f1).any(axis=1)
    f, t = f1[keep], tokens[keep]
    rows = np.arange(len(f))
    pts = set()
    for lam in lambdas:
        a = lagrangian_choice(f, t, lam)
        pts.add((float(t[rows, a].mean()), float(f[rows, a].mean())))
    return pareto(np.array(sorted(pts)))


def oracle_at(f1: np.ndarray, tokens: np.ndarray, budget: float, iters: int = 64) -> tuple[float, float]:
    """The oracle at mean tokens <= ``budget``: (mean tokens, mean F1) of a per-question assignment.

    Bisection on lambda brackets the budget between two Lagrangian solutions (each an exact
    optimum for its own mean tokens); questions then move from the feasible solution's choice to
    the other's in order of F1 gained per token while the mean stays <= ``budget``. The result is
    achievable (one choice per question), never below the best Lagrangian point under the budget,
    and at most one question's move below the linear-programming bound, so a superset of actions
    never loses more than 1/Q (a step function over Lagrangian points can lose a whole edge).
    NaN rows must be dropped first; (NaN, NaN) if even the cheapest choices exceed the budget.
    """
    n = len(f1)
    rows = np.arange(n)
    if tokens.min(axis=1).mean() > budget + 1e-9:
        return float("nan"), float("nan")

    def mean_tokens(lam: float) -> float:
        return float(tokens[rows, lagrangian_choice(f1, tokens, lam)].mean())

    lo, hi = 0.0, 2.0  # F1 <= 1 and token counts are integers: lambda > 1 picks the cheapest
    if mean_tokens(lo) <= budget + 1e-9:
        hi = lo
    else:
        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if mean_tokens(mid) > budget + 1e-9 else (lo, mid)
    a = lagrangian_choice(f1, tokens, hi)
    b = lagrangian_choice(f1, tokens, lo)
    dt, df = tokens[rows, b] - tokens[rows, a], f1[rows, b] - f1[rows, a]
    room = budget * n - tokens[rows, a].sum() + 1e-9
    move = np.flatnonzero((dt > 0) & (df > 0))
    move = move[np.argsort(-df[move] / dt[move], kind="stable")]
    take = move[np.cumsum(dt[move]) <= room]
    choice = a.copy()
    choice[take] = b[take]
    return float(tokens[rows, choice].mean()), float(f1[rows, choice].mean())


def pareto(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points (tokens, F1) that no cheaper-or-equal point beats, sorted by tokens."""
    if not len(points):
        return np.zeros(0), np.zeros(0)
    p = points[np.lexsort((-points[:, 1], points[:, 0]))]
    best = np.maximum.accumulate(p[:, 1])
    keep = np.r_[True, p[1:, 1] > best[:-1]]
    return p[keep, 0], p[keep, 1]


def at_budget(x: np.ndarray, y: np.ndarray, budget: float) -> tuple[float, float]:
    """The best point of a frontier (x tokens, y F1) reading <= ``budget`` (NaN if none)."""
    ok = x <= budget + 1e-9
    if not ok.any():
        return float("nan"), float("nan")
    i = np.flatnonzero(ok)[np.argmax(y[ok])]
    return float(x[i]), float(y[i])


def bootstrap_means(columns: np.ndarray, n_boot: int, seed: int = 0) -> np.ndarray:
    """Means of ``columns`` ([n, c], one row per question) over ``n_boot`` resamples of the questions, the same
    draws for every column: [n_boot, c]. The one draw behind every interval over questions (paired intervals,
    the share kept, collect's pooled differences), so a share and the differences it divides share their draws."""
    c = np.asarray(columns, float)
    idx = np.random.default_rng(seed).integers(0, len(c), size=(n_boot, len(c)))
    return c[idx].mean(axis=1)


def paired_interval(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int = 0) -> tuple[float, float, float]:
    """Mean of a - b and its bootstrap 95% interval, resampling questions (paired; NaN rows dropped)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    d = d[~np.isnan(d)]
    if not len(d):
        return float("nan"), float("nan"), float("nan")
    boots = bootstrap_means(d[:, None], n_boot, seed)[:, 0]
    return float(d.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def share_kept(gain: np.ndarray, reference_gain: np.ndarray, n_boot: int, seed: int = 0) -> dict:
    """The share of a reference policy's gain that a policy keeps, from per-question gains over one base
    policy ([Q] each, paired; NaN rows dropped): mean(gain) / mean(reference_gain), and its 95% percentile
    bootstrap interval resampling questions (the same draws for both means). NaN (share, lo, hi) where the
    reference's own gain is not above 0 beyond its interval as printed (:func:`~mogg.evaluation.names.beyond_zero`,
    the tables' bold): there is no gain to keep, and the ratio of two
    means near 0 says nothing. ``reference``: that gain's mean and interval, so a reader sees what the share
    is a share of (the issue 58 bars: "keeps at least 90% of the in-set selector's gain over the envelope")."""
    a, r = np.asarray(gain, float), np.asarray(reference_gain, float)
    keep = ~(np.isnan(a) | np.isnan(r))
    a, r = a[keep], r[keep]
    nan = float("nan")
    if not len(a):
        return {"share": nan, "lo": nan, "hi": nan, "n": 0, "reference": {"mean": nan, "lo": nan, "hi": nan}}
    ra, rr = bootstrap_means(np.stack([a, r], axis=1), n_boot, seed).T
    ref = {"mean": float(r.mean()), "lo": float(np.quantile(rr, 0.025)), "hi": float(np.quantile(rr, 0.975))}
    out = {"share": nan, "lo": nan, "hi": nan, "n": int(len(a)), "reference": ref}
    if beyond_zero(ref["lo"]):  # as the tables bold it; most draws' reference gain is then positive: finite tails
        ratio = ra / np.where(rr > 0, rr, np.nan)
        out.update(share=float(a.mean() / r.mean()), lo=float(np.nanquantile(ratio, 0.025)),
                   hi=float(np.nanquantile(ratio, 0.975)))
    return out


def area_share(budgets: np.ndarray, policy: np.ndarray, envelope: np.ndarray, oracle: np.ndarray) -> float:
    """Area between a policy's F1 curve and the envelope's over log(budget), as a share of the
    area between the oracle frontier and the envelope (1 = the oracle, 0 = the envelope)."""
    x = np.log(np.asarray(budgets, float))
    num = np.trapezoid(np.asarray(policy) - envelope, x)
    den = np.trapezoid(np.asarray(oracle) - envelope, x)
    return float(num / den) if den > 0 else float("nan")


def tokens_to_reach(tokens: np.ndarray, f1: np.ndarray, target: float) -> float:
    """The fewest mean tokens at which a curve reaches ``target`` F1 (NaN: never)."""
    ok = np.asarray(f1) >= target - 1e-12
    return float(np.min(np.asarray(tokens)[ok])) if ok.any() else float("nan")
