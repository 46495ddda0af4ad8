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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

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


class _Hasher:
    """Word n-gram hashes, vectorized: every word gets a random odd 64-bit value (one table, seeded,
    grown as new words appear) and an n-gram at position i hashes to the polynomial
    ``sum_j value[w_(i+j)] * P^(n-1-j)`` mod 2^64, built for all positions at once in n steps
    (numpy's uint64 arithmetic wraps, which is the modulus). Collisions: about N^2 / 2^65 for N
    distinct n-grams, none in practice; the exact-match reference in the tests agrees."""

    P = np.uint64(0x9E3779B97F4A7C15)  # odd, so multiplying by it loses no bits mod 2^64

    def __init__(self, seed: int = 0) -> None:
        self.vocab: dict[str, int] = {}
        self.values = np.zeros(0, dtype=np.uint64)
        self.rng = np.random.default_rng(seed)

    def ids(self, toks: list[str]) -> np.ndarray:
        get = self.vocab.setdefault
        out = np.fromiter((get(t, len(self.vocab)) for t in toks), dtype=np.int64, count=len(toks))
        if len(self.vocab) > len(self.values):
            more = self.rng.integers(0, 2**63, size=len(self.vocab) - len(self.values), dtype=np.uint64)
            self.values = np.concatenate([self.values, more * np.uint64(2) + np.uint64(1)])
        return out

    def grams(self, ids: np.ndarray, ends: np.ndarray, sizes) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per size n: (start positions, hashes) of the n-grams of the token ids [T] that end within
        their own text (``ends`` [T]: the end position of the text each token belongs to)."""
        vals, out, h = self.values[ids], {}, np.zeros(len(ids), dtype=np.uint64)
        pos = np.arange(len(ids))
        with np.errstate(over="ignore"):
            for n in range(1, max(sizes, default=0) + 1):
                if n > len(ids):  # no n-gram this long in these texts
                    break
                h = h[:len(ids) - n + 1] * self.P + vals[n - 1:]  # h[i]: the n-gram starting at i
                if n in sizes:
                    ok = pos[:len(h)] + n <= ends[:len(h)]
                    out[n] = (pos[:len(h)][ok], h[ok])
        return out


class _Passages:
    """Texts to look for in documents: per passage its n-gram size, its distinct n-gram hashes and
    the number of them one document must hold."""

    def __init__(self, hasher: _Hasher) -> None:
        self.hasher = hasher
        self.item: list[int] = []
        self.size: list[int] = []
        self.need: list[float] = []
        self.hashes: list[np.ndarray] = []

    def add(self, item: int, toks: list[str], n: int, share: float) -> None:
        n = min(n, len(toks))
        ids = self.hasher.ids(toks)
        h = np.unique(self.hasher.grams(ids, np.full(len(ids), len(ids)), {n})[n][1])
        self.item.append(item)
        self.size.append(n)
        self.need.append(share * len(h))
        self.hashes.append(h)

    def sizes(self) -> set[int]:
        return set(self.size)

    def found_in(self, doc_grams: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """(passage, document) pairs where the document holds enough of the passage's n-grams,
        sorted by document then passage; ``doc_grams``: per size, (document [G], hash [G])."""
        size = np.asarray(self.size)
        found_p, found_d = [], []
        for n in sorted(set(self.size)):
            if n not in doc_grams:
                continue
            ps = np.flatnonzero(size == n)
            p_of = np.repeat(ps, [len(self.hashes[p]) for p in ps])  # passage of each of their n-grams
            p_hash = np.concatenate([self.hashes[p] for p in ps])
            d_doc, d_hash = doc_grams[n]
            keep = np.isin(d_hash, p_hash)  # documents' n-grams some passage has
            pairs = np.unique(np.stack([d_hash[keep], d_doc[keep].astype(np.uint64)], axis=1), axis=0)  # distinct per document
            order = np.argsort(pairs[:, 0], kind="stable")
            pairs = pairs[order]
            lo = np.searchsorted(pairs[:, 0], p_hash, side="left")
            hi = np.searchsorted(pairs[:, 0], p_hash, side="right")
            reps = hi - lo
            if not reps.sum():
                continue
            rows = np.repeat(lo - np.cumsum(np.r_[0, reps[:-1]]), reps) + np.arange(reps.sum())  # each match's row
            doc = pairs[rows, 1].astype(np.int64)
            key, count = np.unique(np.stack([doc, np.repeat(p_of, reps)], axis=1), axis=0, return_counts=True)
            hit = count >= np.asarray(self.need)[key[:, 1]]
            found_d.append(key[hit, 0])
            found_p.append(key[hit, 1])
        if not found_p:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        d, p = np.concatenate(found_d), np.concatenate(found_p)
        order = np.lexsort((p, d))
        return p[order], d[order]


BLOCK_TOKENS = 4_000_000  # documents are scanned in blocks of about this many tokens (~100 MB of arrays)


def find_leaks(corpus_files: Sequence[Path], question_files: Sequence[Path], doc_ids: Sequence[str],
               doc_texts: Iterable[tuple[int, str]], items: Sequence[QAItem]) -> LeakReport:
    """What the corpus shares with the questions (see the module doc).

    ``doc_texts`` yields (document index into ``doc_ids``, text); it is read once, in blocks of
    documents whose n-grams are hashed and joined with the passages' in numpy (no loop over n-grams).
    """
    rep = LeakReport()
    qd = _digests(question_files)
    rep.same_files = [(path, qd[d]) for d, path in _digests(corpus_files).items() if d in qd]
    have = set(doc_ids)
    rep.gold_ids = [(it.id, g) for it in items for g in it.gold_doc_ids if g in have]
    hasher = _Hasher()
    evidence, questions = _Passages(hasher), _Passages(hasher)
    answers: dict[int, np.ndarray] = {}  # passage -> the ids of its answer's first words
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
            answers[len(questions.item) - 1] = hasher.ids(a[:SHINGLE])
    rep.n_evidence = len(with_evidence)
    sizes = evidence.sizes() | questions.sizes()
    if not sizes:
        return rep
    seen_ev, seen_qa = set(), set()
    heart, bar = Heartbeat(log), progress(total=len(doc_ids), desc="leakage scan", unit="doc")
    block: list[tuple[int, list[str]]] = []
    n_tokens = n_done = 0

    def scan(block: list[tuple[int, list[str]]]) -> None:
        docs = np.fromiter((d for d, _ in block), dtype=np.int64, count=len(block))
        lens = np.fromiter((len(t) for _, t in block), dtype=np.int64, count=len(block))
        ids = hasher.ids([w for _, t in block for w in t])
        ends = np.repeat(np.cumsum(lens), lens)
        doc_of = np.repeat(docs, lens)
        starts, row = np.cumsum(lens) - lens, {int(d): j for j, d in enumerate(docs)}  # each document's first token
        grams = {n: (doc_of[pos], h) for n, (pos, h) in hasher.grams(ids, ends, sizes).items()}
        for p, d in zip(*evidence.found_in(grams)):
            pair = (items[evidence.item[p]].id, doc_ids[d])
            if pair not in seen_ev:
                seen_ev.add(pair)
                rep.evidence.append(pair)
        for p, d in zip(*questions.found_in(grams)):
            pair = (items[questions.item[p]].id, doc_ids[d])
            if pair in seen_qa:
                continue
            j = row[int(d)]
            if _holds(ids[starts[j]:starts[j] + lens[j]], answers[p]):  # ... together with its answer
                seen_qa.add(pair)
                rep.qa.append(pair)

    for d, text in doc_texts:
        toks = tokenize(text)
        block.append((d, toks))
        n_tokens += len(toks)
        n_done += 1
        bar.update()
        heart.beat(lambda n=n_done: f"leakage scan: {n} of {len(doc_ids)} documents")
        if n_tokens >= BLOCK_TOKENS:
            scan(block)
            block, n_tokens = [], 0
    if block:
        scan(block)
    bar.close()
    return rep


def _holds(doc: np.ndarray, words: np.ndarray) -> bool:
    """Whether the token ids ``doc`` hold the run ``words`` (an answer's first words) verbatim."""
    n = len(words)
    if n == 0 or len(doc) < n:
        return False
    windows = np.lib.stride_tricks.sliding_window_view(doc, n)
    return bool((windows == words).all(axis=1).any())


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
