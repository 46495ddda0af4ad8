"""A text's paragraphs (mogg.core.text.paragraphs): blank lines, line breaks that end sentences, headings joined to
their text; and a ladder stored under the rule before gets the current rule's arrays, never the stale ones."""

from __future__ import annotations

import numpy as np
import pytest

from mogg.core.text import (
    BLOCK_RULE,
    HEADING_WORDS,
    PARAGRAPH_RULE,
    QUESTION_WORDS,
    WRAP_CHARS,
    is_heading,
    paragraphs,
    text_blocks,
)
from mogg.data.corpus import DocumentList
from mogg.data.export import join_paragraphs
from mogg.data.records import Document
from mogg.ladders import MoGLadderBuilder
from mogg.ladders.sources import PARAGRAPH_STARTS, PARAGRAPHS, paragraph_starts
from mogg.ladders.store import build_ladder
from mogg.ladders.structural import StructuralLadderBuilder, parse_structure

SECTION = ["The symptoms of the disease include fever, a cough that lasts for weeks and a loss of weight.",
           "It is caused by a bacterium that spreads through the air when an infected person coughs or sneezes.",
           "Treatment is a course of several antibiotics taken every day for at least six months in all."]


def test_blank_lines_separate_paragraphs_crlf_included():
    assert paragraphs("\n\n".join(SECTION)) == SECTION
    # "\r\n" line endings: the blank line between "\r\n\r\n" is a break too (the rule before read one paragraph)
    assert [p.strip() for p in paragraphs("\r\n\r\n".join(SECTION))] == SECTION


def test_lines_that_end_sentences_are_paragraphs_hard_wrapped_prose_is_not():
    assert paragraphs("\n".join(SECTION)) == SECTION  # a page written one section per line
    words = " ".join(SECTION).split()
    wrapped = "\n".join(" ".join(words[i:i + 14]) for i in range(0, len(words), 14))  # 14 words a line, mid-sentence
    assert paragraphs(wrapped) == [wrapped]
    assert paragraphs("Short line\nanother short line") == ["Short line\nanother short line"]  # no prose line: one
    # sections that end on a reference, not a full stop, one per line: wider than prose is wrapped, so lines
    refs = [s.rstrip(".") + " (Ref: Harrison 19/e p 234, Robbins 9/e p 112, Park 23/e p 45 and more)" for s in SECTION]
    assert all(len(r) > WRAP_CHARS for r in refs) and paragraphs("\n".join(refs)) == refs
    assert all(len(line) < WRAP_CHARS for line in wrapped.split("\n"))  # the wrapped text above: narrower
    assert paragraphs("one line. no break") == ["one line. no break"] and paragraphs(" \n \n") == []


@pytest.mark.parametrize("heading", ["Symptoms", "Superficial relations:", "What are the symptoms of it?",
                                     "## Causes and risk factors of the disease, in more words than a heading has"])
def test_a_heading_belongs_to_the_paragraph_after_it(heading):
    assert is_heading(heading)
    for sep in ("\n\n", "\n"):
        text = sep.join([SECTION[0], heading, SECTION[1], SECTION[2]])
        assert paragraphs(text) == [SECTION[0], f"{heading}\n{SECTION[1]}", SECTION[2]], sep


def test_what_is_not_a_heading():
    assert not is_heading(SECTION[0]) and not is_heading("It is short.") and not is_heading("Two\nlines")
    assert not is_heading(" ".join(["word"] * (HEADING_WORDS + 1)))
    assert is_heading(" ".join(["word"] * HEADING_WORDS))
    # a last heading joins the paragraph before it; a text of headings alone is one paragraph
    assert paragraphs(f"{SECTION[0]}\n\nSee also") == [f"{SECTION[0]}\nSee also"]
    assert paragraphs("Symptoms\n\nCauses") == ["Symptoms\nCauses"]


