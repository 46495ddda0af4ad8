"""Label-free adaptations of the transferred evidence selector to a new set (issue 58), measured
leave one shape out by ``scripts/transfer_adaptations.py`` and chosen by the worst held-out shape
(docs/results.md).

* :func:`feature_view`: the scorer's columns as they are (``raw``), or with each column's z-score
  and rank within its question added (``within_question``): a BM25 score or a vote means different
  things on a 200-token abstract and inside a 4,000-token paper, its place among the question's own
  candidates means the same; ``within_question_only`` keeps only those (and the question's length),
  ``no_options`` drops the answer-option columns; ``no_document`` drops the columns that describe
  the unit's document as a whole or the unit's place in it (:func:`document_columns`), and
  ``within_question_no_document`` adds the within-question view of the columns that remain. A
  document's vote and length decide where the evidence is a whole document (PubMedQA*'s abstract)
  and mislead where it is one sentence of a long paper (COVID-QA): trained on the other shapes, the
  document columns put a random sentence of the best paper first (docs/results.md).
* :func:`shift_weights`: covariate-shift weights for the training candidates, from a classifier
  telling the training sets' candidates from the new set's (features only, no labels).
* the new set's shape, whether its evidence is whole short documents and how far the ``fits`` price reads
  there: :mod:`mogg.run.budget.selector.set_shape`.
* :func:`self_train`: a scorer refitted on the new set's own candidates with pseudo-labels from the
  transferred scorer's confident choices, cross-fitted over the new set's questions (no question is
  scored by a model that saw its own pseudo-label). Its pseudo-labels can come instead from
  :func:`agreement`: the candidates the retrieval columns agree on (measured, not deployed).

Every function is vectorised over candidates; loops run over columns or folds only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from mogg.core.segments import group_best_row, group_max, pair_groups, segment_rank

VIEWS = ("raw", "within_question", "within_question_only", "no_options", "no_document", "within_question_no_document")
OPTION_MARK = "option"  # the answer-option columns' names hold it (candidates.FEATURES)
QUESTION_COLUMNS = ("question_log_tokens",)  # one value per question: nothing to normalise within it
DOCUMENT_MARK = "doc_"  # the document-level columns' names start with it (candidates.FEATURES, CONTEXT_FEATURES)
DOCUMENT_COLUMNS = ("log_doc_units",)  # ... and the document's length


def document_columns(names: list[str]) -> list[int]:
    """Indices of the columns about the unit's document (its vote, match, cosine, candidates,
    length) or the unit's place in it (``doc_position``, ``doc_first``)."""
    return [i for i, f in enumerate(names) if f.startswith(DOCUMENT_MARK) or f in DOCUMENT_COLUMNS]


