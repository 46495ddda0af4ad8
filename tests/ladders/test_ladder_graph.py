"""MoGG graph ladder: kNN against brute force, edges, hop levels against BFS, budget, stats, e2e."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import compose
from fakes import LookupEncoder

from mogg.data.records import Document
from mogg.ladders import Ladder
from mogg.ladders.base import Units
from mogg.ladders.graph import GraphLadderBuilder, adjacency, hop_levels, knn_edges
from mogg.ladders.graph_stats import graph_statistics, plot_degree_histogram
from mogg.ladders.knn import bm25_knn, bm25_self_scores, dense_knn
from mogg.retrieval.bm25 import BM25Retriever

VOCAB = ("insulin glucose diabetes kidney renal liver hepatic cardiac heart failure stroke aspirin "
         "warfarin bleeding anemia iron fever infection sepsis antibiotic penicillin asthma lung "
         "cancer tumor biopsy surgery pain opioid nausea vomiting rash allergy thyroid hormone bone "
         "fracture calcium vitamin pregnancy fetal neonatal child elderly trial placebo dose").split()


def _texts(n, seed=0):
    rng = np.random.default_rng(seed)
    # Zipf-like term frequencies so some terms are common (long postings) and some rare.
    p = 1.0 / np.arange(1, len(VOCAB) + 1)
    p /= p.sum()
    return [" ".join(rng.choice(VOCAB, size=int(rng.integers(3, 25)), p=p)) + "." for _ in range(n)]


def _docs(n_docs=15, seed=0):
    rng = np.random.default_rng(seed)
    texts = _texts(200, seed)
    docs, pos = [], 0
    for d in range(n_docs):
        m = int(rng.integers(1, 9))
        docs.append(Document(id=f"d{d}", title="", content=" ".join(t.capitalize() for t in texts[pos:pos + m])))
        pos += m
    return docs


def _brute_topk(sim, k, min_sim):
    # sim [U, U] with invalid entries -inf: top-k by (-sim, id) among sim >= min_sim.
    n = len(sim)
    ids = np.full((n, k), -1)
    vals = np.full((n, k), -np.inf)
    for v in range(n):
        cand = [u for u in np.lexsort((np.arange(n), -sim[v])) if np.isfinite(sim[v, u]) and sim[v, u] >= min_sim][:k]
        ids[v, :len(cand)] = cand
        vals[v, :len(cand)] = sim[v, cand]
    return vals, ids


@pytest.mark.parametrize("backend", ["numba", "scipy"])
@pytest.mark.parametrize("min_sim", [0.0, 0.1, 0.3, 0.6])
def test_bm25_knn_equals_brute_force(min_sim, backend):
    texts = _texts(150, seed=1)
    r = BM25Retriever(backend="scipy").fit(texts)
    full = (r.query_matrix(texts) @ r.weights).toarray().astype(np.float64)  # [U, U] raw BM25
    own = np.diag(full).copy()
    sim = full / own[:, None]
    sim[full <= 0] = -np.inf  # no shared term: not a neighbour
    np.fill_diagonal(sim, -np.inf)
    ref_s, ref_i = _brute_topk(sim, 4, min_sim)
    s, i = bm25_knn(texts, 4, min_sim, batch_size=37, backend=backend)  # batches that do not divide U
    assert np.array_equal(i, ref_i)
    if backend == "numba":  # the kernel sums in the product's order: float32 scores bit for bit
        q = r.query_matrix(texts)
        full32, own64 = (q @ r.weights).toarray(), bm25_self_scores(r, q)
        rows = np.nonzero(ref_i >= 0)
        want = (full32[rows[0], ref_i[rows]].astype(np.float64) / own64[rows[0]]).astype(np.float32)
        assert np.array_equal(s[rows], want)
    ok = ref_i >= 0
    np.testing.assert_allclose(s[ok], ref_s[ok], rtol=1e-5)
    assert np.all(np.isneginf(s[~ok]))
    if min_sim == 0.6:
        assert 0 < ok.sum() < ok.size  # the threshold actually prunes some neighbours here


def FakeEncoder(texts, dim=8, seed=0):
    """Fixed random vectors per text (plus an exact duplicate), no model."""
    vecs = np.random.default_rng(seed).normal(size=(len(texts), dim))
    vecs[5] = vecs[2]  # an exact duplicate: self must still be excluded
    return LookupEncoder.from_table(dict(zip(texts, vecs)), {"name": "fake", "dim": dim})


@pytest.mark.parametrize("backend", ["faiss", "torch"])
def test_dense_knn_equals_brute_force(backend):
    texts = [f"text {i}" for i in range(60)]
    emb = FakeEncoder(texts).encode(texts)
    en = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sim = (en @ en.T).astype(np.float64)
    np.fill_diagonal(sim, -np.inf)
    ref_s, ref_i = _brute_topk(sim, 3, 0.2)
    s, i = dense_knn(emb, 3, 0.2, batch_size=16, backend=backend)
    assert np.array_equal(i, ref_i)
    np.testing.assert_allclose(s[ref_i >= 0], ref_s[ref_i >= 0], atol=1e-5)
    assert 5 in i[2] and 2 in i[5]  # duplicates are each other's best neighbour


def test_dense_builder_uses_encoder():
    docs = _docs(8)
    nodes = GraphLadderBuilder().build(docs).units.text
    b = GraphLadderBuilder(similarity="dense", encoder=FakeEncoder(nodes), t_graph=0.3, hops=2)
    lad = b.build(docs)
    assert b.config()["encoder"] == {"name": "fake", "dim": 8}
    assert np.all(lad.arrays["edge_sim"] >= 0.3) and lad.n_levels == 3


def _ClusterEncoder(texts, dim=16, seed=0):
    """Embeddings with cluster structure (64 centres + noise, seeded): what an IVF index is for."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(64, dim))
    table = {t: centres[j % 64] + 0.3 * rng.normal(size=dim) for j, t in enumerate(texts)}
    return LookupEncoder.from_table(table, {"name": "clusters"})


