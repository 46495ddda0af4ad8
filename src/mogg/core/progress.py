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
