"""Hybrid retrieval: reciprocal-rank fusion (RRF) of several retrievers over the same texts.

``score(d) = sum_r 1 / (rrf_k + rank_r(d))`` over the members r that rank text d within their top
``depth`` (rank 1-based; Cormack et al. 2009, rrf_k = 60). The MoG paper's appendix fuses 2 and 4
retrievers this way; any retrievers with the batched interface can be members (BM25, dense, a
two-encoder dense model, a reranked retriever).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from mogg.retrieval.base import check_saved_config, empty_topk

PARAMS_FILE = "hybrid_params.json"


def rrf_fuse(ranked_ids: Sequence[np.ndarray], rrf_k: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Fuse per-member ranked ids (each int64 [Q, D_r], -1 padding) -> top-k (fused scores float32
    [Q, k], ids int64 [Q, k]); ties by ascending id, padding -inf / -1."""
    n_q = len(ranked_ids[0])
    q_parts, id_parts, s_parts = [], [], []
    for ids in ranked_ids:
        ids = np.asarray(ids, dtype=np.int64)
        ranks = np.broadcast_to(np.arange(1, ids.shape[1] + 1), ids.shape)
        ok = ids >= 0
        q_parts.append(np.broadcast_to(np.arange(n_q)[:, None], ids.shape)[ok])
        id_parts.append(ids[ok])
        s_parts.append(1.0 / (rrf_k + ranks[ok]))
    if not q_parts or sum(len(x) for x in id_parts) == 0:
        return empty_topk(n_q, k)
    q, ids, s = (np.concatenate(x) for x in (q_parts, id_parts, s_parts))
    pair, inv = np.unique(q * (ids.max() + 1) + ids, return_inverse=True)
    score = np.bincount(inv, weights=s)  # summed in float64 over members
    pq, pid = pair // (ids.max() + 1), pair % (ids.max() + 1)
    order = np.lexsort((pid, -score, pq))
    pq, pid, score = pq[order], pid[order], score[order]
    first = np.r_[0, np.flatnonzero(np.diff(pq)) + 1]
    rank = np.arange(len(pq)) - np.repeat(first, np.diff(np.r_[first, len(pq)]))
    keep = rank < k
    out_s, out_i = empty_topk(n_q, k)
    out_s[pq[keep], rank[keep]] = score[keep].astype(np.float32)
    out_i[pq[keep], rank[keep]] = pid[keep]
    return out_s, out_i


class HybridRetriever:
    """RRF over ``members`` (retrievers, or factories such as Hydra partials, called once each).

    ``depth``: candidates each member contributes (at least ``k``). State: one sub-directory per
    member; a restored hybrid keeps the members' runtime options (encoders, backends).
    """

    def __init__(self, members: Sequence[Any], rrf_k: float = 60.0, depth: int = 100) -> None:
        if not members:
            raise ValueError("a hybrid retriever needs at least one member")
        if rrf_k < 0 or depth < 1:
            raise ValueError(f"rrf_k must be >= 0 and depth >= 1, got {rrf_k}, {depth}")
        self.members = [m() if callable(m) and not hasattr(m, "search") else m for m in members]
        self.rrf_k, self.depth = float(rrf_k), int(depth)

    def config(self) -> dict:
        return {"rrf_k": self.rrf_k, "depth": self.depth,
                "members": [{"kind": type(m).__name__, **m.config()} for m in self.members]}

    def fit(self, texts: Sequence[str]) -> Self:
        for m in self.members:
            m.fit(texts)
        return self

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        depth = max(self.depth, k)
        return rrf_fuse([m.search(queries, depth)[1] for m in self.members], self.rrf_k, k)

    def save(self, directory: Path) -> list[str]:
        directory = Path(directory)
        for j, m in enumerate(self.members):
            (directory / f"member{j}").mkdir()
            m.save(directory / f"member{j}")
        (directory / PARAMS_FILE).write_text(json.dumps({"config": self.config(), "format_version": 1}, indent=2))
        return [PARAMS_FILE]

    def restore(self, directory: Path) -> Self:
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text())
        check_saved_config(type(self).__name__, directory, params["config"], self.config())
        for j, m in enumerate(self.members):
            m.restore(directory / f"member{j}")
        return self
