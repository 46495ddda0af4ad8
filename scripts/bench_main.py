"""The main job, idle: ``train.py`` then ``evaluate.py`` wall times, this checkout against a reference.

Both checkouts share one artifact store (ladders and retrievers built once, in an untimed warm-up
round per checkout); each round removes the checkpoints first, so every timed ``train.py`` fits
the routers and every ``evaluate.py`` scores them. Checkouts alternate round by round (the VM's
speed drifts within minutes), and the table prints every round, the medians and their ratio.

    git worktree add ../ref <commit> && python scripts/bench_main.py --ref ../ref [--rounds 3] [--experiment pubmedqa]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("train.py", "evaluate.py")


def experiment_args(checkout: Path, experiment: str) -> list[str]:
    """``experiment=<name>`` for ``checkout``: a name like ``frontier_pubmedqa`` is the recipe plus its
    data choice (``experiment=frontier data=pubmedqa``) in a checkout whose recipes take ``data=``
    (issue 47), the file of that name in one from before."""
    import re

    m = re.fullmatch(r"(\w+)_(pubmedqa|medmcqa|covidqa)", experiment)
    if m and not (checkout / "conf" / "experiment" / f"{experiment}.yaml").exists() \
            and (checkout / "conf" / "experiment" / f"{m.group(1)}.yaml").exists():
        return [f"experiment={m.group(1)}", f"data={m.group(2)}"]
    return [f"experiment={experiment}"]


def _run(checkout: Path, script: str, experiment: str, work: Path, side: str) -> float:
    cmd = [sys.executable, str(checkout / script), *experiment_args(checkout, experiment), f"paths.artifacts={work / 'artifacts'}",
           f"paths.checkpoints={work / side / 'ckpt'}", f"paths.reports={work / side / 'reports'}",
           f"paths.outputs={work / side / 'outputs'}"]
    # both checkouts read this checkout's data (a reference worktree has no data/ of its own)
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"),
           "MOGG_DATA_DIR": os.environ.get("MOGG_DATA_DIR") or str(ROOT / "data")}
    t0 = time.perf_counter()
    # the command's log streams through (a minutes-long benchmark is never silent; issue 50)
    r = subprocess.run(cmd, cwd=checkout, env=env, stdout=sys.stderr, stderr=subprocess.STDOUT)
    if r.returncode:
        raise RuntimeError(f"{side}: {script} failed ({r.returncode}); its log is above")
    return time.perf_counter() - t0


def bench(sides: dict[str, Path], rounds: int, experiment: str) -> dict:
    """Seconds per side and command, one entry per round (warm-up round not counted)."""
    work = Path(tempfile.mkdtemp(prefix="bench_main_"))
    times = {side: {c: [] for c in COMMANDS} for side in sides}
    try:
        for r in range(rounds + 1):
            for side, checkout in sides.items():
                shutil.rmtree(work / side / "ckpt", ignore_errors=True)
                for script in COMMANDS:
                    s = _run(checkout, script, experiment, work, side)
                    print(f"round {r} of {rounds}{' (warm-up, not counted)' if not r else ''}: {side} {script} "
                          f"{s:.1f} s", file=sys.stderr, flush=True)
                    if r:  # round 0 builds the ladders and warms the file cache
                        times[side][script].append(s)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return times


def main() -> None:
    from mogg.core.flags import existing_dir, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", type=existing_dir, required=True, help="a checkout of the reference commit")
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--experiment", default="pubmedqa")
    args = ap.parse_args()
    times = bench({"reference": args.ref.resolve(), "this": ROOT}, args.rounds, args.experiment)
    print(f"cores: {len(os.sched_getaffinity(0))}; experiment={args.experiment}; {args.rounds} rounds, alternating")
    print("| command | reference s | this checkout s | reference / this (medians) |")
    print("|---|---|---|---|")
    for script in COMMANDS:
        ref, this = times["reference"][script], times["this"][script]
        print(f"| {script} | {', '.join(f'{x:.1f}' for x in ref)} (median {statistics.median(ref):.1f}) | "
              f"{', '.join(f'{x:.1f}' for x in this)} (median {statistics.median(this):.1f}) | "
              f"{statistics.median(ref) / statistics.median(this):.2f}x |")
    print(json.dumps(times))


if __name__ == "__main__":
    main()
