"""Retrieval-side metrics (no LLM): token P/R/F1, label similarity, gold-document hit, length.

Every metric returns per-question values (float64 [Q]); :func:`aggregate` turns them into
mean and standard error. Token overlap is computed for all questions at once with sparse count
matrices (multiset intersection = elementwise min).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from mogg.core.text import tokenize


class _TokenIds:
    """Token -> column id, shared by every count matrix of a process, with each text's id array
    memoised: an evaluation scores the same gold evidence and the same fixed-level contexts under
    every policy and budget, so most texts are tokenised once instead of tens of times."""

    def __init__(self, max_texts: int = 1 << 14):
        self.vocab: dict[str, int] = {}
        self.ids = lru_cache(maxsize=max_texts)(self._ids)

    def _ids(self, text: str, stopwords: bool) -> np.ndarray:
        toks = tokenize(text, stopwords=stopwords)
        v = self.vocab
        for t in sorted(set(toks).difference(v)):  # new tokens only (set ops in C), in a fixed order
            v[t] = len(v)
        return np.fromiter(map(v.__getitem__, toks), dtype=np.int64, count=len(toks))


@lru_cache(maxsize=1)
def _token_ids() -> _TokenIds:
    return _TokenIds()


def _count_matrix(texts: Sequence[str], stopwords: bool, n_cols: int | None = None):
    """Token counts, csr float64 [len(texts), n_cols] (columns: :class:`_TokenIds` ids)."""
    import scipy.sparse as sp

    tid = _token_ids()
    arrs = [tid.ids(t, stopwords) if isinstance(t, str) else _joined_ids(tid, t, stopwords) for t in texts]
    indptr = np.zeros(len(arrs) + 1, dtype=np.int64)
    np.cumsum([len(a) for a in arrs], out=indptr[1:])
    cols = np.concatenate(arrs) if arrs else np.zeros(0, dtype=np.int64)
    m = sp.csr_matrix((np.ones(len(cols)), cols, indptr), shape=(len(arrs), n_cols or len(tid.vocab)))
    m.sum_duplicates()
    return m


def _joined_ids(tid: _TokenIds, pieces: Sequence[str], stopwords: bool) -> np.ndarray:
    """The ids of ``" ".join(pieces)``: a space never joins two tokens, so they are the pieces' ids
    in order (and a context's chunks, shared by many contexts, are tokenised once)."""
    if not pieces:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([tid.ids(p, stopwords) for p in pieces])


def _counts(a: Sequence[str], b: Sequence[str], stopwords: bool):
    """Sparse token counts (csr [len(a), V], [len(b), V]) over one shared vocabulary."""
    _count_matrix(a, stopwords)  # registers a's tokens so both matrices have every column
    pb = _count_matrix(b, stopwords)
    return _count_matrix(a, stopwords, pb.shape[1]), pb


def token_prf(predictions: Sequence[str], references: Sequence[str], stopwords: bool = False):
    """Token-level precision, recall and F1 of each prediction against its reference.

    A prediction is a string or a sequence of strings read as joined by spaces (a context's
    chunks). Tokens are :func:`mogg.core.text.tokenize` tokens counted as multisets (SQuAD-style). An empty
    reference gives NaN (the question has no gold evidence), an empty prediction 0.
    """
    if len(predictions) != len(references):
        raise ValueError("predictions and references differ in length")
    if not len(predictions):
        z = np.zeros(0)
        return z, z, z
    p, r = _counts(predictions, references, stopwords)
    overlap = np.asarray(p.minimum(r).sum(axis=1)).ravel().astype(float)
    n_p = np.asarray(p.sum(axis=1)).ravel().astype(float)
    n_r = np.asarray(r.sum(axis=1)).ravel().astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(n_p > 0, overlap / np.maximum(n_p, 1), 0.0)
        rec = np.where(n_r > 0, overlap / np.maximum(n_r, 1), np.nan)
        f1 = np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0)
    f1 = np.where(n_r > 0, f1, np.nan)
    return prec, rec, f1


def tfidf_cosine(a: Sequence[str], b: Sequence[str], fit_on: Sequence[str] | None = None) -> np.ndarray:
    """Row-wise TF-IDF cosine between ``a[i]`` and ``b[i]`` (idf fitted on ``fit_on`` or a+b);
    an item of ``a`` may be a sequence of strings read as joined by spaces.

    scikit-learn's ``TfidfVectorizer`` defaults (raw counts, smooth idf ``ln((1+n)/(1+df)) + 1``,
    L2-normalised rows; tokens unseen in ``fit_on`` carry no weight), on stop-word-free tokens.
    """
    fit = list(fit_on) if fit_on is not None else list(a) + list(b)
    _count_matrix(a, True)
    _count_matrix(b, True)
    f = _count_matrix(fit, True)
    n = f.shape[1]
    df = np.bincount(f.indices, minlength=n)  # csr after sum_duplicates: one entry per (doc, token)
    idf = np.where(df > 0, np.log((1 + len(fit)) / (1 + df)) + 1.0, 0.0)
    out = []
    for m in (_count_matrix(a, True, n), _count_matrix(b, True, n)):
        m = m.multiply(idf[None, :]).tocsr()
        norm = np.sqrt(_row_sums(m.multiply(m)))
        out.append(m.multiply((1.0 / np.maximum(norm, 1e-300))[:, None]).tocsr())
    return _row_sums(out[0].multiply(out[1]))


def _row_sums(m) -> np.ndarray:
    """Row sums of a sparse matrix [R, C] -> [R], each row's values added in ascending order.

    Token ids (the columns) are numbered in the order this process first saw each token, so a
    column-order sum would change in the last bits with what ran before (``evaluate.py`` alone
    against ``train.py evaluate_after=true``); an order fixed by the values alone does not."""
    m = m.tocsr()
    m.sum_duplicates()
    counts = np.diff(m.indptr)
    rows = np.repeat(np.arange(m.shape[0]), counts)
    data = m.data[np.lexsort((m.data, rows))]  # rows stay in their csr blocks, sorted within
    out = np.zeros(m.shape[0])
    has = counts > 0
    out[has] = np.add.reduceat(data, m.indptr[:-1][has]) if len(data) else 0.0
    return out


def hit_rate(snippets: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Share of the label's distinct content tokens that occur in the snippet."""
    s, lab = _counts(snippets, labels, stopwords=True)
    s.data[:] = 1
    lab.data[:] = 1
    n = np.asarray(lab.sum(axis=1)).ravel().astype(float)
    hit = np.asarray(s.multiply(lab).sum(axis=1)).ravel()
    return np.where(n > 0, hit / np.maximum(n, 1), 0.0)


def gold_hit(selected_docs: Sequence[Sequence[str]], gold_docs: Sequence[Sequence[str]]) -> np.ndarray:
    """1 if any selected snippet comes from a gold document, NaN when there is no gold id."""
    return np.array(
        [float(bool(set(s) & set(g))) if g else np.nan for s, g in zip(selected_docs, gold_docs)], dtype=float
    )


def aggregate(values: np.ndarray) -> dict:
    """Mean, standard error and count over the non-NaN values."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return {"mean": float("nan"), "se": float("nan"), "n": 0}
    se = float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0
    return {"mean": float(v.mean()), "se": se, "n": int(len(v))}
