"""Tokenise once per unit: every level's BM25 counts from the units' terms, equal to tokenizing the
level's chunk texts, with one tokenizer pass over the units for all levels."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from test_retrieval import QUERIES, _corpus

import mogg.core.text as text
from mogg.core.text import encode_texts, tokenize
from mogg.data.corpus import DocumentList
from mogg.data.records import Document
from mogg.ladders import MoGLadderBuilder
from mogg.ladders.base import Ladder, Level
from mogg.ladders.unit_terms import LadderTerms
from mogg.retrieval import BM25Retriever


def _docs() -> list[Document]:
    sents = [s.rstrip(".") + "." for s in _corpus(400, seed=7) if s.strip(". ")]
    sents[5] = "İstanbul ΟΔΟΣ café naïve x_y il-6."  # unicode cases of lower() and \w
    return [Document(f"d{i}", "", " ".join(sents[9 * i:9 * i + 3 + i % 7])) for i in range(40)]


def _ladder(n_levels=5, document_level=True) -> Ladder:
    return MoGLadderBuilder(unit="sentences", unit_size=1, n_levels=n_levels, document_level=document_level).build(_docs())


@pytest.mark.parametrize("stopwords", [True, False])
def test_encode_texts_equals_tokenize(stopwords):
    texts = [u for d in _docs() for u in d.text.split(". ")] + ["", "the of and", "a\x00b C"]
    vocab, ids, lengths = encode_texts(texts, stopwords)
    toks = [tokenize(t, stopwords) for t in texts]
    assert lengths.tolist() == [len(t) for t in toks]
    assert [vocab[i] for i in ids] == [w for t in toks for w in t]
    assert vocab == list(dict.fromkeys(w for t in toks for w in t))  # first-occurrence order


def _with_overlapping_level(ladder: Ladder) -> Ladder:
    # a graph-like level: chunk c covers units c, c+3 and c+1 (unordered, overlapping, across documents)
    n = len(ladder.units)
    rows = np.repeat(np.arange(n - 3), 3)
    cols = np.stack([np.arange(n - 3), np.arange(n - 3) + 3, np.arange(n - 3) + 1], axis=1).ravel()
    cov = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n - 3, n))
    stored = Level("summaries", cov[:4], np.full(n, -1), ["stored summary text one", "two", "", "the patient"])
    return Ladder("test", ladder.units, [*ladder.levels, Level("hops", cov, np.arange(n)), stored])


@pytest.mark.parametrize("stopwords", [True, False])
def test_level_counts_equal_counting_the_chunk_texts(stopwords):
    """Every level's (vocab, tf, doc_len) from the units equals BM25Retriever.count_terms on the
    level's chunk texts: nested MoG levels, a document level, an overlapping level and stored texts."""
    ladder = _with_overlapping_level(_ladder())
    terms = LadderTerms(ladder)
    for j in range(ladder.n_levels):
        vocab, tf, dl = terms.level(j, stopwords).counts()
        r_vocab, r_tf, r_dl = BM25Retriever(stopwords=stopwords).count_terms(ladder.texts(j))
        assert vocab == r_vocab and np.array_equal(dl, r_dl)
        assert tf.shape == r_tf.shape and (tf != r_tf).nnz == 0
        assert np.array_equal(tf.indptr, r_tf.indptr) and np.array_equal(tf.indices, r_tf.indices)
        toks = list(terms.level(j, stopwords).token_texts())
        assert toks == [" ".join(tokenize(t, stopwords)) for t in ladder.texts(j)]
        assert np.array_equal(ladder.chunk_tokens(j), [text.count_tokens(t) for t in ladder.texts(j)])


class _CountingRegex:
    """Stands in for the tokenizer's compiled regex and counts the texts it tokenizes."""

    def __init__(self, pattern):
        self.pattern, self.calls = pattern, 0

    def findall(self, s):
        self.calls += 1
        return self.pattern.findall(s)


def test_a_ladder_is_tokenized_once_for_all_its_levels(monkeypatch, tmp_path):
    """Fitting the five levels' BM25 indexes (and a sharded build's level counts) tokenizes each unit
    once, not once per level; the indexes score exactly as indexes fitted on the chunk texts."""
    from mogg.search import level_retrievers, search_levels
    from mogg.sharding import build_shard

    ladder = _ladder(document_level=False)
    reference = [BM25Retriever(backend="scipy").fit(ladder.texts(j)) for j in range(ladder.n_levels)]
    counter = _CountingRegex(text._TOKEN_RE)
    monkeypatch.setattr(text, "_TOKEN_RE", counter)
    fitted = level_retrievers(ladder, lambda: BM25Retriever(backend="scipy"))
    assert counter.calls == len(ladder.units)  # not n_levels x units
    ref = search_levels(reference, QUERIES, 5)
    got = search_levels(fitted, QUERIES, 5)
    assert np.array_equal(got.ids, ref.ids) and np.array_equal(got.scores, ref.scores)

    corpus = DocumentList(_docs())
    builder = MoGLadderBuilder(unit="sentences", unit_size=1, n_levels=5)
    counter.calls = 0
    builder.build(corpus.documents())
    splitting = counter.calls  # the sentence splitter's own token counts (memoised)
    counter.calls = 0
    build_shard(corpus, builder, BM25Retriever, 0, 1, tmp_path)
    assert counter.calls - splitting == len(ladder.units)
