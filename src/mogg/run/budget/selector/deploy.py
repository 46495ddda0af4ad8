"""The evidence selector as a directory you deploy (:class:`DeployedSelector`; written by its final fit,
:mod:`mogg.run.budget.selector.final`, or its transfer fit, :mod:`mogg.run.budget.selector.transfer`):
one scorer on every question's candidates, a cost weight per budget, the guard's decision per
budget, applied to new questions by ``mogg-route --budget`` (:mod:`mogg.run.budget.selector.session`).

``<run>/<ladder>/selector/final`` (an artifact: written atomically, sha256 of every file in
``manifest.json``) holds

* ``model.txt``: the LightGBM scorer (text format, no pickle) fitted on the candidates of every
  question with gold evidence but a seeded validation slice (its early stopping);
* ``deploy.json``: the selector's settings (candidates: depth, units per chunk, plans, cosine),
  E (the training questions' median evidence tokens, in F1_hat), per budget B lambda chosen on
  the validation slice (:func:`mogg.evaluation.frontier_guard.best_lambda` over the plans' F1_hat
  and true F1), **the guard's decision** (the cross-fitted selector against the envelope each fold
  chose on its training folds, on every question out of fold:
  :func:`mogg.evaluation.frontier_guard.out_of_fold_guard`) and the envelope's (level, k, cap)
  on all questions, deployed where the guard keeps it; the action space and the level router's
  spec part (ladder, retriever, corpus and encoder configs, so ``mogg-route`` rebuilds them);
* ``model_whole.txt`` (a transfer directory fitted with ``transfer_whole_features``): a second scorer
  over another feature view, with its own lambda and guard per budget (``deploy.json``'s ``whole``),
  read instead of the first on a new set whose evidence looks like whole short documents
  (:func:`mogg.run.budget.selector.transfer.shape_scorer`);
* ``decisions.json``: per budget the plan each training question gets (units read - 1; -1: the
  envelope), the selector's own plan where the guard kept the envelope too, and the validation
  slice's ids; routing the same questions must reproduce them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, config_hash, strict_json, write_artifact
from mogg.core.knobs import recorded
from mogg.core.seal import seal_holder
from mogg.routing.plans import ActionSpace, decide
from mogg.run.budget.deployed import DECISIONS, DEPLOY, check_budget_value, check_budgets, open_deployed
from mogg.run.budget.selector.plans import Ranked, estimated_f1, plan_table, rank_candidates

log = logging.getLogger(__name__)

FORMAT = "mogg-evidence-selector/1"
# deploy.json's reading keys: in a transfer directory each records a knob (its value at training);
# an in-set directory reads with its own evidence knob, and with a rule and a view no knob sets
READ_KNOBS = {"evidence": "transfer_evidence", "lambda_rule": "transfer_lambda", "features_view": "transfer_features"}
IN_SET_READS = {"lambda_rule": "here", "features_view": "raw"}  # lambda from the routed questions' tokens, raw columns
# what every directory written before the key existed read with, whatever the knob's default is now: a
# transfer directory from before issue 58's feature views was fitted on the raw columns
BEFORE_KEY = {"features_view": "raw"}
# likewise for knobs: a directory written before transfer_page_words was fitted without the page columns
# and one written before transfer_options_vote read without the options' vote
# and one written before transfer_chain_cap read past the chain on sections of sources
# and one written before transfer_section_cohesion left a paragraph another question predicts higher out of a section
BEFORE_KNOB = {"transfer_page_words": False, "transfer_options_vote": False, "transfer_chain_cap": False,
               "transfer_section_cohesion": False}
MODEL = "model.txt"
MODEL_WHOLE = "model_whole.txt"  # the whole-document scorer of a transfer directory (deploy.json's "whole")
WHOLE_KEYS = ("features_view", "n_features", "budgets", "trees")  # what deploy.json's "whole" holds of its own


def plans_of(pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray, texts, n_questions: int,
             depth: int, evidence_len, density: np.ndarray | None = None) -> tuple[Ranked, np.ndarray, np.ndarray]:
    """Every question's ranking by ``pred`` [N] and its plans' F1_hat and tokens [Q, depth] (the
    one computation training and routing share: the same inputs give the same decisions); F1_hat reads
    ``density`` [N] where given (on sections of a page: :func:`~mogg.run.budget.selector.set_shape.section_density`),
    else ``pred``."""
    ranked = rank_candidates(cand_q, pred, tokens, unit, n_questions, depth)
    rows = np.arange(n_questions)
    _, plan_tokens = plan_table(ranked, texts, unit, [""] * n_questions, rows)
    dens = pred if density is None else density
    return ranked, estimated_f1(ranked, dens, tokens, rows, evidence_len), plan_tokens


@dataclass
class DeployedSelector:
    """A final evidence selector (see the module doc); ``booster`` is LightGBM's."""

    booster: object
    deploy: dict  # settings, evidence_len, budgets, space, spec
    decisions: dict  # ids, val, budgets: {B: [Q] plan index (-1: envelope)}
    whole_booster: object = None  # the whole-document scorer (deploy["whole"]), or None

    def whole(self) -> "DeployedSelector | None":
        """The directory as its whole-document scorer reads (its booster, view, lambdas and guard:
        ``deploy["whole"]`` over the rest of ``deploy``); None where it has none."""
        if self.whole_booster is None:
            return None
        deploy = {k: v for k, v in self.deploy.items() if k != "whole"}
        return DeployedSelector(self.whole_booster, {**deploy, **self.deploy["whole"]}, self.decisions)

    @property
    def space(self) -> ActionSpace:
        return ActionSpace.from_json(self.deploy["space"])

    def calibrated(self) -> list[int]:
        return sorted(int(b) for b in self.deploy["budgets"])

    @property
    def transfer(self) -> bool:
        """Trained on other sets (``train_sources``: its fit names them) and read on a new one."""
        return "sources" in (self.deploy.get("fit") or {})

    def knob(self, name: str, kind):
        """Knob ``name`` as this directory was trained with (``settings``: every knob, recorded by its
        fit); one written before the knob existed: the knob's default, declared by ``kind`` (the
        selector's class, :class:`mogg.run.budget.selector.EvidenceSelectorKind`), or where every such
        directory read otherwise, what it read (:data:`BEFORE_KNOB`)."""
        settings = self.deploy.get("settings")
        if name in BEFORE_KNOB and not (isinstance(settings, dict) and name in settings):
            return BEFORE_KNOB[name]
        return recorded(settings, kind, name)

    def page_columns(self, kind) -> bool:
        """Whether this directory's scorers read the page-contrastive columns (a transfer directory fitted
        with ``transfer_page_words``; :data:`mogg.run.budget.selector.candidates.PAGE_FEATURES`)."""
        return bool(self.transfer and self.knob("transfer_page_words", kind))

    def reads(self, key: str, kind):
        """What this directory reads with (``evidence``, ``lambda_rule`` or ``features_view``), as its
        fit recorded it; one written before the key: what every such directory read with
        (:data:`BEFORE_KEY`), else in a transfer directory the knob the key records (:data:`READ_KNOBS`,
        :meth:`knob`), in an in-set one its ``evidence`` knob, else :data:`IN_SET_READS`."""
        if key in self.deploy:
            return self.deploy[key]
        if key in BEFORE_KEY:
            return BEFORE_KEY[key]
        if self.transfer:
            return self.knob(READ_KNOBS[key], kind)
        return self.knob("evidence", kind) if key == "evidence" else IN_SET_READS[key]

    def plan(self, budget: float | None = None, cost_weight: float | None = None, unguarded: bool = False) -> dict:
        """``{"lambda", "deploy", "envelope", "budget"}`` at a calibrated budget or a cost weight
        (``unguarded``: the selector even where the guard kept the envelope)."""
        if (budget is None) == (cost_weight is None):
            raise ValueError("give a budget (mean context tokens) or a cost weight, not both and not neither")
        if cost_weight is not None:
            lam = float(cost_weight)
            if not (np.isfinite(lam) and lam >= 0):
                raise ValueError(f"cost weight must be a finite number >= 0 (F1 per token), got {cost_weight!r}")
            return {"lambda": lam, "deploy": "router", "envelope": None, "budget": None}
        b = check_budget_value(budget)
        if b != int(b) or str(int(b)) not in self.deploy["budgets"]:
            raise ValueError(f"budget {b:g} was not calibrated for this selector; it holds "
                             f"{', '.join(map(str, self.calibrated()))} (retrain with frontier.budgets=[...] to add one, "
                             "or give --cost-weight)")
        p = self.deploy["budgets"][str(int(b))]
        return {"lambda": float(p["lambda"]), "deploy": "router" if unguarded else p["deploy"],
                "envelope": int(p["envelope"]), "budget": int(b)}

    def choose(self, util: np.ndarray, plan_tokens: np.ndarray, plan: dict) -> np.ndarray:
        """The plan per question (units read - 1; -1 where the guard deploys the envelope)."""
        if plan["deploy"] == "envelope":
            return np.full(len(util), -1, dtype=np.int64)
        return decide(util, plan_tokens, plan["lambda"]).astype(np.int64)

    def save(self, directory: Path) -> Path:
        if (self.whole_booster is None) != ("whole" not in self.deploy):
            raise ValueError("a whole-document scorer and deploy.json's 'whole' go together")

        def write(tmp: Path) -> None:
            self.booster.save_model(str(tmp / MODEL))
            if self.whole_booster is not None:
                self.whole_booster.save_model(str(tmp / MODEL_WHOLE))
            (tmp / DEPLOY).write_text(strict_json(self.deploy, indent=1))
            (tmp / DECISIONS).write_text(strict_json(self.decisions))
            seal_holder(tmp, DEPLOY)  # last: the seal covers every other file

        content = config_hash({"deploy": self.deploy, "decisions": self.decisions, "trees": self.booster.num_trees(),
                               **({"whole_trees": self.whole_booster.num_trees()} if self.whole_booster else {})})
        return write_artifact(Path(directory), write, {"format": FORMAT, "content": content,
                                                       "data_key": self.deploy["spec"]["provenance"]["data_key"]})

    @classmethod
    def load(cls, directory: Path) -> "DeployedSelector":
        import lightgbm as lgb

        d = Path(directory)
        if not (d / DEPLOY).is_file() or not (d / MODEL).is_file():
            raise ArtifactError(f"{d}: not a deployed evidence selector (no {DEPLOY} / {MODEL}); train one with "
                                "`python train.py experiment=selector data=<set> router.fit=all`")
        def booster_of(path: Path):
            check_model_text(path)  # LightGBM aborts the process on a truncated file: checked first
            try:
                return lgb.Booster(model_file=str(path))
            except (OSError, ValueError, lgb.basic.LightGBMError) as e:
                raise ArtifactError(f"{path}: unreadable selector ({e}); retrain it") from None

        with open_deployed(d, FORMAT, "retrain the selector") as (deploy, decisions):
            booster = booster_of(d / MODEL)
            whole = deploy.get("whole")
            if whole is not None and not (isinstance(whole, dict) and set(whole) == set(WHOLE_KEYS)):
                raise ArtifactError(f"{d / DEPLOY}: damaged ('whole' must hold {list(WHOLE_KEYS)}); retrain the selector")
            if (whole is not None) != (d / MODEL_WHOLE).is_file():
                raise ArtifactError(f"{d}: deploy.json's 'whole' and {MODEL_WHOLE} go together; retrain the selector")
            whole_booster = booster_of(d / MODEL_WHOLE) if whole is not None else None
        try:
            n_actions = ActionSpace.from_json(deploy["space"]).n
            n_features = int(deploy["n_features"])
        except (KeyError, TypeError, ValueError) as e:
            raise ArtifactError(f"{d / DEPLOY}: damaged ({e!r}); retrain the selector") from None
        check_budgets(d / DEPLOY, deploy.get("budgets"), n_actions)
        scorers = [(MODEL, booster, n_features)]
        if whole_booster is not None:
            check_budgets(d / DEPLOY, whole["budgets"], n_actions)
            scorers.append((MODEL_WHOLE, whole_booster, whole["n_features"]))
        for name, b, n in scorers:
            if b.num_feature() != int(n):
                raise ArtifactError(f"{d}: the scorer {name} reads {b.num_feature()} features, deploy.json says "
                                    f"{n}; retrain the selector")
        deploy["spec"]["_dir"] = str(d)
        return cls(booster, deploy, decisions, whole_booster)


