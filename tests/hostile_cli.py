"""Hostile cases of issue 59 (the command lines): a command writing over its own input, questions
without a searchable word, full and read-only disks, unchecked script flags, and ``evaluate.py -m``
with one job. :func:`cli_cases` is a group of ``hostile_cases.case_groups``.

Router directories are the three deployed kinds of one run, trained once per session
(``hostile_shared._dirs``). A full or read-only disk is simulated in this process (the tests run
as root, so a chmod would not refuse anything): :func:`refusing_disk` makes every write under a
folder (a new folder, a file opened for writing, a rename into it) raise the errno a full or
read-only file system gives. Scripts run as subprocesses (``python scripts/<name>.py``, memory
capped) with a deadline: a flag that must be refused at once and is still running at the deadline
was accepted (a silent result).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from hostile_runs import (
    BASE,
    CLIFailed,
    Crashed,
    LostResult,
    SilentWrong,
    _shared,
    _with_ckpt,
    cli,
)
from hostile_shared import _dirs

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"id": "q1", "question": "Is aspirin an antiplatelet drug?", "options": {"A": "yes", "B": "no"},
         "answer": "A", "gold_evidence": ["Aspirin inhibits platelet aggregation."]},
        {"id": "q2", "question": "Does metformin lower blood glucose?", "options": {"A": "yes", "B": "no"},
         "answer": "A"}]
STOPWORDS_ONLY = "what is the of and to in?"


# ------------------------------------------------------------------------------------------------
# helpers


def route_main(args: list[str]) -> tuple[int, str, str]:
    """``mogg-route ARGS`` in this process: (exit status, stdout, stderr)."""
    from mogg.run.route import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(args)
        except SystemExit as e:  # argparse's own refusal
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def _refused(rc: int, err: str, *must: str) -> None:
    """Raise CLIFailed on a one-line refusal naming every part of ``must`` (else a CLIFailed the
    replay reads as unclear), RuntimeError on a traceback; return on success."""
    if rc == 0:
        return
    if "Traceback (most recent call last)" in err or rc != 2:
        raise RuntimeError(f"exit {rc}: {err[-600:]}")
    lines = [x for x in err.strip().splitlines() if "error" in x.lower()] or err.strip().splitlines() or [""]
    line = lines[-1]
    missing = [m for m in must if m not in line]
    # the replay reads a line without its expected words as unclear: they are not repeated here
    raise CLIFailed(line if not missing else f"(unclear: lacks {len(missing)} of the expected words) {line[:300]}")


def run_script(argv: list[str], tmp: Path, timeout: float = 40.0, memory: int | None = None) -> tuple[int, str]:
    """``python ARGV`` in ``tmp`` (``memory``: its address space in bytes): (exit status, output).
    Raises SilentWrong when it still runs after ``timeout`` s (a flag to refuse at once was taken)."""
    def limits():
        if memory is not None:  # an input read whole fails in this process, not on the shared machine
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, *argv], cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, preexec_fn=limits, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the script and the jobs it started
        p.communicate()
        raise SilentWrong(f"{' '.join(argv)}: still working after {timeout:.0f} s; the flag was accepted") from None
    text = out.decode(errors="replace")
    if p.returncode < 0:
        raise Crashed(f"{' '.join(argv)}: killed by signal {-p.returncode}: {text[-300:]}")
    return p.returncode, text


def flag_refused(argv: list[str], flag: str, timeout: float = 40.0, memory: int | None = None) -> Callable[[Path], None]:
    """A case: ``python ARGV`` must refuse ``flag`` in one line (argparse's ``error:``), at once."""
    def run(tmp: Path) -> None:
        rc, text = run_script([a.replace("{tmp}", str(tmp)) for a in argv], tmp, timeout, memory)
        _refused(rc, text, flag)
    return run


@contextlib.contextmanager
def refusing_disk(root: Path, code: int = errno.ENOSPC, at_publish: bool = False) -> Iterator[None]:
    """Every write under ``root`` fails with ``code`` (ENOSPC: full; EROFS: read-only), as the file
    system would: a new folder, a file opened (or created) for writing, a rename into it.
    ``at_publish``: only the renames fail (the disk fills up while the files are written: what
    was staged is known, and the error says how much)."""
    import builtins

    root_s = os.path.abspath(root)

    def under(p) -> bool:
        try:
            s = os.path.abspath(os.fsdecode(p))
        except TypeError:  # a file descriptor
            return False
        return s == root_s or s.startswith(root_s + os.sep)

    def fail(p):
        raise OSError(code, os.strerror(code), os.fsdecode(p))

    real = {"mkdir": os.mkdir, "open": os.open, "replace": os.replace, "rename": os.rename, "bopen": builtins.open}

    def mkdir(p, *a, **k):
        return fail(p) if under(p) else real["mkdir"](p, *a, **k)

    def os_open(p, flags, *a, **k):
        writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        return fail(p) if writes and under(p) else real["open"](p, flags, *a, **k)

    def replace(src, dst, *a, **k):
        return fail(dst) if under(dst) else real["replace"](src, dst, *a, **k)

    def rename(src, dst, *a, **k):
        return fail(dst) if under(dst) else real["rename"](src, dst, *a, **k)

    def b_open(file, mode="r", *a, **k):
        if any(c in mode for c in "wax+") and under(file):
            fail(file)
        return real["bopen"](file, mode, *a, **k)

    os.replace, os.rename = replace, rename
    if not at_publish:
        os.mkdir, os.open = mkdir, os_open
        builtins.open = io.open = b_open
    try:
        yield
    finally:
        os.mkdir, os.open, os.replace, os.rename = real["mkdir"], real["open"], real["replace"], real["rename"]
        builtins.open = io.open = real["bopen"]


# ------------------------------------------------------------------------------------------------
# 1. no command writes over one of its inputs


def _questions(tmp: Path) -> Path:
    q = tmp / "q.jsonl"
    q.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return q


# the shared directories were trained on the shipped example, outside the data folder: routing names
# its corpus (mogg.run.route_corpus)
EXAMPLE_CORPUS = ("--corpus", str(Path(__file__).resolve().parents[1] / "examples" / "generic" / "corpus.jsonl"))


def _out_over_input(target: Callable[[Path, Path, Path], Path], sub: str = "final",
                    flags: tuple[str, ...] = ()) -> Callable[[Path], None]:
    """``mogg-route --questions q.jsonl --out X`` with X = ``target(tmp, q, router_dir)`` (an input):
    refused, and every input byte for byte as before."""
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        q = _questions(tmp)
        out = target(tmp, q, d)
        watched = [q] + sorted(p for p in d.rglob("*") if p.is_file())
        before = {p: p.read_bytes() for p in watched}
        rc, _, err = route_main(["--checkpoint", str(d), "--artifacts", str(_shared("artifacts")), *EXAMPLE_CORPUS, *flags,
                                 "--questions", str(q), "--out", str(out)])
        changed = [str(p.relative_to(tmp)) for p in watched if not p.is_file() or p.read_bytes() != before[p]]
        if changed:
            raise LostResult(f"--out {out.name} wrote over the input(s) {changed} (exit {rc})")
        _refused(rc, err, "--out")
    return run


def _symlink_to(tmp: Path, q: Path, d: Path) -> Path:
    (tmp / "routed.jsonl").symlink_to(q)
    return tmp / "routed.jsonl"


def _hardlink_to(tmp: Path, q: Path, d: Path) -> Path:
    os.link(q, tmp / "routed.jsonl")
    return tmp / "routed.jsonl"


def _loss_cases() -> dict[str, tuple[Callable, str, str]]:
    return {
        "mogg-route --out = --questions": (_out_over_input(lambda t, q, d: q), "error", "--out"),
        "mogg-route --out = --questions (another spelling)": (
            _out_over_input(lambda t, q, d: t / "." / ".." / t.name / q.name), "error", "--out"),
        "mogg-route --out a symlink to --questions": (_out_over_input(_symlink_to), "error", "--out"),
        "mogg-route --out a hard link to --questions": (_out_over_input(_hardlink_to), "error", "--out"),
        "mogg-route --out = the router's router.json": (_out_over_input(lambda t, q, d: d / "router.json"), "error",
                                                         "--out"),
        "mogg-route --out = the selector's deploy.json": (
            _out_over_input(lambda t, q, d: d / "deploy.json", "selector/final", ("--budget", "128")), "error", "--out"),
    }


# ------------------------------------------------------------------------------------------------
# 2. questions without a searchable word


def _stopwords_only(sub: str, flags: tuple[str, ...] = ()) -> Callable[[Path], None]:
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        q = tmp / "q.txt"
        q.write_text(f"{STOPWORDS_ONLY}\nIs aspirin an antiplatelet drug?\n")
        rc, out, err = route_main(["--checkpoint", str(d), "--artifacts", str(_shared("artifacts")), *EXAMPLE_CORPUS, *flags, str(q)])
        _refused(rc, err)
        recs = [json.loads(x) for x in out.splitlines()]
        if len(recs) != 2 or not recs[0].get("empty") or recs[1].get("empty") or not recs[1]["context"]:
            got = [(r.get("empty"), len(r.get("context", []))) for r in recs]
            raise SilentWrong(f"a stopword-only question got no empty record beside the other ((empty, context) {got})")
    return run


def _empty_cases() -> dict[str, tuple[Callable, str, str]]:
    b = ("--budget", "128")
    return {
        "stopword-only question (level router)": (_stopwords_only("final"), "ok", ""),
        "stopword-only question (action router)": (_stopwords_only("actions/final", b), "ok", ""),
        "stopword-only question (evidence selector)": (_stopwords_only("selector/final", b), "ok", ""),
    }


# ------------------------------------------------------------------------------------------------
# 3. full or read-only disks: one line naming the path and the bytes


def _disk_cli(script: str, args: Callable[[Path], list[str]], root: Callable[[Path], Path], code: int,
              ckpt: bool = False) -> Callable[[Path], None]:
    """``script ARGS`` with the disk under ``root`` refusing: read-only (or not permitted) from the
    first folder, full when the written files are published. One line naming the folder and, for a
    full disk, the bytes it needed."""
    full = code == errno.ENOSPC

    def run(tmp: Path) -> None:
        if ckpt:
            _with_ckpt(tmp, "default", [])
        with refusing_disk(root(tmp), code, at_publish=full):
            rc, text = cli(script, args(tmp), tmp)
        _refused(rc, text, str(root(tmp)), "needs at least" if full else "bytes free")
    return run


def _route_out_full_at_publish(tmp: Path) -> None:
    """The folder exists and takes the probe; the disk fills while the records are written."""
    d = _dirs(tmp) / "final"
    q = _questions(tmp)
    (tmp / "out").mkdir()
    with refusing_disk(tmp / "out", errno.ENOSPC, at_publish=True):
        rc, _, err = route_main(["--checkpoint", str(d), "--artifacts", str(_shared("artifacts")), *EXAMPLE_CORPUS, "--questions", str(q),
                                 "--out", str(tmp / "out" / "routed.jsonl")])
    _refused(rc, err, str(tmp / "out" / "routed.jsonl"), "needs at least")


def _disk_cases() -> dict[str, tuple[Callable, str, str]]:
    return {
        "paths.checkpoints on a read-only disk (train.py)": (
            _disk_cli("train.py", lambda t: BASE, lambda t: t / "ckpt", errno.EROFS), "error", "bytes"),
        "paths.checkpoints on a full disk (train.py)": (
            _disk_cli("train.py", lambda t: BASE, lambda t: t / "ckpt", errno.ENOSPC), "error", "bytes"),
        "paths.artifacts on a full disk (train.py)": (
            _disk_cli("train.py", lambda t: [*BASE, f"paths.artifacts={t / 'art'}"], lambda t: t / "art",
                      errno.ENOSPC), "error", "bytes"),
        "paths.artifacts on a read-only disk (train.py)": (
            _disk_cli("train.py", lambda t: [*BASE, f"paths.artifacts={t / 'art'}"], lambda t: t / "art",
                      errno.EROFS), "error", "bytes"),
        "report_dir on a full disk (evaluate.py)": (
            _disk_cli("evaluate.py", lambda t: BASE, lambda t: t / "reports", errno.ENOSPC, ckpt=True), "error", "bytes"),
        "report_dir not writable (evaluate.py, EACCES)": (
            _disk_cli("evaluate.py", lambda t: BASE, lambda t: t / "reports", errno.EACCES, ckpt=True), "error", "bytes"),
        "mogg-route --out on a full disk (at publishing)": (_route_out_full_at_publish, "error", "bytes"),
    }


# ------------------------------------------------------------------------------------------------
# 4. every script and CLI flag checked before any work


def _huge_questions(tmp: Path) -> None:
    big = tmp / "huge.jsonl"
    with open(big, "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB of NULs, no disk used
    rc, text = run_script(["-m", "mogg.run.route", "--checkpoint", str(tmp), "--questions", str(big)], tmp, 40, 1 << 30)
    _refused(rc, text, "--questions")


def _flag_cases() -> dict[str, tuple[Callable, str, str]]:
    s = str(ROOT / "scripts")
    data = ["--data-dir", os.environ.get("MOGG_DATA_DIR") or str(ROOT / "data")]
    return {
        "bench_sweep.py --jobs 0": (flag_refused([f"{s}/bench_sweep.py", "--jobs", "0", "--experiment", "generic_example",
                                                 "--extra", "debug=tiny"], "--jobs"), "error", "--jobs"),
        "bench_merge.py --shards 0": (flag_refused([f"{s}/bench_merge.py", "--shards", "0", *data], "--shards"), "error",
                                      "--shards"),
        "bench_merge.py --words 0": (flag_refused([f"{s}/bench_merge.py", "--words", "0", "--shards", "1", *data],
                                                  "--words"), "error", "--words"),
        "bench_scale.py --words nan": (flag_refused([f"{s}/bench_scale.py", "--words", "nan", *data,
                                                     "--out", "{tmp}/s.json"], "--words"), "error", "--words"),
        "bench_scale.py --words -5": (flag_refused([f"{s}/bench_scale.py", "--words", "-5", *data,
                                                    "--out", "{tmp}/s.json"], "--words"), "error", "--words"),
        "bench_main.py --ref <missing>": (flag_refused([f"{s}/bench_main.py", "--ref", "{tmp}/no_checkout",
                                                        "--experiment", "generic_example"], "--ref"), "error", "--ref"),
        "newcomer.py --max-silence -1": (flag_refused([f"{s}/newcomer.py", "--list", "--max-silence", "-1"],
                                                      "--max-silence"), "error", "--max-silence"),
        "mogg-prepare --timeout -1": (flag_refused(["-m", "mogg.data.prepare", "--timeout", "-1", "--data-dir",
                                                    "{tmp}/data", "--no-progress"], "--timeout"), "error", "--timeout"),
        "mogg-route --questions /dev/zero": (flag_refused(["-m", "mogg.run.route", "--checkpoint", "{tmp}",
                                                           "--questions", "/dev/zero"], "--questions", memory=1 << 30), "error",
                                             "--questions"),
        "mogg-route --questions a 3 GiB file": (_huge_questions, "error", "--questions"),
    }


# ------------------------------------------------------------------------------------------------
# 5. evaluate.py -m with a single job


def _evaluate_single_job_sweep(tmp: Path) -> None:
    _with_ckpt(tmp, "default", [])
    rc, text = cli("evaluate.py", ["-m", *BASE], tmp)
    if rc != 0:
        raise LostResult(f"evaluate.py -m with one job did not find its trained run (exit {rc}): "
                         f"{text.strip().splitlines()[-1] if text.strip() else ''}")
    if not (tmp / "reports" / "debug" / "metrics.json").is_file():
        got = sorted(p.name for p in (tmp / "reports").iterdir()) if (tmp / "reports").is_dir() else []
        raise LostResult(f"evaluate.py -m with one job wrote reports {got}, not the run's own 'debug'")


def cli_cases() -> list:
    """Every case above as ``hostile_cases.Case`` rows."""
    from hostile_cases import Case

    out = []
    for surface, cases in (("commands' own inputs (59)", _loss_cases()), ("stopword-only questions (59)", _empty_cases()),
                           ("full or read-only disks (59)", _disk_cases()), ("script flags (59)", _flag_cases()),
                           ("evaluate -m, one job (59)", {"evaluate.py -m with one job": (
                               _evaluate_single_job_sweep, "ok", "")})):
        out += [Case(surface, name, run, expect, names) for name, (run, expect, names) in cases.items()]
    return out
