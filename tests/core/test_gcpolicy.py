"""The collector settings every entry point applies (mogg.core.gcpolicy), in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, main_calls

PROBE = """
import atexit, gc, json
atexit.register(lambda: print(json.dumps({"frozen_at_exit": gc.get_freeze_count()})))  # runs after mogg's hook
from mogg.core.gcpolicy import JOB_THRESHOLDS, configure_gc
before = gc.get_threshold()
configure_gc()
configure_gc()  # idempotent: one exit hook
print(json.dumps({"before": before, "after": gc.get_threshold(), "job": JOB_THRESHOLDS,
                  "frozen_now": gc.get_freeze_count()}))
"""


def test_job_thresholds_and_nothing_walked_at_exit():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         check=True).stdout.strip().splitlines()
    run, exit_ = json.loads(out[0]), json.loads(out[-1])
    assert tuple(run["after"]) == tuple(run["job"]) != tuple(run["before"])
    assert run["frozen_now"] == 0  # nothing frozen while the job runs: garbage is still collected
    assert exit_["frozen_at_exit"] > 1000  # the modules' objects, frozen before the last collection


def test_bad_thresholds_are_refused():
    from mogg.core.gcpolicy import configure_gc

    with pytest.raises(ValueError, match="gc thresholds must be >= 1"):
        configure_gc((0, 10, 10))


@pytest.mark.parametrize("entry", ["train.py", "evaluate.py", "build.py", "src/mogg/run/route.py"])
def test_every_entry_point_configures_the_collector(entry):
    assert "configure_gc" in main_calls(entry), f"{entry}: main() does not call configure_gc()"
