"""Label-free adaptations of the transferred evidence selector, leave one shape out (issue 58).

For each held-out evidence shape (every file of ``conf/heldout``: PubMedQA*, MedMCQA explanations, COVID-QA, the page
stand-in, its long-section twin and its pages of 15 sections, the snippet and explanation-sentence stand-ins, the long
explanations, and the second snippet shape from PubMedQA-L's other half: ``mogg-prepare --dataset pubmedqa_l`` first),
trained on the shapes its ``train_sources`` name there (sets sharing texts leave together, as
``experiment=loso_shapes``), the transfer scorer is fitted on the other shapes as ``fit_transfer_selector`` fits it
(the same weights, validation slices and learned lambda), under each adaptation of
:mod:`mogg.run.budget.selector.adapt`, and read on the held-out shape without its labels. Per adaptation and shape:
the mean over B = 64 / 128 / 256 / 512 of the paired F1 difference to the shape's own labelled envelope (the best
fixed (level, k, cap) reading <= B there, chosen on all its questions: a yardstick a little above the report's
cross-fitted one), the budgets above the training sets' envelope beyond the 95% interval, and the budgets at or above
the shape's own envelope; the adaptation kept is the one with the best **worst** shape
(:func:`mogg.run.budget.selector.transfer_rule.worst_shape_choice`).

    python scripts/transfer_adaptations.py --seeds 0,1,2,3,4 [--only raw,within_question] [--out FILE]

The shapes are prepared through the artifact store (``paths.artifacts``; a second run only
loads). About 40 s per adaptation, shape and seed on 2 idle cores (self-training and the
covariate-shift weights several times that).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

BUDGETS = (64, 128, 256, 512)
HELDOUT = Path(__file__).resolve().parents[1] / "conf" / "heldout"  # one shape per file: its training shapes there
# name -> (feature view, covariate-shift weights, self-training, E, stopping rule); "raw" is the
# directory's rule before these were measured (E document, lambda learned)
# a rule's suffix: where the set's documents stand alone, the best document read whole (set_shape.document_density)
ALONE_RULE = "|alone"
ALONE_CAL = "|alonecal"  # ... and the price calibrated on the plans within the cap there (transfer.read_here)
# measured: the training sets' price of a token never lower at a smaller budget than at a larger one (each B's price
# is chosen on its own grid, relative to its calibrated lambda, so a smaller B could read more than a larger one)
MONOTONE = "|mono"
# where the questions carry answer options that are not a fixed answer set, their words vote in the order
# (adapt.voting_options, options_vote); measured: every set's options, a fixed answer set's too (PubMedQA's yes / no / maybe)
OPTIONS = "|options"
OPTIONS_EVERY = "|options-every"
RECAL = "|recal"  # measured: F1_hat recalibrated by a model of the training shapes' plans' true F1 (recalibrated)
CHAIN_CAP = "|chaincap"  # deployed: on sections of sources each question reads at most its chain, the price under it
# measured, not kept: where the set reads as sentences of long documents (neither whole documents nor sections of a
# page), E the best candidate's own tokens (the sentence the question is read for: plans.document_evidence on the
# candidates' tokens) in place of E predicted, which sums the predictions over a whole paper's candidates
# (docs/results.md, "A sentence's E")
SENTENCE_E = "|sentE"
# deployed: on sections of a page whose sections run over paragraphs, a paragraph beside a question's section that
# another question predicts higher (not its best) joins the section where the pair is the most alike of the three
# around it (set_shape.Paragraphs.contested, cohesion.peak_links; the directory's transfer_section_cohesion)
CONTESTED = "|contested"
ADAPTATIONS = {
    "raw": ("raw", False, False, "document", "learned"),
    "lambda here": ("raw", False, False, "document", "here"),
    "no_options": ("no_options", False, False, "document", "learned"),
    "within_question": ("within_question", False, False, "document", "learned"),
    "within_question_only": ("within_question_only", False, False, "document", "learned"),
    "no_document": ("no_document", False, False, "document", "learned"),
    "within_question_no_document": ("within_question_no_document", False, False, "document", "learned"),
    "within_question_no_document, lambda fits": ("within_question_no_document", False, False, "document", "fits"),
    "raw, lambda fits": ("raw", False, False, "document", "fits"),
    # the directory's two scorers (transfer_features, transfer_whole_features): the second read where the
    # held-out shape's best blocks of candidates cover their documents (transfer.shape_scorer)
    "two scorers (within_question_no_document; raw), lambda fits":
        (("within_question_no_document", "raw"), False, False, "document", "fits"),
    "within_question, lambda fits": ("within_question", False, False, "document", "fits"),
    "covariate-shift weights": ("raw", True, False, "document", "learned"),
    "self-training": ("raw", False, "mix", "document", "learned"),
    # self-training that reorders only (adapt.reorder): the transferred scale prices, the refit ranks; "near":
    # only where the first scorer reads (the whole-document scorer reads as it is), as transfer.shape_scorer does
    "two scorers, lambda fits, self-trained order alone":
        (("within_question_no_document", "raw"), False, "alone", "document", "fits"),
    "two scorers, lambda fits, self-trained order on the near scorer":
        (("within_question_no_document", "raw"), False, "near", "document", "fits"),
    # under the whole-document scorer: the documents ordered by the refit's (or the transferred) best candidate
    # in each, the units within a document in the transferred order
    "two scorers, lambda fits, self-trained order on the near scorer, documents by the refit on the whole":
        (("within_question_no_document", "raw"), False, "near+docs", "document", "fits"),
    # two rounds where the refit ranks (each round's pseudo-labels the previous round's order), one on the whole
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole":
        (("within_question_no_document", "raw"), False, "near2+docs", "document", "fits"),
    # the same with E predicted (each question's evidence length from its candidates' predicted density)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits"),
    # the same, the fits price reading at least up to every document whose best candidate is predicted at least
    # half the question's best (set_shape.close_reach): evidence over several short documents (the snippet shapes)
    "two scorers, lambda fits on the close documents, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits-close"),
    # ... at a quarter of the question's best (more documents: MedMCQA's neighbouring explanations too)
    "two scorers, lambda fits on the close documents at a quarter, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits-close:0.25"),
    # ... on the close documents (a quarter) chained to the best one in corpus order (set_shape.close_reach): the sections
    # of one source where the corpus keeps them together, not the competing explanations elsewhere; with one gap
    "two scorers, lambda fits on the adjacent close documents, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits-adjacent:0.25"),
    "two scorers, lambda fits on the adjacent close documents, one gap, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits-adjacent:0.25:1"),
    # every close document where most questions' close documents neighbour their best (set_shape.sections_share), else
    # the adjacent ones, on the refit's predictions; the deployed lambda fits decides it on the first scorer's
    "two scorers, lambda fits on the close documents where they neighbour, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits-sections:0.25"),
    # the deployed rule, and where the set is sections of sources (set_shape.sections_share on the first scorer) the
    # documents chained to the best one in corpus order read first (set_shape.chain_rows), then the rest by the refit:
    # close at a quarter; with one gap; every candidate document beside the best (ratio 0)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the chain first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the chain with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0.25:1", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:0", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits"),
    # the order inside a page where the set is sections of a page (the rule before otherwise): the best block or the
    # whole run around the best first, or each candidate with a share of its neighbours' scores (0.15: deployed,
    # set_shape.page_order)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best block first on sections of a page, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageblock:0.5", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the whole run of candidates around the best first on sections of a page, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageblock:0", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.5), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.5", "predicted", "fits"),
    # measured: E the tokens of the chain around the best document (every candidate document, one gap) where the set
    # is sections of sources, at least the best document; the deployed reading elsewhere
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E the chain on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0:1"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E the larger of the chain and E predicted on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0:1:max"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E the mean of the chain and E predicted on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0:1:mean"),
    # the deployed reading before E was bounded by the chain on sections of sources (set_shape.chain_evidence)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted unbounded":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-unbounded"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted between the best document and the chain on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0:1:clip"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted bounded by the close chain on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0.25:1:min"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E the chain where it fits in B on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0:1:fit"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E the chain where it is longer than B on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0:1:bind"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E the close chain on sections of sources":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-chainE:0.25:1"),
    # measured: the fits floor on sections of sources at every close document (the rule before; the deployed floor is
    # the chain E is bounded by), at the close chain (a quarter, no gap), or none
    "two scorers, lambda fits reading at least every close document on sections of sources, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-sourcefloor:close"),
    "two scorers, lambda fits reading at least the close chain on sections of sources, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-sourcefloor:quarter"),
    "two scorers, lambda fits without a floor on sections of sources, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-sourcefloor:none"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.25), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.25", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.75), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.75", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the smoothed best's run first on sections of a page (0.5), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmoothblock:0.5", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.1), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.1", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.15), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.15", "predicted", "fits"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.35), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.35", "predicted", "fits"),
    # the best candidate's paragraph first on sections of a page (set_shape.page_order with the ladder's paragraphs);
    # E that paragraph, read at least to the median one (deployed: "fits-para"), without that floor, or E the rule
    # before (0.2 of the page, read at least to it)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's paragraph first on sections of a page, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagepara", "predicted", "fits-para-nocap"),
    "two scorers, lambda fits, E the best candidate's paragraph on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's paragraph first on sections of a page, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagepara", "predicted", "fits-page:section"),
    "two scorers, lambda fits, E 0.2 of the page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's paragraph first on sections of a page, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagepara", "predicted", "fits"),
    # deployed: the reading above, and on sections of a page at most that paragraph (or the median one, where
    # longer: set_shape.section_cap): one section is the evidence, so reading past it adds distractors of its topic
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's paragraph first on sections of a page, at most that paragraph, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagepara", "predicted", "fits-para"),
    # deployed: each question's best candidate's whole source read first where the ids name short sources
    # (best_source.read_best_source, through source_read_whole): the sibling units no retrieval found are read too
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's paragraph first on sections of a page, at most that paragraph, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagepara+source", "predicted", "fits-para"),
    # on sections of a page, the best candidate's section: its paragraph and the paragraphs beside it whose best
    # candidate predicts at least x of the question's best, chained (set_shape.section_rows), read first, E and at
    # most that run (a web page's section runs over several paragraphs: the long sections written in halves).
    # Measured: any such paragraph ("pagerun"); deployed ("pageownrun", x = SECTION_RATIO, any share): only those the
    # question owns, on a page holding another question's best paragraph
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it at a quarter of the best), at most that section, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagerun:0.25+source", "predicted", "fits-para"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it at half of the best), at most that section, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagerun:0.5+source", "predicted", "fits-para"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it at three quarters of the best), at most that section, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagerun:0.75+source", "predicted", "fits-para"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para"),
    # the same, the plans' estimated F1 reading each candidate of that section as likely as its best
    # (set_shape.section_density: the section is the evidence, so its sentences are evidence together); deployed
    # with the order below where the section is longer than B
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat"),
    # measured: the section's candidates at their mean prediction, at the set's median best (every question alike), at
    # half their own best and half that median, or at their best and read shortest first
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences at their mean, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:mean"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences at the set's median best, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:pool"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences halfway to the set's median best, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:pool0.5"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortpara"),
    # deployed: where the set's documents stand alone (set_shape.stands_alone: few questions own several documents,
    # and the corpus order shows no neighbours or the close documents seldom neighbour the best), the best
    # document's candidates as likely as its best, E that document (set_shape.document_density, transfer.alone_plans)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first where the section is longer than B, the best document whole where the documents stand alone, the price under its cap, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortparaB" + ALONE_CAL),
    # measured: ... the price calibrated on the plans past the cap too (the mean under B left unspent)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first where the section is longer than B, the best document whole where the documents stand alone, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortparaB" + ALONE_RULE),
    # the rule before (at its commit: stands_alone then asked that the corpus order show no neighbours, and a best
    # document with a candidate neighbour was never capped): where the question's section is longer than B, its best
    # paragraph's candidates shortest first (set_shape.short_first: any of them is evidence, and the cheapest costs a
    # question the scorer is unsure of least)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first where the section is longer than B, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortparaB"),
    # measured: the price calibrated under that cap, or under a cap of min(that, B) per question
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first where the section is longer than B, E predicted, the price under the cap":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortparaB+capcal"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first where the section is longer than B, E predicted, the price under a cap of at most B":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortparaB+capB"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first where the section is longer than B, E predicted, each question reading at least a quarter of B":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortparaB+floor0.25"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, the best paragraph's shortest first where the section is longer than B, E predicted, each question reading at least half of B":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:shortparaB+floor0.5"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at any share of the best), at most that section, its sentences as likely as its best, shortest first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0+source", "predicted", "fits-para-flat:short"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at a quarter of the best), at most that section, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0.25+source", "predicted", "fits-para"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the best candidate's section first on sections of a page (the paragraphs beside it that it owns at half of the best), at most that section, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pageownrun:0.5+source", "predicted", "fits-para"),
    # measured: the best paragraph by its two / three best candidates' summed predictions (set_shape.paragraph_first's
    # ``top``; a section is several sentences, and one stray match elsewhere outranks it under the best one alone)
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the paragraph of the best two candidates first on sections of a page, at most that paragraph, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagepara:2", "predicted", "fits-para"),
    "two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, the paragraph of the best three candidates first on sections of a page, at most that paragraph, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagepara:3", "predicted", "fits-para"),
    # the fits price as a ceiling too: where the set is whole short documents, read the median reach, no further
    # (MedMCQA read 128 tokens at B = 128 where its explanation holds about 70: the training sets' price goes on)
    "two scorers, lambda fits exactly, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits-exact"),
    "two scorers, lambda fits exactly, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:0", "predicted", "fits-exact"),
    # measured before set_shape.fits_cap: the fits target as a ceiling where fewer than half the best documents
    # have a candidate neighbour in corpus order (set_shape.linked_share < a majority), for the set as a whole; or
    # per question on every whole-document set (each question whose best document has none reads at most it)
    "two scorers, lambda fits exactly where fewer than half the best documents have a neighbour, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-alone"),
    "two scorers, lambda fits, at most the best document without a neighbour on every whole-document set, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-alone-q"),
    # the deployed rule before the cap (fits_cap): the fits price a floor only, whatever the corpus
    "two scorers, lambda fits as a floor only, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-floor"),
    # where the set is not whole documents but its best blocks cover a part of their document (sections of a page,
    # not a sentence of a long paper: set_shape.block_cover), E from the best candidate's block, its max with E
    # predicted, or the training sets' median
    "two scorers, lambda fits, E from the best block on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:block"),
    "two scorers, lambda fits, E at least the best block on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:max"),
    "two scorers, lambda fits, E median on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:median"),
    # measured: a share of the page as E (read at least to it) or 30 tokens under the deployed order inside a page (the
    # neighbour smoothing, 0.15): the page shapes with the abstract-page shape among them (docs/results.md)
    "two scorers, lambda fits, E 0.2 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.15), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.15", "predicted", "fits-page:doc*0.2:floorE"),
    "two scorers, lambda fits, E 0.25 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.15), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.15", "predicted", "fits-page:doc*0.25:floorE"),
    "two scorers, lambda fits, E 0.33 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.15), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.15", "predicted", "fits-page:doc*0.33:floorE"),
    "two scorers, lambda fits, E 30 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.15), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.15", "predicted", "fits-page:30"),
    # measured: E the mean paragraph of each question's best page (its tokens over its blank-line-separated paragraphs:
    # a section is a paragraph there; the page stand-ins' median 69 / 115 tokens for 61- / 134-token sections, the
    # abstract pages' 62 for a 39-token conclusion), read at least to the median one
    "two scorers, lambda fits, E the page's mean paragraph on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, neighbour-smoothed order on sections of a page (0.15), E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1+pagesmooth:0.15", "predicted", "fits-page:para:floorE"),
    "two scorers, lambda fits, E 30 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:30"),
    "two scorers, lambda fits, E 60 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:60"),
    "two scorers, lambda fits, E 90 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:90"),
    "two scorers, lambda fits, E 120 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:120"),
    "two scorers, lambda fits, E 160 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:160"),
    "two scorers, lambda fits, E 250 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:250"),
    "two scorers, lambda fits, E 400 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:400"),
    "two scorers, lambda fits, E 1000 tokens on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:1000"),
    "two scorers, lambda fits, E 0.2 of the document on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.2"),
    "two scorers, lambda fits, E 0.25 of the document on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.25"),
    "two scorers, lambda fits, E 0.33 of the document on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.33"),
    "two scorers, lambda fits, E 0.4 of the document on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.4"),
    "two scorers, lambda fits, E 0.5 of the document on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.5"),
    "two scorers, lambda fits, E 0.33 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.33:floorE"),
    "two scorers, lambda fits, E 0.33 of the document on sections of a page read to B, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.33:here"),
    "two scorers, lambda fits, E 0.5 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.5:floorE"),
    "two scorers, lambda fits, E 0.5 of the document on sections of a page read to B, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.5:here"),
    "two scorers, lambda fits before sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-nopage"),
    "two scorers, lambda fits, E 0.2 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.2:floorE"),
    "two scorers, lambda fits, E 0.25 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.25:floorE"),
    "two scorers, lambda fits, E 0.4 of the document on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:doc*0.4:floorE"),
    "two scorers, lambda fits, E document on sections of a page, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:document"),
    "two scorers, lambda fits, E from the best block on sections of a page read at least to it, two self-training rounds on the near scorer, documents by the refit on the whole, the neighbouring candidates with one gap first, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs+chain:0:1", "predicted", "fits-page:block:floor"),
    # the deployed rule before the close documents (the fits price up to the best document alone)
    "two scorers, lambda fits on the best document alone, two self-training rounds on the near scorer, documents by the refit on the whole, E predicted":
        (("within_question_no_document", "raw"), False, "near2+docs", "predicted", "fits-best"),
    # the refit's pseudo-labels from the agreement of the retrieval columns (adapt.agreement), with the transferred
    # (or the previous round's) order as one more voter, or alone
    "two scorers, lambda fits, two self-training rounds, pseudo-labels by agreement with the transferred order":
        (("within_question_no_document", "raw"), False, "near2+docs+agree", "document", "fits"),
    "two scorers, lambda fits, two self-training rounds, pseudo-labels by the columns' agreement alone":
        (("within_question_no_document", "raw"), False, "near2+docs+columns", "document", "fits"),
    "two scorers, lambda fits, self-trained order on the near scorer, documents grouped on the whole":
        (("within_question_no_document", "raw"), False, "near+group", "document", "fits"),
    "two scorers, lambda fits, block first": (("within_question_no_document", "raw"), False, "block", "document", "fits"),
    "two scorers, lambda fits, whole block first":
        (("within_question_no_document", "raw"), False, "block0", "document", "fits"),
    "within_question, E median": ("within_question", False, False, "median", "learned"),
    "within_question, E predicted": ("within_question", False, False, "predicted", "learned"),
    "within_question, E block": ("within_question", False, False, "block", "learned"),
    "within_question, price from scores": ("within_question", False, False, "document", "relative"),
    "raw, price from scores": ("raw", False, False, "document", "relative"),
}

# the directory's reading before the price at a smaller budget was raised to a larger one's
BEFORE_MONOTONE = ("two scorers, lambda fits, two self-training rounds on the near scorer, documents by the refit on the "
                   "whole, the neighbouring candidates with one gap first, the best candidate's whole source first, the "
                   "best candidate's section first on sections of a page (the paragraphs beside it that it owns at any "
                   "share of the best), at most that section, its sentences as likely as its best, the best paragraph's "
                   "shortest first where the section is longer than B, the best document whole where the documents "
                   "stand alone, the price under its cap, E predicted")
# ... and with the training sets' price never lower at a smaller budget (MONOTONE: frontier_guard.monotone_prices, the
# directory's prices): the directory's reading before the answer options' vote
PREVIOUS = BEFORE_MONOTONE + ", the price at a smaller budget at least a larger one's"
ADAPTATIONS[PREVIOUS] = (*ADAPTATIONS[BEFORE_MONOTONE][:-1], ADAPTATIONS[BEFORE_MONOTONE][-1] + MONOTONE)
# measured: where the questions carry answer options that are not a fixed answer set, their words vote in the order
# (OPTIONS: adapt.voting_options, options_vote), or a fixed answer set's too
VOTE_ORDER = PREVIOUS + ", the answer options' words vote in the order"
ADAPTATIONS[VOTE_ORDER] = (*ADAPTATIONS[PREVIOUS][:-1], ADAPTATIONS[PREVIOUS][-1] + OPTIONS)
ADAPTATIONS[VOTE_ORDER + ", a fixed answer set's too"] = (*ADAPTATIONS[PREVIOUS][:-1],
                                                          ADAPTATIONS[PREVIOUS][-1] + OPTIONS_EVERY)
# ... and the refit's pseudo-labels drawn from the voted order ("near2+docs+vote": self_training.self_trained with the
# options; the directory's transfer_options_vote): the directory's reading before the chain cap
VOTED = VOTE_ORDER + ", the refit's pseudo-labels from the voted order"
_v, _s, _st, *_rest = ADAPTATIONS[VOTE_ORDER]
ADAPTATIONS[VOTED] = (_v, _s, _st.replace("near2+docs", "near2+docs+vote", 1), *_rest)
# the directory's reading (mogg.run.budget.selector.transfer.shape_scorer, read_here), as docs/results.md's tables
# name it: ... and on sections of sources each question at most its chain (the bound of E there), the price calibrated
# on the plans within it, as where the documents stand alone (CHAIN_CAP; the directory's transfer_chain_cap)
CHAINED = VOTED + ", at most the chain on sections of sources"
ADAPTATIONS[CHAINED] = (*ADAPTATIONS[VOTED][:-1], ADAPTATIONS[VOTED][-1] + CHAIN_CAP)
# ... and a paragraph another question predicts higher continues a section where the pages' words say so (CONTESTED;
# the directory's transfer_section_cohesion)
DEPLOYED = CHAINED + ", a contested paragraph goes with the section it shares its words with"
ADAPTATIONS[DEPLOYED] = (*ADAPTATIONS[CHAINED][:-1], ADAPTATIONS[CHAINED][-1] + CONTESTED)
SENTENCE = CHAINED + ", E the best sentence on sentences of long documents"  # measured on the rule then deployed
ADAPTATIONS[SENTENCE] = (*ADAPTATIONS[CHAINED][:-1], ADAPTATIONS[CHAINED][-1] + SENTENCE_E)
RECALIBRATED = PREVIOUS + ", F1_hat recalibrated on the training shapes' plans"
ADAPTATIONS[RECALIBRATED] = (*ADAPTATIONS[PREVIOUS][:-1], ADAPTATIONS[PREVIOUS][-1] + RECAL)


@dataclass
class Shape:
    """One set's candidates, labels and fixed table (what the probe reads of a prepared ladder)."""

    x: np.ndarray
    names: list
    density: np.ndarray
    q: np.ndarray
    unit: np.ndarray
    tokens: np.ndarray
    doc_tokens: np.ndarray
    unit_doc: np.ndarray
    evidence_len: np.ndarray
    texts: list
    evidence: list
    table_f1: np.ndarray
    table_tokens: np.ndarray
    n: int
    paragraphs: np.ndarray | None = None  # per candidate [N]: its document's paragraphs (blank-line separated)
    paras: object = None  # set_shape.Paragraphs of the ladder (the page rule's paragraphs), None without them
    corpus_unit_doc: np.ndarray | None = None  # [U] every unit's document in the corpus's numbering (non-decreasing)
    unit_tokens: np.ndarray | None = None  # [U] every unit's tokens
    sources: object = None  # the ladder's sources (mogg.ladders.sources.Sources: ids that name one)
    options: list | None = None  # [Q] each question's answer options as one text ("" without), as mogg-route reads them


