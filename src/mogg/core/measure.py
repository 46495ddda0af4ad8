"""What a benchmark step cost, measured on a child process: wall and CPU time, peak RSS, RSS by kind.

Each step of a scale benchmark (a shard build, a merge, a search) runs in a fresh process so that its
peak RSS is its own: :func:`run_child` starts it, waits for it with ``os.wait4`` (the kernel's
rusage of that child alone: CPU seconds and peak RSS) and reads the JSON object the child prints
as its last stdout line. CPU time is reported beside wall time because the machines these run on
are shared: wall time grows with other jobs' load, CPU time much less. A step run as a SLURM task
is measured by the scheduler instead: :func:`slurm_usage` reads each task's wall, CPU and peak RSS
from ``sacct`` (the cluster's accounting: ``MaxRSS`` is sampled, every second on
``slurm/local_cluster.sh``'s cluster).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["child_report", "parse_sacct", "rss_now", "run_child", "slurm_usage"]


def rss_now() -> dict:
    """This process's resident memory in MiB: ``rss`` (all), ``anon`` (heap: what the process owns),
    ``file`` (mapped file pages currently resident: memory-mapped indexes; the kernel drops them
    under pressure) and ``peak`` (VmHWM). Empty where /proc is missing."""
    status = Path("/proc/self/status")
    if not status.exists():
        return {}
    fields = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "VmHWM": "peak"}
    out = {}
    for line in status.read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in fields:
            out[fields[key]] = int(line.split()[1]) / 1024  # kB -> MiB
    return out


def run_child(args: Sequence[str], env: dict | None = None, log: Path | None = None) -> dict:
    """Run ``args`` to completion; its last stdout line, if a JSON object, is merged into the result
    with ``wall_s``, ``cpu_s`` (user + system of the child and its own children), ``peak_rss_mb``
    and ``rc``. stderr goes to ``log`` (appended) or is inherited.

    ``peak_rss_mb`` is the child's own high-water mark when it reports one (``hwm_mb``: VmHWM of
    its exec'd image, :func:`child_report`): the kernel's ``ru_maxrss`` of a child starts from the
    parent's RSS at fork, so a large parent would be counted as the child's peak (kept as
    ``ru_maxrss_mb``)."""
    t0 = time.perf_counter()
    err = open(log, "a") if log else None
    try:
        p = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if err:
            err.close()
    res = {"rc": p.returncode, "wall_s": time.perf_counter() - t0, "cpu_s": ru.ru_utime + ru.ru_stime,
           "peak_rss_mb": ru.ru_maxrss / 1024}  # ru_maxrss: KiB on Linux
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if last.startswith("{"):
        res.update(json.loads(last))
    if res.get("hwm_mb"):
        res["ru_maxrss_mb"], res["peak_rss_mb"] = res["peak_rss_mb"], res["hwm_mb"]
    return res


def child_report(**values) -> str:
    """The JSON line a measured child prints last: ``values`` plus its RSS now by kind and its peak."""
    rss = rss_now()
    return json.dumps({**values, "rss_mb": rss.get("rss"), "anon_mb": rss.get("anon"), "file_mb": rss.get("file"),
                       "hwm_mb": rss.get("peak")})


SACCT_FIELDS = ("JobID", "State", "Elapsed", "TotalCPU", "MaxRSS", "Start", "End")
_UNITS = {"": 1 / 2**20, "K": 1 / 2**10, "M": 1.0, "G": 2.0**10, "T": 2.0**20}  # -> MiB


def _seconds(text: str) -> float:
    """``[D-][HH:]MM:SS[.mmm]`` (sacct's Elapsed and TotalCPU) in seconds."""
    days, _, rest = text.rpartition("-")
    parts = [float(x) for x in rest.split(":")]
    secs = sum(v * 60**i for i, v in enumerate(reversed(parts)))
    return secs + 86400 * int(days or 0)


def _mib(text: str) -> float | None:
    """sacct's ``MaxRSS`` (``912345K``, ``1.5G``; empty: not sampled) in MiB."""
    if not text:
        return None
    unit = text[-1] if text[-1].isalpha() else ""
    return float(text[: len(text) - len(unit)]) * _UNITS[unit.upper()]


# sacct states of a job that may still change: the scheduler's accounting trails the job's end (the
# result file a launcher waits on is written before the task leaves RUNNING/COMPLETING).
_PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING",
                             "SUSPENDED", "STAGE_OUT", "SIGNALING", ""})


def parse_sacct(text: str) -> dict[str, dict]:
    """``sacct -P -n --format=<SACCT_FIELDS>`` output, per job (array task ``<array>_<i>``): its
    ``state``, ``wall_s`` (Elapsed), ``cpu_s`` (TotalCPU: its steps' user + system), ``peak_rss_mb``
    (the largest MaxRSS of its steps: the batch shell, ``srun``'s step) and ``start``/``end``."""
    jobs: dict[str, dict] = {}
    for line in text.strip().splitlines():
        jid, state, elapsed, cpu, rss, start, end = line.split("|")[: len(SACCT_FIELDS)]
        job, _, step = jid.partition(".")
        j = jobs.setdefault(job, {"peak_rss_mb": None})
        if not step:  # the allocation: its wall time and its steps' CPU
            j.update(state=state.split()[0] if state else state, wall_s=_seconds(elapsed), cpu_s=_seconds(cpu),
                     start=start, end=end)
        else:  # each step's state and whether its MaxRSS is recorded yet (slurm_usage waits for both)
            j.setdefault("_steps", {})[step] = (state.split()[0] if state else state, bool(rss))
        peak = _mib(rss)
        if peak is not None and (j["peak_rss_mb"] is None or peak > j["peak_rss_mb"]):
            j["peak_rss_mb"] = peak
    for j in jobs.values():
        steps = j.pop("_steps", {})
        # a step not final yet, or one without the MaxRSS its siblings have (the accounting writes a step's
        # figures after it ends; where no step has one, the cluster gathers none: nothing to wait for)
        j["settling"] = any(st in _PENDING_STATES for st, _ in steps.values()) or (
            any(has for _, has in steps.values()) and not all(has for _, has in steps.values()))
    return jobs



def slurm_usage(job_ids: Sequence[str], env: dict | None = None, settle_s: float = 60.0,
                poll_s: float = 1.0) -> dict[str, dict]:
    """:func:`parse_sacct` of these jobs (array ids take in all their tasks), once every id is known to
    the accounting, every allocation and step reads a final state (COMPLETED, FAILED, CANCELLED, ...)
    and every step has its MaxRSS where any has (``settling`` false):
    sacct is re-read every ``poll_s`` seconds for at most ``settle_s``, then the last reading is
    returned as it is (its ``state`` says what the accounting knew)."""
    deadline = time.monotonic() + settle_s
    while True:
        out = subprocess.run(["sacct", "-P", "-n", "-j", ",".join(job_ids), f"--format={','.join(SACCT_FIELDS)}"],
                             env=env, capture_output=True, text=True, check=True)
        jobs = parse_sacct(out.stdout)
        known = all(any(k == i or k.startswith(f"{i}_") for k in jobs) for i in job_ids)
        settled = known and not any(j.get("state", "") in _PENDING_STATES or j["settling"] for j in jobs.values())
        if settled or time.monotonic() >= deadline:
            return jobs
        time.sleep(poll_s)
