"""The learned policies on the frontier and the guard that deploys them at a budget.

A learned policy (:class:`Learned`: per question one of its own plans, e.g. a fixed (level, k, cap)
or a prefix of a ranking of sentences) has out-of-fold utilities per plan; at a budget B each
fold's cost weight lambda is chosen on that fold's validation questions (:func:`best_lambda`). The
guard (:func:`guarded_at`, one test: :func:`guard_check`) deploys a candidate in fold k only where
its paired gain over the envelope on pooled validation questions beats ``guard_se`` standard errors
within B, else the fixed envelope chosen on the training folds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mogg.core.metrics import aggregate
from mogg.evaluation.frontier import Family, calibrate_lambda, choose_config, paired_interval
from mogg.routing.plans import decide

TOKEN_SLACK = 0.02  # the guard's tolerance on pooled validation tokens (guarded_at)


def table_row(f1: np.ndarray, tok: np.ndarray, env_f1: np.ndarray, n_boot: int, seed: int, config: str = "") -> dict:
    """One cell of the matched-cost table: mean F1 and tokens, the paired interval against the
    envelope's per-question F1 ``env_f1``, and the per-question arrays (``_q``, popped by the report)."""
    d, lo, hi = paired_interval(f1, env_f1, n_boot, seed)
    return {"f1": aggregate(f1), "tokens": aggregate(tok), "vs_envelope": {"mean": d, "lo": lo, "hi": hi},
            "config": config, "_q": (np.asarray(f1, float), np.asarray(tok, float))}


def cut_family(fam: Family, sub: np.ndarray) -> Family:
    """``fam`` on questions ``sub`` only."""
    return Family(fam.name, fam.f1[sub], fam.tokens[sub], fam.configs, fam.fixed, fam.meta, fam.routed)


@dataclass
class TableAt:
    """What a learned policy's rows at one budget see (:meth:`BudgetPolicy.rows`): the fixed family,
    the folds [Q], the envelope's per-question F1 at that budget [Q] (the paired intervals'
    reference), the families a router policy may deploy instead (``routed``: eq. 1-2 under the
    level router's weights) and the bootstrap's resamples and seed."""

    fixed: Family
    folds: np.ndarray
    env_f1: np.ndarray
    routed: list
    n_boot: int
    seed: int

    def row(self, f1: np.ndarray, tok: np.ndarray, config: str = "") -> dict:
        return table_row(f1, tok, self.env_f1, self.n_boot, self.seed, config)


class BudgetPolicy:
    """What a learned budget router gives the frontier table (:func:`mogg.evaluation.frontier_report.frontier_evaluation`),
    whatever it learned: its rows at a budget, the same policy on a subset of the questions, the
    report's extra facts and its ceilings (hindsight rows drawn on the grid, not as curves).

    ``reads_units``: False for policies over whole chunks (their rows lead the table, before the
    fixed families), True for policies that read inside the chunk (their rows follow the chunk
    oracle, beside their own ceiling).

    What its rows look like in the report is the kind's too (the evaluation layer names no kind):
    ``STYLES`` (row -> matplotlib colour, line style and width), ``HEADLINE`` (rows drawn last in
    the frontier plot), ``SHADED`` (rows drawn with their ±1.96 se), ``BANDS`` (rows drawn with
    their paired band against the envelope), ``MARKS`` (row -> marker at the table's budgets),
    ``RULE`` (how its rows deploy, said once in the table's caption) and :meth:`notes` (lines under
    the table)."""

    reads_units: bool = False
    ceilings: tuple[str, ...] = ()
    STYLES: dict[str, dict] = {}
    HEADLINE: tuple[str, ...] = ()
    SHADED: tuple[str, ...] = ()
    BANDS: tuple[str, ...] = ()
    MARKS: dict[str, str] = {}
    RULE: str = ""

    def notes(self, fr: dict, budgets: list[int]) -> tuple[list[str], list[str]]:
        """Report lines about its rows: (after the table's area paragraph, after the transfer lines)."""
        return [], []

    def cut(self, sub: np.ndarray, new: np.ndarray) -> "BudgetPolicy":
        """The same policy on questions ``sub`` (``new``: old row -> new row, -1 dropped)."""
        raise NotImplementedError

    def rows(self, budget: float, table: TableAt) -> dict[str, dict]:
        """Its rows of the table at ``budget`` (cells from :meth:`TableAt.row`)."""
        raise NotImplementedError

    def report(self) -> dict:
        """Extra facts for the frontier's dictionary (e.g. a wall-clock cost)."""
        return {}

    def learned(self, fixed: Family) -> "Learned | None":
        """Its plans as a :class:`Learned` over ``fixed``'s columns (chunk-level routers: what a
        router reading inside the chunk trims, route + trim), or None."""
        return None


