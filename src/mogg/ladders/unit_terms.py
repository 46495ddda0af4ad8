"""A ladder's units tokenized once; every level's BM25 term counts derived from them.

The levels of a ladder are built from the same units: a chunk whose text is not stored is its
units' texts joined by spaces (:meth:`mogg.ladders.base.Level.chunk_texts`). Tokenizing such a chunk
gives its units' tokens one after the other (a ``\\w+`` token never spans the joining space, and
lower-casing acts per character), so a level's term counts are the units' counts summed over its
coverage: ``tf_level [V, C] = tf_units [V, U] @ coverage.T [U, C]``, lengths ``coverage @ unit_len``.
Tokenizing each level's chunk texts instead costs one tokenizer pass per level over the whole
corpus again (five passes for a 5-level MoG ladder; 16 sentences per top-level chunk).

:class:`LadderTerms` tokenizes the units once (per stop-word setting) on first use and hands each
level a :class:`LevelTerms`: the level's ``(vocab, tf, doc_len)`` exactly as
:meth:`BM25Retriever.count_terms` makes them from the chunk texts (vocabulary in first-occurrence
order over the chunk texts, so indexes and scores are bit-identical; a test holds them to it), and
the chunks' token strings for engines that take pre-tokenized text. Levels with stored texts
(RAPTOR summaries) are tokenized from those texts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from mogg.core.text import encode_texts
from mogg.ladders.base import Ladder

__all__ = ["LadderTerms", "LevelTerms", "UnitTerms"]


@dataclass
class UnitTerms:
    """Term ids of texts: ``vocab`` in first-occurrence order, ``ids`` int64 [T] all tokens one
    text after the other, ``ptr`` int64 [N + 1] where text i's tokens start."""

    vocab: list[str]
    ids: np.ndarray
    ptr: np.ndarray
    _strings: list[str] | None = field(default=None, repr=False)
    _tf: sp.csr_matrix | None = field(default=None, repr=False)

    @classmethod
    def from_texts(cls, texts, stopwords: bool) -> "UnitTerms":
        vocab, ids, lengths = encode_texts(texts, stopwords)
        return cls(vocab, ids, np.r_[0, np.cumsum(lengths)].astype(np.int64))

    def __len__(self) -> int:
        return len(self.ptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.ptr)

    def strings(self) -> list[str]:
        """Every text's tokens joined by single spaces (memoised: levels share them)."""
        if self._strings is None:
            vocab, ids = self.vocab, self.ids.tolist()
            ptr = self.ptr.tolist()
            self._strings = [" ".join([vocab[t] for t in ids[a:b]]) for a, b in zip(ptr[:-1], ptr[1:])]
        return self._strings

    def counts(self) -> sp.csr_matrix:
        """tf [V, N] float64 CSR (sorted indices, duplicates summed; memoised: levels share it)."""
        if self._tf is not None:
            return self._tf
        cols = np.repeat(np.arange(len(self), dtype=np.int64), self.lengths)
        tf = sp.csr_matrix((np.ones(len(self.ids)), (self.ids, cols)), shape=(len(self.vocab), len(self)))
        tf.sum_duplicates()
        self._tf = tf
        return tf


