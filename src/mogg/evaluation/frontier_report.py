"""The frontier evaluation of one ladder: matched-cost table, area, tokens-to-reach, plots.

Every policy is compared at matched mean tokens B: a family deploys the configuration chosen on
the training folds for B (:func:`mogg.evaluation.frontier.crossfit_choice`), the action router
the cost weight calibrated on its fold's validation questions for B. Only questions with gold
evidence take part (F1 is undefined without it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.artifacts import atomic_path
from mogg.evaluation.frontier import (
    Family,
    area_share,
    calibrate_lambda,
    choose_config,
    crossfit_choice,
    oracle_at,
    oracle_frontier,
    paired_interval,
    pareto,
    tokens_to_reach,
)
from mogg.metrics import aggregate
from mogg.routing.actions import decide

GRID = 16.0 * np.sqrt(2.0) ** np.arange(13)  # 16 .. 1024 tokens, every half power of two


@dataclass
class RouterFolds:
    """What the frontier needs of a cross-fitted action router (rows index the questions)."""

    util: np.ndarray  # [Q, A] out-of-fold predicted utilities (columns = the fixed family's)
    fold: np.ndarray  # [Q]
    val: list[tuple[np.ndarray, np.ndarray]]  # per fold: (validation rows, that fold's utilities on them)
    guard: bool = True  # per fold and budget: keep the envelope's configuration unless the router beats it on validation
    max_tokens: float | None = None
    # ... by guard_se standard errors of the paired difference: lambda is chosen on the same
    # validation rows (optimistic), and a fold's validation slice is small, so a point-estimate
    # win there often does not hold on the fold's test questions (the one-SE rule)
    guard_se: float = 1.0


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


def route_at(r: RouterFolds, fixed: Family, budget: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """The router's choice per question at ``budget`` (int [Q]), whether it was the router's own
    (False: the guard kept the envelope's configuration), and per-fold calibration facts."""
    f, t = fixed.f1, fixed.tokens
    choice = np.empty(len(r.fold), dtype=np.int64)
    own = np.ones(len(r.fold), dtype=bool)
    facts = []
    for k, (vrows, vutil) in enumerate(r.val):
        test = np.flatnonzero(r.fold == k)
        lam = best_lambda(vutil, t[vrows], f[vrows], budget, r.max_tokens) if len(vrows) else 0.0
        choice[test] = decide(r.util[test], t[test], lam, r.max_tokens)
        env = choose_config(f, t, np.flatnonzero(r.fold != k), budget)
        fact = {"fold": k, "lambda": lam, "n_val": int(len(vrows))}
        if len(vrows):
            va = decide(vutil, t[vrows], lam, r.max_tokens)
            d = f[vrows, va] - f[vrows, env]
            d = d[~np.isnan(d)]
            se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0
            fact.update(val_tokens=float(t[vrows, va].mean()), val_f1=float(np.nanmean(f[vrows, va])),
                        val_envelope_f1=float(np.nanmean(f[vrows, env])), val_diff_se=se)
            if r.guard and not fact["val_f1"] - fact["val_envelope_f1"] > r.guard_se * se:
                choice[test], own[test] = env, False
        facts.append(fact)
    return choice, own, facts


def _row(f1: np.ndarray, tok: np.ndarray, env_f1: np.ndarray, n_boot: int, seed: int, config: str = "") -> dict:
    d, lo, hi = paired_interval(f1, env_f1, n_boot, seed)
    return {"f1": aggregate(f1), "tokens": aggregate(tok), "vs_envelope": {"mean": d, "lo": lo, "hi": hi},
            "config": config}


def _most_common(fam: Family, choice: np.ndarray) -> str:
    (c, n), = Counter(choice.tolist()).most_common(1)
    return fam.configs[c] + ("" if n == len(choice) else f" ({n / len(choice):.0%})")


def frontier_evaluation(fixed: Family, others: list[Family], folds: np.ndarray, budgets: list[int],
                        router: RouterFolds | None = None, n_boot: int = 1000, seed: int = 0) -> dict:
    """Matched-cost table at ``budgets``, curves on :data:`GRID`, area share and tokens-to-reach."""
    keep = ~np.isnan(fixed.f1).any(axis=1)
    if not keep.any():
        raise ValueError("no question has gold evidence: the frontier needs evidence F1")
    sub = np.flatnonzero(keep)
    new = np.full(len(keep), -1)
    new[sub] = np.arange(len(sub))

    def cut(fam: Family) -> Family:
        return Family(fam.name, fam.f1[sub], fam.tokens[sub], fam.configs, fam.fixed, fam.meta)

    fixed, others, folds = cut(fixed), [cut(o) for o in others], np.asarray(folds)[sub]
    if router is not None:
        val = [(new[v][new[v] >= 0], u[new[v] >= 0]) for v, u in router.val]
        router = RouterFolds(router.util[sub], router.fold[sub], val, router.guard, router.max_tokens, router.guard_se)
    rows = np.arange(len(sub))
    ox, oy = oracle_frontier(fixed.f1, fixed.tokens)
    hx, hy = pareto(np.c_[fixed.tokens.mean(0), fixed.f1.mean(0)])
    out: dict = {"n": int(len(sub)), "n_dropped": int((~keep).sum()), "budgets": {}, "curves": {},
                 "oracle_curve": [ox.tolist(), oy.tolist()], "hindsight_curve": [hx.tolist(), hy.tolist()]}

    def policies_at(b: float) -> dict:
        ef, et, ec = crossfit_choice(fixed.f1, fixed.tokens, folds, b)
        res = {"envelope": _row(ef, et, ef, n_boot, seed, _most_common(fixed, ec))}
        hc = choose_config(fixed.f1, fixed.tokens, rows, b)
        res["envelope (hindsight)"] = _row(fixed.f1[:, hc], fixed.tokens[:, hc], ef, n_boot, seed, fixed.configs[hc])
        if router is not None:
            ch, own, facts = route_at(router, fixed, b)
            res["router"] = _row(fixed.f1[rows, ch], fixed.tokens[rows, ch], ef, n_boot, seed, _most_common(fixed, ch))
            res["router"].update(own=float(own.mean()), calibration=facts)
            if router.guard:
                raw = RouterFolds(router.util, router.fold, router.val, False, router.max_tokens)
                ch, _, _ = route_at(raw, fixed, b)
                res["router (unguarded)"] = _row(fixed.f1[rows, ch], fixed.tokens[rows, ch], ef, n_boot, seed,
                                                 _most_common(fixed, ch))
        for fam in others:
            f, t, c = crossfit_choice(fam.f1, fam.tokens, folds, b)
            res[fam.name] = _row(f, t, ef, n_boot, seed, _most_common(fam, c))
        tx, fy = oracle_at(fixed.f1, fixed.tokens, b)
        res["oracle"] = {"f1": {"mean": fy, "se": float("nan"), "n": len(sub)}, "tokens": {"mean": tx}}
        return res

    for b in budgets:
        out["budgets"][int(b)] = policies_at(b)
    curves = {float(b): policies_at(b) for b in GRID}
    names = [n for n in curves[GRID[0]] if n != "oracle"]
    out["curves"] = {n: {"tokens": [curves[b][n]["tokens"]["mean"] for b in curves],
                         "f1": [curves[b][n]["f1"]["mean"] for b in curves],
                         "se": [curves[b][n]["f1"]["se"] for b in curves]} for n in names}
    lo, hi = min(budgets), max(budgets)
    span = [b for b in curves if lo <= b <= hi]
    env = np.array([curves[b]["envelope"]["f1"]["mean"] for b in span])
    orc = np.array([curves[b]['oracle']['f1']['mean'] for b in span])
    out["area"] = {n: area_share(np.array(span), np.array([curves[b][n]["f1"]["mean"] for b in span]), env, orc)
                   for n in names if n != "envelope"}
    out["area"]["oracle"] = 1.0
    target = max(out["curves"]["envelope"]["f1"])
    out["reach_target"] = target
    out["reach"] = {n: tokens_to_reach(np.array(c["tokens"]), np.array(c["f1"]), target) for n, c in out["curves"].items()}
    out["reach"]["oracle"] = tokens_to_reach(ox, oy, target)
    return out


def frontier_section(name: str, fr: dict, budgets: list[int]) -> list[str]:
    """Markdown: F1 at matched mean tokens with paired 95% intervals against the envelope."""
    md = [f"## F1 at matched reading cost: `{name}`", "",
          f"n = {fr['n']} questions with gold evidence" + (f" ({fr['n_dropped']} without are left out)" if fr["n_dropped"] else "")
          + ". Each policy deploys, per fold, the configuration chosen on the training folds to read <= B mean tokens "
          "(the router: its cost weight calibrated on its fold's validation questions); cells are evidence F1 ± se "
          "(mean tokens read) and [paired 95% interval of the difference to the envelope]. The envelope is the best "
          "fixed (level, k, cap) chosen on the training folds; the hindsight envelope is chosen on the test questions "
          "themselves and the oracle frontier picks per question (ceilings, not deployable).", "",
          "| policy | " + " | ".join(f"B = {b}" for b in budgets) + " | area | tokens to reach |", "|---" * (len(budgets) + 3) + "|"]
    pols = list(fr["budgets"][budgets[0]])
    for p in pols:
        cells = [p]
        for b in budgets:
            r = fr["budgets"][b][p]
            f, t = r["f1"], r["tokens"]["mean"]
            txt = f"{f['mean']:.3f}" + ("" if np.isnan(f.get("se", np.nan)) else f" ± {f['se']:.3f}") + f" ({t:.0f})"
            v = r.get("vs_envelope")
            if v and p != "envelope" and not np.isnan(v["mean"]):
                txt += f" [{v['lo']:+.3f}, {v['hi']:+.3f}]"
                if v["lo"] > 0:
                    txt = f"**{txt}**"
            cells.append(txt)
        a, reach = fr["area"].get(p), fr["reach"].get(p, np.nan)
        cells.append("-" if a is None or np.isnan(a) else f"{a:+.2f}")
        cells.append("never" if np.isnan(reach) else f"{reach:.0f}")
        md.append("| " + " | ".join(cells) + " |")
    md += ["", f"Area: between the policy's curve and the envelope's over log tokens in [{min(budgets)}, {max(budgets)}], as a "
           f"share of the oracle frontier's (1 = oracle, 0 = envelope). Tokens to reach: the fewest mean tokens at which "
           f"the policy reaches the envelope's best F1 ({fr['reach_target']:.3f}).", ""]
    if "router" in fr["budgets"][budgets[0]]:
        own = ", ".join(f"{b}: {fr['budgets'][b]['router']['own']:.0%}" for b in budgets)
        md += [f"Configurations deployed: " + "; ".join(f"B={b}: envelope `{fr['budgets'][b]['envelope']['config']}`"
                                                          for b in budgets) + ".",
               f"Share of questions routed by the router's own choice (not the guard's envelope fallback): {own}.", ""]
    return md + [f"![F1 vs tokens]({name}_frontier.png)", ""]


def plot_frontier(name: str, fr: dict, path: Path, ax=None) -> None:
    """F1 vs mean context tokens: envelope dashed, router solid, oracle dotted, 95% bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
    c = fr["curves"]
    styles = {"envelope": dict(ls="--", lw=2, color="C0"), "router": dict(ls="-", lw=2.2, color="C3"),
              "router (unguarded)": dict(ls="-", lw=1, color="C3", alpha=0.5),
              "envelope (hindsight)": dict(ls="--", lw=1, color="0.5")}
    for n, cur in c.items():
        x, y, se = (np.array(cur[k]) for k in ("tokens", "f1", "se"))
        st = styles.get(n, dict(ls="-", lw=0.9, alpha=0.8))
        ax.plot(x, y, marker="o", ms=2.5, label=n, **st)
        if n in ("envelope", "router"):
            ax.fill_between(x, y - 1.96 * se, y + 1.96 * se, color=st["color"], alpha=0.15, lw=0)
    ox, oy = fr["oracle_curve"]
    ax.plot(ox, oy, ls=":", lw=2, color="k", label="oracle frontier (ceiling)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("mean context tokens")
    ax.set_ylabel("evidence F1")
    ax.set_title(f"{name}: F1 vs reading cost (n = {fr['n']})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    if own:
        fig.tight_layout()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(Path(path)) as tmp:
            fig.savefig(tmp, dpi=130, format="png")
        plt.close(fig)


def plot_cross_ladders(frontiers: dict[str, dict], path: Path) -> None:
    """Every ladder's envelope (dashed), router (solid) and oracle (dotted) on one axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (name, fr) in enumerate(frontiers.items()):
        col = f"C{i}"
        for n, ls, lw in (("envelope", "--", 1.5), ("router", "-", 2)):
            if n in fr["curves"]:
                ax.plot(fr["curves"][n]["tokens"], fr["curves"][n]["f1"], ls=ls, lw=lw, color=col, label=f"{name} {n}")
        ax.plot(*fr["oracle_curve"], ls=":", lw=1.2, color=col, label=f"{name} oracle")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("mean context tokens")
    ax.set_ylabel("evidence F1")
    ax.set_title("Ladders at matched reading cost")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2, loc="lower right")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    plt.close(fig)
