"""RAPTOR tree retrieval over a ladder built by :mod:`mogg.ladders.raptor`, batched over queries.

* :func:`collapsed_tree_select`: every node of every layer ranked together by cosine, then a greedy
  fill of a token budget that *skips* a node that would overflow and keeps going (the reference
  stops at the first overflow). Vectorized: one matrix product per query block, and the greedy
  fill runs in rounds of masked cumulative sums over all queries at once (at most ``k_max + 1``
  rounds; no loop over nodes).
* :func:`tree_traversal_select`: top-k of the root layer, then top-k among the children of the
  selected nodes, layer by layer down to the leaves; candidates are a sparse (queries x nodes)
  product, scored and ranked as flat arrays.

Query embeddings must come from the encoder that built the tree (``ladder.meta["encoder"]``).
Both return a :class:`mogg.selection.Selection` with ``level`` = layer, ``chunk`` = node index.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mogg.core.segments import segment_rank
from mogg.core.vectors import l2_normalize
from mogg.ladders.base import Ladder
from mogg.retrieval.base import topk_rows
from mogg.selection.mog import Selection
from mogg.selection.policy import PolicyInputs

log = logging.getLogger(__name__)

__all__ = ["collapsed_tree_select", "tree_traversal_select", "tree_nodes"]



def _layer_tokens(ladder: Ladder, layer: int) -> np.ndarray:
    key = f"tokens_layer{layer}"
    if key in ladder.arrays:
        return np.asarray(ladder.arrays[key], dtype=np.int64)
    from mogg.core.text import (
        count_tokens,  # trees saved without token counts: count once, memoised
    )

    memo = ladder._texts.setdefault(("tree_tokens", layer), None)
    if memo is None:
        memo = np.fromiter(map(count_tokens, ladder.texts(layer)), dtype=np.int64, count=len(ladder.levels[layer]))
        ladder._texts[("tree_tokens", layer)] = memo
    return memo


def tree_nodes(ladder: Ladder) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All nodes stacked: ``(emb float32 [N, d], tokens int64 [N], layer int64 [N], index int64 [N])``."""
    key = ("tree_nodes",)
    if key not in ladder._texts:
        embs = [ladder.arrays[f"emb_layer{j}"] for j in range(ladder.n_levels)]
        sizes = [len(e) for e in embs]
        ladder._texts[key] = (
            l2_normalize(np.concatenate(embs)),
            np.concatenate([_layer_tokens(ladder, j) for j in range(ladder.n_levels)]),
            np.repeat(np.arange(len(sizes), dtype=np.int64), sizes),
            np.concatenate([np.arange(s, dtype=np.int64) for s in sizes]),
        )
    return ladder._texts[key]


def _greedy_fill(tok: np.ndarray, budget, k_max) -> np.ndarray:
    """Greedy budget fill of ranked candidates, all rows at once. ``tok`` int [Q, M] (-1 = padding).

    ``budget`` and ``k_max``: scalars or per-row int arrays [Q]. Round invariant: everything before
    the first undecided candidate is decided. A candidate longer than the remaining budget can
    never fit later (the budget only shrinks), so it is dropped; among the rest, the cumulative sum
    gives the prefix that fits, which the sequential greedy would take one by one. Each round takes
    at least one node or ends the row.
    """
    n_q, m = tok.shape
    alive = tok >= 0
    chosen = np.zeros((n_q, m), dtype=bool)
    left = np.broadcast_to(np.asarray(budget, dtype=np.int64), (n_q,)).copy()
    cap = np.broadcast_to(np.asarray(k_max, dtype=np.int64), (n_q,))
    count = np.zeros(n_q, dtype=np.int64)
    t = np.where(alive, tok, 0)
    for _ in range(int(cap.max(initial=0)) + 1):
        alive &= t <= left[:, None]
        cs = np.cumsum(np.where(alive, t, 0), axis=1)
        take = alive & (cs <= left[:, None])
        take &= count[:, None] + np.cumsum(take, axis=1) <= cap[:, None]
        if not take.any():
            break
        chosen |= take
        alive &= ~take
        left -= (t * take).sum(axis=1)
        count += take.sum(axis=1)
    return chosen


