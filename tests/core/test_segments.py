"""mogg.core.segments' group primitives against loops."""

import numpy as np

from mogg.core.segments import group_best_row, group_max, pair_groups


def test_pair_groups_and_group_max_against_a_loop():
    rng = np.random.default_rng(0)
    q, doc = rng.integers(0, 20, 500), rng.integers(0, 30, 500)
    v = rng.normal(size=500)
    v[::11] = np.nan  # a missing value stays missing in its group
    g = pair_groups(q, doc)
    pairs = sorted(set(zip(q.tolist(), doc.tolist())))
    assert g.max() + 1 == len(pairs)
    for i, p in enumerate(pairs):  # dense ids in (q, doc) order
        rows = (q == p[0]) & (doc == p[1])
        assert (g[rows] == i).all()
        m = group_max(v, g)[i]
        assert (np.isnan(m) if np.isnan(v[rows]).any() else m == v[rows].max())
    assert pair_groups(np.zeros(0), np.zeros(0)).size == 0 and group_max(np.zeros(0), np.zeros(0, int)).size == 0


def test_group_best_row_against_a_loop():
    rng = np.random.default_rng(1)
    g = rng.integers(0, 40, 600)  # unsorted, some groups absent
    v = rng.integers(0, 5, 600).astype(float)  # many ties: the first row wins
    v[::13] = np.nan  # NaN ranks after every number
    rows = group_best_row(v, g)
    want = []
    for k in sorted(set(g.tolist())):
        idx = np.flatnonzero(g == k)
        vals = np.where(np.isnan(v[idx]), -np.inf, v[idx])
        want.append(idx[np.argmax(vals)])  # argmax: the first of the ties
    assert rows.tolist() == want
    assert group_best_row(np.array([np.nan, np.nan]), np.array([3, 3])).tolist() == [0]
    assert group_best_row(np.zeros(0), np.zeros(0, int)).size == 0