def test_dense_knn_approximate_index_recall_is_measured_and_stated(tmp_path):
    """An approximate dense MoGG (IVF) states its neighbour recall against brute force; with every
    list probed it finds the exact graph, with one list it loses neighbours and says so."""
    from mogg.ladders.graph_stats import GraphReport
    from mogg.ladders.knn import knn_recall

    texts = [f"node {i}" for i in range(3000)]
    docs = [Document(id=f"d{i}", title="", content=t + ".") for i, t in enumerate(texts)]
    enc = _ClusterEncoder([t + "." for t in texts])
    exact = GraphLadderBuilder(node_sentences=1, similarity="dense", encoder=enc, t_graph=0.3, hops=1).build(docs)
    assert "knn_recall" not in exact.meta and "dense_index" not in exact.meta  # exact configs unchanged
    full = GraphLadderBuilder(node_sentences=1, similarity="dense", encoder=enc, t_graph=0.3, hops=1,
                              dense_index="IVF16,Flat", nprobe=16, recall_sample=500).build(docs)
    np.testing.assert_array_equal(full.arrays["edges"], exact.arrays["edges"])
    assert full.meta["knn_recall"]["neighbour_recall"] == 1.0 and full.meta["knn_recall"]["sampled_nodes"] == 500
    b = GraphLadderBuilder(node_sentences=1, similarity="dense", encoder=enc, t_graph=0.3, hops=1,
                           dense_index="IVF16,Flat", nprobe=1, recall_sample=3000)
    one = b.build(docs)
    r = one.meta["knn_recall"]
    assert b.config()["dense_index"] == "IVF16,Flat" and b.config()["nprobe"] == 1
    # the stated recall is the measured one: recompute it from the edges against the exact graph
    want = {tuple(e) for e in exact.arrays["edges"].tolist()}
    assert len(want & {tuple(e) for e in one.arrays["edges"].tolist()}) < len(want)
    assert 0.5 < r["neighbour_recall"] < 1.0 and r["rows_equal"] < 1.0
    emb = enc.encode([t + "." for t in texts])
    _, ids = b.knn([t + "." for t in texts])
    assert knn_recall(emb, ids, 3, 0.3, sample=3000) == {k: v for k, v in r.items() if k != "index"}
    _, md = GraphReport()("mogg", one, tmp_path)
    assert any("neighbour recall" in line for line in md)
    with pytest.raises(ValueError, match="dense_index"):
        GraphLadderBuilder(dense_index="HNSW32")  # BM25 similarity has no faiss index


