"""The level router deployed: a trained router directory (``<run>/<ladder>/final``, a fold, a
transfer router) with the ladder and retrievers it routes over, for any new questions.

:class:`RoutingSession` rebuilds the components saved in the directory (only allowed components with
plain arguments: :mod:`mogg.core.trusted`), checks them against the router and gives every
question its level weights and eq. 1-2 context; :class:`LevelRouter` is how ``mogg-route`` and the
registry (:mod:`mogg.run.registry`) know it, beside the budget-router kinds.

Python::

    from mogg.run.level_router import RoutingSession     # also importable from mogg.run.route
    session = RoutingSession.from_checkpoint("checkpoints/pubmedqa/mog/final")
    for r in session.route(["Is X associated with Y?"]):
        print(r["level_name"], r["weights"], r["context"])
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np

from mogg.routing.fitting.experts import load_router
from mogg.routing.inputs.features import compute_features
from mogg.routing.router_dir import TrainedRouter, question_hash
from mogg.run.route_paths import build_encoder, rebuild_index, route_with_empty
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
                        data_dir: str | Path | None = None, corpus: Sequence[str] = ()) -> "RoutingSession":
        """Load a router directory and rebuild (or load) its ladder, retrievers and encoder.

        ``overrides``: ``key=value`` strings applied to the saved component configs
        (``corpus.sources.0.path=/data/test_set.json``, ``retriever.backend=scipy``).
        ``data_dir``: this machine's data folder (as ``MOGG_DATA_DIR`` for ``train.py``); the
        directory's corpus files are read only under it. ``corpus``: the files of the corpus to
        route instead (a transfer directory holds none: :mod:`mogg.run.route_corpus`).
        ``artifacts``: the cache for the ladder and retriever state; ``"auto"``
        (:func:`default_artifacts`): ``$MOGG_ARTIFACTS``, else the user's cache folder; None: no cache.
        """
        router = load_router(Path(router_dir))
        where = str(Path(router_dir) / "router.json")
        recipe = router.recipe
        comps, art, index = rebuild_index(router.spec.get("components"), overrides, data_dir, artifacts, where,
                                          {"recipe.encoder": recipe.encoder}, corpus)
        encoder = build_encoder(recipe.encoder, where, "recipe.encoder", art) if recipe.needs_embeddings else None
        return cls(router, index, k if k is not None else comps.get("k", 2), encoder, art, comps.get("max_context_tokens"))

    def route(self, questions: Sequence[str], ids: Sequence[str] | None = None) -> list[dict]:
        """One record per question: chosen level, weights per level, whether the fallback rule
        kept the router's choice, and the selected context (level, chunk, document, text)."""
        questions = [str(q) for q in questions]
        if not questions:
            return []
        ids = list(ids) if ids is not None else [str(i) for i in range(len(questions))]
        split = route_with_empty(questions, ids, lambda keep: (self.route([questions[i] for i in keep],
                                                                          [ids[i] for i in keep]), None), self.index)
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


class LevelRouter:
    """A level router's directory as a deployed kind (:mod:`mogg.run.registry`): the flags it takes
    and its session, as each budget-router kind declares them."""

    TITLE: ClassVar[str] = "a level router"
    ROUTE_FLAGS: ClassVar[tuple[str, ...]] = ("k",)
    HINT: ClassVar[str] = (" (--budget is for a deployed budget router, the action router or the evidence selector: "
                           "train one with `python train.py experiment=frontier data=<set> router.fit=all`, "
                           "checkpoints/<run>/<ladder>/actions/final)")

    def __init__(self, session: RoutingSession):
        self.session_ = session

    @classmethod
    def session(cls, directory: Path, artifacts="auto", overrides=(), data_dir=None, corpus=()) -> "LevelRouter":
        return cls(RoutingSession.from_checkpoint(directory, artifacts, overrides, None, data_dir, corpus))

    def route(self, questions: Sequence[str], ids: Sequence[str] | None = None, k: int | None = None
              ) -> tuple[list[dict], dict]:
        """``k``: snippets per question (default: the training run's)."""
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"k must be an integer >= 1, got {k!r}")
            self.session_.k = k
        records = self.session_.route(questions, ids)
        names = self.session_.index.ladder.level_names
        counts = np.bincount([r["level"] for r in records if not r.get("empty")], minlength=len(names))
        return records, {"n": len(records), "levels": dict(zip(names, counts.tolist()))}

    @staticmethod
    def summary_line(summary: dict) -> str:
        return (f"routed {summary['n']} questions; levels: "
                + ", ".join(f"{n} {c}" for n, c in summary["levels"].items()))
