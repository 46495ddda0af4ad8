"""Route new questions with the deployed action router: per question a (level, k, cap), its
tokens and its context, at a calibrated budget or a cost weight (``mogg-route --budget``).

    from mogg.run.budget.actions.session import ActionSession
    s = ActionSession.from_checkpoint("checkpoints/act_final/mog/actions/final")
    records, summary = s.route(["Is X associated with Y?"], budget=128)
    print(records[0]["level"], records[0]["k"], records[0]["cap"], records[0]["tokens"], summary["mean_tokens"])

The question's inputs are built exactly as the frontier experiment built them for training: the
level router's features over the hits at ``k_r``, then
:func:`mogg.run.frontier_stage.action_inputs` (each level's top chunk's tokens, every action's
features over the hits at the frontier depth) on questions without labels.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mogg.routing.inputs.features import FeatureRecipe, compute_features
from mogg.run.budget.actions.deploy import DeployedActions
from mogg.run.budget.explain import explained
from mogg.run.budget.shared import action_contexts, action_inputs
from mogg.run.route_paths import build_encoder, check_levels, rebuild_index, route_with_empty
from mogg.search import LadderIndex

log = logging.getLogger(__name__)


class ActionSession:
    """A deployed action router with the ladder and retrievers it routes over."""

    def __init__(self, deployed: DeployedActions, index: LadderIndex, encoder=None, artifacts: Path | None = None):
        self.deployed, self.index, self.encoder, self.artifacts = deployed, index, encoder, artifacts
        spec = deployed.spec
        self.k_r = int(spec["compat"]["k_r"])
        self.depth, self.caps = int(spec["frontier"]["depth"]), list(spec["frontier"]["caps"])
        self.max_context_tokens = spec["frontier"].get("max_context_tokens")
        self.recipe = FeatureRecipe.from_json(spec["recipe"])
        check_levels(spec, index.ladder)

    @classmethod
    def from_checkpoint(cls, directory: str | Path, artifacts: str | Path | None = "auto",
                        overrides: Sequence[str] = (), data_dir: str | Path | None = None,
                        corpus: Sequence[str] = ()) -> "ActionSession":
        """Load the directory and rebuild (or load from the artifact store) its ladder, retriever
        and encoder, as :meth:`mogg.run.route.RoutingSession.from_checkpoint` does."""
        dep = DeployedActions.load(Path(directory))
        where = str(Path(directory) / "deploy.json")
        recipe = FeatureRecipe.from_json(dep.spec["recipe"])
        _, art, index = rebuild_index(dep.spec.get("components"), overrides, data_dir, artifacts, where,
                                      {"spec.recipe.encoder": recipe.encoder}, corpus)
        encoder = build_encoder(recipe.encoder, where, "spec.recipe.encoder", art) if recipe.needs_embeddings else None
        return cls(dep, index, encoder, art)

    def inputs(self, questions: Sequence[str]):
        """(deep hits, query inputs [Q, D + L], action features [Q, A, F], tokens [Q, A]) for ``questions``."""
        lad = self.index.ladder
        hits, deep = self.index.search_deep(list(questions), self.k_r, self.depth)
        feats = compute_features(self.recipe, hits, lad, list(questions), self.encoder, self.artifacts)
        # no labels here: the evidence is empty, only the tokens of the table are read
        space, table, xq, xa = action_inputs(lad, deep, feats, [""] * len(questions), self.depth, self.caps,
                                             self.max_context_tokens)
        if space != self.deployed.space:
            raise ValueError(f"the rebuilt action space {space.to_json()} is not the router's {self.deployed.space.to_json()}")
        return deep, xq, xa, table.tokens

    def route(self, questions: Sequence[str], ids: Sequence[str] | None = None, budget: float | None = None,
              cost_weight: float | None = None, max_tokens: int | None = None, here: bool = False,
              unguarded: bool = False) -> tuple[list[dict], dict]:
        """One record per question (level, k, cap, tokens, context, who decided) and a summary
        (the plan, mean tokens). ``max_tokens``: a hard cap on every context (the router chooses
        among actions within it; a context over it, the envelope's, is cut there). ``here``: spend
        ``budget`` on these questions (lambda and the envelope re-chosen on their token counts, no
        labels: a new set); ``unguarded``: the router even where the guard kept the envelope."""
        questions = [str(q) for q in questions]
        if not questions:
            return [], {"n": 0}
        if max_tokens is not None and not (isinstance(max_tokens, int) and max_tokens >= 1):
            raise ValueError(f"max tokens must be an integer >= 1, got {max_tokens!r}")
        ids = list(ids) if ids is not None else [str(i) for i in range(len(questions))]
        plan = self.deployed.plan(budget, cost_weight, here, unguarded)
        split = route_with_empty(questions, ids, lambda keep: self.route(
            [questions[i] for i in keep], [ids[i] for i in keep], budget, cost_weight, max_tokens, here, unguarded),
            self.index)
        if split is not None:
            return split
        deep, xq, xa, tokens = self.inputs(questions)
        act, plan = self.deployed.decide(xq, xa, tokens, plan, max_tokens)
        fields = action_contexts(self.index.ladder, deep, self.deployed.space, act, self.depth, self.max_context_tokens,
                                 max_tokens)
        out = [(q, {"id": ids[q], "question": questions[q], **{k: v for k, v in f.items() if k != "context"},
                    "decided_by": plan["deploy"], "context": f["context"]}) for q, f in enumerate(fields)]
        records = explained([r for _, r in sorted(out, key=lambda p: p[0])], self.index,
                            {**plan, "calibrated_here": plan["here"]}, self.deployed.budgets, "the action router", unguarded)
        summary = {"n": len(records), "n_empty": 0, "mean_tokens": float(np.mean([r["tokens"] for r in records])),
                   "budget": plan["budget"], "lambda": plan["lambda"], "deployed": plan["deploy"],
                   "envelope": plan["envelope"], "calibrated_here": plan["here"], "max_tokens": max_tokens}
        return records, summary
