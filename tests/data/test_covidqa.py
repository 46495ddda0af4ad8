"""COVID-QA: the SQuAD reader, the evidence rule on hand-made records, mogg-prepare --dataset covidqa,
and the real configs on the shared copy."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, compose

from mogg.data.errors import DataError
from mogg.data.prepare import COVIDQA_FILES
from mogg.data.prepare import main as prepare_main
from mogg.data.squad import SquadPapers, SquadQA, covering_sentences, locate_answer, read_papers, sentence_spans

SHARED_COVIDQA = ROOT.parent / "shared" / "data" / "covidqa"

PAPER = ("Coronaviruses infect many species. The incubation period of SARS-CoV-2 is about 5 days, "
         "with a range of 2 to 14 days. Masks reduce transmission.  Fever is common.\nCough is too.")


def _squad(path: Path, qas: list[dict], context: str = PAPER, doc_id: int = 7) -> Path:
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "document_id": doc_id,
                                                           "qas": qas}]}]}))
    return path


def _qa(qid, question, text, start):
    return {"id": qid, "question": question, "answers": [{"text": text, "answer_start": start}],
            "is_impossible": False}


def test_sentence_spans_cover_the_splitter_sentences():
    sentences, spans = sentence_spans(PAPER)
    assert len(sentences) == 5
    for sent, (b, e) in zip(sentences, spans):
        assert " ".join(PAPER[b:e].split()) == sent


def test_evidence_rule_on_hand_made_records(tmp_path):
    start = PAPER.index("about 5 days")
    two = PAPER.index("Masks")  # an answer crossing a sentence boundary: both sentences
    qas = [
        _qa(1, "How long is the incubation?", "about 5 days", start),  # exact offset
        _qa(2, "Incubation range?", " 2 to 14 days", PAPER.index("2 to 14") - 2),  # COVID-QA's early offset
        _qa(3, "What reduces transmission?", "transmission.  Fever", two + 13),  # spans two sentences
        _qa(4, "Unanswerable here?", "hydroxychloroquine", 3),  # not in the paper: dropped
        _qa(5, "Case?", "MASKS REDUCE", 0),  # case-insensitive fallback
    ]
    items = SquadQA(str(_squad(tmp_path / "c.json", qas))).load()
    by_id = {it.id: it for it in items}
    assert set(by_id) == {"1", "2", "3", "5"}
    incubation = "The incubation period of SARS-CoV-2 is about 5 days, with a range of 2 to 14 days."
    assert by_id["1"].gold_evidence == [incubation]
    assert by_id["2"].gold_evidence == [incubation]
    assert by_id["3"].gold_evidence == ["Masks reduce transmission.", "Fever is common."]
    assert by_id["5"].gold_evidence == ["Masks reduce transmission."]
    assert all(it.gold_doc_ids == ["covidqa:7"] and it.options == {} for it in items)
    # the evidence is the sentence, never the bare answer span
    assert by_id["1"].answer == "about 5 days" and by_id["1"].evidence_text != by_id["1"].answer


def test_locate_answer_prefers_the_occurrence_nearest_the_offset():
    ctx = "days. 14 days here. And 14 days there."
    assert locate_answer(ctx, "14 days", 24) == (24, 31)
    assert locate_answer(ctx, " 14 days", 22) == (24, 31)
    assert locate_answer(ctx, "14 days", 5) == (6, 13)
    assert locate_answer(ctx, "absent", 0) is None
    spans = sentence_spans(ctx)
    assert covering_sentences(*spans, 24, 31) == ["And 14 days there."]


@pytest.mark.parametrize("payload, message", [
    ({"version": 1}, "missing 'data'"),
    ({"data": [{"paragraphs": [{"context": 3, "qas": []}]}]}, "'context' must be str"),
    ({"data": [{"paragraphs": [{"context": "x", "document_id": 1, "qas": [_qa(1, "q", "x", 0), _qa(1, "q", "x", 0)]}]}]},
     "duplicate question id"),
    ({"data": [{"paragraphs": [{"context": "x", "qas": [{"id": 1, "question": "q",
                                                         "answers": [{"text": "x", "answer_start": "0"}]}]}]}]},
     "'answer_start' must be int"),
])
def test_reader_errors_name_the_file_and_record(tmp_path, payload, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(DataError) as exc:
        read_papers(path)
    assert str(path) in str(exc.value) and message in str(exc.value)


def test_papers_are_documents(tmp_path):
    path = _squad(tmp_path / "c.json", [_qa(1, "q", "Masks", PAPER.index("Masks"))])
    docs = list(SquadPapers(str(path)))
    assert [d.id for d in docs] == ["covidqa:7"] and docs[0].content == PAPER


def test_prepare_dataset_covidqa_from_local(tmp_path):
    if not (SHARED_COVIDQA / "200423_covidQA.json").exists():
        pytest.skip("the shared COVID-QA copy is not beside the project")
    data = tmp_path / "data"
    assert prepare_main(["--dataset", "covidqa", "--from-local", str(SHARED_COVIDQA), "--data-dir", str(data)]) == 0
    assert (data / "covidqa" / COVIDQA_FILES[0].path).stat().st_size == COVIDQA_FILES[0].size
    assert prepare_main(["--dataset", "covidqa", "--verify", "--data-dir", str(data)]) == 0
    # a corrupted source is refused and not placed
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copyfile(SHARED_COVIDQA / "200423_covidQA.json", bad / "200423_covidQA.json")
    with open(bad / "200423_covidQA.json", "r+b") as fh:
        fh.seek(100)
        fh.write(b"X")
    assert prepare_main(["--dataset", "covidqa", "--from-local", str(bad), "--data-dir", str(tmp_path / "d2")]) == 1
    assert not (tmp_path / "d2" / "covidqa" / "200423_covidQA.json").exists()


def test_covidqa_configs_on_the_shared_copy(monkeypatch):
    if not (SHARED_COVIDQA / "200423_covidQA.json").exists():
        pytest.skip("the shared COVID-QA copy is not beside the project")
    from hydra.utils import instantiate

    monkeypatch.setenv("MOGG_DATA_DIR", str(SHARED_COVIDQA.parent))
    cfg = compose(["experiment=covidqa"])
    items = instantiate(cfg.questions).load()
    assert len(items) == 1380  # every answer is found in its paper
    docs = list(instantiate(cfg.corpus))
    assert len(docs) == 98 and cfg.corpus.allow_gold
    ids = {d.id for d in docs}
    assert all(it.gold_doc_ids[0] in ids for it in items)
    # the evidence is sentences of the gold paper, one in most questions
    one = sum(len(it.gold_evidence) == 1 for it in items)
    assert one / len(items) > 0.5
    assert os.path.basename(cfg.questions.path) == "200423_covidQA.json"


def test_paragraph_evidence_is_the_answers_paragraphs_whole(tmp_path):
    """evidence="paragraph" (questions=covidqa_paragraphs, rule step 4): every sentence of the paragraphs
    (mogg.core.text.paragraphs: blank lines, a heading joined to its text) that hold the answer's sentences; an answer
    over a paragraph break takes both; the sentence evidence is unchanged; an unknown kind is refused."""
    paper = ("Background\n\nCoronaviruses infect many species. They spread in droplets.\n\n"
             "The incubation period is about 5 days. Most cases are mild.\n\nMasks reduce transmission.")
    qas = [_qa(1, "Incubation?", "about 5 days", paper.index("about 5 days")),
           _qa(2, "Spread and incubation?", "droplets.\n\nThe incubation", paper.index("droplets")),
           _qa(3, "Species?", "many species", paper.index("many species"))]
    path = _squad(tmp_path / "c.json", qas, context=paper)
    by_id = {it.id: it for it in SquadQA(str(path), evidence="paragraph").load()}
    assert by_id["1"].gold_evidence == ["The incubation period is about 5 days.", "Most cases are mild."]
    assert by_id["2"].gold_evidence == ["Background Coronaviruses infect many species.", "They spread in droplets.",
                                        "The incubation period is about 5 days.", "Most cases are mild."]
    # the heading joins its paragraph, so the first paragraph's first unit is "Background Coronaviruses ..."
    assert by_id["3"].gold_evidence == ["Background Coronaviruses infect many species.", "They spread in droplets."]
    sentences = {it.id: it.gold_evidence for it in SquadQA(str(path)).load()}
    assert sentences["1"] == ["The incubation period is about 5 days."]
    assert SquadQA(str(path)).params() == {**SquadQA(str(path), evidence="sentences").params()}  # fingerprint kept
    assert SquadQA(str(path), evidence="paragraph").params()["evidence"] == "paragraph"
    with pytest.raises(ValueError, match="evidence"):
        SquadQA(str(path), evidence="section")


def test_covidqa_paragraphs_on_the_shared_copy(monkeypatch):
    """questions=covidqa_paragraphs: COVID-QA's questions, each one's evidence its answer's paragraphs whole (a
    superset of its sentence evidence, in the same paper)."""
    if not (SHARED_COVIDQA / "200423_covidQA.json").exists():
        pytest.skip("the shared COVID-QA copy is not beside the project")
    from hydra.utils import instantiate

    monkeypatch.setenv("MOGG_DATA_DIR", str(SHARED_COVIDQA.parent))
    paras = instantiate(compose(["experiment=covidqa", "questions=covidqa_paragraphs"]).questions).load()
    sents = {it.id: it for it in instantiate(compose(["experiment=covidqa"]).questions).load()}
    assert len(paras) == len(sents) == 1380
    assert all(set(sents[it.id].gold_evidence) <= set(it.gold_evidence) for it in paras)
    assert sum(len(it.gold_evidence) > len(sents[it.id].gold_evidence) for it in paras) > 0.9 * len(paras)
