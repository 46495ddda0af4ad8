"""What a ``mogg-route --budget`` record says about itself (issue 50), for every budget-router kind:
the plan in words, why it was decided (the guard's validation gain and its standard error), how
well the context covers the question (and a flag when it covers little), and contexts cut at a
sentence end instead of mid-word.

Relevance is lexical and label-free: the share of the question's content words (stop words out),
weighted by the finest level's BM25 idf, that the context holds. A context holding less than
:data:`LOW_RELEVANCE` of it is flagged: most of what the question asks about is not in what is read
(an aspirin question answered from a folic-acid explanation). It is a warning sign, not a score of
correctness.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from mogg.core.text import tokenize

LOW_RELEVANCE = 0.5  # share of the question's idf mass in the context under which a record is flagged
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s|$)")


def action_words(level: str, k: int, cap) -> str:
    """A (level, k, cap) plan in words: "the top 2 chunks of level L2:4sent, cut at 64 tokens"."""
    top = "the top chunk" if int(k) == 1 else f"the top {int(k)} chunks"
    return f"{top} of level {level}" + (f", cut at {int(cap)} tokens" if cap is not None else ", uncut")


def decided_why(decided_by: str, plan: dict, budgets: dict, title: str, unguarded: bool = False) -> str:
    """Why ``decided_by`` ("envelope" or the kind's own name) reads this question's context: the
    cost weight given, the guard's verdict at the plan's budget (validation gain over the envelope
    ± se, n questions) from the deployed directory's ``budgets``, or ``--unguarded``."""
    b = plan.get("budget")
    if b is None:
        return f"a cost weight was given (lambda = {plan['lambda']:g} F1 per token): {title} decides, no guard"
    here = " (lambda and the envelope re-chosen on these questions' token counts)" if plan.get("calibrated_here") else ""
    g = (budgets.get(str(int(b))) or budgets.get(int(b)) or {}).get("guard") or {}
    stats = (f"its validation gain over the envelope was {g['gain']:+.3f} ± {g['se']:.3f} (n = {g['n']})"
             if {"gain", "se", "n"} <= set(g) else "no validation record in the directory")
    if decided_by == "envelope":
        return f"the guard kept the fixed envelope at B = {b:g}: {stats}, not above one standard error{here}"
    if unguarded:
        return f"deployed unguarded (--unguarded) at B = {b:g}; {stats}{here}"
    return f"the guard deployed {title} at B = {b:g}: {stats}, above one standard error{here}"


def relevance(index, questions: Sequence[str], contexts: Sequence[str]) -> np.ndarray:
    """Per question, the share [0, 1] of its content words' idf mass (the finest level's BM25 idf;
    uniform weights for a retriever without one) that its context holds; words no document holds
    are left out; NaN for a question without any other. float64 [Q]."""
    retriever = index.parts[0][0][0]
    idf, terms = getattr(retriever, "idf", None), getattr(retriever, "term_index", None)
    out = np.full(len(questions), np.nan)
    for i, (q, c) in enumerate(zip(questions, contexts)):
        words = set(tokenize(q, stopwords=True))
        if terms is not None:  # a word no document holds cannot be read anywhere: it tells nothing here
            words = {t for t in words if t in terms}
        if not words:
            continue
        w = {t: float(idf[terms[t]]) if idf is not None and terms is not None else 1.0 for t in words}
        have = set(tokenize(c))
        total = sum(w.values())
        out[i] = sum(v for t, v in w.items() if t in have) / total if total > 0 else np.nan
    return out


def cut_at_sentence_end(text: str, whole: str) -> tuple[str, bool]:
    """``text``, a token prefix of ``whole``, cut back to its last sentence end when it stops inside
    a sentence (kept as is when it holds no sentence end: one long sentence). Returns (text, cut)."""
    if len(text) >= len(whole.rstrip()):
        return text, False
    ends = list(_SENTENCE_END.finditer(text))
    if not ends:
        return text, True
    return text[:ends[-1].end()], True


def explained(records: list[dict], index, plan: dict, budgets: dict, title: str, unguarded: bool = False) -> list[dict]:
    """``records`` (each with ``question``, ``decided_by`` and ``context``) with ``why``,
    ``relevance`` and ``low_relevance`` added (in place; returned)."""
    texts = [" ".join(c["text"] for c in r["context"]) for r in records]
    rel = relevance(index, [r["question"] for r in records], texts)
    for r, v in zip(records, rel):
        r["why"] = decided_why(r["decided_by"], plan, budgets, title, unguarded)
        r["relevance"] = None if np.isnan(v) else round(float(v), 3)
        r["low_relevance"] = bool(r["context"]) and not np.isnan(v) and bool(v < LOW_RELEVANCE)
    return records
