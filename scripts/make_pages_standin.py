"""Write the page-section stand-in (issue 49, :mod:`mogg.data.pages`) as generic-format files.

The experiments read the stand-in directly (``questions=pages corpus=pages``, built when read);
this script writes the same questions and pages as ``questions.jsonl`` and ``corpus.jsonl`` in the
generic format, for another tool or another machine:

    python scripts/make_pages_standin.py --out data/pages_standin

Deterministic (``--seed``: the SVD's); the corpus holds the questions' evidence (a gold-context
setting: declare ``corpus.allow_gold=true`` where you read it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from mogg.core.flags import nonnegative_int, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for questions.jsonl and corpus.jsonl")
    ap.add_argument("--sections", type=positive_int, default=5, help="explanations per page")
    ap.add_argument("--options", action="store_true", help="keep the answer options")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    args = ap.parse_args(argv)
    if args.sections < 2:
        ap.error("--sections must be >= 2 (a page of one section is the plain MedMCQA set)")
    os.environ.setdefault("MOGG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from mogg.data.export import write_generic
    from mogg.data.records import Document

    knobs = [f"questions.sections={args.sections}", f"questions.seed={args.seed}", f"questions.options={args.options}"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["questions=pages", *knobs])
    pages_in = instantiate(cfg.questions)
    book = pages_in.book()
    questions = pages_in.load()
    write_generic(questions, [Document(pid, "", "\n\n".join(it.evidence_text for it in members)) for pid, members in book],
                  args.out)
    words = sorted(sum(len(it.evidence_text.split()) for it in m) for _, m in book)
    sec = sorted(len(it.evidence_text.split()) for it in questions)
    print(f"{len(book)} pages of up to {args.sections} sections from {len(questions)} explained questions; median page "
          f"{words[len(words) // 2]} words, median section {sec[len(sec) // 2]} words -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
