"""Policy families over deep hits: each fixed level along (k, cap), and any ranked selection
(top-k over all levels, eq. 1-2 with router weights, a ladder's own policies) along the same knobs.

Every family reads prefixes of one ranked stream per question (:mod:`mogg.evaluation.prefix`):
the fixed level l at k is the first k chunks of ``fixed_level_select(l, depth)``, which is
exactly ``fixed_level_select(l, k)`` (tests check it), so no family stops early at the router's
feature depth ``k_r``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mogg.evaluation.frontier import Family
from mogg.evaluation.prefix import prefix_table
from mogg.ladders.base import Ladder
from mogg.routing.plans import ActionSpace
from mogg.search import Hits
from mogg.selection import Selection, fixed_level_select


def stream_family(name: str, ladder: Ladder, selection: Selection, evidence: Sequence[str], depth: int,
                  caps: Sequence[int | None], max_tokens: int | None = None, fixed: bool = False) -> Family:
    """A ranked selection [Q, >= depth] as a family over k = 1..depth and ``caps``."""
    t = prefix_table(selection.contexts(ladder), evidence, depth, caps, max_tokens)
    n_q = t.shape[0]
    kk, cp = np.meshgrid(np.arange(depth), np.arange(len(caps)), indexing="ij")
    configs = [f"{name} k={k + 1}" + ("" if caps[c] is None else f" cap={caps[c]}") for k, c in zip(kk.ravel(), cp.ravel())]
    return Family(name, t.f1.reshape(n_q, -1), t.tokens.reshape(n_q, -1).astype(float), configs, fixed,
                  {"k": kk.ravel() + 1, "cap": cp.ravel()})


def action_table(ladder: Ladder, deep: Hits, evidence: Sequence[str], depth: int, caps: Sequence[int | None],
                 max_tokens: int | None = None) -> tuple[ActionSpace, Family]:
    """Every fixed (level, k, cap) as one family whose columns follow :class:`ActionSpace`'s
    order: the router's actions, their labels (evidence F1) and costs (tokens)."""
    if deep.shape[2] < depth:
        raise ValueError(f"deep hits hold {deep.shape[2]} chunks per level, fewer than the frontier depth {depth}")
    fams = []
    for j, lv in enumerate(ladder.levels):
        f = stream_family(lv.name, ladder, fixed_level_select(ladder, deep, j, depth), evidence, depth, caps,
                          max_tokens, fixed=True)
        f.meta["level"] = np.full(len(f.configs), j)
        fams.append(f)
    space = ActionSpace(ladder.level_names, depth, list(caps))
    from mogg.evaluation.frontier import merge_families

    return space, merge_families("fixed envelope", fams)
