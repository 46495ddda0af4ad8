"""Tests for mogg.data: corpus sources, question sets, and the MIRAGE prepare command."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mogg.data.corpus import (
    Corpus,
    MedMCQAExplanations,
    MedRAGJsonl,
    PlainText,
    PubMedQAContexts,
)
from mogg.data.errors import DataError
from mogg.data.files import file_fingerprint
from mogg.data.prepare import (
    MIRAGE_FILES,
    RemoteFile,
    copy_mirage,
    download,
    fetch_mirage,
    main,
    mirage_dir,
    verify_mirage,
)
from mogg.data.qa import GenericQA, MedMCQAExplained, MirageBenchmark, PubMedQAStar, strip_answer_statement
from mogg.data.records import Document, QAItem

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
MIRAGE = SHARED_DATA / "mirage"
BENCHMARK = MIRAGE / "benchmark.json"
PUBMEDQA_RAW = MIRAGE / "rawdata" / "pubmedqa" / "data" / "test_set.json"
MEDMCQA_DEV = MIRAGE / "rawdata" / "medmcqa" / "data" / "dev.json"

needs_mirage = pytest.mark.skipif(
    not BENCHMARK.is_file(),
    reason=f"reference MIRAGE copy not found at {MIRAGE} (expected a shared/ directory beside the clone)",
)


def write_lines(path: Path, lines: list[str | bytes]) -> Path:
    path.write_bytes(b"".join((ln if isinstance(ln, bytes) else ln.encode()) + b"\n" for ln in lines))
    return path


def chunk(doc_id: str, content: str = "some text", title: str | None = "T") -> str:
    obj = {"id": doc_id, "content": content}
    if title is not None:
        obj["title"] = title
    return json.dumps(obj)


# ---------------------------------------------------------------------------------------------
# Errors


def test_data_error_message_and_pickle():
    import pickle

    err = DataError("a/b.jsonl", "bad thing", 7)
    assert str(err) == "a/b.jsonl:7: bad thing"
    assert (err.path, err.line, err.what) == ("a/b.jsonl", 7, "bad thing")
    assert str(DataError("a/b.json", "missing")) == "a/b.json: missing"
    assert str(pickle.loads(pickle.dumps(err))) == "a/b.jsonl:7: bad thing"
    assert isinstance(err, ValueError)


# ---------------------------------------------------------------------------------------------
# MedRAG jsonl


def test_medrag_reads_and_defaults_title(tmp_path):
    f = write_lines(tmp_path / "c.jsonl", [chunk("a", "alpha"), "", "   ", chunk("b", "beta", title=None)])
    docs = list(MedRAGJsonl(str(f)))
    assert docs == [Document("a", "T", "alpha"), Document("b", "", "beta")]
    located = list(MedRAGJsonl(f).located())
    assert [(p, ln) for _, p, ln in located] == [(str(f), 1), (str(f), 4)]


def test_medrag_bad_json_names_line_3(tmp_path):
    f = write_lines(tmp_path / "c.jsonl", [chunk("a"), chunk("b"), '{"id": "c", "content": '])
    with pytest.raises(DataError) as exc:
        list(MedRAGJsonl(str(f)))
    assert exc.value.line == 3
    assert str(exc.value).startswith(f"{f}:3: invalid JSON")


def test_medrag_blank_lines_keep_numbering(tmp_path):
    f = write_lines(tmp_path / "c.jsonl", [chunk("a"), "", "", "not json"])
    with pytest.raises(DataError, match=r"c\.jsonl:4: invalid JSON"):
        list(MedRAGJsonl(str(f)))


def test_medrag_bad_utf8_names_line(tmp_path):
    f = write_lines(tmp_path / "c.jsonl", [chunk("a"), b'{"id": "b", "content": "caf\xff"}'])
    with pytest.raises(DataError) as exc:
        list(MedRAGJsonl(str(f)))
    assert exc.value.line == 2
    assert str(exc.value).startswith(f"{f}:2: invalid UTF-8")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "title": "t"}', "missing required field 'content'"),
        ('{"content": "x"}', "missing required field 'id'"),
        ('{"id": 5, "content": "x"}', "field 'id' must be a string, got int"),
        ('{"id": "a", "content": "x", "title": 3}', "field 'title' must be a string"),
        ('{"id": "a", "content": "  "}', "field 'content' is empty"),
        ('["a", "b"]', "expected a JSON object, got list"),
    ],
)
def test_medrag_field_validation(tmp_path, line, message):
    f = write_lines(tmp_path / "c.jsonl", [chunk("ok"), line])
    with pytest.raises(DataError) as exc:
        list(MedRAGJsonl(str(f)))
    assert exc.value.line == 2
    assert message in str(exc.value)


def test_medrag_directory_and_glob(tmp_path):
    write_lines(tmp_path / "b.jsonl", [chunk("b1")])
    write_lines(tmp_path / "a.jsonl", [chunk("a1"), chunk("a2")])
    (tmp_path / "notes.txt").write_text("ignored")
    assert [d.id for d in MedRAGJsonl(str(tmp_path))] == ["a1", "a2", "b1"]
    assert [d.id for d in MedRAGJsonl(str(tmp_path / "b*.jsonl"))] == ["b1"]
    assert [d.id for d in MedRAGJsonl([str(tmp_path / "b.jsonl"), str(tmp_path / "a.jsonl")])] == [
        "b1",
        "a1",
        "a2",
    ]
    with pytest.raises(DataError, match="no such file"):
        list(MedRAGJsonl(str(tmp_path / "missing.jsonl")))
    with pytest.raises(DataError, match="matches no files"):
        list(MedRAGJsonl(str(tmp_path / "z*.jsonl")))


def test_source_fingerprint(tmp_path):
    f = write_lines(tmp_path / "c.jsonl", [chunk("a")])
    fp = MedRAGJsonl(str(f)).fingerprint()
    assert fp["type"] == "MedRAGJsonl"
    assert fp["params"] == {"paths": [str(f)]}
    (entry,) = fp["files"]
    assert entry["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert entry["size"] == f.stat().st_size
    assert entry["mtime_ns"] == f.stat().st_mtime_ns
    assert entry["path"] == str(f.absolute())


# ---------------------------------------------------------------------------------------------
# Plain text and Corpus


def test_plain_text(tmp_path):
    (tmp_path / "one.txt").write_text("First document.")
    (tmp_path / "two.txt").write_bytes(b"line one\nline \xfe two")
    with pytest.raises(DataError) as exc:
        list(PlainText(str(tmp_path)))
    assert str(exc.value).startswith(f"{tmp_path / 'two.txt'}:2: invalid UTF-8")
    (tmp_path / "two.txt").write_text("Second.")
    assert list(PlainText(str(tmp_path))) == [
        Document("one", "", "First document."),
        Document("two", "", "Second."),
    ]


def test_corpus_duplicate_id_across_two_files(tmp_path):
    f1 = write_lines(tmp_path / "a.jsonl", [chunk("x"), chunk("dup")])
    f2 = write_lines(tmp_path / "b.jsonl", [chunk("y"), chunk("z"), chunk("dup")])
    corpus = Corpus([MedRAGJsonl(str(f1)), MedRAGJsonl(str(f2))])
    with pytest.raises(DataError) as exc:
        corpus.documents()
    msg = str(exc.value)
    assert msg.startswith(f"{f2}:3: duplicate document id 'dup'")
    assert f"first at {f1}:2" in msg
    assert f"MedRAGJsonl(paths=['{f1}'])" in msg and f"MedRAGJsonl(paths=['{f2}'])" in msg
    # The same inside one source spanning both files.
    with pytest.raises(DataError, match=r"b\.jsonl:3: duplicate document id 'dup': first at .*a\.jsonl:2"):
        Corpus([MedRAGJsonl([str(f1), str(f2)])]).documents()


def test_corpus_empty(tmp_path):
    f = write_lines(tmp_path / "empty.jsonl", ["", "  "])
    with pytest.raises(DataError, match="corpus is empty"):
        Corpus([MedRAGJsonl(str(f))]).documents()
    with pytest.raises(DataError, match="corpus is empty"):
        len(Corpus([]))


def test_corpus_concat_cache_and_fingerprint(tmp_path):
    f = write_lines(tmp_path / "a.jsonl", [chunk("a"), chunk("b")])
    (tmp_path / "t.txt").write_text("Plain.")
    corpus = Corpus([MedRAGJsonl(str(f)), PlainText(str(tmp_path / "t.txt")), [Document("m", "", "mem")]])
    docs = corpus.documents()
    assert [d.id for d in docs] == ["a", "b", "t", "m"]
    assert corpus.documents() is docs
    assert len(corpus) == 4
    fp = corpus.fingerprint()
    assert [s["type"] for s in fp["sources"]] == ["MedRAGJsonl", "PlainText", "list"]
    assert fp["sources"][1]["files"][0]["sha256"] == hashlib.sha256(b"Plain.").hexdigest()


@needs_mirage
def test_real_pubmedqa_contexts_and_medmcqa_explanations():
    pubmed = list(PubMedQAContexts(str(PUBMEDQA_RAW)))
    assert len(pubmed) == 500
    assert pubmed[0].id == "12377809"
    assert pubmed[0].content.startswith("Dyschesia can be provoked by inappropriate defecation movements.")
    raw = json.loads(PUBMEDQA_RAW.read_text())
    assert pubmed[0].content == " ".join(raw["12377809"]["CONTEXTS"])

    exps = list(MedMCQAExplanations(str(MEDMCQA_DEV), min_chars=40))
    assert len(exps) == 2170
    assert all(d.id.startswith("medmcqa:") and len(d.content) >= 40 for d in exps)
    assert len(list(MedMCQAExplanations(str(MEDMCQA_DEV), min_chars=1000))) < 2170

    corpus = Corpus([PubMedQAContexts(str(PUBMEDQA_RAW)), MedMCQAExplanations(str(MEDMCQA_DEV))])
    assert len(corpus) == 2670
    fp = corpus.fingerprint()["sources"][1]
    assert fp["params"] == {"path": str(MEDMCQA_DEV), "min_chars": 40}
    assert fp["files"][0]["sha256"] == "a2b5f53890f4e742b728378fb847bc5338088d48ea01218676379f587270af31"


@pytest.mark.parametrize("text,expected", [
    ("Ans-a. The oncotic pressure", "The oncotic pressure"),
    ("Answer- A. Glycogen synthesisLow insulin", "Glycogen synthesisLow insulin"),
    ("Ans. is 'c' i.e., Glycogen", "Glycogen"),
    ("ANS. B. Renal", "Renal"),
    ("Answer DThyrotoxic crisis", "Thyrotoxic crisis"),  # letter glued to the next capitalised word
    ("Option A- Broad QRS", "Broad QRS"),
    ("(b) Salbutamol", "Salbutamol"),
    ("Ans.B. More common in females", "More common in females"),
    ("Answer- D (Medullary collecting duct)", "(Medullary collecting duct)"),
    ("Answer: . B. HIV reverse transcriptase", "HIV reverse transcriptase"),
    ("Option 1: Placenta acts as a barrier", "Placenta acts as a barrier"),
    ("Ans. 45XO Turner's syndrome", "Ans. 45XO Turner's syndrome"),
    ("Ans: Amyloid is deposited", "Ans: Amyloid is deposited"),  # no option letter: kept whole
    ("A. Something else", "Something else"),
    ("A patient with fever", "A patient with fever"),
    ("Fast anterograde transport", "Fast anterograde transport"),
])
def test_strip_answer_statement(text, expected):
    assert strip_answer_statement(text) == expected


@needs_mirage
def test_medmcqa_explained_gold_evidence():
    items = MedMCQAExplained(str(BENCHMARK), str(MEDMCQA_DEV)).load()
    assert len(items) == 2170
    corpus_ids = {d.id for d in MedMCQAExplanations(str(MEDMCQA_DEV), min_chars=40)}
    assert all(it.gold_doc_ids[0] in corpus_ids for it in items)  # every gold document is in the corpus
    assert all(it.dataset == "medmcqa" and it.options and it.answer in it.options for it in items)
    first = {it.id: it for it in items}["b944ada9-d776-4c2a-9180-3ae5f393f72d"]
    assert first.evidence_text.startswith("The oncotic pressure")  # "Ans-a. " stripped
    # no evidence opens with an answer statement any more
    import re

    lead = re.compile(r"^\W*(ans(wer)?|option)\b\W*(is\W*)?\(?[a-d1-4]\b", re.IGNORECASE)
    assert sum(bool(lead.match(it.evidence_text)) for it in items) == 0
    fewer = MedMCQAExplained(str(BENCHMARK), str(MEDMCQA_DEV), min_chars=400, limit=10).load()
    assert len(fewer) == 10 and all(len(MEDMCQA_by_id()[it.id]) >= 400 for it in fewer)


def MEDMCQA_by_id() -> dict[str, str]:
    return {json.loads(line)["id"]: (json.loads(line).get("exp") or "").strip() for line in MEDMCQA_DEV.open()}


# ---------------------------------------------------------------------------------------------
# MIRAGE question sets


@needs_mirage
def test_mirage_counts():
    items = MirageBenchmark(str(BENCHMARK)).load()
    counts: dict[str, int] = {}
    for it in items:
        counts[it.dataset] = counts.get(it.dataset, 0) + 1
    assert counts == {"medqa": 1273, "medmcqa": 4183, "pubmedqa": 500, "bioasq": 618, "mmlu": 1089}
    assert len(items) == 7663
    assert len({it.id for it in items}) == 7663
    assert all(it.answer in it.options for it in items)
    assert items[0].id == "0000" and items[0].answer == "B"
    bioasq = next(it for it in items if it.dataset == "bioasq")
    assert bioasq.id == "6402c910201352f04a00000c" and bioasq.gold_doc_ids == ["34687634"]


@needs_mirage
def test_mirage_select_and_limit():
    items = MirageBenchmark(str(BENCHMARK), datasets=["mmlu"], limit=3).load()
    assert [it.id for it in items] == ["anatomy-000", "anatomy-001", "anatomy-002"]
    both = MirageBenchmark(str(BENCHMARK), datasets=["mmlu", "medqa"], limit=2000).load()
    assert len(both) == 2000 and both[0].dataset == "medqa" and both[-1].dataset == "mmlu"
    with pytest.raises(DataError) as exc:
        MirageBenchmark(str(BENCHMARK), datasets=["medqa", "nope"]).load()
    assert "unknown dataset(s) nope; available: medqa, medmcqa, pubmedqa, bioasq, mmlu" in str(exc.value)


def test_mirage_duplicate_qid_across_datasets(tmp_path):
    q = {"question": "Q?", "options": {"A": "yes", "B": "no"}, "answer": "A"}
    f = tmp_path / "benchmark.json"
    f.write_text(json.dumps({"one": {"q1": q}, "two": {"q2": q, "q1": q}}))
    with pytest.raises(DataError, match="question id 'q1' is in both 'one' and 'two'"):
        MirageBenchmark(str(f)).load()
    assert [it.id for it in MirageBenchmark(str(f), datasets=["two"]).load()] == ["q2", "q1"]
    f.write_text(json.dumps({"one": {"q1": dict(q, answer="C")}}))
    with pytest.raises(DataError, match="one/q1: answer 'C' is not among options A, B"):
        MirageBenchmark(str(f)).load()


@needs_mirage
def test_pubmedqa_star():
    items = PubMedQAStar(str(BENCHMARK), str(PUBMEDQA_RAW)).load()
    assert len(items) == 500
    assert all(it.gold_evidence and all(e.strip() for e in it.gold_evidence) for it in items)
    assert all(it.gold_doc_ids == [it.id] and it.label for it in items)
    first = items[0]
    assert first.id == "12377809" and first.dataset == "pubmedqa"
    assert first.options == {"A": "yes", "B": "no", "C": "maybe"} and first.answer == "A"
    assert len(first.gold_evidence) == 3
    assert first.label.startswith("Linear anorectal endosonography demonstrated")
    assert len(PubMedQAStar(str(BENCHMARK), str(PUBMEDQA_RAW), limit=7).load()) == 7


@needs_mirage
def test_snippet_stand_in_splits_each_abstract_into_its_contexts_and_names_them_gold():
    """The snippet stand-in (heldout=snippets): every PubMedQA* context its own document <PMID>-<k>,
    each question's gold_doc_ids exactly its contexts' documents (its evidence spans several), the
    texts unchanged; the abstracts' fingerprint params are those of before (their artifacts' keys)."""
    raw = json.loads(PUBMEDQA_RAW.read_text())
    docs = list(PubMedQAContexts(str(PUBMEDQA_RAW), sections=True))
    assert len(docs) == sum(sum(bool(c.strip()) for c in e["CONTEXTS"]) for e in raw.values()) > 1500
    by_id = {d.id: d.content for d in docs}
    assert by_id["12377809-0"] == raw["12377809"]["CONTEXTS"][0].strip() and "12377809" not in by_id
    items = PubMedQAStar(str(BENCHMARK), str(PUBMEDQA_RAW), section_ids=True).load()
    for it in items:
        assert it.gold_doc_ids and all(g in by_id for g in it.gold_doc_ids)
        assert sorted(by_id[g] for g in it.gold_doc_ids) == sorted(e.strip() for e in it.gold_evidence if e.strip())
    assert sum(len(it.gold_doc_ids) > 1 for it in items) > 450
    assert PubMedQAContexts(str(PUBMEDQA_RAW)).params() == {"path": str(PUBMEDQA_RAW)}
    assert PubMedQAStar(str(BENCHMARK), str(PUBMEDQA_RAW)).params()["limit"] is None
    assert "section_ids" not in PubMedQAStar(str(BENCHMARK), str(PUBMEDQA_RAW)).params()
    with pytest.raises(ValueError, match="exclude each other"):
        PubMedQAContexts(str(PUBMEDQA_RAW), structured=True, sections=True)


def test_pubmedqa_l_leaves_pubmedqa_star_out_and_its_gold_ids_are_its_documents(tmp_path):
    """The second snippet shape (data=snippets_l): PubMedQA-L's questions whose PMIDs the exclude file
    (PubMedQA*'s test set) does not hold, options and answer as benchmark.json writes PubMedQA*, gold ids
    the corpus's section documents (an empty context skipped, its number kept); the corpus leaves the
    same abstracts out; a decision outside yes/no/maybe, or every PMID excluded, is refused."""
    from mogg.data.qa import PubMedQALabelled

    def entry(q, ctx, dec):
        return {"QUESTION": q, "CONTEXTS": ctx, "LABELS": ["A"] * len(ctx), "final_decision": dec, "LONG_ANSWER": "L."}
    raw = {"1": entry("Q one?", ["a b", "  ", "c d"], "yes"), "2": entry("Q two?", ["e f"], "maybe"),
           "3": entry("Q three?", ["g h"], "no")}
    f, test = tmp_path / "ori_pqal.json", tmp_path / "test_set.json"
    f.write_text(json.dumps(raw))
    test.write_text(json.dumps({"3": raw["3"]}))
    items = PubMedQALabelled(str(f), str(test), section_ids=True).load()
    assert [(it.id, it.answer, it.answer_text) for it in items] == [("1", "A", "yes"), ("2", "C", "maybe")]
    assert items[0].options == {"A": "yes", "B": "no", "C": "maybe"} and items[0].label == "L."
    assert items[0].gold_doc_ids == ["1-0", "1-2"] and items[1].gold_doc_ids == ["2-0"]
    docs = {d.id: d.content for d in PubMedQAContexts(str(f), sections=True, exclude_path=str(test))}
    assert sorted(docs) == ["1-0", "1-2", "2-0"] and docs["1-2"] == "c d"
    assert PubMedQALabelled(str(f), None).load()[2].gold_doc_ids == ["3"]
    assert "exclude_path" not in PubMedQAContexts(str(f)).params()
    assert str(test) in map(str, PubMedQAContexts(str(f), exclude_path=str(test)).files())
    assert len(PubMedQALabelled(str(f), str(test), limit=1).load()) == 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"4": entry("Q?", ["x"], "perhaps")}))
    with pytest.raises(DataError, match="perhaps"):
        PubMedQALabelled(str(bad)).load()
    with pytest.raises(DataError, match="every PMID is excluded"):
        PubMedQALabelled(str(test), str(test)).load()


def test_abstract_pages_end_in_the_conclusion_that_is_the_gold_evidence(tmp_path):
    """The abstract-page shape (questions=pubmedqa_l_pages corpus=pubmedqa_l_pages): each abstract one page
    [PMID], its non-empty contexts then its conclusion, each a paragraph; each question's gold evidence the
    conclusion, its last paragraph, gold id the page; the excluded abstracts left out of both; a missing
    conclusion, an unknown evidence kind and conclusion with section ids are refused."""
    from mogg.data.qa import PubMedQALabelled

    def entry(q, ctx, conclusion):
        return {"QUESTION": q, "CONTEXTS": ctx, "final_decision": "yes", "LONG_ANSWER": conclusion}
    raw = {"1": entry("Q one?", ["a b", "  ", "c d"], " The end. "), "2": entry("Q two?", ["e f"], "So it is."),
           "3": entry("Q three?", ["g h"], "No.")}
    f, test = tmp_path / "ori_pqal.json", tmp_path / "test_set.json"
    f.write_text(json.dumps(raw))
    test.write_text(json.dumps({"3": raw["3"]}))
    pages = {d.id: d.content for d in PubMedQAContexts(str(f), page=True, exclude_path=str(test))}
    assert pages == {"1": "a b\n\nc d\n\nThe end.", "2": "e f\n\nSo it is."}
    items = PubMedQALabelled(str(f), str(test), evidence="conclusion").load()
    assert [(it.id, it.gold_doc_ids, it.gold_evidence) for it in items] == [
        ("1", ["1"], ["The end."]), ("2", ["2"], ["So it is."])]
    assert all(pages[it.id].split("\n\n")[-1] == it.gold_evidence[0] for it in items)
    assert PubMedQALabelled(str(f), evidence="conclusion").params()["evidence"] == "conclusion"
    assert "evidence" not in PubMedQALabelled(str(f)).params() and "page" not in PubMedQAContexts(str(f)).params()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"4": entry("Q?", ["x"], "  ")}))
    with pytest.raises(DataError, match="LONG_ANSWER"):
        PubMedQALabelled(str(bad), evidence="conclusion").load()
    with pytest.raises(DataError, match="LONG_ANSWER"):
        list(PubMedQAContexts(str(bad), page=True))
    with pytest.raises(ValueError, match="not one of"):
        PubMedQALabelled(str(f), evidence="abstract")
    with pytest.raises(ValueError, match="section_ids"):
        PubMedQALabelled(str(f), section_ids=True, evidence="conclusion")
    with pytest.raises(ValueError, match="exclude each other"):
        PubMedQAContexts(str(f), sections=True, page=True)


def test_explanation_sentences_join_short_pieces_and_keep_every_word():
    """A sentence under min_chars joins the next (the last the one before); the words stay, in order."""
    from mogg.data.corpus import explanation_sentences

    text = "Ans-a. The first sentence is long enough here. Short one. The third sentence is long enough too. End."
    pieces = explanation_sentences(text, 20)
    assert pieces[0].startswith("Ans-a. The first") and pieces[-1].endswith("too. End.")
    assert all(len(p) >= 20 for p in pieces) and " ".join(pieces).split() == text.split()
    assert explanation_sentences("Tiny.", 40) == ["Tiny."]


@needs_mirage
def test_explanation_sentence_stand_in_names_every_sentence_document_gold():
    """The explanation-sentence stand-in (heldout=medmcqa_sentences): each explanation's sentences are
    documents medmcqa:<id>-<k>, a question's gold ids are exactly its explanation's sentence documents
    (their texts together the explanation), and the default sources' params are those of before."""
    rows = {json.loads(line)["id"]: json.loads(line) for line in MEDMCQA_DEV.read_text().splitlines()}
    docs = list(MedMCQAExplanations(str(MEDMCQA_DEV), sentences=True))
    by_id = {d.id: d.content for d in docs}
    assert len(by_id) == len(docs) and all("-" in d.id[len("medmcqa:"):] for d in docs)
    items = MedMCQAExplained(str(BENCHMARK), str(MEDMCQA_DEV), sentence_ids=True).load()
    assert len(items) == len(MedMCQAExplained(str(BENCHMARK), str(MEDMCQA_DEV)).load())
    for it in items:
        assert it.gold_doc_ids and all(g in by_id for g in it.gold_doc_ids)
        assert f"medmcqa:{it.id}-{len(it.gold_doc_ids)}" not in by_id  # every sentence of it is gold
        joined = " ".join(by_id[g] for g in it.gold_doc_ids)
        assert joined.split() == rows[it.id]["exp"].split()
    assert sum(len(it.gold_doc_ids) > 1 for it in items) > 1000
    assert "sentences" not in MedMCQAExplanations(str(MEDMCQA_DEV)).params()
    assert "sentence_ids" not in MedMCQAExplained(str(BENCHMARK), str(MEDMCQA_DEV)).params()


@needs_mirage
def test_pubmedqa_star_missing_raw_entry(tmp_path):
    raw = json.loads(PUBMEDQA_RAW.read_text())
    del raw["26163474"]
    f = tmp_path / "test_set.json"
    f.write_text(json.dumps(raw))
    with pytest.raises(DataError, match=rf"{f}: PubMedQA\* question 26163474 .* is missing here"):
        PubMedQAStar(str(BENCHMARK), str(f)).load()


# ---------------------------------------------------------------------------------------------
# Generic QA


def test_generic_qa_round_trip(tmp_path):
    items = [
        QAItem(
            id="q1",
            question="Which?",
            answer="B",
            options={"A": "x", "B": "y"},
            label="lab",
            gold_doc_ids=["d1", "d2"],
            gold_evidence=["ev one", "ev two"],
            dataset="mine",
        ),
        QAItem(id="q2", question="Free text?", answer="forty two", dataset="mine"),
    ]
    f = write_lines(tmp_path / "qa.jsonl", [json.dumps(dataclasses.asdict(it)) for it in items])
    loaded = GenericQA(str(f)).load()
    assert loaded == items
    assert loaded[0].answer_text == "y" and loaded[1].label_text == "Free text? forty two"


def test_generic_qa_answer_text_dataset_and_limit(tmp_path):
    f = write_lines(
        tmp_path / "my_set.jsonl",
        [
            json.dumps({"id": "a", "question": "Q1", "options": {"A": "red", "B": "blue"}, "answer": "blue"}),
            json.dumps({"id": "b", "question": "Q2", "answer": "text", "extra": 1}),
            json.dumps({"id": "c", "question": "Q3", "answer": "t", "dataset": "other"}),
        ],
    )
    items = GenericQA(str(f)).load()
    assert items[0].answer == "B"
    assert [it.dataset for it in items] == ["my_set", "my_set", "other"]
    assert [it.id for it in GenericQA(str(f), limit=2).load()] == ["a", "b"]
    assert {it.dataset for it in GenericQA(str(f), dataset="forced").load()} == {"forced"}
    assert GenericQA(str(f)).fingerprint()["files"][0]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"id": "x", "question": "Q", "options": {"A": "a", "B": "b"}, "answer": "E"}',
            "answer 'E' is neither an option letter (A, B) nor the text of exactly one option",
        ),
        ('{"id": "x", "question": "Q"}', "missing required field 'answer'"),
        ('{"id": "x", "answer": "a"}', "missing required field 'question'"),
        ('{"id": 3, "question": "Q", "answer": "a"}', "field 'id' must be a string, got int"),
        ('{"id": "x", "question": "Q", "answer": "a", "options": ["a", "b"]}', "'options' must be an object"),
        (
            '{"id": "x", "question": "Q", "answer": "a", "gold_doc_ids": "d1"}',
            "'gold_doc_ids' must be a list of strings",
        ),
        (
            '{"id": "x", "question": "Q", "answer": "a", "gold_evidence": [1]}',
            "'gold_evidence' must be a list of strings",
        ),
        ('{"id": "x", "question": "Q", "answer": "a", "label": 5}', "field 'label' must be a string"),
        (
            '{"id": "first", "question": "Q", "answer": "a"}',
            "duplicate question id 'first' (first on line 1)",
        ),
        ('{"id": "x", "question": "Q", "answer": "a"', "invalid JSON"),
    ],
)
def test_generic_qa_errors(tmp_path, line, message):
    f = write_lines(tmp_path / "qa.jsonl", ['{"id": "first", "question": "Q0", "answer": "z"}', "", line])
    with pytest.raises(DataError) as exc:
        GenericQA(str(f)).load()
    assert exc.value.line == 3
    assert str(exc.value).startswith(f"{f}:3: ")
    assert message in str(exc.value)