def best_lambda(util: np.ndarray, tokens: np.ndarray, f1: np.ndarray, budget: float,
                max_tokens: float | None = None) -> float:
    """The cost weight for ``budget``, chosen on validation rows: among lambda >= the calibrated one
    (so mean tokens stay <= budget there), the one with the best validation F1, as the envelope
    takes the best configuration under the budget rather than the one that spends it all (reading
    more can lower F1). Ties: the smallest lambda."""
    lam0 = calibrate_lambda(util, tokens, budget)
    cands = np.r_[lam0, lam0 * np.geomspace(1.25, 1e4, 40) if lam0 > 0 else np.geomspace(1e-6, 1.0, 40)]
    rows = np.arange(len(util))
    scores = [np.nanmean(f1[rows, decide(util, tokens, lam, max_tokens)]) for lam in cands]
    return float(cands[int(np.argmax(scores))])


def monotone_prices(price: dict) -> dict:
    """Budget -> price of a token (lambda), each raised to at least every larger budget's: a larger budget's
    price reads fewer tokens than that budget, so it is within a smaller one too, and a smaller budget never
    reads more than a larger one because :func:`best_lambda` chose each on its own grid (relative to that
    budget's calibrated lambda; the transfer directory's COVID-QA runs chose 0.00092 at B = 128 and 0.00116 at
    256, and read 40 tokens at 128 against 27 at 256: docs/results.md, "The price at a smaller budget at least a
    larger one's")."""
    out, floor = {}, -np.inf
    for b in sorted(price, key=float, reverse=True):
        floor = out[b] = max(float(price[b]), floor)
    return {b: out[b] for b in price}