@pytest.mark.parametrize("sep", ["\n\n", "\n"])
def test_a_page_written_in_headed_sections_reads_as_its_sections(sep):
    """A page that opens with a heading and holds two or more reads as its headed sections (rule 4): each heading's
    paragraphs together, joined by a blank line; a title alone, or a heading-like line inside prose, keeps the
    paragraphs (the rule before read every paragraph alone, so a section over two paragraphs was read half)."""
    headed = sep.join(["Symptoms", SECTION[0], SECTION[1], "Causes", SECTION[2], SECTION[0]])
    assert paragraphs(headed) == [f"Symptoms\n{SECTION[0]}\n\n{SECTION[1]}", f"Causes\n{SECTION[2]}\n\n{SECTION[0]}"]
    title = sep.join(["Tuberculosis", SECTION[0], SECTION[1], SECTION[2]])  # one heading: a title, not sections
    assert paragraphs(title) == [f"Tuberculosis\n{SECTION[0]}", SECTION[1], SECTION[2]]
    prose = sep.join([SECTION[0], "Symptoms include:", SECTION[1], "Causes", SECTION[2]])  # opens with prose
    assert paragraphs(prose) == [SECTION[0], f"Symptoms include:\n{SECTION[1]}", f"Causes\n{SECTION[2]}"]
    every = sep.join(["Symptoms", SECTION[0], "Causes", SECTION[1]])  # every paragraph headed: unchanged
    assert paragraphs(every) == [f"Symptoms\n{SECTION[0]}", f"Causes\n{SECTION[1]}"]
    units = ["Symptoms", SECTION[0], SECTION[1], "Causes", SECTION[2], SECTION[0]]
    assert paragraph_starts(headed, units).tolist() == [3]  # the units of "Causes" open the second section
    for d in join_paragraphs([Document("p", "", headed)], "\n") + join_paragraphs([Document("p", "", headed)], "\n\n"):
        assert [p.split() for p in paragraphs(d.content)] == [p.split() for p in paragraphs(headed)]  # an export's
    # a heading line written above its text in one block ("Symptoms\nFever ...") is not read so: explanations write
    # their own labels that way inside a section, and reading them as sections split more sections than it joined
    above = "\n\n".join([f"Symptoms\n{SECTION[0]}", SECTION[1], f"Causes\n{SECTION[2]}", SECTION[0]])
    assert len(paragraphs(above)) == 4
    # ... but a question is (a page of questions, each above its answer) ...
    asked = "\n\n".join([f"What is it?\n{SECTION[0]}", SECTION[1], f"What causes it?\n{SECTION[2]}"])
    assert [p.split() for p in paragraphs(asked)] == [f"What is it? {SECTION[0]} {SECTION[1]}".split(),
                                                      f"What causes it? {SECTION[2]}".split()]
    # ... and a Markdown heading is, so a page exported as Markdown reads as its sections
    markdown = "\n\n".join(["# Tuberculosis", f"## Symptoms\n{SECTION[0]}", SECTION[1], f"## Causes\n{SECTION[2]}"])
    assert [p.split() for p in paragraphs(markdown)] == [["#", "Tuberculosis", "##", "Symptoms", *SECTION[0].split(),
                                                          *SECTION[1].split()], ["##", "Causes", *SECTION[2].split()]]


LONG_QUESTION = ("What are the genetic changes related to familial hypophosphatemic rickets with hypercalciuria in early "
                 "childhood ?")  # 13 words, as a consumer-health page of questions and answers writes its headings


@pytest.mark.parametrize("sep", ["\n\n", "\n"])
def test_a_question_line_heads_its_answer_at_any_length(sep):
    """A page of questions and their answers: a question line longer than HEADING_WORDS heads its answer too. Under
    the rule before (rule 4) it read as a paragraph of the section above, which then took its answer as well: two
    questions' answers read as one section (docs/results.md, "Question lines of any length")."""
    assert len(LONG_QUESTION.split()) > HEADING_WORDS and is_heading(LONG_QUESTION)
    assert all(is_heading(f"{label} {LONG_QUESTION}") for label in ("Q:", "Question:", "Question 3.", "Q2)"))
    page = sep.join(["What is tuberculosis ?", SECTION[0], SECTION[1], LONG_QUESTION, SECTION[2],
                     "How do people catch it ?", SECTION[0]])
    assert [p.split() for p in paragraphs(page)] == [
        f"What is tuberculosis ? {SECTION[0]} {SECTION[1]}".split(), f"{LONG_QUESTION} {SECTION[2]}".split(),
        f"How do people catch it ? {SECTION[0]}".split()]
    # written above its answer in one block, it opens a section as a short question does
    above = "\n\n".join([f"What is tuberculosis ?\n{SECTION[0]}", f"{LONG_QUESTION}\n{SECTION[2]}", SECTION[1]])
    assert [p.split() for p in paragraphs(above)] == [f"What is tuberculosis ? {SECTION[0]}".split(),
                                                      f"{LONG_QUESTION} {SECTION[2]} {SECTION[1]}".split()]


