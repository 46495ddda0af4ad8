"""The frontier evaluation rendered: the report's markdown table and the frontier plots.

Reads the dictionary :func:`mogg.evaluation.frontier_report.frontier_evaluation` returns; computes
nothing but layout. What the learned budget routers' rows look like (styles, which are drawn
last, shaded or banded, marked at the table's budgets; their caption rule and notes) comes from
their policies (:class:`mogg.evaluation.frontier_guard.BudgetPolicy`): nothing here names a kind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path
from mogg.evaluation import names as N


def _present(policies, fr: dict, budgets: list[int]) -> list:
    """The policies whose rows the table holds (a run without a kind has none of its rows)."""
    row0 = fr["budgets"][budgets[0]] if budgets else {}
    return [p for p in policies if any(r in row0 or r in fr.get("curves", {}) for r in (*p.STYLES, *p.HEADLINE))]


def frontier_section(name: str, fr: dict, budgets: list[int], policies=()) -> list[str]:
    """Markdown: F1 at matched mean tokens with paired 95% intervals against the envelope;
    ``policies``: the learned budget routers' policies (their caption rule and notes)."""
    present = _present(policies, fr, budgets)
    rule = "".join(p.RULE for p in present) or "; "  # how the learned rows deploy, where the table has them
    md = [f"## F1 at matched reading cost: `{name}`", "",
          f"n = {fr['n']} questions with gold evidence" + (f" ({fr['n_dropped']} without are left out)" if fr["n_dropped"] else "")
          + ". Each policy deploys, per fold, the configuration chosen on the training folds to read <= B mean tokens"
          + rule + "cells are evidence F1 ± se "
          "(mean tokens read) and [paired 95% interval of the difference to the envelope]. The envelope is the best "
          "fixed (level, k, cap) chosen on the training folds; the hindsight envelope is chosen on the test questions "
          "themselves and the oracle frontier picks per question (ceilings, not deployable).", "",
          "| policy | " + " | ".join(f"B = {b}" for b in budgets) + " | area | tokens to reach |", "|---" * (len(budgets) + 3) + "|"]
    pols = list(fr["budgets"][budgets[0]])
    ceilings = {*N.FRONTIER_CEILINGS, *(c for p in present for c in p.ceilings)}
    for p in pols:
        cells = [p]
        for b in budgets:
            r = fr["budgets"][b][p]
            f, t = r["f1"], r["tokens"]["mean"]
            txt = f"{f['mean']:.3f}" + ("" if np.isnan(f.get("se", np.nan)) else f" ± {f['se']:.3f}") + f" ({t:.0f})"
            v = r.get("vs_envelope")
            if v and p != "envelope" and not np.isnan(v["mean"]):
                txt += f" [{v['lo']:+.3f}, {v['hi']:+.3f}]"
                if p not in ceilings and N.beyond_zero(v["lo"]):
                    txt = f"**{txt}**"
            cells.append(txt)
        a, reach = fr["area"].get(p), fr["reach"].get(p, np.nan)
        cells.append("-" if a is None or np.isnan(a) else f"{a:+.2f}")
        cells.append("never" if np.isnan(reach) else f"{reach:.0f}")
        md.append("| " + " | ".join(cells) + " |")
    md += ["", "**Bold**: above the envelope beyond the paired 95% interval (its lower bound > 0 as printed). "
           f"Ceilings, never bold (they choose with the test questions' labels): {', '.join(c for c in pols if c in ceilings)}.",
           "", f"Area: between the policy's curve and the envelope's over log tokens in [{min(budgets)}, {max(budgets)}], as a "
           f"share of the oracle frontier's (1 = oracle, 0 = envelope). Tokens to reach: the fewest mean tokens at which "
           f"the policy reaches the envelope's best F1 ({fr['reach_target']:.3f}).", ""]
    notes = [p.notes(fr, budgets) for p in present]
    for before, _ in notes:
        md += before
    row0 = fr["budgets"][budgets[0]]
    for row in [r for r in row0 if r.startswith("transferred")]:  # leave-one-set-out: trained on the other sets
        cells = []
        for b in budgets:
            r = fr["budgets"][b][row]
            v = r.get("vs_training_envelope", {})
            cells.append(f"B={b}: {r['config']}, {v.get('mean', float('nan')):+.3f} "
                         f"[{v.get('lo', float('nan')):+.3f}, {v.get('hi', float('nan')):+.3f}]")
        md += [f"The {row} (trained on the other sets, guarded on their validation questions) against the "
               "training sets' envelope (what one deploys on a new set without its labels), paired 95% interval: "
               + "; ".join(cells) + ". The envelope row above is this set's own, cross-fitted: it needs this set's labels."
               + kept_sentence([fr["budgets"][b][row].get("kept") for b in budgets], budgets), ""]
    for _, after in notes:
        md += after
    return md + [f"![F1 vs tokens]({name}_frontier.png)", ""]


