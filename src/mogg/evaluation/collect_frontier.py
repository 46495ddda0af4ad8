"""The frontier over seeds: every ``<experiment>_s<seed>`` frontier run collected into one table.

Per experiment, ladder and budget B: each policy's evidence F1 and mean tokens as mean ± sd over
the seeds (from each run's ``metrics.json``), the oracle frontier's, and the **paired difference
to the envelope pooled over seeds**, question by question: for each question its difference
(policy minus envelope, both at B) is averaged over the seeds, and the mean of those per-question
averages gets a 95% percentile bootstrap interval that resamples questions (the same draws for
every policy). The seeds move folds, validation slices and initialisations; the questions are
the population a result must hold on, so they are what is resampled, and a seed's luck is
averaged out instead of counted as n more questions. A cell is **bold** when the interval's lower
bound is above 0.

    python -m mogg.evaluation.collect --frontier --pattern 'frontier_*' [--out reports/collected_frontier]

Runs of one experiment must hold the same questions (refused otherwise) and their per-question
file ``<ladder>_frontier_questions.npz`` (written by every frontier evaluation).
"""

from __future__ import annotations

import csv
import re
import zipfile
from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path
from mogg.evaluation import names as N
from mogg.evaluation.frontier import bootstrap_means, share_kept
from mogg.evaluation.frontier_render import kept_cell

SHOWN = ("envelope", "router", "router (action, unguarded)")  # with the oracle: the headline rows
N_BOOT = 2000


class FrontierCollectError(ValueError):
    """Frontier runs that cannot be pooled (missing files, different questions or budgets)."""


def _groups(reports: Path, pattern: str) -> dict[str, list[tuple[int, Path]]]:
    out: dict[str, list[tuple[int, Path]]] = {}
    for m in sorted(Path(reports).glob(f"{pattern}/metrics.json")):
        g = re.fullmatch(r"(.+)_s(\d+)", m.parent.name)
        name, seed = (g.group(1), int(g.group(2))) if g else (m.parent.name, 0)
        out.setdefault(name, []).append((seed, m.parent))
    return out


