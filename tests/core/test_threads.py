"""The thread knob reaches torch, numba and BLAS (in a fresh process, as an entry point sets it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

PROBE = """
import json, sys
from mogg.core.threads import configure_threads, default_threads, single_threaded
n = configure_threads(int(sys.argv[1]) if sys.argv[1] != "none" else None)
import numpy, numba, torch
from threadpoolctl import threadpool_info
blas = [p["num_threads"] for p in threadpool_info()]
with single_threaded():
    inner = torch.get_num_threads()
print(json.dumps({"n": n, "default": default_threads(), "torch": torch.get_num_threads(), "numba": numba.get_num_threads(),
                  "blas": blas, "inner": inner, "after": torch.get_num_threads()}))
"""


def _probe(arg: str, env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, arg], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_thread_knob_reaches_torch_numba_and_blas():
    r = _probe("1")
    assert r["n"] == r["torch"] == r["numba"] == 1
    assert r["blas"] and all(b == 1 for b in r["blas"])
    assert r["inner"] == 1 and r["after"] == 1


def test_default_is_the_slurm_share_else_the_cores():
    import os

    r = _probe("none", {**os.environ, "SLURM_CPUS_PER_TASK": "1"})
    assert r["n"] == r["default"] == r["torch"] == 1
    r = _probe("none", {k: v for k, v in os.environ.items() if k != "SLURM_CPUS_PER_TASK"})
    assert r["n"] == len(os.sched_getaffinity(0))


def test_single_threaded_restores_the_job_setting():
    import torch

    from mogg.core.threads import single_threaded

    before = torch.get_num_threads()
    with single_threaded():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -1, 100000, 2.5, "x", True])
def test_bad_thread_count_is_refused(bad):
    """threads=100000 once reached OpenBLAS (RLIMIT_NPROC, then a segmentation fault): refused first."""
    from mogg.core.threads import configure_threads, max_threads

    with pytest.raises(ValueError, match=rf"threads=.*1\.\.{max_threads()}"):
        configure_threads(bad)


def test_auto_threads_are_the_jobs_cores():
    from mogg.core.threads import check_threads, default_threads

    assert check_threads("auto") == check_threads(None) == default_threads()


LAUNCHED = """
import numba, numpy
@numba.njit(parallel=True)
def total(x):
    s = 0.0
    for i in numba.prange(len(x)):
        s += x[i]
    return s
total(numpy.ones(8))  # numba's pool starts at the count it read from the environment at import
from mogg.core.threads import configure_threads
configure_threads(2)
@numba.njit
def more(x):
    return x + 1
print(more(1), numba.get_num_threads())  # a compile after: numba re-reads the environment
"""


def test_a_job_that_inherited_another_numba_count_still_compiles_after_setting_its_threads():
    """A process whose parent set NUMBA_NUM_THREADS=1 (a pytest worker that ran a job at threads=1) imported numba and
    started its pool, then set threads=2: configure_threads moved NUMBA_NUM_THREADS and numba's next compile raised
    "Cannot set NUMBA_NUM_THREADS to a different value once the threads have been launched" (the CI's hostile
    replays, 3 failures, when the test order put such a job first). The variable stays numba's now."""
    import os

    env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", LAUNCHED], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-800:]
    assert out.stdout.split() == ["2", "1"]  # compiled; numba's pool stays at the count it started with
