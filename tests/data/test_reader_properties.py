"""Property-based tests (issue 24): every QA and corpus reader, given any bytes or any JSON shape,
returns a result or raises one :class:`DataError` naming the file; never another exception.

Two strategies per reader: raw bytes (encodings, truncation, gzip magic, BOMs) and JSON values
drawn with the reader's own field names, so that the deeper branches (types of fields, missing
keys, duplicate ids, options maps) are reached, not only the parse error."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mogg.data.corpus import Corpus, MedMCQAExplanations, MedRAGJsonl, PlainText, PubMedQAContexts
from mogg.data.errors import DataError
from mogg.data.qa import GenericQA, MedMCQAExplained, MirageBenchmark, PubMedQALabelled, PubMedQAStar
from mogg.data.squad import SquadPapers, SquadQA

KEYS = ["id", "question", "answer", "options", "dataset", "gold_evidence", "gold_doc_ids", "title", "content",
        "contents", "exp", "subject_name", "CONTEXTS", "LONG_ANSWER", "QUESTION", "data", "paragraphs", "context",
        "qas", "answers", "text", "answer_start", "document_id", "A", "B", "pubmedqa", "medmcqa"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, width=16),
                    st.text(max_size=30), st.sampled_from(["a", "A", "yes", "Aspirin inhibits platelets.", ""]))
JSON = st.recursive(SCALARS, lambda c: st.one_of(st.lists(c, max_size=4),
                                                  st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)),
                                                                  c, max_size=6)), max_leaves=25)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(make, data: bytes, name: str):
    """``make(path)`` loads the file holding ``data``: a result, or a DataError naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            make(str(path))
        except DataError as e:
            assert str(path) in str(e), e  # names the file (a Corpus error names its source)
        # any other exception propagates and fails the property


def _jsonl(values) -> bytes:
    return b"".join(json.dumps(v).encode() + b"\n" for v in values)


READERS = {
    # name: (file name, loader of one file, second file's content for two-file readers)
    "generic": ("q.jsonl", lambda p: GenericQA(p).load()),
    "mirage": ("benchmark.json", lambda p: MirageBenchmark(p).load()),
    "squad_qa": ("covid.json", lambda p: SquadQA(p).load()),
    "squad_papers": ("covid.json", lambda p: Corpus([SquadPapers(p)], allow_gold=True).documents()),
    "medrag": ("chunks.jsonl", lambda p: Corpus([MedRAGJsonl(p)]).documents()),
    "plain": ("doc.txt", lambda p: Corpus([PlainText(p)]).documents()),
    "pubmedqa_contexts": ("ori_pqal.json", lambda p: Corpus([PubMedQAContexts(p)], allow_gold=True).documents()),
    "medmcqa_exp": ("dev.json", lambda p: Corpus([MedMCQAExplanations(p)], allow_gold=True).documents()),
    "pubmedqa_l": ("ori_pqal.json", lambda p: PubMedQALabelled(p).load()),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_any_bytes(reader):
    name, make = READERS[reader]

    @SETTINGS
    @given(st.one_of(st.binary(max_size=200), st.sampled_from([b"\x1f\x8b\x08junk", b"\xef\xbb\xbf{}", b"\xff\xfe{"])))
    def prop(data):
        _check(make, data, name)

    prop()


@pytest.mark.parametrize("reader", sorted(READERS))
def test_any_json_shape(reader):
    name, make = READERS[reader]
    lines = name.endswith(".jsonl")

    @SETTINGS
    @given(st.lists(JSON, min_size=1, max_size=4) if lines else JSON)
    def prop(value):
        _check(make, _jsonl(value) if lines else json.dumps(value).encode(), name)

    prop()


@SETTINGS
@given(JSON, JSON)
def test_two_file_sets_any_json_shape(bench, raw):
    """PubMedQA* and MedMCQA* join benchmark.json with a raw file: both drawn independently."""
    with tempfile.TemporaryDirectory() as tmp:
        b, r = Path(tmp) / "benchmark.json", Path(tmp) / "raw.json"
        b.write_text(json.dumps(bench))
        r.write_text(json.dumps(raw))
        for make in (lambda: PubMedQAStar(str(b), str(r)).load(), lambda: MedMCQAExplained(str(b), str(r)).load()):
            try:
                make()
            except DataError as e:
                assert str(b) in str(e) or str(r) in str(e), e
