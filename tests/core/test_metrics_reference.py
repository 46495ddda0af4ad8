"""The evidence metrics against scikit-learn's vectorizers (the reference they replaced) and
against themselves on joined text (contexts are scored from their chunks)."""

from __future__ import annotations

import random

import numpy as np
from conftest import ROOT
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


def test_tfidf_cosine_does_not_depend_on_the_order_tokens_were_first_seen():
    """Token ids are numbered in the order the process first sees each token; label_sim once
    changed in its last bits between ``evaluate.py`` alone and ``train.py evaluate_after=true``
    (a column-order sum). The same texts must give the same bits whatever ran before: two fresh
    processes, the token ids numbered in two orders."""
    import subprocess
    import sys

    code = """
import sys, numpy as np
from mogg.core import metrics as M
rng = np.random.default_rng(0)
words = [f"w{i}x" for i in range(3000)]
a = [" ".join(rng.choice(words, 200)) for _ in range(50)]
b = [" ".join(rng.choice(words, 150)) for _ in range(50)]
M._count_matrix(a if sys.argv[1] == "f" else b[::-1], True)  # ids numbered text by text: another order
sys.stdout.write(M.tfidf_cosine(a, b).tobytes().hex())
"""
    runs = [subprocess.run([sys.executable, "-c", code, order], capture_output=True, text=True, check=True,
                           cwd=ROOT).stdout for order in ("f", "r")]
    assert runs[0] and runs[0] == runs[1]


def test_row_sums_do_not_depend_on_the_column_order():
    import scipy.sparse as sp

    from mogg.core.metrics import _row_sums

    rng = np.random.default_rng(1)
    m = sp.random(40, 500, density=0.3, format="csr", random_state=2) * 1e3 + sp.random(40, 500, density=0.3,
                                                                                         format="csr", random_state=3)
    perm = rng.permutation(500)
    np.testing.assert_array_equal(_row_sums(m), _row_sums(m[:, perm]))
    np.testing.assert_allclose(_row_sums(m), np.asarray(m.sum(axis=1)).ravel(), rtol=1e-12)
    np.testing.assert_array_equal(_row_sums(sp.csr_matrix(np.array([[0.0, 1.5, 2.0], [0, 0, 0]]))), [3.5, 0.0])
