"""The frontier evaluation rendered: the report's markdown table and the frontier plots.

Reads the dictionary :func:`mogg.evaluation.frontier_report.frontier_evaluation` returns; computes
nothing but layout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path


def frontier_section(name: str, fr: dict, budgets: list[int]) -> list[str]:
    """Markdown: F1 at matched mean tokens with paired 95% intervals against the envelope."""
    # the router policy's rule, where the table has its row (a run without the action router has none)
    rule = (" (the router: the action router, lambda calibrated on its fold's validation questions, or eq. 1-2 under the "
            "level router's weights, whichever beats the envelope on pooled validation questions by one standard error, "
            "else the envelope); ") if "router" in fr["budgets"][budgets[0]] else "; "
    md = [f"## F1 at matched reading cost: `{name}`", "",
          f"n = {fr['n']} questions with gold evidence" + (f" ({fr['n_dropped']} without are left out)" if fr["n_dropped"] else "")
          + ". Each policy deploys, per fold, the configuration chosen on the training folds to read <= B mean tokens"
          + rule + "cells are evidence F1 ± se "
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
        own = "; ".join(f"{b}: {fr['budgets'][b]['router']['config']}" for b in budgets)
        md += ["Configurations deployed: " + "; ".join(f"B={b}: envelope `{fr['budgets'][b]['envelope']['config']}`"
                                                       for b in budgets) + ".",
               f"The router policy's deciders (share of questions; envelope = the guard kept it): {own}.", ""]
    row0 = fr["budgets"][budgets[0]]
    if "transferred router" in row0:  # leave-one-set-out: the router trained on the other sets
        cells = []
        for b in budgets:
            r = fr["budgets"][b]["transferred router"]
            v = r.get("vs_training_envelope", {})
            cells.append(f"B={b}: {r['config']}, {v.get('mean', float('nan')):+.3f} "
                         f"[{v.get('lo', float('nan')):+.3f}, {v.get('hi', float('nan')):+.3f}]")
        md += ["The transferred router (trained on the other sets, guarded on their validation questions) against the "
               "training sets' envelope (what one deploys on a new set without its labels), paired 95% interval: "
               + "; ".join(cells) + ". The envelope row above is this set's own, cross-fitted: it needs this set's labels.", ""]
    if "selector_cost_ms" in fr:  # wall clock: differs between runs (the only such line of a report)
        c = fr["selector_cost_ms"]
        md += [f"Reading inside the chunk costs {c['features']:.2f} ms per question to gather the candidates and their "
               f"features and {c['scoring']:.3f} ms to score them (wall clock, this run).", ""]
    return md + [f"![F1 vs tokens]({name}_frontier.png)", ""]


def plot_frontier(name: str, fr: dict, path: Path) -> None:
    """Two panels: (a) evidence F1 against mean context tokens for every family, the oracle frontier
    dotted, the report table's budgets B marked on the envelope and the router policy; (b) each
    policy's gain over the envelope at the same budget, with the router policy's paired 95%
    bootstrap band and the oracle's gain, the table's budgets as vertical lines. Colours follow
    :func:`mogg.evaluation.style.policy_style`; the legend sits below the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mogg.evaluation.style import policy_style

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12.5, 5.2))
    c, budgets = fr["curves"], sorted(int(b) for b in fr["budgets"])
    order = sorted(c, key=lambda n: (n in ("router", "envelope", "selector"), n))  # the ones that matter drawn last
    for n in order:
        st = policy_style(n)
        x, y = np.array(c[n]["tokens"]), np.array(c[n]["f1"])
        ax.plot(x, y, marker="o", ms=2.5, label=n, **st)
        if n in ("envelope", "router"):
            se = np.array(c[n]["se"])
            ax.fill_between(x, y - 1.96 * se, y + 1.96 * se, color=st["color"], alpha=0.12, lw=0)
    ox, oy = fr["oracle_curve"]
    ax.plot(ox, oy, label="oracle frontier (ceiling)", **policy_style("oracle"))
    grid_ = fr.get("grid", {})
    if "sentence oracle" in grid_:  # the ceiling of reading inside the chunk
        ax.plot(grid_["sentence oracle tokens"], grid_["sentence oracle"], label="sentence oracle (ceiling)",
                **policy_style("sentence oracle"))
    for n, mark in (("envelope", "s"), ("router", "D")):  # the table's cells
        if n not in fr["budgets"][budgets[0]]:
            continue
        pts = [(fr["budgets"][b][n]["tokens"]["mean"], fr["budgets"][b][n]["f1"]["mean"]) for b in budgets]
        ax.scatter(*zip(*pts), marker=mark, s=46, facecolor="white", edgecolor=policy_style(n)["color"], lw=1.6,
                   zorder=5, label=f"{n} at the table's budgets")
        if n == "router":  # budgets whose deployments coincide share one label ("B=256, 512")
            at: dict[tuple, list[int]] = {}
            for b, p in zip(budgets, pts):
                at.setdefault((round(p[0], 1), round(p[1], 4)), []).append(b)
            for (x, y), bs in at.items():
                ax.annotate("B=" + ", ".join(map(str, bs)), (x, y), textcoords="offset points", xytext=(-5, 7),
                            fontsize=7, ha="right")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("mean context tokens read")
    ax.set_ylabel("evidence F1")
    ax.set_title(f"(a) {name}: F1 vs reading cost (n = {fr['n']})\nshaded: ±1.96 se of the mean F1", fontsize=10)
    ax.grid(alpha=0.3)

    grid = np.array(fr.get("grid", {}).get("budget", []))
    if len(grid):
        env = np.array(c["envelope"]["f1"])
        bx.axhline(0, **{**policy_style("envelope"), "lw": 1.2})
        for n in order:
            if n == "envelope" or n == "envelope (hindsight)":
                continue
            st = policy_style(n)
            bx.plot(grid, np.array(c[n]["f1"]) - env, marker="o", ms=2.5, **st)
        if "router" in c and "gain_lo" in c["router"]:
            bx.fill_between(grid, c["router"]["gain_lo"], c["router"]["gain_hi"], color=policy_style("router")["color"],
                            alpha=0.15, lw=0, label="router: paired 95% bootstrap band")
        bx.plot(grid, np.array(fr["grid"]["oracle"]) - env, **policy_style("oracle"))
        if "sentence oracle" in fr["grid"]:
            bx.plot(grid, np.array(fr["grid"]["sentence oracle"]) - env, **policy_style("sentence oracle"))
        if "selector" in c and "gain_lo" in c["selector"]:
            bx.fill_between(grid, c["selector"]["gain_lo"], c["selector"]["gain_hi"],
                            color=policy_style("selector")["color"], alpha=0.15, lw=0,
                            label="selector: paired 95% bootstrap band")
        for b in budgets:
            bx.axvline(b, color="0.6", lw=0.8, ls=(0, (2, 3)))
            bx.text(b, 0.01, f" B={b}", transform=bx.get_xaxis_transform(), fontsize=7, ha="left", va="bottom",
                    color="0.35")
        bx.set_xscale("log", base=2)
        bx.set_xlabel("budget B: mean context tokens allowed")
        bx.set_ylabel("F1 minus the envelope's at B")
        bx.set_title("(b) gain over the fixed envelope at matched budget\n(dotted verticals: the report table's budgets)",
                     fontsize=10)
        bx.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    h2, l2 = bx.get_legend_handles_labels()
    fig.legend(handles + h2, labels + l2, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    plt.close(fig)


def plot_ladders_frontier(frontiers: dict[str, dict], path: Path) -> None:
    """Every ladder's envelope (dashed), router (solid) and oracle (dotted) on one axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.2))
    for i, (name, fr) in enumerate(frontiers.items()):
        col = f"C{i}"  # one hue per ladder; envelope dashed, router solid, oracle dotted (as in plot_frontier)
        for n, ls, lw in (("envelope", "--", 1.5), ("router", "-", 2)):
            if n in fr["curves"]:
                ax.plot(fr["curves"][n]["tokens"], fr["curves"][n]["f1"], ls=ls, lw=lw, color=col, label=f"{name} {n}")
        ax.plot(*fr["oracle_curve"], ls=":", lw=1.2, color=col, label=f"{name} oracle")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("mean context tokens")
    ax.set_ylabel("evidence F1")
    ax.set_title("Ladders at matched reading cost")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=130, format="png")
    plt.close(fig)
