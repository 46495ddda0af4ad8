"""Job slots: at most N mogg jobs compute on a machine at once; the others wait their turn.

Four CPU-bound jobs on two cores finish later each and, together, fewer per minute than two
(measured, ``scripts/bench_sweep.py``: 15.1 runs/min with 2 concurrent ``train.py`` runs, 12.8 with 4:
the processes, not their threads, oversubscribe the cores). A scheduler that knows each job's share
(SLURM) prevents that; several shells, ``hydra/launcher=local`` (submitit starts every job of a sweep
at once) or ``-m`` with a parallel launcher do not. ``slots=N`` makes each entry point take one of
``N`` slots (``flock`` on ``slot<i>`` files in a per-user directory) before it loads anything heavy, and
hold it until it exits; a job that finds every slot taken sleeps (no CPU) and retries. A killed
holder's lock is released by the kernel, so a crash never leaks a slot.

The default is ``slots=auto``: as many slots as the machine has cores (more concurrent jobs than
cores only oversubscribe them), and no limit inside a SLURM job (the scheduler already shares out
the cores, and a node's array tasks must not wait on each other).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


def default_slot_dir() -> Path:
    """A per-user directory shared by every job on this machine."""
    return Path(tempfile.gettempdir()) / f"mogg-slots-{os.getuid()}"


AUTO = "auto"


def resolve_slots(slots: int | str | None) -> int | None:
    """``slots`` as a count (None: no limit); ``"auto"``: the machine's cores, or None in a SLURM job."""
    if slots == AUTO:
        return None if os.environ.get("SLURM_JOB_ID") else max(1, os.cpu_count() or 1)
    if slots is None:
        return None
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise ValueError(f"slots={slots!r}: must be an integer >= 1, auto (the cores) or null (no limit)")
    return slots


@contextmanager
def job_slot(slots: int | str | None, directory: str | Path | None = None, poll_s: float = 0.25,
             remind_s: float = 60.0) -> Iterator[int | None]:
    """Hold one of ``slots`` machine-wide job slots for the block; yields its index (None: no limit).
    ``slots``: a count, ``"auto"`` (:func:`resolve_slots`) or None.

    ``directory``: where the slot files live (default :func:`default_slot_dir`); jobs that should
    share a limit must name the same one. A job that waits says so once, then every ``remind_s``
    seconds with who holds each slot and for how long.
    """
    slots = resolve_slots(slots)
    if slots is None:
        yield None
        return
    d = Path(directory) if directory else default_slot_dir()
    if d.exists() and not d.is_dir():
        raise ValueError(f"slots_dir={str(d)!r} is a file: name a folder for the slot locks (or leave slots_dir=null)")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"slots_dir={str(d)!r}: cannot create the slot folder ({e.strerror}); name a writable folder") from None
    t0, said, last = time.monotonic(), False, 0.0
    while True:
        for i in range(slots):
            try:
                fd = os.open(d / f"slot{i}", os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise ValueError(f"slots_dir={str(d)!r}: cannot open slot{i} ({e.strerror}); name a writable folder") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                # who holds it, for the jobs that wait (read by _holders)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} in {os.getcwd()} since {time.time():.0f}\n".encode(), 0)
                if said:
                    log.warning("job slot %d of %d after %.1f s of waiting", i, slots, time.monotonic() - t0)
                yield i
            finally:
                os.close(fd)  # closing releases the lock
            return
        if not said:
            log.warning("all %d job slots in %s are held by other mogg jobs (%s): waiting for one. Jobs of every "
                        "checkout of this user share these slots; slots=null lifts the limit, slots=N changes it, "
                        "slots_dir=DIR (or MOGG_SLOTS_DIR) gives this run slots of its own", slots, d, _holders(d, slots))
            said, last = True, time.monotonic()
        elif time.monotonic() - last >= remind_s:  # a line a minute: a waiting job is not a hung one
            log.warning("still waiting for a job slot after %.0f s: %s", time.monotonic() - t0, _holders(d, slots))
            last = time.monotonic()
        time.sleep(poll_s)


def _holders(d: Path, slots: int) -> str:
    """What the slot files say about their holders ("pid 123 in /home/x/mogg", ...)."""
    out = []
    for i in range(slots):
        try:
            text = (d / f"slot{i}").read_text(errors="replace").strip()
        except OSError:
            text = ""
        m = re.fullmatch(r"(.*) since (\d+)", text)
        if m:  # held for how long (a holder written before the time was kept says only who)
            text = f"{m.group(1)} for {max(0, time.time() - int(m.group(2))):.0f} s"
        out.append(text or "a job that did not say")
    return "; ".join(out)