def splits_of(overrides: list[str], train_also: tuple[str, ...] = ()) -> dict:
    """held-out shape -> its training shapes, as ``experiment=loso_shapes heldout=<shape>`` composes them
    (``conf/heldout/<shape>.yaml``'s ``train_sources``: sets sharing texts leave together there), plus
    each shape of ``train_also`` whose questions come from another raw file than the held-out shape's
    (one that shares its texts never trains on it)."""
    from hydra import compose, initialize_config_dir

    out, raw = {}, {}
    with initialize_config_dir(config_dir=str(HELDOUT.parent), version_base=None):
        for f in sorted(HELDOUT.glob("*.yaml")):
            cfg = compose("config", overrides=["experiment=loso_shapes", f"heldout={f.stem}", *overrides])
            out[f.stem] = tuple(cfg.train_sources)
            raw[f.stem] = cfg.questions.get("raw_path") or cfg.questions.get("path")
    unknown = {t for ts in out.values() for t in ts} - set(out)
    if unknown:  # a training source must be a shape of its own: its questions and corpus prepared once, by name
        raise ValueError(f"training sources without a conf/heldout file of their own: {sorted(unknown)}")
    bad = sorted(set(train_also) - set(out))
    if bad:
        raise ValueError(f"--train-also: {bad} not among the shapes {sorted(out)}")
    return {h: (*ts, *(s for s in train_also if s not in ts and s != h and raw[s] != raw[h])) for h, ts in out.items()}


