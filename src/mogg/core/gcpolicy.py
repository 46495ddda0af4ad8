"""Garbage-collector settings for a command-line job: fewer full collections while it loads, none at exit.

A job loads ~4,000 modules (torch, numba, and Lightning, which pulls in ``torch._dynamo`` and sympy):
~530k tracked objects. With CPython's default thresholds (700, 10, 10) the cyclic collector walks all
of them again and again while they load: ``python train.py experiment=pubmedqa`` ran 8 full
collections costing 0.96 s (idle, 2 cores), and the interpreter's collection at exit another ~1.2 s,
of a 10 s job. Nothing in those objects is garbage: they are modules and classes that live until exit.

:func:`configure_gc` raises the young generation's threshold (10,000 allocations instead of 700) and
lets two million allocations pass between full collections (instead of ~70,000), so loading costs one
or two full collections; cyclic garbage is still collected, later. At exit everything still alive is
frozen (``gc.freeze``) before the interpreter's last collection, which then has nothing to walk; a
job's files are closed by then (artifacts are written atomically and closed, loggers flush at exit).
Measured (median of 3, ``python train.py experiment=pubmedqa``, idle): 10.0 s -> 7.1 s.
"""

from __future__ import annotations

import atexit
import gc
import logging

log = logging.getLogger(__name__)

# (young generation, young collections per middle one, middle collections per full one)
JOB_THRESHOLDS = (10_000, 10, 20)
_exit_hook = False  # registered once per process


def configure_gc(thresholds: tuple[int, int, int] = JOB_THRESHOLDS) -> None:
    """Collector thresholds for a job that loads large libraries; nothing walked again at exit.

    Called once by each entry point, first; idempotent (the exit hook is registered once).
    """
    global _exit_hook
    if any(int(t) < 1 for t in thresholds):
        raise ValueError(f"gc thresholds must be >= 1, got {thresholds}")
    gc.set_threshold(*(int(t) for t in thresholds))
    if not _exit_hook:
        # atexit runs last-registered first: this runs before logging's shutdown hook, which
        # still flushes its handlers (freezing stops the collector, not finalisers or flushes)
        atexit.register(gc.freeze)
        _exit_hook = True
    log.debug("gc thresholds %s; objects frozen at exit", gc.get_threshold())
