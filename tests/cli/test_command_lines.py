"""Issue 59: the command lines. Every flag is checked before any work, no command writes over one
of its inputs, a full or read-only disk is one line naming the path and the bytes, questions the
retrievers cannot search get empty records, and ``evaluate.py -m`` with one job keeps its run.

Before the fixes: ``bench_sweep.py --jobs 0`` divided by zero after a warm-up training,
``bench_scale.py --words nan``, ``bench_merge.py --shards 0``, ``bench_main.py --ref <missing>``,
``mogg-prepare --timeout -1`` and ``mogg-route --questions /dev/zero`` gave tracebacks,
``newcomer.py --max-silence -1``, ``bench_scale.py --words -5`` and ``bench_merge.py --words 0`` ran;
``mogg-route --out q.jsonl --questions q.jsonl`` replaced the questions with routed records; an
``OSError`` of a full disk was a traceback; a stopword-only question got unrelated sentences from the
selector and silently empty contexts from the other kinds; ``evaluate.py -m`` with one job renamed its
run and found no router. The same cases through the real entry points: ``tests/hostile_cli.py``.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from mogg.core.artifacts import atomic_path, staged_dir, write_artifact
from mogg.core.disk import DiskError, refused_writes
from mogg.core.flags import input_file, positive_float, positive_int, refuse_overwrite, same_file
from mogg.core.runconfig import user_error
from mogg.run.route_paths import EMPTY_REASON, route_with_empty, searchable

S = ROOT / "scripts"


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # a deadline: before the fix some of these started minutes of work
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60, env=env,
                          cwd=cwd or ROOT, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("argv,flag", [
    ([f"{S}/bench_sweep.py", "--jobs", "0"], "--jobs"),
    ([f"{S}/bench_merge.py", "--shards", "0"], "--shards"),
    ([f"{S}/bench_merge.py", "--words", "0"], "--words"),
    ([f"{S}/bench_scale.py", "--words", "nan"], "--words"),
    ([f"{S}/bench_scale.py", "--words", "-5"], "--words"),
    ([f"{S}/bench_main.py", "--ref", "/nonexistent/checkout"], "--ref"),
    ([f"{S}/newcomer.py", "--list", "--max-silence", "-1"], "--max-silence"),
    ([f"{S}/benchmark.py", "--sizes", "100,x"], "--sizes"),
    (["-m", "mogg.data.prepare", "--timeout", "-1"], "--timeout"),
    (["-m", "mogg.data.prepare", "--retries", "-2"], "--retries"),
    (["-m", "mogg.run.route", "--checkpoint", "x", "--questions", "/dev/zero"], "--questions"),
    (["-m", "mogg.run.route", "--checkpoint", "x", "--k", "0"], "--k"),
], ids=lambda v: " ".join(Path(a).name for a in v) if isinstance(v, list) else v)
def test_a_bad_flag_is_one_line_before_any_work(argv, flag, tmp_path):
    p = _run(*argv, cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr[-800:])
    assert "Traceback" not in p.stderr and f"argument {flag}" in p.stderr.strip().splitlines()[-1], p.stderr[-800:]


def test_validators_refuse_what_the_issue_lists_and_take_good_values(tmp_path):
    for bad in ("0", "-3", "1.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="integer"):
            positive_int(bad)
    for bad in ("nan", "inf", "-5", "0", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="number"):
            positive_float(bad)
    assert positive_int("4") == 4 and positive_float("2e6") == 2e6
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # sparse
    with pytest.raises(Exception, match="over the"):
        input_file(str(big))
    with pytest.raises(Exception, match="not a regular file"):
        input_file("/dev/zero")
    with pytest.raises(Exception, match="a folder"):
        input_file(str(tmp_path))
    (tmp_path / "q.txt").write_text("q?\n")
    assert input_file(str(tmp_path / "q.txt")) == str(tmp_path / "q.txt") and input_file("-") == "-"


def test_an_output_naming_an_input_is_refused_in_every_spelling(tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "q?", "answer": "a"}\n')
    (tmp_path / "link.jsonl").symlink_to(q)
    os.link(q, tmp_path / "hard.jsonl")
    router = tmp_path / "router"
    router.mkdir()
    inputs = [("the questions file", q), ("inside the router directory", router)]
    for out in (q, tmp_path / "sub" / ".." / "q.jsonl", tmp_path / "link.jsonl", tmp_path / "hard.jsonl",
                router / "router.json"):
        if out.parent.name == "..":
            (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(ValueError, match="would replace an input"):
            refuse_overwrite(out, inputs)
    refuse_overwrite(tmp_path / "routed.jsonl", inputs)  # a new file: fine
    assert same_file(q, tmp_path / "hard.jsonl") and not same_file(q, tmp_path / "routed.jsonl")


def test_mogg_route_keeps_the_questions_file(tmp_path, capsys):
    from mogg.run.route import main

    q = tmp_path / "q.jsonl"
    text = '{"id": "a", "question": "Is aspirin good?", "options": {"A": "yes"}, "answer": "A"}\n'
    q.write_text(text)
    # refused before the router directory is even looked at (it does not exist here)
    assert main(["--checkpoint", str(tmp_path / "none"), "--questions", str(q), "--out", str(q)]) == 2
    assert "--out" in capsys.readouterr().err and q.read_text() == text


def _enospc_on_replace(monkeypatch, under: Path):
    real = os.replace

    def full(src, dst, *a, **k):
        if str(dst).startswith(str(under)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src), None, str(dst))
        return real(src, dst, *a, **k)
    monkeypatch.setattr(os, "replace", full)


def test_a_full_disk_names_the_path_and_the_bytes_at_every_writer(tmp_path, monkeypatch):
    _enospc_on_replace(monkeypatch, tmp_path / "full")
    (tmp_path / "full").mkdir()
    with pytest.raises(DiskError, match=r"cannot write .*full/out\.jsonl: the disk is full \(needs at least 1,000 bytes"):
        with atomic_path(tmp_path / "full" / "out.jsonl") as tmp:
            tmp.write_text("x" * 1000)
    assert not list((tmp_path / "full").iterdir())  # nothing half-written left
    with pytest.raises(DiskError, match=r"full/report: the disk is full \(needs at least 2,500 bytes"):
        with staged_dir(tmp_path / "full" / "report") as stage:
            (stage / "a.md").write_text("a" * 2000)
            with atomic_path(stage / "b.png") as tmp:  # an inner writer: named as the report, bytes summed
                tmp.write_bytes(b"b" * 500)
    with pytest.raises(DiskError, match=r"full/art: the disk is full \(needs at least \d,\d{3} bytes"):
        write_artifact(tmp_path / "full" / "art", lambda d: (d / "x.bin").write_bytes(b"0" * 1000), {"k": 1})
    assert not list((tmp_path / "full").iterdir())


def test_a_read_only_disk_is_a_user_error_naming_the_path(tmp_path):
    e = OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / "ckpt" / "run"))
    err = user_error(e)
    assert isinstance(err, DiskError) and str(tmp_path / "ckpt" / "run") in str(err) and "read-only" in str(err)
    assert user_error(OSError(errno.EIO, "I/O error")) is None  # not the user's disk: a bug, with its traceback
    # an unrelated file refused inside a writer's block is named as the OS named it (maybe a read)
    with pytest.raises(DiskError, match="cannot use /elsewhere/x: not permitted"):
        with refused_writes(tmp_path / "report"):
            raise OSError(errno.EACCES, "Permission denied", "/elsewhere/x")
    # a folder on the way to what the writer writes (the report's parent) is the writer's own
    with pytest.raises(DiskError, match=f"cannot write {tmp_path / 'reports' / 'run'}: not permitted"):
        with refused_writes(tmp_path / "reports" / "run"):
            raise OSError(errno.EACCES, "Permission denied", str(tmp_path / "reports"))


class _Index:
    def __init__(self, stopwords: bool):
        self.retriever_config = {"k1": 1.5, "stopwords": stopwords}


def test_a_question_of_stop_words_is_not_searchable_and_gets_an_empty_record(caplog):
    assert not searchable("what is the of and to in?") and not searchable("?? \U0001f48a !!") and not searchable("  ")
    assert searchable("Is aspirin an antiplatelet drug?")
    # a BM25 index that kept its stop words can search with them
    assert searchable("what is the of and to in?", _Index(False)) and not searchable("the of", _Index(True))
    qs, ids = ["what is the of and to in?", "Is aspirin good?", ""], ["a", "b", "c"]
    with caplog.at_level(logging.WARNING, logger="mogg.run.route_paths"):
        records, summary = route_with_empty(qs, ids, lambda keep: ([{"id": ids[i], "context": ["x"]} for i in keep],
                                                                   {"n": len(keep)}))
    assert [r.get("empty", False) for r in records] == [True, False, True]
    assert records[0]["reason"] == EMPTY_REASON and records[0]["context"] == [] and summary["n_empty"] == 2
    assert "2 question(s) have no indexable word" in caplog.text


def test_a_sweep_of_one_job_keeps_its_run_name():
    """evaluate.py -m with one job: the map holds the job under its own name (before: no entry, and the
    job was renamed by its overrides, then found no trained router)."""
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    from mogg.run.sweep import _job_id, sweep_run_names

    args = ["experiment=generic_example", "debug=tiny"]
    master = OmegaConf.create({"hydra": {"overrides": {"task": args, "hydra": []}, "job": {"config_name": "config"}}})
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        names = sweep_run_names(master)
    assert names == {_job_id(args): "debug"}


def _pair_messages() -> dict[str, str]:
    from mogg.run.option_pairs import FIT_ALL_IN_SET
    from mogg.run.pipeline import profiles_label

    return {"fit_all": FIT_ALL_IN_SET, "profiles": profiles_label("tfidf")}


@pytest.mark.parametrize("script,args,message", [
    # issue 61: trained for 36 s and then refused the evaluation (router.fit=all trains on every question of
    # the set it would evaluate)
    ("train.py", ["experiment=selector_generic", "router.fit=all", "evaluate_after=true"], "fit_all"),
    ("evaluate.py", ["experiment=selector_generic", "router.fit=all"], "fit_all"),
    # eq. 1 profiles score actions by evidence F1: refused by the pipeline once the ladders were built,
    # searched and every fixed level scored (seconds here, minutes on a full set's first run)
    ("train.py", ["experiment=generic_example", "router=profiles", "labels=tfidf"], "profiles"),
    ("evaluate.py", ["experiment=generic_example", "router=profiles", "labels=tfidf"], "profiles"),
])
def test_an_option_pair_that_cannot_work_is_refused_before_any_work(tmp_path, script, args, message):
    """Through the real entry points, an option pair that cannot work is refused before anything is
    prepared or trained: one line naming the pair, exit 2, nothing written, seconds of the child's CPU."""
    import resource

    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = _run(str(ROOT / script), *args,
             f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
             f"paths.reports={tmp_path / 'r'}", f"hydra.run.dir={tmp_path / 'out'}")  # cwd: the repository (its example)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)  # CPU time: not the machine's load
    assert p.returncode == 2, p.stderr[-800:]
    assert p.stderr.strip().splitlines()[-1] == f"{script}: ValueError: {_pair_messages()[message]}"
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()  # nothing prepared, nothing trained
    # about 3 s of CPU on an idle machine, 5.5 s measured under a loaded CI host (CPU time swells with contention);
    # the refusal it guards came after 36 s of training, so 12 s still tells the two apart
    assert used < 12, f"{used:.1f} s of CPU before the refusal"
