"""Issue 24, item 3: concurrent writers of one artifact key (a sweep starting on an empty shared
store). Before the fix, 4 processes x 40 writes failed 50 of 320 operations with ENOTEMPTY and a
reader saw partial artifacts; now writers publish under a lock and readers never see a half state."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mogg.core.artifacts import artifact_lock, read_manifest, write_artifact

WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from mogg.core.artifacts import write_artifact
    d, who, n, same = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "same"
    for i in range(n):
        cfg = {"k": 1} if same else {"k": 1, "writer": who, "i": i}
        def writer(tmp, who=who, i=i):
            for j in range(20):
                (tmp / f"f{j}.txt").write_text(f"{who}-{i}-{j}" * 50)
        write_artifact(d, writer, cfg)
""")

READER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from mogg.core.artifacts import ArtifactError, artifact_lock, read_manifest
    d, until = Path(sys.argv[1]), time.time() + float(sys.argv[2])
    bad = ok = 0
    while time.time() < until:
        if not (d / "manifest.json").exists() and ok == 0:
            continue
        with artifact_lock(d, shared=True):
            try:
                m = read_manifest(d)
                texts = {(d / name).read_text()[:20] for name in m["files"]}
                ok += 1
            except (ArtifactError, FileNotFoundError) as e:
                bad += 1
                print("HALF:", e, flush=True)
    print(f"reads {ok} bad {bad}")
    sys.exit(1 if bad else 0)
""")


def _stress(root: Path, same: bool, writers: int = 4, n: int = 10) -> None:
    d = root / "store" / "abc"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(d), f"w{k}", str(n), "same" if same else "diff"],
                              stderr=subprocess.PIPE, text=True) for k in range(writers)]
    reader = subprocess.Popen([sys.executable, "-c", READER, str(d), "6"], stdout=subprocess.PIPE, text=True)
    errs = [p.communicate()[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    out, _ = reader.communicate()
    assert reader.returncode == 0, out
    m = read_manifest(d)  # one valid artifact at the key, nothing left beside it
    assert len(m["files"]) == 20
    assert sorted(p.name for p in d.parent.iterdir()) == ["abc"]


@pytest.mark.parametrize("same", [True, False], ids=["same-config", "replacing"])
def test_concurrent_writers_and_a_reader_never_see_a_half_state(tmp_path, same):
    _stress(tmp_path, same)


@pytest.mark.slow
def test_concurrent_writers_stress_twenty_times(tmp_path):
    for i in range(20):
        _stress(tmp_path / str(i), same=False, n=5)


def test_same_config_is_published_once(tmp_path):
    calls = []
    d = tmp_path / "x"
    write_artifact(d, lambda t: (t / "a").write_text("1"), {"k": 1})
    first = json.loads((d / "manifest.json").read_text())["created"]
    write_artifact(d, lambda t: calls.append(1) or (t / "a").write_text("2"), {"k": 1})
    assert (d / "a").read_text() == "1" and calls == [1]  # the loser adopted the published one
    assert json.loads((d / "manifest.json").read_text())["created"] == first
    (d / "a").write_text("corrupt")  # a damaged published copy is replaced, not adopted
    write_artifact(d, lambda t: (t / "a").write_text("3"), {"k": 1})
    assert (d / "a").read_text() == "3"
    with artifact_lock(d, shared=True):
        read_manifest(d)


def test_sweep_shaped_jobs_on_an_empty_store_leave_one_valid_artifact_per_key(tmp_path):
    """Three train.py jobs (different seeds) start together on an empty artifact store: all
    succeed, and every key holds one valid artifact with nothing half-written beside it."""
    from conftest import ROOT

    store = tmp_path / "store"
    procs = [subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), "experiment=generic_example", f"paths.artifacts={store}",
         f"paths.checkpoints={tmp_path / 'ckpt'}", f"paths.reports={tmp_path / 'rep'}", f"paths.outputs={tmp_path / 'out'}",
         f"questions.path={ROOT / 'examples/generic/questions.jsonl'}",
         f"corpus.sources.0.paths={ROOT / 'examples/generic/corpus.jsonl'}", "trainer.max_epochs=5",
         f"seed={s}", f"run_name=s{s}", "threads=1"], cwd=ROOT, stderr=subprocess.PIPE, text=True) for s in range(3)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-1500:] for e in errs]
    keys = [d for kind in store.iterdir() for d in kind.iterdir()]
    assert keys and all(not d.name.startswith(".") for d in keys), keys  # no temp or old directories
    for d in keys:
        read_manifest(d)
