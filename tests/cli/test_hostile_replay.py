"""Issue 24: the hostile-input replay (tests/hostile_cases.py) over question and corpus files,
router directories, knobs, the leakage guard, secrets and mogg-route input: >= 100 cases, every one a clear error
naming the file or knob, or a correct result; no traceback, no silent wrong result."""

from __future__ import annotations

import collections
import logging

import pytest
from hostile_cases import all_cases, case_groups, replay

GROUPS = ("inputs", "runs", "shared", "cli", "stores", "secrets")


def test_the_replay_has_every_group_and_100_cases_over_7_surfaces():
    groups = case_groups()
    assert tuple(groups) == GROUPS  # a new group is replayed by the test below only once named there
    cases = all_cases()
    assert len(cases) >= 100 and len({c.surface for c in cases}) >= 7


@pytest.mark.parametrize("group", GROUPS)
def test_hostile_replay_has_no_traceback_and_no_silent_result(group):
    cases = case_groups()[group]
    assert cases
    logging.disable(logging.WARNING)
    try:
        rows = replay(cases)
    finally:
        logging.disable(logging.NOTSET)
    bad = [r for r in rows if r["outcome"] not in ("clear error", "correct")]
    counts = collections.Counter(r["outcome"] for r in rows)
    assert not bad, f"{counts}: {bad[:10]}"
