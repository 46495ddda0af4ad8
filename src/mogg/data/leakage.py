"""The leakage guard: a corpus must not hold the evaluated questions' answers or gold contexts.

Checked before retrieval (:func:`find_leaks`), three ways:

* **same split file**: a corpus file has the content (sha256) of a file the questions come from
  (MedMCQA's ``dev.json`` explanations for MIRAGE's MedMCQA questions, PubMedQA's
  ``test_set.json`` contexts for PubMedQA*);
* **gold document**: the corpus holds a document whose id is a question's gold document id
  (a PubMedQA* abstract by its PMID);
* **gold evidence**: a document contains most of a question's gold evidence text (word 12-grams:
  at least half of an evidence passage's 12-grams occur in one document).

A corpus that does is refused (:class:`LeakageError`, naming files and a few ids) unless the
experiment declares a gold-context setting (``corpus.allow_gold=true``), which every report states.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mogg.core.artifacts import sha256_file
from mogg.core.text import tokenize
from mogg.data.records import QAItem

SHINGLE = 12  # words per n-gram: long enough that boilerplate rarely matches
MIN_SHARE = 0.5  # share of an evidence passage's n-grams one document must hold


class LeakageError(ValueError):
    """The corpus holds what the evaluated questions are scored on."""


@dataclass
class LeakReport:
    same_files: list[tuple[str, str]] = field(default_factory=list)  # (corpus file, question file)
    gold_ids: list[tuple[str, str]] = field(default_factory=list)  # (question id, document id)
    evidence: list[tuple[str, str]] = field(default_factory=list)  # (question id, document id)

    @property
    def found(self) -> bool:
        return bool(self.same_files or self.gold_ids or self.evidence)

    def summary(self, examples: int = 3) -> str:
        parts = []
        if self.same_files:
            parts.append("corpus files with the content of the questions' own split files: "
                         + "; ".join(f"{c} = {q}" for c, q in self.same_files[:examples]))
        for what, pairs in (("gold documents (by id)", self.gold_ids), ("documents holding a question's gold evidence", self.evidence)):
            if pairs:
                qs = len({q for q, _ in pairs})
                parts.append(f"{len(pairs)} {what} for {qs} questions, e.g. "
                             + ", ".join(f"question {q} -> document {d}" for q, d in pairs[:examples]))
        return "; ".join(parts)


def _digests(paths: Iterable[Path]) -> dict[str, str]:
    out = {}
    for p in paths:
        p = Path(p)
        if p.is_file():
            out.setdefault(sha256_file(p), str(p))
    return out


def find_leaks(corpus_files: Sequence[Path], question_files: Sequence[Path], doc_ids: Sequence[str],
               doc_texts: Iterable[tuple[int, str]], items: Sequence[QAItem]) -> LeakReport:
    """What the corpus shares with the questions (see the module doc).

    ``doc_texts`` yields (document index into ``doc_ids``, text); it is only read when some
    question has gold evidence of at least :data:`SHINGLE` words.
    """
    rep = LeakReport()
    qd = _digests(question_files)
    rep.same_files = [(path, qd[d]) for d, path in _digests(corpus_files).items() if d in qd]
    have = set(doc_ids)
    rep.gold_ids = [(it.id, g) for it in items for g in it.gold_doc_ids if g in have]
    # evidence n-grams -> (question, passage) they belong to
    owners: dict[int, list[int]] = defaultdict(list)
    passages: list[tuple[str, int]] = []  # (question id, number of n-grams)
    for it in items:
        for ev in it.gold_evidence:
            toks = tokenize(ev)
            grams = {hash(tuple(toks[i:i + SHINGLE])) for i in range(len(toks) - SHINGLE + 1)}
            if grams:
                for g in grams:
                    owners[g].append(len(passages))
                passages.append((it.id, len(grams)))
    if not passages:
        return rep
    seen = set()
    for d, text in doc_texts:
        toks = tokenize(text)
        hits: dict[int, int] = defaultdict(int)
        for g in {hash(tuple(toks[i:i + SHINGLE])) for i in range(len(toks) - SHINGLE + 1)}:
            for p in owners.get(g, ()):
                hits[p] += 1
        for p, n in hits.items():
            qid, total = passages[p]
            if n >= MIN_SHARE * total and (qid, doc_ids[d]) not in seen:
                seen.add((qid, doc_ids[d]))
                rep.evidence.append((qid, doc_ids[d]))
    return rep


def guard(report: LeakReport, allow_gold: bool, corpus_name: str = "the corpus") -> list[str]:
    """Raise on a leak unless ``allow_gold``; returns the notes a report must print."""
    if report.found and not allow_gold:
        raise LeakageError(
            f"{corpus_name} holds what the evaluated questions are scored on: {report.summary()}. "
            "Retrieve from a corpus without them (e.g. corpus=textbooks), or declare a gold-context "
            "setting with corpus.allow_gold=true (the report will say so)."
        )
    if allow_gold:
        what = f" ({report.summary(examples=1)})" if report.found else " (none found)"
        return [f"gold-context setting (corpus.allow_gold=true): the corpus may hold the questions' gold "
                f"evidence{what}; these numbers measure finding and sizing the evidence, not open-domain retrieval"]
    return []
