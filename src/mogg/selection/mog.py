"""Selection: turn per-level hits into the snippets given to the reader.

MoG eq. 1-2 (Zhong et al.): every finest unit c covered by a retrieved chunk gets a score vector
t_rs(c) [L] (the score of the retrieved level-l chunk that contains it, 0 if none); units are
ranked by t_rs(c) . w; each selected unit is replaced by its chunk at level g_r = argmax_l w_l.
We keep the top-k *distinct* injected chunks (two selected units inside one coarse chunk would
otherwise inject the same text twice).

Fixed level, oracle level and random level are eq. 1-2 with one-hot weights; the prior baseline
uses a constant weight vector. All policies return a :class:`Selection`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mogg.core.segments import segment_rank
from mogg.core.text import count_tokens, truncate_tokens
from mogg.ladders.base import Ladder
from mogg.search import Hits


@dataclass
class Selection:
    """Chosen chunks per query: ``level[q, i]``, ``chunk[q, i]`` (int64 [Q, k], -1 padding)."""

    level: np.ndarray
    chunk: np.ndarray

    def contexts(self, ladder: Ladder, max_tokens: int | None = None) -> list[list[str]]:
        """Snippet texts per query, in rank order (capped at ``max_tokens`` per query, see
        :func:`cap_contexts`)."""
        texts = [ladder.texts(j) for j in range(ladder.n_levels)]
        out = [[texts[lv][c] for lv, c in zip(lrow, crow) if c >= 0] for lrow, crow in zip(self.level, self.chunk)]
        return out if max_tokens is None else cap_contexts(out, max_tokens)[0]


def cap_contexts(contexts: list[list[str]], max_tokens: int | None) -> tuple[list[list[str]], int]:
    """Each query's snippets kept in order until their total reaches ``max_tokens``: the snippet
    that crosses the cap is cut at a word boundary and later ones are dropped, so no policy hands
    a reader or a metric an unbounded context (a whole-book "document" level). Returns the capped
    contexts and how many were cut."""
    if max_tokens is None:
        return contexts, 0
    out, n_cut = [], 0
    for snippets in contexts:
        left, kept, cut = max_tokens, [], False
        for snip in snippets:
            n = count_tokens(snip)
            if n > left:
                if left > 0:
                    kept.append(truncate_tokens(snip, left))
                cut = True
                break
            kept.append(snip)
            left -= n
        out.append(kept)
        n_cut += cut
    return out, n_cut


def _pack(q: np.ndarray, cols: list[np.ndarray], n_queries: int, k: int) -> list[np.ndarray]:
    """Scatter per-query ranked rows (``q`` sorted, at most k per q) into [Q, k] arrays (-1 pad)."""
    slot = segment_rank(q)
    outs = []
    for c in cols:
        o = np.full((n_queries, k), -1, dtype=np.int64)
        o[q, slot] = c
        outs.append(o)
    return outs


def unit_scores(ladder: Ladder, hits: Hits) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sparse t_rs: candidate (query, unit, level, score) rows, max over duplicates.

    Expands every retrieved chunk into the units it covers (CSR row gather, no Python loop over
    chunks); a unit covered by two retrieved chunks of one level (overlapping ladders) keeps the max.
    """
    n_q, n_l, k_r = hits.shape
    n_u = len(ladder.units)
    qs, us, ls, ss = [], [], [], []
    for lv_i, lv in enumerate(ladder.levels):
        ids = hits.ids[:, lv_i, :].ravel()
        valid = ids >= 0
        ids = ids[valid]
        q = np.repeat(np.arange(n_q), k_r)[valid]
        s = hits.scores[:, lv_i, :].ravel()[valid]
        ptr = lv.coverage.indptr
        lengths = ptr[ids + 1] - ptr[ids]
        # gather positions: for each chunk, ptr[c] .. ptr[c+1]-1, concatenated
        offs = np.repeat(ptr[ids] - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())
        qs.append(np.repeat(q, lengths))
        us.append(lv.coverage.indices[offs].astype(np.int64))
        ls.append(np.full(int(lengths.sum()), lv_i, dtype=np.int64))
        ss.append(np.repeat(s, lengths))
    q, u, lvl, s = (np.concatenate(x) for x in (qs, us, ls, ss))
    key = (q * n_u + u) * n_l + lvl
    order = np.lexsort((-s, key))  # by key, best score first
    key, q, u, lvl, s = key[order], q[order], u[order], lvl[order], s[order]
    keep = np.r_[True, key[1:] != key[:-1]]
    return q[keep], u[keep], lvl[keep], s[keep]