def load_shapes(overrides: list[str], train_also: tuple[str, ...] = ()) -> tuple[dict, dict, object]:
    """Every shape of ``conf/heldout`` prepared as ``experiment=loso_shapes heldout=<shape>`` prepares it
    (cached artifacts), the splits (:func:`splits_of`) and the selector's knobs."""
    from hydra import compose, initialize_config_dir

    from mogg.run.budget.selector.candidates import feature_names
    from mogg.run.budget.selector.set_shape import candidate_paragraphs
    from mogg.run.budget.selector.stage import reading_data
    from mogg.run.context import run_context
    from mogg.run.frontier_stage import frontier_settings, ladder_frontier
    from mogg.run.prepare_stage import prepare_all

    splits, out, kind = splits_of(overrides, train_also), {}, None
    with initialize_config_dir(config_dir=str(HELDOUT.parent), version_base=None):
        for s in splits:
            cfg = compose("config", overrides=["experiment=loso_shapes", f"heldout={s}", *overrides])
            fs, ctx = frontier_settings(cfg), run_context(cfg)
            kind = next(k for k in fs.routers if k.slot == "selector")
            prep = next(iter(prepare_all(cfg).values()))
            lf, d = ladder_frontier(prep, fs), reading_data(ctx, prep, kind, page=kind.transfer_page_words)
            paragraphs = prep.ladder.doc_paragraphs()  # each document's, stored with the ladder (E "para")
            paras = candidate_paragraphs(prep.ladder.paragraph_starts(), d.unit_tokens, d.cand.unit, prep.ladder.units.doc,
                                         prep.ladder.units.text)
            out[s] = Shape(d.x, feature_names(prep.ladder.level_names, kind.context, kind.transfer_page_words), d.density, d.cand.q,
                           d.cand.unit, d.tokens, d.doc_tokens, prep.ladder.source_unit_docs(), d.evidence_len,
                           prep.ladder.units.text, [it.evidence_text for it in prep.items], lf.table.f1,
                           lf.table.tokens, len(prep.items),
                           None if paragraphs is None else paragraphs[prep.ladder.units.doc[d.cand.unit]].astype(float),
                           paras, prep.ladder.units.doc, d.unit_tokens, prep.ladder.sources(),
                           [" ".join(it.options.values()) for it in prep.items])
    return out, splits, kind


