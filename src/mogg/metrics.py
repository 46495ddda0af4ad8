"""Retrieval-side metrics (no LLM): token P/R/F1, label similarity, gold-document hit, length.

Every metric returns per-question values (float64 [Q]); :func:`aggregate` turns them into
mean and standard error. Token overlap is computed for all questions at once with sparse count
matrices (multiset intersection = elementwise min).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mogg.text import tokenize


def _counts(a: Sequence[str], b: Sequence[str], stopwords: bool):
    """Sparse token counts (csr [len(a), V], [len(b), V]) over one shared vocabulary."""
    # imported here: scikit-learn's import (~1.5 s) is paid only by a run that computes a metric
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(tokenizer=lambda t: tokenize(t, stopwords=stopwords), lowercase=False, token_pattern=None)
    try:
        vec.fit(list(a) + list(b))
    except ValueError:  # no token anywhere (every context and reference empty): nothing overlaps
        return sp.csr_matrix((len(a), 0)), sp.csr_matrix((len(b), 0))
    return vec.transform(a).tocsr(), vec.transform(b).tocsr()


def token_prf(predictions: Sequence[str], references: Sequence[str], stopwords: bool = False):
    """Token-level precision, recall and F1 of each prediction against its reference.

    Tokens are :func:`mogg.text.tokenize` tokens counted as multisets (SQuAD-style). An empty
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
    """Row-wise TF-IDF cosine between ``a[i]`` and ``b[i]`` (idf fitted on ``fit_on`` or a+b)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(tokenizer=lambda t: tokenize(t, stopwords=True), lowercase=False, token_pattern=None)
    vec.fit(list(fit_on) if fit_on is not None else list(a) + list(b))
    x, y = vec.transform(a), vec.transform(b)  # rows are L2-normalised
    return np.asarray(x.multiply(y).sum(axis=1)).ravel()


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
