"""Route new questions with a trained router: the ``mogg-route`` CLI.

    mogg-route --checkpoint checkpoints/pubmedqa/mog/final --questions q.jsonl [--out routed.jsonl]
    echo "Does aspirin prevent preeclampsia?" | mogg-route --checkpoint DIR
    mogg-route --checkpoint checkpoints/<run>/mog/actions/final --budget 128 q.jsonl   # the action router
    mogg-route --checkpoint checkpoints/<run>/mog/selector/final --budget 128 q.jsonl  # the evidence selector

    mogg-route --checkpoint checkpoints/<run>/mog/selector/transfer --corpus my/corpus.jsonl \
        --budget 128 --calibrate-here my/questions.jsonl                          # your own corpus

The router directory names the ladder builder, retriever and encoder it was trained with (and, for
an in-set router, its corpus, read under this machine's data folder only); they are rebuilt from
there (loaded from the artifact store when already built), checked against the router, and every
question is routed. ``--corpus`` names the corpus to route over (a transfer directory holds none:
:mod:`mogg.run.route_corpus`); ``--set`` overrides a component's config, e.g. the corpus path on
another machine. The directory's kind (the level router, a budget-router kind) comes from
the registry (:mod:`mogg.run.registry`), with the options it takes and its session: this module
never asks which kind it holds. From Python: :class:`mogg.run.level_router.RoutingSession`
(importable from here too) and each kind's ``session``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from mogg.core.artifacts import ArtifactError, atomic_path, strict_json
from mogg.core.flags import MAX_QUESTION_BYTES, input_file, nonnegative_float, positive_int, refuse_overwrite
from mogg.core.gcpolicy import configure_gc
from mogg.data.errors import DataError
from mogg.run.route_paths import (  # noqa: F401 (apply_overrides, check_corpus_paths, default_artifacts: public here)
    apply_overrides,
    check_corpus_paths,
    default_artifacts,
)

log = logging.getLogger(__name__)


def __getattr__(name: str):
    # RoutingSession (the Python API) is importable from here, but loaded only when asked for: it
    # pulls in torch, and ``mogg-route --help`` should answer at once
    if name == "RoutingSession":
        from mogg.run.level_router import RoutingSession

        return RoutingSession
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def decode_lines(data: bytes, source: str) -> list[str]:
    """UTF-8 lines of ``data`` (a BOM and CRLF allowed); a byte that is not UTF-8 is an error
    naming ``source``, the line and the column."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = []
    # \r\n, \n and a lone \r (classic Mac files) each end a line: two questions never merge
    for n, raw in enumerate(re.split(rb"\r\n|\n|\r", data), 1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{source}:{n}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})") from None
    return lines