def _evidence(sh: Shape, pred: np.ndarray, e_rule: str, median: float):
    from mogg.run.budget.selector.adapt import block_evidence
    from mogg.run.budget.selector.plans import evidence_estimate

    if e_rule == "block":
        return block_evidence(sh.q, sh.unit, sh.unit_doc, sh.tokens, pred, sh.n)
    return evidence_estimate(e_rule, median, sh.q, pred, sh.tokens, sh.doc_tokens, sh.n)


def source_read_whole(sh: Shape, pred: np.ndarray, docs) -> tuple[Shape, np.ndarray]:
    """The best candidate's whole source first (:func:`mogg.run.budget.selector.best_source.read_best_source`, as
    the report and ``mogg-route --calibrate-here`` read it): the shape with the rows it adds, and their ``pred``."""
    from functools import partial

    from mogg.run.budget.selector.best_source import ReadRows, read_best_source
    from mogg.run.budget.selector.plans import document_tokens

    c = read_best_source(ReadRows(sh.q, sh.unit, sh.tokens, sh.doc_tokens, pred), sh.corpus_unit_doc,
                         sh.unit_tokens, partial(document_tokens, sh.corpus_unit_doc, sh.unit_tokens), sh.sources, docs)
    if len(c.q) == len(sh.q):
        return sh, pred
    added = len(c.q) - len(sh.q)
    return replace(sh, q=c.q, unit=c.unit, tokens=c.tokens, doc_tokens=c.doc_tokens,
                   density=np.r_[sh.density, np.full(added, np.nan)], x=None, paragraphs=None, paras=None), c.pred


_READ: dict = {}  # run_one's fit and reading per (shape, seed, scorer, self-training, E): the rules share them
_PLANS: dict = {}  # ... and the plans read on its predictions (with the chain first or not)


def _ranked_pred(ranked, pred: np.ndarray) -> np.ndarray:
    return np.where(ranked.rows >= 0, pred[np.maximum(ranked.rows, 0)], -np.inf)


