"""Route new questions with the deployed evidence selector: per question the units (sentences) it
reads inside the retrieved chunks, their tokens, at a calibrated budget or a cost weight
(``mogg-route --checkpoint <run>/<ladder>/selector/final --budget 128``).

    from mogg.run.budget.selector.session import SelectorSession
    s = SelectorSession.from_checkpoint("checkpoints/sel_final/mog/selector/final")
    records, summary = s.route(["Is X associated with Y?"], budget=128)

The inputs are built as training built them (:func:`mogg.run.budget.selector.stage.candidate_features`
over the ladder's deep hits, no labels), the plans and their F1_hat by the function the final fit
used (:func:`mogg.run.budget.selector.deploy.plans_of`): routing the training questions reproduces the
decisions the fit recorded (a test does). Where the guard kept the envelope at B, each question
reads the envelope's (level, k, cap) instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mogg.core.text import count_tokens
from mogg.run.budget.explain import explained
from mogg.run.budget.selector.adapt import voting_options
from mogg.run.budget.selector.best_source import ReadRows
from mogg.run.budget.selector.candidates import option_column
from mogg.run.budget.selector.deploy import DeployedSelector, plans_of
from mogg.run.budget.selector.plans import document_tokens, evidence_estimate
from mogg.run.budget.selector.set_shape import Paragraphs, candidate_paragraphs
from mogg.run.budget.selector.stage import candidate_features
from mogg.run.budget.selector.transfer import read_here, read_source_here, shape_scorer, transfer_view
from mogg.run.budget.shared import action_contexts
from mogg.run.route_paths import build_encoder, check_levels, rebuild_index, route_with_empty
from mogg.search import LadderIndex

log = logging.getLogger(__name__)


class SelectorSession:
    """A deployed evidence selector with the ladder, retriever and encoder it reads with."""

    def __init__(self, deployed: DeployedSelector, index: LadderIndex, encoder=None, artifacts: Path | None = None,
                 *, kind):
        self.deployed, self.index, self.encoder, self.artifacts = deployed, index, encoder, artifacts
        self.kind = kind  # the selector's class: its knobs' defaults, what a directory written before one reads
        spec = deployed.deploy["spec"]
        self.k_r, self.depth = int(spec["compat"]["k_r"]), int(spec["frontier"]["depth"])
        self.max_context_tokens = spec["frontier"].get("max_context_tokens")
        check_levels(spec, index.ladder)

    @classmethod
    def from_checkpoint(cls, directory: str | Path, artifacts: str | Path | None = "auto",
                        overrides: Sequence[str] = (), data_dir: str | Path | None = None,
                        corpus: Sequence[str] = (), *, kind) -> "SelectorSession":
        """Load the directory and rebuild (or load from the artifact store) its ladder, retriever
        and encoder, as :meth:`mogg.run.budget.actions.session.ActionSession.from_checkpoint` does
        (``kind``: the selector's class, :meth:`mogg.run.budget.selector.EvidenceSelectorKind.session`)."""
        dep = DeployedSelector.load(Path(directory))
        where = str(Path(directory) / "deploy.json")
        comps, art, index = rebuild_index(dep.deploy["spec"].get("components"), overrides, data_dir, artifacts, where,
                                          corpus=corpus)
        encoder = None
        if dep.deploy["settings"]["cosine"]:  # the unit embeddings cached in this machine's artifact store
            encoder = build_encoder(comps.encoder, where, "spec.components.encoder", art,
                                    **({"cache_dir": str(art)} if art is not None else {}))
        return cls(dep, index, encoder, art, kind=kind)

    def inputs(self, questions: Sequence[str], options: Sequence[str] | None = None):
        """(the deep hits, candidates, their features [N, F], their tokens [N], their documents' tokens [N], their
        paragraphs: :class:`~mogg.run.budget.selector.set_shape.Paragraphs`, None for a ladder without them, every
        unit's tokens [U]) for ``questions``."""
        _, deep = self.index.search_deep(list(questions), self.k_r, self.depth)
        opts = list(options) if options is not None else [""] * len(questions)
        st = self.deployed.deploy["settings"]
        # a directory written before depth > frontier.depth was refused trained with the clamp to it
        depth = min(int(st["depth"]), self.depth)
        context = bool(self.deployed.knob("context", self.kind))  # absent: written before the knob, its default
        lex, cand, x = candidate_features(self.index.ladder, deep, list(questions), opts, depth, int(st["per_chunk"]),
                                          bool(st["cosine"]), self.encoder, self.artifacts, self.index.key,
                                          context=context, page=self.deployed.page_columns(self.kind))
        return deep, cand, x, lex.unit_tokens[cand.unit].astype(float), \
            document_tokens(self.index.ladder.units.doc, lex.unit_tokens, cand.unit), \
            candidate_paragraphs(self.index.ladder.paragraph_starts(), lex.unit_tokens, cand.unit,
                                 self.index.ladder.units.doc, self.index.ladder.units.text,
                                 bool(self.deployed.knob("transfer_section_cohesion", self.kind))), lex.unit_tokens

    def scorer(self, x: np.ndarray, cand, tokens: np.ndarray, doc_tokens: np.ndarray, n_questions: int,
               paras: Paragraphs | None = None, unit: str | None = None, options: Sequence[str] | None = None
               ) -> tuple[DeployedSelector, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """The scorer these questions are read with, its predictions [N] (``x``: the raw columns
        :meth:`inputs` gives) and the set's shape the ``fits`` price reads: the directory's scorer, in its
        feature view (in-set: raw), or a transfer directory's whole-document scorer where their evidence
        looks like whole short documents (:func:`mogg.run.budget.selector.transfer.shape_scorer`; ``unit``: the
        evidence unit declared, None: the directory's; ``options``: each question's answer options as one text, the
        ones that vote: :func:`mogg.run.budget.selector.adapt.voting_options`)."""
        context = bool(self.deployed.knob("context", self.kind))

        def x_of(view: str) -> np.ndarray:
            return x if view == "raw" else transfer_view(x, cand.q, n_questions, view, self.index.ladder.level_names,
                                                         context, self.deployed.page_columns(self.kind))
        return shape_scorer(self.deployed, self.kind, x_of, cand.q, cand.unit, self.unit_docs(), tokens,
                            doc_tokens, n_questions, paras, unit,
                            voting_options(option_column(x, len(self.index.ladder.level_names)), cand.q, options))

    def unit_docs(self) -> np.ndarray:
        """Every unit's document [U] as the set-shape decisions read it, a source's sections together
        (:meth:`mogg.ladders.base.Ladder.source_unit_docs`: the positions the artifact store keeps beside the ladder)."""
        return self.index.ladder.source_unit_docs()

    def table_tokens(self, deep, questions: Sequence[str]) -> np.ndarray:
        """Every fixed (level, k, cap)'s tokens on these questions [Q, A] (no labels): where the guard
        kept the envelope, the training sets' best one reading <= B here is chosen from them."""
        from mogg.run.budget.shared import action_inputs

        feats = np.zeros((len(questions), 0))
        _, table, _, _ = action_inputs(self.index.ladder, deep, feats, [""] * len(questions), self.depth,
                                       self.deployed.deploy["spec"]["frontier"]["caps"], self.max_context_tokens)
        return table.tokens

    def route(self, questions: Sequence[str], ids: Sequence[str] | None = None, budget: float | None = None,
              cost_weight: float | None = None, options: Sequence[str] | None = None, here: bool = False,
              unguarded: bool = False, unit: str | None = None) -> tuple[list[dict], dict]:
        """One record per question (the units read in rank order, their tokens, who decided) and a
        summary (the plan, mean tokens). ``options``: each question's answer options as one text;
        ``here`` (with a budget; a new set): lambda re-chosen so these questions' mean tokens are at most
        B, and where the guard kept the envelope, the training sets' best configuration reading <= B
        here (label-free: :func:`mogg.run.budget.selector.transfer.read_here`); ``unguarded``: the
        selector even where the guard kept the envelope; ``unit`` (with ``here``): the set's evidence unit
        (:data:`~mogg.run.budget.selector.units.UNITS`) in place of the directory's ``transfer_unit``."""
        questions = [str(q) for q in questions]
        if not questions:
            return [], {"n": 0}
        ids = list(ids) if ids is not None else [str(i) for i in range(len(questions))]
        dep = self.deployed
        if here and budget is None:
            raise ValueError("calibrating on the routed questions needs a budget (mean tokens), not a cost weight")
        if unit is not None and not (here and dep.transfer):
            raise ValueError("--evidence-unit declares a new set's evidence unit: it applies to a transfer directory "
                             "(trained on other sets) read with --calibrate-here"
                             + ("" if dep.transfer else "; this directory is in-set: it reads its own corpus"))
        plan = dep.plan(budget, cost_weight, unguarded)
        split = route_with_empty(questions, ids, lambda keep: self.route(
            [questions[i] for i in keep], [ids[i] for i in keep], budget, cost_weight,
            None if options is None else [options[i] for i in keep], here, unguarded, unit), self.index)
        if split is not None:
            return split
        if dep.deploy.get("with_options", 0) > 0.5 and not any(o.strip() for o in (options or [])):
            log.warning("this selector was trained on questions with answer options (%.0f%%) and these have none: its "
                        "option features read 0 here (give each jsonl line its 'options')", 100 * dep.deploy["with_options"])
        deep, cand, x, tokens, doc_tokens, paras, unit_tokens = self.inputs(questions, options)
        lad, sel = self.index.ladder, dep.deploy["settings"]
        dep, pred, docs = self.scorer(x, cand, tokens, doc_tokens, len(questions), paras, unit, options)
        plan = dep.plan(budget, cost_weight, unguarded)  # the whole-document scorer has its own lambdas and guard
        evidence = dep.reads("evidence", self.kind)  # directories from before the knob: its default
        units = cand.unit  # the rows read: the candidates, and with --calibrate-here the best sources' other units
        if here:
            table_tokens = self.table_tokens(deep, questions) if plan["deploy"] == "envelope" else None
            cq, units, tokens, doc_tokens, pred = read_source_here(ReadRows(cand.q, cand.unit, tokens, doc_tokens, pred),
                                                                   lad, unit_tokens, docs)
            if len(units) != len(cand.unit):
                paras = None  # never sections of a page there (best_source.reads_sources)
            choice, ranked, plan_tok, applied = read_here(dep, pred, cq, units, tokens, lad.units.text,
                                                          len(questions), plan["budget"], evidence, table_tokens,
                                                          plan["deploy"], doc_tokens,
                                                          dep.reads("lambda_rule", self.kind), unit_doc=self.unit_docs(),
                                                          docs=docs, paras=paras,
                                                          chain_cap=bool(dep.knob("transfer_chain_cap", self.kind)))
            plan = {**plan, "lambda": applied["lambda"] if applied["lambda"] is not None else plan["lambda"],
                    "envelope": applied["envelope"], "calibrated_here": True}
        else:
            e = evidence_estimate(evidence, float(dep.deploy["evidence_len"]), cand.q, pred, tokens, doc_tokens,
                                  len(questions))
            ranked, util, plan_tok = plans_of(pred, cand.q, cand.unit, tokens, lad.units.text, len(questions),
                                              sel["plans"], e)
            choice = dep.choose(util, plan_tok, plan)
        env = action_contexts(lad, deep, dep.space, np.full(len(questions), plan["envelope"]), self.depth,
                              self.max_context_tokens) if plan["deploy"] == "envelope" else None
        records = []
        for i, q in enumerate(questions):
            if env is not None:
                f = env[i]
                records.append({"id": ids[i], "question": q, "plan": -1, "tokens": f["tokens"], "decided_by": "envelope",
                                "envelope": {k: f[k] for k in ("level", "k", "cap")}, "reads": f["reads"],
                                "context": f["context"]})
                continue
            rows = [int(r) for r in ranked.rows[i, : choice[i] + 1] if r >= 0]
            ctx = [{"rank": n, "unit": int(units[r]), "doc_id": lad.units.doc_ids[int(lad.units.doc[units[r]])],
                    "text": lad.units.text[int(units[r])]} for n, r in enumerate(rows)]
            records.append({"id": ids[i], "question": q, "plan": int(choice[i]),
                            "tokens": int(sum(count_tokens(c["text"]) for c in ctx)), "decided_by": "selector",
                            "reads": f"the {len(ctx)} best-ranked sentence{'s' if len(ctx) != 1 else ''} of the candidates",
                            "context": ctx})
        explained(records, self.index, plan, dep.deploy["budgets"], "the evidence selector", unguarded)
        summary = {"n": len(records), "mean_tokens": float(np.mean([r["tokens"] for r in records])),
                   "budget": plan["budget"], "lambda": plan["lambda"], "deployed": plan["deploy"],
                   **({"calibrated_here": True} if plan.get("calibrated_here") else {})}
        return records, summary
