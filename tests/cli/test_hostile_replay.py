"""Issue 24: the hostile-input replay (tests/hostile_cases.py) over question and corpus files,
router directories, knobs, the leakage guard, secrets and mogg-route input: >= 100 cases, every one a clear error
naming the file or knob, or a correct result; no traceback, no silent wrong result."""

from __future__ import annotations

import collections
import logging

from hostile_cases import all_cases, replay


def test_hostile_replay_has_no_traceback_and_no_silent_result():
    cases = all_cases()
    assert len(cases) >= 100
    logging.disable(logging.WARNING)
    try:
        rows = replay(cases)
    finally:
        logging.disable(logging.NOTSET)
    bad = [r for r in rows if r["outcome"] not in ("clear error", "correct")]
    counts = collections.Counter(r["outcome"] for r in rows)
    assert not bad, f"{counts}: {bad[:10]}"
    assert len({r["surface"] for r in rows}) >= 7
