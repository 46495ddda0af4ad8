"""The matched-cost frontier experiments, idle: ``train.py`` and ``evaluate.py`` wall times of
the runs ``frontier_pubmedqa``, ``frontier_medmcqa`` and ``frontier_covidqa`` (``experiment=frontier
data=<set>``; an older checkout's own files of those names), this checkout
against a reference, side by side.

As :mod:`bench_main` (whose ``_run`` this reuses): both checkouts share one artifact store (by
default a fresh one, built in an untimed warm-up round; ``--artifacts`` reuses a built one, whose
keys both checkouts must compute alike), every round removes the checkpoints first so each timed
``train.py`` fits the level and action routers and each ``evaluate.py`` scores them, and the
checkouts alternate run by run (the VM's speed drifts within minutes). Prints every run, the
medians, their ratio, and the load average before and after (another job on the cores shows there).

    git worktree add ../ref <commit> && python scripts/bench_frontier.py --ref ../ref [--rounds 3]
        [--experiments frontier_pubmedqa frontier_medmcqa] [--artifacts artifacts] [--no-warmup]
        [--ref-rounds 1]

``--ref-rounds N`` times the reference in the first N rounds only (a slow reference's round costs
minutes; its median is then over fewer runs, which the table says).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from bench_main import COMMANDS, ROOT, _run

EXPERIMENTS = ("frontier_pubmedqa", "frontier_medmcqa", "frontier_covidqa")


def bench(sides: dict[str, Path], rounds: int, experiments: list[str], artifacts: Path | None,
          warmup: bool, ref_rounds: int | None = None) -> dict:
    """Seconds per experiment, command and side, one entry per timed round."""
    work = Path(tempfile.mkdtemp(prefix="bench_frontier_"))
    if artifacts is not None:  # a built store: linked, so the runs read (and never rebuild) it
        (work / "artifacts").symlink_to(artifacts.resolve())
    times = {e: {c: {side: [] for side in sides} for c in COMMANDS} for e in experiments}
    try:
        for r in range(0 if warmup else 1, rounds + 1):
            for e in experiments:
                order = list(sides.items()) if r % 2 else list(sides.items())[::-1]  # alternate who goes first
                for side, checkout in order:
                    if side == "reference" and ref_rounds is not None and r > ref_rounds:
                        continue
                    shutil.rmtree(work / side / "ckpt", ignore_errors=True)
                    for script in COMMANDS:
                        s = _run(checkout, script, e, work, side)
                        print(f"round {r} {e} {side} {script}: {s:.1f} s (load {os.getloadavg()[0]:.2f})", flush=True)
                        if r:  # round 0 builds the ladders, warms the file cache and numba's
                            times[e][script][side].append(s)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return times


def main() -> None:
    from mogg.core.flags import existing_dir, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", type=existing_dir, required=True, help="a checkout of the reference commit")
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--experiments", nargs="+", default=list(EXPERIMENTS))
    ap.add_argument("--artifacts", type=existing_dir, default=None,
                    help="a built artifact store to share (default: build one)")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip the untimed warm-up round")
    ap.add_argument("--ref-rounds", type=positive_int, default=None, help="time the reference in the first N rounds only")
    args = ap.parse_args()
    if args.rounds < 1 or (args.ref_rounds is not None and not 1 <= args.ref_rounds <= args.rounds):
        ap.error("--rounds must be >= 1 and --ref-rounds in [1, --rounds]")
    load0 = os.getloadavg()
    times = bench({"reference": args.ref.resolve(), "this": ROOT}, args.rounds, args.experiments, args.artifacts,
                  args.warmup, args.ref_rounds)
    print(f"cores: {len(os.sched_getaffinity(0))}; {args.rounds} round(s), alternating; load average "
          f"{load0[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print("| experiment | command | reference s | this checkout s | reference / this (medians) |")
    print("|---|---|---|---|---|")
    for e in args.experiments:
        for script in COMMANDS:
            ref, this = times[e][script]["reference"], times[e][script]["this"]
            print(f"| {e} | {script} | {', '.join(f'{x:.1f}' for x in ref)} (median {statistics.median(ref):.1f}) | "
                  f"{', '.join(f'{x:.1f}' for x in this)} (median {statistics.median(this):.1f}) | "
                  f"{statistics.median(ref) / statistics.median(this):.2f}x |")
    print(json.dumps(times))


if __name__ == "__main__":
    main()
