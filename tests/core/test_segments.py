"""mogg.core.segments' group primitives against loops."""

import numpy as np

from mogg.core.segments import csr_keys, csr_lookup, group_best_row, group_max, pair_groups


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


def test_range_sums_against_a_loop_and_reads_only_the_ranges():
    """range_sums equals a slice sum per range (empty and reversed ranges give 0), integer values included, and reads
    only the ranges' entries: a large int array is never cast whole (tracemalloc's peak stays far below its size)."""
    import tracemalloc

    from mogg.core.segments import range_sums

    rng = np.random.default_rng(3)
    values = rng.integers(0, 50, 200)
    lo = rng.integers(0, 200, 40)
    hi = lo + rng.integers(-3, 20, 40)
    want = [float(values[a:b].sum()) for a, b in zip(lo, np.minimum(hi, 200))]
    assert range_sums(values, lo, np.minimum(hi, 200)).tolist() == want
    assert range_sums(values, [], []).tolist() == [] and range_sums(values, [5], [5]).tolist() == [0.0]

    big = np.ones(4_000_000, dtype=np.int32)  # 16 MB; a float64 copy would be 32 MB
    tracemalloc.start()
    try:
        got = range_sums(big, [10, 3_000_000], [20, 3_000_005])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.tolist() == [10.0, 5.0] and peak < 1_000_000


def test_range_indices_against_a_loop():
    """Every index of the ranges [lo, lo + size), concatenated in order; empty ranges and no ranges give nothing."""
    from mogg.core.segments import range_indices

    rng = np.random.default_rng(11)
    lo, size = rng.integers(0, 50, 30), rng.integers(0, 5, 30)
    want = [i for a, n in zip(lo, size) for i in range(a, a + n)]
    got = range_indices(lo, size)
    assert got.dtype == np.int64 and got.tolist() == want
    assert range_indices(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).tolist() == []


def test_csr_lookup_is_dense_indexing_with_zeros_where_absent():
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    m = sp.random(40, 300, density=0.05, format="csr", random_state=1, dtype=np.float64)
    m.sort_indices()
    rows, cols = rng.integers(0, 40, 2000), rng.integers(0, 300, 2000)
    np.testing.assert_array_equal(csr_lookup(m, csr_keys(m), rows, cols), m.toarray()[rows, cols])
    empty = sp.csr_matrix((3, 5))
    np.testing.assert_array_equal(csr_lookup(empty, csr_keys(empty), np.array([0, 2]), np.array([1, 4])), [0.0, 0.0])