def test_generic_qa_empty_file(tmp_path):
    f = write_lines(tmp_path / "qa.jsonl", [""])
    with pytest.raises(DataError, match="no questions in file"):
        GenericQA(str(f)).load()


# ---------------------------------------------------------------------------------------------
# Prepare: locations, local copy, verification


def test_mirage_dir_resolution(tmp_path, monkeypatch):
    (tmp_path / "mirage").mkdir()
    (tmp_path / "mirage" / "benchmark.json").write_text("{}")
    assert mirage_dir(tmp_path) == tmp_path / "mirage"
    monkeypatch.setenv("MOGG_DATA_DIR", str(tmp_path))
    assert mirage_dir() == tmp_path / "mirage"
    monkeypatch.delenv("MOGG_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as exc:
        mirage_dir()
    assert str(exc.value).startswith(
        f"{Path('data') / 'mirage' / 'benchmark.json'}: MIRAGE benchmark not found"
    )
    assert "mogg-prepare" in str(exc.value)


@needs_mirage
def test_from_local_copy_and_verify(tmp_path):
    data = tmp_path / "data"
    assert main(["--from-local", str(MIRAGE), "--data-dir", str(data)]) == 0
    for spec in MIRAGE_FILES:
        dest = data / "mirage" / spec.path
        assert dest.is_file() and not dest.is_symlink() and dest.stat().st_size == spec.size
    assert mirage_dir(data) == data / "mirage"
    assert main(["--verify", "--data-dir", str(data)]) == 0
    assert len(MirageBenchmark(str(mirage_dir(data) / "benchmark.json")).load()) == 7663
    # Damage one file: --verify fails, a new --from-local replaces it.
    target = data / "mirage" / "rawdata/mmlu/data/test/anatomy_test.csv"
    target.write_bytes(target.read_bytes().replace(b"A", b"B", 1))
    problems = verify_mirage(data)
    assert len(problems) == 1 and "anatomy_test.csv: sha256" in problems[0]
    assert main(["--verify", "--data-dir", str(data)]) == 1
    assert copy_mirage(MIRAGE, data) == []
    assert verify_mirage(data) == []


@needs_mirage
def test_from_local_symlink(tmp_path):
    assert copy_mirage(SHARED_DATA, tmp_path, symlink=True) == []  # a data dir holding mirage/ works too
    link = tmp_path / "mirage" / "benchmark.json"
    assert link.is_symlink() and link.resolve() == BENCHMARK.resolve()


@needs_mirage
def test_from_local_refuses_corrupted_file(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(MIRAGE, src)
    bad = src / "rawdata" / "medmcqa" / "data" / "dev.json"
    os.chmod(bad, 0o644)
    bad.write_bytes(bad.read_bytes()[:-10])
    data = tmp_path / "data"
    # A stale bad copy at the destination must not survive either.
    (data / "mirage" / "rawdata" / "medmcqa" / "data").mkdir(parents=True)
    (data / "mirage" / "rawdata" / "medmcqa" / "data" / "dev.json").write_text("stale")
    problems = copy_mirage(src, data)
    assert problems == [f"{bad}: size {2594517 - 10} bytes, expected 2594517"]
    assert not (data / "mirage" / "rawdata" / "medmcqa" / "data" / "dev.json").exists()
    assert not (data / "mirage" / "rawdata" / "medmcqa" / "data" / "dev.json.part").exists()
    assert (data / "mirage" / "benchmark.json").is_file()
    assert main(["--from-local", str(src), "--data-dir", str(data), "--symlink"]) == 1
    assert not (data / "mirage" / "rawdata" / "medmcqa" / "data" / "dev.json").exists()


# ---------------------------------------------------------------------------------------------
# Prepare: downloads over a loopback HTTP server


class _RangeHandler(BaseHTTPRequestHandler):
    """Serves ``server.root`` with HTTP Range support; can cut chosen responses short."""

    def do_GET(self):
        srv = self.server
        rng = self.headers.get("Range")
        srv.requests.append((self.path, rng))
        file = srv.root / self.path.lstrip("/")
        if not file.is_file():
            self.send_error(404)
            return
        data = file.read_bytes()
        start = int(rng.removeprefix("bytes=").split("-")[0]) if rng and srv.ranges else 0
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path in srv.truncate:
            srv.truncate.discard(self.path)
            self.wfile.write(body[: len(body) // 3])  # then the connection closes: a short body
            return
        self.wfile.write(body)

    def log_message(self, *args):  # keep test output clean
        pass


@pytest.fixture
def http_server(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    server.root, server.requests, server.truncate, server.ranges = root, [], set(), True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.base_url = f"http://127.0.0.1:{server.server_address[1]}/"
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _serve(server, rel: str, data: bytes) -> RemoteFile:
    (server.root / rel).parent.mkdir(parents=True, exist_ok=True)
    (server.root / rel).write_bytes(data)
    return RemoteFile(rel, len(data), hashlib.sha256(data).hexdigest())


PAYLOAD = bytes(range(256)) * 1200  # 307,200 bytes


def test_download_fresh_and_skip_when_present(http_server, tmp_path):
    spec = _serve(http_server, "sub/file.bin", PAYLOAD)
    kw = dict(base_url=http_server.base_url, files=[spec], backoff=0, progress=False)
    assert fetch_mirage(tmp_path / "d", **kw) == []
    dest = tmp_path / "d" / "mirage" / "sub" / "file.bin"
    assert dest.read_bytes() == PAYLOAD and not dest.with_name("file.bin.part").exists()
    assert http_server.requests == [("/sub/file.bin", None)]
    assert fetch_mirage(tmp_path / "d", **kw) == []  # verified in place: no new request
    assert len(http_server.requests) == 1


def test_download_resumes_from_part_file(http_server, tmp_path):
    spec = _serve(http_server, "file.bin", PAYLOAD)
    dest = tmp_path / "file.bin"
    dest.with_name("file.bin.part").write_bytes(PAYLOAD[:100_000])
    download(http_server.base_url + "file.bin", dest, spec, backoff=0, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert http_server.requests == [("/file.bin", "bytes=100000-")]


def test_download_retries_a_cut_connection_with_resume(http_server, tmp_path):
    spec = _serve(http_server, "file.bin", PAYLOAD)
    http_server.truncate.add("/file.bin")
    dest = tmp_path / "file.bin"
    download(http_server.base_url + "file.bin", dest, spec, backoff=0, progress=False)
    assert dest.read_bytes() == PAYLOAD
    (first, second) = http_server.requests
    assert first == ("/file.bin", None)
    # Resumed from what reached the .part (whole chunks of the cut response), not from zero.
    start = int(second[1].removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= len(PAYLOAD) // 3


def test_download_server_without_range_support(http_server, tmp_path):
    http_server.ranges = False
    spec = _serve(http_server, "file.bin", PAYLOAD)
    dest = tmp_path / "file.bin"
    dest.with_name("file.bin.part").write_bytes(PAYLOAD[:5000])
    download(http_server.base_url + "file.bin", dest, spec, backoff=0, progress=False)
    assert dest.read_bytes() == PAYLOAD


def test_download_corrupt_part_restarts_from_scratch(http_server, tmp_path):
    spec = _serve(http_server, "file.bin", PAYLOAD)
    dest = tmp_path / "file.bin"
    dest.with_name("file.bin.part").write_bytes(b"\x00" * 1000)
    download(http_server.base_url + "file.bin", dest, spec, backoff=0, progress=False)
    assert dest.read_bytes() == PAYLOAD
    assert http_server.requests == [("/file.bin", "bytes=1000-"), ("/file.bin", None)]


def test_download_checksum_failure_leaves_nothing(http_server, tmp_path):
    good = _serve(http_server, "file.bin", PAYLOAD)
    spec = RemoteFile(good.path, good.size, "0" * 64)
    problems = fetch_mirage(tmp_path, base_url=http_server.base_url, files=[spec], backoff=0, progress=False)
    assert len(problems) == 1 and "sha256" in problems[0] and "expected " + "0" * 64 in problems[0]
    assert not (tmp_path / "mirage" / "file.bin").exists()
    assert not (tmp_path / "mirage" / "file.bin.part").exists()


def test_download_404_is_not_retried(http_server, tmp_path):
    spec = RemoteFile("nope.bin", 10, "0" * 64)
    problems = fetch_mirage(tmp_path, base_url=http_server.base_url, files=[spec], backoff=0, progress=False)
    assert len(problems) == 1 and "HTTP 404" in problems[0]
    assert http_server.requests == [("/nope.bin", None)]


@needs_mirage
def test_download_real_mirage_tree_with_resume(http_server, tmp_path):
    """The checksum table matches the reference copy, fetched over HTTP, one file resumed."""
    http_server.root = MIRAGE
    data = tmp_path / "data"
    part = data / "mirage" / "benchmark.json.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(BENCHMARK.read_bytes()[: 1 << 20])
    rc = main(["--data-dir", str(data), "--base-url", http_server.base_url, "--no-progress", "--no-mirrors"])
    assert rc == 0
    assert ("/benchmark.json", f"bytes={1 << 20}-") in http_server.requests
    assert len(http_server.requests) == len(MIRAGE_FILES)
    assert verify_mirage(data) == []
    assert file_fingerprint(data / "mirage" / "benchmark.json")["sha256"] == MIRAGE_FILES[0].sha256


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--from-local" in out and "--verify" in out and "--symlink" in out and "--base-url" in out


# --------------------------------------------------------------------------- byte-range shards
def _jsonl_corpus(tmp_path, n_files=3, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    paths, k = [], 0
    for f in range(n_files):
        lines = []
        for _ in range(int(rng.integers(1, 25))):
            if rng.random() < 0.1:
                lines.append("")  # blank lines are skipped and keep the numbering
                continue
            content = " ".join(["été", "word", "x" * int(rng.integers(1, 300))][: int(rng.integers(1, 4))])
            lines.append(json.dumps({"id": f"doc{k}", "title": "", "content": content}, ensure_ascii=False))
            k += 1
        p = tmp_path / f"part{f}.jsonl"
        p.write_text(("\ufeff" if f == 0 else "") + "\n".join(lines) + ("\n" if f % 2 == 0 else ""), encoding="utf-8")
        paths.append(str(p))
    return Corpus([MedRAGJsonl(paths[:2]), MedRAGJsonl(paths[2:])])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_byte_range_shards_concatenate_to_the_corpus(tmp_path, seed):
    corpus = _jsonl_corpus(tmp_path, seed=seed)
    full = [d.id for d in corpus.documents()]
    for count in (1, 2, 3, 5, 8):
        try:
            parts = [[d.id for d in Corpus(corpus.sources).shard_documents(i, count)] for i in range(count)]
        except DataError as exc:  # more shards than lines: said clearly, never a silent empty shard
            assert "holds no documents" in str(exc) and count > 3
            continue
        assert [i for p in parts for i in p] == full, count


def test_byte_range_shard_reads_only_its_range_and_keeps_line_numbers(tmp_path):
    lines = [json.dumps({"id": f"d{i}", "content": "text " * 20}) for i in range(30)]
    lines[24] = '{"id": "bad", "content": '  # line 25 is broken
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(lines) + "\n")
    corpus = Corpus([MedRAGJsonl(str(p))])
    first = corpus.shard_documents(0, 3)  # the first third parses although line 25 is broken
    assert [d.id for d in first] == [f"d{i}" for i in range(len(first))] and 5 < len(first) < 15
    with pytest.raises(DataError, match=r"c\.jsonl:25"):
        corpus.shard_documents(2, 3)


def test_fingerprint_hashes_each_file_once(tmp_path, monkeypatch):
    import mogg.data.files as corpus_mod  # where fingerprints are hashed

    corpus = _jsonl_corpus(tmp_path)
    calls = []
    real = corpus_mod.sha256_file
    monkeypatch.setattr(corpus_mod, "sha256_file", lambda p: calls.append(p) or real(p))
    corpus_mod._sha256_of.cache_clear()
    a = corpus.fingerprint()
    assert corpus.fingerprint() == a and len(calls) == 3
    path = Path(corpus.sources[0].files()[0])
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # changed: hashed again
    assert corpus.fingerprint() != a and len(calls) == 4


def test_document_list_fingerprint_follows_the_text():
    from mogg.data.corpus import DocumentList

    a = DocumentList([Document("x", "", "one two"), Document("y", "T", "three")])
    b = DocumentList([Document("x", "", "one two"), Document("y", "T", "three!")])
    assert a.fingerprint() != b.fingerprint() and a.fingerprint() == DocumentList(a.documents()).fingerprint()
    with pytest.raises(DataError, match="empty"):
        DocumentList([])


def test_no_heldout_shape_trains_on_a_set_sharing_its_texts():
    """Every conf/heldout shape: no training source reads the raw file its questions come from (sets
    sharing questions or texts leave a split together: PubMedQA* with the snippet stand-in; MedMCQA with the
    page and explanation-sentence stand-ins), and every training source is a shape of its own."""
    from conftest import compose as hcompose

    shapes = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "conf" / "heldout").glob("*.yaml"))
    assert {"covidqa", "medmcqa", "medmcqa_long", "medmcqa_sentences", "pages", "pubmedqa", "snippets",
            "snippets_l", "pages_l"} <= set(shapes)
    for h in shapes:
        cfg = hcompose(["experiment=loso_shapes", f"heldout={h}"])
        own = cfg.questions.get("raw_path") or cfg.questions.get("path")
        assert cfg.heldout_name == h and set(cfg.train_sources) <= set(shapes) - {h}, h
        for name, src in cfg.train_sources.items():
            assert (src.questions.get("raw_path") or src.questions.get("path")) != own, (h, name)
    family = {"pubmedqa", "snippets", "snippets_l", "pages_l"}  # PubMedQA(-L) abstracts: a shape leaves with its family
    for h in family:
        assert not family & set(hcompose(["experiment=loso_shapes", f"heldout={h}"]).train_sources), h


def test_heldout_medmcqa_sentences_composes_the_stand_in_and_leaves_medmcqa_out():
    from conftest import compose as hcompose

    cfg = hcompose(["experiment=loso_shapes", "heldout=medmcqa_sentences"])
    assert cfg.questions.sentence_ids and cfg.corpus.sources[0].sentences and cfg.corpus.allow_gold
    assert "medmcqa" not in cfg.train_sources and "pages" not in cfg.train_sources


@needs_mirage
def test_long_explanation_stand_in_is_long_multi_document_and_holds_no_pubmedqa_text():
    """heldout=medmcqa_long: the explained questions whose evidence holds >= 100 tokens, over their
    sentences as documents; its corpus holds no PubMedQA* text (it trains the snippet shapes' splits),
    and it trains no split of MedMCQA's family (sets sharing texts leave together)."""
    from conftest import compose as hcompose
    from hydra.utils import instantiate

    from mogg.core.text import count_tokens

    cfg = hcompose(["experiment=loso_shapes", "heldout=medmcqa_long", f"paths.data_dir={BENCHMARK.parents[1]}"])
    items = instantiate(cfg.questions).load()
    docs = {d.id for d in instantiate(cfg.corpus).documents()}
    assert 400 < len(items) < 600 and all(count_tokens(it.evidence_text) >= 100 for it in items)
    assert all(set(it.gold_doc_ids) <= docs for it in items) and all(d.startswith("medmcqa:") for d in docs)
    assert sum(len(it.gold_doc_ids) > 2 for it in items) > 0.6 * len(items)  # 314 of 487
    for h in ("snippets", "snippets_l", "pubmedqa", "covidqa"):
        assert "medmcqa_long" in hcompose(["experiment=loso_shapes", f"heldout={h}"]).train_sources, h
    for h in ("medmcqa", "pages", "medmcqa_sentences"):
        assert "medmcqa_long" not in hcompose(["experiment=loso_shapes", f"heldout={h}"]).train_sources, h


def test_heldout_snippets_composes_the_stand_in_and_leaves_pubmedqa_out():
    """experiment=loso_shapes heldout=snippets: the snippet stand-in's questions and corpus, trained on
    MedMCQA, COVID-QA and the page stand-in (PubMedQA* shares its texts: never a training source)."""
    from conftest import compose as hcompose

    cfg = hcompose(["experiment=loso_shapes", "heldout=snippets"])
    assert cfg.questions.section_ids and cfg.corpus.sources[0].sections and cfg.corpus.allow_gold
    assert sorted(cfg.train_sources) == ["covidqa", "medmcqa", "medmcqa_long", "pages"]
    assert cfg.run_name == "loso_shapes_snippets_s0"
    assert all(not s.questions.get("section_ids") and "pubmedqa" not in s.questions._target_.lower()
               for s in cfg.train_sources.values())
