"""A newcomer's path, run for real: the README's command 1, then every command of the README's
headline section, then the first bash code block of every page under docs/ and each block a page marks
``<!-- newcomer -->`` (:func:`marked_blocks`), each as written (bash, from the repository root, the README's venv
active), with its exit status and wall time.

    python3 scripts/newcomer.py                  # in a fresh clone with ../shared beside it (~20 min)
    python3 scripts/newcomer.py --skip-install   # the venv exists: command 1 without its install part
    python3 scripts/newcomer.py --list           # only print what would run
    python3 scripts/newcomer.py --write-times    # also write the table into docs/benchmarks.md

Every step runs twice: cold (in a fresh working tree, :func:`cold_tree`: the clone linked in with
empty artifacts, checkpoints and reports folders; the prepared data is kept) and warm (the same
command again in that tree, finding what the cold run built), so the table gives both times side by
side: a time measured with the folds cached and one measured from nothing are never one number
(issue 61). A step that only reads the runs of the step before it (the README's ``collect``) runs in
that step's tree (:func:`reads_runs`). ``--runs cold`` or ``--runs warm`` runs one of them (warm alone: in the clone, with its
own artifacts and checkpoints, as they are).

Each step's output is streamed and the longest silence (seconds between two pieces of output, the
start and the exit included) is measured, with progress bars on as on a terminal
(``MOGG_PROGRESS=1``; ``--batch`` leaves them off, as in a cluster job's log). The table printed at
the end (step, command, exit, cold and warm wall time, longest silence) is the one source of the documented
commands' run times: ``--write-times`` puts it between the markers of docs/benchmarks.md's "Run
times", and the README and docs cite it instead of restating a time beside one of these commands
(:func:`restated_times` lists any that do; the exit status counts them).

Exit status 0 only if every block exits 0, no step is silent for more than ``--max-silence``
seconds and no time is restated. Not a test (minutes of work); ``tests/docs/test_docs.py`` checks that
these blocks are found and compose, and that no time is restated.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S)


def first_command_block(text: str) -> str | None:
    """A docs page's first code block marked ``bash`` or ``sh``: a block without a language is text
    (docs/design.md's layout), not commands to run."""
    found = re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S)
    return found[0] if found else None


# a page marks a further block a newcomer runs (a first try the page's first block is not) with this comment on the
# line before it: the run-times table then measures it too (issue 58: a transfer run a newcomer can afford)
MARK = "<!-- newcomer -->"


def marked_blocks(text: str) -> list[str]:
    """A docs page's ``bash`` blocks that follow :data:`MARK` on the line before them."""
    return re.findall(rf"^{re.escape(MARK)}\n```bash\n(.*?)```", text, re.S | re.M)


def _section(text: str, heading: str) -> str:
    m = re.search(rf"^## {re.escape(heading)}.*?$(.*?)(?=^## |\Z)", text, re.S | re.M)
    if m is None:
        raise SystemExit(f"README.md has no section '## {heading}'")
    return m.group(1)