def kept_cell(k: dict) -> str:
    """One budget's share of the in-set row's gain kept (:func:`~mogg.evaluation.frontier.share_kept`): ``58% [40%,
    77%]``, or ``-`` where the in-set row is not above the envelope beyond its interval (no gain to keep)."""
    if k is None or np.isnan(k.get("share", np.nan)):
        return "-"
    pct = [f"{round(float(k[x]), 2) + 0.0:.0%}" for x in ("share", "lo", "hi")]  # + 0.0: "0%", never "-0%"
    return f"{pct[0]} [{pct[1]}, {pct[2]}]"


def kept_sentence(kept: list, budgets: list[int]) -> str:
    """The report's line on a transferred row's share of its kind's in-set gain (``kept`` per budget, None where
    the row has none): empty where no budget has one."""
    if not any(kept):
        return ""
    of = next(k["of"] for k in kept if k)
    cells = "; ".join(f"B={b}: {kept_cell(k)}" for b, k in zip(budgets, kept))
    return (f" It keeps this share of the in-set {of}'s gain over the envelope (mean gain over mean gain, 95% "
            f"interval resampling questions; - where the {of} is not above the envelope beyond its interval): {cells}.")


def plot_frontier(name: str, fr: dict, path: Path, policies=()) -> None:
    """:func:`frontier_figure` saved as a PNG at ``path``."""
    fig = frontier_figure(name, fr, policies)  # selects the Agg backend before pyplot is imported here
    import matplotlib.pyplot as plt

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, format="png")  # at the figure's own DPI, the one its legend was fitted at
    plt.close(fig)


DPI = 130
LEGEND_COLUMNS = (4, 3, 2, 1)


def _fit_legend(fig, handles: list, labels: list) -> None:
    """The legend under the panels with as many columns (at most 4) as fit the figure's width: four
    columns of a transfer report's long labels ran off both edges of the saved image (issue 61).
    Measured with the renderer at the figure's DPI, the one :func:`plot_frontier` saves at."""
    renderer = fig.canvas.get_renderer()
    for ncol in LEGEND_COLUMNS:
        legend = fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8, frameon=False)
        if legend.get_window_extent(renderer).width <= 0.98 * fig.bbox.width or ncol == LEGEND_COLUMNS[-1]:
            return
        legend.remove()


