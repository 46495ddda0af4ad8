"""The evidence selector's lexical statistics, split by what they depend on.

**Per ladder** (:class:`UnitTerms`): every unit's tokens and content words as sparse term matrices
over the ladder's vocabulary. They need the whole corpus (IDF counts the units holding a word), so
they are built once per ladder and kept in the artifact store beside it (:func:`unit_terms`), like a
BM25 index: a selector run, a rerun or ``mogg-route`` then reads them and touches only the rows of
its candidates, so its cost follows the questions, not the corpus (issue 48).

**Per question set** (:class:`Lexicon`): the questions' and their answer options' words over that
vocabulary (a word no unit holds gets document frequency 0), IDF weights, and the lexical matches
of (question, unit) rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mogg.core.bounded import read_json
from mogg.core.text import tokenize
from mogg.ladders.base import Ladder

log = logging.getLogger(__name__)

# bump when the tokenization or the layout below changes: stored term matrices are then rebuilt
TERMS_VERSION = 1


def _ids(texts, vocab: dict[str, int], stop: bool) -> tuple[list[int], list[int]]:
    """Token ids (new words added to ``vocab``) of ``texts`` as CSR indices and pointers."""
    get = vocab.setdefault
    ind, ptr = [], [0]
    for t in texts:
        ind.extend(get(w, len(vocab)) for w in tokenize(t, stopwords=stop))
        ptr.append(len(ind))
    return ind, ptr


def _csr(ind: list[int] | np.ndarray, ptr: list[int] | np.ndarray, n_v: int) -> sp.csr_matrix:
    m = sp.csr_matrix((np.ones(len(ind), dtype=np.float32), np.asarray(ind, dtype=np.int64), np.asarray(ptr)),
                      shape=(len(ptr) - 1, max(n_v, 1)))
    m.sum_duplicates()  # counts per (row, word)
    return m


def _widen(m: sp.csr_matrix, n_v: int) -> sp.csr_matrix:
    """``m`` with ``n_v`` columns (words added after it was built hold no entry; no copy)."""
    return sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], max(n_v, 1)))


@dataclass
class UnitTerms:
    """A ladder's units over its vocabulary: ``counts`` float32 [U, V] (every token, per word),
    ``content`` float32 [U, V] (1 where the unit holds the content word), ``vocab`` (word -> column)."""

    vocab: dict[str, int]
    counts: sp.csr_matrix
    content: sp.csr_matrix

    @classmethod
    def build(cls, ladder: Ladder) -> "UnitTerms":
        """Tokenize every unit (the corpus scan: once per ladder)."""
        vocab: dict[str, int] = {}
        units = list(ladder.units.text)
        every, content = _ids(units, vocab, False), _ids(units, vocab, True)
        return cls(vocab, _csr(*every, len(vocab)), (_csr(*content, len(vocab)) > 0).astype(np.float32).tocsr())

    def save(self, d: Path) -> None:
        words = [""] * len(self.vocab)
        for w, i in self.vocab.items():
            words[i] = w
        (d / "vocab.json").write_text(json.dumps(words))
        sp.save_npz(d / "counts.npz", self.counts)
        sp.save_npz(d / "content.npz", self.content)

    def digest(self) -> str:
        """sha256 of the vocabulary in column order and of every unit's token count."""
        words = [""] * len(self.vocab)
        for w, i in self.vocab.items():
            words[i] = w
        return _digest(words, np.asarray(self.counts.sum(axis=1)).ravel())

    @classmethod
    def load(cls, d: Path, digest: str | None = None) -> "UnitTerms":
        """Read ``d``; with ``digest`` (:meth:`digest` of the terms as built) its vocabulary, in
        column order, and every unit's token count must be the ladder's: a reordered or edited
        ``vocab.json`` (its manifest re-signed) is refused (``ValueError`` naming it)."""
        words = read_json(d / "vocab.json")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"{d / 'vocab.json'}: not a list of words")
        counts, content = (sp.load_npz(d / f).tocsr() for f in ("counts.npz", "content.npz"))
        if counts.shape != content.shape or counts.shape[1] != max(len(words), 1):
            raise ValueError(f"{d}: unit term matrices {counts.shape} / {content.shape} do not match its "
                             f"{len(words)}-word vocabulary; remove the folder to rebuild it")
        if digest is not None and _digest(words, np.asarray(counts.sum(axis=1)).ravel()) != digest:
            raise ValueError(f"{d / 'vocab.json'}: its words, their order or the units' token counts are not the "
                             "ladder's (edited or reordered)")
        return cls({w: i for i, w in enumerate(words)}, counts, content)


