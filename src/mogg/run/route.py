"""Route new questions with a trained router: a small Python API and the ``mogg-route`` CLI.

    mogg-route --checkpoint checkpoints/pubmedqa/mog/final --questions q.jsonl [--out routed.jsonl]
    echo "Does aspirin prevent preeclampsia?" | mogg-route --checkpoint DIR
    mogg-route --checkpoint checkpoints/<run>/mog/actions/final --budget 128 q.jsonl   # the action router
    mogg-route --checkpoint checkpoints/<run>/mog/selector/final --budget 128 q.jsonl  # the evidence selector

The router directory names the corpus, ladder builder, retriever and encoder it was trained with;
they are rebuilt from there (loaded from the artifact store when already built), checked against
the router, and every question is retrieved, routed and given its eq. 1-2 context. ``--set``
overrides a component's config, e.g. the corpus path on another machine.

Python::

    from mogg.run.route import RoutingSession
    session = RoutingSession.from_checkpoint("checkpoints/pubmedqa/mog/final")
    for r in session.route(["Is X associated with Y?"]):
        print(r["level_name"], r["weights"], r["context"])
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

import numpy as np

from mogg.core.artifacts import ArtifactError, atomic_path, strict_json
from mogg.core.gcpolicy import configure_gc
from mogg.data.errors import DataError
from mogg.routing.fitting.experts import load_router
from mogg.routing.inputs.features import compute_features
from mogg.routing.router_dir import TrainedRouter, question_hash
from mogg.run.budget.registry import deployed_kind
from mogg.run.route_paths import (  # noqa: F401 (apply_overrides, check_corpus_paths, default_artifacts: public here)
    apply_overrides,
    build_encoder,
    check_corpus_paths,
    default_artifacts,
    rebuild_index,
    route_with_empty,
)
from mogg.search import LadderIndex
from mogg.selection import fixed_level_select, level_contexts, mog_select

log = logging.getLogger(__name__)


class RoutingSession:
    """A trained router with the ladder and retrievers it routes over, ready for any questions."""

    def __init__(self, router: TrainedRouter, index: LadderIndex, k: int, encoder=None, artifacts: Path | None = None,
                 max_context_tokens: int | None = None):
        self.router, self.index, self.k = router, index, int(k)
        self.max_context_tokens = max_context_tokens
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.encoder, self.artifacts = encoder, artifacts
        self.k_r = int(router.spec["compat"]["k_r"])
        self.notes = router.check_compatible(index.ladder.level_names, index.key, index.retriever_config, self.k_r)

    @classmethod
    def from_checkpoint(cls, router_dir: str | Path, artifacts: str | Path | None = "auto",
                        overrides: Sequence[str] = (), k: int | None = None,
                        data_dir: str | Path | None = None) -> "RoutingSession":
        """Load a router directory and rebuild (or load) its ladder, retrievers and encoder.

        ``overrides``: ``key=value`` strings applied to the saved component configs
        (``corpus.sources.0.path=/data/test_set.json``, ``retriever.backend=scipy``).
        ``data_dir``: this machine's data folder (as ``MOGG_DATA_DIR`` for ``train.py``); corpus
        files under the training machine's data folder are looked up under it. ``artifacts``: the
        cache for the ladder and retriever state; ``"auto"`` (:func:`default_artifacts`):
        ``$MOGG_ARTIFACTS``, else ``./artifacts``; None: no cache.
        """
        router = load_router(Path(router_dir))
        where = str(Path(router_dir) / "router.json")
        recipe = router.recipe
        comps, art, index = rebuild_index(router.spec.get("components"), overrides, data_dir, artifacts, where,
                                          {"recipe.encoder": recipe.encoder})
        encoder = build_encoder(recipe.encoder, where, "recipe.encoder", art) if recipe.needs_embeddings else None
        return cls(router, index, k if k is not None else comps.get("k", 2), encoder, art, comps.get("max_context_tokens"))

    def route(self, questions: Sequence[str], ids: Sequence[str] | None = None) -> list[dict]:
        """One record per question: chosen level, weights per level, whether the fallback rule
        kept the router's choice, and the selected context (level, chunk, document, text)."""
        questions = [str(q) for q in questions]
        if not questions:
            return []
        if any(not q.strip() for q in questions):
            raise ValueError("empty question text")
        ids = list(ids) if ids is not None else [str(i) for i in range(len(questions))]
        split = route_with_empty(questions, ids, lambda keep: (self.route([questions[i] for i in keep],
                                                                          [ids[i] for i in keep]), None))
        if split is not None:
            return split[0]
        lad = self.index.ladder
        hits = self.index.search(questions, self.k_r)
        x = self.router.inputs(
            lambda: compute_features(self.router.recipe, hits, lad, questions, self.encoder, self.artifacts), questions,
            lambda: level_contexts(lad, [fixed_level_select(lad, hits, j, self.k) for j in range(lad.n_levels)]),
            self.artifacts)
        r = self.router.route(x)
        sel = mog_select(lad, hits, r.weights, self.k)
        names = lad.level_names
        space = self.router.profile_space  # a router over eq. 1 actions: name the action too
        actions = space.names(names) if space is not None else None
        chosen = space.action_of(r.weights) if space is not None else None
        seen = set(self.router.train_question_hashes)
        texts = sel.contexts(lad, self.max_context_tokens)  # capped like every evaluated context
        out = []
        for q, text in enumerate(questions):
            ctx = []
            picked = [(int(lv), int(c)) for lv, c in zip(sel.level[q], sel.chunk[q]) if c >= 0]
            for (lv, c), snippet in zip(picked, texts[q]):
                doc = lad.units.doc_ids[int(lad.chunk_doc(lv)[c])]
                ctx.append({"level": names[lv], "chunk": c, "doc_id": doc, "text": snippet})
            out.append({
                "id": ids[q], "question": text, "level": int(r.level[q]), "level_name": names[int(r.level[q])],
                # where the fallback rule kept the router's own choice (False: it fell back to the fixed level)
                "router_choice_kept": bool(r.routed[q]), "decision": self.router.decision["rule"],
                "weights": {n: round(float(w), 6) for n, w in zip(names, r.weights[q])},
                "seen_in_training": question_hash(text) in seen,
                **({"action": actions[int(chosen[q])]} if space is not None else {}),
                "context": ctx,
            })
        return out


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


