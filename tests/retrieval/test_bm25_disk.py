"""The tantivy-backed BM25 (retriever=bm25_disk): a brute-force reference of its BM25 variant, the
default backend where the variants agree, shard merges, save/load and memory-mapped reading."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from test_retrieval import QUERIES, _corpus

from mogg.core.text import tokenize
from mogg.retrieval import BM25Retriever

pytest.importorskip("tantivy")

from mogg.retrieval.bm25_disk import DiskBM25


def _lucene_reference(docs: list[str], queries: list[str], k: int):
    """Brute force of tantivy's BM25 (k1 1.2, b 0.75, idf ln(1 + (N - df + 0.5) / (df + 0.5)), each
    query token occurrence counted): every doc sorted by (-score, id). Lengths up to 40 tokens are
    stored exactly by tantivy, so the corpus keeps to them."""
    toks = [tokenize(d, stopwords=True) for d in docs]
    assert max(map(len, toks)) <= 40
    n = len(docs)
    avg = sum(map(len, toks)) / n
    df: dict[str, int] = {}
    for t in toks:
        for w in set(t):
            df[w] = df.get(w, 0) + 1
    scores = np.zeros((len(queries), n))
    for qi, q in enumerate(queries):
        for w in tokenize(q, stopwords=True):
            if w not in df:
                continue
            idf = np.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
            tf = np.array([t.count(w) for t in toks], dtype=np.float64)
            dl = np.array([len(t) for t in toks], dtype=np.float64)
            scores[qi] += idf * 2.2 * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avg))
    order = np.stack([np.lexsort((np.arange(n), -s)) for s in scores])[:, :k]
    return np.take_along_axis(scores, order, 1), order


def _short_corpus(n=300, seed=0) -> list[str]:
    # the shared retrieval fixture (duplicates, an empty doc, stop-word-only doc, a term in most
    # docs), cut to 40 tokens per document
    return [" ".join(d.split()[:40]) for d in _corpus(n, seed)]


def _assert_same_topk(s, i, ref_s, ref_i, tol=1e-5):
    """Scores equal within float32 rounding; ids equal except where the reference ties within it."""
    assert np.allclose(s, ref_s, rtol=tol, atol=tol)
    near_tie = np.zeros_like(ref_s, dtype=bool)
    for r in range(ref_s.shape[0]):  # an id may swap with a neighbour whose score is within rounding
        d = np.abs(np.diff(ref_s[r])) <= tol * np.maximum(1, np.abs(ref_s[r][1:]))
        near_tie[r, 1:] |= d
        near_tie[r, :-1] |= d
    assert np.array_equal(i[~near_tie], ref_i[~near_tie])


@pytest.mark.parametrize("k", [1, 3, 10])
def test_disk_bm25_matches_the_variant_brute_force(k):
    docs = _short_corpus()
    queries = [q for q in QUERIES if tokenize(q, stopwords=True)]  # ones with terms; the rest below
    s, i = DiskBM25().fit(docs).search(queries, k)
    ref_s, ref_i = _lucene_reference(docs, queries, k)
    assert s.dtype == np.float32 and i.dtype == np.int64 and s.shape == (len(queries), k)
    _assert_same_topk(s, i, ref_s, ref_i)


def test_disk_bm25_pads_like_the_default_backend():
    """A query with no terms (or matching fewer than k chunks) gets score-0 chunks by ascending id,
    as the in-memory backend's rows of zeros; k larger than the index pads with -inf / -1."""
    docs = _short_corpus()
    r = DiskBM25().fit(docs)
    ref = BM25Retriever(backend="scipy").fit(docs)
    for q in ("", "the of and", "xenotransplantation unseenword"):
        s, i = r.search([q], 4)
        assert np.array_equal(i, ref.search([q], 4)[1]) and np.array_equal(s, np.zeros((1, 4), np.float32))
    one = DiskBM25().fit(["alpha beta", "gamma"])
    s, i = one.search(["gamma"], 3)
    assert i.tolist() == [[1, 0, -1]] and s[0, 1] == 0 and s[0, 2] == -np.inf
    assert r.search(["heart"], 0)[0].shape == (1, 0)
    assert DiskBM25().fit([]).search(["heart"], 2)[1].tolist() == [[-1, -1]]


