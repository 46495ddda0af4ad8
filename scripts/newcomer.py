"""A newcomer's path, run for real: the README's command 1, then every command of the README's
headline section, then the first code block of every page under docs/, each as written (bash,
from the repository root, the README's venv active), with its exit status and wall time.

    python3 scripts/newcomer.py                  # in a fresh clone with ../shared beside it (~20 min)
    python3 scripts/newcomer.py --skip-install   # the venv exists: command 1 without its install part
    python3 scripts/newcomer.py --list           # only print what would run

Exit status 0 only if every block exits 0. Not a test (minutes of work); ``tests/test_docs.py``
checks that these blocks are found and compose.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S)


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


def plan(skip_install: bool) -> list[tuple[str, str]]:
    """(where, bash script) of every step, in order."""
    readme = (ROOT / "README.md").read_text()
    steps = [("README command 1", command_one(readme, skip_install))]
    for block in _blocks(_section(readme, "Headline")):
        for line in block.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                steps.append(("README headline", line.split("  #")[0].strip()))
    for page in sorted((ROOT / "docs").glob("*.md")):
        blocks = _blocks(page.read_text())
        if blocks:
            steps.append((f"docs/{page.name} (first block)", blocks[0]))
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-install", action="store_true", help="command 1 without creating the venv and installing")
    ap.add_argument("--list", action="store_true", help="print the steps, run nothing")
    args = ap.parse_args(argv)
    steps = plan(args.skip_install)
    rows = []
    for where, script in steps:
        print(f"\n=== {where}\n{script.strip()}", flush=True)
        if args.list:
            continue
        # on its own line: "activate && <block>" bound the activation to the block's first command
        # (a block starting "# comment" then "server &" activated the venv in the background job only)
        venv = "" if where == "README command 1" and not args.skip_install else ". .venv/bin/activate\n"
        t0 = time.perf_counter()
        rc = subprocess.run(["bash", "-c", f"set -eo pipefail\n{venv}{script}"], cwd=ROOT).returncode
        rows.append((where, script.strip().splitlines()[0][:70], rc, time.perf_counter() - t0))
        print(f"--- exit {rc} in {rows[-1][3]:.0f} s", flush=True)
    if args.list:
        return 0
    print("\n| step | command | exit | wall time |\n|---|---|---|---|")
    for where, cmd, rc, dt in rows:
        print(f"| {where} | `{cmd}` | {rc} | {dt // 60:.0f}:{dt % 60:04.1f} |")
    return 0 if all(rc == 0 for _, _, rc, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
