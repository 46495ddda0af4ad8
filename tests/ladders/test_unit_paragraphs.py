"""A ladder keeps which of its units open a paragraph (mogg.ladders.sources.paragraph_starts): found once at build
against the documents' blank lines, carried by saves, concatenations and merges, a derived artifact for a ladder
saved before; the page rule reads each unit's paragraph from it (issue 58)."""

from __future__ import annotations

import numpy as np
import pytest

from mogg.core.text import paragraphs, split_sentences
from mogg.data.corpus import DocumentList
from mogg.data.records import Document
from mogg.ladders import MoGLadderBuilder
from mogg.ladders.base import Ladder
from mogg.ladders.sources import PARAGRAPH_STARTS, paragraph_ids, paragraph_starts
from mogg.ladders.store import build_ladder


def _brute(text: str, units: list[str]) -> list[int]:
    """Each unit's paragraph by the paragraph its middle character falls in, by scanning characters."""
    paras = [" ".join(p.split()) for p in paragraphs(text)]  # the rule's paragraphs; the scan is what is checked
    owner = [k for k, p in enumerate(paras) for _ in range(len(p) + 1)]  # each joined character's paragraph
    whole = " ".join(paras)
    out, cur, last = [], 0, 0
    for u in units:
        t = " ".join(u.split())
        at = whole.find(t, cur)
        if at >= 0:
            last, cur = owner[at + len(t) // 2], at + 1
        out.append(last)
    return list(np.maximum.accumulate(out)) if out else []


@pytest.mark.parametrize("text", [
    "One sentence. Two sentences.\n\nA second paragraph here. And more.\n\n\nThird one.",
    "Background: a   lot of\nwhitespace.\n \t\nMethods were used. Results came.\n\nConclusion holds.",
    "Heading without a stop\n\nText starts here. It goes on.",  # a heading: one paragraph with the text after it
    "A stop ends this one.\n\nwhile this line goes on\nText starts here. It goes on.",  # a unit spans two: its middle decides
    "No blank line at all. Just sentences. Three of them.",
    "Single.\n\nTwo.",
])
def test_paragraph_starts_match_a_character_scan(text):
    units = split_sentences(text)
    got = paragraph_starts(text, units)
    para = _brute(text, units)
    want = [k for k in range(1, len(units)) if para[k] > para[k - 1]]
    assert got.tolist() == want
    if "\n\n" not in text and "\n \t\n" not in text:
        assert got.tolist() == []


def test_a_unit_the_text_does_not_hold_stays_in_the_paragraph_before():
    text = "First para. Still first.\n\nSecond para. Still second."
    units = ["First para.", "a summary the builder wrote", "Still first.", "Second para.", "Still second."]
    assert paragraph_starts(text, units).tolist() == [3]


def test_paragraph_ids_open_at_documents_and_starts():
    doc = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    assert paragraph_ids(doc, np.array([2, 7])).tolist() == [0, 0, 1, 2, 2, 3, 3, 4, 4]
    assert paragraph_ids(doc, np.zeros(0, dtype=np.int64)).tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]