_FLAG = {"budget": "--budget", "cost_weight": "--cost-weight", "max_tokens": "--max-tokens",
         "here": "--calibrate-here", "unguarded": "--unguarded"}  # a budget router's route() keyword -> its flag


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mogg-route", description="Route questions with a trained mogg router.")
    ap.add_argument("--checkpoint", required=True, help="a router directory (e.g. checkpoints/<run>/<ladder>/final)")
    ap.add_argument("--questions", default=None, help="jsonl with 'question' (and 'id'), or plain text lines; '-' = stdin")
    ap.add_argument("questions_file", nargs="?", default=None, help="the same as --questions")
    ap.add_argument("--budget", type=_tokens, default=None,
                    help="a deployed budget router (<run>/<ladder>/<kind>/final: the action router, the evidence selector): "
                         "the mean context tokens to deploy at, one of "
                         "the budgets it was calibrated for")
    ap.add_argument("--cost-weight", type=float, default=None,
                    help="budget router: lambda in argmax u - lambda * tokens, instead of --budget")
    ap.add_argument("--max-tokens", type=int, default=None, help="action router: a hard cap on every context's tokens")
    ap.add_argument("--calibrate-here", action="store_true",
                    help="action router with --budget: spend B on these questions (lambda, and the envelope where the "
                         "guard keeps it, re-chosen so their mean tokens are at most B; label-free: for a new set)")
    ap.add_argument("--unguarded", action="store_true",
                    help="budget router: deploy it even at budgets where its guard kept the fixed envelope")
    ap.add_argument("--out", default="-", help="jsonl output path; '-' = stdout")
    ap.add_argument("--artifacts", default="auto",
                    help="artifact store for the ladder and retriever state (default: $MOGG_ARTIFACTS, else ./artifacts)")
    ap.add_argument("--k", type=int, default=None, help="snippets per question (default: the training run's k)")
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
            data, source = sys.stdin.buffer.read(), "<stdin>"
        else:
            data, source = Path(args.questions).read_bytes(), args.questions
        options: list[str] = []
        questions, ids = read_questions(decode_lines(data, source), source, options)
        if not questions:
            raise ValueError(f"{source}: no questions")
        if args.out != "-":
            check_writable(Path(args.out))  # before any routing: a bad --out fails in a second
        kind = deployed_kind(Path(args.checkpoint))  # a deployed budget router (None: a level router)
        acting = kind is not None
        given = {"budget": args.budget, "cost_weight": args.cost_weight, "max_tokens": args.max_tokens,
                 "here": args.calibrate_here, "unguarded": args.unguarded}
        flags = [_FLAG[f] for f, v in given.items() if v not in (None, False)]
        if not acting and flags:
            raise ValueError(f"{', '.join(flags)} apply to a deployed budget router (the action router, the evidence "
                             f"selector); {args.checkpoint} is a level router (train one with `python train.py "
                             "experiment=frontier_<set> router.fit=all`: checkpoints/<run>/<ladder>/actions/final)")
        if acting:
            if args.k is not None:
                raise ValueError(f"--k does not apply to {kind.TITLE}: it chooses what to read per question (give --budget)")
            wrong = [_FLAG[f] for f, v in given.items() if v not in (None, False) and f not in kind.ROUTE_FLAGS]
            if wrong:
                raise ValueError(f"{' and '.join(wrong)} {'does' if len(wrong) == 1 else 'do'} not apply to "
                                 f"{kind.TITLE} ({args.checkpoint}); it takes "
                                 f"{', '.join(_FLAG[f] for f in kind.ROUTE_FLAGS if f in _FLAG)}")
            session = kind.session(args.checkpoint, args.artifacts, args.set, args.data_dir)
            opts = {f: v for f, v in {**given, "options": options}.items() if f in kind.ROUTE_FLAGS}
            records, summary = session.route(questions, ids, **opts)
        else:
            session = RoutingSession.from_checkpoint(args.checkpoint, args.artifacts, args.set, args.k, args.data_dir)
            records = session.route(questions, ids)
        text = "".join(strict_json(r, ensure_ascii=False) + "\n" for r in records)
        if args.out == "-":
            sys.stdout.write(text)
        else:
            with atomic_path(Path(args.out)) as tmp:
                tmp.write_text(text, encoding="utf-8")
    except (ValueError, OSError, ArtifactError, DataError, FloatingPointError) as e:
        print(f"mogg-route: error: {e}", file=sys.stderr)
        return 2
    if acting:
        if summary["n"]:
            at = f"B={summary['budget']}" if summary["budget"] is not None else f"lambda={summary['lambda']:g}"
            if summary.get("calibrated_here"):
                at += f", calibrated on these questions (lambda={summary['lambda']:g})"
            log.info("routed %d questions at %s (%s deployed): mean tokens %.1f%s", summary["n"], at, summary["deployed"],
                     summary["mean_tokens"], f" ({summary['n_empty']} empty left out)" if summary.get("n_empty") else "")
        return 0
    levels = np.bincount([r["level"] for r in records if not r.get("empty")], minlength=len(session.index.ladder.levels))
    log.info("routed %d questions; levels: %s", len(records),
             ", ".join(f"{n} {c}" for n, c in zip(session.index.ladder.level_names, levels)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