def test_prose_that_ends_on_a_question_is_not_a_heading():
    """Only one interrogative sentence of at most QUESTION_WORDS words is a question line: prose of several sentences
    that ends on a question (as in a paper's aims), a long question, or a statement stays a paragraph, as under the
    rule before (every document of the protocol's corpora reads the same paragraphs and headings under both rules)."""
    for prose in ["We asked: (1) Is a fast-resorbable hydrogel able to deliver antibacterial compounds in vitro?",
                  "The patient was restarted on therapy. This led us to consider whether the drug can be stopped before "
                  "his growth has finished?",
                  "Is " + " ".join(["word"] * QUESTION_WORDS) + "?",
                  "Mutations in the SLC34A3 gene cause familial hypophosphatemic rickets with hypercalciuria in early "
                  "childhood."]:
        assert not is_heading(prose), prose
        assert paragraphs("\n\n".join([SECTION[0], prose, SECTION[1]])) == [SECTION[0], prose, SECTION[1]]


def test_the_structural_ladder_reads_the_same_blocks():
    """MAL's sections: a heading (one that ends with "?" or ":" too) opens a section, on blank lines or lines."""
    for sep in ("\n\n", "\n"):
        text = sep.join(["What are the symptoms?", SECTION[0], "Causes:", SECTION[1], SECTION[2]])
        assert text_blocks(text) == ["What are the symptoms?", SECTION[0], "Causes:", SECTION[1], SECTION[2]]
        assert parse_structure(text) == [("What are the symptoms?", [SECTION[0]]), ("Causes:", SECTION[1:])]
    # its key names the blocks' rule, not the paragraphs': rule 4 joined paragraphs and kept stored MAL ladders; rule 5
    # reads question lines as headings, which the blocks read too (BLOCK_RULE 4); rule 6 joins a list's blocks (5);
    # rule 7 ends a line's block on an inline list (6)
    assert StructuralLadderBuilder().config()["paragraph_rule"] == BLOCK_RULE == 6 != PARAGRAPH_RULE == 7
    # a list is one block with its lead-in, so the structural ladder reads it as one paragraph, not as headings
    listed = "\n".join(["Causes:", SECTION[1], "Signs may include:", "- fever", "- a cough", SECTION[2]])
    assert parse_structure(listed) == [("Causes:", [SECTION[1], "Signs may include: - fever - a cough", SECTION[2]])]


LIST = ["- loss of side vision", "- blurred vision", "\u2022 halos around lights"]
LEAD = "Signs may include:"


@pytest.mark.parametrize("sep", ["\n\n", "\n"])
def test_a_list_stays_with_the_paragraph_above_it(sep):
    """A list's short items (a bullet, at most HEADING_WORDS words, no closing stop) are not headings: they join the
    paragraph or lead-in above them, one a line or blank lines between them (rule 6). Under rule 5 each item read as
    a heading and went, with the lead-in, to the paragraph after the list: the next section took this one's list
    (docs/results.md, "A page's lists")."""
    assert not any(is_heading(item) for item in LIST) and is_heading(LEAD)
    page = sep.join([SECTION[0], LEAD, *LIST, SECTION[1], SECTION[2]])
    assert [p.split() for p in paragraphs(page)] == [SECTION[0].split(), f"{LEAD} {' '.join(LIST)}".split(),
                                                     SECTION[1].split(), SECTION[2].split()]
    after_prose = sep.join([SECTION[0], *LIST, SECTION[1]])  # a list straight after a paragraph continues it
    assert [p.split() for p in paragraphs(after_prose)] == [f"{SECTION[0]} {' '.join(LIST)}".split(), SECTION[1].split()]
    # a page of questions: the list stays in its question's section, the next question keeps its own
    asked = sep.join(["What are the signs of it?", SECTION[0], LEAD, *LIST, "What causes it?", SECTION[2]])
    assert [p.split() for p in paragraphs(asked)] == [
        f"What are the signs of it? {SECTION[0]} {LEAD} {' '.join(LIST)}".split(), f"What causes it? {SECTION[2]}".split()]
    # a longer item after short ones is the same list; one under a heading opens that heading's paragraph
    longer = f"- {SECTION[1]}"
    assert paragraphs(sep.join([SECTION[0], *LIST, longer])) == [f"{SECTION[0]}\n" + "\n".join([*LIST, longer])]
    assert [p.split() for p in paragraphs(sep.join([SECTION[0], "Symptoms", *LIST]))] == [
        SECTION[0].split(), f"Symptoms {' '.join(LIST)}".split()]


