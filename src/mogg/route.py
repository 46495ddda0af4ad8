"""Route new questions with a trained router: a small Python API and the ``mogg-route`` CLI.

    mogg-route --checkpoint checkpoints/pubmedqa/mog/final --questions q.jsonl [--out routed.jsonl]
    echo "Does aspirin prevent preeclampsia?" | mogg-route --checkpoint DIR

The router directory names the corpus, ladder builder, retriever and encoder it was trained with;
they are rebuilt from there (loaded from the artifact store when already built), checked against
the router, and every question is retrieved, routed and given its eq. 1-2 context. ``--set``
overrides a component's config, e.g. the corpus path on another machine.

Python::

    from mogg.route import RoutingSession
    session = RoutingSession.from_checkpoint("checkpoints/pubmedqa/mog/final")
    for r in session.route(["Is X associated with Y?"]):
        print(r["level_name"], r["weights"], r["context"])
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mogg.artifacts import ArtifactError, strict_json
from mogg.data.errors import DataError
from mogg.routing.features import compute_features
from mogg.routing.model import TrainedRouter, question_hash
from mogg.search import LadderIndex
from mogg.selection import mog_select

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
    def from_checkpoint(cls, router_dir: str | Path, artifacts: str | Path | None = "artifacts",
                        overrides: Sequence[str] = (), k: int | None = None) -> "RoutingSession":
        """Load a router directory and rebuild (or load) its ladder, retrievers and encoder.

        ``overrides``: ``key=value`` strings applied to the saved component configs
        (``corpus.sources.0.path=/data/test_set.json``, ``retriever.backend=scipy``).
        """
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        router = TrainedRouter.load(Path(router_dir))
        comps = OmegaConf.create(router.spec["components"])
        if overrides:
            comps = OmegaConf.merge(comps, OmegaConf.from_dotlist(list(overrides)))
        art = Path(artifacts) if artifacts else None
        index = LadderIndex.build(instantiate(comps.corpus), instantiate(comps.ladder), instantiate(comps.retriever), art)
        recipe = router.recipe
        encoder = instantiate(recipe.encoder) if recipe.needs_embeddings else None
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
        lad = self.index.ladder
        hits = self.index.search(questions, self.k_r)
        x = compute_features(self.router.recipe, hits, lad, questions, self.encoder, self.artifacts)
        r = self.router.route(x)
        sel = mog_select(lad, hits, r.weights, self.k)
        names = lad.level_names
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
                "routed": bool(r.routed[q]), "decision": self.router.decision["rule"],
                "weights": {n: round(float(w), 6) for n, w in zip(names, r.weights[q])},
                "seen_in_training": question_hash(text) in seen,
                "context": ctx,
            })
        return out


def read_questions(lines: Sequence[str], source: str = "<stdin>") -> tuple[list[str], list[str]]:
    """Questions and ids from jsonl lines (``{"question": ..., "id": ...}``) or plain text lines."""
    questions, ids = [], []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{source}:{n}: invalid JSON ({e.msg}, column {e.colno})") from None
            q = obj.get("question")
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"{source}:{n}: a JSON line needs a non-empty 'question' string")
            questions.append(q)
            ids.append(str(obj.get("id", n)))
        else:
            questions.append(line)
            ids.append(str(n))
    return questions, ids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mogg-route", description="Route questions with a trained mogg router.")
    ap.add_argument("--checkpoint", required=True, help="a router directory (e.g. checkpoints/<run>/<ladder>/final)")
    ap.add_argument("--questions", default="-", help="jsonl with 'question' (and 'id'), or plain text lines; '-' = stdin")
    ap.add_argument("--out", default="-", help="jsonl output path; '-' = stdout")
    ap.add_argument("--artifacts", default="artifacts", help="artifact store for the ladder and retriever state")
    ap.add_argument("--k", type=int, default=None, help="snippets per question (default: the training run's k)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a saved component config, e.g. corpus.sources.0.path=/data/x.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        if args.questions == "-":
            questions, ids = read_questions(sys.stdin.read().splitlines())
        else:
            questions, ids = read_questions(Path(args.questions).read_text(encoding="utf-8").splitlines(), args.questions)
        if not questions:
            raise ValueError(f"no questions in {args.questions}")
        session = RoutingSession.from_checkpoint(args.checkpoint, args.artifacts, args.set, args.k)
        records = session.route(questions, ids)
    except (ValueError, OSError, ArtifactError, DataError) as e:
        print(f"mogg-route: error: {e}", file=sys.stderr)
        return 2
    text = "".join(strict_json(r, ensure_ascii=False) + "\n" for r in records)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    levels = np.bincount([r["level"] for r in records], minlength=len(session.index.ladder.levels))
    log.info("routed %d questions; levels: %s", len(records),
             ", ".join(f"{n} {c}" for n, c in zip(session.index.ladder.level_names, levels)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
