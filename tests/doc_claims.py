"""The README's headline table checked against what its commands produce (issue 61: the README said
the five-seed ``experiment=frontier`` sweep gives "the table above", which holds selector rows that
recipe never writes, and its selector row was bold where the table it came from has no interval).

What is compared, and what is not:

* **Rows, against a real run.** The commands that produce the table are the README headline
  section's code blocks plus the blocks of the ``docs/results.md`` sections that section cites by
  title. Every ``train.py -m`` sweep among them is run for real, scaled down (one job: its first
  experiment, seed 0, ``debug=tiny``, on the shipped example ``examples/generic`` instead of the
  named set), then its ``collect --frontier`` commands as written, over those runs. A README row
  must be a policy row of one of those collected tables. Which rows a recipe writes depends on its
  config (the frontier's router kinds, the collect command's ``--policies``), not on the data set,
  which is why a run on twelve questions answers it. A sweep whose recipe trains on other full sets
  (``loso_*``) is too slow for the default suite: :func:`produced_rows` leaves it out unless asked
  (``heavy=True``) and names it, and such a row is then unverified, not passed.
* **Numbers and bold, against the collected tables as the docs hold them.** The five seeds of three
  full sets take hours, so the numbers are not recomputed: each README cell must equal (before its
  interval) a cell of a five-seed table in ``docs/results.md`` (the ``collect --frontier`` output
  pasted there) for the same set, policy and budget, and be bold exactly when that cell's interval
  against the set's own envelope (its last one) clears 0 as printed: collect's own rule
  (:func:`mogg.evaluation.names.beyond_zero`; ceilings never bold).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the docs' row names -> the report's policy names (regular expressions, matched whole)
DISPLAY = (
    (r"fixed envelope|this set's envelope.*", r"envelope"),
    (r"router policy", r"router"),
    (r"action router alone, unguarded", r"router \(action, unguarded\)"),
    (r"oracle frontier", r"oracle"),
    (r"selector|in-set selector.*", r"selector"),
    (r"route \+ trim", r"route \+ trim"),
    (r"sentence oracle", r"sentence oracle"),
    (r"training sets' envelope", r"training sets' envelope"),
    (r"selector, other sets \(deployed\)|transferred selector \(E: .*; deployed\)", r"transferred selector \(deployed: .*\)"),
    (r"transferred selector \(E: its best candidate's document, lambda: here\)", r"transferred selector \(E document\)"),
    (r"transferred selector \(E: training median\)", r"transferred selector \(E median\)"),
    (r"transferred selector \(E: predicted here\)", r"transferred selector \(E predicted\)"),
)
CEILINGS = ("oracle frontier", "sentence oracle")  # chosen with the test questions' labels: never bold
# recipes that prepare two other full sets: scaled down, loso_selector_pubmedqa took 2 min of CPU (> 10 min
# of wall clock on the loaded 2-core machine), against ~10 s for frontier or selector
HEAVY = re.compile(r"experiment=loso_")
_INTERVAL = re.compile(r"\[([+-]\d+\.\d+), ([+-]\d+\.\d+)\]")


@dataclass(frozen=True)
class Cell:
    set: str
    policy: str  # as the page names it, bold marks removed
    budget: int
    text: str  # the value before any interval, e.g. "0.457 ± 0.004 (64)"
    bold: bool
    intervals: tuple[tuple[float, float], ...]


def policy_pattern(display: str) -> str | None:
    """The report's policy name (a regular expression) behind a docs row name; None for a name no
    report writes (:data:`DISPLAY`)."""
    name = display.replace("*", "").strip()
    return next((policy for shown, policy in DISPLAY if re.fullmatch(shown, name)), None)


def _row_cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_cells(markdown: str) -> list[Cell]:
    """Every cell of the page's frontier tables: a header ``| set (n) | policy | B = 64 | ...`` (or
    ``held-out set (n)``); a row with an empty first column continues the set above."""
    out: list[Cell] = []
    lines = markdown.splitlines()
    for i, head in enumerate(lines):
        cols = _row_cells(head) if head.startswith("|") else []
        if len(cols) < 3 or cols[0] not in ("set (n)", "held-out set (n)") or cols[1] != "policy":
            continue
        budgets = {j: int(c.split("=")[1]) for j, c in enumerate(cols) if re.fullmatch(r"B = \d+", c)}
        current = ""
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            cells = _row_cells(row)
            current = cells[0] or current
            policy = cells[1].replace("**", "").strip()
            for j, b in budgets.items():
                raw = cells[j]
                plain = raw.replace("**", "")
                out.append(Cell(current, policy, b, plain.split(" [")[0].strip(), raw.startswith("**"),
                                tuple((float(lo), float(hi)) for lo, hi in _INTERVAL.findall(plain))))
    return out


def section(markdown: str, heading: str) -> str:
    """The text under the first heading (level 2-4) that starts with ``heading``, up to the next
    heading of any level (a section's own text, its subsections left out; a code block's comment
    lines are not headings)."""
    out, inside, fence = None, False, False
    for line in markdown.splitlines():
        fence = fence != line.startswith("```")
        is_heading = not fence and not line.startswith("```") and re.match(r"#{1,6} ", line)
        if is_heading and inside:
            break
        if is_heading and re.match(rf"#{{2,4}} {re.escape(heading)}", line):
            inside, out = True, []
        elif inside:
            out.append(line)
    if out is None:
        raise KeyError(f"no section {heading!r}")
    return "\n".join(out) + "\n"


def blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S)


def _citing(readme: str) -> list[str]:
    return [ln for b in blocks(section(readme, "Headline")) for ln in b.splitlines()
            if ln.lstrip().startswith("#") and "docs/results.md" in ln]


def cited_line(readme: str) -> str:
    """The comment line of the README's headline commands that cites docs/results.md (the one)."""
    line, = _citing(readme)
    return line + "\n"


