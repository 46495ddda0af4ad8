"""The evidence metrics against scikit-learn's vectorizers (the reference they replaced) and
against themselves on joined text (contexts are scored from their chunks)."""

from __future__ import annotations

import random

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from mogg.core.metrics import hit_rate, tfidf_cosine, token_prf
from mogg.core.text import tokenize

WORDS = "the a of patients Cancer dose IL-6 risk trial mortality and to in was were 95% CI".split()


def _texts(n, k, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(0, k))) for _ in range(n)]


def test_token_prf_equals_sklearn_counts_and_reads_chunks_as_joined_text():
    a, b = _texts(200, 30, 0), _texts(200, 20, 1)
    vec = CountVectorizer(tokenizer=tokenize, lowercase=False, token_pattern=None).fit(a + b)
    p, r = vec.transform(a), vec.transform(b)
    overlap = np.asarray(p.minimum(r).sum(1)).ravel()
    n_p, n_r = np.asarray(p.sum(1)).ravel(), np.asarray(r.sum(1)).ravel()
    prec, rec, f1 = token_prf(a, b)
    assert np.allclose(prec, np.where(n_p > 0, overlap / np.maximum(n_p, 1), 0))
    assert np.allclose(rec[n_r > 0], (overlap / np.maximum(n_r, 1))[n_r > 0]) and np.isnan(rec[n_r == 0]).all()
    halves = [(w[: len(w) // 2], w[len(w) // 2:]) for w in (t.split(" ") for t in a)]
    chunks = [[" ".join(h1), " ".join(h2)] for h1, h2 in halves]  # a context read as its two chunks
    joined = [" ".join(c) for c in chunks]
    assert np.array_equal(token_prf(chunks, b)[2], token_prf(joined, b)[2], equal_nan=True)


def test_tfidf_cosine_equals_sklearn():
    a, b, fit = _texts(150, 25, 2), _texts(150, 15, 3), _texts(40, 25, 4)
    for fit_on in (None, fit):
        vec = TfidfVectorizer(tokenizer=lambda t: tokenize(t, stopwords=True), lowercase=False, token_pattern=None)
        vec.fit(fit_on if fit_on is not None else a + b)
        ref = np.asarray(vec.transform(a).multiply(vec.transform(b)).sum(1)).ravel()
        assert np.allclose(tfidf_cosine(a, b, fit_on), ref, atol=1e-12)
    assert np.allclose(tfidf_cosine([t.split(" ") for t in a], b), tfidf_cosine(a, b), atol=1e-12)


def test_hit_rate_counts_distinct_content_tokens():
    assert hit_rate(["the cancer risk was high"], ["Cancer risk of the trial"]).tolist() == [2 / 3]