def check_model_text(path: Path) -> None:
    """A LightGBM text model that is whole: its header's ``tree_sizes`` add up to the trees section,
    each block where the header puts it (LightGBM itself aborts the process on a truncated file)."""
    import re

    try:
        b = path.read_bytes()
    except OSError as e:
        raise ArtifactError(f"{path}: unreadable ({e}); retrain the selector") from None
    start, end = b.find(b"\nTree=0\n"), b.find(b"\nend of trees")
    sizes = re.search(rb"^tree_sizes=([0-9 ]*)$", b[: max(start, 0)], re.M)
    ok = b.startswith(b"tree\n") and start > 0 and end > start and sizes is not None
    if ok:
        offsets = np.cumsum([0] + [int(x) for x in sizes.group(1).split()])
        ok = int(offsets[-1]) == end + 1 - (start + 1) and all(
            b.startswith(b"Tree=%d\n" % i, start + 1 + int(o)) for i, o in enumerate(offsets[:-1]))
    if not ok:
        raise ArtifactError(f"{path}: not a whole LightGBM text model (truncated or edited); retrain the selector")


def is_selector_dir(directory: Path) -> bool:
    """Whether ``directory`` holds a deployed evidence selector."""
    p = Path(directory) / DEPLOY
    if not p.is_file() or not (Path(directory) / MODEL).is_file():
        return False
    try:
        return json.loads(p.read_text()).get("format") == FORMAT
    except (OSError, ValueError):
        return False
