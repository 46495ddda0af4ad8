"""Segment primitives over sorted group keys: the vectorised "per query / per row" building blocks
used by selection, tree retrieval and graph expansion instead of Python loops over groups."""

from __future__ import annotations

import numpy as np


def segment_rank(groups: np.ndarray) -> np.ndarray:
    """Position of every entry inside its run of equal values of sorted ``groups`` (int64 [M])."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    start = np.r_[True, groups[1:] != groups[:-1]]
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    return np.arange(n) - first


def segment_cumsum(values: np.ndarray, groups: np.ndarray, dtype=np.int64) -> np.ndarray:
    """Inclusive cumulative sum of ``values`` restarted at every new value of sorted ``groups``."""
    if len(values) == 0:
        return np.zeros(0, dtype=dtype)
    cs = np.cumsum(values, dtype=dtype)
    first = np.arange(len(values)) - segment_rank(groups)
    return cs - cs[first] + np.asarray(values, dtype=dtype)[first]
