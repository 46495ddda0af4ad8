"""The documented SLURM commands against a running scheduler (issue 60): ``pytest -m cluster``.

Start one on this machine first (``slurm/local_cluster.sh start``: a one-node SLURM with accounting;
``.ci/run`` does it after the default suite); without a cluster every test here is skipped, saying why.
Each test runs the commands of ``docs/cluster.md`` and compares what they wrote byte for byte with
the same commands run locally (``hydra/launcher=local``, or one plain build): the sharded build
array plus merge (through the launcher and through the sbatch templates), a train sweep plus
``collect``, ``scontrol requeue`` in the middle of a shard task and of a router fit (which resumes
from its ``last.ckpt``: the log names the epoch), the USR1 requeue of ``slurm/train.sbatch``,
and a cancelled array task (the sweep names it when it happens; a rerun builds only that shard).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.cluster

GENERIC = ["experiment=generic_example"]
TIMEOUT = 400  # seconds for one command (a requeued task waits ~20 s to start again on the local cluster)


def _cluster_env() -> dict[str, str]:
    """This process's environment, with the local cluster's SLURM_CONF when none is set, this
    checkout first on PYTHONPATH and this Python first on PATH (the sbatch templates call ``python``)."""
    env = dict(os.environ)
    if not env.get("SLURM_CONF"):
        conf = Path(env.get("MOGG_SLURM_DIR", "/tmp/mogg-slurm")) / "slurm.conf"
        if conf.is_file():
            env["SLURM_CONF"] = str(conf)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("SLURM_JOB_ID", None)  # the commands run as a user's shell would, not as a job
    return env


@pytest.fixture(scope="module")
def slurm() -> dict[str, str]:
    """The environment that reaches a running SLURM cluster, or a skip that says why not."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        pytest.skip("no SLURM client (sinfo, sbatch): start a local cluster with slurm/local_cluster.sh start")
    env = _cluster_env()
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.skip("sinfo did not answer in 30 s: no SLURM cluster reachable")
    if out.returncode != 0:
        pytest.skip(f"sinfo cannot reach a SLURM cluster ({(out.stderr or out.stdout).strip()[:200]}): "
                    "slurm/local_cluster.sh start")
    if not any(s.startswith(("idle", "mix", "alloc")) for s in out.stdout.split()):
        pytest.skip(f"no SLURM node up (sinfo: {out.stdout.split()})")
    try:
        import hydra_plugins.hydra_submitit_launcher  # noqa: F401
    except ImportError:
        pytest.skip("hydra-submitit-launcher is not installed (pip install -e '.[slurm]')")
    return env


def _paths(tmp: Path) -> list[str]:
    return [f"paths.artifacts={tmp / 'artifacts'}", f"paths.outputs={tmp / 'outputs'}",
            f"paths.reports={tmp / 'reports'}", f"paths.checkpoints={tmp / 'checkpoints'}",
            f"paths.answers={tmp / 'answers'}", f"hydra.sweep.dir={tmp / 'sweep'}", "slots=null"]


