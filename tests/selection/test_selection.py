"""MoG eq. 1-2 on a hand-computed example, and the baselines built on it."""

import numpy as np
import scipy.sparse as sp

from mogg.ladders.base import Ladder, Level, Units, partition_level
from mogg.search import Hits
from mogg.selection import fixed_level_select, mog_select, one_hot, topk_all_select


def _ladder():
    # doc A: u0 u1 u2 u3, doc B: u4 u5; L0 = units, L1 = pairs (A: c0=[u0,u1], c1=[u2,u3]; B: c2=[u4,u5])
    units = Units(text=[f"u{i}" for i in range(6)], doc=np.array([0, 0, 0, 0, 1, 1]), doc_ids=["A", "B"])
    l0 = partition_level("L0", np.arange(6))
    l1 = partition_level("L1", np.array([0, 0, 1, 1, 2, 2]))
    return Ladder("test", units, [l0, l1])


def _hits():
    # L0 retrieves u1 (3.0), u4 (1.0); L1 retrieves c1 (5.0), c0 (2.0)
    ids = np.array([[[1, 4], [1, 0]]])
    scores = np.array([[[3.0, 1.0], [5.0, 2.0]]], dtype=np.float32)
    return Hits(ids, scores)


def test_eq1_eq2_fine_weights():
    # t_rs: u0 [0,2], u1 [3,2], u2 [0,5], u3 [0,5], u4 [1,0]
    # w = [0.9, 0.1]: u1 2.9, u4 0.9, u2 0.5, u3 0.5, u0 0.2 -> g_r = L0 -> units u1, u4
    sel = mog_select(_ladder(), _hits(), np.array([[0.9, 0.1]]), k=2)
    assert sel.level.tolist() == [[0, 0]] and sel.chunk.tolist() == [[1, 4]]
    assert sel.contexts(_ladder()) == [["u1", "u4"]]


def test_eq1_eq2_coarse_weights_distinct_chunks():
    # w = [0.2, 0.6]: u2 3.0, u3 3.0, u1 1.8, u0 1.2, u4 0.2 -> g_r = L1:
    # u2, u3 -> c1 (once), u1, u0 -> c0, u4 -> c2
    lad, hits = _ladder(), _hits()
    sel = mog_select(lad, hits, np.array([[0.2, 0.6]]), k=2)
    assert sel.level.tolist() == [[1, 1]] and sel.chunk.tolist() == [[1, 0]]
    assert sel.contexts(lad) == [["u2 u3", "u0 u1"]]
    sel3 = mog_select(lad, hits, np.array([[0.2, 0.6]]), k=3)
    assert sel3.chunk.tolist() == [[1, 0, 2]]


def test_batch_equals_single_queries():
    lad = _ladder()
    rng = np.random.default_rng(0)
    q = 7
    ids = np.stack([np.stack([rng.permutation(6)[:2], rng.permutation(3)[:2]]) for _ in range(q)])
    scores = rng.random((q, 2, 2)).astype(np.float32) + 0.1
    w = rng.random((q, 2))
    batch = mog_select(lad, Hits(ids, scores), w, k=2)
    for i in range(q):
        one = mog_select(lad, Hits(ids[i:i + 1], scores[i:i + 1]), w[i:i + 1], k=2)
        assert one.chunk.tolist()[0] == batch.chunk[i].tolist()


def test_fixed_level_is_top_k_of_that_level():
    lad, hits = _ladder(), _hits()
    assert fixed_level_select(lad, hits, 1, 2).chunk.tolist() == [[1, 0]]
    assert fixed_level_select(lad, hits, 0, 2).chunk.tolist() == [[1, 4]]
    # a single retrieved chunk pads with -1
    assert fixed_level_select(lad, Hits(np.array([[[1, -1], [2, -1]]]), np.array([[[1.0, -np.inf], [1.0, -np.inf]]], dtype=np.float32)), 0, 2).chunk.tolist() == [[1, -1]]


def test_topk_all_ranks_levels_together():
    sel = topk_all_select(_hits(), 3)
    assert sel.level.tolist() == [[1, 0, 1]] and sel.chunk.tolist() == [[1, 1, 0]]


def test_overlapping_level_takes_max_and_home():
    # an overlapping level: chunks {u0,u1}, {u1,u2}; home = chunk centred on the unit
    units = Units(text=["a", "b", "c"], doc=np.array([0, 0, 0]), doc_ids=["A"])
    cov = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1]], dtype=np.float32))
    lv = Level("hop", cov, home=np.array([0, 1, -1]))
    lad = Ladder("t", units, [partition_level("L0", np.arange(3)), lv])
    hits = Hits(np.array([[[2, -1], [0, 1]]]), np.array([[[1.0, -np.inf], [4.0, 2.0]]], dtype=np.float32))
    # u1 is in both retrieved hop chunks: t_rs(u1)[1] = max(4, 2) = 4, not 6
    sel = mog_select(lad, hits, one_hot(np.array([1]), 2) * 1.0, k=2)
    assert sel.chunk.tolist() == [[0, 1]]
    w = np.array([[0.1, 0.5]])
    # scores: u0 2.0, u1 2.0, u2 0.1 + 1.0 = 1.1; u2 has no home at level 1 -> skipped
    assert mog_select(lad, hits, w, k=3).chunk.tolist() == [[0, 1, -1]]
