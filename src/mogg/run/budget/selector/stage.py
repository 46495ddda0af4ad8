"""The read-inside-the-chunk stage of a frontier run (the evidence selector kind; issue 38):
candidate units with features and labels, the evidence selector's cross-fit (train.py), and the
selector, route + trim and sentence-oracle policies (evaluate.py).

train: ``<checkpoint>/<ladder>/selector/`` (:mod:`mogg.run.budget.selector.folds`); evaluate: a
:class:`mogg.run.budget.selector.policy.Reading` for :func:`frontier_evaluation`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hydra.utils import instantiate

from mogg.prepared import Prepared
from mogg.run.budget.base import Learned
from mogg.run.budget.selector.candidates import Candidates, candidates, evidence_overlap, features
from mogg.run.budget.selector.folds import crossfit_selector, predict_selector_folds, selector_key
from mogg.run.budget.selector.lexicon import Lexicon, unit_terms
from mogg.run.budget.selector.plans import context_units, document_tokens, selector_learned, sentence_oracle
from mogg.run.budget.selector.policy import Reading
from mogg.run.context import RunContext

log = logging.getLogger(__name__)

@dataclass
class ReadingData:
    """One ladder's candidates, their features [N, F], evidence density [N] and tokens [N]; each
    question's evidence tokens [Q]; every unit's tokens [U]; the seconds they took."""

    cand: Candidates
    x: np.ndarray
    density: np.ndarray
    tokens: np.ndarray
    evidence_len: np.ndarray
    unit_tokens: np.ndarray
    seconds: float
    doc_tokens: np.ndarray | None = None  # [N]: each candidate's document's tokens (evidence=document)


def reading_data(ctx: RunContext, prep: Prepared, sel, page: bool = False) -> ReadingData:
    """Candidates (the deep hits), features, labels (module doc of :mod:`mogg.run.budget.selector.candidates`);
    ``sel``: the selector's knobs (:class:`~mogg.run.budget.selector.kind.EvidenceSelectorKind`); ``page``: the
    page-contrastive columns too (a transfer scorer's: ``transfer_page_words``)."""
    t0 = time.perf_counter()
    encoder = instantiate(ctx.encoder) if sel.cosine else None
    lex, cand, x = candidate_features(prep.ladder, prep.deep, prep.questions,
                                      [" ".join(it.options.values()) for it in prep.items], sel.depth, sel.per_chunk,
                                      sel.cosine, encoder, ctx.artifacts, prep.ladder_key, context=sel.context,
                                      page=page)
    evidence = [it.evidence_text for it in prep.items]
    overlap = evidence_overlap(cand, lex, evidence)
    tokens = lex.unit_tokens[cand.unit].astype(float)
    from mogg.core.text import count_tokens

    ev_len = np.array([count_tokens(e) if e.strip() else np.nan for e in evidence], dtype=float)
    doc_tokens = document_tokens(prep.ladder.units.doc, lex.unit_tokens, cand.unit)
    return ReadingData(cand, x, overlap / np.maximum(tokens, 1.0), tokens, ev_len, lex.unit_tokens.astype(float),
                       time.perf_counter() - t0, doc_tokens)


def questions_only(d: ReadingData, kept: np.ndarray) -> ReadingData:
    """``d`` for the questions ``kept`` (their positions, int [K], ascending) only, numbered 0..K-1 in that order:
    their candidates' rows, features, density, tokens and documents' tokens, and their evidence tokens."""
    kept = np.asarray(kept, dtype=np.int64)
    if len(kept) == d.cand.n_questions:
        return d
    new = np.full(d.cand.n_questions, -1, dtype=np.int64)
    new[kept] = np.arange(len(kept))
    m = new[d.cand.q] >= 0
    c = d.cand
    return dataclasses.replace(
        d, cand=Candidates(new[c.q[m]], c.unit[m], c.score[m], c.rank[m], len(kept)), x=d.x[m],
        density=d.density[m], tokens=d.tokens[m], evidence_len=d.evidence_len[kept],
        doc_tokens=None if d.doc_tokens is None else d.doc_tokens[m])


def candidate_features(ladder, deep, questions: list[str], options: list[str], depth: int, per_chunk: int,
                       cosine: bool, encoder=None, artifacts: Path | None = None,
                       ladder_key: dict | None = None, *, context: bool, page: bool = False
                       ) -> tuple[Lexicon, Candidates, np.ndarray]:
    """The lexicon, the candidates in the deep hits (each level's top ``depth`` chunks, at most
    ``per_chunk`` units of one) and their features [N, F] for ``questions`` (``options``: each
    question's answer options as one text, "" for none); no labels needed, so training and
    ``mogg-route`` build them alike. ``encoder``: for the cosine columns (``cosine``). With
    ``artifacts`` and ``ladder_key`` the units' term matrices are read from beside the ladder (built
    there once): no step here scans the corpus. ``context``: also the neighbours' and document's
    columns (:data:`~mogg.run.budget.selector.candidates.CONTEXT_FEATURES`); ``page``: also the page-contrastive
    ones (:data:`~mogg.run.budget.selector.candidates.PAGE_FEATURES`: the transfer scorers')."""
    lex = Lexicon(unit_terms(ladder, ladder_key, artifacts), list(questions), list(options))
    cand = candidates(ladder, deep, lex, depth, per_chunk)
    cand_emb = q_emb = None
    if cosine:
        from mogg.encoders import embed_queries, embed_texts

        # only the units some question may read, each encoded once ever (kept by text in the artifact
        # store): the cost follows the questions, not the corpus
        units, inverse = np.unique(cand.unit, return_inverse=True)
        texts = [ladder.units.text[int(u)] for u in units]
        cand_emb = _normed(embed_texts(encoder, texts, artifacts, what="candidate sentences"))[inverse]
        q_emb = _normed(embed_queries(encoder, list(questions), artifacts))
    return lex, cand, features(ladder, cand, lex, cand_emb, q_emb, context=context, page=page)


def _normed(e: np.ndarray) -> np.ndarray:
    return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)


