"""Concatenating ladders built over consecutive document ranges (shards) or separate corpora."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from mogg.ladders.base import Ladder, Level, Units


def concat_ladders(parts: Sequence[Ladder], independent: bool = False) -> Ladder:
    """Concatenate ladders built over consecutive document ranges (units, docs, chunks offset).

    Shards of one corpus need document-local ladders (a graph or tree level whose chunks span
    documents would miss the links across shards); ``independent=True`` is for separate corpora,
    where no links are wanted.
    """
    if not parts:
        raise ValueError("no ladders to concatenate")
    method = parts[0].method
    if not independent and not all(p.is_document_local() for p in parts):
        raise ValueError(f"ladders of method {method!r} link units across documents and cannot be concatenated")
    if len({p.n_levels for p in parts}) != 1:
        raise ValueError("ladders to concatenate differ in their number of levels")
    doc_off = np.cumsum([0] + [len(p.units.doc_ids) for p in parts])
    units = Units(
        text=[t for p in parts for t in p.units.text],
        doc=np.concatenate([p.units.doc + o for p, o in zip(parts, doc_off)]),
        doc_ids=[d for p in parts for d in p.units.doc_ids],
    )
    levels = []
    for j, lv0 in enumerate(parts[0].levels):
        lvs = [p.levels[j] for p in parts]
        chunk_off = np.cumsum([0] + [len(lv) for lv in lvs])
        home = np.concatenate([np.where(lv.home >= 0, lv.home + o, -1) for lv, o in zip(lvs, chunk_off)])
        texts = None if lv0.texts is None else [t for lv in lvs for t in lv.texts]
        levels.append(Level(lv0.name, sp.block_diag([lv.coverage for lv in lvs], format="csr", dtype=np.float32), home, texts))
    return Ladder(method, units, levels, dict(parts[0].meta))
