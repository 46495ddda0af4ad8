"""Collect a sweep: every ``reports/<run>/metrics.json`` into one table and plot.

Runs named ``<experiment>_s<seed>`` are grouped by experiment; each group reports mean and
standard deviation over seeds of the router (under the configured decision rule and the other
one), prior, best fixed level and oracle F1 and of the share of the best-fixed-to-oracle gap the
router closes.

    python -m mogg.evaluation.collect [--reports reports] [--pattern 'ablation_*'] [--out reports/ablations]

``--frontier`` collects frontier runs over seeds (:mod:`mogg.evaluation.collect_frontier`).

``--paired A B`` compares two runs (or two groups ``A_s<seed>``, ``B_s<seed>``) question by question:
the router's F1 in B minus A, each question's F1 averaged over its group's seeds, mean ± standard
error over questions (a paired difference: far tighter than the two runs' own standard errors).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import re
from pathlib import Path

import numpy as np

from mogg.core.artifacts import atomic_path
from mogg.evaluation import names as N
from mogg.evaluation.collect_frontier import SHOWN, FrontierCollectError, collect_frontier, write_frontier_collection

log = logging.getLogger(__name__)

COLUMNS = ("router", "router_other_rule", "prior", "best_fixed", "oracle", "gap_closed", "gap_closed_other_rule",
           "best_action", "action_oracle", "action_gap_closed")  # the last three: routers over eq. 1 actions


class CollectError(ValueError):
    """Runs that cannot be read, paired or averaged (different question sets, corrupt files)."""


def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CollectError(f"{path}: not a readable report file ({e}); rerun `python evaluate.py` for that run") from None


def collect(reports: Path, pattern: str = "ablation_*") -> list[dict]:
    """One row per (run, ladder) found under ``reports`` matching ``pattern``."""
    rows = []
    for mpath in sorted(Path(reports).glob(f"{pattern}/metrics.json")):
        run = mpath.parent.name
        m = re.fullmatch(r"(.+)_s(\d+)", run)
        group, seed = (m.group(1), int(m.group(2))) if m else (run, None)
        metrics = _read_json(mpath)
        if not isinstance(metrics, dict) or not all(isinstance(s, dict) and "policies" in s for s in metrics.values()):
            raise CollectError(f"{mpath}: not a report's metrics.json (ladder -> summary with policies)")
        for ladder, s in metrics.items():
            pol = s["policies"]
            other = next((p for p in pol if p.startswith(f"{N.ROUTER}[")), None)
            rows.append({
                "experiment": group, "seed": seed, "run": run, "ladder": ladder, "n": s.get("n_questions"),
                "questions_key": s.get("questions_key"),
                "router": pol.get(N.ROUTER, {}).get("f1", {}).get("mean", float("nan")),
                "router_other_rule": pol.get(other, {}).get("f1", {}).get("mean", float("nan")),
                "other_rule": other[len(N.ROUTER) + 1:-1] if other else "",
                "prior": pol.get(N.PRIOR, {}).get("f1", {}).get("mean", float("nan")),
                "best_fixed": pol[s["best_fixed"]]["f1"]["mean"], "best_fixed_level": s["best_fixed"],
                "oracle": pol.get(N.ORACLE, {}).get("f1", {}).get("mean", float("nan")),
                "gap_closed": s.get("gap_closed", {}).get(N.ROUTER, float("nan")),
                "gap_closed_other_rule": s.get("gap_closed", {}).get(other, float("nan")),
                "best_action": pol.get(N.BEST_ACTION, {}).get("f1", {}).get("mean", float("nan")),
                "action_oracle": pol.get(N.ACTION_ORACLE, {}).get("f1", {}).get("mean", float("nan")),
                "action_gap_closed": s.get("action_gap_closed", {}).get(N.ROUTER, float("nan")),
            })
    return rows


def _router_f1(run_dir: Path, policy: str) -> dict[tuple[str, str], float]:
    """(ladder, question id) -> ``policy``'s evidence F1 in one run's ``records.jsonl``."""
    out = {}
    path = run_dir / "records.jsonl"
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise CollectError(f"{path}:{n}: not a record ({e.msg}); the file is truncated or damaged: rerun "
                                   "`python evaluate.py` for that run") from None
            if not isinstance(r, dict) or "id" not in r or "ladder" not in r:
                raise CollectError(f"{path}:{n}: not a question record (needs id and ladder)")
            v = r.get("policies", {}).get(policy, {}).get("f1")
            if v is not None:
                out[(r["ladder"], str(r["id"]))] = float(v)
    return out


def _group_dirs(reports: Path, name: str) -> list[Path]:
    d = Path(reports) / name
    if (d / "records.jsonl").is_file():
        return [d]
    return sorted(p.parent for p in Path(reports).glob(f"{name}_s*/records.jsonl")
                  if re.fullmatch(rf"{re.escape(name)}_s\d+", p.parent.name))


def paired(reports: Path, a: str, b: str, policy: str = N.ROUTER) -> dict[str, dict]:
    """Per ladder: the paired difference B - A of ``policy``'s F1 over the questions both hold
    (each question averaged over its group's seeds): n, mean, se, and how many B wins / loses."""
    per = {}
    for name in (a, b):
        dirs = _group_dirs(reports, name)
        if not dirs:
            raise FileNotFoundError(f"no run {name} (or {name}_s<seed>) with records.jsonl under {reports}")
        runs = [_router_f1(d, policy) for d in dirs]
        if not runs[0]:
            raise CollectError(f"{dirs[0] / 'records.jsonl'}: no question has an F1 for policy {policy!r}")
        for d, r in zip(dirs[1:], runs[1:]):
            if set(r) != set(runs[0]):
                raise CollectError(f"{dirs[0].name} and {d.name} hold different questions ({len(runs[0])} and {len(r)}, "
                                   f"{len(set(r) & set(runs[0]))} in common): seeds of one group must share a question set")
        per[name] = ({k: float(np.mean([r[k] for r in runs])) for k in runs[0]}, len(dirs))
    (fa, na), (fb, nb) = per[a], per[b]
    if set(fa) != set(fb):
        common = len(set(fa) & set(fb))
        raise CollectError(f"{a} and {b} were evaluated on different questions ({len(fa)} and {len(fb)} (ladder, question) "
                           f"pairs, {common} in common): a paired difference needs one question set; evaluate both on it")
    out = {}
    for ladder in sorted({k[0] for k in fa}):
        keys = sorted(k for k in fa if k[0] == ladder)
        d = np.array([fb[k] - fa[k] for k in keys])
        d = d[np.isfinite(d)]
        out[ladder] = {"n": int(len(d)), "mean": float(d.mean()), "se": float(d.std(ddof=1) / np.sqrt(len(d))),
                       "wins": int((d > 0).sum()), "losses": int((d < 0).sum()), "seeds": [na, nb]}
    return out


def summarize_groups(rows: list[dict]) -> list[dict]:
    """Mean and standard deviation over seeds per (experiment, ladder)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["experiment"], r["ladder"]), []).append(r)
    out = []
    for (exp, ladder), rs in sorted(groups.items()):
        sets = {(r.get("n"), r.get("questions_key") or r.get("n")) for r in rs}
        if len(sets) > 1:
            detail = ", ".join(f"{r['run']} (n={r.get('n')})" for r in rs[:4])
            raise CollectError(f"group {exp} ({ladder}) mixes runs over different question sets: {detail}; "
                               "a mean over seeds needs one question set (rename the runs or narrow --pattern)")
        row = {"experiment": exp, "ladder": ladder, "runs": len(rs), "n": rs[0].get("n"), "other_rule": rs[0].get("other_rule", "")}
        for c in COLUMNS:
            v = np.array([r[c] for r in rs], dtype=float)
            ok = v[~np.isnan(v)]
            row[c] = float(ok.mean()) if len(ok) else float("nan")  # all-NaN: no warning, no mean
            row[f"{c}_std"] = float(ok.std(ddof=1)) if len(ok) > 1 else float("nan")  # one run: no spread
        out.append(row)
    return out


def write_collection(summary: list[dict], rows: list[dict], out: Path) -> None:
    """``runs.csv`` (every run), ``summary.csv``, ``summary.md`` and ``summary.png``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in (("runs.csv", rows), ("summary.csv", summary)):
        with open(out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)
    lines = ["| experiment | ladder | n | runs | router F1 | gap closed | other rule | its F1 | its gap closed | prior | best fixed | oracle |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(r, c):  # one run: its value alone (a spread needs two)
        sd = r[c + "_std"]
        return "-" if np.isnan(r[c]) else f"{r[c]:.3f}" + ("" if np.isnan(sd) else f" ± {sd:.3f}")

    def g(r, c):
        sd = r[c + "_std"]
        return "-" if np.isnan(r[c]) else f"{r[c]:+.0%}" + ("" if np.isnan(sd) else f" ± {sd:.0%}")

    actions = any(not np.isnan(r["action_gap_closed"]) for r in summary)  # router.profiles runs among them
    if actions:
        lines[0] += " best action | action oracle | action gap closed |"
        lines[1] += "---|---|---|"
    for r in summary:
        cells = [f(r, "router"), g(r, "gap_closed"), r["other_rule"] or "-", f(r, "router_other_rule"),
                 g(r, "gap_closed_other_rule"), f(r, "prior"), f(r, "best_fixed"), f(r, "oracle")]
        if actions:
            cells += [f(r, "best_action"), f(r, "action_oracle"), g(r, "action_gap_closed")]
        lines.append(f"| {r['experiment']} | {r['ladder']} | {r['n']} | {r['runs']} | " + " | ".join(cells) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['experiment']}\n({r['ladder']})" for r in summary]
    x = np.arange(len(summary))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(summary)), 4.5))
    for i, (c, color) in enumerate((("best_fixed", "tab:gray"), ("prior", "tab:blue"), ("router", "tab:orange"), ("oracle", "tab:green"))):
        ax.bar(x + (i - 1.5) * 0.2, [r[c] for r in summary], 0.2, yerr=np.nan_to_num([r[c + "_std"] for r in summary]), label=c, color=color, capsize=2)
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("token F1 vs gold evidence (mean ± sd over seeds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(out / "summary.png") as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Collect sweep reports into one table and plot.")
    ap.add_argument("--reports", default="reports")
    ap.add_argument("--pattern", default="ablation_*", help="glob over run directories under --reports")
    ap.add_argument("--out", default=None, help="default: <reports>/collected")
    ap.add_argument("--paired", nargs=2, metavar=("A", "B"), help="the router's F1, B - A, question by question")
    ap.add_argument("--frontier", action="store_true",
                    help="frontier runs over seeds: F1 at matched tokens, mean ± sd, pooled paired intervals")
    ap.add_argument("--policies", default=None,
                    help="with --frontier: policies to show, separated by ';' (or ',' when no name holds one; "
                         "default: envelope, router, unguarded)")
    ap.add_argument("--versus", default="envelope",
                    help="with --frontier: the policy the paired intervals are against (default: envelope)")
    ap.add_argument("--kept", default=None, metavar="POLICY",
                    help="with --frontier: also the share of POLICY's gain over --versus that each shown policy keeps "
                         "(e.g. --kept selector: a transferred row's share of the in-set selector's gain)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _main(args)
    except (CollectError, FrontierCollectError, FileNotFoundError, OSError) as e:  # one line naming the run or file
        import sys

        sys.stderr.write(f"collect: error: {e}\n")
        return 2


def _main(args) -> int:
    if args.kept and not args.frontier:
        raise CollectError("--kept reads frontier runs: add --frontier")
    if args.frontier:
        sep = ";" if args.policies and ";" in args.policies else ","
        pols = tuple(p.strip() for p in args.policies.split(sep)) if args.policies else SHOWN
        rows = collect_frontier(Path(args.reports), args.pattern, pols, args.versus, args.kept)
        if not rows:
            raise CollectError(f"no frontier run under {args.reports}/{args.pattern}")
        out = Path(args.out) if args.out else Path(args.reports) / "collected_frontier"
        log.info("%d rows -> %s\n%s", len(rows), out, write_frontier_collection(rows, out))
        return 0
    if args.paired:
        a, b = args.paired
        for ladder, r in paired(Path(args.reports), a, b).items():
            log.info("%s: %s - %s = %+.4f ± %.4f F1 (n=%d, seeds %d/%d; B better on %d, worse on %d)", ladder, b, a,
                     r["mean"], r["se"], r["n"], r["seeds"][0], r["seeds"][1], r["wins"], r["losses"])
        return 0
    rows = collect(Path(args.reports), args.pattern)
    if not rows:
        log.error("no metrics.json under %s/%s", args.reports, args.pattern)
        return 1
    summary = summarize_groups(rows)
    out = Path(args.out) if args.out else Path(args.reports) / "collected"
    write_collection(summary, rows, out)
    log.info("%d runs, %d groups -> %s\n%s", len(rows), len(summary), out, (out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