def run_one(shapes: dict, target: str, seed: int, adaptation: tuple, kind, splits: dict, docs=None) -> dict:
    """Fit on the other shapes, read on ``target``: per budget (F1 [Q], tokens [Q], own envelope's F1 [Q],
    training sets' envelope's F1 [Q]), and under ``docs`` the set's shape (set_shape.whole_documents on this
    scorer's predictions before any refit; ``docs`` given: the first scorer's, which picks the second scorer
    and which the fits price then reads, as transfer.shape_scorer hands it on)."""
    from mogg.core.segments import group_max
    from mogg.evaluation.frontier import choose_config
    from mogg.evaluation.frontier_guard import best_lambda, monotone_prices
    from mogg.routing.fitting.folds import split_train_val
    from mogg.routing.plans import calibrate_lambda, decide
    from mogg.run.budget.selector.adapt import (
        agreement,
        block_rows,
        document_best,
        feature_view,
        options_vote,
        relative_choice,
        reorder,
        self_train,
        shift_weights,
        voting_options,
    )
    from mogg.run.budget.selector.deploy import plans_of
    from mogg.run.budget.selector.plans import document_evidence, plan_table
    from mogg.run.budget.selector.scorer import candidate_weights, fit_scorer
    from mogg.run.budget.selector.self_training import ROUND_SEED
    from mogg.run.budget.selector.set_shape import (
        CLOSE_RATIO,
        PAGE_SHARE,
        PARA_TOP,
        SECTIONS_SHARE,
        SetShape,
        block_cover,
        chain_evidence,
        chain_first,
        close_reach,
        document_density,
        fits_cap,
        linked_share,
        neighbour_sum,
        owned_first,
        owned_sections,
        owned_share,
        page_evidence,
        page_order,
        page_parts,
        page_sections,
        paragraph_cover,
        reads_whole_document,
        section_cap,
        section_density,
        section_evidence,
        section_rows,
        sections_share,
        shared_share,
        short_first,
        source_chain,
        sources_sections,
        stands_alone,
        whole_documents,
        whole_set,
        whole_shape,
    )
    from mogg.run.budget.selector.transfer import lambda_here, set_weights
    from mogg.run.budget.shared import config_stats, envelope_here

    view, shift, selftrain, e_rule, rule = adaptation
    contested = rule.removesuffix(SENTENCE_E).endswith(CONTESTED)
    if contested and shapes[target].paras is not None and not shapes[target].paras.contested:
        # as transfer.transferred_rows reads the directory's transfer_section_cohesion into its paragraphs
        shapes = {**shapes, target: replace(shapes[target], paras=shapes[target].paras._replace(contested=True))}
    whole_source = isinstance(selftrain, str) and selftrain.endswith("+source")  # measured: the best source read whole
    if whole_source:
        selftrain = selftrain[:-len("+source")]
    in_page = None  # "...+page<block|smooth|smoothblock>:<x>": the order inside the page on sections of a page
    run_ratio, run_owned = None, False  # "...+page<run|ownrun>:<x>": the section, the best paragraph and the close
    # ones beside it (set_shape.section_rows)
    if isinstance(selftrain, str) and "+page" in selftrain:
        selftrain, _, in_page = selftrain.partition("+page")
    chain = None  # "<self-training>+chain[:<ratio>[:<gap>]]": the chain first, on the self-training's fit (one memo)
    if isinstance(selftrain, str) and "+chain" in selftrain:
        selftrain, _, chain = selftrain.partition("+chain")
    if isinstance(view, tuple):  # two scorers: the second where the held-out shape looks like whole documents
        near = run_one(shapes, target, seed, (view[0], *adaptation[1:]), kind, splits)
        if not whole_set(near["docs"]):
            return near
        whole = (view[1], shift, {"alone": "alone", "mix": "mix", "near+docs": "docs", "near2+docs": "docs", "near+group": "group",
                                               "near2+docs+agree": "docs+agree", "near2+docs+columns": "docs+columns",
                                               "near2+docs+vote": "docs+vote"}.get(
            selftrain, False), e_rule, rule)
        if chain is not None and whole[2]:  # the whole-document scorer reads the chain first
            whole = (*whole[:2], f"{whole[2]}+chain{chain}", *whole[3:])
        if whole_source and whole[2]:
            whole = (*whole[:2], f"{whole[2]}+source", *whole[3:])
        return run_one(shapes, target, seed, whole, kind, splits, near["docs"])
    sentence_e = rule.endswith(SENTENCE_E)
    rule = rule.removesuffix(SENTENCE_E).removesuffix(CONTESTED)  # CONTESTED: read into sh.paras above
    chain_cap = rule.endswith(CHAIN_CAP)
    rule = rule.removesuffix(CHAIN_CAP)
    options = next((o for o in (OPTIONS, OPTIONS_EVERY) if rule.endswith(o)), "")
    rule = rule.removesuffix(OPTIONS).removesuffix(OPTIONS_EVERY)
    recal = rule.endswith(RECAL)
    rule = rule.removesuffix(RECAL)
    monotone = rule.endswith(MONOTONE)
    rule = rule.removesuffix(MONOTONE)
    doc_whole = rule.endswith((ALONE_RULE, ALONE_CAL))  # the best document read whole where the documents stand alone
    alone_cal = rule.endswith(ALONE_CAL)
    rule = rule.removesuffix(ALONE_RULE).removesuffix(ALONE_CAL)
    alone_read = False  # whether this read took the plans that read the best document whole
    key = (target, seed, view, shift, selftrain, e_rule, docs is None)  # what the rule does not change
    if key not in _READ:  # several rules over one fit (one process: a few MB per shape and seed)
        def read(docs):
            sources = splits[target]
            xv = {s: feature_view(shapes[s].x, shapes[s].q, shapes[s].n, view, shapes[s].names) for s in (*sources, target)}
            per_q = set_weights([shapes[s].n for s in sources], [1.0] * len(sources))
            sw = shift_weights([xv[s] for s in sources], xv[target], seed) if shift else None
            ys, ws, rtr, rva, trains, vals, off_c, off_q = [], [], [], [], [], [], 0, 0
            for i, s in enumerate(sources):
                sh = shapes[s]
                t, v = split_train_val(np.flatnonzero(~np.isnan(sh.evidence_len)), 0.2, seed + 3000 + i)
                trains.append(t)
                vals.append(v)
                lab = ~np.isnan(sh.density)
                rtr.append(np.flatnonzero(np.isin(sh.q, t) & lab) + off_c)
                rva.append(np.flatnonzero(np.isin(sh.q, v) & lab) + off_c)
                ys.append(sh.density)
                ws.append(candidate_weights(sh.q, sh.tokens) * per_q[off_q + sh.q] * (sw[i] if sw is not None else 1.0))
                off_c += len(sh.q)
                off_q += sh.n
            model = fit_scorer(np.concatenate([xv[s] for s in sources]), np.concatenate(ys), np.concatenate(ws),
                               np.concatenate(rtr), np.concatenate(rva), kind.params, seed, 1)
            median = float(np.median(np.concatenate([shapes[s].evidence_len[t] for s, t in zip(sources, trains)])))
            util_v, f_v, t_v, rp_v, ff, ft = [], [], [], [], [], []
            for s, t, v in zip(sources, trains, vals):  # the training sets' validation slices: lambda (or ratio) per B
                sh = shapes[s]
                pred = model.predict(xv[s])
                ranked, util, _ = plans_of(pred, sh.q, sh.unit, sh.tokens, sh.texts, sh.n, kind.plans,
                                           _evidence(sh, pred, e_rule, median))
                vf, vt = plan_table(ranked, sh.texts, sh.unit, sh.evidence, v)
                util_v.append(util[v])
                f_v.append(vf)
                t_v.append(vt)
                rp_v.append(_ranked_pred(ranked, pred)[v])
                ff.append(sh.table_f1[t])
                ft.append(sh.table_tokens[t])
            src_v = np.concatenate([np.full(len(u), i) for i, u in enumerate(util_v)])  # each row's training shape
            util_v, f_v, t_v, rp_v = (np.concatenate(a) for a in (util_v, f_v, t_v, rp_v))
            stats = config_stats(np.concatenate(ff), np.concatenate(ft))

            sh = shapes[target]
            pred = model.predict(xv[target])
            if docs is None:  # which scorer, and what the fits price reads: one decision, before any refit
                docs = whole_documents(sh.q, sh.unit, sh.unit_doc, sh.tokens, pred, sh.doc_tokens, sh.n, sh.paras)

            def labels(order: np.ndarray) -> np.ndarray:  # what the refit's pseudo-labels are drawn from
                if isinstance(selftrain, str) and selftrain.endswith("+vote"):  # measured: the options' vote first
                    return options_vote(order, sh.q, voting_options(sh.x[:, sh.names.index("option_match")], sh.q,
                                                                    sh.options))
                if not isinstance(selftrain, str) or not selftrain.endswith(("+agree", "+columns")):
                    return order
                return agreement(sh.x, sh.names, sh.q, order if selftrain.endswith("+agree") else None)
            if selftrain in ("block", "block0"):  # the best candidate's block first, then the rest (each by pred)
                pred = reorder(pred, sh.q, block_rows(sh.q, sh.unit, sh.unit_doc, pred, sh.n,
                                                      0.5 if selftrain == "block" else 0.0).astype(float))
            elif selftrain in ("docs", "group", "docs+agree", "docs+columns", "docs+vote"):  # documents by their best candidate; units by pred
                score = pred if selftrain == "group" else self_train(xv[target], sh.q, sh.n, labels(pred), seed)
                pred = reorder(pred, sh.q, document_best(score, sh.q, sh.unit_doc[sh.unit]))  # as transfer.self_trained
            elif selftrain in ("near", "near+docs", "near+group", "alone"):  # the refit ranks alone; the scale stays
                pred = reorder(pred, sh.q, self_train(xv[target], sh.q, sh.n, pred, seed))
            elif isinstance(selftrain, str) and selftrain.startswith("near2+docs"):  # two rounds, as self_training.self_trained reads them
                once = reorder(pred, sh.q, self_train(xv[target], sh.q, sh.n, labels(pred), seed))
                pred = reorder(pred, sh.q, self_train(xv[target], sh.q, sh.n, labels(once), seed + ROUND_SEED))
            elif selftrain == "mix":  # the new set's own scorer from the transferred one's confident choices, mixed in by rank
                own = self_train(xv[target], sh.q, sh.n, pred, seed)
                pred = 0.5 * pred + 0.5 * own * float(np.nanmax(pred))
            return util_v, f_v, t_v, rp_v, stats, docs, pred, median, src_v
        _READ[key] = read(docs)
    util_v, f_v, t_v, rp_v, stats, own_docs, pred, median, src_v = _READ[key]
    docs = docs if docs is not None else own_docs  # the first scorer's, handed on, never one a rule changed
    sh = shapes[target]
    key = (*key, "contested") if contested else key  # the plans it reads are its own
    if options and sh.x is not None and "option_match" in sh.names:  # as transfer.shape_scorer reads (after the refit)
        on_whole = isinstance(selftrain, str) and selftrain.startswith("docs")
        vote_on = sh.x[:, sh.names.index("option_match")]
        if not options.endswith("every"):  # deployed: never a fixed answer set's options (adapt.voting_options)
            vote_on = voting_options(vote_on, sh.q, sh.options)
        voted = options_vote(pred, sh.q, vote_on, sh.unit_doc[sh.unit] if on_whole else None)
        pred, key = voted, (key if voted is pred else (*key, options))
    if chain is not None and selftrain.startswith("docs") and sections_share(docs) >= SECTIONS_SHARE:
        r, _, g = chain.partition(":")[2].partition(":")  # +chain[:<ratio>[:<gap>]]
        pred = chain_first(pred, sh.q, sh.unit_doc[sh.unit], sh.n, docs, float(r or CLOSE_RATIO), int(g or 0))
        key = (*key, chain)
    elif chain is not None and selftrain.startswith("docs") and owned_sections(docs):  # as transfer.shape_scorer reads
        pred = owned_first(pred, sh.q, sh.unit_doc[sh.unit], sh.n, docs)
        key = (*key, chain, "owned")
    if in_page is not None and page_sections(docs):  # the order inside the page around the best candidate
        how_, _, x_ = in_page.partition(":")
        if how_ == "block":  # measured: the best candidate's block (ratio x) first, then the rest, each by pred
            pred = reorder(pred, sh.q, block_rows(sh.q, sh.unit, sh.unit_doc, pred, sh.n, float(x_)).astype(float))
        elif how_ == "para":  # the best candidate's paragraph first (set_shape.page_order with the ladder's paragraphs)
            if sh.paras is None:
                raise ValueError(f"{target}: its ladder holds no paragraphs (built without the artifact store)")
            pred = page_order(pred, sh.q, sh.unit, sh.unit_doc, docs, paras=sh.paras, top=int(x_ or PARA_TOP), ratio=None)
        elif how_ in ("run", "ownrun"):  # the best candidate's section: its paragraph and the close ones beside it
            if sh.paras is None:  # (ratio x; "ownrun": those the question owns, on a page shared: set_shape.section_rows)
                raise ValueError(f"{target}: its ladder holds no paragraphs (built without the artifact store)")
            run_ratio, run_owned = float(x_), how_ == "ownrun"
            pred = page_order(pred, sh.q, sh.unit, sh.unit_doc, docs, paras=sh.paras, ratio=run_ratio, owned=run_owned)
        elif how_ == "smooth":  # each candidate with x times its neighbours' scores (set_shape.page_order; 0.15 deployed)
            pred = page_order(pred, sh.q, sh.unit, sh.unit_doc, docs, float(x_))
        else:  # measured, "smoothblock": ... and the whole run of candidates around the smoothed best first
            smooth = pred + float(x_) * neighbour_sum(pred, sh.q, sh.unit, sh.unit_doc)
            smooth = block_rows(sh.q, sh.unit, sh.unit_doc, smooth, sh.n, 0.0) + smooth / (1.0 + np.abs(smooth).max())
            pred = reorder(pred, sh.q, smooth)
        key = (*key, "page" + in_page)

    if whole_source:
        sh, pred = source_read_whole(sh, pred, docs)
        key = (*key, "source")

    def plans(memo: tuple, e, density=None):  # the plans on pred with E e, their true F1 and tokens: once per memo key
        if memo not in _PLANS:
            r2, u2, p2 = plans_of(pred, sh.q, sh.unit, sh.tokens, sh.texts, sh.n, kind.plans, e, density)
            f2, t2 = plan_table(r2, sh.texts, sh.unit, sh.evidence, np.arange(sh.n))
            _PLANS[memo] = r2, u2, p2, f2, t2, _ranked_pred(r2, pred)
        return _PLANS[memo]
    ranked, util, pt, tf, tt, rp = plans(key, _evidence(sh, pred, e_rule, median))
    # the floor on sections of sources: the deployed rule's reads the chain (set_shape.source_chain on pred, what E is
    # bounded by); "fits-sourcefloor:<close|quarter|none>" measured every close document (the rule before, as every
    # other measured rule here reads), the close chain, or none
    # the deployed rule ("fits-para"): on sections of a page E the best candidate's paragraph, read at least to the
    # median one and at most that paragraph (or the median one: set_shape.section_cap; transfer.read_here with the
    # ladder's paragraphs); "fits-para-nocap" measured it without the cap; "fits" the rule before
    # deployed ("fits-para-flat"): F1_hat reads the section's candidates as likely as its best; measured
    # ("fits-para-flat:<how>"): their mean, the set's median best (pool) or a mix a * own best + (1 - a) * that
    # (pool<a>), or the best with the section's candidates read shortest first (short)
    flat, _, flat_how = rule.partition(":") if rule.startswith("fits-para-flat") else (False, "", "")
    # measured ("+capcal"): the price calibrated under the section cap (the cap masks the plans past it before lambda
    # is chosen), or ("+capB") under a cap of min(that, B) per question, or ("+floor<f>") each question reading at
    # least f * B (at most its cap)
    flat_how, cap_cal = (flat_how.split("+")[0], flat_how.partition("+")[2]) if "+" in flat_how else (flat_how, "")
    flat = bool(flat)
    short_b = None  # measured ("shortparaB"): (the short order, the deployed order, the section's rows)
    if flat:
        rule = "fits-para"
    para_cap = rule == "fits-para"
    para = rule in ("fits-para", "fits-para-nocap")
    dens = None
    if para:
        rule = "fits"
    source_floor = "chain" if rule == "fits" else None
    if rule.startswith("fits-sourcefloor"):
        rule, source_floor = "fits", rule.partition(":")[2]
    floor, e_page, how, bind, section = None, None, "", None, None
    rule_arg = rule.partition(":")[2]
    if rule.startswith("fits-chainE"):  # the deployed rule's reading elsewhere (PAGE_SHARE of the page there)
        e_page, how = f"doc*{PAGE_SHARE}", "deployed"
    elif rule.startswith("fits-page"):  # measured: another E where the set is sections of a page
        e_page, _, how = rule.partition(":")[2].partition(":")
        rule = "fits"
    elif rule in ("fits", "fits-unbounded"):  # a share of the best document there (a ladder without paragraphs)
        e_page, how = "section" if para else f"doc*{PAGE_SHARE}", "deployed"
    elif rule == "fits-nopage":  # measured: the deployed rule before sections of a page (neither E nor floor there)
        rule = "fits"
    # the price's view of the set: the deployed rule's reads PAGE_SHARE of the median page on sections of a page
    # (set_shape.fits_target); every measured rule reads without that floor (its own, where it has one)
    docs_price = docs if how == "deployed" else docs._replace(block=None)
    if e_page is not None:
        logging.getLogger("transfer_adaptations").info("%s seed %d: the best blocks cover %.3f of their document "
                                                        "and %.3f of their paragraph (median); whole documents %s; "
                                                        "sections of a page %s", target, seed, block_cover(docs),
                                                        paragraph_cover(docs), whole_set(docs),
                                                        page_sections(docs))
    if rule == "fits" and sources_sections(docs):  # the deployed reading: E at most the chain (transfer.sources_plans)
        ranked, util, pt, tf, tt, rp = plans((*key, "sources"), chain_evidence(
            _evidence(sh, pred, e_rule, median), sh.q, sh.unit_doc[sh.unit], pred, sh.doc_tokens, sh.n))
    elif rule == "fits-unbounded":  # measured: the deployed reading before E was bounded by the chain there
        rule = "fits"
    if doc_whole and rule == "fits" and reads_whole_document(docs):
        # deployed: E the best document, its candidates as likely as its best (transfer.alone_plans)
        ranked, util, pt, tf, tt, rp = plans((*key, "alone"), document_evidence(sh.q, pred, sh.doc_tokens, sh.n),
                                             document_density(pred, sh.q, sh.unit_doc[sh.unit]))
        alone_read = True
    if rule.startswith("fits-chainE"):  # measured: E the tokens of the chain where the set is sections of sources
        rule = "fits"
        if sources_sections(docs):
            r, _, g = rule_arg.partition(":")
            g, _, mix = g.partition(":")  # ...[:max|mean|bind|fit|min|clip]: with E predicted
            e = np.maximum(close_reach(sh.q, sh.unit_doc[sh.unit], pred, sh.doc_tokens, sh.n, float(r or 0), int(g or 1))[1],
                           _evidence(sh, pred, "document", median))
            if mix in ("bind", "fit"):  # per budget: the chain where it is longer than B (bind) or fits in B, else E predicted
                bind = (e, _evidence(sh, pred, "predicted", median), mix)
            elif mix in ("min", "clip"):  # E predicted at most this chain (at ratio 0, gap 1: the deployed "fits"),
                # and at least the best document (clip)
                e = np.minimum(e, _evidence(sh, pred, "predicted", median))
                e = np.maximum(e, _evidence(sh, pred, "document", median)) if mix == "clip" else e
            elif mix:
                ep = _evidence(sh, pred, "predicted", median)
                e = np.maximum(e, ep) if mix == "max" else 0.5 * (e + ep)
            ranked, util, pt, tf, tt, rp = plans((*key, "chainE" + rule_arg), e)
    if e_page is not None and page_sections(docs):
        block = _evidence(sh, pred, "block", median)
        if e_page.startswith("doc*"):  # a share of the best document
            e = page_evidence(sh.q, pred, sh.doc_tokens, sh.n, float(e_page[4:]))  # as transfer.page_plans reads
        elif e_page[0].isdigit():  # a number of tokens
            e = float(e_page)
        elif e_page == "section":  # the best candidate's paragraph (set_shape.section_evidence)
            if sh.paras is None:
                raise ValueError(f"{target}: its ladder holds no paragraphs (built without the artifact store)")
            e = section_evidence(sh.q, pred, sh.paras, sh.n, run_ratio, run_owned)
            section = e if para else None  # the deployed floor reads it (set_shape.fits_target)
            if flat:  # deployed: the section's candidates as likely as its best (set_shape.section_density)
                inside = section_rows(pred, sh.q, sh.paras, 1, run_ratio, run_owned)
                if flat_how == "short":  # measured: the section's candidates shortest first (any of them is evidence)
                    pred = reorder(pred, sh.q, np.where(inside, 1e6 - sh.tokens, pred))
                    key = (*key, "short")
                elif flat_how == "shortpara":  # measured: the best paragraph's shortest first, then the rest of the
                    # section, at every budget (set_shape.short_first with its section read as longer than any B)
                    pred = short_first(pred, sh.q, sh.tokens, sh.paras, np.full(sh.n, np.inf), 0.0, run_ratio, run_owned)
                    key = (*key, "shortpara")
                elif flat_how == "shortparaB":  # deployed: that order where the section is longer than B (per budget)
                    short_b = pred
                dens = section_density(pred, sh.q, sh.paras, run_ratio, run_owned)
                if flat_how == "mean" or flat_how.startswith("pool"):
                    best = group_max(pred, np.asarray(sh.q, dtype=np.int64))  # [Q'] each question's best
                    if flat_how == "mean":
                        n_in = np.bincount(sh.q, weights=inside.astype(float), minlength=len(best))
                        best = np.bincount(sh.q, weights=np.where(inside, pred, 0.0), minlength=len(best)) / np.maximum(n_in, 1)
                    else:
                        a = float(flat_how[4:] or 0)
                        best = a * best + (1 - a) * np.median(best)
                    dens = np.where(inside, best[sh.q], pred)
        elif e_page == "para":  # the best candidate's page's mean paragraph
            if sh.paragraphs is None:
                raise ValueError(f"{target}: its ladder holds no paragraph counts (built without the artifact store)")
            e = page_evidence(sh.q, pred, sh.doc_tokens / sh.paragraphs, sh.n, 1.0)
        else:
            e = {"block": block, "max": np.maximum(block, _evidence(sh, pred, "predicted", median)), "median": median,
                 "document": _evidence(sh, pred, "document", median)}[e_page]
        logging.getLogger("transfer_adaptations").info("%s seed %d: E %s on the page's sections (the training sets' "
                                                        "median %.0f)", target, seed, e_page, median)
        ranked, util, pt, tf, tt, rp = plans((*key, e_page, flat, flat_how), e, dens)
        if how == "floor":
            floor = float(np.median(block[block > 0])) if (block > 0).any() else None
        elif how == "floorE":  # read at least up to the median E
            ev = np.broadcast_to(np.asarray(e, dtype=float), (sh.n,))
            floor = float(np.median(ev[ev > 0])) if (ev > 0).any() else None
        elif how == "here":  # the price from these questions' tokens alone (at most B)
            floor = np.inf
    if sentence_e and rule == "fits" and not whole_set(docs) and not page_sections(docs):
        # measured: on sentences of long documents E the best candidate's tokens (SENTENCE_E)
        ranked, util, pt, tf, tt, rp = plans((*key, "sentE"), document_evidence(sh.q, pred, sh.tokens, sh.n))
    floor_chain = None  # the chain the deployed floor reads there (lambda_here's chain)
    if source_floor and source_floor != "close" and sources_sections(docs):
        if source_floor == "chain":  # deployed (transfer.read_here)
            floor_chain = source_chain(sh.q, sh.unit_doc[sh.unit], pred, sh.doc_tokens, sh.n)
        elif source_floor == "none":  # measured: no floor, the training sets' price and the chain-bounded E alone
            docs_price = docs_price._replace(covered=np.zeros_like(docs_price.covered))
        else:  # measured: the close chain (a quarter, no gap; the first scorer's)
            floor_chain = docs.chain
    rows, rows_v = np.arange(sh.n), np.arange(len(util_v))
    price = {}
    g_v = _recal_v(util_v, t_v, rp_v, f_v, src_v, seed) if recal else None
    for b in BUDGETS:
        if rule == "relative":  # the ratio with the best validation F1 among those reading <= B there
            fits = [(float(np.nanmean(f_v[rows_v, c])), -r) for r in np.linspace(0.05, 0.95, 19)
                    for c in [relative_choice(rp_v, r)] if t_v[rows_v, c].mean() <= b]
            price[b] = -max(fits)[1] if fits else 0.95
        elif recal:  # measured: the price on the recalibrated F1_hat, each training shape's by the others' model
            price[b] = best_lambda(g_v, t_v, f_v, b)
        else:
            price[b] = best_lambda(util_v, t_v, f_v, b)
    if monotone:  # measured: a smaller budget's price at least a larger one's (the larger B's also reads <= B there)
        price = monotone_prices(price)
    if rule == "fits-best":  # the fits price as it read before the close documents: the best document alone
        docs, rule = docs._replace(close=docs.doc, chain=docs.doc, linked=None), "fits"
        docs_price = docs._replace(block=None)
    # the set's shape (set_shape.SetShape); per budget, this ranking's plans stopped in hindsight (ceiling_read)
    out = {"docs": docs, "ceiling": {}}
    if rule.startswith(("fits-alone", "fits-floor")) or rule == "fits":
        logging.getLogger("transfer_adaptations").info(
            "%s seed %d: best documents with a candidate neighbour %.2f (a shuffled corpus %.2f), sections share %.2f, "
            "owning several %.2f, sharing the best document %.2f, whole documents %s (parts of pages %s), standing "
            "alone %s", target, seed, linked_share(docs), docs.chance or 0.0, sections_share(docs), owned_share(docs),
            shared_share(docs), whole_set(docs), page_parts(docs), stands_alone(docs))
    close = None
    if rule.startswith(("fits-close", "fits-adjacent", "fits-sections")):  # measured on the refit's predictions
        r, _, g = rule.partition(":")[2].partition(":")  # <rule>[:<ratio>[:<gap>]]
        every, chain = close_reach(sh.q, sh.unit_doc[sh.unit], pred, sh.doc_tokens, sh.n,
                                   float(r or (0.5 if rule.startswith("fits-close") else 0.25)), int(g or 0))
        close = every if rule.startswith("fits-close") else chain
        if rule.startswith("fits-sections"):  # every close document where the close documents neighbour
            best = document_evidence(sh.q, pred, sh.doc_tokens, sh.n)
            close = every if sections_share(SetShape(best, docs.covered, every, chain)) >= SECTIONS_SHARE else chain
    for b in BUDGETS:
        if short_b is not None:  # deployed: the short order where the question's section is longer than B
            pred = short_first(short_b, sh.q, sh.tokens, sh.paras, section, b, run_ratio, run_owned)
            ranked, util, pt, tf, tt, rp = plans((*key, "shortparaB", b), section, dens)
        if bind is not None:
            e_b = np.where((bind[0] > b) == (bind[2] == "bind"), bind[0], bind[1])
            ranked, util, pt, tf, tt, rp = plans((*key, "chainE" + rule_arg, b), e_b)
        if rule == "relative":  # raised until these questions read <= B
            r = price[b]
            a = relative_choice(rp, r)
            while pt[rows, a].mean() > b and r < 1.0:
                r = min(1.0, r + 0.01)
                a = relative_choice(rp, r)
        elif rule.startswith(("fits-close", "fits-adjacent", "fits-sections")):  # measured: at least up to the close documents where the set is whole documents
            lam = lambda_here("learned", util, pt, b, price[b])[0]
            if whole_shape(docs.doc, docs.covered) and (close > 0).any():
                lam = min(lam, calibrate_lambda(util, pt, min(b, float(np.median(close[close > 0])))))
            a = decide(util, pt, lam)
        elif rule == "fits-exact":  # measured: the fits target as a ceiling too where there is one
            lam, target = lambda_here("fits", util, pt, b, price[b], docs_price)
            a = decide(util, pt, lam if target is None else calibrate_lambda(util, pt, target))
        elif rule == "fits-floor":  # the deployed rule before the cap
            a = decide(util, pt, lambda_here("fits", util, pt, b, price[b], docs_price)[0])
        elif rule == "fits-alone":  # measured: ... where the set's best documents stand alone
            lam, target = lambda_here("fits", util, pt, b, price[b], docs_price)
            alone = target is not None and linked_share(docs) < SECTIONS_SHARE
            a = decide(util, pt, calibrate_lambda(util, pt, target) if alone else lam)
        elif rule == "fits-alone-q":  # measured: ... each question whose best document stands alone reads at most it
            lam, target = lambda_here("fits", util, pt, b, price[b], docs_price)
            cap = np.where(docs.linked | (docs.doc <= 0), np.inf, docs.doc)[:, None] if target is not None else None
            a = decide(util, pt, lam, cap)
        else:  # as a transfer directory reads (mogg.run.budget.selector.transfer.read_here)
            cap = fits_cap(docs) if rule == "fits" else None
            if para_cap and section is not None:  # as transfer.read_here reads
                cap = section_cap(docs, section)
            u_lam = util
            u_pick = util
            if chain_cap and floor_chain is not None:  # measured: at most the chain, the price calibrated under it
                cap = np.where(floor_chain > 0, floor_chain, np.inf)[:, None]
                u_lam = np.where(pt > cap, -1e30, util)
            if cap_cal.startswith("floor") and cap is not None:  # measured: every question reads at least this share
                # of B, at most its section (the cap) and at most its longest plan: plans shorter are out
                low = np.minimum(np.minimum(float(cap_cal[5:]) * b, cap[:, 0]), pt.max(axis=1))
                u_lam = u_pick = np.where(pt < low[:, None] - 1e-9, -1e30, util)
            elif (cap_cal or (alone_cal and alone_read)) and cap is not None:  # deployed there: under the cap
                if cap_cal == "capB":
                    cap = np.minimum(cap, b)
                u_lam = np.where(pt > cap, -1e30, util)
            if recal:  # measured: F1_hat recalibrated by the training shapes' plans (recalibrated)
                g = recalibrated(util_v, t_v, rp_v, f_v, seed, util, pt, rp)
                u_lam, u_pick = (np.where(np.isfinite(u) & (u > -1e29), g, u) for u in (u_lam, u_pick))
            lam = lambda_here(rule, u_lam, pt, b, price[b], docs_price, floor_chain, section)[0]
            if floor is not None:  # measured: read at least up to the median block or E (at most B), or B
                lam = min(lam, calibrate_lambda(u_lam, pt, min(b, floor)))
            a = decide(u_pick, pt, lam, cap)
        out["ceiling"][b] = ceiling_read(tf, tt, b)
        own = choose_config(sh.table_f1, sh.table_tokens, rows, b)
        out[b] = (tf[rows, a], tt[rows, a], sh.table_f1[:, own], sh.table_f1[:, envelope_here(stats, sh.table_tokens, b)])
    return out