def _pack(chosen: np.ndarray, values: list[np.ndarray], k: int, start: np.ndarray | None = None,
          out: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Left-align the chosen entries of each row (rank order kept) into [Q, k] arrays, -1 padded.

    With ``start`` [Q] / ``out``, entries are appended after the first ``start[q]`` slots of ``out``.
    """
    q, col = np.nonzero(chosen)
    slot = np.cumsum(chosen, axis=1)[q, col] - 1 + (0 if start is None else start[q])
    outs = out if out is not None else [np.full((chosen.shape[0], k), -1, dtype=np.int64) for _ in values]
    for o, v in zip(outs, values):
        o[q, slot] = v[q, col]
    return outs


def collapsed_tree_select(ladder: Ladder, query_emb: np.ndarray, token_budget: int, k_max: int = 64,
                          batch_size: int = 512) -> Selection:
    """Collapsed tree: rank all nodes by cosine, fill ``token_budget`` tokens (at most ``k_max`` nodes).

    Exact w.r.t. the greedy over the full ranking, in two passes per query block: the greedy over
    the top ``4 * k_max`` nodes, then, for rows with budget and count left, over the remaining
    nodes short enough to fit the budget that is left (a longer node can never fit: the budget
    only shrinks), ranked among themselves. Usually few nodes are that short.
    """
    emb, tok, layer, index = tree_nodes(ladder)
    q = l2_normalize(query_emb)
    n_q, n = len(q), len(emb)
    level = np.full((n_q, k_max), -1, dtype=np.int64)
    chunk = level.copy()
    if n == 0 or n_q == 0 or k_max == 0:
        return Selection(level=level, chunk=chunk)
    t_min = int(tok.min())
    m = min(n, 4 * k_max)
    for s in range(0, n_q, batch_size):
        scores = q[s : s + batch_size] @ emb.T  # [b, N]
        b = len(scores)
        _, ids = topk_rows(scores, m)  # [b, m] by score desc, ties by node id
        t = np.where(ids >= 0, tok[np.maximum(ids, 0)], -1)
        chosen = _greedy_fill(t, token_budget, k_max)
        safe = np.maximum(ids, 0)
        lv, ch = _pack(chosen, [layer[safe], index[safe]], k_max)
        count = chosen.sum(axis=1)
        left = token_budget - (t * chosen).sum(axis=1)
        rest = np.flatnonzero((m < n) & (count < k_max) & (left >= t_min))
        if rest.size:
            small = np.flatnonzero(tok <= left[rest].max())  # [S] the only nodes that could still fit
            seen = np.zeros((len(rest), n), dtype=bool)  # [r, N] already ranked in the first pass
            np.put_along_axis(seen, safe[rest], True, axis=1)
            sc = np.where(seen[:, small], -np.inf, scores[rest][:, small])  # [r, S]
            _, loc = topk_rows(sc, len(small))  # rank the short nodes among themselves
            node = small[np.maximum(loc, 0)]
            ok = (loc >= 0) & np.isfinite(np.take_along_axis(sc, np.maximum(loc, 0), 1))
            t2 = np.where(ok, tok[node], -1)
            chosen2 = _greedy_fill(t2, left[rest], k_max - count[rest])
            sub = _pack(chosen2, [layer[node], index[node]], k_max, start=count[rest], out=[lv[rest], ch[rest]])
            lv[rest], ch[rest] = sub
        level[s : s + b], chunk[s : s + b] = lv, ch
    return Selection(level=level, chunk=chunk)


def _children(ladder: Ladder, layer: int) -> sp.csr_matrix:
    a = ladder.arrays
    ptr, ind = a[f"children_layer{layer}_indptr"], a[f"children_layer{layer}_indices"]
    return sp.csr_matrix((np.ones(len(ind), dtype=np.float32), ind, ptr),
                         shape=(len(ladder.levels[layer]), len(ladder.levels[layer - 1])))


def _ranked_topk(q_idx: np.ndarray, node: np.ndarray, score: np.ndarray, k: int):
    """Top-``k`` per query of flat candidates (score desc, node asc); returns the kept rows sorted."""
    order = np.lexsort((node, -score, q_idx))
    q_idx, node, score = q_idx[order], node[order], score[order]
    keep = segment_rank(q_idx) < k
    return q_idx[keep], node[keep], score[keep]


def tree_traversal_select(ladder: Ladder, query_emb: np.ndarray, top_k_per_layer: int = 2, k: int | None = None,
                          start_layer: int | None = None) -> Selection:
    """Tree traversal: top-``top_k_per_layer`` at ``start_layer`` (default: the top), then among children.

    Every node visited on the way down is a candidate; the ``k`` best by cosine (ties: lower layer
    index, then lower node index) are returned, ``k`` defaulting to all of them. In a forest (one
    tree per document) the roots of shallower trees join the candidates of their own layer, so
    every tree is reachable.
    """
    top = ladder.n_levels - 1 if start_layer is None else int(start_layer)
    k = top_k_per_layer * (top + 1) if k is None else int(k)
    q = l2_normalize(query_emb)
    n_q = len(q)
    if n_q == 0 or k == 0:
        return Selection(level=np.full((n_q, k), -1, dtype=np.int64), chunk=np.full((n_q, k), -1, dtype=np.int64))
    emb = ladder.arrays[f"emb_layer{top}"]
    _, ids = topk_rows(q @ l2_normalize(emb).T, top_k_per_layer)  # [Q, k_l]
    qi = np.repeat(np.arange(n_q), ids.shape[1])
    node = ids.ravel()
    keep = node >= 0
    qi, node = qi[keep], node[keep]
    score = np.einsum("id,id->i", q[qi], l2_normalize(emb[node]))
    all_q, all_l, all_n, all_s = [qi], [np.full(len(qi), top)], [node], [score]
    for layer in range(top, 0, -1):
        # Candidates: children of the selected nodes, a sparse [Q, C_{l-1}] indicator product,
        # plus the parentless nodes (roots of shallower trees) of layer l-1 for every query.
        ch = _children(ladder, layer)
        sel = sp.csr_matrix((np.ones(len(qi), dtype=np.float32), (qi, node)), shape=(n_q, len(ladder.levels[layer])))
        roots = np.flatnonzero(np.diff(ch.tocsc().indptr) == 0)  # [R] nodes of layer l-1 with no parent
        cand = (sel @ ch).tocsr()
        if len(roots):
            extra = sp.csr_matrix((np.ones(n_q * len(roots), dtype=np.float32),
                                   (np.repeat(np.arange(n_q), len(roots)), np.tile(roots, n_q))), shape=cand.shape)
            cand = cand + extra
        cand = cand.tocoo()
        cq, cn = cand.row.astype(np.int64), cand.col.astype(np.int64)
        emb = l2_normalize(ladder.arrays[f"emb_layer{layer - 1}"])
        cs = np.einsum("id,id->i", q[cq], emb[cn])
        qi, node, score = _ranked_topk(cq, cn, cs, top_k_per_layer)
        all_q.append(qi)
        all_l.append(np.full(len(qi), layer - 1))
        all_n.append(node)
        all_s.append(score)
    qa, la, na, sa = (np.concatenate(x) for x in (all_q, all_l, all_n, all_s))
    level = np.full((n_q, k), -1, dtype=np.int64)
    chunk = level.copy()
    if len(qa) == 0:
        return Selection(level=level, chunk=chunk)
    order = np.lexsort((na, la, -sa, qa))
    qa, la, na = qa[order], la[order], na[order]
    slot = segment_rank(qa)
    keep = slot < k
    level[qa[keep], slot[keep]] = la[keep]
    chunk[qa[keep], slot[keep]] = na[keep]
    return Selection(level=level, chunk=chunk)


class CollapsedTree:
    """The collapsed-tree policy as a ladder hook: all nodes ranked by the tree's own encoder,
    filled to ``token_budget`` tokens (at most ``k_max`` nodes)."""

    def __init__(self, token_budget: int = 300, k_max: int = 64):
        if token_budget < 1 or k_max < 1:
            raise ValueError(f"collapsed tree: token_budget and k_max must be >= 1, got {token_budget}, {k_max}")
        self.token_budget, self.k_max = int(token_budget), int(k_max)

    def select(self, inputs: PolicyInputs) -> Selection:
        queries = _tree_queries(inputs.builder, inputs.questions, inputs.artifacts)
        return collapsed_tree_select(inputs.ladder, queries, inputs.fill_budget or self.token_budget, self.k_max)


class TreeTraversal:
    """The tree-traversal policy as a ladder hook: ``top_k_per_layer`` nodes kept per layer on the
    way down from the root, ``k`` snippets in the end (the same k as every other policy)."""

    def __init__(self, top_k_per_layer: int = 2):
        if top_k_per_layer < 1:
            raise ValueError(f"tree traversal: top_k_per_layer must be >= 1, got {top_k_per_layer}")
        self.top_k_per_layer = int(top_k_per_layer)

    def select(self, inputs: PolicyInputs) -> Selection:
        queries = _tree_queries(inputs.builder, inputs.questions, inputs.artifacts)
        return tree_traversal_select(inputs.ladder, queries, self.top_k_per_layer, inputs.k)


def _tree_queries(builder, questions, artifacts) -> np.ndarray:
    """Query embeddings [Q, d] from the encoder the tree was built with (cached as an artifact)."""
    from mogg.encoders import embed_queries

    return embed_queries(builder.encoder, list(questions), Path(artifacts) if artifacts else None)