def command_one(readme: str, skip_install: bool) -> str:
    """README's command 1: the lines of the first block of "Two commands" up to "# 2."."""
    block = _blocks(_section(readme, "Two commands"))[0]
    one = block.split("# 2.")[0]
    lines = [ln for ln in re.sub(r"\\\n\s*", " ", one).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    cmd = " ".join(lines)
    if skip_install:  # keep what follows the install: prepare + train + evaluate
        cmd = cmd[cmd.index("mogg-prepare"):] if "mogg-prepare" in cmd else cmd
    return cmd


INSTALL = "README command 1, install"


def plan(skip_install: bool) -> list[tuple[str, str]]:
    """(where, bash script) of every step, in order. Command 1's install part (venv + pip) is a step of
    its own (:data:`INSTALL`), run once in the clone: the venv is the clone's, which every cold tree
    links in; made inside a cold tree, it went with the tree and every later step found no venv."""
    readme = (ROOT / "README.md").read_text()
    one, rest = command_one(readme, False), command_one(readme, True)
    steps = [(INSTALL, one[:len(one) - len(rest)].strip().removesuffix("&&").strip())] if not skip_install and rest != one else []
    steps.append(("README command 1", rest))
    for block in _blocks(_section(readme, "Headline")):
        for line in block.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                steps.append(("README headline", line.split("  #")[0].strip()))
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text()
        block = first_command_block(text)
        if block:
            steps.append((f"docs/{page.name} (first block)", block))
        steps += [(f"docs/{page.name} (a newcomer's block)", b) for b in marked_blocks(text) if b != block]
    return steps


# a time stated beside a command: "~8 s", "~2.5 min", "~1 h"
_TIME = re.compile(r"(?<![\w.:])~?\s?\d+(?:\.\d+)?\s?(?:s|sec|seconds?|min|minutes?|h|hours?)\b")
BEGIN, END = "<!-- run-times:begin (scripts/newcomer.py --write-times) -->", "<!-- run-times:end -->"


def restated_times(steps: list[tuple[str, str]] | None = None, pages: list[Path] | None = None) -> list[str]:
    """``page:line`` of every line in README.md and docs/ (docs/benchmarks.md aside: it holds the
    tables) that states a run time beside one of the commands this script times, or in the comment of
    any command in a code block: docs/benchmarks.md's run-time tables are their one source."""
    steps = plan(False) if steps is None else steps
    readme = (ROOT / "README.md").read_text()
    raw = _blocks(_section(readme, "Two commands"))[0].split("# 2.")[0]  # command 1 as written, line by line
    commands = {ln.strip().split("  #")[0].strip() for _, script in [*steps, ("", raw)] for ln in script.splitlines()}
    commands = {c for c in commands if c and not c.startswith("#") and len(c) > 12}
    out = []
    for page in pages if pages is not None else [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if page.name == "benchmarks.md":
            continue
        lines = page.read_text().splitlines()
        block = False
        for i, ln in enumerate(lines):
            block = block != ln.startswith("```")
            near = " ".join(lines[max(i - 2, 0):i + 3])  # a command's comment may wrap onto its neighbours
            # any command's comment in a code block, or any line beside one of the commands timed here
            comment = ln.split("  #", 1)[1] if block and "  #" in ln and not ln.lstrip().startswith("#") else ""
            if _TIME.search(comment) or (_TIME.search(ln) and any(c in near for c in commands)):
                out.append(f"{page.name if page.parent.name != 'docs' else 'docs/' + page.name}:{i + 1}: {ln.strip()[:100]}")
    return out


def run_streamed(script: str, env: dict, cwd: Path | None = None) -> tuple[int, float, float, float]:
    """Run ``script`` with bash in ``cwd`` (the repository root, or a cold run's tree), echoing its output as it comes; (exit
    status, wall seconds, longest silence in seconds: between two pieces of output, from the start
    to the first and from the last to the exit, CPU seconds: user + system of every process the step
    ran and waited for). On a busy machine the wall time grows with the load; the CPU time hardly."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = last = time.perf_counter()
    gap = 0.0
    proc = subprocess.Popen(["bash", "-c", script], cwd=cwd or ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    while True:
        chunk = proc.stdout.read1(65536)  # whatever is there: a bar's carriage-return update counts
        now = time.perf_counter()
        if not chunk:
            break
        gap, last = max(gap, now - last), now
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
    rc = proc.wait()
    end = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, end - t0, max(gap, end - last), cpu


RUNS = ("cold", "warm")
HEADER = "| step | command | exit | cold | warm | longest silence |"


def _clock(dt: float | None) -> str:
    return "-" if dt is None else f"{dt // 60:.0f}:{dt % 60:04.1f}"


def _time(run: tuple | None) -> str:
    """A run's wall time, with its CPU time in brackets where measured: ``1:35.0 (CPU 0:52)``."""
    if run is None:
        return "-"
    cpu = f" (CPU {run[3] // 60:.0f}:{run[3] % 60:02.0f})" if len(run) > 3 else ""
    return _clock(run[1]) + cpu


def _table(rows) -> list[str]:
    """``rows``: (step, command, {run: (exit status, wall seconds, longest silence[, CPU seconds])}) with
    a run of :data:`RUNS` each, or fewer; a run not made is ``-``. Exit: one status where the runs agree."""
    md = [HEADER, "|---|---|---|---|---|---|"]
    for where, cmd, runs in rows:
        codes = [str(runs[r][0]) for r in RUNS if r in runs]
        rc = codes[0] if len(set(codes)) == 1 else ", ".join(f"{r} {runs[r][0]}" for r in RUNS if r in runs)
        quiet = max(runs[r][2] for r in runs)
        md.append(f"| {where} | `{cmd}` | {rc} | {_time(runs.get('cold'))} | {_time(runs.get('warm'))} | {quiet:.0f} s |")
    return md


# the folders a run writes: a cold run's working tree has them empty, everything else of the clone linked in
WRITTEN = ("artifacts", "checkpoints", "reports", "outputs", "multirun", "answers", "lightning_logs", "wandb")
SCRATCH = ".newcomer"  # under the clone (git-ignored): its cold trees


def cold_tree(root: Path | None = None) -> Path:
    """A fresh working tree for a cold run, ``<clone>/.newcomer/cold-*/``: every top-level entry of the
    clone linked in except the folders runs write (:data:`WRITTEN`, empty there), and ``../shared``
    beside it linked to the clone's. A command then finds nothing built, and one that names a router
    directory by path (``checkpoints/pubmedqa/...``) reads the router its own cold run trained: with
    ``MOGG_CHECKPOINTS`` pointing elsewhere it read the clone's, or none (``docs/routers.md`` exited 2)."""
    import tempfile

    root = ROOT if root is None else root
    base = root / SCRATCH
    base.mkdir(exist_ok=True)
    if (root.parent / "shared").exists() and not (base / "shared").exists():
        (base / "shared").symlink_to(root.parent / "shared")  # the documented `../shared` of a clone
    tree = Path(tempfile.mkdtemp(prefix="cold-", dir=base))
    (root / "data").mkdir(exist_ok=True)  # the prepared data is kept: what command 1 prepares lands in the clone
    for entry in root.iterdir():
        if entry.name not in (*WRITTEN, SCRATCH):
            (tree / entry.name).symlink_to(entry)
    for name in WRITTEN:
        (tree / name).mkdir()
    return tree


def reads_runs(script: str) -> bool:
    """A step that only reads the runs the step before it wrote (``mogg.evaluation.collect``): it runs
    in that step's tree, cold the first time. In a fresh tree of its own it found no run (exit 2)."""
    return "mogg.evaluation.collect" in script


def run_step(script: str, env: dict, runs: tuple[str, ...], tree: Path | None = None,
             keep: bool = False) -> dict[str, tuple[int, float, float, float]]:
    """``script`` cold (in a fresh working tree, :func:`cold_tree`, or in ``tree`` when given: the tree of
    the step it reads) and/or warm (again in the same one; alone: in the clone, with what it holds): run
    -> (exit status, wall seconds, longest silence, CPU seconds). ``keep``: leave the tree for the next
    step (which reads it), else remove it."""
    import shutil

    out, cwd = {}, ROOT
    if "cold" in runs:
        tree = cwd = tree or cold_tree()
    elif tree is not None:
        cwd = tree
    if tree is not None:
        env = dict(env, MOGG_ARTIFACTS=str(tree / "artifacts"), MOGG_CHECKPOINTS=str(tree / "checkpoints"))
    try:
        for run in runs:
            print(f"--- {run} run", flush=True)
            out[run] = run_streamed(script, env, cwd)
    finally:
        if tree is not None and not keep:
            shutil.rmtree(tree, ignore_errors=True)  # its links only: rmtree does not follow them
    return out


def machine_note(load: tuple[float, float] | None = None) -> str:
    """How busy the machine was: the 1-minute load average at the start and the end of the run, and
    this process's niceness where it is not 0 (a run beside other work, or under ``nice``, is slower
    than one on an idle machine, and its table says so)."""
    parts = []
    if load is not None:
        parts.append(f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end on {os.cpu_count()} cores")
    if os.nice(0):
        parts.append(f"run under nice {os.nice(0)}")
    return "; ".join(parts)


def write_times(rows, batch: bool, skip_install: bool = False, page: Path | None = None,
                load: tuple[float, float] | None = None) -> None:
    """Replace the run-times table of docs/benchmarks.md (or ``page``; between its markers) with ``rows``;
    ``load``: the machine's load average at the run's start and end (:func:`machine_note`)."""
    page = page or ROOT / "docs" / "benchmarks.md"
    text = page.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"docs/benchmarks.md lacks the markers {BEGIN} ... {END}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = [f"Measured by `python3 scripts/newcomer.py --write-times` on {datetime.date.today()}, commit {commit}, "
            f"{os.cpu_count()} cores ({platform.machine()}), progress bars {'off (batch)' if batch else 'on'}"
            + ("; command 1 without its install (`--skip-install`)" if skip_install else "")
            + "".join(f"; {n}" for n in [machine_note(load)] if n)
            + ("" if skip_install else "; the install once, in the clone (its time in the cold column)")
            + "; cold: fresh artifacts and checkpoints directories (the data prepared), warm: the same command "
              "again; each time the wall clock (the CPU time of the step's processes: on a busy machine the wall "
              "time grows, the CPU time hardly):", ""]
    a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
    page.write_text(text[:a] + "\n" + "\n".join(head + _table(rows)) + "\n" + text[b:])


def _seconds(text: str) -> float:
    """``--max-silence``: a finite number of seconds > 0. Checked here, not with mogg.core.flags: this
    script runs in a fresh clone before mogg is installed."""
    import math

    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(s) and s > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number of seconds > 0")
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-install", action="store_true", help="command 1 without creating the venv and installing")
    ap.add_argument("--list", action="store_true", help="print the steps, run nothing")
    ap.add_argument("--batch", action="store_true", help="progress bars off, as in a batch job's log")
    ap.add_argument("--max-silence", type=_seconds, default=30.0, help="seconds a step may print nothing")
    ap.add_argument("--write-times", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--runs", choices=["cold,warm", "cold", "warm"], default="cold,warm",
                    help="each step cold (fresh artifacts and checkpoints), then warm (again); or one of them")
    args = ap.parse_args(argv)
    steps = plan(args.skip_install)
    restated = restated_times(plan(False))
    env = dict(os.environ, MOGG_PROGRESS="0" if args.batch else "1")
    load0 = os.getloadavg()[0]
    rows, kept = [], None
    for i, (where, script) in enumerate(steps):
        # a step whose successor reads its runs keeps its tree for it (cold_tree, once per pair)
        reads = reads_runs(script) and kept is not None
        keep = i + 1 < len(steps) and reads_runs(steps[i + 1][1]) and not args.list
        tree = kept if reads else (cold_tree() if keep and "cold" in args.runs else None)
        print(f"\n=== {where}\n{script.strip()}", flush=True)
        if args.list:
            continue
        # on its own line: "activate && <block>" bound the activation to the block's first command
        # (a block starting "# comment" then "server &" activated the venv in the background job only)
        if where == INSTALL:  # once, in the clone (neither cold nor warm: it builds no artifact)
            runs = {"cold": run_streamed(f"set -eo pipefail\n{script}", env, ROOT)}
        else:
            runs = run_step(f"set -eo pipefail\n. .venv/bin/activate\n{script}", env, tuple(args.runs.split(",")),
                            tree=tree, keep=keep)
            kept = tree if keep else None
        rows.append((where, script.strip().splitlines()[0][:70], runs))
        for run, (rc, dt, quiet, cpu) in runs.items():
            print(f"--- {run}: exit {rc} in {dt:.0f} s (CPU {cpu:.0f} s), longest silence {quiet:.0f} s", flush=True)
    for r in restated:
        print(f"restated run time (cite docs/benchmarks.md's 'Run times' instead): {r}")
    if args.list:
        return 0
    print("\n" + "\n".join(_table(rows)))
    # the bar holds the project's commands: pip's own install phase prints nothing while it unpacks
    # (torch's wheel: ~60 s here), so the install step's silence is shown, not held to the bar
    quiet = [(max(r[2] for r in runs.values()), where, cmd) for where, cmd, runs in rows if where != INSTALL]
    worst = max(quiet)
    print(f"\nlongest silence: {worst[0]:.0f} s ({worst[1]}: {worst[2]}); bar {args.max_silence:.0f} s"
          + "".join(f" (the install, pip's, not held to it: {max(r[2] for r in runs.values()):.0f} s)"
                    for where, _, runs in rows if where == INSTALL))
    if args.write_times:
        write_times(rows, args.batch, args.skip_install, load=(load0, os.getloadavg()[0]))
    ok = all(rc == 0 for *_, runs in rows for rc, *_ in runs.values()) and worst[0] <= args.max_silence \
        and not restated
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
