"""MedRAG corpora: local copies in the real formats, regrouping chunks into sources, StatPearls
NXML chunking, the hub path (with a fake hub), and the leakage guard."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import compose
from hydra.utils import instantiate

from mogg.data.chunks import group_rows
from mogg.data.corpus import Corpus, MedRAGJsonl
from mogg.data.errors import DataError
from mogg.data.leakage import LeakageError, find_leaks
from mogg.data.medrag import fetch_hub_corpus, verify_corpus
from mogg.data.prepare import main as prepare_main
from mogg.data.records import Document, QAItem
from mogg.data.statpearls import article_chunks

WORDS = ("artery vein nerve muscle bone ligament tendon cortex nucleus membrane receptor enzyme hormone "
         "plasma renal hepatic cardiac pulmonary gastric neural").split()


def _chunk_text(rng: random.Random, n_sent: int) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(14)).capitalize() + "." for _ in range(n_sent))


def _textbooks(d: Path, books=("Anatomy_Gray", "Physiology_Levy"), n=14, seed=0) -> dict[str, list[str]]:
    """MedRAG Textbooks rows (id <book>_<i>, title <book>, ~160-token content), one file per book."""
    rng, out = random.Random(seed), {}
    d.mkdir(parents=True, exist_ok=True)
    for b in books:
        rows = [{"id": f"{b}_{i}", "title": b, "content": _chunk_text(rng, 11), "contents": "..."} for i in range(n)]
        (d / f"{b}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        out[b] = [r["content"] for r in rows]
    return out


def test_prepare_textbooks_from_local_and_level4_spans_consecutive_chunks(tmp_path):
    src = tmp_path / "src" / "chunk"
    books = _textbooks(src)
    data = tmp_path / "data"
    assert prepare_main(["--corpus", "textbooks", "--from-local", str(src.parent), "--data-dir", str(data), "--no-progress"]) == 0
    root = data / "medrag" / "textbooks"
    assert sorted(p.name for p in (root / "chunk").glob("*.jsonl")) == ["Anatomy_Gray.jsonl", "Physiology_Levy.jsonl"]
    assert verify_corpus(data, "textbooks") == []
    assert prepare_main(["--corpus", "textbooks", "--verify", "--data-dir", str(data)]) == 0

    cfg = compose([f"paths.data_dir={data}", "corpus=textbooks", "ladder@ladders.mog=mog"])
    corpus = instantiate(cfg.corpus)
    docs = corpus.documents()
    assert [d.id for d in docs] == ["Anatomy_Gray", "Physiology_Levy"]  # one document per book, chunks in order
    assert docs[0].content == "\n\n".join(books["Anatomy_Gray"])
    lad = instantiate(cfg.ladders.mog).build(docs)
    lv = lad.levels[4]  # 16 units of 64 tokens
    assert lad.level_names[4] == "L4:1024tok"
    spans = []
    for c in range(len(lv)):
        text = lad.texts(4)[c]
        book = lad.units.doc_ids[lad.chunk_doc(4)[c]]
        hit = [i for i, chunk in enumerate(books[book]) if chunk[:60] in text]
        spans.append(hit)
    full = [h for h in spans if len(h) >= 5]
    assert full and all(h == list(range(h[0], h[0] + len(h))) for h in spans if h)  # consecutive source chunks
    assert lad.is_document_local()  # never across books


def test_regrouping_order_and_errors(tmp_path):
    rows = [Document("Book_0", "Book", "a"), Document("Book_1", "Book", "b"), Document("Other_0", "Other", "c"),
            Document("12345", "An abstract", "d")]
    got = list(group_rows(((d, "f", i + 1) for i, d in enumerate(rows)), "id_prefix"))
    assert [(d.id, d.content, line) for d, _, line in got] == [("Book", "a\n\nb", 1), ("Other", "c", 3), ("12345", "d", 4)]
    assert [d.id for d, _, _ in group_rows(((d, "f", 1) for d in rows), "title")] == ["Book", "Other", "An abstract"]
    bad = tmp_path / "b.jsonl"
    bad.write_text("".join(json.dumps({"id": i, "title": "T", "content": "x"}) + "\n" for i in ("B_0", "B_2", "B_1")))
    with pytest.raises(DataError, match=r"b\.jsonl:3: chunk 'B_1' of 'B' comes after chunk index 2"):
        list(MedRAGJsonl(str(bad), group_by="id_prefix"))
    again = tmp_path / "again.jsonl"
    again.write_text("".join(json.dumps({"id": i, "title": "T", "content": "x"}) + "\n" for i in ("A_0", "C_0", "A_1")))
    with pytest.raises(DataError, match="duplicate document id 'A'"):
        Corpus([MedRAGJsonl(str(again), group_by="id_prefix")]).documents()


@pytest.mark.parametrize("count", [2, 3, 5, 7])
def test_grouped_byte_range_shards_concatenate_to_the_corpus(tmp_path, count):
    _textbooks(tmp_path / "c", books=("A_book", "B_book", "C_book"), n=9, seed=count)
    src = MedRAGJsonl(str(tmp_path / "c"), group_by="id_prefix")
    full = Corpus([src]).documents()
    parts = []
    for i in range(count):
        try:
            parts.append(Corpus([src]).shard_documents(i, count))
        except DataError as e:  # its byte range lies inside a book that starts in an earlier shard
            assert "holds no documents" in str(e)
            parts.append([])
    assert [d for p in parts for d in p] == full  # every book whole, in exactly one shard


NXML = """<?xml version="1.0"?>
<book-part-wrapper xmlns:xlink="http://www.w3.org/1999/xlink">
 <book-part><book-part-meta><title-group><title>Acute Appendicitis</title></title-group></book-part-meta>
  <body>
   <sec><title>Introduction</title><p>Appendicitis is inflammation of the <italic>vermiform</italic> appendix.</p>
     <p>It is the most common abdominal emergency.</p></sec>
   <sec><title>Evaluation</title><sec><title>Laboratory</title><p>Leukocytosis is common.</p>
     <list><list-item><p>CRP rises.</p></list-item><list-item><p>Urinalysis may show pyuria.</p></list-item></list></sec></sec>
  </body></book-part></book-part-wrapper>"""


def test_statpearls_nxml_to_chunks_and_back_to_articles(tmp_path):
    chunks = article_chunks(NXML, "article-17")
    assert [c["id"] for c in chunks] == [f"article-17_{i}" for i in range(4)]
    assert chunks[0] == {"id": "article-17_0", "title": "Acute Appendicitis -- Introduction",
                         "content": "Appendicitis is inflammation of the vermiform appendix."}
    assert chunks[2]["title"] == "Acute Appendicitis -- Evaluation -- Laboratory"
    assert chunks[3]["content"] == "CRP rises. Urinalysis may show pyuria."
    src = tmp_path / "nxml"
    src.mkdir()
    (src / "article-17.nxml").write_text(NXML)
    (src / "article-18.nxml").write_text(NXML.replace("Acute Appendicitis", "Cholecystitis"))
    data = tmp_path / "data"
    assert prepare_main(["--corpus", "statpearls", "--from-local", str(src), "--data-dir", str(data), "--no-progress"]) == 0
    corpus = instantiate(compose([f"paths.data_dir={data}", "corpus=statpearls"]).corpus)
    docs = corpus.documents()
    assert [d.id for d in docs] == ["article-17", "article-18"] and docs[1].title.startswith("Cholecystitis")
    (src / "broken.nxml").write_text("<book-part><body><p>unclosed")
    with pytest.raises(DataError, match="broken.nxml: invalid NXML"):
        prepare_main(["--corpus", "statpearls", "--from-local", str(src), "--data-dir", str(tmp_path / "d2"), "--no-progress"])


@dataclass
class _Lfs:
    sha256: str


@dataclass
class _RemoteFile:
    path: str
    size: int
    blob_id: str
    lfs: _Lfs | None


def test_hub_fetch_verifies_and_skips(tmp_path, monkeypatch):
    import huggingface_hub.hf_api as hfapi

    monkeypatch.setattr(hfapi, "RepoFile", _RemoteFile)
    payload = {"chunk/pubmed23n0001.jsonl": b'{"id": "1", "title": "T", "content": "An abstract."}\n'}
    calls = []

    class Api:
        def list_repo_tree(self, repo, path, **kw):
            assert repo == "MedRAG/pubmed" and path == "chunk" and kw["repo_type"] == "dataset"
            return [_RemoteFile(p, len(b), "x", _Lfs(hashlib.sha256(b).hexdigest())) for p, b in payload.items()]

    def download(repo, filename, repo_type, revision, local_dir, corrupt=False):
        calls.append(filename)
        dest = Path(local_dir) / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(payload[filename])
        return str(dest)

    assert fetch_hub_corpus(tmp_path, "pubmed", api=Api(), download=download) == []
    assert verify_corpus(tmp_path, "pubmed") == [] and calls == ["chunk/pubmed23n0001.jsonl"]
    assert fetch_hub_corpus(tmp_path, "pubmed", api=Api(), download=download) == [] and len(calls) == 1  # present: skipped
    (tmp_path / "medrag" / "pubmed" / "chunk" / "pubmed23n0001.jsonl").write_bytes(b"tampered\n")
    assert verify_corpus(tmp_path, "pubmed")  # the manifest catches it

    def bad_download(repo, filename, **kw):
        dest = Path(kw["local_dir"]) / filename
        dest.write_bytes(b"x" * len(payload[filename]))
        return str(dest)

    problems = fetch_hub_corpus(tmp_path, "pubmed", api=Api(), download=bad_download)
    assert problems and "checksum does not match" in problems[0]
    assert not (tmp_path / "medrag" / "pubmed" / "chunk" / "pubmed23n0001.jsonl").exists()


# ------------------------------------------------------------------------------------------------
# leakage guard


def test_find_leaks_on_planted_leaks(tmp_path):
    split = tmp_path / "dev.json"
    split.write_text('{"q": 1}')
    copy = tmp_path / "corpus_copy.json"
    copy.write_text('{"q": 1}')  # same content, other name
    evidence = ("The left recurrent laryngeal nerve loops under the arch of the aorta and ascends in the "
                "tracheoesophageal groove to supply the larynx.")
    items = [QAItem("q1", "Which nerve loops under the aortic arch?", "A", gold_evidence=[evidence], gold_doc_ids=["d9"]),
             QAItem("q2", "Unrelated", "B", gold_evidence=["short"])]
    texts = [(0, "Intro text. " + evidence + " More text follows here."), (1, "The nerve loops under the arch of the aorta.")]
    rep = find_leaks([copy], [split], ["d1", "d2"], texts, items)
    assert rep.same_files == [(str(copy), str(split))] and rep.evidence == [("q1", "d1")] and rep.gold_ids == []
    rep = find_leaks([], [split], ["d1", "d9"], iter(()), items[1:] + [QAItem("q3", "x", "A", gold_doc_ids=["d9"])])
    assert rep.gold_ids == [("q3", "d9")] and not rep.evidence and not rep.same_files


def _leaks_by_sets(doc_texts, items):
    """The leakage rules of mogg.data.leakage by brute force: word n-grams as Python tuples, every
    passage against every document (the reference the vectorized scan must agree with)."""
    from mogg.core.text import tokenize
    from mogg.data import leakage as L

    def grams(t, n):
        return {tuple(t[i:i + n]) for i in range(len(t) - n + 1)}

    ev, qa = set(), set()
    for d, text in doc_texts:
        toks = tokenize(text)
        for it in items:
            for e in it.gold_evidence:
                e = tokenize(e)
                if len(e) >= L.MIN_WORDS:
                    n = min(L.SHINGLE, len(e))
                    share = L.MIN_SHARE if len(e) > L.SHINGLE else 1.0
                    if len(grams(e, n) & grams(toks, n)) >= share * len(grams(e, n)):
                        ev.add((it.id, d))
            q, a = tokenize(it.question), tokenize(it.answer_text)
            if len(q) >= 5 and a:
                n = min(L.Q_SHINGLE, len(q))
                share = L.Q_SHARE if len(q) > L.Q_SHINGLE else 1.0
                m = min(len(a), L.SHINGLE)
                if len(grams(q, n) & grams(toks, n)) >= share * len(grams(q, n)) and grams(a[:m], m) & grams(toks, m):
                    qa.add((it.id, d))
    return ev, qa


def test_the_vectorized_leak_scan_agrees_with_brute_force_across_blocks(monkeypatch):
    from mogg.data import leakage as L

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]  # a small vocabulary: many shared n-grams, near misses
    docs = [" ".join(rng.choice(words, size=int(rng.integers(3, 60)))) for _ in range(60)]
    items = []
    for i in range(25):
        d = docs[int(rng.integers(len(docs)))].split()
        a = int(rng.integers(0, max(1, len(d) - 4)))
        ev = " ".join(d[a:a + int(rng.integers(3, 30))])  # a span of a document: whole, or cut at its end
        if i % 3 == 0:
            ev += " " + " ".join(rng.choice(words, size=8))  # half-present evidence
        q = " ".join(d[max(0, a - 6):a + 4]) if i % 2 else " ".join(rng.choice(words, size=9))
        items.append(QAItem(f"q{i}", q, " ".join(d[a + 4:a + 6]) or "w1", gold_evidence=[ev]))  # answer as text
    texts = list(enumerate(docs))
    ev, qa = _leaks_by_sets(texts, items)
    assert ev and qa  # the test plants both kinds
    monkeypatch.setattr(L, "BLOCK_TOKENS", 97)  # many blocks, documents never split across them
    rep = find_leaks([], [], [str(d) for d in range(len(docs))], iter(texts), items)
    assert {(q, int(d)) for q, d in rep.evidence} == ev
    assert {(q, int(d)) for q, d in rep.qa} == qa
    assert len(rep.evidence) == len(ev) and len(rep.qa) == len(qa)  # each pair once
    # texts shorter than the longest n-gram (a block of 3 words, 12-word evidence): nothing found, no error
    short = find_leaks([], [], ["a", "b"], iter([(0, "w1 w2"), (1, "w3")]), items)
    assert not short.evidence and not short.qa


def test_mirage_reader_refuses_the_gold_corpus_and_runs_with_medrag(tmp_path, mirage):
    from mogg.run.prepare_stage import prepare_all

    base = [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'a'}", "experiment=mirage_reader",
            "questions.per_dataset=3", "reader=none", "labels=tfidf", "labels.target=qa"]
    with pytest.raises(LeakageError, match=r"dev\.json|test_set\.json"):
        prepare_all(compose(base + ["corpus=pubmedqa_gold", "corpus.sources.1.min_chars=400"]))
    src = tmp_path / "tb"
    _textbooks(src)
    data = tmp_path / "data"
    assert prepare_main(["--corpus", "textbooks", "--from-local", str(src), "--data-dir", str(data), "--no-progress"]) == 0
    prep = prepare_all(compose(base + [f"corpus.sources.0.paths={data}/medrag/textbooks/chunk"]))["mog"]
    assert len(prep.items) == 15 and prep.hits.shape[0] == 15
    assert not any("gold-context" in n for n in prep.notes)
    assert np.isnan(prep.fixed_f1).all()  # MIRAGE questions carry no gold evidence
