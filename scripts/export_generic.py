"""Write any question set and corpus the project reads (config groups) as generic-format files.

A stand-in written so takes the path a user's new set takes, the one the unseen checks run
(``experiment=transfer_selector_generic questions.path=... corpus.sources.0.paths=...``, then
``mogg-route --corpus``), where the experiments read it by its config groups:

    python scripts/export_generic.py --questions pubmedqa_l_snippets --corpus pubmedqa_l_snippets --out data/snippets_l

``--split-paragraphs`` writes each document's paragraphs as documents of their own (``<id>_<k>``): a page written
one section per document, as a user might (docs/results.md, "A page written one section per document").
``--paragraph-break line`` writes each document's paragraphs joined by single line breaks, no blank line: a page
written one section per line (docs/results.md, "A page's sections however it writes them"); ``--paragraph-break space``
writes each document on one line, every line break lost (docs/results.md, "A page on one line"). ``--bare-ids`` renames
the documents ``d0``, ``d1``, ... in written order: ids that name no source (docs/results.md, "Ids that name nothing").
``--one-per-document`` keeps one question per gold document (docs/results.md, "A section over several paragraphs").
``--question-headings`` writes each question's text as a line above its gold evidence: a page of questions and their
answers (docs/results.md, "Question lines of any length"). ``--lists`` writes each paragraph as its first sentence and
a list of the rest, one short item a line: a page whose sections list (docs/results.md, "A page's lists"); with
``--inline-lists`` each list on its lead sentence's line, as a page whose line breaks were lost reads.

Trailing ``key=value`` arguments are Hydra overrides (``paths.pubmedqa_l=...``). The corpus holds the questions'
evidence where the corpus config declares ``allow_gold`` (the generic experiments declare it too).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from mogg.core.flags import nonnegative_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", required=True, help="a conf/questions group (e.g. pubmedqa_l_snippets)")
    ap.add_argument("--corpus", required=True, help="a conf/corpus group (e.g. pubmedqa_l_snippets)")
    ap.add_argument("--out", type=Path, required=True, help="folder for questions.jsonl and corpus.jsonl")
    ap.add_argument("--shuffle", type=nonnegative_int, default=None, metavar="SEED",
                    help="write the documents in a random order (this seed): a corpus that does not keep a source's "
                         "sections together")
    ap.add_argument("--split-paragraphs", action="store_true",
                    help="write each document's paragraphs as documents <id>_<k>: a page "
                         "written one section per document")
    ap.add_argument("--paragraph-break", choices=("as-read", "line", "blank", "space"), default="as-read",
                    help="how a document's paragraphs are separated in the file: as read, one line break each (a "
                         "page written one section per line), a blank line, or one space (every line break lost: "
                         "the whole document on one line)")
    ap.add_argument("--bare-ids", action="store_true",
                    help="rename the documents d0, d1, ... in written order (after --shuffle): ids that name no "
                         "source; the questions' gold_doc_ids renamed alike")
    ap.add_argument("--one-per-document", type=nonnegative_int, default=None, metavar="SEED",
                    help="keep one question per gold document, drawn at random (this seed): a page that holds one "
                         "routed question")
    ap.add_argument("--question-headings", action="store_true",
                    help="write each question's text as a line above its gold evidence (where its gold document holds "
                         "it verbatim): a page of questions and their answers")
    ap.add_argument("--halves", action="store_true",
                    help="write each paragraph of a document as two (a blank line at the sentence break nearest its "
                         "middle): a page whose sections run over paragraphs")
    ap.add_argument("--lists", action="store_true",
                    help="write each paragraph as its first sentence and a list of the rest (one short item a line): "
                         "a page whose sections list")
    ap.add_argument("--inline-lists", action="store_true",
                    help="with --lists, each list on its lead sentence's line (\"... - fever - a cough\"): a page whose "
                         "line breaks were lost")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (key=value)")
    args = ap.parse_args(argv)
    if args.inline_lists and not args.lists:
        ap.error("--inline-lists writes the lists of --lists on one line: give --lists too")
    for name, group in (("--questions", "questions"), ("--corpus", "corpus")):  # checked before any work
        choice = getattr(args, group)
        if not (ROOT / "conf" / group / f"{choice}.yaml").is_file():
            known = sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml"))
            ap.error(f"{name} {choice!r}: no conf/{group}/{choice}.yaml (one of {', '.join(known)})")
    os.environ.setdefault("MOGG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from hydra.utils import instantiate
    from omegaconf.errors import OmegaConfBaseException

    from mogg.data.errors import DataError
    from mogg.data.export import (
        bare_ids,
        flattened,
        halved_paragraphs,
        join_paragraphs,
        listed_paragraphs,
        one_per_document,
        question_headings,
        split_paragraphs,
        write_generic,
    )

    try:  # a bad override (a key that does not exist, a missing value) in one line, not a traceback
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"questions={args.questions}", f"corpus={args.corpus}",
                                                           *args.overrides])
    except (HydraException, OmegaConfBaseException) as e:
        print(f"export_generic: {e}", file=sys.stderr)
        return 2
    try:
        items, docs = instantiate(cfg.questions).load(), instantiate(cfg.corpus).documents()
        if args.question_headings:  # before any split or join: the headings are part of the page as written
            docs = question_headings(items, docs)
        if args.halves:  # each paragraph as two, before any split or join
            docs = halved_paragraphs(docs)
        if args.lists:  # each paragraph a lead sentence and a list, before any split or join
            docs = listed_paragraphs(docs, inline=args.inline_lists)
        if args.split_paragraphs:
            docs = split_paragraphs(docs)
        if args.paragraph_break == "space":
            docs = flattened(docs)
        elif args.paragraph_break != "as-read":
            docs = join_paragraphs(docs, "\n" if args.paragraph_break == "line" else "\n\n")
        if args.shuffle is not None:
            import numpy as np

            docs = [docs[i] for i in np.random.default_rng(args.shuffle).permutation(len(docs))]
        if args.one_per_document is not None:
            items = one_per_document(items, args.one_per_document)
        if args.bare_ids:
            items, docs = bare_ids(items, docs)
        n_q, n_d = write_generic(items, docs, args.out)
    except (DataError, FileNotFoundError, OmegaConfBaseException) as e:  # a file missing, a path left unset
        print(f"export_generic: {e}", file=sys.stderr)
        return 2
    print(f"{n_q} questions, {n_d} documents -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