def cited_sections(readme: str) -> list[str]:
    """The docs/results.md sections the README's headline commands cite for rows they do not run
    themselves: a quoted title in a comment of its code blocks (``# the selector rows: docs/results.md,
    "Reading inside the chunk"``)."""
    return [q for ln in _citing(readme) for q in re.findall(r'"([^"]+)"', ln)]


def headline_commands(readme: str, results: str | None = None) -> list[str]:
    """The commands that produce the README's headline table: its headline section's code blocks,
    then (given the page ``results``) the blocks of the docs/results.md sections they cite (one command
    a line, comments dropped)."""
    texts = blocks(section(readme, "Headline"))
    texts += [b for h in cited_sections(readme) for b in blocks(section(results, h))] if results is not None else []
    return [ln.split("  #")[0].strip() for t in texts for ln in t.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


GENERIC = ["questions=generic", "questions.path=examples/generic/questions.jsonl", "corpus=jsonl",
           "corpus.allow_gold=true", "corpus.sources.0.paths=examples/generic/corpus.jsonl", "data_name=generic"]


def scaled_down(command: str) -> list[str] | None:
    """A ``python train.py -m ...`` sweep as one small job: its first experiment, seed 0, ``debug=tiny``,
    on the shipped example; ``evaluate_after=true`` kept. None for any other command."""
    argv = shlex.split(command)
    if argv[:2] != ["python", "train.py"] or "-m" not in argv:
        return None
    out = []
    for a in argv[2:]:
        key, eq, value = a.partition("=")
        if a == "-m" or key in ("data", "seed") or key.startswith("run_name"):
            continue
        out.append(f"{key}={value.split(',')[0]}" if eq else a)
    exp = next(a.split("=", 1)[1] for a in out if a.startswith("experiment="))
    return [*out, *GENERIC, "debug=tiny", "seed=0", f"run_name={exp}_generic_s0"]


def collected_policies(md: str) -> set[str]:
    """The policy rows of a ``frontier_summary.md`` that collect wrote."""
    return {_row_cells(ln)[0] for ln in md.splitlines()
            if ln.startswith("| ") and not ln.startswith("| policy") and not ln.startswith("|---")}


def collect_policies(command: str) -> tuple[str, ...]:
    """The rows a ``collect --frontier`` command asks for (its ``--policies``, split as collect splits
    them; the default rows without it), the oracle always among them."""
    from mogg.evaluation.collect_frontier import SHOWN

    argv = shlex.split(command)
    asked = argv[argv.index("--policies") + 1] if "--policies" in argv else None
    if asked is None:
        return (*SHOWN, "oracle")
    sep = ";" if ";" in asked else ","
    return (*(p.strip() for p in asked.split(sep)), "oracle")


def produced_rows(commands: list[str], work: Path, heavy: bool = False) -> tuple[set[str], list[str]]:
    """Run ``commands``' sweeps scaled down (:func:`scaled_down`), then their collect commands as
    written, under ``work``: (the policy rows the collected tables hold, the commands left out). A
    sweep of a :data:`HEAVY` recipe is left out unless ``heavy``, and so is a collect command that
    then finds no run. A sweep or collect that fails raises with its output's tail."""
    reports = work / "reports"
    paths = [f"paths.artifacts={work / 'artifacts'}", f"paths.checkpoints={work / 'checkpoints'}", f"paths.reports={reports}"]
    rows: set[str] = set()
    skipped = []
    for n, cmd in enumerate(commands):
        job = scaled_down(cmd)
        if job is not None:
            if HEAVY.search(cmd) and not heavy:
                skipped.append(cmd)
                continue
            _run([sys.executable, "train.py", *job, *paths, f"hydra.run.dir={work / 'hydra' / str(n)}"], cmd,
                 timeout=3600 if HEAVY.search(cmd) else 600)
        elif "mogg.evaluation.collect" in cmd and "--frontier" in cmd:
            argv = shlex.split(cmd)
            pattern = argv[argv.index("--pattern") + 1]
            if skipped and not list(reports.glob(f"{pattern}/metrics.json")):  # its sweep was left out
                skipped.append(cmd)
                continue
            out = work / "collected" / str(n)
            _run([sys.executable, *argv[1:], "--reports", str(reports), "--out", str(out)], cmd)
            rows |= collected_policies((out / "frontier_summary.md").read_text())
    return rows, skipped


def _run(argv: list[str], what: str, timeout: float = 600) -> None:
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MOGG_PROGRESS": "0"}
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if p.returncode:
        raise AssertionError(f"{what}: exit {p.returncode}\n{p.stderr[-1500:]}")


def unproduced(readme_cells: list[Cell], rows: set[str]) -> list[str]:
    """README rows that no collected table holds (as ``set / policy``)."""
    missing = []
    for c in readme_cells:
        pat = policy_pattern(c.policy)
        if (pat is None or not any(re.fullmatch(pat, r) for r in rows)) and f"{c.set} / {c.policy}" not in missing:
            missing.append(f"{c.set} / {c.policy}")
    return missing


def cell_errors(readme_cells: list[Cell], sources: list[Cell]) -> list[str]:
    """Each README cell against the five-seed tables' cells: the same value for its set, policy and
    budget, and bold exactly when that cell's last interval (against the set's own envelope) clears 0."""
    from mogg.evaluation.names import beyond_zero

    errors = []
    for c in readme_cells:
        pat = policy_pattern(c.policy)
        same = [s for s in sources if s.set == c.set and s.budget == c.budget and policy_pattern(s.policy) == pat]
        where = f"{c.set} / {c.policy} / B = {c.budget}"
        match = [s for s in same if s.text == c.text]
        if pat is None or not same:
            errors.append(f"{where}: " + ("no report writes a row of this name (tests/doc_claims.py DISPLAY)" if pat is None
                                          else "no five-seed table in docs/results.md holds this row"))
        elif not match:
            errors.append(f"{where}: {c.text!r} is in no collected table (there: {', '.join(repr(s.text) for s in same)})")
        else:
            rule = [bool(s.intervals) and c.policy not in CEILINGS and beyond_zero(s.intervals[-1][0]) for s in match]
            if c.bold not in rule:
                why = f"interval {match[0].intervals[-1]}" if match[0].intervals else "no interval against the envelope"
                errors.append(f"{where}: {'bold' if c.bold else 'not bold'}, but the collected table "
                              f"{'bolds' if rule[0] else 'does not bold'} it ({why})")
    return errors