def test_graph_invariants():
    docs = _docs()
    b = GraphLadderBuilder(node_sentences=1, k_graph=3, t_graph=0.2, hops=3, max_tokens=60, batch_size=16)
    lad = b.build(docs)
    n = len(lad.units)
    e, es = lad.arrays["edges"], lad.arrays["edge_sim"]
    assert lad.method == "mogg" and e.dtype == np.int64 and es.dtype == np.float32 and e.shape == (len(es), 2)
    assert len(e) > 0 and np.all(e[:, 0] < e[:, 1])  # i < j: no self-loops
    assert len({tuple(x) for x in e.tolist()}) == len(e)  # de-duplicated
    assert np.all(es >= 0.2)
    adj = adjacency(e, n)
    assert (adj != adj.T).nnz == 0 and adj.diagonal().sum() == 0
    # every edge comes from a kNN link of one of its ends, with that end's similarity
    s, i = bm25_knn(lad.units.text, 3, 0.2)
    links = {(min(v, u), max(v, u)) for v in range(n) for u in i[v] if u >= 0}
    assert links == {tuple(x) for x in e.tolist()}
    assert lad.level_names == ["hop0", "hop1", "hop2", "hop3"]
    for lv in lad.levels:
        assert np.array_equal(lv.home, np.arange(n)) and lv.coverage.shape == (n, n)
        assert np.all(lv.coverage.data == 1)
    for a, b_ in zip(lad.levels, lad.levels[1:]):  # nested: level h inside level h+1
        assert (a.coverage - a.coverage.multiply(b_.coverage)).nnz == 0


def test_hop0_is_the_nodes():
    lad = GraphLadderBuilder(hops=2).build(_docs())
    n = len(lad.units)
    assert (lad.levels[0].coverage != sp.identity(n, format="csr")).nnz == 0
    assert lad.texts(0) == lad.units.text


@pytest.mark.parametrize("seed", [0, 1])
def test_hops_equal_bfs(seed):
    g = nx.gnm_random_graph(40, 50, seed=seed)
    edges = np.array(sorted((min(a, b), max(a, b)) for a, b in g.edges()), dtype=np.int64)
    levels = hop_levels(adjacency(edges, 40), np.full(40, 7), hops=4, max_tokens=10**9)
    for h, lv in enumerate(levels):
        for v in range(40):
            ref = sorted(nx.single_source_shortest_path_length(g, v, cutoff=h))
            got = lv.coverage.indices[lv.coverage.indptr[v]:lv.coverage.indptr[v + 1]].tolist()
            assert got == ref, (h, v)  # corpus order, each node once


def test_duplicates_counted_once():
    # square 0-1-3-2-0: node 3 is two hops from 0 along two paths; 4 nodes x 10 tokens = 40
    edges = np.array([[0, 1], [0, 2], [1, 3], [2, 3]])
    levels = hop_levels(adjacency(edges, 4), np.full(4, 10), hops=3, max_tokens=40)
    assert levels[2].coverage[0].indices.tolist() == [0, 1, 2, 3]
    assert np.all(levels[3].coverage.data == 1) and levels[3].coverage.nnz == 16
    units = Units(text=["a", "b", "c", "d"], doc=np.zeros(4, dtype=np.int64), doc_ids=["x"])
    assert Ladder("mogg", units, levels).texts(2)[0] == "a b c d"


def test_budget_rule():
    # 2: hop1 {0, 1, 4}, hop2 {3 (via 0), 5 (via 4)}; tokens per node below, budget 50
    edges = np.array([[0, 2], [1, 2], [2, 4], [4, 5], [0, 3]])
    tokens = np.array([5, 55, 30, 7, 10, 1])
    levels = hop_levels(adjacency(edges, 6), tokens, hops=4, max_tokens=50)
    row = lambda h, v: levels[h].coverage[v].indices.tolist()  # noqa: E731
    # node 2: 30 + 5 (node 0) = 35 fits; + 55 (node 1) does not: the admission stops there, so
    # node 4 (10 tokens, would fit) is not taken either, at any hop
    assert row(1, 2) == [0, 2] and row(4, 2) == [0, 2]
    # node 1 alone is longer than the budget: kept, and nothing else
    assert all(row(h, 1) == [1] for h in range(5))
    # node 3: 7 | +5 (0) = 12 | +30 (2) = 42 | then 1 (55) does not fit -> stop
    assert [row(h, 3) for h in range(5)] == [[3], [0, 3], [0, 2, 3], [0, 2, 3], [0, 2, 3]]
    # node 5: 1 | +10 (4) | +30 (2) = 41 | hop 3 in corpus order: 0 (5) -> 46, then 1 (55) stops
    assert [row(h, 5) for h in range(5)] == [[5], [4, 5], [2, 4, 5], [0, 2, 4, 5], [0, 2, 4, 5]]


