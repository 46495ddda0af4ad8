"""MAL-RAG's selection rule (``mal_cumulative``): retrieve over all levels until a length budget is
filled, turn the retrieved chunks' similarities into softmax probabilities, keep chunks in rank
order until their cumulative probability reaches ``tau``.

Scores are the per-level retrievers' (BM25 or cosine): each query's retrieved scores are divided
by its best one before the softmax (``exp(s / s_max / temperature)``), so the rule means the same
for BM25's unbounded scores as for cosines. Vectorised over queries; any ladder can use it (a
policy hook in the ladder's config, ``policies: {mal_cumulative: ...}``).
"""

from __future__ import annotations

import numpy as np

from mogg.ladders.base import Ladder
from mogg.ladders.structural import token_lengths
from mogg.search import Hits
from mogg.selection.mog import Selection
from mogg.selection.policy import PolicyInputs


def mal_cumulative_select(ladder: Ladder, hits: Hits, budget: int, tau: float, temperature: float = 0.1,
                          k_max: int | None = None) -> Selection:
    """Chunks per query (ranked, width = the most any query keeps, -1 padding)."""
    n_q, n_l, k_r = hits.shape
    ids = hits.ids.reshape(n_q, n_l * k_r)
    lv = np.broadcast_to(np.repeat(np.arange(n_l), k_r), ids.shape)
    s = np.where(ids >= 0, hits.scores.reshape(n_q, n_l * k_r).astype(np.float64), -np.inf)
    order = np.argsort(-s, axis=1, kind="stable")  # all levels ranked together; ties keep finer levels first
    ids, lv, s = (np.take_along_axis(a, order, 1) for a in (ids, lv, s))
    tok = np.zeros(ids.shape)
    for j in range(n_l):
        m = (lv == j) & (ids >= 0)
        tok[m] = token_lengths(ladder, j)[ids[m]]
    valid = ids >= 0
    # retrieved set: the ranked prefix that fits the budget (always at least the top chunk)
    fits = np.cumsum(np.where(valid, tok, 0.0), axis=1) <= budget
    fits[:, 0] |= valid[:, 0]
    inset = valid & np.logical_and.accumulate(fits, axis=1)
    top = np.where(inset, s, -np.inf).max(axis=1, keepdims=True)
    z = np.where(inset, s / np.where(np.abs(top) > 1e-12, np.abs(top), 1.0) / temperature, -np.inf)
    z = z - np.where(np.isfinite(z), z, -np.inf).max(axis=1, keepdims=True)
    p = np.where(inset, np.exp(z), 0.0)
    p = p / np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
    before = np.cumsum(p, axis=1) - p  # mass of the chunks ranked above
    keep = inset & (before < tau - 1e-12)  # the chunk that crosses tau is kept
    if k_max is not None:
        keep &= np.cumsum(keep, axis=1) <= k_max
    width = max(1, int(keep.sum(axis=1).max()) if len(keep) else 1)
    out_c = np.full((n_q, width), -1, dtype=np.int64)
    out_l = np.full((n_q, width), -1, dtype=np.int64)
    rows, cols = np.nonzero(keep)
    slot = np.cumsum(keep, axis=1)[rows, cols] - 1
    out_c[rows, slot] = ids[rows, cols]
    out_l[rows, slot] = lv[rows, cols]
    return Selection(level=out_l, chunk=out_c)


class CumulativeSoftmax:
    """``mal_cumulative`` as a ladder policy hook: ``budget`` tokens (C), cumulative probability ``tau``."""

    def __init__(self, budget: int = 512, tau: float = 0.8, temperature: float = 0.1):
        if budget < 1 or not 0 < tau <= 1 or temperature <= 0:
            raise ValueError(f"mal_cumulative: budget >= 1, 0 < tau <= 1, temperature > 0 required; got {budget}, {tau}, {temperature}")
        self.budget, self.tau, self.temperature = int(budget), float(tau), float(temperature)

    def select(self, inputs: PolicyInputs) -> Selection:
        return mal_cumulative_select(inputs.ladder, inputs.hits, inputs.fill_budget or self.budget, self.tau, self.temperature)