def _digest(words: list[str], n_tokens: np.ndarray) -> str:
    h = hashlib.sha256("\n".join(words).encode("utf-8", "surrogatepass"))
    h.update(np.asarray(n_tokens, dtype=np.int64).tobytes())
    return h.hexdigest()


def unit_terms(ladder: Ladder, ladder_key: dict | None = None, artifacts: Path | None = None) -> UnitTerms:
    """The ladder's :class:`UnitTerms`: read from the artifact store beside the ladder (``ladder_key``:
    the ladder's artifact key), built and stored there the first time; built in memory without a store.

    The vocabulary's digest (its words in column order and every unit's token count) is written in an
    entry of its own (``unit_vocab``) when the terms are first built, and binds the terms' key; reading
    them checks the stored vocabulary against it: a damaged, edited or reordered ``vocab.json``, even
    with its manifest re-signed, is named in a warning and rebuilt (it is derived data). A later run
    or ``mogg-route`` never tokenizes the units again: cost follows the questions."""
    if artifacts is None or ladder_key is None:
        return UnitTerms.build(ladder)
    from mogg.core.artifacts import cached

    base = {"ladder": ladder_key, "units": len(ladder.units), "version": TERMS_VERSION}
    built: list[UnitTerms] = []  # terms built to learn the digest, stored below (one tokenizer pass)

    def first_digest() -> str:
        built.append(UnitTerms.build(ladder))
        return built[0].digest()

    digest = cached(Path(artifacts), "unit_vocab", base, build=first_digest,
                    save=lambda h, d: (d / "digest.json").write_text(json.dumps(h)),
                    load=lambda d: _read_digest(d / "digest.json"), derived=True)
    def rebuilt() -> UnitTerms:  # the digest entry stands; the terms were missing or damaged
        t = UnitTerms.build(ladder)
        if t.digest() != digest:
            from mogg.core.artifacts import artifact_dir

            raise ValueError(f"{artifact_dir(Path(artifacts), 'unit_vocab', base)}: its vocabulary digest is not "
                             "the ladder's (edited or stale); remove that folder to rebuild it")
        return t

    terms = cached(Path(artifacts), "unit_terms", {**base, "vocab": digest},
                   build=lambda: built[0] if built else rebuilt(),
                   save=lambda t, d: t.save(d), load=lambda d: UnitTerms.load(d, digest), derived=True)
    if terms.counts.shape[0] != len(ladder.units):
        raise ValueError(f"stored unit terms hold {terms.counts.shape[0]} units, the ladder {len(ladder.units)}")
    return terms


def _read_digest(path: Path) -> str:
    h = read_json(path)
    if not (isinstance(h, str) and len(h) == 64 and all(c in "0123456789abcdef" for c in h)):
        raise ValueError(f"{path}: not a sha256 digest")
    return h


