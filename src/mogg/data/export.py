"""Any question set and corpus the project reads, written as the generic-format files a user brings.

:func:`write_generic` writes ``questions.jsonl`` (the generic question format, :class:`~mogg.data.qa.GenericQA`)
and ``corpus.jsonl`` (MedRAG: ``id``, ``title``, ``content``; :class:`~mogg.data.corpus.MedRAGJsonl`), the
documents in corpus order. Read back through those two readers they give the same questions, documents and
order, so a stand-in checks the path a new set takes (``experiment=transfer_selector_generic`` with
``questions.path`` and ``corpus.sources.0.paths``; ``scripts/export_generic.py``). :func:`split_paragraphs` writes
each page's paragraphs as documents of their own instead, as a user might (docs/results.md, "A page written one
section per document").
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from pathlib import Path

from mogg.core.artifacts import write_text_atomic
from mogg.core.text import is_heading, paragraphs, split_sentences, text_blocks
from mogg.data.records import Document, QAItem

# A list item's most words where a sentence cuts at its commas: a bullet of a symptom list is a phrase ("loss of side
# vision", "halos around lights"), under a heading's HEADING_WORDS, so a line-written page reads it as one
LIST_ITEM_WORDS = 8


def question_record(item: QAItem) -> dict:
    """One generic-format question line: the fields :class:`~mogg.data.qa.GenericQA` reads (the label only where
    one is set; the options only where the question has them)."""
    rec: dict = {"id": item.id, "question": item.question, "answer": item.answer}
    if item.options:
        rec["options"] = dict(item.options)
    if item.label is not None:
        rec["label"] = item.label
    rec["gold_evidence"] = list(item.gold_evidence)
    rec["gold_doc_ids"] = list(item.gold_doc_ids)
    return rec


def split_paragraphs(documents: Iterable[Document]) -> list[Document]:
    """Each document's paragraphs (:func:`mogg.core.text.paragraphs`) as documents of
    their own, in order, ids ``<id>_<k>`` (k from 0: the ids :func:`mogg.ladders.sources.source_positions` reads as
    one source's sections) and the document's title; a document of one paragraph keeps its id and text."""
    out: list[Document] = []
    for d in documents:
        parts = paragraphs(d.content)
        if len(parts) < 2:
            out.append(d)
            continue
        out.extend(Document(id=f"{d.id}_{k}", title=d.title, content=p.strip()) for k, p in enumerate(parts))
    return out


def join_paragraphs(documents: Iterable[Document], sep: str) -> list[Document]:
    """Each document with its blocks (:func:`mogg.core.text.text_blocks`: its paragraphs and headings) joined by
    ``sep`` ("\\n": a page written one section per line, as a user's export might; "\\n\\n": blank lines), so that
    it reads back as the same paragraphs (:func:`mogg.core.text.paragraphs`), headed sections included; ids and
    titles kept."""
    return [Document(id=d.id, title=d.title, content=sep.join(b.strip() for b in text_blocks(d.content)) or d.content)
            for d in documents]


def flattened(documents: Iterable[Document]) -> list[Document]:
    """Each document on one line, its whitespace runs one space: a page whose line breaks were all lost (a
    spreadsheet cell, a whitespace-normalised export), so no paragraph of it can be read back; ids and titles kept."""
    return [Document(id=d.id, title=d.title, content=" ".join(d.content.split()) or d.content) for d in documents]


def halved_paragraphs(documents: Iterable[Document]) -> list[Document]:
    """Each document with each of its blocks (:func:`mogg.core.text.text_blocks`) written as two, a blank line at
    the sentence break nearest its middle (:func:`mogg.data.pages.halved`, as ``corpus=pages_halves`` writes the page
    stand-in's sections): a page whose sections run over paragraphs; ids and titles kept (docs/results.md, "A page of
    one question: its paragraphs' shared words")."""
    from mogg.data.pages import halved

    return [Document(id=d.id, title=d.title, content="\n\n".join(halved(b.strip()) for b in text_blocks(d.content))
                     or d.content) for d in documents]


def listed(block: str, words: int = LIST_ITEM_WORDS, inline: bool = False) -> str:
    """``block`` (one paragraph) written as its first sentence, then its other sentences as list items, one a line
    ("- ", no closing stop): each sentence cut at its commas and semicolons, its pieces packed into items of at most
    ``words`` words, a longer piece cut every ``words`` words: a section that lists, as a consumer-health page writes
    its symptoms and causes ("- loss of side vision"). With ``inline`` the items follow on the first sentence's line
    (" - loss of side vision - blurred vision"), as a page whose line breaks were lost reads. Its words are kept, in
    order; a paragraph of one sentence is unchanged."""
    sentences = [s.strip() for s in split_sentences(" ".join(block.split())) if s.strip()]
    if len(sentences) < 2:
        return block
    items: list[str] = []
    for s in sentences[1:]:
        cur: list[str] = []
        for piece in re.split(r"(?<=[,;])\s+", s.rstrip(".!?;: ")):
            if cur and len(cur) + len(piece.split()) > words:
                items.append(" ".join(cur))
                cur = []
            cur += piece.split()
            while len(cur) > words:  # a piece longer than an item: cut every `words` words
                items.append(" ".join(cur[:words]))
                cur = cur[words:]
        if cur:
            items.append(" ".join(cur))
    return ("\n", " ")[inline].join([sentences[0], *(f"- {it.rstrip(',;')}" for it in items)])


def listed_paragraphs(documents: Iterable[Document], words: int = LIST_ITEM_WORDS, inline: bool = False
                      ) -> list[Document]:
    """Each document with each of its blocks that is not a heading (:func:`mogg.core.text.text_blocks`) written as a
    lead sentence and a list (:func:`listed`; ``inline``: on one line), the blocks joined by blank lines: a page
    whose sections list (docs/results.md, "A page's lists"); ids and titles kept."""
    return [Document(id=d.id, title=d.title,
                     content="\n\n".join(b.strip() if is_heading(b) else listed(b.strip(), words, inline)
                                          for b in text_blocks(d.content)) or d.content) for d in documents]


def bare_ids(items: Iterable[QAItem], documents: Iterable[Document]) -> tuple[list[QAItem], list[Document]]:
    """The documents renamed ``d<k>`` in the order given (k from 0), ids that name no source, and each question's
    ``gold_doc_ids`` renamed alike (ids not in the corpus dropped): a corpus whose ids say nothing of which documents
    are one source's sections, as a user's export might number them (docs/results.md, "Ids that name nothing")."""
    docs = list(documents)
    new = {d.id: f"d{k}" for k, d in enumerate(docs)}
    out = [Document(id=new[d.id], title=d.title, content=d.content) for d in docs]
    qs = [dataclasses.replace(it, gold_doc_ids=[new[g] for g in it.gold_doc_ids if g in new]) for it in items]
    return qs, out


def one_per_document(items: Iterable[QAItem], seed: int) -> list[QAItem]:
    """One question per gold document set (``gold_doc_ids``), drawn with ``numpy.random.default_rng(seed)``, in the
    order given: a page that holds one routed question, as a set sampled from a larger one might (docs/results.md,
    "A section over several paragraphs"). Questions without gold documents are kept."""
    import numpy as np

    items = list(items)
    groups: dict[tuple, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(tuple(sorted(it.gold_doc_ids)) or ("", i), []).append(i)
    rng = np.random.default_rng(seed)
    keep = {int(rows[rng.integers(len(rows))]) for rows in groups.values()}
    return [it for i, it in enumerate(items) if i in keep]


def question_headings(items: Iterable[QAItem], documents: Iterable[Document]) -> list[Document]:
    """Each document with each question's text written as a line above the question's gold evidence (its first
    gold text, where its gold document holds it verbatim at the start of a block), a blank line after it: a page of
    questions and their answers, as a consumer-health site writes one (docs/results.md, "Question lines of any
    length"). A text that several questions share is headed once, by the first; ids, titles and order kept."""
    above: dict[str, dict[str, str]] = {}  # document id -> gold text -> the question written above it
    for it in items:
        if it.gold_evidence and it.gold_evidence[0].strip():
            for g in it.gold_doc_ids:
                above.setdefault(g, {}).setdefault(it.gold_evidence[0].strip(), " ".join(it.question.split()))
    out: list[Document] = []
    for d in documents:
        text, at = d.content, []
        for gold, question in above.get(d.id, {}).items():
            k = text.find(gold)
            while k > 0 and text[k - 1] != "\n":  # the gold text must open a block, not sit inside one
                k = text.find(gold, k + 1)
            if k >= 0:
                at.append((k, question))
        for k, question in sorted(at, reverse=True):  # from the end, so that earlier offsets hold
            text = f"{text[:k]}{question}\n\n{text[k:]}"
        out.append(Document(id=d.id, title=d.title, content=text))
    return out


def write_generic(items: Iterable[QAItem], documents: Iterable[Document], out: Path) -> tuple[int, int]:
    """Write ``out``/questions.jsonl and ``out``/corpus.jsonl (each atomically; the documents in the order given,
    which the set-shape decisions read: a source's sections beside each other). Returns (questions, documents)."""
    out = Path(out)
    qs = [json.dumps(question_record(it)) + "\n" for it in items]
    docs = [json.dumps({"id": d.id, "title": d.title, "content": d.content}) + "\n" for d in documents]
    write_text_atomic(out / "corpus.jsonl", "".join(docs))
    write_text_atomic(out / "questions.jsonl", "".join(qs))
    return len(qs), len(docs)