def test_what_stays_as_the_rule_before_read_it():
    """Lines that are not a list's short items read as under rule 5: an enumerated label ("3. Genetic analysis", as
    explanations number their sub-headings) and an item ending on ":" head what follows them; a bulleted line that ends
    a statement ("\u2022 Poultry trade and market.", a paper's sub-heading) or runs longer than a heading stays a
    paragraph of its own, as do two such bulleted paragraphs."""
    for label in ["3. Genetic analysis", "b) Features of the mandible", "- Hurt cry:"]:
        assert is_heading(label)
        assert paragraphs("\n".join([SECTION[0], label, SECTION[1]])) == [SECTION[0], f"{label}\n{SECTION[1]}"]
    bullets = [f"\u2022 {SECTION[1]}", "\u2022 Poultry trade and market.", f"\u2022 {SECTION[2]}"]
    assert paragraphs("\n\n".join([SECTION[0], *bullets])) == [SECTION[0], *bullets]
    assert paragraphs("- fever\n- cough") == ["- fever\n- cough"]  # a list alone: one paragraph


def test_a_headings_units_open_its_section():
    """The unit of a heading opens the paragraph of its section (paragraph_starts), so reading the best candidate's
    paragraph reads the heading with its text, never the heading alone."""
    text = "\n".join(["Symptoms", SECTION[0], "Causes", SECTION[1]])
    units = ["Symptoms", SECTION[0], "Causes", SECTION[1]]
    assert paragraph_starts(text, units).tolist() == [2]


def test_a_ladder_stored_under_the_rule_before_gets_this_rules_arrays(tmp_path, monkeypatch):
    """The arrays are named by the rule's version: a ladder saved with the rule before's arrays (blank lines alone,
    under their old names) reads this rule's, derived once, not the stale ones."""
    import mogg.ladders.store as store

    docs = [Document(f"page-{i}", "", "\n".join(["Symptoms", SECTION[0], "Causes", SECTION[1], SECTION[2]]))
            for i in range(3)]
    builder = MoGLadderBuilder(n_levels=2, document_level=True)
    built, _ = build_ladder(DocumentList(docs), builder, tmp_path / "new")
    assert built.doc_paragraphs().tolist() == [2, 2, 2]  # headed sections: "Causes" holds the last two paragraphs
    want = built.paragraph_starts().tolist()
    assert len(want) == 3

    def before(ladder, documents):  # the rule before: no blank line, one paragraph each, under the old names
        ladder.arrays["doc_paragraphs"] = np.ones(len(docs), dtype=np.int64)
        ladder.arrays["paragraph_starts"] = np.zeros(0, dtype=np.int64)
        return ladder
    monkeypatch.setattr(store, "with_structure", before)
    build_ladder(DocumentList(docs), builder, tmp_path / "old")
    monkeypatch.undo()
    saved = np.load(next((tmp_path / "old" / "ladder").iterdir()) / "arrays.npz")
    assert "doc_paragraphs" in saved.files and PARAGRAPHS not in saved.files
    again, _ = build_ladder(DocumentList(docs), builder, tmp_path / "old")
    assert again.doc_paragraphs().tolist() == [2, 2, 2] and again.paragraph_starts().tolist() == want
    assert (tmp_path / "old" / PARAGRAPH_STARTS).is_dir()


