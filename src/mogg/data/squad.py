"""SQuAD-format extractive QA (COVID-QA) as a gold-evidence set: papers as documents, the
sentences that hold each annotated answer as gold evidence.

The evidence rule (stated once, used by :class:`SquadQA` and tested on hand-made records):

1. The answer span is located in its paper: at ``answer_start`` when the paper's text there
   equals the answer text; otherwise at the occurrence of the (whitespace-stripped) answer text
   nearest to ``answer_start`` (COVID-QA's offsets are often one character early, before a
   leading space); otherwise at the nearest case-insensitive occurrence. An answer found
   nowhere in its paper drops the question (counted and logged), never a guessed span.
2. The paper is split into sentences by :func:`mogg.core.text.split_sentences`, the splitter every
   sentence ladder uses, so the evidence is made of the same units the ladders index.
3. Gold evidence = every sentence that overlaps the located answer span, in paper order; the
   gold document = the paper. The answer text itself is never the evidence: a short span
   ("14 days") would make token F1 reward contexts that merely contain two words, while a
   sentence is what a reader needs to see the answer in context.
4. With ``evidence="paragraph"`` (the one-topic-page shape, ``questions=covidqa_paragraphs``) the gold evidence is
   every sentence of the paragraphs (:func:`mogg.core.text.paragraphs`, the ladders' paragraphs) that hold a
   sentence of step 3: one section of a one-topic page, read whole, as a consumer-health answer is.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.core.text import split_sentences, unit_paragraphs
from mogg.data.corpus import Located, _Source
from mogg.data.errors import DataError
from mogg.data.files import load_json
from mogg.data.qa import _check_limit, _QASet
from mogg.data.records import Document, QAItem

logger = logging.getLogger(__name__)

_WORD_RE = re.compile(r"\S+")


@dataclass(frozen=True)
class SquadQuestion:
    id: str
    question: str
    answer: str
    answer_start: int


@dataclass(frozen=True)
class SquadPaper:
    document_id: str
    context: str
    questions: tuple[SquadQuestion, ...]


def _field(obj: dict, key: str, types: type | tuple, path: str, what: str):
    if not isinstance(obj, dict) or key not in obj:
        raise DataError(path, f"{what}: missing {key!r}")
    value = obj[key]
    if not isinstance(value, types) or isinstance(value, bool):
        raise DataError(path, f"{what}: {key!r} must be {getattr(types, '__name__', types)}, "
                              f"got {type(value).__name__}")
    return value


def read_papers(path: str | os.PathLike) -> list[SquadPaper]:
    """Every paragraph of a SQuAD file as a paper (COVID-QA: one paragraph per paper), validated:
    each problem is a :class:`DataError` naming the file and the record."""
    path = os.fspath(path)
    data = load_json(path)
    articles = _field(data, "data", list, path, "top level")
    papers, seen_docs, seen_q = [], set(), set()
    for a, article in enumerate(articles):
        for p, par in enumerate(_field(article, "paragraphs", list, path, f"data[{a}]")):
            what = f"data[{a}].paragraphs[{p}]"
            context = _field(par, "context", str, path, what)
            doc_id = str(par.get("document_id", f"{a}.{p}")) if isinstance(par, dict) else ""
            if doc_id in seen_docs:
                raise DataError(path, f"{what}: duplicate document_id {doc_id!r}")
            seen_docs.add(doc_id)
            qs = []
            for j, qa in enumerate(_field(par, "qas", list, path, what)):
                qwhat = f"{what}.qas[{j}]"
                qid = str(_field(qa, "id", (str, int), path, qwhat))
                if qid in seen_q:
                    raise DataError(path, f"{qwhat}: duplicate question id {qid!r}")
                seen_q.add(qid)
                if qa.get("is_impossible"):
                    continue  # SQuAD 2.0 unanswerable: no evidence to find
                answers = _field(qa, "answers", list, path, qwhat)
                if not answers:
                    continue
                text = _field(answers[0], "text", str, path, f"{qwhat}.answers[0]")
                start = _field(answers[0], "answer_start", int, path, f"{qwhat}.answers[0]")
                qs.append(SquadQuestion(qid, _field(qa, "question", str, path, qwhat).strip(), text, start))
            papers.append(SquadPaper(doc_id, context, tuple(qs)))
    return papers


def locate_answer(context: str, answer: str, start: int) -> tuple[int, int] | None:
    """The answer's character span [begin, end) in ``context`` by the evidence rule (step 1)."""
    if answer and context[start:start + len(answer)] == answer:
        return start, start + len(answer)
    needle = answer.strip()
    if not needle:
        return None
    for hay, pat in ((context, needle), (context.lower(), needle.lower())):
        hits = [m.start() for m in re.finditer(re.escape(pat), hay)]
        if hits:
            best = min(hits, key=lambda h: abs(h - start))
            return best, best + len(needle)
    return None