def _load(run: Path, ladder: str) -> dict[str, np.ndarray]:
    path = run / f"{ladder}_frontier_questions.npz"
    if not path.is_file():
        raise FrontierCollectError(f"{path}: missing; rerun `python evaluate.py` for {run.name} (frontier runs write it)")
    try:
        with np.load(path, allow_pickle=False) as d:
            return {k: d[k] for k in d.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:  # a truncated or foreign file
        raise FrontierCollectError(f"{path}: not readable ({e}); rerun `python evaluate.py` for {run.name}") from None


def pooled(per_seed: list[np.ndarray]) -> np.ndarray:
    """Per-question values of each seed ([n] each, one question order) averaged over the seeds: [n]."""
    return np.nanmean(np.stack(per_seed), axis=0)


def pooled_difference(diffs: list[np.ndarray], n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """Per-question differences of each seed ([n] each, one question order) averaged over seeds,
    then their mean and a 95% bootstrap interval over questions; also the spread of the seeds' means."""
    d = pooled(diffs)
    d = d[~np.isnan(d)]
    per_seed = [float(np.nanmean(x)) for x in diffs]
    if not len(d):
        return {"mean": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0, "seeds": per_seed}
    boots = bootstrap_means(d[:, None], n_boot, seed)[:, 0]
    return {"mean": float(d.mean()), "lo": float(np.quantile(boots, 0.025)), "hi": float(np.quantile(boots, 0.975)),
            "n": int(len(d)), "seeds": per_seed}


def _policies_in(metrics: list[dict], ladders: list[str]) -> set[str]:
    """Every policy a frontier table of these runs has a row for."""
    return {pol for m in metrics for lad in ladders
            for row in ((m.get(lad) or {}).get("frontier") or {}).get("budgets", {}).values()
            if isinstance(row, dict) for pol in row}


def collect_frontier(reports: Path, pattern: str, policies: tuple[str, ...] = SHOWN, versus: str = "envelope",
                     kept: str | None = None) -> list[dict]:
    """One row per (experiment, ladder, budget, policy): F1 and tokens mean ± sd over seeds, the
    pooled paired difference to ``versus`` (the envelope; leave-one-set-out: the training sets'
    envelope), or the oracle's F1 and tokens. ``policies`` other than the default rows, ``versus`` and
    ``kept`` must name rows the runs' tables hold (refused otherwise, with the rows there are).
    ``kept``: every other shown policy's share of that policy's gain over ``versus``, both gains pooled
    over seeds question by question (:func:`~mogg.evaluation.frontier.share_kept`; ``kept_*`` fields)."""
    import json

    rows = []
    for exp, runs in sorted(_groups(reports, pattern).items()):
        metrics = []
        for _, r in runs:
            try:
                metrics.append(json.loads((r / "metrics.json").read_text()))
            except (OSError, ValueError) as e:
                raise FrontierCollectError(f"{r / 'metrics.json'}: not readable ({e})") from None
        ladders = [lad for lad, s in metrics[0].items() if isinstance(s, dict) and "frontier" in s]
        have = _policies_in(metrics, ladders)
        asked = [p for p in (*([] if policies == SHOWN else policies), versus, *([kept] if kept else []))
                 if p not in have]
        if ladders and asked:
            raise FrontierCollectError(f"{exp}: no policy {asked[0]!r} in its frontier tables (--policies / --versus / --kept); "
                                       f"they hold: {'; '.join(sorted(have))}")
        for ladder in ladders:
            if any("frontier" not in m.get(ladder, {}) for m in metrics):
                raise FrontierCollectError(f"{exp}: not every run has a frontier for {ladder}")
            data = [_load(r, ladder) for _, r in runs]
            ids = data[0]["ids"]
            for (_, r), d in zip(runs[1:], data[1:]):
                if len(d["ids"]) != len(ids) or set(d["ids"]) != set(ids):
                    raise FrontierCollectError(f"{exp}: {runs[0][1].name} and {r.name} hold different questions "
                                               f"({len(ids)} and {len(d['ids'])}): seeds of one experiment must share them")
            order = [np.argsort(d["ids"])[np.argsort(np.argsort(ids))] for d in data]  # each run in run 0's order
            budgets = [int(b) for b in data[0]["budgets"]]
            if any([int(b) for b in d["budgets"]] != budgets for d in data):
                raise FrontierCollectError(f"{exp}: the runs' budgets differ")
            for i, b in enumerate(budgets):
                for pol in (*policies, "oracle"):
                    cells = [m[ladder]["frontier"]["budgets"].get(str(b), m[ladder]["frontier"]["budgets"].get(b, {})).get(pol)
                             for m in metrics]
                    if any(c is None for c in cells):
                        continue
                    f1 = np.array([c["f1"]["mean"] for c in cells])
                    tok = np.array([c["tokens"]["mean"] for c in cells])
                    row = {"experiment": exp, "ladder": ladder, "budget": b, "policy": pol, "versus": versus, "seeds": len(runs),
                           "n": int(len(ids)), "f1": float(f1.mean()), "f1_sd": float(f1.std(ddof=1)) if len(f1) > 1 else float("nan"),
                           "tokens": float(tok.mean())}
                    key = f"policy:{pol}"
                    ref = f"policy:{versus}"
                    if pol != versus and pol != "oracle" and all(key in d and ref in d for d in data):
                        diffs = [d[key][i, 0][o] - d[ref][i, 0][o] for d, o in zip(data, order)]
                        row.update({f"diff_{k}": v for k, v in pooled_difference(diffs).items() if k != "seeds"})
                        own = f"policy:{kept}"
                        if kept and pol != kept and all(own in d for d in data):
                            gains = [d[own][i, 0][o] - d[ref][i, 0][o] for d, o in zip(data, order)]
                            k = share_kept(pooled(diffs), pooled(gains), N_BOOT)
                            row.update(kept_of=kept, kept_share=k["share"], kept_lo=k["lo"], kept_hi=k["hi"],
                                       kept_reference=k["reference"]["mean"], kept_reference_lo=k["reference"]["lo"])
                    rows.append(row)
    return rows


def frontier_markdown(rows: list[dict]) -> str:
    """Per experiment and ladder: policies as rows, budgets as columns."""
    out = []
    for (exp, ladder) in dict.fromkeys((r["experiment"], r["ladder"]) for r in rows):
        sub = [r for r in rows if r["experiment"] == exp and r["ladder"] == ladder]
        budgets = sorted({r["budget"] for r in sub})
        out += [f"### {exp} ({ladder}; n = {sub[0]['n']}, {sub[0]['seeds']} seeds)", "",
                "| policy | " + " | ".join(f"B = {b}" for b in budgets) + " |", "|---" * (len(budgets) + 1) + "|"]
        for pol in dict.fromkeys(r["policy"] for r in sub):
            cells = []
            for b in budgets:
                r = next((x for x in sub if x["budget"] == b and x["policy"] == pol), None)
                if r is None:
                    cells.append("-")
                    continue
                sd = "" if np.isnan(r["f1_sd"]) else f" ± {r['f1_sd']:.3f}"
                txt = f"{r['f1']:.3f}{sd} ({r['tokens']:.0f})"
                if "diff_mean" in r and not np.isnan(r["diff_mean"]):
                    txt += f" [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}]"
                    if pol not in N.FRONTIER_CEILINGS and N.beyond_zero(r["diff_lo"]):
                        txt = f"**{txt}**"
                cells.append(txt)
            out.append(f"| {pol} | " + " | ".join(cells) + " |")
        out.append("")
        shares = [r for r in sub if r.get("kept_of")]
        if shares:  # --kept: each policy's share of one policy's gain, the same budgets
            of, versus = shares[0]["kept_of"], shares[0]["versus"]
            out += [f"Share of the {of}'s gain over the {versus} kept (mean gain over mean gain, both pooled over "
                    f"seeds question by question; 95% interval resampling questions; - where the {of} is not above the "
                    f"{versus} beyond its interval):", "",
                    "| policy | " + " | ".join(f"B = {b}" for b in budgets) + " |", "|---" * (len(budgets) + 1) + "|"]
            for pol in dict.fromkeys(r["policy"] for r in shares):
                cells = [kept_cell(None if r is None else {"share": r["kept_share"], "lo": r["kept_lo"], "hi": r["kept_hi"]})
                         for r in (next((x for x in shares if x["budget"] == b and x["policy"] == pol), None)
                                   for b in budgets)]
                out.append(f"| {pol} | " + " | ".join(cells) + " |")
            out.append("")
    versus = rows[0].get("versus", "envelope") if rows else "envelope"
    out.append("Cells: evidence F1 mean ± sd over seeds (mean tokens) [pooled paired 95% interval of the difference "
               f"to the {versus}: per question averaged over seeds, questions resampled]; **bold**: above the "
               f"{versus} beyond the interval (its lower bound > 0 as printed); the oracle and the hindsight envelope "
               "are ceilings (chosen with the test questions' labels), never bold.")
    return "\n".join(out) + "\n"


def frontier_series(rows: list[dict], field: str = "f1") -> dict:
    """(experiment, ladder) -> policy -> (budgets, values, lower, upper), each [n_budgets], budgets ascending: what
    :func:`plot_frontier_collection` draws. ``field``: ``f1`` (mean over seeds, ± its sd over seeds) or ``kept``
    (the share of the ``kept_of`` policy's gain kept and its 95% interval; only the rows that hold one)."""
    out: dict = {}
    for r in sorted(rows, key=lambda x: x["budget"]):
        if field == "kept" and not r.get("kept_of"):
            continue
        v, lo, hi = ((r["f1"], r["f1"] - np.nan_to_num(r["f1_sd"]), r["f1"] + np.nan_to_num(r["f1_sd"]))
                     if field == "f1" else (r["kept_share"], r["kept_lo"], r["kept_hi"]))
        cols = out.setdefault((r["experiment"], r["ladder"]), {}).setdefault(r["policy"], ([], [], [], []))
        for c, x in zip(cols, (r["budget"], v, lo, hi)):
            c.append(float(x))
    return {g: {p: tuple(np.asarray(c) for c in cols) for p, cols in pols.items()} for g, pols in out.items()}


def plot_frontier_collection(rows: list[dict], path: Path) -> Path:
    """``frontier_summary.png``: one column per experiment and ladder (at most 6 a row of panels), F1 against the
    budget for every collected policy (mean over seeds, the band ± its sd over seeds; the policies' own styles), and
    with ``--kept`` a second row: each policy's share of that policy's gain kept, with its 95% interval (the line at
    100%: the whole gain). Written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    from mogg.evaluation.style import policy_style

    f1, kept = frontier_series(rows), frontier_series(rows, "kept")
    groups = list(f1)
    n_col = min(len(groups), 6)
    per = 2 if kept else 1  # rows of panels per row of groups: F1, and the share kept under --kept
    n_row = -(-len(groups) // n_col) * per
    fig, axes = plt.subplots(n_row, n_col, figsize=(max(3.6 * n_col, 7.0), 3.0 * n_row + 0.6), squeeze=False)
    for ax in axes.ravel():
        ax.set_visible(False)
    for i, g in enumerate(groups):
        block, col = divmod(i, n_col)
        panels = [(axes[block * per, col], f1[g], "F1 (mean ± sd over seeds)")]
        if kept:
            panels.append((axes[block * per + 1, col], kept.get(g, {}), "share of the gain kept (95% interval)"))
        for ax, series, ylabel in panels:
            ax.set_visible(True)
            for pol, (b, v, lo, hi) in series.items():
                st = policy_style(pol)
                ax.plot(b, v, marker="o", ms=3, label=pol, **st)
                ax.fill_between(b, lo, hi, color=st["color"], alpha=0.15, lw=0)
            ax.set_xscale("log", base=2)
            ticks = sorted({int(x) for b, *_ in series.values() for x in b})
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel("budget (tokens)", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.tick_params(labelsize=7)
        panels[0][0].set_title(f"{g[0]} ({g[1]})", fontsize=8)
        if kept:
            panels[1][0].axhline(1.0, color="0.5", lw=0.8, ls=":")
            panels[1][0].yaxis.set_major_formatter(PercentFormatter(1.0))
    handles = {h.get_label(): h for ax in axes.ravel() if ax.get_visible() for h in ax.get_lines()
               if not h.get_label().startswith("_")}  # the 100% line is no policy
    ncol = max(1, min(len(handles), 3 if n_col > 2 else 1))  # policy names are long: one a line on a narrow figure
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    legend_in = (0.18 * -(-len(handles) // ncol) + 0.1) / fig.get_figheight()  # its lines' height, a share of the figure
    fig.tight_layout(rect=(0, min(legend_in, 0.5), 1, 1))
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return Path(path)


def write_frontier_collection(rows: list[dict], out: Path) -> str:
    """``frontier_summary.md`` (returned), ``frontier_summary.csv`` (every row) and ``frontier_summary.png``
    (:func:`plot_frontier_collection`) under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = frontier_markdown(rows)
    with atomic_path(out / "frontier_summary.md") as tmp:
        tmp.write_text(md)
    with atomic_path(out / "frontier_summary.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
        w.writeheader()
        w.writerows(rows)
    if rows:
        plot_frontier_collection(rows, out / "frontier_summary.png")
    return md