def read_questions(lines: Sequence[str], source: str = "<stdin>", options: list | None = None
                   ) -> tuple[list[str], list[str]]:
    """Questions and ids from jsonl lines (``{"question": ..., "id": ...}``) or plain text lines;
    errors name ``source`` and the line (a duplicate id too). ``options``: a list that receives
    each question's answer options as one text (a jsonl line's ``options`` values; "" without)."""
    questions, ids = [], []
    first: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("[") and _is_json(line):  # a JSON array, not a question in brackets
            raise ValueError(f"{source}:{n}: a JSON line must be an object with a 'question'")
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{source}:{n}: invalid JSON ({e.msg}, column {e.colno})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{source}:{n}: a JSON line must be an object with a 'question'")
            q = obj.get("question")
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"{source}:{n}: a JSON line needs a non-empty 'question' string")
            qid = obj.get("id", n)
            if not isinstance(qid, (str, int)) or isinstance(qid, bool):
                raise ValueError(f"{source}:{n}: 'id' must be a string or an integer")
            try:
                q.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError(f"{source}:{n}: the question holds a lone surrogate ({q[e.start]!a}); "
                                 "not valid Unicode text") from None
            opts = obj.get("options") or {}
            if not isinstance(opts, dict) or not all(isinstance(v, str) for v in opts.values()):
                raise ValueError(f"{source}:{n}: 'options' must be an object of letter -> text")
            questions.append(q)
            ids.append(str(qid))
            if options is not None:
                options.append(" ".join(opts.values()))
        else:
            questions.append(line)
            ids.append(str(n))
            if options is not None:
                options.append("")
        if ids[-1] in first:
            raise ValueError(f"{source}:{n}: duplicate id {ids[-1]!r} (first on line {first[ids[-1]]})")
        first[ids[-1]] = n
    return questions, ids


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def check_writable(out: Path) -> None:
    """``--out`` must name a file in a folder this process can write (tried with a temporary file)."""
    import tempfile

    if out.is_dir():
        raise ValueError(f"--out {out}: is a folder; name the jsonl file to write, e.g. {out / 'routed.jsonl'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".probe"):
            pass
    except OSError as e:
        raise ValueError(f"--out {out}: cannot write in {out.parent} ({e.strerror or e})") from None


def _tokens(text: str) -> float:
    """``--budget``: a finite number of tokens > 0 (``inf``, ``nan`` and ``-5`` are refused before
    anything loads)."""
    import math

    try:
        b = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tokens") from None
    if not (math.isfinite(b) and b > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: a budget is a finite number of tokens > 0")
    return b


# a router's route() keyword -> its flag
_FLAG = {"budget": "--budget", "cost_weight": "--cost-weight", "max_tokens": "--max-tokens",
         "here": "--calibrate-here", "unguarded": "--unguarded", "k": "--k", "unit": "--evidence-unit"}


def _corpus_arg(kind, corpus: list[str], checkpoint: str) -> dict:
    """``{"corpus": files}`` for a kind whose session takes the user's corpus (every kind mogg
    ships); a kind written before ``--corpus`` existed gets none, and refuses ``--corpus``."""
    import inspect

    if not corpus:
        return {}
    if "corpus" not in inspect.signature(kind.session).parameters:
        raise ValueError(f"--corpus does not apply to {kind.TITLE} ({checkpoint}): its session reads no corpus of yours")
    return {"corpus": corpus}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mogg-route", description="Route questions with a trained mogg router.")
    ap.add_argument("--checkpoint", required=True, help="a router directory (e.g. checkpoints/<run>/<ladder>/final)")
    ap.add_argument("--questions", type=input_file, default=None,
                    help="jsonl with 'question' (and 'id'), or plain text lines; '-' = stdin")
    ap.add_argument("questions_file", nargs="?", type=input_file, default=None, help="the same as --questions")
    ap.add_argument("--budget", type=_tokens, default=None,
                    help="a deployed budget router (<run>/<ladder>/<kind>/final: the action router, the evidence selector): "
                         "the mean context tokens to deploy at, one of "
                         "the budgets it was calibrated for")
    ap.add_argument("--cost-weight", type=nonnegative_float, default=None,
                    help="budget router: lambda in argmax u - lambda * tokens, instead of --budget")
    ap.add_argument("--max-tokens", type=positive_int, default=None, help="action router: a hard cap on every context's tokens")
    ap.add_argument("--calibrate-here", action="store_true",
                    help="budget router (action router, evidence selector) with --budget: spend B on these questions "
                         "(lambda, and the envelope where the guard keeps it, re-chosen so their mean tokens are at most "
                         "B; label-free: for a new set)")
    ap.add_argument("--corpus", action="append", default=[], metavar="FILE",
                    help="the corpus to route over, in place of the directory's own (repeatable; MedRAG or generic "
                         "jsonl with id, title, content, a folder of them, or plain .txt files): its ladder and "
                         "retriever are built from the directory's recipe and cached in the artifact store. A transfer "
                         "directory holds no corpus and needs it")
    ap.add_argument("--evidence-unit", default=None, metavar="UNIT",
                    help="evidence selector, a transfer directory with --calibrate-here: the new set's evidence unit, "
                         "auto | document | section | sentence (a whole short document, a section of a page, a "
                         "sentence of a long one), in place of the directory's transfer_unit (auto: decided from the "
                         "candidates without labels)")
    ap.add_argument("--unguarded", action="store_true",
                    help="budget router: deploy it even at budgets where its guard kept the fixed envelope")
    ap.add_argument("--out", default="-", help="jsonl output path; '-' = stdout")
    ap.add_argument("--artifacts", default="auto",
                    help="artifact store for the ladder and retriever state (default: $MOGG_ARTIFACTS, else "
                         "~/.cache/mogg/artifacts)")
    ap.add_argument("--k", type=positive_int, default=None, help="level router: snippets per question (default: the training run's k)")
    ap.add_argument("--data-dir", default=os.environ.get("MOGG_DATA_DIR"),
                    help="this machine's data folder, as MOGG_DATA_DIR for train.py (default: $MOGG_DATA_DIR)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a saved component config, e.g. corpus.sources.0.path=/data/x.json")
    args = ap.parse_args(argv)
    if args.questions is not None and args.questions_file is not None:
        ap.error("give the questions once: --questions FILE or FILE")
    args.questions = args.questions or args.questions_file or "-"
    configure_gc()  # a job that loads torch: fewer full collections, none at exit
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        # the input is read and checked before the ladder loads: a bad line fails in a second
        if args.questions == "-":
            if sys.stdin is None or sys.stdin.closed:
                raise ValueError("<stdin>: closed; pass --questions FILE or pipe questions in")
            data, source = sys.stdin.buffer.read(MAX_QUESTION_BYTES + 1), "<stdin>"
            if len(data) > MAX_QUESTION_BYTES:  # an endless stream (`< /dev/zero`) is not read whole
                raise ValueError(f"<stdin>: over the {MAX_QUESTION_BYTES:,} bytes a question set may have; "
                                 "split it into smaller files")
        else:
            data, source = Path(args.questions).read_bytes(), args.questions
        options: list[str] = []
        questions, ids = read_questions(decode_lines(data, source), source, options)
        if not questions:
            raise ValueError(f"{source}: no questions")
        if args.out != "-":
            # never over an input: the questions (their options, answers and gold fields) or the router
            inputs = [("the questions file (--questions)", args.questions)] if args.questions != "-" else []
            inputs += [("a corpus file (--corpus)", c) for c in args.corpus]
            refuse_overwrite(args.out, inputs + [("inside the router directory (--checkpoint)", args.checkpoint)])
            check_writable(Path(args.out))  # before any routing: a bad --out fails in a second
        from mogg.run.registry import deployed_kind  # here, not at import: --help needs no torch

        kind = deployed_kind(Path(args.checkpoint))  # the level router or a budget-router kind
        given = {"budget": args.budget, "cost_weight": args.cost_weight, "max_tokens": args.max_tokens,
                 "here": args.calibrate_here, "unguarded": args.unguarded, "k": args.k, "unit": args.evidence_unit}
        wrong = [_FLAG[f] for f, v in given.items() if v not in (None, False) and f not in kind.ROUTE_FLAGS]
        if wrong:
            takes = ", ".join(_FLAG[f] for f in kind.ROUTE_FLAGS if f in _FLAG) or "no option"
            raise ValueError(f"{' and '.join(wrong)} {'does' if len(wrong) == 1 else 'do'} not apply to {kind.TITLE} "
                             f"({args.checkpoint}); it takes {takes}{getattr(kind, 'HINT', '')}")
        for f, allowed in getattr(kind, "ROUTE_CHOICES", {}).items():  # a flag's words, before any corpus is read
            if given.get(f) is not None and given[f] not in allowed:
                raise ValueError(f"{_FLAG[f]} {given[f]!r}: one of {', '.join(allowed)}")
        for f, need in getattr(kind, "ROUTE_NEEDS", {}).items():  # a flag that means something only with another
            if given.get(f) is not None and not given.get(need):
                raise ValueError(f"{_FLAG[f]} applies with {_FLAG[need]} only")
        session = kind.session(args.checkpoint, args.artifacts, args.set, args.data_dir,
                               **_corpus_arg(kind, args.corpus, args.checkpoint))
        opts = {f: v for f, v in {**given, "options": options}.items() if f in kind.ROUTE_FLAGS}
        records, summary = session.route(questions, ids, **opts)
        text = "".join(strict_json(r, ensure_ascii=False) + "\n" for r in records)
        if args.out == "-":
            sys.stdout.write(text)
        else:
            with atomic_path(Path(args.out)) as tmp:
                tmp.write_text(text, encoding="utf-8")
    except (ValueError, OSError, ArtifactError, DataError, FloatingPointError) as e:
        print(f"mogg-route: error: {e}", file=sys.stderr)
        return 2
    log.info(kind.summary_line(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
