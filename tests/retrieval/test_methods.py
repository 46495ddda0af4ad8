"""The remaining methods: MAL structural ladder and its selection rule, semantic chunking, RRF
hybrid retrieval, two-encoder dense retrieval and reranking (tiny random models where a model is
needed, built with save_pretrained)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fakes import LookupEncoder
from test_retrieval import TINY_WORDS, _HashEncoder, _tiny_tokenizer

from mogg.data.records import Document
from mogg.ladders.semantic import SemanticChunker, breakpoints, moving_thresholds
from mogg.ladders.structural import StructuralLadderBuilder, parse_structure
from mogg.ladders.summarizers import ExtractiveSummarizer
from mogg.retrieval import BM25Retriever, DenseRetriever
from mogg.retrieval.hybrid import HybridRetriever, rrf_fuse
from mogg.retrieval.rerank import CrossEncoderScorer, RerankRetriever
from mogg.search import Hits
from mogg.selection.mal import mal_cumulative_select

STRUCTURED = ("BACKGROUND\n\nThe heart pumps blood. It has four chambers. Valves keep the flow one way.\n\n"
              "METHODS\n\nWe measured pressure. We measured flow.\n\nWe also counted beats in forty patients. "
              "Nobody dropped out.\n\nRESULTS\n\nPressure rose. Flow fell. Rate stayed the same.")


def test_structure_parsing():
    secs = parse_structure(STRUCTURED)
    assert [h for h, _ in secs] == ["BACKGROUND", "METHODS", "RESULTS"]
    assert [len(ps) for _, ps in secs] == [1, 2, 1]
    assert parse_structure("Just one paragraph. Two sentences.") == [(None, ["Just one paragraph. Two sentences."])]


def test_mal_levels_nest_by_structure():
    docs = [Document("d1", "", STRUCTURED), Document("d2", "", "A plain note without structure. It has two sentences.")]
    lad = StructuralLadderBuilder(multi_sentences=2, summarizer=ExtractiveSummarizer(max_tokens=12), summary_tokens=12).build(docs)
    assert lad.level_names == ["multi", "paragraph", "section", "document"]
    assert lad.is_document_local()  # no chunk crosses documents
    units = lad.units
    # every unit of a finer chunk lies in one chunk of every coarser level (nested partitions)
    for fine, coarse in zip(lad.levels[:-1], lad.levels[1:]):
        for c in range(len(fine)):
            us = fine.coverage.indices[fine.coverage.indptr[c]:fine.coverage.indptr[c + 1]]
            assert len(set(coarse.home[us])) == 1
    par, sec = lad.levels[1], lad.levels[2]
    assert len(par) == 5 and len(sec) == 4  # d1: 4 paragraphs in 3 sections; d2: one of each
    # the METHODS section holds exactly its two paragraphs
    methods = sec.home[units.text.index("We measured pressure.")]
    assert sorted({int(par.home[u]) for u in np.flatnonzero(sec.home == methods)}) == [1, 2]
    # section and document chunks are summaries (short), paragraphs their text
    assert sec.texts is not None and lad.levels[3].texts is not None and par.texts is None
    assert all(len(t.split()) <= 12 for t in sec.texts)
    # no headings anywhere: the section level splits nothing and is dropped, with a note
    flat = StructuralLadderBuilder(multi_sentences=1).build([Document("x", "", "One. Two.\n\nThree. Four.")])
    assert flat.level_names == ["multi", "paragraph", "document"] and "section" in flat.meta["notes"][0]


def test_mal_cumulative_softmax_hand_example():
    """Two levels, k_r = 2. Query 0: scores 10 (L0 c0, 5 tokens), 8 (L1 c0, 20 tokens), 5 (L0 c1,
    5 tokens), 2 (L1 c1, 20 tokens); budget 30 -> retrieved set {10, 8, 5} (30 tokens). With
    temperature 1 the softmax of s / 10 is over [1.0, 0.8, 0.5]: p = [0.405, 0.332, 0.263];
    tau 0.6 keeps the first two (cumulative 0.405 < 0.6, then 0.737)."""
    from mogg.ladders.base import Ladder, Level, Units

    units = Units(text=["a " * 5, "b " * 5, "c " * 5, "d " * 5], doc=np.array([0, 0, 1, 1]), doc_ids=["x", "y"])
    import scipy.sparse as sp

    l0 = Level("l0", sp.identity(4, format="csr"), np.arange(4))
    l1 = Level("l1", sp.csr_matrix(np.array([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1]], dtype=np.float32)[:, :4]),
               np.array([0, 0, 1, 1]), texts=["w " * 20, "v " * 20])
    lad = Ladder("t", units, [l0, l1])
    hits = Hits(np.array([[[0, 1], [0, 1]]]), np.array([[[10.0, 5.0], [8.0, 2.0]]], dtype=np.float32))
    sel = mal_cumulative_select(lad, hits, budget=30, tau=0.6, temperature=1.0)
    assert sel.level[0].tolist() == [0, 1] and sel.chunk[0].tolist() == [0, 0]
    p = np.exp([1.0, 0.8, 0.5]) / np.exp([1.0, 0.8, 0.5]).sum()
    assert p[0] < 0.6 < p[0] + p[1]
    # tau 1.0 keeps the whole retrieved set; a budget smaller than the top chunk still keeps it
    assert mal_cumulative_select(lad, hits, 30, 1.0, 1.0).chunk[0].tolist() == [0, 0, 1]
    assert mal_cumulative_select(lad, hits, 1, 0.9, 1.0).chunk[0].tolist() == [0]


def test_moving_percentile_breakpoints_on_constructed_embeddings():
    # three topics of 5, 4 and 6 sentences: unit vectors along 3 axes with a little noise
    rng = np.random.default_rng(0)
    topics = [0] * 5 + [1] * 4 + [2] * 6
    emb = np.eye(8)[topics] + 0.01 * rng.normal(size=(15, 8))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    dist = 1 - np.einsum("id,id->i", emb[:-1], emb[1:])
    thr = moving_thresholds(dist, 90, 4)
    assert thr[0] == dist[0] and np.isclose(thr[5], np.percentile(dist[2:6], 90))
    tokens = np.full(15, 10)
    assert breakpoints(dist, tokens, 90, 4, 2, 10_000) == [0, 5, 9]
    assert breakpoints(dist, tokens, 90, 4, 6, 10_000) == [0, 9]  # min_sentences 6: the first cut waits
    # max_tokens forces a cut before a fourth sentence; the topic change at 9 falls one sentence
    # into a chunk started at 8, under min_sentences, so it is not a cut
    assert breakpoints(dist, tokens, 90, 4, 2, 30) == [0, 3, 5, 8, 11, 14]

    def Vec():
        return LookupEncoder(lambda t: emb[int(t.split()[1])], {"name_or_path": "vec"}, dtype=None)

    text = " ".join(f"Sentence {i} here." for i in range(15))
    chunks = SemanticChunker(Vec(), percentile=90, window=4, min_sentences=2, max_tokens=1000).chunk_texts([text])[0]
    assert [c.split()[1] for c in chunks] == ["0", "5", "9"]
    over = SemanticChunker(Vec(), percentile=90, window=4, min_sentences=2, max_tokens=1000, overlap=1).chunk_texts([text])[0]
    assert over[1].startswith("Sentence 4 here.") and over[1].endswith("Sentence 9 here.")  # one neighbour each side


def test_rrf_equals_hand_computed_fusion():
    a = np.array([[3, 1, 2]])  # member 1 ranks 3, 1, 2
    b = np.array([[1, 4, -1]])  # member 2 ranks 1, 4 (and pads)
    s, i = rrf_fuse([a, b], rrf_k=60, k=4)
    want = {3: 1 / 61, 1: 1 / 62 + 1 / 61, 2: 1 / 63, 4: 1 / 62}
    order = sorted(want, key=lambda d: (-want[d], d))
    assert i[0].tolist() == order and np.allclose(s[0], [want[d] for d in order])
    s, i = rrf_fuse([np.array([[5, 6]]), np.array([[6, 5]])], rrf_k=60, k=2)
    assert i[0].tolist() == [5, 6]  # equal fused scores: ascending id


def test_hybrid_retriever_round_trip(tmp_path):
    texts = ["heart failure and blood pressure", "kidney failure", "renal cell tumor", "insulin and glucose", "fever and cough"]
    h = HybridRetriever([BM25Retriever(), DenseRetriever(_HashEncoder(), backend="torch")], rrf_k=60, depth=5).fit(texts)
    s, i = h.search(["kidney failure", "glucose"], 3)
    ref = rrf_fuse([BM25Retriever().fit(texts).search(["kidney failure", "glucose"], 5)[1],
                    DenseRetriever(_HashEncoder(), backend="torch").fit(texts).search(["kidney failure", "glucose"], 5)[1]], 60, 3)
    assert np.array_equal(i, ref[1]) and i[0, 0] == 1
    h.save(tmp_path)
    back = HybridRetriever([BM25Retriever(), DenseRetriever(_HashEncoder(), backend="torch")], rrf_k=60, depth=5).restore(tmp_path)
    assert np.array_equal(back.search(["kidney failure", "glucose"], 3)[1], i)
    with pytest.raises(ValueError, match="saved with another config"):
        HybridRetriever([BM25Retriever()], rrf_k=10).restore(tmp_path)


class _FakeScorer:
    """Scores a candidate by a fixed table: text -> relevance."""

    def __init__(self, table):
        self.table = table

    def config(self):
        return {"kind": "fake"}

    def prepare(self, texts):
        pass

    def score(self, queries, texts, ids=None):
        return np.array([self.table.get(t, 0.0) for t in texts], dtype=np.float32)


def test_reranker_orders_by_the_models_scores(tmp_path):
    texts = ["alpha heart", "beta heart", "gamma heart", "delta heart"]
    table = {"alpha heart": 0.1, "beta heart": 0.9, "gamma heart": 0.5, "delta heart": 0.5}
    r = RerankRetriever(BM25Retriever(), _FakeScorer(table), depth=4).fit(texts)
    s, i = r.search(["heart"], 3)
    assert i[0].tolist() == [1, 2, 3] and np.allclose(s[0], [0.9, 0.5, 0.5])  # ties: ascending id
    r.save(tmp_path)
    back = RerankRetriever(BM25Retriever(), _FakeScorer(table), depth=4).restore(tmp_path)
    assert back.search(["heart"], 3)[1].tolist() == i.tolist()


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """A tiny BERT encoder pair (query, document) and a tiny cross-encoder, random, save_pretrained."""
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    root = tmp_path_factory.mktemp("tiny_pair")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_WORDS]
    cfg = BertConfig(vocab_size=len(tokens), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=24, max_position_embeddings=64, num_labels=1)
    out = {}
    for name, cls, seed in (("query", BertModel, 1), ("doc", BertModel, 2), ("cross", BertForSequenceClassification, 3)):
        path = root / name
        path.mkdir()
        (path / "vocab.txt").write_text("\n".join(tokens) + "\n")
        _tiny_tokenizer(path / "vocab.txt").save_pretrained(path)
        torch.manual_seed(seed)
        cls(cfg).save_pretrained(path)
        out[name] = path
    return out


def test_two_encoder_dense_uses_the_query_encoder(tiny_models):
    from mogg.encoders import HFEncoder

    docs = ["heart attack", "kidney failure", "insulin glucose", "fever cough lung"]
    qenc = HFEncoder(str(tiny_models["query"]), max_length=16, device="cpu")
    denc = HFEncoder(str(tiny_models["doc"]), max_length=16, device="cpu")
    r = DenseRetriever(denc, backend="torch", query_encoder=qenc).fit(docs)
    s, i = r.search(["heart failure", "glucose"], 4)
    want = qenc.encode(["heart failure", "glucose"]) @ denc.encode(docs).T  # both L2-normalised: cosines
    assert np.allclose(s, np.take_along_axis(want, i, 1), atol=1e-5)
    assert r.config()["query_encoder"]["name_or_path"] == str(tiny_models["query"])
    one = DenseRetriever(denc, backend="torch").fit(docs).search(["heart failure", "glucose"], 4)[0]
    assert not np.allclose(one, s)  # the query encoder made a difference


def test_cross_encoder_scorer_tiny_model(tiny_models):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    texts = ["heart attack", "kidney failure", "insulin glucose", "fever cough lung"]
    scorer = CrossEncoderScorer(str(tiny_models["cross"]), max_length=32, batch_size=3, device="cpu")
    got = scorer.score(["heart"] * 4, texts)
    tok = AutoTokenizer.from_pretrained(tiny_models["cross"])
    model = AutoModelForSequenceClassification.from_pretrained(tiny_models["cross"]).eval()
    with torch.no_grad():
        want = model(**tok(["heart"] * 4, texts, padding=True, return_tensors="pt")).logits[:, 0].numpy()
    assert np.allclose(got, want, atol=1e-5)
    r = RerankRetriever(BM25Retriever(stopwords=False), scorer, depth=4).fit(texts)
    cands = BM25Retriever(stopwords=False).fit(texts).search(["heart"], 4)[1][0]
    _, i = r.search(["heart"], 4)
    assert set(i[0][i[0] >= 0]) == set(cands[cands >= 0])  # the same candidates ...
    got_order = [x for x in i[0] if x >= 0]
    assert got_order == sorted(got_order, key=lambda d: (-want[d], d))  # ... ordered by the model
