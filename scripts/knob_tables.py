"""Write docs/configuration.md's knob tables from the dataclass fields that declare the knobs
(issue 61: a knob's default, check and doc are written once, in its field: :mod:`mogg.core.knobs`).

    python scripts/knob_tables.py          # rewrite the tables between the markers
    python scripts/knob_tables.py --check  # exit 1 if they differ from the fields (tests/core/test_knobs.py runs it)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"
BEGIN, END = "<!-- knob tables: scripts/knob_tables.py writes them from the fields -->", "<!-- end of knob tables -->"


def tables() -> str:
    """The three tables, each under a line naming the class that declares its knobs."""
    from mogg.core.knobs import knob_table
    from mogg.run.budget.actions.kind import ActionRouterKind
    from mogg.run.budget.selector.kind import EvidenceSelectorKind
    from mogg.run.frontier_settings import FrontierSettings

    parts = []
    for cls, node, what in ((FrontierSettings, "frontier", "the frontier (`frontier=matched`)"),
                            (ActionRouterKind, "frontier.routers.actions", "the action router"),
                            (EvidenceSelectorKind, "frontier.routers.selector", "the evidence selector")):
        parts.append(f"Knobs of {what}, declared by `{cls.__module__}.{cls.__name__}`:\n\n{knob_table(cls, node)}")
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 where the docs differ")
    args = ap.parse_args(argv)
    text = DOC.read_text()
    block = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not block.search(text):
        print(f"{DOC}: no knob-table markers ({BEGIN} ... {END})", file=sys.stderr)
        return 1
    new = block.sub(lambda _: f"{BEGIN}\n\n{tables()}\n\n{END}", text)
    if args.check:
        if new != text:
            print(f"{DOC.relative_to(ROOT)}: the knob tables differ from the fields; run python scripts/knob_tables.py",
                  file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
