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


def pair_groups(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A group id [M] per distinct (a, b) pair of non-negative ints (e.g. question, document), dense from 0."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    return np.unique(a * (int(b.max()) + 1) + b, return_inverse=True)[1].ravel()


def group_max(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each group's largest value [G] (``groups``: dense ids [M], unsorted is fine; NaN propagates: a
    missing value stays missing)."""
    out = np.full(int(groups.max()) + 1 if len(groups) else 0, -np.inf)
    with np.errstate(invalid="ignore"):
        np.maximum.at(out, groups, np.asarray(values, dtype=np.float64))
    return out


def group_best_row(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each present group's row with the largest value, int64 [G'] in increasing group order (``groups``:
    ints [M], unsorted is fine; ties: the first row; NaN counts as -inf, ranked after every number)."""
    if not len(groups):
        return np.zeros(0, dtype=np.int64)
    v = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=-np.inf)
    order = np.lexsort((np.arange(len(groups)), -v, groups))
    g = np.asarray(groups)[order]
    return order[np.r_[True, g[1:] != g[:-1]]]


def range_indices(lo: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Every index of the ranges ``[lo[i], lo[i] + size[i])``, concatenated in order (int64 [sum(size)]; ``size`` >= 0):
    the rows of a CSR matrix's chosen rows, the units of chosen documents."""
    lo, size = np.asarray(lo, dtype=np.int64), np.asarray(size, dtype=np.int64)
    return np.repeat(lo - (np.cumsum(size) - size), size) + np.arange(int(size.sum()), dtype=np.int64)


def range_sums(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sum of ``values[lo[i]:hi[i]]`` for each range i, float64 [len(lo)] (0 for an empty range). Only the ranges'
    entries are read, never the whole of ``values``: the cost follows the ranges' total length, not len(values)."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    size = np.maximum(hi - lo, 0)
    out = np.zeros(len(lo))
    keep = size > 0
    if not keep.any():
        return out
    size, lo = size[keep], lo[keep]
    starts = np.cumsum(size) - size
    rows = range_indices(lo, size)  # every entry of the ranges, in order
    # gather before the cast: casting ``values`` first would copy all of it
    out[keep] = np.add.reduceat(np.asarray(values)[rows].astype(np.float64), starts)
    return out


def csr_keys(m) -> np.ndarray:
    """The flat keys ``row * n_cols + col`` of a CSR matrix's stored entries (int64 [nnz]), in storage order:
    increasing where its indices are sorted (``m.sort_indices()``), so :func:`csr_lookup` can search them."""
    return np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr)) * np.int64(m.shape[1]) + m.indices


def csr_lookup(m, keys: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``m[rows, cols]`` for each pair (0 where absent), by one binary search in ``keys`` (:func:`csr_keys` of
    ``m``, its indices sorted): no dense row and no Python loop over the pairs."""
    want = np.asarray(rows, dtype=np.int64) * np.int64(m.shape[1]) + cols
    if not len(keys):  # nothing stored: every entry is 0 (and there is no data to index)
        return np.zeros(len(want))
    pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    return np.where(keys[pos] == want, m.data[pos], 0.0)
