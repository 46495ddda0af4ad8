"""Self-training of a transfer directory on the questions it reads (issue 58): a scorer refitted on
their own candidates, its labels the transferred scorer's confident choices, reorders what the
transferred scorer predicted, label-free (:func:`self_trained`; measured and chosen by the worst
held-out shape: docs/results.md, "Self-training that reorders")."""

from __future__ import annotations

import logging

import numpy as np

from mogg.run.budget.selector.adapt import document_best, options_vote, reorder, self_train
from mogg.run.budget.selector.deploy import DeployedSelector

log = logging.getLogger(__name__)

ROUND_SEED = 17  # round r's halves and trees are seeded seed + ROUND_SEED * r (round 0: the directory's seed)


def self_trained(dep: DeployedSelector, kind, x: np.ndarray, pred: np.ndarray, cand_q: np.ndarray,
                 n_questions: int, doc: np.ndarray | None = None, options: np.ndarray | None = None) -> np.ndarray:
    """A transfer directory's predictions [N] reordered within each question by a scorer refitted on
    these questions' own candidates ``x`` [N, F] (its view), with ``pred``'s confident choices as
    pseudo-labels, cross-fitted over the questions (:func:`~mogg.run.budget.selector.adapt.self_train`,
    seeded by the directory's fit), the values kept (:func:`~mogg.run.budget.selector.adapt.reorder`:
    the transferred scale still prices a token). ``pred`` as it is where the directory's
    ``transfer_self_train`` is null or unrecorded (written before the knob), it is in-set, or fewer
    questions than it have candidates. ``transfer_self_train_rounds`` rounds (1 for a directory written
    before that knob), each one's pseudo-labels the previous one's order. ``doc`` [N] (each candidate's
    document; the whole-document scorer): the refit orders the documents only (by their best candidate,
    :func:`~mogg.run.budget.selector.adapt.document_best`), in one round, the units within one keep the
    transferred order: where the evidence is a whole abstract, which document matters and a 64-token read
    of the wrong sentences of the right one costs (docs/results.md). ``options`` [N] (the candidates' share of
    their question's answer options' words where they vote: :func:`~mogg.run.budget.selector.adapt.voting_options`;
    None: no vote): each round's pseudo-labels are drawn from that order with the options' vote
    (:func:`~mogg.run.budget.selector.adapt.options_vote`, over the candidates), so the refit learns what the
    options' words say on this set (docs/results.md, "The answer options vote")."""
    settings = dep.deploy.get("settings") or {}
    # a directory written before the knob was measured without it: it reads as it did (not the default now)
    least = settings.get("transfer_self_train") if dep.transfer else None
    asked = int(np.unique(cand_q).size)
    if least is None or asked < int(least):
        if least is not None:
            log.info("%d questions with candidates (< transfer_self_train = %d): the transferred ranking as it is",
                     asked, least)
        return pred
    seed = int(dep.deploy["fit"]["seed"])
    # the documents' order (the whole-document scorer) is refitted once; the ranking transfer_self_train_rounds
    # times, a directory written before that knob was measured with one
    rounds = 1 if doc is not None else int(settings.get("transfer_self_train_rounds") or 1)
    out = pred
    for r in range(rounds):  # each round's pseudo-labels: the previous round's order (the values stay pred's)
        labels = out if options is None else options_vote(out, cand_q, options)
        own = self_train(x, cand_q, n_questions, labels, seed + ROUND_SEED * r)
        out = reorder(pred, cand_q, own if doc is None else document_best(own, cand_q, doc))
    log.info("the %s refitted on these %d questions' own candidates (self-training, %d round(s), seed %d)",
             "ranking" if doc is None else "documents' order", asked, rounds, seed)
    return out
