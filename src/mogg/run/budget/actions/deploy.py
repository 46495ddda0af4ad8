"""The cost-aware action router as a directory you deploy: the final fit (``router.fit=all`` or
``both`` with a frontier), its cost weight per calibrated budget and the guard's decision there.

A directory (an artifact: written atomically, sha256 of every file in ``manifest.json``) holds

* ``actions.safetensors`` + ``actions.json``: the scorer fitted on every question with gold
  evidence but a seeded validation slice (:class:`mogg.run.budget.actions.scorer.ActionRouter`);
* ``deploy.json``: the action space (levels, k = 1..depth, caps), per budget B the cost weight
  lambda chosen on the validation slice, whether the router or the fixed envelope is deployed at
  B (the guard, decided on the cross-fit's out-of-fold questions) and the envelope's (level, k,
  cap) chosen on all training questions; the spec of the level router's inputs (feature recipe,
  ladder and retriever keys, the components' configs, so ``mogg-route`` rebuilds them);
* ``decisions.json``: the action the final fit decides for each training question at each
  budget (``mogg-route`` on the same questions must reproduce them: a test does) and the ids of
  its validation slice, where lambda was calibrated.

A budget the directory was not calibrated for is refused with the list it holds (lambda is
chosen per budget on validation questions, with the guard's decision; interpolating either
would deploy something nobody checked); ``cost_weight`` sets lambda directly instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, config_hash, strict_json, write_artifact
from mogg.core.seal import seal_holder
from mogg.routing.plans import ActionSpace, calibrate_lambda, decide
from mogg.run.budget.actions.scorer import ActionRouter
from mogg.run.budget.deployed import DECISIONS, DEPLOY, check_budget_value, check_budgets, open_deployed

log = logging.getLogger(__name__)

FORMAT = "mogg-action-router/1"


@dataclass
class DeployedActions:
    """A final action router with what deploying it at a budget needs (see the module doc)."""

    router: ActionRouter
    space: ActionSpace
    budgets: dict[int, dict]  # B -> {"lambda", "deploy": "router" | "envelope", "envelope": action, "guard": {...}}
    spec: dict  # the level router's spec part: levels, recipe, compat, provenance, components
    decisions: dict  # {"ids": [Q], "val": the calibration questions' ids, "budgets": {B: [Q] actions}}

    def calibrated(self) -> list[int]:
        return sorted(self.budgets)

    def plan(self, budget: float | None = None, cost_weight: float | None = None, here: bool = False,
             unguarded: bool = False) -> dict:
        """What deploying at ``budget`` (a calibrated one) or at cost weight ``cost_weight`` means:
        ``{"lambda", "deploy", "envelope", "budget", "here"}``; exactly one of the two is given.
        ``here``: lambda (and the envelope) are re-chosen on the routed questions so that their mean
        tokens are B (:meth:`decide`); ``unguarded``: the router even where the guard kept the envelope."""
        if (budget is None) == (cost_weight is None):
            raise ValueError("give a budget (mean context tokens) or a cost weight, not both and not neither")
        if cost_weight is not None:
            if here:
                raise ValueError("calibrating on the routed questions needs a budget (mean tokens), not a cost weight")
            lam = float(cost_weight)
            if not (np.isfinite(lam) and lam >= 0):
                raise ValueError(f"cost weight must be a finite number >= 0 (F1 per token), got {cost_weight!r}")
            return {"lambda": lam, "deploy": "router", "envelope": None, "budget": None, "here": False}
        b = check_budget_value(budget)
        if b != int(b) or int(b) not in self.budgets:
            raise ValueError(f"budget {b:g} was not calibrated for this router; it holds "
                             f"{', '.join(map(str, self.calibrated()))} (retrain with frontier.budgets=[...] to add one, "
                             "or give --cost-weight)")
        p = self.budgets[int(b)]
        return {"lambda": float(p["lambda"]), "deploy": "router" if unguarded else p["deploy"],
                "envelope": int(p["envelope"]), "budget": int(b), "here": bool(here)}

    def choose(self, xq: np.ndarray, xa: np.ndarray, tokens: np.ndarray, plan: dict,
               max_tokens: float | None = None) -> np.ndarray:
        """The action per question (int64 [Q]) under ``plan``: :meth:`decide`'s actions."""
        return self.decide(xq, xa, tokens, plan, max_tokens)[0]

    def decide(self, xq: np.ndarray, xa: np.ndarray, tokens: np.ndarray, plan: dict,
               max_tokens: float | None = None) -> tuple[np.ndarray, dict]:
        """The action per question (int64 [Q]) under ``plan`` (:meth:`plan`) and the plan as applied:
        the envelope's fixed action where the guard kept it, else argmax u - lambda * tokens (among
        actions within ``max_tokens``; the cheapest where none is). ``xq`` [Q, Dq], ``xa`` [Q, A, Da],
        ``tokens`` [Q, A].

        With ``plan["here"]`` (a new set, or any batch that should spend B): lambda is the smallest
        whose decisions read at most B mean tokens on these questions, and the envelope is the
        training questions' best configuration among those reading at most B here. Both need only
        the token counts, which are known after retrieval: no labels."""
        if tokens.shape != (len(xq), self.space.n):
            raise ValueError(f"tokens have shape {tokens.shape}; this router's action space has {self.space.n} actions")
        applied = dict(plan)
        if plan["deploy"] == "envelope":
            env = self.envelope_here(tokens, plan["budget"]) if plan.get("here") else plan["envelope"]
            applied["envelope"] = int(env)
            return np.full(len(xq), env, dtype=np.int64), applied
        util = self.router.utilities(xq, xa)
        if plan.get("here"):
            # actions over the hard cap can never be chosen (decide's rule), so calibrate without them
            u = util if max_tokens is None else np.where(tokens > max_tokens, -1e30, util)
            applied["lambda"] = calibrate_lambda(u, tokens, plan["budget"])
        return decide(util, tokens, applied["lambda"], max_tokens).astype(np.int64), applied

    def envelope_here(self, tokens: np.ndarray, budget: float) -> int:
        """The training questions' best fixed (level, k, cap) among those whose mean tokens on these
        questions (``tokens`` [Q, A]) are at most ``budget`` (the cheapest if none is); the stored
        envelope for a directory written before its training statistics were kept."""
        from mogg.run.budget.shared import envelope_here

        stats = self.spec.get("configs") or self.spec.get("transfer")  # "transfer": written before 2026-11-26
        if not stats:
            return int(self.budgets[int(budget)]["envelope"])
        return envelope_here(stats, tokens, budget)

    # -- persistence ------------------------------------------------------------------------
    def save(self, directory: Path) -> Path:
        deploy = {"format": FORMAT, "space": self.space.to_json(),
                  "budgets": {str(b): p for b, p in sorted(self.budgets.items())}, "spec": self.spec}
        decisions = {"ids": list(self.decisions["ids"]), "val": list(self.decisions.get("val", [])),
                     "budgets": {str(b): [int(a) for a in v] for b, v in sorted(self.decisions["budgets"].items())}}

        def write(tmp: Path) -> None:
            self.router.save(tmp)
            (tmp / DEPLOY).write_text(strict_json(deploy, indent=1))
            (tmp / DECISIONS).write_text(strict_json(decisions))
            seal_holder(tmp, DEPLOY)  # last: the seal covers every other file

        # the manifest's config names the content: a retrain with other settings, seed or data gives
        # another hash and replaces the directory (the same hash would be adopted as "already published")
        content = config_hash({"deploy": deploy, "decisions": decisions, "training": self.router.summary})
        return write_artifact(Path(directory), write, {"format": FORMAT, "content": content,
                                                       "data_key": self.spec.get("provenance", {}).get("data_key")})

    @classmethod
    def load(cls, directory: Path) -> "DeployedActions":
        """Load and verify (checksums, format, the scorer's shapes against the action space)."""
        d = Path(directory)
        if not (d / DEPLOY).is_file():
            raise ArtifactError(f"{d}: not a deployed action router (no {DEPLOY}); train one with "
                                "`python train.py experiment=frontier data=<set> router.fit=all`")
        with open_deployed(d, FORMAT, "retrain the router",
                           " with `python train.py experiment=frontier data=<set> router.fit=all`") as (deploy, decisions):
            try:
                router, _ = ActionRouter.load(d)
            except ValueError as e:
                raise ArtifactError(str(e)) from e
        try:
            space = ActionSpace.from_json(deploy["space"])
        except (KeyError, TypeError, ValueError) as e:
            raise ArtifactError(f"{d / DEPLOY}: space is damaged ({e!r}); retrain the router") from None
        if router.model.d_action != router.mean_a.shape[0] or len(router.mean_a) < 1:
            raise ArtifactError(f"{d}: the scorer's action features do not match its standardisation; retrain it")
        budgets = check_budgets(d / DEPLOY, deploy.get("budgets"), space.n)
        try:
            dec = {"ids": decisions["ids"], "val": decisions.get("val", []),
                   "budgets": {int(b): np.asarray(v, dtype=np.int64) for b, v in decisions["budgets"].items()}}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ArtifactError(f"{d / DECISIONS}: damaged ({e!r}); retrain the router") from None
        spec = {**deploy["spec"], "_dir": str(d)}
        return cls(router, space, budgets, spec, dec)
