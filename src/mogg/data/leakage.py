"""The leakage guard: a corpus must not hold the evaluated questions' answers or gold contexts.

Checked before retrieval (:func:`find_leaks`), four ways:

* **same split file**: a corpus file has the content (sha256) of a file the questions come from
  (MedMCQA's ``dev.json`` explanations for MIRAGE's MedMCQA questions, PubMedQA's
  ``test_set.json`` contexts for PubMedQA*);
* **gold document**: the corpus holds a document whose id is a question's gold document id
  (a PubMedQA* abstract by its PMID);
* **gold evidence**: a document contains most of a question's gold evidence text (word 12-grams:
  at least half of an evidence passage's 12-grams occur in one document; a passage of 4 to 11
  words must occur whole);
* **question with its answer**: a document holds the question (80% of its word 8-grams, or the
  whole question when shorter) and its answer text (a corpus built from the question set itself).

A corpus that does is refused (:class:`LeakageError`, naming files and a few ids) unless the
experiment declares a gold-context setting (``corpus.allow_gold=true``), which every report states.
When questions have gold evidence but no document holds any of it, the report says so: evidence
F1 then measures overlap with text the corpus lacks (:meth:`LeakReport.coverage_note`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mogg.core.artifacts import sha256_file
from mogg.core.progress import Heartbeat, progress
from mogg.core.text import tokenize
from mogg.data.records import QAItem

log = logging.getLogger(__name__)

SHINGLE = 12  # words per n-gram: long enough that boilerplate rarely matches
MIN_SHARE = 0.5  # share of an evidence passage's n-grams one document must hold
MIN_WORDS = 4  # shorter evidence is matched whole (a passage of 4..11 words verbatim in a document)
Q_SHINGLE = 8  # a question is "in" a document when it holds most of the question's 8-grams ...
Q_SHARE = 0.8  # (shorter questions: the whole question verbatim) together with the answer text


class LeakageError(ValueError):
    """The corpus holds what the evaluated questions are scored on."""


@dataclass
class LeakReport:
    same_files: list[tuple[str, str]] = field(default_factory=list)  # (corpus file, question file)
    gold_ids: list[tuple[str, str]] = field(default_factory=list)  # (question id, document id)
    evidence: list[tuple[str, str]] = field(default_factory=list)  # (question id, document id)
    qa: list[tuple[str, str]] = field(default_factory=list)  # (question id, document holding it with its answer)
    n_evidence: int = 0  # questions with gold evidence long enough to look for (>= MIN_WORDS words)

    @property
    def found(self) -> bool:
        return bool(self.same_files or self.gold_ids or self.evidence or self.qa)

    def summary(self, examples: int = 3) -> str:
        parts = []
        if self.same_files:
            parts.append("corpus files with the content of the questions' own split files: "
                         + "; ".join(c if c == q else f"{c} (= {q})" for c, q in self.same_files[:examples]))
        for what, pairs in (("gold documents (by id)", self.gold_ids), ("documents holding a question's gold evidence", self.evidence),
                            ("documents holding a question together with its answer", self.qa)):
            if pairs:
                qs = len({q for q, _ in pairs})
                parts.append(f"{len(pairs)} {what} for {qs} questions, e.g. "
                             + ", ".join(f"question {q} -> document {d}" for q, d in pairs[:examples]))
        return "; ".join(parts)

    def coverage_note(self) -> str | None:
        """A warning when questions have gold evidence but no document holds any of it: evidence F1
        then only measures word overlap with text the corpus does not have."""
        if self.n_evidence and not self.evidence:
            return (f"none of the {self.n_evidence} questions with gold evidence has it in any corpus document "
                    f"(whole, or half of its {SHINGLE}-word n-grams): evidence F1 measures word overlap with text the "
                    "corpus does not hold, and no share of the gap between the best fixed level and the oracle is reported")
        return None


def _digests(paths: Iterable[Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        p = Path(p)
        if p.is_file():
            out.setdefault(sha256_file(p), str(p))
    return out


def _grams(toks: list[str], n: int) -> set[int]:
    return {hash(tuple(toks[i:i + n])) for i in range(len(toks) - n + 1)}


class _Passages:
    """Texts to look for in documents: per passage its n-gram size, its n-grams, and the share of
    them one document must hold; indexed by (size, n-gram) -> passages."""

    def __init__(self) -> None:
        self.owners: dict[tuple[int, int], list[int]] = defaultdict(list)
        self.meta: list[tuple[int, int, float]] = []  # (item index, number of n-grams, share needed)

    def add(self, item: int, toks: list[str], n: int, share: float) -> None:
        n = min(n, len(toks))
        grams = _grams(toks, n)
        for g in grams:
            self.owners[(n, g)].append(len(self.meta))
        self.meta.append((item, len(grams), share))

    def sizes(self) -> set[int]:
        return {n for n, _ in self.owners}

    def found_in(self, doc_grams: dict[int, set[int]]) -> list[int]:
        """Passages the document (its n-grams per size) holds."""
        hits: dict[int, int] = defaultdict(int)
        for n, grams in doc_grams.items():
            for g in grams:
                for p in self.owners.get((n, g), ()):
                    hits[p] += 1
        return [p for p, k in hits.items() if k >= self.meta[p][2] * self.meta[p][1]]


def find_leaks(corpus_files: Sequence[Path], question_files: Sequence[Path], doc_ids: Sequence[str],
               doc_texts: Iterable[tuple[int, str]], items: Sequence[QAItem]) -> LeakReport:
    """What the corpus shares with the questions (see the module doc).

    ``doc_texts`` yields (document index into ``doc_ids``, text); it is read once, for the gold
    evidence (passages of :data:`MIN_WORDS` words or more) and for the questions themselves.
    """
    rep = LeakReport()
    qd = _digests(question_files)
    rep.same_files = [(path, qd[d]) for d, path in _digests(corpus_files).items() if d in qd]
    have = set(doc_ids)
    rep.gold_ids = [(it.id, g) for it in items for g in it.gold_doc_ids if g in have]
    evidence, questions = _Passages(), _Passages()
    answers: dict[int, list[str]] = {}
    with_evidence = set()
    for i, it in enumerate(items):
        for ev in it.gold_evidence:
            toks = tokenize(ev)
            if len(toks) >= MIN_WORDS:  # whole when short, else half of its 12-grams
                evidence.add(i, toks, SHINGLE, MIN_SHARE if len(toks) > SHINGLE else 1.0)
                with_evidence.add(i)
        q, a = tokenize(it.question), tokenize(it.answer_text)
        if len(q) >= 5 and a:
            questions.add(i, q, Q_SHINGLE, Q_SHARE if len(q) > Q_SHINGLE else 1.0)
            answers[i] = a
    rep.n_evidence = len(with_evidence)
    sizes = evidence.sizes() | questions.sizes()
    if not sizes:
        return rep
    seen_ev, seen_qa = set(), set()
    heart, bar = Heartbeat(log), progress(total=len(doc_ids), desc="leakage scan", unit="doc")
    for n_done, (d, text) in enumerate(doc_texts):
        bar.update()
        heart.beat(lambda n=n_done: f"leakage scan: {n} of {len(doc_ids)} documents")
        toks = tokenize(text)
        grams = {n: _grams(toks, n) for n in sizes}
        for p in evidence.found_in({n: grams[n] for n in evidence.sizes()}):
            pair = (items[evidence.meta[p][0]].id, doc_ids[d])
            if pair not in seen_ev:
                seen_ev.add(pair)
                rep.evidence.append(pair)
        for p in questions.found_in({n: grams[n] for n in questions.sizes()}):
            i = questions.meta[p][0]
            a = answers[i]
            pair = (items[i].id, doc_ids[d])
            if pair not in seen_qa and _grams(a[:SHINGLE], min(len(a), SHINGLE)) & _grams(toks, min(len(a), SHINGLE)):
                seen_qa.add(pair)
                rep.qa.append(pair)
    bar.close()
    return rep


def guard(report: LeakReport, allow_gold: bool, corpus_name: str = "the corpus") -> list[str]:
    """Raise on a leak unless ``allow_gold``; returns the notes a report must print."""
    if report.found and not allow_gold:
        raise LeakageError(
            f"{corpus_name} holds what the evaluated questions are scored on: {report.summary()}. "
            "Retrieve from a corpus without them (e.g. corpus=textbooks), or declare a gold-context "
            "setting with corpus.allow_gold=true (the report will say so)."
        )
    notes = [n for n in [report.coverage_note()] if n]
    if allow_gold:
        what = f" ({report.summary(examples=1)})" if report.found else " (none found)"
        notes.insert(0, f"gold-context setting (corpus.allow_gold=true): the corpus may hold the questions' gold "
                        f"evidence{what}; these numbers measure finding and sizing the evidence, not open-domain retrieval")
    return notes
