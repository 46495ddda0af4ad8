"""Progress bars for long steps, one rule for all: on stderr, shown on a terminal and off in
non-interactive logs (a batch job's log file), unless ``MOGG_PROGRESS=1`` asks for them anyway
(``MOGG_PROGRESS=0``: never)."""

from __future__ import annotations

import os


def progress_disabled() -> bool | None:
    """tqdm's ``disable``: False (``MOGG_PROGRESS=1``), True (``MOGG_PROGRESS=0``) or None (tqdm's own
    rule: off when stderr is not a terminal)."""
    return {"1": False, "0": True}.get(os.environ.get("MOGG_PROGRESS", ""), None)


def progress(total: int | None = None, desc: str = "", unit: str = "it", leave: bool = False):
    """A tqdm bar on stderr under :func:`progress_disabled`'s rule."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=leave, disable=progress_disabled())


def stop_horizon(done: int, since_best, patience: int, cap: int) -> int:
    """The epoch at which early stopping ends a fit if no run still training improves again: every
    run stops ``patience - since_best`` epochs from now, the fit when the last one does (at most
    ``cap``; ``patience`` 0: no early stopping, ``cap``). An epoch bar's total: a bar counting to
    ``max_epochs`` promised 200 epochs and a 16-minute wait for fits that stopped at 39
    (issue 61); this total only grows when a run improves, and the bar reaches it when the fit ends."""
    waits = [int(b) for b in since_best]
    if not waits:  # nothing still training: the fit ended here
        return int(done)
    if not patience:
        return int(cap)
    return min(int(cap), int(done) + int(patience) - min(waits))


class Heartbeat:
    """A log line at most every ``every`` seconds from a long loop, so that a batch job's log (no
    bars there) is never silent for long: ``beat(lambda: "...")`` logs the text at INFO on ``log``
    when ``every`` seconds have passed since the last line (the text is built only then)."""

    def __init__(self, log, every: float = 15.0):
        import time

        self.log, self.every, self._clock = log, float(every), time.monotonic
        self._last = self._clock()

    def beat(self, text) -> bool:
        now = self._clock()
        if now - self._last < self.every:
            return False
        self._last = now
        self.log.info("%s", text())
        return True
