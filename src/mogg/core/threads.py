"""Thread discipline: one knob for a job's threads (torch intra-op, numba, faiss, BLAS/OpenMP).

Every library starts one thread per core by default, so several jobs on one node (SLURM array
tasks, ``hydra/launcher=joblib``) oversubscribe the cores and their OpenMP workers spin against
each other: a 10k-parameter router that trains in 7 s alone took minutes beside two other jobs.
:func:`configure_threads` is called once by every entry point before the heavy libraries start;
:func:`single_threaded` wraps work too small to gain from threads (the router MLPs), where
threads only add synchronisation.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

# Read by OpenMP / BLAS runtimes and numba when they start (child processes inherit them too).
_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "NUMBA_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def default_threads() -> int:
    """The threads this job was given: ``SLURM_CPUS_PER_TASK``, else the cores this process may
    run on (its CPU affinity, which launchers and cgroups narrow), else ``os.cpu_count()``."""
    slurm = os.environ.get("SLURM_CPUS_PER_TASK")
    if slurm and slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS / Windows
        return max(1, os.cpu_count() or 1)


def max_threads() -> int:
    """The most threads a job may ask for: 4 per core of this machine (beyond that every library's
    pool only adds context switches, and OpenBLAS fails to start its threads under RLIMIT_NPROC)."""
    return 4 * max(1, os.cpu_count() or 1)


def check_threads(threads) -> int:
    """``threads`` as a count: an integer in 1..:func:`max_threads`, or null/``auto`` for the job's cores."""
    if threads is None or threads == "auto":
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= max_threads():
        raise ValueError(f"threads={threads!r}: must be an integer in 1..{max_threads()} (4 per core here), "
                         "or null / auto for the job's cores")
    return threads


def configure_threads(threads: int | str | None = None) -> int:
    """Set every library's thread count to ``threads`` (None: :func:`default_threads`); returns it.

    Environment variables reach runtimes not started yet (and child processes); torch, numba,
    faiss and the BLAS/OpenMP pools already loaded are set through their own APIs. OpenMP
    workers wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless set), so an idle pool never spins
    on a core another job needs, after a short spin (``GOMP_SPINCOUNT=300000`` iterations, libgomp's
    default without a policy; libgomp cuts it when threads outnumber cores): with no spin at all
    every parallel region of LightGBM's tree growth woke sleeping threads, and 2 threads fitted a
    LightGBM scorer no faster than 1 (4.3 against 4.7 s; 2.8 s with the spin).
    """
    n = check_threads(threads)
    for var in _ENV:
        os.environ[var] = str(n)
    if "numba" in sys.modules:  # numba read NUMBA_NUM_THREADS at import: its next compile re-reads the environment
        # and raises once its pool has started if the value moved (a process that inherited another count from its
        # parent: the CI's hostile replays, whose pytest worker had run a job at threads=1), so it stays numba's
        os.environ["NUMBA_NUM_THREADS"] = str(sys.modules["numba"].config.NUMBA_NUM_THREADS)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("GOMP_SPINCOUNT", "300000")
    import torch

    torch.set_num_threads(n)
    numba_n = None
    try:
        import numba

        # numba's pool size is fixed when its runtime starts: at most NUMBA_NUM_THREADS (set above)
        numba_n = min(n, numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(numba_n)
    except ImportError:
        pass
    if "faiss" in sys.modules:
        sys.modules["faiss"].omp_set_num_threads(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)
    log.info("threads: %d (torch %d, numba %s, BLAS/OpenMP %d)%s", n, torch.get_num_threads(), numba_n, n,
             "" if threads is not None else " [the job's cores; set threads=N to change]")
    return n


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run the block on one thread (torch and BLAS), restoring the previous counts after."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)
