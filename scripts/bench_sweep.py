"""Sweep contention benchmark: N concurrent ``train.py`` runs against the same runs one after
another, for N = 1, 2, 4 (on 2 cores by default), wall time and runs per minute.

Each run is a real main job (``experiment=pubmedqa`` by default) with its own ``run_name`` and
checkpoint folder, sharing the artifact store (ladders and retrievers are built once, in a warm-up
run that is not timed, so every timed run is what a sweep's runs are: routers on prepared data).
``--ref DIR`` is a checkout of a reference commit (``git worktree add ../ref <commit>``): the same
runs are timed there too and the ratios printed side by side, before | after.

    python scripts/bench_sweep.py [--jobs 1 2 4] [--experiment pubmedqa] [--ref ../ref] [--extra threads=1]

Threads: each job runs with ``threads=null`` (the job's share: SLURM_CPUS_PER_TASK, else its
CPU affinity), unless ``--extra threads=N`` says otherwise; the reference runs whatever its
commit does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cmd(checkout: Path, experiment: str, run: str, work: Path, extra: list[str]) -> list[str]:
    return [sys.executable, str(checkout / "train.py"), f"experiment={experiment}", f"run_name={run}",
            f"paths.artifacts={work / 'artifacts'}", f"paths.checkpoints={work / 'ckpt'}",
            f"paths.reports={work / 'reports'}", f"paths.outputs={work / 'outputs'}", *extra]


def _run_all(cmds: list[list[str]], concurrent: bool, cwd: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(cwd / "src")}
    t0 = time.perf_counter()
    if concurrent:
        procs = [subprocess.Popen(c, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in cmds]
        for p in procs:
            _, err = p.communicate()
            if p.returncode:
                raise RuntimeError(f"run failed ({p.returncode}): {err.decode()[-2000:]}")
    else:
        for c in cmds:
            subprocess.run(c, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t0


def bench(checkout: Path, jobs: list[int], experiment: str, extra: list[str]) -> dict:
    """Wall seconds per N: one idle run, N concurrent, N sequential (fresh checkpoints each time)."""
    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    _run_all([_cmd(checkout, experiment, "warmup", work, extra)], False, checkout)  # builds ladders once
    out = {}
    for n in jobs:
        cmds = [_cmd(checkout, experiment, f"c{n}_{i}", work, extra) for i in range(n)]
        conc = _run_all(cmds, True, checkout)
        cmds = [_cmd(checkout, experiment, f"s{n}_{i}", work, extra) for i in range(n)]
        seq = _run_all(cmds, False, checkout)
        out[n] = {"concurrent_s": conc, "sequential_s": seq, "runs_per_min": 60.0 * n / conc,
                  "per_run_vs_idle": None}
    idle = out[min(jobs)]["sequential_s"] / min(jobs)
    for n in jobs:
        out[n]["per_run_vs_idle"] = out[n]["concurrent_s"] / idle
    return {"idle_run_s": idle, "jobs": out}


def main() -> None:
    from mogg.core.flags import existing_dir, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=positive_int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--experiment", default="pubmedqa")
    ap.add_argument("--ref", type=existing_dir, help="a checkout of the reference commit, timed the same way")
    ap.add_argument("--extra", nargs="*", default=[], help="more overrides for every run, e.g. threads=1")
    args = ap.parse_args()
    after = bench(ROOT, args.jobs, args.experiment, args.extra)
    before = bench(args.ref.resolve(), args.jobs, args.experiment, []) if args.ref else None
    print(f"cores: {len(os.sched_getaffinity(0))}; experiment={args.experiment}; one idle run: "
          f"{after['idle_run_s']:.1f} s" + (f" (reference {before['idle_run_s']:.1f} s)" if before else ""))
    head = "| N | concurrent s | sequential s | runs/min | time per job vs one idle job |"
    print(head if not before else head[:-1] + " reference concurrent s | reference runs/min | reference vs idle | speed-up |")
    print("|" + "---|" * (5 if not before else 9))
    for n, r in after["jobs"].items():
        row = (f"| {n} | {r['concurrent_s']:.1f} | {r['sequential_s']:.1f} | {r['runs_per_min']:.1f} | "
               f"{r['per_run_vs_idle']:.2f}x |")
        if before:
            b = before["jobs"][n]
            row += (f" {b['concurrent_s']:.1f} | {b['runs_per_min']:.1f} | {b['per_run_vs_idle']:.2f}x | "
                    f"{b['concurrent_s'] / r['concurrent_s']:.2f}x |")
        print(row)
    print(json.dumps({"after": after, "before": before}))


if __name__ == "__main__":
    main()