@dataclass
class Learned:
    """A learned policy over its own per-question plans (e.g. a fixed (level, k, cap), or a prefix
    of a ranking of sentences): out-of-fold predicted utilities and each
    plan's true F1 and tokens [Q, A]; per fold its validation questions with that fold's utilities
    and the plans' F1 and tokens there (where lambda is calibrated). Rows index the questions."""

    name: str
    util: np.ndarray
    f1: np.ndarray
    tokens: np.ndarray
    val: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # per fold: (rows, util, f1, tokens)
    max_tokens: float | None = None

    def cut(self, sub: np.ndarray, new: np.ndarray) -> "Learned":
        """The same policy on questions ``sub`` (``new``: old row -> new row, -1 dropped)."""
        val = []
        for v, u, f, t in self.val:
            ok = new[v] >= 0
            val.append((new[v][ok], u[ok], f[ok], t[ok]))
        return Learned(self.name, self.util[sub], self.f1[sub], self.tokens[sub], val, self.max_tokens)

    def choices(self, j: int, test: np.ndarray, budget: float) -> tuple[float, np.ndarray, np.ndarray]:
        """Fold j at ``budget``: lambda (chosen on its validation questions) and the plans it picks
        for the ``test`` rows and for its validation rows."""
        vrows, vutil, vf, vt = self.val[j]
        lam = best_lambda(vutil, vt, vf, budget, self.max_tokens) if len(vrows) else 0.0
        ch = decide(self.util[test], self.tokens[test], lam, self.max_tokens)
        va = decide(vutil, vt, lam, self.max_tokens) if len(vrows) else np.zeros(0, dtype=np.int64)
        return lam, ch, va

    def at_fold(self, j: int, test: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Fold j at ``budget``: test F1 and tokens, validation F1 and tokens (lambda from validation)."""
        vrows, _, vf, vt = self.val[j]
        lam, ch, va = self.choices(j, test, budget)
        rt, rv = np.arange(len(test)), np.arange(len(vrows))
        return (self.f1[test][rt, ch], self.tokens[test][rt, ch], vf[rv, va], vt[rv, va],
                {"lambda": lam, "n_val": int(len(vrows))})


def guard_check(d: np.ndarray, tokens: float, budget: float, guard_se: float, cheaper: bool = False) -> dict:
    """The guard's test of one candidate: its paired F1 gains over the envelope ``d`` (per question;
    NaN rows dropped) beat ``guard_se`` standard errors and its mean ``tokens`` stay within the
    budget (+ ``TOKEN_SLACK``; ``cheaper``: or no dearer than the envelope where nothing fits).
    ``{"n", "gain", "se", "tokens", "passes"}``."""
    d = d[~np.isnan(d)]
    gain = float(d.mean()) if len(d) else 0.0
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
    fits = tokens <= budget * (1 + TOKEN_SLACK) + 1e-9 or cheaper
    return {"n": int(len(d)), "gain": gain, "se": se, "tokens": tokens, "passes": bool(fits and gain > guard_se * se)}


def guarded_at(fold: np.ndarray, fixed: Family, budget: float, candidates: list, guard: bool,
               guard_se: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], list[dict]]:
    """A guarded policy at ``budget``: per question its F1 and tokens, which candidate decided (int
    [Q] into the returned names; -1: the guard kept the envelope's configuration), and per-fold facts.

    Candidates: :class:`Learned` policies (lambda calibrated on their fold's validation questions)
    and families (each deployed at the configuration chosen on its training folds). The guard for
    fold k pools every fold j's validation rows that are not fold k's test rows (fold j's candidate
    against fold j's envelope on them): no test row of fold k enters its decision, and the pooled
    slice is ~4x a single fold's. Fold k deploys the candidate with the best pooled gain among those
    beating the envelope by ``guard_se`` standard errors (the one-SE rule), else the envelope.
    Without ``guard`` the first candidate decides everywhere.
    """
    f, t = fixed.f1, fixed.tokens
    names = [c.name for c in candidates]
    n_q, n_c = len(fold), len(candidates)
    qf, qt = np.empty((n_c, n_q)), np.empty((n_c, n_q))  # every candidate's test-fold outcome
    env_f, env_t = np.empty(n_q), np.empty(n_q)
    facts, diffs = [], []  # diffs[j][c]: fold j's validation rows, candidate c minus fold j's envelope
    folds = np.unique(fold)
    for j in folds:
        test = np.flatnonzero(fold == j)
        train = np.flatnonzero(fold != j)
        env = choose_config(f, t, train, budget)
        env_f[test], env_t[test] = f[test, env], t[test, env]
        vrows = next((c.val[j][0] for c in candidates if isinstance(c, Learned)), np.zeros(0, dtype=np.int64))
        fact: dict = {"fold": int(j)}
        d, dt = [np.zeros(0)] * n_c, [np.zeros(0)] * n_c  # F1 and token differences to the envelope
        for c, cand in enumerate(candidates):
            if isinstance(cand, Learned):
                qf[c, test], qt[c, test], vf, vt, info = cand.at_fold(j, test, budget)
                vrows = cand.val[j][0]
                if c == 0:  # the first candidate's calibration is the policy's fact
                    fact.update(info, envelope=fixed.configs[env])
                    if len(vrows):
                        fact.update(val_tokens=float(vt.mean()), val_f1=float(np.nanmean(vf)),
                                    val_envelope_f1=float(np.nanmean(f[vrows, env])))
                if len(vrows):
                    d[c], dt[c] = vf - f[vrows, env], vt - t[vrows, env]
            else:
                cc = choose_config(cand.f1, cand.tokens, train, budget)
                qf[c, test], qt[c, test] = cand.f1[test, cc], cand.tokens[test, cc]
                if len(vrows):
                    d[c], dt[c] = cand.f1[vrows, cc] - f[vrows, env], cand.tokens[vrows, cc] - t[vrows, env]
        fact.setdefault("envelope", fixed.configs[env])
        diffs.append((vrows, d, dt, t[vrows, env]))
        facts.append(fact)
    source = np.zeros(n_q, dtype=np.int64)
    out_f, out_t = qf[0].copy(), qt[0].copy()
    if guard:
        rows_all = np.arange(n_q)
        for k, fact in zip(folds, facts):
            test = fold == k
            gains = []
            env_tok = np.concatenate([et[~test[vj]] for vj, _, _, et in diffs])
            for c in range(n_c):
                dd = np.concatenate([dj[c][~test[vj]] for vj, dj, _, _ in diffs])
                extra = np.concatenate([tj[c][~test[vj]] for vj, _, tj, _ in diffs])
                ok = ~np.isnan(dd)
                # within the budget on validation, or no dearer than the envelope where nothing fits;
                # TOKEN_SLACK: each fold's lambda holds its own validation slice to <= B, the pool here
                # drops the rows in fold k's test set, and a subset's mean may pass B by a token
                tokens = float((env_tok[ok] + extra[ok]).mean()) if ok.any() else 0.0
                g = guard_check(dd, tokens, budget, guard_se, bool(ok.any() and extra[ok].mean() <= 1e-9))
                gains.append({"candidate": names[c], "n": g["n"], "gain": g["gain"], "se": g["se"], "tokens": tokens,
                              "passes": g["passes"]})
            fact["guard"] = gains
            ok = [c for c in range(n_c) if gains[c]["passes"]]
            rows = rows_all[test]
            if ok:
                best = max(ok, key=lambda c: gains[c]["gain"])
                source[rows], out_f[rows], out_t[rows] = best, qf[best, rows], qt[best, rows]
                fact["deployed"] = names[best]
            else:
                source[rows], out_f[rows], out_t[rows] = -1, env_f[rows], env_t[rows]
                fact["deployed"] = "envelope"
    return out_f, out_t, source, names, facts


def out_of_fold_guard(learned: Learned, fold: np.ndarray, fixed: Family, budgets, guard: bool,
                      guard_se: float) -> dict[int, dict]:
    """Per budget, what a final fit deploys: the cross-fitted policy ``learned`` (lambda calibrated
    per fold on its validation questions) against the envelope each fold chose on its training
    folds, on every question out of fold (``fold`` [Q]): ``{"deploy": "router" | "envelope", "gain",
    "se", "n", "tokens", "guard"}`` (:func:`guard_check`; without ``guard`` the policy always)."""
    out = {}
    for b in budgets:
        d, tok = np.full(len(fold), np.nan), np.full(len(fold), np.nan)
        for j in np.unique(fold):
            test = np.flatnonzero(fold == j)
            f, t, *_ = learned.at_fold(j, test, b)
            env = choose_config(fixed.f1, fixed.tokens, np.flatnonzero(fold != j), b)
            d[test], tok[test] = f - fixed.f1[test, env], t
        ok = ~np.isnan(d)
        g = guard_check(d, float(tok[ok].mean()) if ok.any() else 0.0, b, guard_se)
        out[int(b)] = {"deploy": "router" if g["passes"] or not guard else "envelope", "gain": g["gain"], "se": g["se"],
                       "n": g["n"], "tokens": g["tokens"], "guard": bool(guard)}
    return out