def sentence_spans(context: str) -> tuple[list[str], np.ndarray]:
    """The paper's sentences (as :func:`split_sentences` returns them) and each one's character
    span in ``context``: [S, 2] int64 (begin, end)."""
    sentences = split_sentences(context)
    words = [(m.start(), m.end()) for m in _WORD_RE.finditer(context)]
    spans = np.zeros((len(sentences), 2), dtype=np.int64)
    w = 0
    for i, sent in enumerate(sentences):
        # split_sentences only re-joins whitespace, so each sentence is a run of the text's words
        n = len(sent.split())
        spans[i] = (words[w][0], words[w + n - 1][1])
        w += n
    if w != len(words):
        raise AssertionError(f"sentence split lost words: {w} of {len(words)}")
    return sentences, spans


def covering(spans: np.ndarray, begin: int, end: int) -> np.ndarray:
    """Which sentences [S] (bool; ``spans`` [S, 2]: :func:`sentence_spans`) overlap [begin, end) (step 3)."""
    return (spans[:, 0] < end) & (spans[:, 1] > begin)


def covering_sentences(sentences: list[str], spans: np.ndarray, begin: int, end: int) -> list[str]:
    """The sentences overlapping [begin, end) (step 3), in order."""
    return [sentences[i] for i in np.flatnonzero(covering(spans, begin, end))]


EVIDENCE = ("sentences", "paragraph")  # the gold evidence: the answer's sentences (steps 1-3), or their paragraphs (4)


def evidence_questions(papers: list[SquadPaper], prefix: str, dataset: str, evidence: str = "sentences"
                       ) -> tuple[list[QAItem], int]:
    """QA items with gold evidence by the rule (``evidence``: :data:`EVIDENCE`); returns (items, questions dropped:
    answer not found)."""
    if evidence not in EVIDENCE:
        raise ValueError(f"evidence must be one of {EVIDENCE}, got {evidence!r}")
    items, dropped = [], 0
    for paper in papers:
        if not paper.questions:
            continue
        sentences, spans = sentence_spans(paper.context)
        para = unit_paragraphs(paper.context, sentences) if evidence == "paragraph" else None
        for q in paper.questions:
            span = locate_answer(paper.context, q.answer, q.answer_start)
            hit = covering(spans, *span) if span else np.zeros(len(sentences), dtype=bool)
            if para is not None:  # every sentence of the paragraphs holding the answer's sentences (step 4)
                hit = np.isin(para, para[hit])
            evidence_ = [sentences[i] for i in np.flatnonzero(hit)]
            if not evidence_:
                dropped += 1
                continue
            items.append(QAItem(id=q.id, question=q.question, answer=q.answer.strip(),
                                gold_doc_ids=[f"{prefix}:{paper.document_id}"], gold_evidence=evidence_,
                                dataset=dataset))
    return items, dropped


class SquadPapers(_Source):
    """A SQuAD file's papers as documents: id = ``{prefix}:{document_id}``, content = the paper."""

    def __init__(self, path: str, prefix: str = "covidqa") -> None:
        self.path = os.fspath(path)
        self.prefix = str(prefix)

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def params(self) -> dict:
        return {"path": self.path, "prefix": self.prefix}

    def located(self) -> Iterator[Located]:
        for paper in read_papers(self.path):
            if paper.context.strip():
                yield Document(id=f"{self.prefix}:{paper.document_id}", title="", content=paper.context), \
                    self.path, None


class SquadQA(_QASet):
    """A SQuAD-format set (COVID-QA) with gold evidence by the module's rule (``evidence``: the answer's sentences,
    or their paragraphs); no options, the answer is the annotated span's text; ``limit`` keeps the first questions
    in file order."""

    def __init__(self, path: str, prefix: str = "covidqa", dataset: str = "covidqa", limit: int | None = None,
                 evidence: str = "sentences") -> None:
        if evidence not in EVIDENCE:
            raise ValueError(f"SquadQA: evidence must be one of {EVIDENCE}, got {evidence!r}")
        self.path = os.fspath(path)
        self.prefix = str(prefix)
        self.dataset = str(dataset)
        self.limit = _check_limit(limit)
        self.evidence = evidence

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def params(self) -> dict:
        # named only where set: the sentence evidence keeps its fingerprint (and its cached artifacts)
        return {"path": self.path, "prefix": self.prefix, "dataset": self.dataset, "limit": self.limit,
                **({"evidence": self.evidence} if self.evidence != "sentences" else {})}

    def load(self) -> list[QAItem]:
        items, dropped = evidence_questions(read_papers(self.path), self.prefix, self.dataset, self.evidence)
        if dropped:
            logger.warning("%s: %d question(s) dropped: the answer text is not in its paper", self.path, dropped)
        if not items:
            raise DataError(self.path, "no answerable question with a locatable answer")
        n_sent = np.array([len(it.gold_evidence) for it in items])
        logger.info("%s: %d questions, evidence %.2f sentences on average (%d span two or more)",
                    self.path, len(items), n_sent.mean(), int((n_sent > 1).sum()))
        return items[: self.limit] if self.limit is not None else items