def test_disk_bm25_top1_agrees_with_the_default_backend_on_real_questions(mirage):
    """The variants differ (k1 1.2 vs 1.5, idf without epsilon floor), rankings mostly agree: on
    real PubMedQA* passages and MIRAGE questions the top-1 chunk is the default backend's for
    most questions, and the default's top-1 is nearly always in this backend's top 10."""
    from mogg.core.text import split_sentences
    from mogg.data.corpus import PubMedQAContexts
    from mogg.data.qa import MirageBenchmark

    docs = list(PubMedQAContexts(str(mirage / "rawdata/pubmedqa/data/test_set.json")))
    texts = [s for d in docs for s in split_sentences(d.text)]
    questions = [it.question for it in MirageBenchmark(str(mirage / "benchmark.json"), datasets=["pubmedqa"], limit=200).load()]
    _, disk = DiskBM25().fit(texts).search(questions, 10)
    _, mem = BM25Retriever(backend="scipy").fit(texts).search(questions, 10)
    top1 = (disk[:, 0] == mem[:, 0]).mean()
    in10 = np.mean([mem[q, 0] in disk[q] for q in range(len(questions))])
    assert top1 >= 0.8 and in10 >= 0.97, (top1, in10)


def test_disk_bm25_save_load_round_trip_and_reads_memory_mapped(tmp_path):
    docs = _short_corpus()
    r = DiskBM25().fit(docs)
    before = r.search(QUERIES, 5)
    names = r.save(tmp_path)
    assert set(names) <= {p.name for p in tmp_path.iterdir()} and "bm25_disk.json" in names
    loaded = DiskBM25.load(tmp_path, search_threads=2)
    del r  # its private build directory goes with it: the saved copy stands alone
    after = loaded.search(QUERIES, 5)
    assert np.array_equal(after[0], before[0]) and np.array_equal(after[1], before[1])
    assert loaded.search_threads == 2
    # tantivy maps the segment files instead of reading them into the heap
    maps = Path("/proc/self/maps")
    if maps.exists():
        assert str(tmp_path) in maps.read_text()
    with pytest.raises(TypeError, match="not runtime options"):
        DiskBM25.load(tmp_path, stopwords=False)
    with pytest.raises(ValueError, match="another config"):
        DiskBM25(stopwords=False).restore(tmp_path)


@pytest.mark.parametrize("n_shards", [1, 3])
def test_disk_bm25_shards_merge_into_one_engine_index(tmp_path, n_shards):
    """Shard indexes (map) become one index by listing their segments (reduce): the same ids and
    scores as one build over all texts, corpus-wide statistics included; the merged artifact
    stands alone once the shards are deleted (hard links)."""
    docs = _short_corpus(400, seed=3)
    ref = DiskBM25().fit(docs).search(QUERIES, 6)
    bounds = np.linspace(0, len(docs), n_shards + 1).astype(int)
    dirs = []
    for s in range(n_shards):
        d = tmp_path / f"shard{s}"
        d.mkdir()
        DiskBM25(heap_mb=16).save_shard(docs[bounds[s]:bounds[s + 1]], d, "level0")
        dirs.append(d)
    merged = DiskBM25().fit_shards(dirs, "level0")
    assert merged.n_docs == len(docs)
    _assert_same_topk(*merged.search(QUERIES, 6), *ref)
    out = tmp_path / "merged"
    out.mkdir()
    merged.save(out)
    for d in dirs:
        shutil.rmtree(d)
    loaded = DiskBM25.load(out)
    assert loaded._searcher.num_segments >= n_shards
    _assert_same_topk(*loaded.search(QUERIES, 6), *ref)


def test_disk_bm25_through_the_ladder_and_the_sharded_build(tmp_path):
    """retriever=bm25_disk plugs into the ladder search and the sharded build like retriever=bm25:
    a 3-shard build + merge gives the single build's hits."""
    from mogg.data.corpus import DocumentList
    from mogg.data.records import Document
    from mogg.ladders import MoGLadderBuilder
    from mogg.search import LadderIndex
    from mogg.sharding import merge_task, shard_task

    sents = [s.rstrip(".") + "." for s in _short_corpus(300, seed=5) if s]
    docs = [Document(f"d{i}", "", " ".join(sents[10 * i:10 * i + 10])) for i in range(len(sents) // 10)]
    corpus = DocumentList(docs)
    builder = MoGLadderBuilder(unit="sentences", unit_size=1, n_levels=3)
    single = LadderIndex.build(corpus, builder, DiskBM25, tmp_path / "single").search(QUERIES, 4)
    for s in range(3):
        shard_task(corpus, builder, DiskBM25, None, s, 3, tmp_path / "sharded")
    merge_task(corpus, builder, DiskBM25, None, 3, tmp_path / "sharded")
    sharded = LadderIndex.build(corpus, builder, DiskBM25, tmp_path / "sharded").search(QUERIES, 4)
    for lv in range(3):
        _assert_same_topk(sharded.scores[:, lv], sharded.ids[:, lv], single.scores[:, lv], single.ids[:, lv])
