"""Issue 58, "A page's own words": the page-contrastive columns against a brute force over sets of words,
their place after every other column (a directory written before them reads its own columns), and a
directory written before the knob reads without them."""

from __future__ import annotations

import numpy as np

from mogg.core.text import tokenize
from mogg.ladders.base import Ladder, Units, partition_level
from mogg.run.budget.selector.candidates import (
    FEATURES,
    PAGE_FEATURES,
    Lexicon,
    candidates,
    feature_names,
    features,
    page_match,
)
from mogg.search import Hits

# a page of one topic (every section names warfarin), a page of one sentence, and a page whose ids
# are not in corpus order: documents are runs of units, whatever their ids
TEXT = ["Warfarin is an anticoagulant drug.", "Warfarin dosing needs INR monitoring every week.",
        "Vitamin K reverses warfarin bleeding.", "Warfarin interacts with many antibiotics.",
        "Aspirin inhibits platelets.",
        "Heparin acts fast.", "Heparin reversal uses protamine.", "Heparin causes thrombocytopenia rarely."]
DOC = np.array([2, 2, 2, 2, 0, 1, 1, 1])


def _ladder() -> Ladder:
    units = Units(text=TEXT, doc=DOC, doc_ids=["asp", "hep", "war"])
    return Ladder(method="toy", units=units, levels=[partition_level("1sent", np.arange(len(TEXT))),
                                                     partition_level("doc", DOC)], meta={})


def _brute(lex: Lexicon, question: int, unit: int) -> float:
    """The IDF mass of the question's words in ``unit``, each times the share of the page's other units
    without it, by sets of words."""
    words = {w for w in tokenize(TEXT[unit], stopwords=True)}
    page = [u for u in range(len(TEXT)) if DOC[u] == DOC[unit] and u != unit]
    total = 0.0
    for w in {w for w in tokenize(QUESTIONS[question], stopwords=True)} & words:
        share = sum(w in set(tokenize(TEXT[o], stopwords=True)) for o in page) / max(len(page), 1)
        total += lex.idf[lex.vocab[w]] * (1.0 - share)
    return total


QUESTIONS = ["What reverses warfarin bleeding?", "How is heparin reversed with protamine?", "aspirin platelets"]


def test_page_match_is_the_brute_force():
    lad = _ladder()
    lex = Lexicon(lad, QUESTIONS)
    q = np.repeat(np.arange(len(QUESTIONS)), len(TEXT))
    u = np.tile(np.arange(len(TEXT)), len(QUESTIONS))
    first = np.array([0, 4, 5])
    sizes = np.array([4, 1, 3])
    run = np.searchsorted(first, u, side="right") - 1
    got = page_match(lex, q, u, run, first, sizes)
    want = [_brute(lex, int(a), int(b)) for a, b in zip(q, u)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    # the topic's word is on every section of its page: it adds nothing there; "bleeding" is this section's own
    i = int(np.flatnonzero((q == 0) & (u == 2))[0])
    assert got[i] > 0 and got[i] < lex.question_terms[0].sum()
    np.testing.assert_allclose(got[i], lex.idf[lex.vocab["bleeding"]] + lex.idf[lex.vocab["reverses"]], rtol=1e-5)
    # a page of one unit keeps its whole match
    j = int(np.flatnonzero((q == 2) & (u == 4))[0])
    np.testing.assert_allclose(got[j], lex.question_terms[2].sum(), rtol=1e-5)
    # only the candidates' documents are read: rows of one document give that document's values
    keep = u >= 5
    np.testing.assert_allclose(page_match(lex, q[keep], u[keep], run[keep], first, sizes), got[keep], rtol=1e-6)


def test_page_columns_come_last_and_only_when_asked():
    lad = _ladder()
    lex = Lexicon(lad, QUESTIONS)
    hits = Hits(np.array([[[2, 0], [2, -1]], [[6, 5], [1, -1]], [[4, 0], [0, -1]]]),
                np.array([[[2.0, 1.0], [3.0, -np.inf]]] * 3, dtype=np.float32))
    c = candidates(lad, hits, lex, depth=2, per_chunk=24)
    x0 = features(lad, c, lex, context=False)
    x1 = features(lad, c, lex, context=False, page=True)
    names = feature_names(lad.level_names, False, True)
    assert x1.shape[1] == x0.shape[1] + len(PAGE_FEATURES) == len(names)
    assert names[-len(PAGE_FEATURES):] == list(PAGE_FEATURES) and names[2 * lad.n_levels:][:len(FEATURES)] == list(FEATURES)
    np.testing.assert_array_equal(x1[:, : x0.shape[1]], x0)  # the columns before them unchanged
    xc = features(lad, c, lex, context=True, page=True)
    np.testing.assert_array_equal(xc[:, -len(PAGE_FEATURES):], x1[:, -len(PAGE_FEATURES):])
    pm = x1[:, names.index("page_match")]
    by_q = [pm[c.q == k].max() for k in range(len(QUESTIONS))]
    np.testing.assert_allclose(x1[:, names.index("page_match_rel")], pm - np.array(by_q)[c.q], atol=1e-6)


def test_a_directory_written_before_the_knob_reads_without_the_page_columns():
    from mogg.run.budget.selector.deploy import DeployedSelector
    from mogg.run.budget.selector.kind import EvidenceSelectorKind

    def dep(settings: dict, transfer: bool) -> DeployedSelector:
        d = DeployedSelector.__new__(DeployedSelector)
        d.deploy = {"settings": settings, "fit": {"sources": ["a", "b"]} if transfer else {}}
        return d

    assert dep({}, True).page_columns(EvidenceSelectorKind) is False  # written before the knob
    assert dep({"transfer_page_words": True}, True).page_columns(EvidenceSelectorKind) is True
    assert dep({"transfer_page_words": False}, True).page_columns(EvidenceSelectorKind) is False
    assert dep({"transfer_page_words": True}, False).page_columns(EvidenceSelectorKind) is False  # in-set: never