def test_knn_edges_dedup_and_max():
    sim = np.array([[0.5, 0.2], [0.9, -np.inf], [0.3, 0.1]], dtype=np.float32)
    ids = np.array([[1, 2], [0, -1], [0, 1]])
    edges, es = knn_edges(sim, ids, 0.15)
    assert edges.tolist() == [[0, 1], [0, 2]] and es.tolist() == pytest.approx([0.9, 0.3])


def test_arrays_save_load(tmp_path):
    lad = GraphLadderBuilder(hops=2).build(_docs())
    lad.save(tmp_path)
    back = Ladder.load(tmp_path)
    assert set(back.arrays) == {"edges", "edge_sim"}
    for k, v in lad.arrays.items():
        assert back.arrays[k].dtype == v.dtype and np.array_equal(back.arrays[k], v)
    assert back.method == "mogg" and back.texts(2) == lad.texts(2)
    assert all((a.coverage != b.coverage).nnz == 0 for a, b in zip(lad.levels, back.levels))


def test_graph_statistics(tmp_path):
    units = Units(text=list("abcdef"), doc=np.array([0, 0, 0, 1, 1, 2]), doc_ids=["x", "y", "z"])
    edges = np.array([[0, 1], [1, 3], [3, 4]], dtype=np.int64)
    lad = Ladder("mogg", units, [], arrays={"edges": edges, "edge_sim": np.array([0.5, 0.3, 0.9], dtype=np.float32)})
    st = graph_statistics(lad)
    assert st["nodes"] == 6 and st["edges"] == 3 and st["isolated_nodes"] == 2
    assert st["mean_degree"] == 1.0 and st["max_degree"] == 2
    assert st["degree_histogram"] == [2, 2, 2]
    assert st["cross_document_edge_share"] == pytest.approx(1 / 3)
    assert st["components"] == 3 and st["largest_component"] == 4
    assert st["largest_component_share"] == pytest.approx(4 / 6)
    assert plot_degree_histogram(st, tmp_path / "deg.png").stat().st_size > 0


def test_evaluate_mog_vs_mogg(tmp_path, mirage):
    from mogg.run.app import evaluate

    cfg = compose([
        "experiment=mog_vs_mogg",
        f"paths.data_dir={mirage.parent}",
        f"paths.artifacts={tmp_path / 'artifacts'}",
        f"paths.checkpoints={tmp_path / 'ckpt'}",
        f"paths.reports={tmp_path / 'reports'}",
        "questions.limit=30",
        "corpus.sources.1.min_chars=600",
        "use_router=false",
        "run_name=mvm",
    ])
    summaries = evaluate(cfg)
    assert {"mog", "mogg"} <= set(summaries)
    pols = summaries["mogg"]["policies"]
    assert sorted(p for p in pols if p.startswith("fixed:")) == [f"fixed:hop{h}" for h in range(5)]


def test_bm25_knn_numba_rows_of_a_shared_index_equal_the_whole():
    """A shard's node range searched against the full index (offset) gives the whole run's rows,
    and the compiled kernel agrees with the scipy path on a corpus with many near-duplicates."""
    texts = _texts(300, seed=3)
    texts += [t.replace(".", " fever.") for t in texts[:60]]  # near-copies: many candidates tie closely
    whole_s, whole_i = bm25_knn(texts, 3, 0.2, backend="numba")
    r = BM25Retriever(backend="scipy").fit(texts)
    parts = [bm25_knn(texts[a:b], 3, 0.2, retriever=r, offset=a, backend="numba") for a, b in ((0, 100), (100, 360))]
    assert np.array_equal(np.concatenate([p[1] for p in parts]), whole_i)
    assert np.array_equal(np.concatenate([p[0] for p in parts]), whole_s)
    ref_s, ref_i = bm25_knn(texts, 3, 0.2, backend="scipy")
    assert np.array_equal(ref_i, whole_i)
    np.testing.assert_allclose(ref_s, whole_s, rtol=1e-6)


def test_bm25_knn_rejects_unknown_backend():
    with pytest.raises(ValueError, match="backend"):
        bm25_knn(["a b"], 1, backend="gpu")
    with pytest.raises(ValueError, match="knn_backend"):
        GraphLadderBuilder(knn_backend="fast")
