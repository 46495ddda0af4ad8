"""Job slots (mogg.core.slots): at most N jobs compute at once; a killed holder frees its slot."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import ROOT, main_calls

HOLD = """
import sys, time
from mogg.core.slots import job_slot
with job_slot(int(sys.argv[1]), sys.argv[2]) as i:
    print(i, flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _holder(slots: int, d, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(slots), str(d), str(seconds)], cwd=ROOT,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip().isdigit()  # holds its slot from here on
    return p


def test_a_job_waits_while_every_slot_is_taken(tmp_path):
    import threading

    from mogg.core.slots import job_slot

    a, b = _holder(2, tmp_path, 60), _holder(2, tmp_path, 60)
    try:
        t0 = time.monotonic()
        threading.Timer(1.0, a.kill).start()  # the first slot frees 1 s from now, not before
        with job_slot(2, tmp_path, poll_s=0.05) as i:
            waited = time.monotonic() - t0
        assert i in (0, 1) and 1.0 <= waited < 30
    finally:
        a.kill(), b.kill(), a.wait(), b.wait()
    t0 = time.monotonic()
    with job_slot(2, tmp_path, poll_s=0.05):
        assert time.monotonic() - t0 < 1  # free slots: no wait


def test_a_killed_holder_frees_its_slot(tmp_path):
    from mogg.core.slots import job_slot

    p = _holder(1, tmp_path, 60)
    p.kill()
    p.wait()
    t0 = time.monotonic()
    with job_slot(1, tmp_path, poll_s=0.05) as i:
        assert i == 0 and time.monotonic() - t0 < 2


def test_no_limit_and_bad_limits(tmp_path):
    from mogg.core.slots import job_slot

    with job_slot(None) as i:
        assert i is None
    for bad in (0, -1, "2", True, 1.5, "Auto"):
        with pytest.raises(ValueError, match="slots=.*integer >= 1"):
            with job_slot(bad, tmp_path):
                pass


def test_auto_is_the_cores_and_no_limit_under_slurm(monkeypatch):
    import os

    from mogg.core.slots import resolve_slots

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert resolve_slots("auto") == os.cpu_count() and resolve_slots(3) == 3 and resolve_slots(None) is None
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    assert resolve_slots("auto") is None  # the scheduler shares out the cores


def test_the_default_config_takes_one_slot_per_core_in_the_suites_own_directory():
    import os

    from conftest import compose

    cfg = compose([])
    assert cfg.slots == "auto" and cfg.slots_dir == os.environ["MOGG_SLOTS_DIR"]


def test_the_cli_refuses_a_bad_slot_count_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "train.py", "slots=0", f"slots_dir={tmp_path}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "slots=0: must be an integer >= 1" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("entry", ["train.py", "evaluate.py", "build.py"])
def test_every_entry_point_takes_a_slot(entry):
    assert "job_slot" in main_calls(entry), f"{entry}: main() takes no job slot"


def test_a_waiting_job_says_who_holds_the_slot_and_for_how_long(tmp_path, caplog):
    """Issue 50: a job waiting for a slot printed one line at the start and nothing until the wait
    ended; now a line every ``remind_s`` names each holder and how long it has held its slot."""
    import re
    import threading

    from mogg.core.slots import job_slot

    a = _holder(1, tmp_path, 60)
    try:
        threading.Timer(1.5, a.kill).start()
        with caplog.at_level("WARNING", logger="mogg.core.slots"), job_slot(1, tmp_path, poll_s=0.05, remind_s=0.4):
            pass
    finally:
        a.kill(), a.wait()
    msgs = [r.getMessage() for r in caplog.records]
    assert "held by other mogg jobs" in msgs[0] and f"pid {a.pid} in " in msgs[0]
    still = [m for m in msgs if m.startswith("still waiting for a job slot")]
    assert 2 <= len(still) <= 5, msgs
    assert all(re.search(rf"pid {a.pid} in .* for \d+ s", m) for m in still)
    assert msgs[-1].startswith("job slot 0 of 1 after")
