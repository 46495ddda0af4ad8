"""Fault injection through the real CLI (build.py, train.py, evaluate.py as subprocesses).

A process is SIGKILLed at a chosen point (a wrapper patches one library function to kill its own
process on the n-th call, then runs the entry point exactly as ``python train.py ...`` would),
rerun, and its outputs compared byte for byte with an uninterrupted run. Planted corrupt
artifacts and checkpoints must be refused naming the file; two concurrent evaluations must both
write valid reports without asking the reader twice; a secret given on the command line must
not be written anywhere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import ROOT
from test_readers import FakeOpenAI

pytestmark = pytest.mark.timeout(900)

# Runs an entry point with one function patched to SIGKILL the process on its n-th call.
# argv: <module> <function> <n> <when: before|after> <script> <overrides...>
KILLER = textwrap.dedent("""
    import importlib, os, runpy, signal, sys
    mod, fn, n, when, script = sys.argv[1:6]
    m = importlib.import_module(mod)
    real, calls = getattr(m, fn), [0]
    def wrapper(*a, **kw):
        calls[0] += 1
        if calls[0] == int(n) and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        out = real(*a, **kw)
        if calls[0] == int(n) and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    setattr(m, fn, wrapper)
    sys.argv = [script] + sys.argv[6:]
    runpy.run_path(script, run_name="__main__")
