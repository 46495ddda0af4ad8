"""What ``train.py`` and ``evaluate.py`` share for one ladder over one question set.

:func:`mogg.run.pipeline.prepare` makes a :class:`Prepared`; routing fits on it, evaluation scores
policies on it. It sits above routing (it holds a feature recipe) and below evaluation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mogg.data.records import QAItem
from mogg.ladders.base import Ladder
from mogg.routing.inputs.features import FeatureRecipe
from mogg.search import Hits
from mogg.selection import Selection


@dataclass
class Prepared:
    """Everything train and evaluate share for one ladder over one question set."""

    name: str
    ladder: Ladder
    ladder_key: dict
    items: list[QAItem]
    hits: Hits
    fixed: list[Selection]  # one per level, top-k snippets
    fixed_f1: np.ndarray  # [Q, L] token F1 of each fixed level vs gold evidence (NaN: no evidence)
    level_scores: np.ndarray  # [Q, L] scores the soft labels come from
    labels: np.ndarray  # [Q, L] soft labels
    features: np.ndarray  # [Q, D] router inputs
    k_r: int  # hits kept per level (the run's `k_r`, whose one default is conf/config.yaml's)
    data_key: str = ""  # hash of everything the router's inputs and labels depend on
    recipe: FeatureRecipe | None = None  # how ``features`` were made
    retriever_config: dict = field(default_factory=dict)
    max_context_tokens: int | None = None  # cap on every policy's context (snippets joined)
    gold_doc_ids: list[list[str]] = field(default_factory=list)  # per question, those present in the corpus
    notes: list[str] = field(default_factory=list)  # caveats the report must state
    utility_is_metric: bool = False  # level_scores are the evaluation metric itself (metric/reader labels)
    builder: Any = None  # the ladder builder (its hooks: extra policies, report sections)
    questions_fingerprint: dict | None = None
    deep: Hits | None = None  # hits at the frontier depth ([Q, L, depth]); None when no frontier runs
    profiles: tuple[str, ...] = ()  # router.profiles: the eq. 1 actions (mogg.routing.profiles), () = levels
    profile_f1: np.ndarray | None = None  # [Q, A] evidence F1 of every action's eq. 1-2 selection
    profile_labels: np.ndarray | None = None  # [Q, A] soft labels over actions (the labeler's rule)
    evidence_in_corpus: bool | None = None  # some question's gold evidence is held by a document (None: no evidence)

    def router_targets(self) -> tuple[np.ndarray, np.ndarray]:
        """(soft labels, utilities) a router trains on: per level, or per eq. 1 action with profiles."""
        if self.profiles:
            return self.profile_labels, self.profile_f1
        return self.labels, self.level_scores

    def ranked_deep(self) -> "Prepared":
        """The same data with ``hits`` ranked to the frontier depth (``deep``), for policies that read deeper."""
        if self.deep is None:
            raise ValueError(f"{self.name}: no deep hits (prepared without a frontier depth)")
        return dataclasses.replace(self, hits=self.deep)

    @property
    def questions(self) -> list[str]:
        return [it.question for it in self.items]

    @property
    def query_ids(self) -> list[str]:
        return [it.id for it in self.items]

    def oracle_level(self) -> np.ndarray:
        """Per-question best fixed level by evidence F1 (ties: finer level); without evidence, by the
        level utilities when they are the evaluation's own metric (reader correctness); else -1."""
        f = np.nan_to_num(self.fixed_f1, nan=-1.0)
        no_evidence = np.isnan(self.fixed_f1).all(axis=1)
        best = f.argmax(axis=1)
        if self.utility_is_metric:
            best = np.where(no_evidence, np.asarray(self.level_scores).argmax(axis=1), best)
            return best
        return np.where(no_evidence, -1, best)
