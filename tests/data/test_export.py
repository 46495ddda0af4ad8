"""mogg.data.export and scripts/export_generic.py: a stand-in written as the files a user brings reads back
as the same questions, documents and corpus order (the path the unseen checks run, issue 58)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from mogg.data.corpus import MedRAGJsonl
from mogg.data.export import write_generic
from mogg.data.qa import GenericQA
from mogg.data.records import Document, QAItem

ROOT = Path(__file__).resolve().parents[2]


def _same(items, docs, out):
    back_q, back_d = GenericQA(str(out / "questions.jsonl")).load(), list(MedRAGJsonl(str(out / "corpus.jsonl")))
    fields = ("id", "question", "answer", "options", "label", "gold_evidence", "gold_doc_ids")
    assert [tuple(getattr(q, f) for f in fields) for q in back_q] == [tuple(getattr(q, f) for f in fields) for q in items]
    assert [(d.id, d.title, d.content) for d in back_d] == [(d.id, d.title, d.content) for d in docs]  # order kept


def test_write_generic_reads_back_as_written(tmp_path):
    items = [QAItem(id="q1", question="Why?", answer="A", options={"A": "x", "B": "y"}, gold_evidence=["e one"],
                    gold_doc_ids=["d2"]),
             QAItem(id="q2", question="What?", answer="free text", label="the long answer", gold_evidence=[])]
    docs = [Document("d2", "", "second first"), Document("d1", "Title", "then the first")]
    assert write_generic(items, docs, tmp_path / "out") == (2, 2)
    _same(items, docs, tmp_path / "out")


def test_split_paragraphs_writes_each_paragraph_as_a_document_a_source_groups(tmp_path):
    """A page's blank-line-separated paragraphs become documents <id>_<k> in order, which source_positions reads as
    one source's sections; a one-paragraph document stays as it is; the script's --split-paragraphs writes them."""
    from mogg.data.export import split_paragraphs
    from mogg.ladders.sources import source_positions

    docs = [Document("p1", "Page", "First section.\n\nSecond one.\n \nThird."), Document("p2", "", "Alone.\nStill one."),
            Document("p3", "T", "\n\nA.\n\n\n\nB.\n")]
    out = split_paragraphs(docs)
    assert [(d.id, d.title, d.content) for d in out] == [
        ("p1_0", "Page", "First section."), ("p1_1", "Page", "Second one."), ("p1_2", "Page", "Third."),
        ("p2", "", "Alone.\nStill one."), ("p3_0", "T", "A."), ("p3_1", "T", "B.")]
    shuffled = [out[i] for i in (3, 0, 4, 2, 1, 5)]
    pos = source_positions([d.id for d in shuffled])
    order = [shuffled[i].id for i in np.argsort(pos)]
    assert order.index("p1_0") + 1 == order.index("p1_1") and order.index("p1_1") + 1 == order.index("p1_2")
    assert order.index("p3_0") + 1 == order.index("p3_1")
    items = [QAItem(id="q1", question="Which?", answer="A", options={"A": "x"}, gold_evidence=["Third."])]
    write_generic(items, out, tmp_path / "split")
    _same(items, out, tmp_path / "split")


def test_join_paragraphs_writes_a_page_one_section_per_line_that_reads_the_same():
    """A page's paragraphs joined by single line breaks read as the same paragraphs (mogg.core.text.paragraphs);
    a document of one paragraph and its id and title are kept."""
    from mogg.core.text import paragraphs
    from mogg.data.export import join_paragraphs

    secs = ["The first section says what the disease is and who it affects in the population at large.",
            "Symptoms", "The second section lists the symptoms that most patients have at the time of diagnosis."]
    docs = [Document("p1", "Page", "\n\n".join(secs)), Document("p2", "", "One paragraph alone.")]
    lines = join_paragraphs(docs, "\n")
    assert [(d.id, d.title) for d in lines] == [("p1", "Page"), ("p2", "")] and lines[1].content == "One paragraph alone."
    assert "\n\n" not in lines[0].content and paragraphs(lines[0].content) == paragraphs(docs[0].content)
    assert paragraphs(join_paragraphs(lines, "\n\n")[0].content) == paragraphs(docs[0].content)


def test_flattened_writes_a_page_on_one_line():
    """--paragraph-break space: every line break lost, the same words in order, so the page reads as one paragraph;
    an id and title kept."""
    from mogg.core.text import paragraphs
    from mogg.data.export import flattened

    page = "Symptoms\nThe first section lists them.\n\nSigns may include:\n- fever\n- a cough\r\n\r\nThe end."
    (flat,) = flattened([Document("p1", "Page", page)])
    assert (flat.id, flat.title) == ("p1", "Page") and flat.content.split() == page.split()
    assert "\n" not in flat.content and paragraphs(flat.content) == [flat.content]


def test_one_per_document_keeps_one_question_per_gold_document_set():
    """--one-per-document SEED: one question of each gold document set, drawn by that seed (another seed may draw
    another), in the order given; questions without gold documents all kept."""
    from mogg.data.export import one_per_document

    def q(i, docs):
        return QAItem(id=f"q{i}", question="?", answer="a", gold_evidence=["e"], gold_doc_ids=docs)

    items = [q(0, ["p1"]), q(1, ["p2"]), q(2, ["p1"]), q(3, []), q(4, ["p1"]), q(5, []), q(6, ["p2", "p3"]),
             q(7, ["p3", "p2"])]
    drawn = {s: [it.id for it in one_per_document(items, s)] for s in range(12)}
    for ids in drawn.values():
        assert "q3" in ids and "q5" in ids  # no-gold questions kept
        assert sum(i in ids for i in ("q0", "q2", "q4")) == 1 and "q1" in ids  # one of p1's three; p2's only one
        assert sum(i in ids for i in ("q6", "q7")) == 1  # the same set of pages, whatever its order
        assert ids == sorted(ids, key=lambda i: int(i[1:]))  # the order given
    assert len({tuple(v) for v in drawn.values()}) > 1 and drawn[3] == [it.id for it in one_per_document(items, 3)]


def test_question_headings_write_each_question_above_its_answer():
    """--question-headings: each question's text (one line) above its gold evidence where that opens a block of its
    gold document, a blank line between; a text several questions share headed once; a gold text inside a paragraph,
    or one its document lacks, left as it is. The page then reads as its questions' sections (rule 5: a question
    line of any length heads its answer)."""
    from mogg.core.text import paragraphs
    from mogg.data.export import question_headings

    long_q = ("What are the genetic changes related to familial hypophosphatemic rickets with hypercalciuria in "
              "early childhood ?")
    page = Document("p", "T", "It is a disorder of bone.\n\nIt is rare.\n\nMutations in one gene cause it.")
    items = [QAItem(id="a", question="What is  it ?", answer="x", gold_evidence=["It is a disorder of bone."],
                    gold_doc_ids=["p"]),
             QAItem(id="b", question=long_q, answer="x", gold_evidence=["Mutations in one gene cause it."],
                    gold_doc_ids=["p"]),
             QAItem(id="c", question="Again?", answer="x", gold_evidence=["It is a disorder of bone."],
                    gold_doc_ids=["p"]),
             QAItem(id="d", question="Inside?", answer="x", gold_evidence=["one gene"], gold_doc_ids=["p"]),
             QAItem(id="e", question="Elsewhere?", answer="x", gold_evidence=["Not here."], gold_doc_ids=["p"])]
    other = Document("o", "", "No question reads this page.")
    (d, o) = question_headings(items, [page, other])
    assert o == other and (d.id, d.title) == ("p", "T")
    assert d.content == ("What is it ?\n\nIt is a disorder of bone.\n\nIt is rare.\n\n"
                         f"{long_q}\n\nMutations in one gene cause it.")
    assert paragraphs(d.content) == ["What is it ?\nIt is a disorder of bone.\n\nIt is rare.",
                                     f"{long_q}\nMutations in one gene cause it."]


def test_halves_write_each_block_as_two_paragraphs():
    """--halves: each block of a document as two paragraphs, a blank line at the sentence break nearest its middle
    (as the page stand-in's halves are written); a block of one sentence, a heading, ids and titles kept."""
    from mogg.core.text import paragraphs
    from mogg.data.export import halved_paragraphs

    page = Document("p", "T", "Methods\n\nOne. Two. Three four five six.\n\nAlone here.\n\nA b c. D e f.")
    (d,) = halved_paragraphs([page])
    assert (d.id, d.title) == ("p", "T")
    assert d.content == "Methods\n\nOne. Two.\n\nThree four five six.\n\nAlone here.\n\nA b c.\n\nD e f."
    assert len(paragraphs(d.content)) == len(paragraphs(page.content)) + 2


def test_lists_write_each_paragraph_as_a_lead_sentence_and_short_items():
    """--lists: each paragraph its first sentence, then its other sentences as "- " items without a closing stop, one
    a line, cut at commas into items of at most LIST_ITEM_WORDS words (a longer piece every LIST_ITEM_WORDS words);
    the words kept in order, a heading and a one-sentence paragraph as they are; the page reads as the same paragraphs
    written with blank lines or one block a line (paragraph rule 6)."""
    from mogg.core.text import paragraphs, tokenize
    from mogg.data.export import LIST_ITEM_WORDS, join_paragraphs, listed_paragraphs

    body = ("Glaucoma damages the optic nerve at the back of the eye, slowly and often unnoticed. Signs include loss of side vision, blurred vision, halos around lights, "
            "eye pain and redness in the eye, headache. Drops lower the pressure in the eye of nearly every patient.")
    alone = "It is treated with drops that lower the pressure in the eye, taken every day for the rest of a life."
    page = Document("p", "T", f"Glaucoma\n\n{body}\n\n{alone}")
    (d,) = listed_paragraphs([page])
    assert (d.id, d.title) == ("p", "T") and tokenize(d.content) == tokenize(page.content)
    lines = d.content.split("\n")
    assert lines[:2] == ["Glaucoma", ""] and lines[2] == body.split(". ")[0] + "." and lines[-2:] == ["", alone]
    items = lines[3:-2]
    assert items == ["- Signs include loss of side vision, blurred vision", "- halos around lights",
                     "- eye pain and redness in the eye, headache", "- Drops lower the pressure in the eye of",
                     "- nearly every patient"]
    assert all(len(it.split()) - 1 <= LIST_ITEM_WORDS for it in items)
    want = [["Glaucoma", *lines[2].split(), *" ".join(items).split()], alone.split()]
    assert [p.split() for p in paragraphs(d.content)] == want
    for sep in ("\n", "\n\n"):  # written one block a line, or blank lines between: the same paragraphs
        (j,) = join_paragraphs([d], sep)
        assert [p.split() for p in paragraphs(j.content)] == want, sep
    # --inline-lists: the same items on the lead sentence's line, as a page whose line breaks were lost; its units are
    # the items still (mogg.core.text.split_units, UNIT_RULE 2)
    from mogg.core.text import split_units

    (flat,) = listed_paragraphs([page], inline=True)
    assert flat.content.split("\n\n") == ["Glaucoma", " ".join([lines[2], *items]), alone]
    units = split_units(flat.content)
    assert units == split_units(d.content) and units[1:len(items)] == items[:-1]  # the last runs on into the next


def test_the_script_writes_a_stand_in_the_generic_readers_give_back(tmp_path, mirage):
    """The snippet stand-in (an abstract's contexts as documents, side by side in the corpus) through the script."""
    from conftest import compose
    from hydra.utils import instantiate

    out = tmp_path / "snippets"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cfg = compose(["questions=pubmedqa_snippets", "corpus=pubmedqa_snippets"])
    items, docs = instantiate(cfg.questions).load(), instantiate(cfg.corpus).documents()
    assert len(items) == 500 and len(docs) > 1500
    _same(items, docs, out)
    # --shuffle SEED: the same documents in that seed's order (a corpus that does not keep a source's sections together)
    import numpy as np

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--shuffle", "1", "--out", str(tmp_path / "shuffled")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    perm = np.random.default_rng(1).permutation(len(docs))
    _same(items, [docs[i] for i in perm], tmp_path / "shuffled")
    # --shuffle with --bare-ids: the same order, the documents renamed d0, d1, ... and the gold ids alike
    from mogg.data.export import bare_ids

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--shuffle", "1", "--bare-ids", "--out", str(tmp_path / "bare")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _same(*bare_ids(items, [docs[i] for i in perm]), tmp_path / "bare")
    back = list(MedRAGJsonl(str(tmp_path / "bare" / "corpus.jsonl")))
    assert [d.id for d in back] == [f"d{k}" for k in range(len(docs))]
    assert [d.content for d in back] == [docs[i].content for i in perm]
    # ... each question's gold documents are the same texts under their new names
    text_of, new_text = {d.id: d.content for d in docs}, {d.id: d.content for d in back}
    for it, new in zip(items, GenericQA(str(tmp_path / "bare" / "questions.jsonl")).load()):
        assert [new_text[g] for g in new.gold_doc_ids] == [text_of[g] for g in it.gold_doc_ids if g in text_of]
    # --one-per-document SEED: one question per gold document set, as one_per_document draws it; the corpus whole
    from mogg.data.export import one_per_document

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--one-per-document", "0", "--out", str(tmp_path / "one")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _same(one_per_document(items, 0), docs, tmp_path / "one")
    # --split-paragraphs: each document's paragraphs as documents of their own (these contexts hold one each)
    from mogg.data.export import split_paragraphs

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--split-paragraphs", "--out", str(tmp_path / "split")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _same(items, split_paragraphs(docs), tmp_path / "split")
    # --paragraph-break line: each document's paragraphs joined by one line break (these contexts: one paragraph each)
    from mogg.data.export import join_paragraphs

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--paragraph-break", "line", "--out", str(tmp_path / "lines")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _same(items, join_paragraphs(docs, "\n"), tmp_path / "lines")
    # --question-headings: each question above its gold evidence (a context that opens its document)
    from mogg.data.export import question_headings

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--question-headings", "--out", str(tmp_path / "asked")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    headed = question_headings(items, docs)
    assert sum(h.content != d.content for h, d in zip(headed, docs)) > 100
    _same(items, headed, tmp_path / "asked")
    # --halves: each block written as two paragraphs
    from mogg.data.export import halved_paragraphs

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), "--questions", "pubmedqa_snippets",
                        "--corpus", "pubmedqa_snippets", "--halves", "--out", str(tmp_path / "halves")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _same(items, halved_paragraphs(docs), tmp_path / "halves")
    # bad input: one line, exit 2, nothing written (an unknown group, a path left unset, an override of no key)
    for args, says in ((["--questions", "nope", "--corpus", "pubmedqa_snippets"], "conf/questions/nope.yaml"),
                       (["--questions", "generic", "--corpus", "jsonl"], "questions.path"),
                       (["--questions", "pubmedqa", "--corpus", "pubmedqa_gold", "nokey.x=1"], "nokey.x"),
                       (["--questions", "pubmedqa", "--corpus", "pubmedqa_gold", "--shuffle", "-1"], "--shuffle"),
                       (["--questions", "pubmedqa", "--corpus", "pubmedqa_gold", "--paragraph-break", "tab"],
                        "--paragraph-break")):
        bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_generic.py"), *args, "--out",
                              str(tmp_path / "x")], capture_output=True, text=True)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
        assert not (tmp_path / "x").exists()