@dataclass
class LevelTerms:
    """One level's chunks as terms (see the module doc)."""

    unit_terms: UnitTerms  # of the units, or of the level's own stored texts (then coverage is None)
    coverage: sp.csr_matrix | None  # [C, U] chunks x units, or None: chunk i is text i of unit_terms

    def __len__(self) -> int:
        return len(self.unit_terms) if self.coverage is None else self.coverage.shape[0]

    def counts(self) -> tuple[list[str], sp.csr_matrix, np.ndarray]:
        """``(vocab, tf [V, C] float64 CSR, doc_len int64 [C])``, equal to
        ``BM25Retriever.count_terms(chunk_texts)``: vocabulary in first-occurrence order over the chunk texts."""
        ut = self.unit_terms
        if self.coverage is None:
            return list(ut.vocab), ut.counts(), ut.lengths.astype(np.int64)
        cov = self.coverage.tocsr()
        cov.sort_indices()  # a chunk's text joins its units in ascending order
        unit_tf = ut.counts()  # built on first use (an engine reading token_texts never needs it)
        ones = sp.csr_matrix((np.ones(cov.nnz), cov.indices, cov.indptr), shape=cov.shape)  # 0/1 float64
        tf = (unit_tf @ ones.T).tocsr()  # [V, C]: counts summed over each chunk's units
        doc_len = np.asarray(ones @ ut.lengths.astype(np.float64)).astype(np.int64)
        if cov.nnz == len(ut) and np.array_equal(cov.indices, np.arange(len(ut))):
            # every unit once, in corpus order (nested MoG levels): the chunk texts read the units'
            # tokens in their order, so the units' vocabulary order is the level's
            tf.sort_indices()
            return list(ut.vocab), tf, doc_len
        order = self._first_occurrence(cov)  # level term i is unit term order[i]
        tf = tf[order]
        tf.sort_indices()
        return [ut.vocab[t] for t in order], tf, doc_len

    def _first_occurrence(self, cov: sp.csr_matrix) -> np.ndarray:
        # A chunk's tokens are its units' tokens in order, so over the chunk texts (in chunk order)
        # the first occurrence of every term is its first occurrence in the units' token streams
        # gathered in coverage order. Only each unit's first sighting of a term can be that, so the
        # gather takes every unit's distinct terms in their order of first sighting ([P] <= tokens).
        ut = self.unit_terms
        first_in_unit = _distinct_in_order(ut)  # (terms int64 [P], ptr [U + 1])
        terms, ptr = first_in_unit
        lens = np.diff(ptr)[cov.indices]  # distinct terms of each covered unit, in coverage order
        starts = np.repeat(ptr[cov.indices] - np.r_[0, np.cumsum(lens)[:-1]], lens)
        seq = terms[starts + np.arange(int(lens.sum()))]
        present, first = np.unique(seq, return_index=True)
        return present[np.argsort(first, kind="stable")]

    def token_texts(self) -> Iterator[str]:
        """Each chunk's tokens joined by single spaces (for engines that index pre-tokenized text)."""
        unit_str = self.unit_terms.strings()
        if self.coverage is None:
            yield from unit_str
            return
        cov = self.coverage.tocsr()
        cov.sort_indices()
        ind = cov.indices.tolist()
        ptr = cov.indptr.tolist()
        for c in range(cov.shape[0]):
            parts = [unit_str[u] for u in ind[ptr[c]:ptr[c + 1]]]
            yield " ".join(p for p in parts if p)


def _distinct_in_order(ut: UnitTerms) -> tuple[np.ndarray, np.ndarray]:
    """Every text's distinct term ids in order of first sighting: (terms int64 [P], ptr int64 [N + 1])."""
    n = len(ut)
    if len(ut.ids) == 0:
        return np.zeros(0, np.int64), np.zeros(n + 1, np.int64)
    unit = np.repeat(np.arange(n, dtype=np.int64), ut.lengths)
    key = unit * max(len(ut.vocab), 1) + ut.ids  # (unit, term) pairs
    _, first = np.unique(key, return_index=True)  # first position of every distinct pair
    first.sort()  # token order = unit order, then first sighting inside the unit
    terms = ut.ids[first]
    ptr = np.searchsorted(unit[first], np.arange(n + 1))
    return terms, ptr.astype(np.int64)


class LadderTerms:
    """A ladder's units tokenized once per stop-word setting; :meth:`level` gives each level's terms."""

    def __init__(self, ladder: Ladder) -> None:
        self.ladder = ladder
        self._units: dict[bool, UnitTerms] = {}
        self.tokenizer_passes = 0  # texts passes over the corpus (units, or a level's stored texts)

    def units(self, stopwords: bool) -> UnitTerms:
        if stopwords not in self._units:
            self._units[stopwords] = UnitTerms.from_texts(self.ladder.units.text, stopwords)
            self.tokenizer_passes += 1
        return self._units[stopwords]

    def level(self, j: int, stopwords: bool) -> LevelTerms:
        lv = self.ladder.levels[j]
        if lv.texts is not None:  # stored chunk texts (summaries): they are the level's own tokens
            self.tokenizer_passes += 1
            return LevelTerms(UnitTerms.from_texts(lv.texts, stopwords), None)
        return LevelTerms(self.units(stopwords), lv.coverage)