""")


def _ov(root: Path, *extra: str) -> list[str]:
    return ["experiment=generic_example", f"paths.artifacts={root / 'artifacts'}", f"paths.checkpoints={root / 'ckpt'}",
            f"paths.reports={root / 'reports'}", f"paths.outputs={root / 'outputs'}", f"paths.answers={root / 'answers'}",
            f"questions.path={ROOT / 'examples/generic/questions.jsonl'}",
            f"corpus.sources.0.paths={ROOT / 'examples/generic/corpus.jsonl'}", "trainer.max_epochs=20", *extra]


def _run(script: str, root: Path, *extra: str, kill: tuple[str, str, int, str] | None = None, check=True):
    if kill is None:
        cmd = [sys.executable, str(ROOT / script), *_ov(root, *extra)]
    else:
        cmd = [sys.executable, "-c", KILLER, *map(str, kill), str(ROOT / script), *_ov(root, *extra)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == (-9 if kill else 0), p.stderr[-3000:]
    return p


def _payload(root: Path, sub: str) -> dict[str, bytes]:
    """Every file under ``root/sub`` except manifests' creation times and Lightning scratch."""
    out = {}
    for f in sorted((root / sub).rglob("*")):
        if not f.is_file() or ".lightning" in f.parts or f.suffix == ".png":
            continue
        data = f.read_bytes()
        if f.name == "manifest.json":
            m = json.loads(data)
            m.pop("created", None)
            data = json.dumps(m, sort_keys=True).encode()
        out[str(f.relative_to(root / sub))] = data.replace(str(root).encode(), b"<root>")  # configs name the run's paths
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted build -> train -> evaluate of the generic example."""
    root = tmp_path_factory.mktemp("ref")
    _run("build.py", root)
    _run("train.py", root)
    _run("evaluate.py", root)
    return root


@pytest.mark.parametrize("script,kill", [
    ("build.py", ("mogg.core.artifacts", "write_artifact", 2, "before")),    # the ladder saved, a retriever not
    # the second kill point per script runs with the slow suite: same code paths, ~20 s each
    pytest.param("build.py", ("mogg.core.artifacts", "sha256_file", 3, "after"), marks=pytest.mark.slow),  # inside a manifest
    ("train.py", ("mogg.routing.fitting.kfold", "train_routers", 1, "after")),  # every fold trained (as one model), none saved
    pytest.param("train.py", ("mogg.routing.router_dir", "write_artifact", 3, "before"), marks=pytest.mark.slow),  # folds.json not
])
def test_killed_and_rerun_equals_uninterrupted(tmp_path, reference, script, kill):
    if script == "train.py":  # the uninterrupted build's artifacts (not a second build: ~10 s a process)
        shutil.copytree(reference / "artifacts", tmp_path / "artifacts")
    _run(script, tmp_path, kill=kill)
    if script == "train.py":
        assert not (tmp_path / "ckpt" / "generic_example" / "mog" / "folds.json").exists()
        bad = _run("evaluate.py", tmp_path, check=False)  # a half-trained run is refused, not used
        assert bad.returncode != 0 and ("no trained router" in bad.stderr or "no finished cross-fit" in bad.stderr)
    for s in ("build.py", "train.py", "evaluate.py") if script == "build.py" else ("train.py", "evaluate.py"):
        _run(s, tmp_path)
    for sub in ("artifacts", "ckpt", "reports"):
        got, want = _payload(tmp_path, sub), _payload(reference, sub)
        assert got.keys() == want.keys(), sub
        diff = [k for k in want if got[k] != want[k]]
        assert not diff, f"{sub}: {diff[:5]}"
    leftovers = [p for p in (tmp_path / "artifacts").rglob(".*tmp-*")]
    assert not leftovers  # the killed writer's temp directory was cleaned on rerun


def test_evaluate_killed_while_writing_the_report(tmp_path, reference):
    shutil.copytree(reference, tmp_path, dirs_exist_ok=True)  # an uninterrupted build, train and report
    before = _payload(tmp_path, "reports/generic_example")
    # a second evaluation with other budgets, killed after metrics.json and results.md are written
    _run("evaluate.py", tmp_path, "budgets=[64]", kill=("mogg.evaluation.report", "plot_summaries", 1, "before"))
    # the published report is the previous one, whole: no new metrics beside old records (issue 24, item 6)
    assert _payload(tmp_path, "reports/generic_example") == before
    stale = list((tmp_path / "reports").glob(".generic_example.tmp-*"))
    assert len(stale) == 1  # the killed run's staging folder, hidden beside the report
    _run("evaluate.py", tmp_path)
    assert not list((tmp_path / "reports").glob(".generic_example.tmp-*"))  # removed by the next run
    assert _payload(tmp_path, "reports") == _payload(reference, "reports")


def test_planted_corruption_is_refused_naming_the_file(tmp_path, reference):
    import shutil

    shutil.copytree(reference, tmp_path / "run")
    root = tmp_path / "run"
    weights = root / "ckpt" / "generic_example" / "mog" / "fold1" / "router.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    weights.write_bytes(bytes(raw))
    p = _run("evaluate.py", root, check=False)
    assert p.returncode != 0 and "fold1" in p.stderr and "router.safetensors fails its sha256" in p.stderr
    weights.write_bytes(bytes(raw[:64]))  # truncated
    p = _run("evaluate.py", root, check=False)
    assert p.returncode != 0 and "router.safetensors" in p.stderr
    ladder = next((root / "artifacts" / "ladder").iterdir())
    units = ladder / "units.jsonl"
    units.write_text(units.read_text().replace("bradykinin", "histamine"))
    p = _run("evaluate.py", root, "use_router=false", check=False)
    assert p.returncode != 0 and "units.jsonl fails its sha256 check" in p.stderr


def _serve():
    srv = FakeOpenAI()
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


def test_two_concurrent_evaluations_and_no_secret_on_disk(tmp_path, reference):
    import shutil

    shutil.copytree(reference, tmp_path / "run")
    root = tmp_path / "run"
    srv = _serve()
    try:
        extra = ["reader=openai", f"reader.base_url={srv.url}", "reader.model=fake", "reader.api_key=sk-test-123",
                 "reader_policies=[cot,fixed:best,mog_router]"]
        cmd = [sys.executable, str(ROOT / "evaluate.py"), *_ov(root, *extra)]
        procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=600) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs[0][1][-2000:] + outs[1][1][-2000:]
        assert srv.auth == {"Bearer sk-test-123"}  # the key still reached the server
        assert sum(srv.answered.values()) == len(srv.answered)  # every prompt was asked exactly once
        rep = root / "reports" / "generic_example"
        metrics = json.loads((rep / "metrics.json").read_text())
        assert set(metrics["mog"]["accuracy"]) == {"cot", "fixed:L2:4sent", "mog_router"}
        assert len((rep / "records.jsonl").read_text().splitlines()) == 12
        assert not list(rep.glob(".*.tmp"))
        for out, err in outs:
            assert "sk-test-123" not in out + err
        hits = [str(f) for f in root.rglob("*") if f.is_file() and b"sk-test-123" in f.read_bytes()]
        assert not hits, hits  # not in .hydra/, manifests, reports, answers or logs
        assert list((root / "outputs").rglob(".hydra/overrides.yaml"))  # Hydra did save its files
    finally:
        srv.shutdown()
        srv.server_close()