class Lexicon:
    """IDF over the ladder's units and sparse term matrices: units x terms (binary, counts),
    questions x terms and the questions' answer options x terms (all options of a question as one
    row; empty without options); unit token counts. ``terms``: the ladder's :class:`UnitTerms` (a
    :class:`~mogg.ladders.base.Ladder` builds them in memory)."""

    def __init__(self, terms: UnitTerms | Ladder, questions: list[str], options: list[str] | None = None):
        if isinstance(terms, Ladder):
            terms = UnitTerms.build(terms)
        opts = list(options) if options is not None else [""] * len(questions)
        if len(opts) != len(questions):
            raise ValueError(f"{len(opts)} option texts for {len(questions)} questions")
        vocab = dict(terms.vocab)  # the questions' words no unit holds are added after the units' words
        parts = [_ids(list(questions), vocab, True), _ids(opts, vocab, True)]
        n_v = max(len(vocab), 1)
        qm, om = (_csr(*p, n_v) for p in parts)
        self.vocab = vocab
        self.unit_counts = _widen(terms.counts, n_v)  # [U, V] token counts
        self.unit_tokens = np.asarray(terms.counts.sum(axis=1)).ravel()  # [U]
        n_units = terms.counts.shape[0]
        df = np.bincount(terms.content.indices, minlength=n_v)  # units holding each content word
        self.idf = np.log1p((n_units - df + 0.5) / (df + 0.5)).astype(np.float32)  # BM25's, >= 0
        self.unit_terms = _widen(terms.content, n_v)  # [U, V] binary
        self.question_terms = (qm > 0).astype(np.float32).multiply(self.idf[None, :]).tocsr()  # [Q, V] idf
        self.question_mass = np.asarray(self.question_terms.sum(axis=1)).ravel()  # [Q]
        self.option_terms = (om > 0).astype(np.float32).multiply(self.idf[None, :]).tocsr()  # [Q, V] idf
        self.option_mass = np.asarray(self.option_terms.sum(axis=1)).ravel()  # [Q]; 0: no options

    def option_match(self, q: np.ndarray, unit: np.ndarray, block: int = 200_000) -> np.ndarray:
        """Per (question, unit) row: the share of the IDF mass of the question's option words the
        unit holds (float64 [N]); NaN for a question without options: absent, not "matches nothing"
        (a set without options must not look like a corner of one with them; the scorer takes NaN
        as missing). In blocks of rows."""
        out = np.full(len(q), np.nan)
        has = self.option_mass[q] > 0
        if not has.any():  # no question has options (PubMedQA-style or open questions)
            return out
        for a in range(0, len(q), block):
            qi, ui = q[a:a + block], unit[a:a + block]
            m = np.asarray(self.option_terms[qi].multiply(self.unit_terms[ui]).sum(axis=1)).ravel()
            out[a:a + block] = np.where(has[a:a + block], m / np.maximum(self.option_mass[qi], 1e-9), np.nan)
        return out

    def match(self, q: np.ndarray, unit: np.ndarray, block: int = 200_000,
              bm25: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Per (question, unit) row: the IDF mass of the question's words the unit holds, and a
        BM25-style score (k1 = 1.2, b = 0.75 over unit lengths; zeros with ``bm25=False``), float64
        [N] each; in blocks of rows."""
        out = np.zeros(len(q)), np.zeros(len(q))
        if not len(q):
            return out
        avg = max(float(self.unit_tokens.mean()), 1.0)
        for a in range(0, len(q), block):
            qi, ui = q[a:a + block], unit[a:a + block]
            both = self.question_terms[qi].multiply(self.unit_terms[ui]).tocsr()  # idf where shared
            out[0][a:a + block] = np.asarray(both.sum(axis=1)).ravel()
            if not bm25:
                continue
            tf = self.unit_counts[ui].multiply(both > 0).tocsr()  # term frequency of the shared words
            norm = 1.2 * (0.25 + 0.75 * self.unit_tokens[ui] / avg)
            sat = tf.copy()
            sat.data = sat.data * 2.2 / (sat.data + np.repeat(norm, np.diff(sat.indptr)))
            out[1][a:a + block] = np.asarray(sat.multiply(self.idf[None, :]).sum(axis=1)).ravel()
        return out
