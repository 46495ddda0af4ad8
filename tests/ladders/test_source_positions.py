"""The artifact store keeps a ladder's documents' source positions (mogg.ladders.sources) once computed, and the
ladder its paragraph counts: routing a corpus reads them instead of scanning every document id at each session
(issue 58's rule that cost follows the questions)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mogg.data.corpus import DocumentList
from mogg.data.records import Document
from mogg.ladders import MoGLadderBuilder
from mogg.ladders.base import Ladder
from mogg.ladders.sources import SOURCE_POSITIONS, is_permutation, source_positions
from mogg.ladders.store import build_ladder


def _shuffled_sources(n_sources=6, per=4, seed=0):
    """Sections "<s>-<k>" of ``n_sources`` sources written in a shuffled order (positions not the identity)."""
    rng = np.random.default_rng(seed)
    ids = [f"{s}-{k}" for s in range(n_sources) for k in range(per)]
    order = rng.permutation(len(ids))
    return [Document(ids[i], "", f"Section {k} of source {s} says term{s} and term{k}.")
            for i in order for s, k in [map(int, ids[i].split("-"))]]


def _forbid_scans(monkeypatch):
    """Make every id scan fail: a reading that still calls source_positions raises."""
    def refuse(ids):
        raise AssertionError(f"scanned {len(ids)} document ids")
    import mogg.ladders.sources as sources
    monkeypatch.setattr(sources, "source_positions", refuse)  # the one scan of the ids (set_shape's copy is gone)


def test_a_ladder_built_into_the_store_reads_its_stored_source_positions(tmp_path, monkeypatch):
    corpus = DocumentList(_shuffled_sources())
    builder = MoGLadderBuilder(n_levels=2, document_level=True)
    built, key = build_ladder(corpus, builder, tmp_path)
    ids = built.units.doc_ids
    want = source_positions(ids)
    assert not np.array_equal(want, np.arange(len(ids)))  # shuffled: the regrouping is not the identity
    np.testing.assert_array_equal(built.arrays[SOURCE_POSITIONS], want)
    # kept beside the ladder, not in it: a merge of shards writes a single build's ladder files (tests/cli/test_cluster)
    ladder_dir = next((tmp_path / "ladder").iterdir())
    assert SOURCE_POSITIONS not in np.load(ladder_dir / "arrays.npz").files
    assert (tmp_path / "source_positions").is_dir()

    loaded, key2 = build_ladder(corpus, builder, tmp_path)  # a new session: loaded from the store
    assert key2 == key and SOURCE_POSITIONS in loaded.arrays
    _forbid_scans(monkeypatch)
    np.testing.assert_array_equal(loaded.source_positions(), want)
    np.testing.assert_array_equal(loaded.source_unit_docs(), want[loaded.units.doc])
    assert loaded.source_unit_docs() is loaded.source_unit_docs()  # memoised


def test_a_ladder_without_stored_positions_computes_them_once(tmp_path, monkeypatch, caplog):
    """A ladder saved before the array existed, a concatenation of parts or shards: computed from the ids, memoised;
    a stored array that is not a permutation of the documents is named in a warning and recomputed."""
    built = MoGLadderBuilder(n_levels=2, document_level=True).build(_shuffled_sources(seed=1))
    assert SOURCE_POSITIONS not in built.arrays  # built outside the store
    built.save(tmp_path)
    old = Ladder.load(tmp_path)
    want = source_positions(old.units.doc_ids)
    calls = []
    import mogg.ladders.sources as sources
    real = sources.source_positions
    monkeypatch.setattr(sources, "source_positions", lambda ids: calls.append(len(ids)) or real(ids))
    np.testing.assert_array_equal(old.source_unit_docs(), want[old.units.doc])
    np.testing.assert_array_equal(old.source_positions(), want)
    assert calls == [len(want)]  # once

    bad = Ladder.load(tmp_path)
    bad.arrays[SOURCE_POSITIONS] = np.zeros(len(want), dtype=np.int64)  # not a permutation
    with caplog.at_level(logging.WARNING, logger="mogg.ladders.base"):
        np.testing.assert_array_equal(bad.source_positions(), want)
    assert "not a permutation" in caplog.text


@pytest.mark.parametrize("positions, n, ok", [
    ([2, 0, 1], 3, True), (np.zeros(0, dtype=np.int64), 0, True), ([0, 0, 1], 3, False), ([0, 1], 3, False), ([0, 1, 3], 3, False),
    ([-1, 0, 1], 3, False), ([0.0, 1.0, 2.0], 3, False),
])
def test_is_permutation(positions, n, ok):
    assert is_permutation(np.asarray(positions), n) is ok


@pytest.mark.parametrize("text, n", [
    ("one paragraph. Two sentences.", 1), ("A.\n\nB.", 2), ("A.\n \t\nB.\n\n\nC.", 3), ("a\nb", 1), ("", 1),
    ("\n\n a \n\n\n\n", 1), ("A.\r\n\r\nB.", 2), ("Heading\n\nIts text.", 1),
])
def test_paragraph_counts(text, n):
    from mogg.ladders.sources import paragraph_counts

    assert paragraph_counts([text]).tolist() == [n]


def _pages(n=5, seed=0):
    rng = np.random.default_rng(seed)
    return [Document(f"page-{i}", "", "\n\n".join(f"Paragraph {k} of page {i} on term{k}. It goes on."
                                                 for k in range(int(rng.integers(1, 5))))) for i in range(n)]


def test_a_ladder_keeps_its_documents_paragraph_counts(tmp_path, monkeypatch):
    """Stored at build; a ladder saved before they were gets them once as a derived artifact (then loaded);
    concatenated parts carry them; a count that is not one >= 1 per document is refused."""
    import mogg.ladders.store as store
    from mogg.ladders.concat import concat_ladders
    from mogg.ladders.sources import PARAGRAPHS

    docs = _pages()
    want = [d.content.count("\n\n") + 1 for d in docs]
    builder = MoGLadderBuilder(n_levels=2, document_level=True)
    built, _ = build_ladder(DocumentList(docs), builder, tmp_path / "new")
    assert built.doc_paragraphs().tolist() == want
    assert Ladder.load(next((tmp_path / "new" / "ladder").iterdir())).doc_paragraphs().tolist() == want  # on disk

    calls = []
    real_of = store.paragraphs_of
    monkeypatch.setattr(store, "paragraphs_of", lambda d, ids: calls.append(1) or real_of(d, ids))
    real = store.with_structure
    monkeypatch.setattr(store, "with_structure", lambda lad, documents: lad)  # the build before the counts
    build_ladder(DocumentList(docs), builder, tmp_path / "old")
    monkeypatch.setattr(store, "with_structure", real)
    ladder_dir = next((tmp_path / "old" / "ladder").iterdir())
    assert PARAGRAPHS not in np.load(ladder_dir / "arrays.npz").files  # the saved ladder has none
    for _ in range(2):  # computed once from the corpus (on that first load), then read from the store
        again, _ = build_ladder(DocumentList(docs), builder, tmp_path / "old")
        assert again.doc_paragraphs().tolist() == want
    assert calls == [1] and (tmp_path / "old" / PARAGRAPHS).is_dir()

    other = MoGLadderBuilder(n_levels=2, document_level=True).build(_pages(3, seed=1))
    other.arrays[PARAGRAPHS] = np.array([1, 2, 3])
    both = concat_ladders([built, other], independent=True)
    assert both.doc_paragraphs().tolist() == want + [1, 2, 3]
    assert PARAGRAPHS not in concat_ladders([built, builder.build(_pages(2))],
                                            independent=True).arrays  # a part without them: none
    assert builder.build(docs).doc_paragraphs() is None  # built outside build_ladder
    for bad in (np.array([1, 2]), np.zeros(len(docs), dtype=np.int64), np.ones(len(docs))):
        built.arrays[PARAGRAPHS] = bad
        with pytest.raises(ValueError, match="one count >= 1 per document"):
            built.doc_paragraphs()
