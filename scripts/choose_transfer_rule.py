"""Choose the transfer rule a directory deploys by its worst held-out shape (issue 58): the
candidates' table over the leave-one-shape-out runs (``experiment=loso_shapes``), then the choice
(:mod:`mogg.run.budget.selector.transfer_rule`).

    python train.py -m experiment=loso_shapes heldout=pubmedqa,medmcqa,covidqa,pages seed=0,1,2 evaluate_after=true
    python scripts/choose_transfer_rule.py --pattern 'loso_shapes_*' [--reports reports] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reports", type=Path, default=Path("reports"), help="the runs' report folder (paths.reports)")
    ap.add_argument("--pattern", default="loso_shapes_*", help="the runs (a glob under --reports), one group a shape")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    args = ap.parse_args(argv)
    if not args.reports.is_dir():
        ap.error(f"--reports {args.reports}: no such folder")
    from mogg.core.artifacts import write_text_atomic
    from mogg.evaluation.collect_frontier import FrontierCollectError
    from mogg.run.budget.selector.transfer_rule import choose_rule, rule_markdown

    try:
        md = rule_markdown(choose_rule(args.reports, args.pattern))
    except (FrontierCollectError, OSError, ValueError) as e:
        print(f"choose_transfer_rule: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(md)
    if args.out is not None:
        write_text_atomic(args.out, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