def rank_within(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Each row's rank among its question's rows by ``v`` [N], best (largest) first: float64 [N], 0 the best,
    ties in row order (the sort is stable), NaN last; ``q`` [N] each row's question."""
    keyed = np.where(np.isnan(v), np.inf, -np.asarray(v, dtype=np.float64))
    order = np.lexsort((keyed, q))
    rank = np.empty(len(q))
    rank[order] = segment_rank(q[order])
    return rank


def within_question(x: np.ndarray, q: np.ndarray, n_questions: int) -> np.ndarray:
    """Each column's z-score and rank percentile among its question's candidates, float32 [N, 2F]
    (``x`` [N, F], ``q`` [N] each row's question; NaN reads 0 for the z-score and ranks last;
    a question with one candidate: z 0, rank 0)."""
    x = np.asarray(x, dtype=np.float64)
    n_rows, n_cols = x.shape
    if not n_rows:
        return np.zeros((0, 2 * n_cols), dtype=np.float32)
    xx = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
    n = np.bincount(q, minlength=n_questions).astype(np.float64)
    # per question sums of every column at once: [Q, F] by a sparse-free scatter (np.add.at on rows)
    s1 = np.zeros((n_questions, n_cols))
    s2 = np.zeros((n_questions, n_cols))
    np.add.at(s1, q, xx)
    np.add.at(s2, q, xx * xx)
    mean = s1 / np.maximum(n, 1.0)[:, None]
    var = np.maximum(s2 / np.maximum(n, 1.0)[:, None] - mean * mean, 0.0)
    sd = np.sqrt(var)
    z = np.where(sd[q] > 1e-9, (xx - mean[q]) / np.maximum(sd[q], 1e-9), 0.0)
    # F columns, each one sort over every row
    rank = np.stack([rank_within(x[:, j], q) for j in range(n_cols)], axis=1) if n_cols else np.zeros((n_rows, 0))
    rank /= np.maximum(n[q] - 1.0, 1.0)[:, None]
    return np.concatenate([z, rank], axis=1).astype(np.float32)


def feature_view(x: np.ndarray, q: np.ndarray, n_questions: int, view: str, names: list[str] | None = None
                 ) -> np.ndarray:
    """The scorer's input under ``view`` (:data:`VIEWS`; module doc); ``names``: the columns'
    names (:func:`mogg.run.budget.selector.candidates.feature_names`), needed by the views that
    drop columns."""
    if view not in VIEWS:
        raise ValueError(f"feature view {view!r}: one of {VIEWS}")
    if view == "raw":
        return x
    if view == "within_question":
        return np.concatenate([x, within_question(x, q, n_questions)], axis=1)
    if names is None or len(names) != x.shape[1]:
        raise ValueError(f"feature view {view!r} needs the {x.shape[1]} columns' names")
    if view == "no_options":
        return x[:, [i for i, f in enumerate(names) if OPTION_MARK not in f]]
    if view in ("no_document", "within_question_no_document"):
        drop = set(document_columns(names))
        x = x[:, [i for i in range(x.shape[1]) if i not in drop]]
        return x if view == "no_document" else np.concatenate([x, within_question(x, q, n_questions)], axis=1)
    keep = [i for i, f in enumerate(names) if f in QUESTION_COLUMNS]
    return np.concatenate([x[:, keep], within_question(x, q, n_questions)], axis=1)


def shift_weights(sources: list[np.ndarray], target: np.ndarray, seed: int, clip: tuple[float, float] = (0.05, 20.0),
                  threads: int | None = None) -> list[np.ndarray]:
    """Per training set, a weight for each of its candidates [N_s], mean 1 within the set: the odds
    that a classifier (cross-fitted over two halves) takes the candidate for one of the new set's
    ``target`` candidates, corrected for the two pools' sizes and clipped to ``clip``."""
    import lightgbm as lgb

    xs = np.concatenate(sources)
    x = np.concatenate([xs, target])
    y = np.r_[np.zeros(len(xs)), np.ones(len(target))]
    half = np.random.default_rng(seed).integers(0, 2, len(x))
    p = np.zeros(len(x))
    for k in range(2):  # two halves: no candidate's odds come from a model that saw it
        m = lgb.LGBMClassifier(n_estimators=100, num_leaves=15, min_child_samples=200, learning_rate=0.1,
                               random_state=seed, deterministic=True, force_col_wise=True, n_jobs=threads or 1,
                               verbose=-1)
        m.fit(x[half != k], y[half != k])
        p[half == k] = m.predict_proba(x[half == k])[:, 1]
    ps = p[: len(xs)]
    odds = np.clip(ps / np.maximum(1.0 - ps, 1e-6) * len(xs) / max(len(target), 1), *clip)
    bounds = np.cumsum([0] + [len(s) for s in sources])
    return [odds[a:b] / max(odds[a:b].mean(), 1e-12) for a, b in zip(bounds[:-1], bounds[1:])]


def self_train(x: np.ndarray, q: np.ndarray, n_questions: int, pred: np.ndarray, seed: int, top: int = 2,
               confident: float = 0.5, threads: int | None = None) -> np.ndarray:
    """A new set's own scorer from pseudo-labels, float64 [N] in [0, 1]: on the questions where the
    transferred prediction ``pred`` [N] separates its best candidate from the second by more than
    the ``confident`` quantile of those margins, its ``top`` candidates are positives and the rest
    negatives; a classifier over the new set's features ``x`` fitted on one half of the questions
    scores the other half (two folds)."""
    import lightgbm as lgb

    rank = rank_within(pred, q)
    best = np.full(n_questions, -np.inf)
    second = np.full(n_questions, -np.inf)
    np.maximum.at(best, q, pred)
    np.maximum.at(second, q, np.where(rank == 1, pred, -np.inf))
    margin = best - second
    finite = np.isfinite(margin)
    y = (rank < top).astype(float)
    half = np.random.default_rng(seed).integers(0, 2, n_questions)
    out = np.zeros(len(q))
    for k in range(2):  # a question is scored by the model of the other half (cross-fitted)
        pool = finite & (half != k)  # the confidence threshold too comes from the fitting half only
        sure = pool & (margin > (np.quantile(margin[pool], confident) if pool.any() else np.inf))
        fit_rows = sure[q]
        score_rows = half[q] == k
        if not fit_rows.any() or len(np.unique(y[fit_rows])) < 2:
            out[score_rows] = 0.5
            continue
        m = lgb.LGBMClassifier(n_estimators=200, num_leaves=31, min_child_samples=40, learning_rate=0.05,
                               random_state=seed + k, deterministic=True, force_col_wise=True, n_jobs=threads or 1,
                               verbose=-1)
        m.fit(x[fit_rows], y[fit_rows])
        out[score_rows] = m.predict_proba(x[score_rows])[:, 1]
    return out


# the unit-level retrieval signals an agreement fuses (candidates.FEATURES): IDF-weighted match, BM25, the
# query-sentence cosine, the ladder's chunk vote; each ranks a candidate by itself, without a fitted model
AGREEMENT_COLUMNS = ("match", "bm25", "cosine", "vote")
RRF_K = 60.0  # reciprocal-rank fusion's constant (Cormack et al. 2009), not tuned


def agreement(x: np.ndarray, names: list[str], q: np.ndarray, extra: np.ndarray | None = None,
              columns: tuple[str, ...] = AGREEMENT_COLUMNS) -> np.ndarray:
    """Label-free pseudo-scores [N] from the agreement of the retrieval columns: the reciprocal-rank
    fusion, within each question (``q`` [N]), of ``columns`` of ``x`` [N, F] (named ``names``) and of
    ``extra`` [N] (a transferred prediction) where given. High where the columns agree a candidate is
    among the question's best, whatever scale each column has on this set."""
    cols = [x[:, names.index(c)] for c in columns if c in names] + ([extra] if extra is not None else [])
    if not cols:
        raise ValueError(f"agreement: none of {columns} among the columns")
    out = np.zeros(len(q))
    for v in cols:  # a loop over the few columns; each rank is vectorised over the candidates
        out += 1.0 / (RRF_K + rank_within(np.asarray(v, dtype=np.float64), q))
    return out


FIXED_ANSWERS = 0.5  # options shared by at least this share of a set's questions with options: a fixed answer set


def fixed_answers(options: Sequence[str]) -> np.ndarray:
    """Whether each question's answer options [Q] (one text per question, "" for none) are a fixed answer set: the
    same texts (case and spacing aside) as at least :data:`FIXED_ANSWERS` of the questions with options, and two
    or more of them (PubMedQA's yes / no / maybe). Such options name no explanation, so they never vote
    (:func:`options_vote`; docs/results.md, "The answer options vote": their vote cost the PubMedQA shapes up to
    0.277). No labels."""
    norm = [" ".join(str(o).casefold().split()) for o in options]
    asked = [o for o in norm if o]
    if not asked:
        return np.zeros(len(norm), dtype=bool)
    counts = Counter(asked)
    return np.array([bool(o) and counts[o] >= max(2, FIXED_ANSWERS * len(asked)) for o in norm], dtype=bool)


def voting_options(option_match: np.ndarray, cand_q: np.ndarray, options: Sequence[str] | None) -> np.ndarray | None:
    """The candidates' share of their question's options' words [N] (``option_match``) where those options may vote
    (:func:`fixed_answers`), NaN elsewhere; None without option texts. Fewer than two questions with options (one
    question routed alone): nothing to tell a fixed answer set by, so none votes."""
    if options is None:
        return None
    fixed = fixed_answers(options)
    if sum(bool(str(o).strip()) for o in options) < 2:
        fixed = np.ones(len(fixed), dtype=bool)
    return np.where(fixed[cand_q], np.nan, option_match) if len(cand_q) else np.asarray(option_match, dtype=float)


def options_vote(pred: np.ndarray, q: np.ndarray, options: np.ndarray, doc: np.ndarray | None = None) -> np.ndarray:
    """``pred`` [N] reordered within each question (``q`` [N]) by the reciprocal-rank fusion (:data:`RRF_K`, equal
    weights, not tuned) of its own order and the candidates' share of the answer options' words (``options`` [N]:
    the ``option_match`` column, NaN where the question has none; an explanation names the right option), the
    values kept (:func:`reorder`: the transferred scale still prices a token); with ``doc`` [N] (each candidate's
    document: the whole-document scorer) the documents in the order of their best fused candidate
    (:func:`document_best`). A question without options keeps its order. No labels: where the training sets hold no
    options that name an explanation (MedMCQA's left out), the scorers never learned to weigh that column (docs/results.md, "The answer
    options vote")."""
    options = np.asarray(options, dtype=np.float64)
    has = np.isfinite(options)
    if not has.any():
        return pred
    fused = 1.0 / (RRF_K + rank_within(pred, q)) + np.where(has, 1.0 / (RRF_K + rank_within(options, q)), 0.0)
    if doc is not None:
        fused = document_best(fused, q, doc)
    asks = np.zeros(int(q.max()) + 1, dtype=bool)
    asks[q[has]] = True  # the questions with options: the others keep their rows as they are
    return np.where(asks[q], reorder(pred, q, fused), pred)


def reorder(pred: np.ndarray, q: np.ndarray, score: np.ndarray) -> np.ndarray:
    """``pred``'s values [N] handed out again within each question (``q`` [N]) in the order of
    ``score`` [N] (ties: ``pred``'s order): the ranking is ``score``'s, every question keeps its
    multiset of predicted densities, so the plans' estimated F1 and the price of a token keep the
    transferred scorer's scale (self-training reorders, it does not reprice)."""
    pred = np.asarray(pred, dtype=np.float64)
    by_pred = np.lexsort((np.arange(len(q)), -pred, q))
    by_score = np.lexsort((np.arange(len(q)), -pred, -np.asarray(score, dtype=np.float64), q))
    out = np.empty_like(pred)
    out[by_score] = pred[by_pred]  # both orders group the questions alike: the k-th of a question gets its k-th value
    return out


def document_best(score: np.ndarray, q: np.ndarray, doc: np.ndarray) -> np.ndarray:
    """Each row's best ``score`` [N] among its question's candidates in the same document (``q``, ``doc``
    [N]): ordering by it (ties: the transferred order) reads the documents in the order of their best
    candidate, each whole unless two documents' best tie."""
    pair = pair_groups(q, doc)
    return group_max(score, pair)[pair]


def block_rows(cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray, pred: np.ndarray, n_questions: int,
               ratio: float = 0.5) -> np.ndarray:
    """Whether each candidate [N] (bool) is in the contiguous block around its question's best-scored
    candidate: the same document, consecutive units that are all candidates of the question and all
    predicted at least ``ratio`` times the best's density. Rows sorted by (question, unit), as
    :func:`mogg.run.budget.selector.candidates.candidates` gives them."""
    if not len(cand_q):
        return np.zeros(0, dtype=bool)
    doc = np.asarray(unit_doc)[unit]
    first = group_best_row(pred, cand_q)
    top = np.full(n_questions, -1)
    top[cand_q[first]] = first
    good = (pred >= ratio * pred[top[cand_q]]) & (doc == doc[top[cand_q]])
    cut = np.r_[True, (cand_q[1:] != cand_q[:-1]) | (unit[1:] != unit[:-1] + 1) | (good[1:] != good[:-1])
                | (doc[1:] != doc[:-1])]
    run = np.cumsum(cut) - 1  # consecutive rows of one block share a run id
    return run == run[top[cand_q]]


def block_evidence(cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray, tokens: np.ndarray, pred: np.ndarray,
                   n_questions: int, ratio: float = 0.5) -> np.ndarray:
    """E per question, float64 [Q]: the tokens of the contiguous block around its best-scored
    candidate (:func:`block_rows`). Candidates cluster into a block where the evidence is a passage
    (an abstract, a section) and stay one sentence where it is one sentence of a long paper: a length
    the new set's own candidates show, no labels. 0 without candidates."""
    out = np.zeros(n_questions)
    if not len(cand_q):
        return out
    np.add.at(out, cand_q, np.where(block_rows(cand_q, unit, unit_doc, pred, n_questions, ratio), tokens, 0.0))
    return out


def relative_choice(ranked_pred: np.ndarray, ratio: float) -> np.ndarray:
    """Per question the last plan [Q] (0-based prefix length - 1) whose every unit is predicted at
    least ``ratio`` times the question's best unit (``ranked_pred`` [Q, K]: the predictions in rank
    order, -inf past the candidates): a price of a token read off each question's own scores."""
    top = np.maximum(ranked_pred[:, :1], 1e-9)
    ok = np.cumprod(ranked_pred / top >= ratio, axis=1).astype(bool)
    return np.maximum(ok.sum(axis=1) - 1, 0)
