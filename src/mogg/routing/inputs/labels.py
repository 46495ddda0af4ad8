"""Soft labels for the router (MoG paper, docs/design.md section 1 and 7).

For every training query we score each level, then give 0.8 to the best level, 0.2 to the
second and 0 elsewhere. Level scores come from

* ``similarity``: the level's best retrieved snippet vs a target text, by TF-IDF cosine,
  encoder cosine (the paper's "roberta") or hit-rate; the target is the gold evidence
  (``target="evidence"``), the dataset label (``"label"``), question + answer text (``"qa"``)
  or ``"auto"`` (evidence when the question has it, else its label text);
* ``metric``: the downstream metric itself - token F1 against the gold evidence of the context
  that the fixed-level policy selects for that level (needs gold evidence);
* ``reader``: for question sets with an answer key but no evidence - whether the reader answers
  correctly with that level's fixed-level context (1/0; the same reader, prompts and answer cache
  as the evaluation, so evaluating the fixed levels later asks nothing new). Ties go to the finer
  level: the shortest context that answers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from mogg.core.metrics import hit_rate, tfidf_cosine
from mogg.data.records import QAItem

log = logging.getLogger(__name__)

SOURCES = ("tfidf", "encoder", "hitrate", "metric", "reader")
# sources whose level scores are the evaluation's own metric (an oracle level can be read from them)
METRIC_SOURCES = ("metric", "reader")
TARGETS = ("auto", "evidence", "label", "qa")


def soft_labels(scores: np.ndarray, top: float = 0.8, second: float = 0.2) -> np.ndarray:
    """[Q, L] scores -> soft labels: ``top`` for the best level, ``second`` for the runner-up.

    Ties go to the finer (lower-index) level, so labels are deterministic.
    """
    scores = np.asarray(scores, dtype=float)
    n_q, n_l = scores.shape
    order = np.argsort(-scores, axis=1, kind="stable")
    out = np.zeros((n_q, n_l))
    out[np.arange(n_q), order[:, 0]] = top
    if n_l > 1:
        out[np.arange(n_q), order[:, 1]] = second
    return out


def target_texts(items: Sequence[QAItem], target: str) -> list[str]:
    """The text each question's snippets are compared with."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    out = []
    for it in items:
        if target == "evidence" or (target == "auto" and it.gold_evidence):
            if not it.gold_evidence:
                raise ValueError(f"question {it.id} has no gold evidence (target='evidence')")
            out.append(it.evidence_text)
        elif target == "qa":
            out.append(f"{it.question} {it.answer_text}")
        else:
            out.append(it.label_text)
    return out


class SoftLabeler:
    """Level scores and soft labels from a configured source.

    Args:
        source: one of ``tfidf``, ``encoder``, ``hitrate``, ``metric``.
        target: what similarity sources compare with (see module doc).
        encoder: an object with ``encode(texts) -> float32 [N, d]`` (L2-normalised), for ``encoder``.
        top, second: the soft label values (paper: 0.8 / 0.2).
    """

    def __init__(self, source: str = "metric", target: str = "auto", encoder=None, top: float = 0.8, second: float = 0.2,
                 reader=None, cache: str | None = None, step_by_step: bool = False, batch_size: int = 16):
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
        if source == "encoder" and encoder is None:
            raise ValueError("source='encoder' needs an encoder")
        if source == "reader" and (reader is None or not cache):
            raise ValueError("labels=reader needs a reader (reader=hf or reader=openai) and an answer cache path")
        target_texts([], target)  # validates the name
        self.source, self.target, self.encoder, self.top, self.second = source, target, encoder, top, second
        self.reader, self.cache, self.step_by_step, self.batch_size = reader, cache, bool(step_by_step), int(batch_size)

    def config(self) -> dict:
        enc = self.encoder.config() if (self.source == "encoder" and hasattr(self.encoder, "config")) else None
        out = {"source": self.source, "target": self.target, "encoder": enc, "top": self.top, "second": self.second}
        if self.source == "reader":
            out.update(reader=self.reader.config(), step_by_step=self.step_by_step)
        return out

    def level_scores(
        self, items: Sequence[QAItem], best_snippets: list[list[str]], fixed_metric: np.ndarray | None = None,
        fixed_snippets: list[list[list[str]]] | None = None,
    ) -> np.ndarray:
        """Scores [Q, L]. ``best_snippets[l][q]``: level l's top-1 snippet for question q;
        ``fixed_metric``: [Q, L] metric of each fixed-level policy (``metric`` source);
        ``fixed_snippets[l][q]``: the snippets the fixed-level policy of level l gives question q
        (``reader`` source)."""
        if self.source == "reader":
            return self._reader_scores(items, fixed_snippets)
        if self.source == "metric":
            if fixed_metric is None:
                raise ValueError("source='metric' needs the per-level metric matrix")
            if np.isnan(fixed_metric).any():
                raise ValueError("source='metric' needs gold evidence for every training question")
            return np.asarray(fixed_metric, dtype=float)
        targets = target_texts(items, self.target)
        cols = []
        target_emb = self.encoder.encode(targets) if self.source == "encoder" else None
        for snippets in best_snippets:
            if self.source == "tfidf":
                cols.append(tfidf_cosine(snippets, targets))
            elif self.source == "hitrate":
                cols.append(hit_rate(snippets, targets))
            else:
                cols.append((self.encoder.encode(snippets) * target_emb).sum(axis=1))
        return np.stack(cols, axis=1)

    def _reader_scores(self, items: Sequence[QAItem], fixed_snippets) -> np.ndarray:
        from mogg.readers.cache import AnswerCache, exclusive
        from mogg.readers.run import answer_questions

        if fixed_snippets is None:
            raise ValueError("source='reader' needs every level's fixed-level snippets")
        cols = []
        with exclusive(self.cache):
            cache = AnswerCache(self.cache)
            for j, snippets in enumerate(fixed_snippets):
                log.info("reader labels: level %d of %d", j + 1, len(fixed_snippets))
                recs = answer_questions(items, snippets, self.reader, cache, self.step_by_step, self.batch_size)
                cols.append([float(r["correct"]) for r in recs])
        return np.asarray(cols, dtype=float).T

    def labels(self, scores: np.ndarray) -> np.ndarray:
        return soft_labels(scores, self.top, self.second)