def test_a_page_reads_the_same_sections_however_it_breaks_them(tmp_path):
    """One section per line, per blank-line block, or per "\\r\\n" block: the ladder's paragraph starts and counts are
    the same, so the page rule reads the same section (the rule before read the first as one paragraph: a page
    whose sections are lines fell back to a fifth of the page)."""
    def pages(sep):
        return [Document(f"page-{i}", "", sep.join(SECTION[i % 3:] + SECTION[:i % 3])) for i in range(4)]
    builder = MoGLadderBuilder(n_levels=2, document_level=True)
    got = []
    for k, sep in enumerate(("\n\n", "\n", "\r\n\r\n")):
        ladder, _ = build_ladder(DocumentList(pages(sep)), builder, tmp_path / str(k))
        got.append((ladder.doc_paragraphs().tolist(), ladder.paragraph_starts().tolist()))
    assert got[0][0] == [3, 3, 3, 3] and len(got[0][1]) == 8 and got[1] == got[0] and got[2] == got[0]



def test_a_lists_items_are_units_of_their_own():
    """The ladders' units (mogg.core.text.split_units, UNIT_RULE 1 and on): a line that opens a list item starts a unit, so a
    list without full stops is its items, not one unit up to max_sentence_tokens (the sentence splitter read "Signs
    may include: - loss of side vision - ..." as one). A text without such a line splits as split_sentences splits it,
    and a hyphen inside a line ("Bupivacaine - local anaesthetic") starts nothing."""
    from mogg.core.text import UNIT_RULE, split_sentences, split_units

    text = "\n".join([SECTION[0] + " " + SECTION[1], LEAD, *LIST, SECTION[2]])
    assert split_sentences(text) == [SECTION[0], SECTION[1], " ".join([LEAD, *LIST, SECTION[2]])]
    assert split_units(text) == [SECTION[0], SECTION[1], LEAD, *LIST[:2], f"{LIST[2]} {SECTION[2]}"]
    for plain in ["\n\n".join(SECTION), "Bupivacaine - local anaesthetic\nNeostigmine - reversal agent", SECTION[0]]:
        assert split_units(plain) == split_sentences(plain)
    ten = " ".join(["w"] * 10)  # an item longer than max_tokens is cut as a sentence is
    assert split_units("") == [] and split_units(f"{SECTION[0]}\n- {ten} {ten}", max_tokens=10) == [
        *split_sentences(SECTION[0], max_tokens=10), f"- {ten}", ten]
    # the MoG ladder's units are these, and its key names the rule, so a ladder stored before is rebuilt
    units = MoGLadderBuilder(n_levels=2).units([Document("p", "", text)])
    assert list(units.text) == split_units(text)
    assert MoGLadderBuilder().config()["unit_rule"] == UNIT_RULE == 2


def test_a_list_written_inline_is_its_items():
    """UNIT_RULE 2: a list whose line breaks were lost ("Signs may include: - loss of side vision - blurred vision -
    halos") is its lead-in and items, as written one a line; it needs a lead-in that ends on a stop or ":" and three
    items (INLINE_ITEMS), so a hyphen between words, a range or two hyphenated pairs start nothing (under rule 1 the
    whole list was one unit with its lead-in)."""
    from mogg.core.text import INLINE_ITEMS, split_sentences, split_units

    inline = " ".join([SECTION[0], LEAD, *(it.replace("\u2022", "-") for it in LIST)])
    items = [SECTION[0], LEAD, *(it.replace("\u2022", "-") for it in LIST)]
    assert split_sentences(inline) == [SECTION[0], " ".join(items[1:])]
    assert split_units(inline) == items == split_units("\n".join(items))
    assert split_units(f"{inline}. {SECTION[2]}")[-2:] == [f"{items[-1]}.", SECTION[2]]  # the last item ends at a stop
    assert split_units(f"{SECTION[0]} - a - b - c")[0] == f"{SECTION[0]}".rstrip(".") + "." and INLINE_ITEMS == 3
    assert split_units("Doses: - - 5 mg daily - 10 mg weekly - 20 mg") == [  # a doubled bullet opens one item
        "Doses:", "- - 5 mg daily", "- 10 mg weekly", "- 20 mg"]
    for plain in ["When there is an Arterio - venous malformation, it is Klippel - Trenaunay - Weber syndrome.",
                  "Bupivacaine - Local anesthetic Dexmedetomidine - Anesthesia adjuvant Neostigmine - Reversal agent",
                  "Signs: - fever - a cough", "Normal 3.5 \u2013 5.0 meq/L: \u2013 a \u2013 b \u2013 c", SECTION[0]]:
        assert split_units(plain) == split_sentences(plain), plain