def run(env: dict, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    """Run a command from the repository root (where the documented commands run)."""
    res = subprocess.run(list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if ok:
        assert res.returncode == 0, f"{' '.join(args)} -> {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def py(env: dict, script: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    return run(env, sys.executable, str(ROOT / script), *args, ok=ok)


def _tree(root: Path, under: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``root`` (or its ``under`` folders) by relative path; a manifest without its
    write time, its absolute paths as ``<root>`` (what two stores of the same artifacts share)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or (under and not rel.startswith(under)):
            continue
        data = p.read_bytes()
        if p.name == "manifest.json":
            m = json.loads(data)
            m.pop("created", None)
            data = json.dumps(m, sort_keys=True).replace(str(root), "<root>").encode()
        out[rel] = data
    return out


def assert_same_tree(got: dict[str, bytes], want: dict[str, bytes]) -> None:
    assert sorted(got) == sorted(want)
    differ = [k for k in want if got[k] != want[k]]
    assert not differ, f"files that differ: {differ}"


def _corpus(path: Path, docs: int) -> Path:
    """A MedRAG-style jsonl corpus of ``docs`` 8-sentence documents: a shard task of 10k documents
    runs ~10 s, long enough to be interrupted in the middle."""
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(5000)]
    with path.open("w") as f:
        for i in range(docs):
            text = " ".join(" ".join(rng.choice(vocab) for _ in range(12)).capitalize() + "." for _ in range(8))
            f.write(json.dumps({"id": f"d{i}", "title": f"T{i}", "content": text}) + "\n")
    return path


def _wait(what: str, check, timeout: float = 240, every: float = 0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


class Sweep:
    """A ``-m hydra/launcher=slurm`` command running in the background (its output in a file)."""

    def __init__(self, env: dict, tmp: Path, script: str, *args: str):
        self.tmp, self.log = tmp, tmp / f"{script}.sweep.log"
        self._out = self.log.open("w")
        self.proc = subprocess.Popen([sys.executable, str(ROOT / script), "-m", "hydra/launcher=slurm", *args],
                                     cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT, text=True)

    @property
    def output(self) -> str:
        return _text(self.log)

    def array(self) -> str:
        """The job array's id, once submitted."""

        def submitted():
            if self.proc.poll() is not None and "submitted job array" not in self.output:
                pytest.fail(f"the sweep ended before it submitted: {self.output[-3000:]}")
            return _array_id(self.output)

        return _wait("the job array's id", submitted)

    def job(self, task: int) -> str:
        """The SLURM job id of task ``task`` (``<array>_<task>``; a sweep of one job is no array)."""
        a, folder = self.array(), self.tmp / "sweep" / ".submitit"
        return _wait(f"task {task}'s submitit folder",
                     lambda: next((j for j in (f"{a}_{task}", a) if (folder / j).is_dir()), None))

    def task_log(self, task: int) -> Path:
        j = self.job(task)
        return self.tmp / "sweep" / ".submitit" / j / f"{j}_0_log.out"

    def finish(self) -> int:
        try:
            rc = self.proc.wait(timeout=TIMEOUT)
        finally:
            self._out.close()
        return rc


def _assert_same_build(merged_store: Path, single_store: Path) -> None:
    """The merged ladder and retriever state are a plain single build's, file for file (manifests aside)."""
    merged = {k: v for k, v in _tree(merged_store, ("ladder/", "retriever/")).items() if "manifest" not in k}
    # the same kinds on both sides: a store also keeps derived caches beside a ladder (its source positions)
    assert merged == {k: v for k, v in _tree(single_store, ("ladder/", "retriever/")).items() if "manifest" not in k}


def _assert_merge_is_one_build(env: dict, tmp: Path, corpus: list[str], shards: int) -> None:
    """Merge the shards built under ``tmp``, build the same corpus once under ``tmp/single``, compare."""
    py(env, "build.py", *corpus, f"shard.count={shards}", "shard.merge=true", *_paths(tmp))
    py(env, "build.py", *corpus, *_paths(tmp / "single"))
    _assert_same_build(tmp / "artifacts", tmp / "single" / "artifacts")


def _array_id(output: str) -> str | None:
    found = re.findall(r"submitted job array (\d+)", output)
    return found[-1] if found else None


def _state(env: dict, job: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True, text=True)
    return out.stdout.strip()


# --------------------------------------------------------------------------- builds
def test_sharded_build_array_and_merge_equal_the_local_build(slurm, tmp_path):
    """docs/cluster.md: `build.py -m hydra/launcher=slurm shard.index='range(0,3)' shard.count=3` then the merge."""
    on, local, single = tmp_path / "slurm", tmp_path / "local", tmp_path / "single"
    for where, launcher in ((on, "hydra/launcher=slurm"), (local, "hydra/launcher=local")):
        py(slurm, "build.py", "-m", launcher, *GENERIC, "shard.index=range(0,3)", "shard.count=3", *_paths(where))
        py(slurm, "build.py", *GENERIC, "shard.count=3", "shard.merge=true", *_paths(where))
    assert len(list((on / "artifacts" / "shard").iterdir())) == 3
    assert_same_tree(_tree(on / "artifacts"), _tree(local / "artifacts"))
    # and the merged ladder and retriever state are a plain single build's, file for file (same keys)
    py(slurm, "build.py", *GENERIC, *_paths(single))
    _assert_same_build(on / "artifacts", single / "artifacts")


def test_sbatch_templates_build_and_merge_equal_the_local_build(slurm, tmp_path):
    """slurm/README.md: `sbatch --array=0-2 slurm/build_shards.sbatch 3 ...`, then merge.sbatch after it.
    The templates log to slurm/logs/ (tracked, so it exists when SLURM opens --output) and append."""
    on, local = tmp_path / "slurm", tmp_path / "local"
    over = [*GENERIC, *_paths(on)]
    shards = run(slurm, "sbatch", "--parsable", "--array=0-2", "slurm/build_shards.sbatch", "3", *over).stdout.strip()
    merge = run(slurm, "sbatch", "--parsable", f"--dependency=afterok:{shards}", "slurm/merge.sbatch", "3",
                *over).stdout.strip()
    logs = [ROOT / "slurm" / "logs" / f"mogg-shard-{shards}_{i}.out" for i in range(3)]
    logs.append(ROOT / "slurm" / "logs" / f"mogg-merge-{merge}.out")
    try:
        _wait("the shard array and its merge", lambda: not _state(slurm, f"{shards},{merge}"), timeout=TIMEOUT, every=2)

        def settled() -> dict | None:
            # squeue forgets a job before slurmdbd records its end (the accounting lags by a second or
            # more on a loaded node): read sacct until every job and task has a final state
            acct = run(slurm, "sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", f"{shards},{merge}").stdout
            got = dict(line.split("|", 1) for line in acct.split())
            live = ("RUNNING", "PENDING", "COMPLETING", "REQUEUED", "CONFIGURING")
            return got if len(got) == 4 and not any(v.startswith(live) for v in got.values()) else None

        states = _wait("sacct to record the jobs' ends", settled, timeout=60, every=1)
        acct = "\n".join(f"{k}|{v}" for k, v in states.items())
        assert all(s.startswith("COMPLETED|0:0") for s in states.values()), acct
        assert all("build.py: starting" in _text(p) for p in logs)
    finally:
        for p in logs:
            p.unlink(missing_ok=True)
    py(slurm, "build.py", "-m", "hydra/launcher=local", *GENERIC, "shard.index=range(0,3)", "shard.count=3",
       *_paths(local))
    py(slurm, "build.py", *GENERIC, "shard.count=3", "shard.merge=true", *_paths(local))
    assert_same_tree(_tree(on / "artifacts"), _tree(local / "artifacts"))


def test_requeue_in_the_middle_of_a_shard_task(slurm, tmp_path):
    """`scontrol requeue` while a shard task builds: it stops at once (no result, no 10 s grace spent),
    SLURM runs it again (its log appends), the sweep waits for the rerun and the merge equals one build."""
    corpus = ["corpus=jsonl", f"corpus.sources.0.paths={_corpus(tmp_path / 'corpus.jsonl', 20000)}"]
    sweep = Sweep(slurm, tmp_path, "build.py", *corpus, "shard.index=0,1", "shard.count=2", *_paths(tmp_path))
    log = sweep.task_log(1)
    _wait("shard task 1 to read its documents", lambda: "corpus: " in _text(log))
    requeued_at = time.time()
    run(slurm, "scontrol", "requeue", sweep.job(1))
    assert sweep.finish() == 0, sweep.output[-3000:]
    text = _text(log)
    assert "SIGTERM (SLURM job" in text and "stopping now, without a result" in text, text[-3000:]
    assert text.count("build.py: starting") == 2  # the first run's log kept, the rerun appended
    assert text.index("stopping now") < text.rindex("build.py: starting")
    assert "shard 1/2" not in text[:text.index("stopping now")]  # stopped before the shard was written
    assert time.time() - requeued_at < TIMEOUT
    _assert_merge_is_one_build(slurm, tmp_path, corpus, shards=2)


def test_a_cancelled_array_task_is_reported_when_it_happens_and_a_rerun_builds_it(slurm, tmp_path):
    """`scancel <array>_1` while task #0 has not finished: the sweep logs task #1 as CANCELLED at once
    (not after task #0, as a launcher reading results in task order would), then fails naming it;
    the same sweep again skips the finished shard and builds the cancelled one, and the merge equals
    one build."""
    # The order is the scheduler's, not a race: the array is submitted held (sbatch --hold), task 1
    # is released alone and cancelled once its log shows it read its documents (a 60k-document shard
    # then builds ~10 s before it writes), and task 0 is released only after the sweep has reported
    # task 1. CI once ran the two tasks one after the other (a node whose CPUs are two threads of one
    # core holds one task under CR_Core) and task 0 finished before task 1 had started.
    corpus = ["corpus=jsonl", f"corpus.sources.0.paths={_corpus(tmp_path / 'corpus.jsonl', 60000)}"]
    args = (*corpus, "shard.index=0,1", "shard.count=2", *_paths(tmp_path))
    sweep = Sweep(slurm, tmp_path, "build.py", *args, "+hydra.launcher.additional_parameters.hold=true")
    array = sweep.array()
    run(slurm, "scontrol", "release", f"{array}_1")
    log = sweep.task_log(1)
    _wait("task 1 to read its documents", lambda: "corpus: " in _text(log), every=0.1)
    run(slurm, "scancel", f"{array}_1")
    assert "shard 1/2" not in _text(log)  # the cancel went out before task 1 wrote its shard
    reported = r"task #1 \(.*SLURM job \d+_1 failed: CANCELLED"
    _wait("the sweep to report task 1", lambda: re.search(reported, sweep.output), timeout=120)
    assert _state(slurm, f"{array}_0") == "PENDING"  # task 0 is still held: the report did not wait for it
    run(slurm, "scontrol", "release", f"{array}_0")
    assert sweep.finish() == 1
    out = sweep.output
    failed, done = re.search(reported, out), re.search(r"task #0 \(.*SLURM job \d+_0 done", out)
    assert failed and done and failed.start() < done.start(), out[-3000:]
    assert re.search(r"1 of 2 tasks failed: #1 .*CANCELLED", out.splitlines()[-1]), out[-2000:]
    assert len(list((tmp_path / "artifacts" / "shard").iterdir())) == 1

    again = _array_id(py(slurm, "build.py", "-m", "hydra/launcher=slurm", *args).stdout)
    logs = [tmp_path / "sweep" / ".submitit" / f"{again}_{i}" / f"{again}_{i}_0_log.out" for i in range(2)]
    assert "shard 0/2 already built" in _text(logs[0]) and "shard 1/2: " in _text(logs[1])
    _assert_merge_is_one_build(slurm, tmp_path, corpus, shards=2)


# --------------------------------------------------------------------------- training
def test_train_sweep_and_collect_equal_the_local_sweep(slurm, tmp_path):
    """docs/cluster.md: `train.py -m hydra/launcher=slurm ... seed=0,1` then `python -m mogg.evaluation.collect`."""
    # threads=1: a SLURM task's share here (cpus_per_task=1); float32 sums in torch and BLAS round
    # differently at another thread count, and the router's logits with them (in the 7th digit)
    sweep = [*GENERIC, "debug=tiny", "seed=0,1", "evaluate_after=true", "threads=1"]
    trees = {}
    for name, launcher in (("slurm", "hydra/launcher=slurm"), ("local", "hydra/launcher=local")):
        where = tmp_path / name
        py(slurm, "train.py", "-m", launcher, *sweep, *_paths(where))
        run(slurm, sys.executable, "-m", "mogg.evaluation.collect", "--reports", str(where / "reports"),
            "--pattern", "debug_*", "--out", str(where / "collected"))
        trees[name] = {**{f"reports/{k}": v for k, v in _tree(where / "reports").items()},
                       **{f"collected/{k}": v for k, v in _tree(where / "collected").items()}}
    assert any(k.startswith("reports/debug_s1/") for k in trees["slurm"])
    assert_same_tree(trees["slurm"], trees["local"])


def test_requeue_in_the_middle_of_a_router_fit_resumes_from_last_ckpt(slurm, tmp_path):
    """`scontrol requeue` during a fit that would outlast SLURM's grace period: the fit stops at its next
    epoch's end (after last.ckpt), the requeued task resumes from it (the log names the epoch), and the
    report equals an uninterrupted local run's."""
    epochs = 1000  # ~25 s of fitting on this machine: longer than the local cluster's 10 s KillWait
    args = [*GENERIC, "debug=tiny", f"trainer.max_epochs={epochs}", "trainer.patience=0", "trainer.checkpoint_every=1",
            "trainer.requeue=submitit", "evaluate_after=true", "threads=1"]
    on, local = tmp_path / "slurm", tmp_path / "local"
    (local / "outputs").mkdir(parents=True)
    with (local / "outputs" / "local.log").open("w") as out:  # the uninterrupted run, beside the SLURM one
        reference = subprocess.Popen([sys.executable, str(ROOT / "train.py"), "-m", "hydra/launcher=local", *args,
                                      *_paths(local)], cwd=ROOT, env=slurm, stdout=out, stderr=subprocess.STDOUT)
    on.mkdir()
    sweep = Sweep(slurm, on, "train.py", *args, *_paths(on))
    log = sweep.task_log(0)
    _wait("the fit's first last.ckpt", lambda: list((on / "checkpoints").rglob("last.ckpt")), timeout=300, every=0.2)
    time.sleep(1.0)
    run(slurm, "scontrol", "requeue", sweep.job(0))
    assert sweep.finish() == 0, sweep.output[-3000:]
    text = _text(log)
    assert "the router fit stops at its next epoch's end" in text, text[-3000:]
    stamp = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\]"
    told = re.search(stamp + r".*SIGTERM \(SLURM job", text)
    stopped = re.search(stamp + r".*router fit stopped by SIGTERM after epoch (\d+) \(last.ckpt in", text)
    assert told and stopped, text[-3000:]
    secs = [time.mktime(time.strptime(m.group(1).split(",")[0], "%Y-%m-%d %H:%M:%S")) for m in (told, stopped)]
    assert secs[1] - secs[0] <= 2, (told.group(0), stopped.group(0))  # at the epoch's end, not SIGKILL's 10 s later
    resumed = re.findall(r"resumed router training from (\S+last\.ckpt) at epoch (\d+) of (\d+)", text)
    assert resumed, text[-3000:]
    epoch = int(resumed[0][1])
    assert epoch == int(stopped.group(2)) + 1 and int(resumed[0][2]) == epochs, (resumed, stopped.group(0))
    assert 0 < epoch < epochs // 2  # most of the fit was still to run: it outlasted the grace period
    print(f"resumed-epoch log line: resumed router training from {resumed[0][0]} at epoch {epoch} of {epochs}")
    assert reference.wait(timeout=TIMEOUT) == 0, _text(local / "outputs" / "local.log")[-3000:]
    assert_same_tree(_tree(on / "reports"), _tree(local / "reports"))


def test_train_sbatch_usr1_checkpoints_requeues_and_resumes(slurm, tmp_path):
    """slurm/README.md: `sbatch slurm/train.sbatch ...` (the job owns USR1, sent 90 s before the time
    limit; here at once with `scancel --signal=USR1`): the job requeues itself, the requeue's SIGTERM
    stops the fit at its epoch's end (after last.ckpt), the rerun resumes from it, and the report equals
    a local run's. (Lightning's auto-requeue, used before, failed this test 1 run in 3: its USR1 handler
    saved a checkpoint inside the epoch's own checkpoint save.)"""
    args = [*GENERIC, "debug=tiny", "trainer.max_epochs=1000", "trainer.patience=0", "threads=1"]
    on, local = tmp_path / "slurm", tmp_path / "local"
    job = run(slurm, "sbatch", "--parsable", "slurm/train.sbatch", *args, *_paths(on)).stdout.strip()
    log = ROOT / "slurm" / "logs" / f"mogg-train-{job}.out"
    try:
        _wait("the fit's first last.ckpt", lambda: list((on / "checkpoints").rglob("last.ckpt")), timeout=300, every=0.2)
        time.sleep(1.0)
        run(slurm, "scancel", "--signal=USR1", job)
        py(slurm, "train.py", "trainer.requeue=job", "trainer.checkpoint_every=1", "evaluate_after=true", *args,
           *_paths(local))  # what train.sbatch runs, here, uninterrupted
        _wait("the requeued job", lambda: not _state(slurm, job), timeout=TIMEOUT, every=2)
        text = _text(log)
    finally:
        if log.exists():
            shutil.move(log, tmp_path / log.name)  # kept with the test's files, out of the repository
    assert f"SIGUSR1: asking SLURM to requeue job {job}" in text and "router fit stopped by SIGTERM" in text, \
        text[-3000:]
    assert "Traceback" not in text and "Error executing job" not in text, text[-3000:]
    resumed = re.findall(r"resumed router training from \S+last\.ckpt at epoch (\d+) of 1000", text)
    assert resumed and 0 < int(resumed[0]) < 500, text[-3000:]
    assert "report written to" in text
    assert_same_tree(_tree(on / "reports"), _tree(local / "reports"))


# --------------------------------------------------------------------------- the scale rehearsal
def test_rehearsal_through_the_scheduler_measures_every_task(slurm, mirage, tmp_path):
    """docs/benchmarks.md: `scripts/rehearse_scale.py --scheduler slurm` builds through the documented
    launcher (the shard array, then the merge as a sweep of one task) and reads each task's wall, CPU
    and peak RSS from sacct; the merged ladder equals the local mode's (one process per task) file for file."""
    common = ["--data-dir", str(mirage.parent), "--sentences", "2e4", "--shards", "2", "--questions", "20", "--no-bm25s"]
    out = {}
    for mode in ("slurm", "local"):
        py(slurm, "scripts/rehearse_scale.py", *common, "--scheduler", mode, "--work", str(tmp_path / mode),
           "--out", str(tmp_path / f"{mode}.json"))
        out[mode] = json.loads((tmp_path / f"{mode}.json").read_text())
    got = out["slurm"]
    assert got["scheduler"] == "slurm" and len(got["shard_tasks"]) == 2
    for task in [*got["shard_tasks"], got["merge"]]:
        assert task["state"] == "COMPLETED" and task["wall_s"] > 0 and task["cpu_s"] > 0
        assert 50 < task["peak_rss_mb"] < 4096  # sampled by the cluster's accounting (jobacct_gather/linux)
    assert got["merge"]["chunks"] == out["local"]["merge"]["chunks"] and got["search"]["rc"] == 0
    # one ladder each, keyed by its own corpus file's path: the payload files are compared
    files = {m: {p.name: p.read_bytes() for (d,) in [list((tmp_path / m / "artifacts" / "ladder").iterdir())]
                 for p in d.iterdir() if p.name != "manifest.json"} for m in out}
    assert "units.jsonl" in files["slurm"]
    assert_same_tree(files["slurm"], files["local"])