def plan_features(util: np.ndarray, tokens: np.ndarray, rp: np.ndarray) -> np.ndarray:
    """Each plan's features for the recalibration, [Q * K, 8], read the same on any shape: its F1_hat and that
    over the question's best, its tokens (log) and over the first plan's, its last candidate's prediction over the
    question's best, the step's gain in F1_hat, its place, and the question's best prediction's rank in the set."""
    q, k = util.shape
    fin = np.isfinite(util) & (util > -1e29)
    u = np.where(fin, util, 0.0)
    best_u = np.maximum(u.max(axis=1, keepdims=True), 1e-9)
    r = np.where(np.isfinite(rp), rp, np.nan)
    top = np.nanmax(np.where(np.isfinite(r), r, -np.inf), axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    scale = np.maximum(np.abs(top), 1e-9)
    last = np.where(np.isfinite(r), r, 0.0)  # past the question's candidates: a plan never chosen (util -inf)
    step = np.diff(u, axis=1, prepend=0.0)
    rank = (np.argsort(np.argsort(top[:, 0])) + 0.5) / max(q, 1)
    cols = [u, u / best_u, np.log1p(tokens), tokens / np.maximum(tokens[:, :1], 1.0), last / scale, step,
            np.broadcast_to(np.arange(k) / max(k - 1, 1), (q, k)), np.broadcast_to(rank[:, None], (q, k))]
    return np.stack([np.asarray(c, dtype=float).ravel() for c in cols], axis=1)


def _recal_model(util, tokens, rp, f1, seed):
    from sklearn.ensemble import HistGradientBoostingRegressor

    x = plan_features(util, tokens, rp)
    y = f1.ravel()
    ok = np.isfinite(util).ravel() & (util.ravel() > -1e29) & np.isfinite(y)
    return HistGradientBoostingRegressor(max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=50,
                                         random_state=seed).fit(x[ok], y[ok])


_RECAL: dict = {}


def recalibrated(util_v, t_v, rp_v, f_v, seed, util, tokens, rp) -> np.ndarray:
    """Measured: F1_hat [Q, K] replaced by a model of the true F1 fitted on the training shapes' validation plans
    (their F1_hat, tokens and predictions: plan_features), no label of the new set."""
    key = (id(util_v), seed)
    if key not in _RECAL:
        _RECAL[key] = _recal_model(util_v, t_v, rp_v, f_v, seed)
    return _RECAL[key].predict(plan_features(util, tokens, rp)).reshape(util.shape)


def _recal_v(util_v, t_v, rp_v, f_v, src_v, seed) -> np.ndarray:
    """The training shapes' recalibrated F1_hat, each shape's rows by a model fitted on the other shapes' (as the
    new set's is), for the price; one training shape: its own model."""
    out = np.empty_like(util_v, dtype=float)
    shapes_ = np.unique(src_v)
    for s_ in shapes_:
        own = src_v == s_
        fit = ~own if len(shapes_) > 1 else own
        m = _recal_model(util_v[fit], t_v[fit], rp_v[fit], f_v[fit], seed)
        out[own] = m.predict(plan_features(util_v[own], t_v[own], rp_v[own])).reshape(util_v[own].shape)
    fin = np.isfinite(util_v) & (util_v > -1e29)
    return np.where(fin, out, util_v)


def _budgets(out: dict) -> dict:
    """run_one's per-budget results (without the set's shape and the ceilings)."""
    return {b: v for b, v in out.items() if b not in ("docs", "ceiling")}


def ceiling_read(f1: np.ndarray, tokens: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray]:
    """A rule's plans [Q, K] (their true F1 and tokens) stopped in hindsight at ``budget`` mean tokens: each
    question's plan by its true F1 less lambda times its tokens, lambda calibrated so that the mean is at most B
    (the oracle frontier's stopping over this ranking; a ceiling, chosen with the labels, never a rule). Where the
    rule falls short of it, the stopping loses; where it is near, what the ranking holds is the limit. Returns the
    chosen plans' F1 and tokens [Q]."""
    from mogg.routing.plans import calibrate_lambda, decide

    true = np.nan_to_num(f1, nan=-1.0)  # a plan past a question's candidates is never chosen
    a = decide(true, tokens, calibrate_lambda(true, tokens, budget))
    rows = np.arange(len(true))
    return f1[rows, a], tokens[rows, a]


def summarise(per_seed: list[dict]) -> dict:
    """Pooled over seeds (question by question): gain and se per budget against the own envelope,
    mean tokens, and the two counts."""
    gains, ses, above, at_own, cells = [], [], 0, 0, []
    for b in BUDGETS:
        f, tok, own, train = (np.concatenate([o[b][i] for o in per_seed]) for i in range(4))
        ok = ~np.isnan(f) & ~np.isnan(own)
        n = ok.sum() / len(per_seed)  # the questions (seeds repeat them: the interval is over questions)
        d, dt = (f - own)[ok], (f - train)[ok]
        gains.append(float(d.mean()))
        ses.append(float(d.std() / np.sqrt(n)))
        above += bool(dt.mean() - 1.96 * dt.std() / np.sqrt(n) > 0)
        at_own += bool(d.mean() >= 0)
        cells.append(f"{np.nanmean(f):.3f} ({tok.mean():.0f})")
    return {"gain": float(np.mean(gains)), "se": float(np.mean(ses)), "above_training": above, "at_own": at_own,
            "budgets": len(BUDGETS), "cells": cells, "n": int(ok.sum() / len(per_seed))}


def markdown(table: dict, shapes: list[str], choice: dict, seeds: list[int], seconds: dict) -> str:
    head = "| adaptation | " + " | ".join(shapes) + " | worst shape (gain) |"
    lines = [head, "|" + "---|" * (len(shapes) + 2)]
    for a in sorted(table, key=lambda a: -choice["worst"][a][1]):
        mark = " **(kept)**" if a == choice["chosen"] else ""
        cells = [f"{table[a][x]['gain']:+.3f} ({table[a][x]['above_training']}/4, {table[a][x]['at_own']}/4)" for x in shapes]
        w = choice["worst"][a]
        lines.append(f"| {a}{mark} | " + " | ".join(cells) + f" | {w[0]} ({w[1]:+.3f}) |")
    n = ", ".join(f"{x} {table[choice['chosen']][x]['n']}" for x in shapes)
    lines += ["", f"Seeds {','.join(map(str, seeds))}; n = {n} questions. Cells: the mean over B = 64/128/256/512 of "
                  "the paired F1 difference to the held-out shape's own envelope (budgets above the training sets' "
                  "envelope beyond the 95% interval, budgets at or above its own envelope). Kept: the best worst shape; "
                  f"within one standard error ({choice['tolerance']:.3f}) of it: {', '.join(choice['tied'])} (the "
                  "next-worst shape decides).", "",
              "The kept adaptation, F1 (mean tokens) at B = 64 / 128 / 256 / 512:", ""]
    for x in shapes:
        lines.append(f"- {x}: " + " / ".join(table[choice["chosen"]][x]["cells"]))
    lines += ["", "Seconds per adaptation (all shapes and seeds): "
              + ", ".join(f"{a} {s:.0f}" for a, s in seconds.items())]
    return "\n".join(lines) + "\n"


def only_names(only: str) -> tuple[list[str], list[str]]:
    """``--only``'s adaptations (every one when empty) and the pieces naming none. Names hold commas
    ("within_question, E median"): at each piece the longest run of pieces that names one is taken."""
    pieces = [p.strip() for p in only.split(",") if p.strip()]
    names, bad, i = [], [], 0
    while i < len(pieces):
        j = next((j for j in range(len(pieces), i, -1) if ", ".join(pieces[i:j]) in ADAPTATIONS), None)
        if j is None:
            bad.append(pieces[i])
            i += 1
        else:
            names.append(", ".join(pieces[i:j]))
            i = j
    return (names or ([] if bad else list(ADAPTATIONS))), bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (the validation slices and the scorer's)")
    ap.add_argument("--only", default="", help=f"comma-separated adaptations (default: all of {', '.join(ADAPTATIONS)})")
    ap.add_argument("--out", type=Path, default=None, help="also write the table here (markdown)")
    ap.add_argument("--train-also", default="", help="comma-separated shapes also trained on wherever they share no "
                    "texts with the held-out one (e.g. snippets,medmcqa_sentences: the multi-document shapes)")
    ap.add_argument("--shapes", default="", help="comma-separated held-out shapes to read (default: every one; "
                    "the others are still trained on)")
    ap.add_argument("--ceiling", action="store_true", help="also each adaptation's plans stopped in hindsight at B "
                    "mean tokens (ceiling_read: a ceiling chosen with the labels; is the gap the stopping or the ranking?)")
    ap.add_argument("overrides", nargs="*", help="config overrides, e.g. paths.artifacts=/scratch/artifacts")
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--seeds {args.seeds!r}: comma-separated integers")
    names, bad = only_names(args.only)
    if bad:
        ap.error(f"--only: unknown adaptation(s) {bad}; one of {list(ADAPTATIONS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    log = logging.getLogger("transfer_adaptations")
    from mogg.core.artifacts import write_text_atomic
    from mogg.run.budget.selector.transfer_rule import worst_shape_choice

    wanted, known = [t.strip() for t in args.shapes.split(",") if t.strip()], sorted(f.stem for f in HELDOUT.glob("*.yaml"))
    if set(wanted) - set(known):  # before any shape is prepared (minutes)
        ap.error(f"--shapes: unknown shape(s) {sorted(set(wanted) - set(known))}; one of {known}")
    try:
        shapes, splits, kind = load_shapes(args.overrides, tuple(t.strip() for t in args.train_also.split(",") if t.strip()))
    except ValueError as e:
        ap.error(str(e))
    log.info("splits (held out: trained on): %s", "; ".join(f"{h}: {', '.join(ts)}" for h, ts in splits.items()))
    held = [x for x in splits if not wanted or x in wanted]
    table, seconds, ceilings = {}, {}, {}
    for a in names:
        t0 = time.perf_counter()
        table[a] = {}
        for i, x in enumerate(held, 1):  # a line per shape: an adaptation over six shapes takes minutes
            runs = [run_one(shapes, x, s, ADAPTATIONS[a], kind, splits) for s in seeds]
            table[a][x] = summarise([_budgets(r) for r in runs])
            if args.ceiling:  # pooled over the seeds question by question, as summarise pools the table's
                ceilings.setdefault(a, {})[x] = [
                    f"{np.nanmean(np.concatenate([r['ceiling'][b][0] for r in runs])):.3f} "
                    f"({np.concatenate([r['ceiling'][b][1] for r in runs]).mean():.0f})" for b in BUDGETS]
            log.info("%s [%d/%d] %s %+.3f (%.0f s so far)", a, i, len(held), x, table[a][x]["gain"],
                     time.perf_counter() - t0)
        seconds[a] = time.perf_counter() - t0
        log.info("%s: %s (%.0f s)", a, "  ".join(f"{x} {v['gain']:+.3f}" for x, v in table[a].items()), seconds[a])
    order = sorted(held)
    md = markdown(table, order, worst_shape_choice(table, order), seeds, seconds)
    if args.ceiling:
        md += "".join(f"\nThe plans of {a} stopped in hindsight at B mean tokens (a ceiling, chosen with the labels), "
                      "F1 (mean tokens) at B = 64 / 128 / 256 / 512:\n\n"
                      + "".join(f"- {x}: " + " / ".join(ceilings[a][x]) + "\n" for x in order) for a in table)
    sys.stdout.write(md)
    if args.out is not None:
        write_text_atomic(args.out, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