def _key(ctx: RunContext, prep: Prepared, data: ReadingData, sel) -> dict:
    return selector_key(data.x, data.density, data.cand.q, len(prep.items), ctx.n_folds, ctx.seed, sel.params,
                        ctx.val_fraction, prep.data_key)


def train_selector(ctx: RunContext, prep: Prepared, sel, out_dir: Path) -> dict:
    """Cross-fit the evidence selector for one ladder into ``out_dir``."""
    data = reading_data(ctx, prep, sel)
    t0 = time.perf_counter()
    info = crossfit_selector(data.x, data.density, data.tokens, data.cand.q, data.evidence_len, prep.query_ids,
                             ctx.n_folds, ctx.seed, sel.params, ctx.val_fraction, out_dir,
                             prep.data_key, threads=ctx.threads)
    log.info("selector: %d candidates (%.1f per question), features %.1f s, fit %.1f s", len(data.cand),
             len(data.cand) / max(len(prep.items), 1), data.seconds, time.perf_counter() - t0)
    return info


def reading_policies(ctx: RunContext, prep: Prepared, sel, out_dir: Path, action: Learned | None, space,
                     budgets, retrain: str, guard_se: float) -> Reading:
    """The selector, route + trim at ``budgets`` (with a chunk-level router's plans ``action``:
    ``space``'s actions) and the sentence oracle for one ladder (``guard_se``: the guard's
    standard errors)."""
    data = reading_data(ctx, prep, sel)
    t0 = time.perf_counter()
    sf = predict_selector_folds(data.x, data.cand.q, prep.query_ids, out_dir, _key(ctx, prep, data, sel), retrain)
    n = max(len(prep.items), 1)
    cost = {"features": 1000 * data.seconds / n, "scoring": 1000 * (time.perf_counter() - t0) / n}
    texts, unit, evidence = prep.ladder.units.text, data.cand.unit, [it.evidence_text for it in prep.items]
    tokens, q = data.tokens, data.cand.q
    selector = selector_learned("selector", q, unit, tokens, sf.pred, sf.val, sf.evidence_len, sf.fold, texts, evidence,
                                sel.plans, estimate=sel.evidence, doc_tokens=data.doc_tokens)
    oracle = sentence_oracle(q, unit, tokens, data.density, len(prep.items), texts, evidence, sel.plans)
    budgets = {float(b) for b in budgets}
    lex_tokens = data.unit_tokens

    def trims(b: float) -> list[Learned] | None:
        """Route at B' = B, 2B, 4B (the action router's choices), then trim with the selector."""
        if action is None or float(b) not in budgets:
            return None
        out = []
        for mult in (1, 2, 4):
            keep = np.zeros(len(q), dtype=bool)
            keep_val = []
            for j, (vq, _, _, _) in enumerate(action.val):
                test = np.flatnonzero(sf.fold == j)
                _, ch, va = action.choices(j, test, mult * b)
                keep |= context_units(prep.ladder, prep.deep.ids, _scatter(len(prep.items), test, ch), space,
                                      lex_tokens, q, unit) & np.isin(q, test)
                keep_val.append(context_units(prep.ladder, prep.deep.ids, _scatter(len(prep.items), vq, va), space,
                                              lex_tokens, q, unit) & np.isin(q, vq))
            out.append(selector_learned(f"route ({mult}B) + trim", q, unit, tokens, sf.pred, sf.val, sf.evidence_len,
                                        sf.fold, texts, evidence, sel.plans, keep, keep_val, sel.evidence,
                                        data.doc_tokens))
        return out

    return Reading(selector, trims, oracle, guard_se, cost)


def _scatter(n: int, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """[n] with ``values`` at ``rows`` (0 elsewhere: rows not asked about are masked by the caller)."""
    out = np.zeros(n, dtype=np.int64)
    out[rows] = values
    return out
