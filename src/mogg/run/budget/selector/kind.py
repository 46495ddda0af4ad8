"""The evidence selector as a budget-router kind (``conf/frontier/routers/selector.yaml``; issue 38).

It reads inside the chunk: every level's top-``depth`` chunks give candidate units (sentences),
a LightGBM scorer cross-fitted like the routers regresses each one's evidence density, and per
question the prefix of its ranking with the best estimated F1 - lambda * tokens is read
(:mod:`mogg.run.budget.selector.stage`). Its rows follow the chunk oracle: the selector guarded and not,
route + trim (a chunk-level router evaluated before it, trimmed by the selector) and the sentence
oracle. Checkpoints: ``<checkpoint>/<ladder>/selector/`` (``fold<k>``, ``final``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mogg.core.knobs import Check, check_knobs, count, flag, knob, one_of
from mogg.run.budget.base import TRANSFER_DIR, BudgetRouter, LadderFrontier
from mogg.run.budget.selector.adapt import VIEWS
from mogg.run.budget.selector.plans import EVIDENCE, LAMBDA_RULES
from mogg.run.budget.selector.scorer import check_params
from mogg.run.budget.selector.units import AUTO, UNITS
from mogg.run.context import RunContext

NODE = "frontier.routers.selector"  # where its knobs are set (the messages that name one say so)
VARIANTS = "variants"  # <checkpoint>/<ladder>/selector/variants/<name>: each variant's cross-fit
VARIANT_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass
class EvidenceSelectorKind(BudgetRouter):
    """Its knobs, declared here only: each field's default, check and doc (``conf/frontier/routers/selector.yaml``
    names the class; this object travels down). ``variants``: each cross-fitted beside the selector
    (``<checkpoint>/<ladder>/selector/variants/<name>``) and a row of the same run's frontier table,
    "selector (<name>)", on the same questions and folds, with its paired interval against the
    selector under the table (issue 49). The deployed directory is the selector's."""

    depth: int = knob(8, count(), "candidates: the units of every level's top-depth chunks (at most frontier.depth: "
                      "deeper is refused, not clamped)", variant=True)
    per_chunk: int = knob(24, count(), "at most this many units of one chunk (those sharing the most question words)",
                          variant=True)
    plans: int = knob(48, count(), "plans: the first 1..plans units of the ranking", variant=True)
    cosine: bool = knob(True, flag(), "the question-unit cosine of the bundled encoder as a feature", variant=True)
    params: dict = knob(check=Check(lambda v: isinstance(v, dict), "LightGBM knobs as a mapping",
                                    lambda v: check_params(dict(v))),
                        doc="LightGBM knobs over mogg.run.budget.selector.scorer.PARAMS", factory=dict, variant=True)
    trim_of: str | None = knob("actions", Check(lambda v: v is None or isinstance(v, str),
                                                "a budget router's name or null"),
                               "route + trim: the chunk-level budget router whose plans it trims (its slot in "
                               "frontier.routers; null: no route + trim)")
    evidence: str = knob("median", one_of(EVIDENCE), "the estimated F1's evidence length: median (the training "
                         "questions') | predicted (per question, from its candidates' predicted density: label-free on "
                         "a new set) | document (per question, the tokens of its best-scored candidate's document)",
                         variant=True)
    transfer_evidence: str = knob("predicted", one_of(EVIDENCE), "the same for the selector trained on other sets "
                                  "(train_sources) and read on a new one: what its directory deploys with (the report "
                                  "shows a row for each; chosen by the worst of eight held-out shapes: docs/results.md)")
    transfer_lambda: str = knob("fits", one_of(LAMBDA_RULES), "that selector's lambda on a new set: fits (where the "
                                "block of candidates around at least half of its questions' best-scored candidate "
                                "covers half of that candidate's document, decided once per set as the whole-document "
                                "scorer is, read at least min(B, the median such document with its close neighbours: "
                                "on sections of one source, where they sit beside each other in the corpus, the "
                                "documents chained to the best one), more where learned reads more; else learned) | learned (at least the "
                                "training sets' validation lambda for B, raised to read <= B mean tokens there) | here "
                                "(the smallest reading <= B there); each a row of its own, chosen by the worst "
                                "held-out shape: docs/results.md")
    transfer_features: str = knob("within_question_no_document", one_of(VIEWS),
                                  "that selector's feature view (mogg.run.budget.selector.adapt.VIEWS): raw | "
                                  "within_question (each column's z-score and rank among the question's candidates "
                                  "added) | within_question_only | no_options | no_document (the document's columns "
                                  "dropped) | within_question_no_document; kept by the worst held-out shape "
                                  "(scripts/transfer_adaptations.py; docs/results.md)")
    transfer_whole_features: str | None = knob(
        "raw", Check(lambda v: v is None or v in VIEWS, f"one of {list(VIEWS)} or null"),
        "a second transfer scorer's feature view, read instead where the new set's evidence looks like whole short "
        "documents (most questions' best block of candidates covers its document; document columns help there and "
        "mislead inside long papers); null: one scorer; kept by the worst held-out shape (docs/results.md)")
    transfer_self_train: int | None = knob(
        50, Check(lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
                  "a count of questions >= 1 or null"),
        "where at least this many questions of a new set are read together, their candidates are reordered by a "
        "scorer refitted on their own candidates with the transferred scorer's confident choices as pseudo-labels "
        "(cross-fitted; the transferred scores' scale still prices: mogg.run.budget.selector.adapt.self_train, "
        "reorder); under the whole-document scorer only the documents' order; null: never; kept by the worst "
        "held-out shape (docs/results.md)")
    transfer_self_train_rounds: int = knob(
        2, count(), "rounds of that self-training where the refit orders the candidates (the first scorer): each "
        "round's pseudo-labels are the previous round's order; under the whole-document scorer the documents' order "
        "is refitted once; kept by the worst held-out shape (docs/results.md)")
    transfer_unit: str = knob(
        AUTO, one_of(UNITS), "the new set's evidence unit as that selector reads it: auto (decided once per set from "
        "its candidates, no labels: whole short documents, sections of a page, or sentences of long documents; "
        "mogg.run.budget.selector.set_shape) | document | section | sentence (declared by a user who knows it: no "
        "label-free rule tells a section of a long paper from a sentence of it; mogg-route --evidence-unit overrides "
        "it when routing; docs/results.md, \"One topic, many questions\")")
    transfer_options_vote: bool = knob(
        True, flag(), "where a new set's questions carry answer options, the transfer scorers' order fused (reciprocal "
        "ranks, equal weights) with each candidate's share of the options' words, in the self-training's pseudo-labels "
        "and in the order it reads (an explanation names the right "
        "option; where the training sets hold none that do, no transferred scorer learned to weigh that column): "
        "mogg.run.budget.selector.adapt.options_vote; a set without options, or whose options are a fixed answer set "
        "(PubMedQA's yes / no / maybe: adapt.fixed_answers), reads as without it; kept by the worst held-out shape "
        "(docs/results.md, 'The answer options vote')")
    transfer_chain_cap: bool = knob(
        True, flag(), "on sections of sources (a new set whose close documents sit beside each other in corpus order: an "
        "abstract's contexts, a paper's snippets kept together) each question reads at most its chain, the documents "
        "chained to its best one (what E is bounded by there), the price of a token calibrated on the plans within it: "
        "past the chain a plan reads another source (mogg.run.budget.selector.set_shape.source_chain; transfer.read_here); "
        "kept by the worst held-out shape (docs/results.md, 'At most the chain')")
    transfer_section_cohesion: bool = knob(
        True, flag(), "on sections of a page where a set's pages run their sections over paragraphs, a paragraph beside "
        "a question's section that another question predicts higher (not its best) continues the section where the two "
        "paragraphs are more alike than the pairs either side (mogg.run.budget.selector.cohesion.peak_links; "
        "set_shape.section_rows); kept by the worst held-out shape (docs/results.md, 'A contested paragraph')")
    transfer_page_words: bool = knob(
        False, flag(), "the transfer scorers also read the question's words each candidate holds that its page's other "
        "units lack (mogg.run.budget.selector.candidates.PAGE_FEATURES: on a page of one topic its words are on every "
        "section); measured over five seeds, not kept: within the noise on every held-out shape (docs/results.md, "
        "'A page's own words')")
    context: bool = knob(False, flag(), "also the neighbours' and the document's columns (the cosine of the units "
                         "around it, its document's mean and its rank there: "
                         "mogg.run.budget.selector.candidates.CONTEXT_FEATURES)", variant=True)
    variants: dict = knob(check=Check(lambda v: v is None or isinstance(v, dict), "name -> the knobs that differ",
                                      lambda v: {str(n): dict(k or {}) for n, k in dict(v or {}).items()}),
                          doc="name -> knobs that differ (those marked variant: depth, per_chunk, plans, cosine, "
                          "params, evidence, context), each a row \"selector (name)\" of the same run, e.g. "
                          "'+frontier.routers.selector.variants.ctx={context: true}'", factory=dict)

    TITLE: ClassVar[str] = "the evidence selector"
    HINT: ClassVar[str] = ""
    FORMAT: ClassVar[str] = "mogg-evidence-selector/1"
    ROUTE_FLAGS: ClassVar[tuple[str, ...]] = ("budget", "cost_weight", "here", "unguarded", "options", "unit")
    ROUTE_CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"unit": UNITS}  # mogg-route checks a flag's word
    ROUTE_NEEDS: ClassVar[dict[str, str]] = {"unit": "here"}  # ... and that it comes with the flag it needs

    def __post_init__(self) -> None:
        check_knobs(self, NODE)
        for n, v in self.variants.items():
            if not VARIANT_NAME.fullmatch(n):
                raise ValueError(f"frontier.routers.selector.variants: {n!r} is not a variant name (letters, digits, _ . -)")
            bad = sorted(set(v) - set(VARIANT_KNOBS))
            if bad:
                raise ValueError(f"frontier.routers.selector.variants.{n}: {', '.join(bad)} cannot vary (one of "
                                 f"{', '.join(VARIANT_KNOBS)})")
            self.variant(n)  # its knobs checked like the selector's

    def variant(self, name: str) -> "EvidenceSelectorKind":
        """The selector with variant ``name``'s knobs (no route + trim, no variants of its own)."""
        over = dict(self.variants[name])
        if "params" in over:
            over["params"] = {**self.params, **dict(over["params"] or {})}
        return dataclasses.replace(self, **over, trim_of=None, variants={})

    def trims(self) -> str | None:
        return self.trim_of

    def check(self, fs) -> None:
        if self.depth > fs.depth:
            raise ValueError(f"frontier.routers.selector.depth={self.depth} reads deeper than frontier.depth={fs.depth} "
                             "retrieves; set frontier.routers.selector.depth <= frontier.depth (or raise frontier.depth)")
        slots = [k.slot for k in fs.routers if k.trims() is None]
        if self.trim_of is not None and self.trim_of not in slots:
            raise ValueError(f"frontier.routers.selector.trim_of={self.trim_of!r}: no such chunk-level router in "
                             f"frontier.routers ({', '.join(slots) or 'none'}); name one, or set it to null "
                             "(no route + trim)")

    def train(self, ctx: RunContext, ladder: LadderFrontier, out_dir: Path) -> dict:
        from mogg.run.budget.selector.stage import train_selector

        info = train_selector(ctx, ladder.prep, self, out_dir)
        for name in self.variants:
            train_selector(ctx, ladder.prep, self.variant(name), Path(out_dir) / VARIANTS / name)
        return info

    def policy(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path, chunk=None):
        from mogg.run.budget.selector.stage import reading_policies

        fs = ladder.fs
        reading = reading_policies(ctx, ladder.prep, self, fold_dir, chunk, ladder.space, fs.budgets, ctx.retrain,
                                   fs.guard_se)
        for name in self.variants:
            other = reading_policies(ctx, ladder.prep, self.variant(name), Path(fold_dir) / VARIANTS / name, None,
                                     ladder.space, fs.budgets, ctx.retrain, fs.guard_se)
            reading.variants[f"selector ({name})"] = other.selector
        return reading

    def fit_final(self, ctx: RunContext, name: str, ladder: LadderFrontier, fold_dir: Path) -> dict:
        from mogg.run.budget.selector.final import fit_final_selector

        return fit_final_selector(ctx, name, ladder, self, fold_dir)

    def fit_transfer(self, ctx: RunContext, name: str, sources: dict[str, LadderFrontier], fold_dir: Path
                     ) -> dict:
        from mogg.run.budget.selector.transfer import fit_transfer_selector

        return fit_transfer_selector(ctx, name, sources, self, fold_dir, ctx.source_weights)

    def transferred(self, ctx: RunContext, ladder: LadderFrontier, fold_dir: Path):
        """With ``train_sources`` and their selector (``<fold_dir>/transfer``): budget -> the transferred
        selector's rows on this set (each evidence estimate) and the training sets' envelope, all
        label-free (:mod:`mogg.run.budget.selector.transfer`)."""
        from mogg.run.budget.selector.transfer import transferred_rows

        if not ctx.train_sources:
            return None
        d = Path(fold_dir) / TRANSFER_DIR
        if not d.is_dir():
            raise FileNotFoundError(f"no transfer evidence selector in {d}: run `{ctx.retrain}` (train.py with "
                                    "router.fit=all or both)")
        return transferred_rows(ctx, ladder, self, d)

    @classmethod
    def session(cls, directory: Path, artifacts="auto", overrides=(), data_dir=None, corpus=()):
        from mogg.run.budget.selector.session import SelectorSession

        return SelectorSession.from_checkpoint(directory, artifacts, overrides, data_dir, corpus, kind=cls)


# the knobs a variant may change (marked variant=True beside each field)
VARIANT_KNOBS = tuple(f.name for f in dataclasses.fields(EvidenceSelectorKind) if f.metadata.get("variant"))
