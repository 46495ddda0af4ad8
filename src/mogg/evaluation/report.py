"""Reports: metrics.json, a markdown and a CSV table, per-question jsonl records and plots."""

from __future__ import annotations

import csv
import json
import logging
import re
from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path, strict_json
from mogg.core.secrets import scrub_known, scrub_text
from mogg.evaluation import names as N

log = logging.getLogger(__name__)

TABLE_METRICS = ("f1", "precision", "recall", "label_sim", "gold_hit", "ctx_tokens")


def _atomic_write(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(scrub_text(text), encoding="utf-8")  # a second line of defence: no credential on disk


def _fmt(a: dict, digits: int = 3) -> str:
    if a["n"] == 0 or np.isnan(a["mean"]):
        return "-"
    return f"{a['mean']:.{digits}f} ± {a['se']:.{digits}f}"


def table_rows(summaries: dict[str, dict]) -> list[dict]:
    """Flat rows (one per ladder x policy) for markdown and CSV."""
    rows = []
    for ladder, s in summaries.items():
        gap = s.get("gap_closed", {})
        for pol, r in s["policies"].items():
            row = {"ladder": ladder, "policy": pol}
            for m in TABLE_METRICS:
                row[m], row[f"{m}_se"], row["n"] = r[m]["mean"], r[m]["se"], r[m]["n"]
            row["oracle_agreement"] = r.get("oracle_agreement", {}).get("mean", float("nan"))
            row["gap_closed"] = gap.get(pol, float("nan"))
            rows.append(row)
        for pol, t in s.get("accuracy", {}).items():  # reader accuracy: the report's one table, per set
            row = next((r for r in rows if r["ladder"] == ladder and r["policy"] == pol), None)
            if row is None:  # cot: read, but no retrieval metrics
                row = {"ladder": ladder, "policy": pol}
                rows.append(row)
            for d, st in t["datasets"].items():
                row[f"acc_{d}"], row[f"acc_{d}_se"] = st["accuracy"], st["se"]
            row["acc_macro"], row["acc_macro_se"] = t["average"]["accuracy"], t["average"]["se"]
            row["unparsed"] = t["average"]["unparsed"]
            v = s.get("accuracy_vs_cot", {}).get(pol)
            row["improved_vs_cot"], row["degraded_vs_cot"] = (v["improved"], v["degraded"]) if v else ("", "")
    return rows


def markdown_table(summaries: dict[str, dict]) -> str:
    """A markdown table with mean ± standard error per metric."""
    head = "| ladder | policy | evidence F1 | precision | recall | label sim | gold hit | ctx tokens | agrees w/ oracle | gap closed |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for ladder, s in summaries.items():
        gap = s.get("gap_closed", {})
        for pol, r in s["policies"].items():
            agree = r.get("oracle_agreement")
            g = gap.get(pol, float("nan"))
            cells = [ladder, f"**{pol}**" if pol == s["best_fixed"] else pol]
            cells += [_fmt(r[m]) for m in ("f1", "precision", "recall", "label_sim", "gold_hit")]
            cells.append(_fmt(r["ctx_tokens"], 0))
            cells.append(_fmt(agree) if agree else "-")
            cells.append("-" if np.isnan(g) else f"{g:+.0%}")
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Cells: mean ± se over the questions. **Bold**: the best fixed level on these questions (in "
              "hindsight: what the gap closed is measured from; the oracle row is the ceiling it is measured to)."]
    return "\n".join(lines) + "\n"


REPORT_MARKER = "report.json"  # the run a report folder belongs to and the files it wrote
# what a report folder holds (reports written before report.json existed are recognised by these)
_REPORT_FILES = re.compile(r"(results\.md|results\.csv|metrics\.json|records\.jsonl|report\.json|[\w.@=+,-]+\.png"
                           r"|[\w.@=+,-]+_frontier\.json)")


def check_report_dir(report_dir: Path, run_name: str) -> None:
    """Refuse to publish a report over a folder that holds anything but an earlier report of this
    run (``report_dir=reports`` would otherwise replace every run's report, and any file a user
    kept there): it must be absent, empty, or a report folder whose ``report.json`` names
    ``run_name`` (an older report without it: nothing but report files)."""
    d = Path(report_dir)
    if not d.exists():
        return
    if not d.is_dir():
        raise ValueError(f"report_dir={str(d)!r} exists and is not a folder")
    entries = sorted(p.name for p in d.iterdir())
    if not entries:
        return
    marker = d / REPORT_MARKER
    if marker.is_file():
        try:
            info = json.loads(marker.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{marker}: not a report marker ({e}); remove the folder or choose another report_dir") from None
        if not isinstance(info, dict) or info.get("run_name") != run_name:
            other = info.get("run_name") if isinstance(info, dict) else None
            raise ValueError(f"report_dir={str(d)!r} holds the report of run {other!r}, not of {run_name!r}: "
                             "refusing to replace it; leave report_dir at its default (reports/<run_name>)")
        allowed = set(info.get("files", [])) | {REPORT_MARKER}
        extra = [e for e in entries if e not in allowed and not e.startswith(".")]
    else:
        extra = [e for e in entries if not _REPORT_FILES.fullmatch(e) or (d / e).is_dir()]
    if extra:
        raise ValueError(f"report_dir={str(d)!r} holds {len(extra)} entr{'y' if len(extra) == 1 else 'ies'} that no "
                         f"report of run {run_name!r} wrote (e.g. {extra[:3]}): refusing to replace the folder; "
                         "leave report_dir at its default (reports/<run_name>) or choose an empty folder")


def write_report(
    out_dir: Path, summaries: dict[str, dict], records: list[dict], notes: list[str] | None = None,
    sections: list[str] | None = None, run_name: str | None = None,
) -> dict:
    """Write metrics.json, results.md, results.csv, records.jsonl and the plots into ``out_dir``;
    with ``run_name``, ``report.json`` last (the run and the files: :func:`check_report_dir`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(out_dir / "metrics.json", strict_json(summaries, indent=2))
    md = "# Results\n\n" + markdown_table(summaries)
    if notes:
        md += "\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    if sections:
        md += "\n" + "\n".join(sections) + "\n"
    md += "\n![evidence F1 per policy](policies.png)\n\n![chosen level](levels.png)\n"
    _atomic_write(out_dir / "results.md", md)
    rows = table_rows(summaries)
    with atomic_path(out_dir / "results.csv") as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
        w.writeheader()
        w.writerows(rows)
    with atomic_path(out_dir / "records.jsonl") as tmp, open(tmp, "w", encoding="utf-8") as f:
        for rec in records:
            # answers and corpus text are data: only the credentials this run knows are taken out
            f.write(scrub_known(strict_json(rec, ensure_ascii=False)) + "\n")
    plot_summaries(summaries, out_dir)
    if run_name is not None:
        files = sorted(p.name for p in out_dir.iterdir() if not p.name.startswith(".")) + [REPORT_MARKER]
        _atomic_write(out_dir / REPORT_MARKER, strict_json({"run_name": run_name, "files": sorted(set(files))}, indent=1))
    log.debug("report files written to %s", out_dir)
    return {"markdown": scrub_text(md)}


def plot_summaries(summaries: dict[str, dict], out_dir: Path) -> None:
    """policies.png: evidence F1 per policy with standard errors; levels.png: chosen-level shares."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mogg.evaluation.style import policy_style

    n = len(summaries)
    fig, axes = plt.subplots(1, n, figsize=(max(6, 0.55 * max(len(s["policies"]) for s in summaries.values())) * n, 5),
                             squeeze=False)
    for ax, (ladder, s) in zip(axes[0], summaries.items()):
        names = list(s["policies"])
        means = [s["policies"][p]["f1"]["mean"] for p in names]
        ses = [s["policies"][p]["f1"]["se"] for p in names]
        n_fixed = sum(N.is_fixed(p) for p in names)
        # each policy in its colour of every plot; ceilings (oracle, labels) hatched: not deployable
        bars = ax.bar(range(len(names)), means, yerr=ses, capsize=3, edgecolor="k", lw=0.4,
                      color=[policy_style(p, n_fixed)["color"] for p in names])
        for b, p in zip(bars, names):
            if p in N.REFERENCES and p != N.RANDOM:
                b.set_hatch("//")
                rgb = matplotlib.colors.to_rgb(b.get_facecolor())
                if sum(rgb) < 1.2:  # a dark bar (the oracle's black): white hatching, or it cannot be seen
                    b.set_edgecolor("w")
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel("evidence F1 (mean ± se)")
        best = s["policies"][s["best_fixed"]]["f1"]["mean"]
        ax.axhline(best, color="k", lw=0.8, ls="--")
        top = max((m for m in means if m == m), default=0.0) * 1.18
        ax.set_ylim(0, top if top > 0 else 1)  # all-zero F1 (a tiny run) would give a singular ylim
        ax.annotate(f"best fixed level ({s['best_fixed']})", (0, best), xycoords=("axes fraction", "data"),
                    xytext=(2, 3), textcoords="offset points", fontsize=7, ha="left", va="bottom",
                    bbox={"fc": "w", "ec": "none", "alpha": 0.85, "pad": 0.5})
        ax.set_title(f"{ladder}, at equal k (not at matched tokens)\ngrey = fixed levels, hatched = ceilings "
                     "(not deployable)", fontsize=9)
    fig.tight_layout()
    with atomic_path(out_dir / "policies.png") as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)

    fig, axes = plt.subplots(1, n, figsize=(6 * n, 4), squeeze=False)
    for ax, (ladder, s) in zip(axes[0], summaries.items()):
        pols = [p for p in s["policies"] if N.is_routed(p) or p in N.REFERENCES]
        levels = s["levels"]
        width = 0.8 / max(1, len(pols))
        for i, p in enumerate(pols):
            ax.bar(np.arange(len(levels)) + i * width, s["policies"][p]["level_share"], width, label=p)
        ax.set_xticks(np.arange(len(levels)) + 0.4 - width / 2, levels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("share of questions")
        ax.set_title(f"{ladder}: chosen level (argmax w)")
        if pols:  # no router or reference policy (use_router=false and no labels): nothing to label
            ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(out_dir / "levels.png") as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def log_summaries(logger, summaries: dict[str, dict]) -> None:
    """Send the evaluation to an experiment logger (Lightning's ``WandbLogger``, offline by default):
    every policy's retrieval metrics and gap closed, and the reader accuracy table."""
    metrics = {}
    for ladder, s in summaries.items():
        for pol, r in s["policies"].items():
            for m in TABLE_METRICS:
                if r[m]["n"]:
                    metrics[f"{ladder}/{pol}/{m}"] = r[m]["mean"]
            g = s.get("gap_closed", {}).get(pol)
            if g is not None and np.isfinite(g):
                metrics[f"{ladder}/{pol}/gap_closed"] = g
        for pol, t in s.get("accuracy", {}).items():
            metrics[f"{ladder}/{pol}/accuracy_macro"] = t["average"]["accuracy"]
    logger.log_metrics(metrics)
    rows = [r for r in table_rows(summaries) if any(k.startswith("acc_") for k in r)]
    if rows and hasattr(logger, "log_table"):
        cols = list(dict.fromkeys(k for r in rows for k in r))
        logger.log_table(key="accuracy", columns=cols, data=[[r.get(c, "") for c in cols] for r in rows])
    if hasattr(logger, "finalize"):
        logger.finalize("success")
    run = getattr(logger, "experiment", None)
    if hasattr(run, "finish"):  # a wandb run: flush the summary and close it (offline runs sync later)
        run.finish()