def frontier_figure(name: str, fr: dict, policies=()):
    """Two panels: (a) evidence F1 against mean context tokens for every family, the oracle frontier
    dotted, the report table's budgets B marked on the envelope and the router policy; (b) each
    policy's gain over the envelope at the same budget, with the router policy's paired 95%
    bootstrap band and the oracle's gain, the table's budgets as vertical lines. Colours follow
    :func:`mogg.evaluation.style.policy_style` and the ``policies``' own styles; a row faded in (a)
    is faded in (b) too, so that its one legend swatch matches both panels' lines. The legend sits
    below the panels, outside them: the layout makes room for it, however many rows it has (drawn
    over the panels, a transfer report's legend covered both x-axis labels, issue 61)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mogg.evaluation.style import policy_style

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12.5, 5.2), dpi=DPI, layout="constrained")
    c, budgets = fr["curves"], sorted(int(b) for b in fr["budgets"])
    own = {n: st for p in policies for n, st in p.STYLES.items()}

    last = {"envelope", *(n for p in policies for n in p.HEADLINE)}

    def style(n: str) -> dict:  # the other learned and reference rows faded: (a) reads envelope vs best vs ceilings
        st = policy_style(n, own=own)
        return st if n in last else {**st, "lw": 0.9, "alpha": 0.35}

    order = sorted(c, key=lambda n: (n in last, n))  # the ones that matter drawn last
    shaded = {"envelope", *(n for p in policies for n in p.SHADED)}
    for n in order:
        st = style(n)
        x, y = np.array(c[n]["tokens"]), np.array(c[n]["f1"])
        if n in last:
            ax.plot(x, y, marker="o", ms=2.5, label=n, **st)
        else:
            ax.plot(x, y, label=f"{n} (faded)", **st)
        if n in shaded:
            se = np.array(c[n]["se"])
            ax.fill_between(x, y - 1.96 * se, y + 1.96 * se, color=st["color"], alpha=0.12, lw=0)
    ox, oy = fr["oracle_curve"]
    ax.plot(ox, oy, label="oracle frontier (ceiling)", **policy_style("oracle"))
    grid_ = fr.get("grid", {})
    ceilings = [n for p in policies for n in p.ceilings]
    for n in ceilings:  # a learned policy's own ceiling (the sentence oracle)
        if n in grid_:
            ax.plot(grid_[f"{n} tokens"], grid_[n], label=f"{n} (ceiling)", **policy_style(n, own=own))
    row0 = fr["budgets"][budgets[0]]
    for n in [n for n in row0 if n not in c and n != "oracle" and n not in ceilings]:  # rows without a curve
        pts = [(fr["budgets"][b][n]["tokens"]["mean"], fr["budgets"][b][n]["f1"]["mean"]) for b in budgets]
        ax.plot(*zip(*sorted(set(pts))), marker="^", ms=5, label=f"{n} (the table's budgets only)",
                **{**policy_style(n, own=own), "ls": "--"})
    marked = {n: m for p in policies for n, m in p.MARKS.items()}
    for n in (n for n in last if n in row0 and n != "envelope" and n not in marked):  # every headline row
        marked[n] = "D"
    marks = [("envelope", "s"), *marked.items()]
    said = False  # the budgets are labelled once (on the first learned row): the markers line up
    for n, mark in marks:  # the table's cells
        if n not in fr["budgets"][budgets[0]]:
            continue
        pts = [(fr["budgets"][b][n]["tokens"]["mean"], fr["budgets"][b][n]["f1"]["mean"]) for b in budgets]
        ax.scatter(*zip(*pts), marker=mark, s=46, facecolor="white", edgecolor=style(n)["color"], lw=1.6,
                   zorder=5, label=f"{n} at the table's budgets")
        if n != "envelope" and not said:  # budgets whose deployments coincide share one label ("B=256, 512")
            said = True
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
            st = style(n)  # as in (a): one legend swatch for both panels' line
            bx.plot(grid, np.array(c[n]["f1"]) - env, **({"marker": "o", "ms": 2.5} if n in last else {}), **st)

        def bands(inside: bool) -> None:  # a chunk-level router's band under the ceilings, an inside one's over them
            for n in (n for p in policies if p.reads_units == inside for n in p.BANDS):
                if n in c and "gain_lo" in c[n]:
                    bx.fill_between(grid, c[n]["gain_lo"], c[n]["gain_hi"], color=style(n)["color"], alpha=0.15, lw=0,
                                    label=f"{n}: paired 95% bootstrap band")

        bands(False)
        bx.plot(grid, np.array(fr["grid"]["oracle"]) - env, **policy_style("oracle"))
        for n in ceilings:
            if n in fr["grid"]:
                bx.plot(grid, np.array(fr["grid"][n]) - env, **policy_style(n, own=own))
        bands(True)
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
    # "outside": the constrained layout shrinks the panels to make room (a legend placed in a fixed
    # margin overlapped the x-axis labels once it had more rows than the margin), in as many columns as fit
    _fit_legend(fig, handles + h2, labels + l2)
    return fig


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