def _pages(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return [Document(f"page-{i}", "", "\n\n".join(
        " ".join(f"Sentence {s} of paragraph {k} on page {i} about term{k}." for s in range(int(rng.integers(1, 4))))
        for k in range(int(rng.integers(1, 5))))) for i in range(n)]


def _want_ids(docs, ladder: Ladder) -> list[int]:
    out, base = [], 0
    for d in docs:
        units = [ladder.units.text[u] for u in np.flatnonzero(ladder.units.doc == ladder.units.doc_ids.index(d.id))]
        para = _brute(d.text, units)
        out += [base + p for p in para]
        base += max(para) + 1 if para else 1
    return out


def test_a_ladder_keeps_which_units_open_a_paragraph(tmp_path, monkeypatch):
    """Found at build (every unit's paragraph as a scan finds it), saved and loaded; a ladder saved before gets them
    once as a derived artifact; concatenated parts carry them moved past the units before; a bad array is refused."""
    import mogg.ladders.store as store
    from mogg.ladders.concat import concat_ladders, concat_saved

    docs = _pages()
    builder = MoGLadderBuilder(n_levels=2, document_level=True)
    built, _ = build_ladder(DocumentList(docs), builder, tmp_path / "new")
    want = _want_ids(docs, built)
    assert built.unit_paragraphs().tolist() == want and len(set(want)) > len(docs)  # some page has paragraphs
    saved = next((tmp_path / "new" / "ladder").iterdir())
    assert Ladder.load(saved).unit_paragraphs().tolist() == want

    calls = []
    real = store.structure_of
    monkeypatch.setattr(store, "structure_of", lambda d, lad: calls.append(1) or real(d, lad))
    monkeypatch.setattr(store, "with_structure", lambda lad, documents: lad)  # the build before the arrays
    build_ladder(DocumentList(docs), builder, tmp_path / "old")
    monkeypatch.undo()
    monkeypatch.setattr(store, "structure_of", lambda d, lad: calls.append(1) or real(d, lad))
    for _ in range(2):  # found once from the corpus (on that first load), then read from the store
        again, _ = build_ladder(DocumentList(docs), builder, tmp_path / "old")
        assert again.unit_paragraphs().tolist() == want
    assert calls == [1] and (tmp_path / "old" / PARAGRAPH_STARTS).is_dir()

    more = [Document("x" + d.id, d.title, d.content) for d in _pages(4, seed=3)]
    other, _ = build_ladder(DocumentList(more), builder, tmp_path / "other")
    both = concat_ladders([built, other], independent=True)
    joined = built.unit_paragraphs().tolist() + (other.unit_paragraphs() + max(want) + 1).tolist()
    assert both.unit_paragraphs().tolist() == joined
    out = tmp_path / "joined"
    out.mkdir()
    concat_saved([saved, next((tmp_path / "other" / "ladder").iterdir())], out)
    assert Ladder.load(out).unit_paragraphs().tolist() == joined
    whole = builder.build(docs + more)  # a single build of both, as a merge of shards must equal
    store.with_structure(whole, docs + more)
    np.testing.assert_array_equal(whole.arrays[PARAGRAPH_STARTS], both.arrays[PARAGRAPH_STARTS])

    assert builder.build(docs).unit_paragraphs() is None  # built outside build_ladder
    n = len(built.units.doc)
    for bad in (np.array([0]), np.array([n]), np.array([3, 2]), np.array([1.5])):
        fresh = Ladder.load(saved)
        fresh.arrays[PARAGRAPH_STARTS] = bad
        with pytest.raises(ValueError, match="increasing unit indices"):
            fresh.unit_paragraphs()


def test_stored_starts_agree_with_stored_counts(tmp_path):
    """The two paragraph arrays a ladder stores describe one split: per document, the paragraphs its units open
    (from :data:`PARAGRAPH_STARTS`) never exceed its stored count, and equal it where every paragraph holds a whole
    unit (sentences split inside paragraphs, as here); the page rule reads the first, E "para" the second."""
    docs = _pages(12, seed=5) + [Document("flat", "", "No blank line. Two sentences.")]
    built, _ = build_ladder(DocumentList(docs), MoGLadderBuilder(n_levels=2, document_level=True), tmp_path)
    for lad in (built, Ladder.load(next((tmp_path / "ladder").iterdir()))):
        ids = lad.unit_paragraphs()
        found = np.array([len(np.unique(ids[lad.units.doc == d])) for d in range(len(lad.units.doc_ids))])
        counts = lad.doc_paragraphs()
        assert (found <= counts).all()
        np.testing.assert_array_equal(found, counts)
        assert counts.max() > 1 and counts[lad.units.doc_ids.index("flat")] == 1