def mog_select(ladder: Ladder, hits: Hits, weights: np.ndarray, k: int) -> Selection:
    """MoG eq. 1-2 for all queries at once. ``weights`` is float [Q, L] in [0, 1]."""
    n_q, n_l, _ = hits.shape
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (n_q, n_l):
        raise ValueError(f"weights must have shape {(n_q, n_l)}, got {weights.shape}")
    q, u, lvl, s = unit_scores(ladder, hits)
    # eq. 1: score(c) = sum_l t_rs(c)_l * w_l, summed per (query, unit)
    n_u = len(ladder.units)
    pair, inv = np.unique(q * n_u + u, return_inverse=True)
    score = np.bincount(inv, weights=s * weights[q, lvl], minlength=len(pair))
    pq, pu = pair // n_u, pair % n_u
    pos = score > 0  # a unit with zero weighted evidence is not a candidate
    pq, pu, score = pq[pos], pu[pos], score[pos]
    # eq. 2: inject the unit's chunk at g_r = argmax_l w_l
    g = weights.argmax(axis=1)
    homes = np.stack([lv.home for lv in ladder.levels])  # [L, U]
    chunk = homes[g[pq], pu]
    ok = chunk >= 0
    pq, pu, score, chunk = pq[ok], pu[ok], score[ok], chunk[ok]
    order = np.lexsort((pu, -score, pq))  # per query: best score first, ties by unit id
    pq, chunk = pq[order], chunk[order]
    # keep the first occurrence of each (query, chunk), preserving rank order
    _, first = np.unique(pq * (homes.max() + 2) + chunk, return_index=True)
    first = np.sort(first)
    pq, chunk = pq[first], chunk[first]
    top = segment_rank(pq) < k
    pq, chunk = pq[top], chunk[top]
    chunk_out, lvl_out = _pack(pq, [chunk, g[pq]], n_q, k)
    return Selection(level=np.where(chunk_out >= 0, lvl_out, -1), chunk=chunk_out)


def one_hot(levels: np.ndarray, n_levels: int) -> np.ndarray:
    """One-hot weights [Q, L] for a level index per query."""
    w = np.zeros((len(levels), n_levels))
    w[np.arange(len(levels)), levels] = 1.0
    return w


def fixed_level_select(ladder: Ladder, hits: Hits, level: int, k: int) -> Selection:
    """MedRAG-style baseline: the top-k chunks of one level."""
    return mog_select(ladder, hits, one_hot(np.full(hits.shape[0], level), hits.shape[1]), k)


def random_level_select(ladder: Ladder, hits: Hits, k: int, seed: int) -> Selection:
    """A uniformly random level per query (seeded)."""
    lv = np.random.default_rng(seed).integers(0, hits.shape[1], size=hits.shape[0])
    return mog_select(ladder, hits, one_hot(lv, hits.shape[1]), k)


def topk_all_select(hits: Hits, k: int) -> Selection:
    """Plain top-k over the retrieved chunks of all levels ranked together by raw score."""
    n_q, n_l, k_r = hits.shape
    s = hits.scores.reshape(n_q, n_l * k_r)
    ids = hits.ids.reshape(n_q, n_l * k_r)
    lv = np.broadcast_to(np.repeat(np.arange(n_l), k_r), s.shape)
    s = np.where(ids >= 0, s, -np.inf)
    # stable sort: ties keep finer levels first
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    chunk = np.take_along_axis(ids, order, 1)
    level = np.take_along_axis(lv, order, 1)
    level = np.where(chunk >= 0, level, -1)
    pad = max(0, k - chunk.shape[1])
    if pad:
        chunk = np.pad(chunk, ((0, 0), (0, pad)), constant_values=-1)
        level = np.pad(level, ((0, 0), (0, pad)), constant_values=-1)
    return Selection(level=level.astype(np.int64), chunk=chunk.astype(np.int64))


def level_contexts(ladder, fixed: Sequence) -> list[list[str]]:
    """Per question, per level, the context that level's fixed selection hands the reader [Q][L]."""
    per_level = [[" ".join(c) for c in s.contexts(ladder)] for s in fixed]  # [L][Q]
    return [list(row) for row in zip(*per_level)]
