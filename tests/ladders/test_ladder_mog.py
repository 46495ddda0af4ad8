import numpy as np
import pytest

from mogg.data.records import Document
from mogg.ladders import Ladder, MoGLadderBuilder
from mogg.ladders.mog import nested_levels, pack_sentences


def _docs(rng, n_docs=12):
    docs = []
    for d in range(n_docs):
        n_sent = int(rng.integers(1, 20))
        sents = [f"Sentence {i} of doc {d} has {'word ' * int(rng.integers(1, 30))}end." for i in range(n_sent)]
        docs.append(Document(id=f"d{d}", title="", content=" ".join(sents)))
    return docs


@pytest.mark.parametrize("unit,size,doc_level", [("sentences", 1, True), ("sentences", 3, False), ("tokens", 40, True)])
def test_nesting_invariants(unit, size, doc_level):
    docs = _docs(np.random.default_rng(0))
    lad = MoGLadderBuilder(unit=unit, unit_size=size, n_levels=4, document_level=doc_level).build(docs)
    n_u = len(lad.units)
    assert lad.n_levels == 4 + doc_level
    prev = None
    for lv in lad.levels:
        cov = lv.coverage.tocsc()
        # every finest unit in exactly one chunk of every level
        assert np.array_equal(np.asarray(cov.sum(axis=0)).ravel(), np.ones(n_u))
        # no chunk crosses documents, and chunks are contiguous runs of units
        for c in range(len(lv)):
            us = lv.coverage.indices[lv.coverage.indptr[c]:lv.coverage.indptr[c + 1]]
            assert len(np.unique(lad.units.doc[us])) == 1
            assert np.array_equal(np.sort(us), np.arange(us.min(), us.max() + 1))
            assert lv.home[us].tolist() == [c] * len(us)
        if prev is not None:
            # nested: every chunk of the finer level lies inside one chunk of this level
            parent = lv.home[prev.coverage.indices]
            ptr = prev.coverage.indptr
            for c in range(len(prev)):
                assert len(set(parent[ptr[c]:ptr[c + 1]])) == 1
            if lv.name != "doc":
                # each chunk = at most two adjacent finer chunks
                children = np.bincount(lv.home[prev.coverage.indices[ptr[:-1]]], minlength=len(lv))
                assert children.max() <= 2 and children.min() >= 1
        prev = lv
    # level-0 text is the unit text; level-j text is the concatenation of its units
    texts = lad.texts(2)
    us = lad.levels[2].coverage.indices[lad.levels[2].coverage.indptr[0]:lad.levels[2].coverage.indptr[1]]
    assert texts[0] == " ".join(lad.units.text[u] for u in us)


def test_doubling_sizes():
    # one document of 10 units: levels hold 10, 5, 3, 2 chunks (odd tail stays single)
    levels = nested_levels(np.zeros(10, dtype=np.int64), 4, False)
    assert [len(lv) for lv in levels] == [10, 5, 3, 2]
    assert levels[2].home.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]


def test_pack_tokens_never_cuts_sentences():
    sents = ["a b c", "d e", "f g h i j k", "l"]
    assert pack_sentences(sents, "tokens", 5) == ["a b c d e", "f g h i j k", "l"]
    assert pack_sentences(sents, "sentences", 3) == ["a b c d e f g h i j k", "l"]


def test_empty_corpus_rejected():
    with pytest.raises(ValueError, match="zero units"):
        MoGLadderBuilder().build([])


def test_save_load_roundtrip(tmp_path):
    docs = _docs(np.random.default_rng(1), 5)
    lad = MoGLadderBuilder(n_levels=3, document_level=True).build(docs)
    lad.save(tmp_path)
    back = Ladder.load(tmp_path)
    assert back.units.text == lad.units.text and back.units.doc_ids == lad.units.doc_ids
    for a, b in zip(lad.levels, back.levels):
        assert a.name == b.name and (a.coverage != b.coverage).nnz == 0 and np.array_equal(a.home, b.home)
    assert back.texts(1) == lad.texts(1)


def test_chunk_doc_uses_centre_for_overlapping_levels():
    import scipy.sparse as sp

    from mogg.ladders.base import Level, Units

    # chunk 1 is centred on unit 2 (doc B) but also covers unit 1 (doc A), which comes first
    units = Units(text=["a", "b", "c"], doc=np.array([0, 0, 1]), doc_ids=["A", "B"])
    cov = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1]], dtype=np.float32))
    lad = Ladder("t", units, [Level("hop1", cov, home=np.array([0, -1, 1]))])
    assert lad.chunk_doc(0).tolist() == [0, 1]