def test_a_section_a_line_that_ends_on_an_inline_list_ends_its_paragraph():
    """PARAGRAPH_RULE 7: a page written one section a line, each list on its lead-in's line ("... Signs may include: -
    loss of side vision - blurred vision - halos"), reads as its sections, as with blank lines between them. Its
    lines end on an item, not a stop, so under rule 6 too few of them ended a sentence and the page read as one
    paragraph (91 of the 443 inline list pages written so). Hard-wrapped prose still reads as one paragraph."""
    sections = ["It spreads through the air when an infected person coughs. Signs may include: - fever - a cough - "
                "weight loss", "It is treated with antibiotics for six months or longer. Side effects are: - nausea - "
                "a rash - yellow skin", SECTION[2]]
    assert all(len(s) < WRAP_CHARS for s in sections)  # narrower than WRAP_CHARS: the lines' ends decide
    assert paragraphs("\n".join(sections)) == sections == paragraphs("\n\n".join(sections))
    assert text_blocks("\n".join(sections)) == sections and PARAGRAPH_RULE == 7 and BLOCK_RULE == 6
    words = " ".join(sections).split()
    wrapped = "\n".join(" ".join(words[i:i + 14]) for i in range(0, len(words), 14))  # mid-sentence, mid-list
    assert paragraphs(wrapped) == [wrapped]


def test_every_ladder_reads_a_lists_items_as_units():
    """RAPTOR's leaves, MAL's paragraph units and the semantic chunker's sentences are split_units' units, as MoG's are,
    and each key names the rule (they split with split_sentences before: a whole list one "sentence", cut at the leaf
    size mid-item, and a paragraph's list one MAL unit)."""
    from fakes import SeededEncoder

    from mogg.core.text import UNIT_RULE, split_units
    from mogg.ladders.raptor import RaptorLadderBuilder
    from mogg.ladders.semantic import SemanticChunker
    from mogg.ladders.summarizers import ExtractiveSummarizer

    text = "\n".join([SECTION[0], LEAD, *LIST, SECTION[2]])
    # MAL: the list's paragraph (rule 6 keeps it with its lead-in) is its lead-in and items, one unit each
    mal = StructuralLadderBuilder(multi_sentences=1).build([Document("p", "", text)])
    assert list(mal.units.text) == [SECTION[0], LEAD, *LIST, SECTION[2]]
    # RAPTOR: leaves of at most 12 tokens pack whole items (the list was one sentence, cut every 12 tokens mid-item)
    enc = SeededEncoder(8, {"kind": "seeded"})
    raptor = RaptorLadderBuilder(enc, ExtractiveSummarizer(), leaf_tokens=12)
    leaves = list(raptor.units([Document("p", "", text)]).text)
    assert f"{LIST[0]} {LIST[1]}" in leaves and " ".join(leaves) == " ".join(text.split())
    # the semantic chunker encodes these units as its sentences
    seen: list[str] = []

    class Recording(SeededEncoder):
        def encode(self, texts, show_progress=False):
            seen.extend(texts)
            return super().encode(texts, show_progress)

    chunks = SemanticChunker(Recording(8, {"kind": "seeded"}), min_sentences=1).chunk_texts([text])
    assert seen == split_units(text) == [SECTION[0], LEAD, *LIST[:2], f"{LIST[2]} {SECTION[2]}"]
    assert " ".join(chunks[0]) == " ".join(text.split())
    for config in (StructuralLadderBuilder().config(), raptor.config(), SemanticChunker(enc).config()):
        assert config["unit_rule"] == UNIT_RULE
