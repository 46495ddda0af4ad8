"""A selector variant against the base selector, paired question by question over seeds (issue 49).

Reads two families of frontier runs (``--base`` and ``--variant``: run names with ``{seed}``) from
``--reports``, and prints per budget: both policies' evidence F1 (mean over seeds, mean tokens),
their difference per question averaged over the seeds with a bootstrap 95% interval (questions
resampled), the share of the sentence oracle's gap over the envelope each captures
((policy - envelope) / (sentence oracle - envelope)) and their areas (of the (level, k, cap) oracle
frontier, mean ± sd over seeds).

    python scripts/selector_variants.py --base 'sel_pages_cFalse_s{seed}' --variant 'sel_pages_cTrue_s{seed}'
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

BUDGETS = (64, 128, 256, 512)


def load(reports: Path, run: str, ladder: str, policy: str):
    """(per-question F1 [B, Q], mean tokens [B], envelope F1 [B], sentence oracle F1 [B], area)."""
    z = np.load(reports / run / f"{ladder}_frontier_questions.npz", allow_pickle=False)
    fr = json.loads((reports / run / "metrics.json").read_text())[ladder]["frontier"]
    got = [int(b) for b in z["budgets"]]
    if got != list(BUDGETS):
        raise SystemExit(f"{run}: budgets {got}, expected {list(BUDGETS)}")
    key = f"policy:{policy}"
    if key not in z.files:
        raise SystemExit(f"{run}: no {policy!r} row (it has {', '.join(k[7:] for k in z.files if k.startswith('policy:'))})")
    env = [fr["budgets"][str(b)]["envelope"]["f1"]["mean"] for b in BUDGETS]
    orc = [fr["budgets"][str(b)]["sentence oracle"]["f1"]["mean"] for b in BUDGETS]
    return z[key][:, 0], z[key][:, 1].mean(axis=1), np.array(env), np.array(orc), fr["area"][policy]


def compare(reports: Path, base: str, variant: str, seeds, ladder: str = "mog", policy: str = "selector",
            resamples: int = 2000) -> list[str]:
    """Markdown lines of the comparison (module doc)."""
    runs = []
    for s in seeds:
        names = base.format(seed=s), variant.format(seed=s)
        if all((reports / n / "metrics.json").is_file() for n in names):
            runs.append([load(reports, n, ladder, policy) for n in names])
    if not runs:
        raise SystemExit(f"no seed has both {base} and {variant} under {reports}")
    fa, fb = (np.mean([r[i][0] for r in runs], axis=0) for i in (0, 1))  # [B, Q], averaged over seeds
    ta, tb = (np.mean([r[i][1] for r in runs], axis=0) for i in (0, 1))
    env, orc = np.mean([r[0][2] for r in runs], axis=0), np.mean([r[0][3] for r in runs], axis=0)
    areas = [np.array([r[i][4] for r in runs]) for i in (0, 1)]
    rng = np.random.default_rng(0)
    idx = rng.integers(0, fa.shape[1], size=(resamples, fa.shape[1]))
    out = [f"{len(runs)} seeds, {fa.shape[1]} questions: `{base}` (A) against `{variant}` (B), policy `{policy}`", "",
           "| B | envelope | A | B | B - A [95%] | sentence oracle | share of the gap A -> B |", "|---|---|---|---|---|---|---|"]
    for i, b in enumerate(BUDGETS):
        d = fb[i] - fa[i]
        lo, hi = np.percentile(d[idx].mean(axis=1), [2.5, 97.5])
        gap = max(orc[i] - env[i], 1e-9)
        out.append(f"| {b} | {env[i]:.3f} | {fa[i].mean():.3f} ({ta[i]:.0f}) | {fb[i].mean():.3f} ({tb[i]:.0f}) | "
                   f"{d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] | {orc[i]:.3f} | "
                   f"{(fa[i].mean() - env[i]) / gap:.0%} -> {(fb[i].mean() - env[i]) / gap:.0%} |")
    sd = [a.std(ddof=1) if len(a) > 1 else 0.0 for a in areas]
    out += ["", f"area: A {areas[0].mean():.2f} ± {sd[0]:.2f}, B {areas[1].mean():.2f} ± {sd[1]:.2f}"]
    return out


def main(argv: list[str] | None = None) -> int:
    from mogg.core.flags import existing_dir, nonnegative_ints  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reports", type=existing_dir, default="reports")
    ap.add_argument("--base", required=True, help="run name with {seed}")
    ap.add_argument("--variant", required=True, help="run name with {seed}")
    ap.add_argument("--seeds", type=nonnegative_ints, default="0,1,2,3,4")
    ap.add_argument("--ladder", default="mog")
    ap.add_argument("--policy", default="selector")
    args = ap.parse_args(argv)
    if "{seed}" not in args.base or "{seed}" not in args.variant:
        ap.error("--base and --variant must hold {seed}")
    print("\n".join(compare(args.reports, args.base, args.variant, args.seeds, args.ladder, args.policy)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
