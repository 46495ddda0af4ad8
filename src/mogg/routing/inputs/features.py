"""Router inputs as a recipe: named feature groups computed from a query's retrieval over a ladder.

A :class:`FeatureRecipe` is saved with every trained router, so the router can be applied to new
questions (and refused where its inputs cannot be rebuilt). Groups, each float32 [Q, width]:

* ``scores`` (width L*k_r + L): every level's top-k_r scores divided by the query's best score
  over all levels (scale-free across queries: BM25 grows with query length), and each level's
  log(1 + top-1 score);
* ``agreement`` (L*(L-1)/2 + L): for every pair of levels whether their top-1 chunks come from
  one document, and per level the share of its top-k_r from its top-1 document (evidence
  concentrated in one document favours coarse levels);
* ``lengths`` (L): log(1 + tokens) of each level's top-1 chunk;
* ``gaps`` (2L): per level the relative gap between the first and second score and the
  normalised entropy of the top-k_r scores;
* ``overlap`` (L): share of the query's content words found in each level's top-1 chunk;
* ``qlen`` (1): log(1 + query tokens);
* ``query`` (d): the query embedding (the MoG paper's only input);
* ``candidates`` (L*k_r + L): what each level would hand the reader, read by the configured
  encoder: the cosine between the query and each of a level's top-k_r chunks, and per level its
  top-1 cosine minus the query's best top-1 cosine over levels (chunk embeddings cached as
  artifacts; a chunk longer than the encoder's ``max_length`` is read from its start).

Measured on PubMedQA* and MedMCQA (docs/results.md, "Router inputs"): ``lengths`` helped on both sets and
is in the default; ``gaps``, ``overlap`` and ``qlen`` did not and stay optional.
Padding (a level with fewer than k_r hits) contributes 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mogg.ladders.base import Ladder
from mogg.search import Hits

FEATURE_VERSION = 2
GROUPS = ("query", "scores", "agreement", "lengths", "gaps", "overlap", "qlen", "candidates")
NEEDS_ENCODER = ("query", "candidates")
# The names the configs used before recipes existed, kept as aliases.
ALIASES = {
    "retrieval": ("scores", "agreement"),
    "query+retrieval": ("query", "scores", "agreement"),
    "query": ("query",),
}


def parse_groups(inputs: str | Sequence[str]) -> tuple[str, ...]:
    """``inputs`` (an alias, a '+'-joined string or a list of groups) -> ordered unique groups."""
    if isinstance(inputs, str):
        parts = list(ALIASES.get(inputs, inputs.split("+")))
    else:
        parts = [str(p) for p in inputs]
    out: list[str] = []
    for p in parts:
        for g in ALIASES.get(p, (p,)):
            if g not in GROUPS:
                raise ValueError(f"unknown router input {g!r}; groups: {', '.join(GROUPS)}; aliases: {', '.join(ALIASES)}")
            if g not in out:
                out.append(g)
    if not out:
        raise ValueError("router inputs are empty")
    return tuple(out)


def _scores(hits: Hits) -> np.ndarray:
    """Non-negative scores [Q, L, k_r], 0 where a level has no hit."""
    return np.maximum(np.where(hits.ids >= 0, hits.scores, 0.0).astype(np.float64), 0.0)


NORMALISE = ("none", "question")


def score_features(hits: Hits, normalise: str = "none") -> np.ndarray:
    """[Q, L*k_r + L]: every score / the query's best, then one column per level: log(1 + top-1
    score) (``none``), or log(top-1 / the query's best top-1) floored at log(1e-3) (``question``:
    unchanged when a corpus's scores are all scaled by one factor, so corpora with different
    score scales give comparable inputs)."""
    s = _scores(hits)
    flat = s.reshape(len(s), -1)
    best = np.maximum(flat.max(axis=1, keepdims=True), 1e-9)
    rel = flat / best
    if normalise == "question":
        top = np.log(np.maximum(s[:, :, 0] / best, 1e-3))
    else:
        top = np.log1p(s[:, :, 0])
    return np.concatenate([rel, top], axis=1)


def agreement_features(hits: Hits, ladder: Ladder) -> np.ndarray:
    n_l, k_r = ladder.n_levels, hits.shape[2]
    # padding gets distinct negative ids so it never agrees
    docs = np.stack(
        [np.where(hits.ids[:, j] >= 0, ladder.chunk_doc(j)[np.maximum(hits.ids[:, j], 0)], -1 - np.arange(k_r))
         for j in range(n_l)], axis=1,
    )  # [Q, L, k_r]
    top1 = docs[:, :, 0]
    iu = np.triu_indices(n_l, 1)
    pairs = (top1[:, :, None] == top1[:, None, :])[:, iu[0], iu[1]]
    return np.concatenate([pairs, (docs == docs[:, :, :1]).mean(axis=2)], axis=1)


def _top1_texts(hits: Hits, ladder: Ladder) -> list[list[str]]:
    return [[ladder.texts(j)[c] if c >= 0 else "" for c in hits.ids[:, j, 0]] for j in range(ladder.n_levels)]


def length_features(hits: Hits, ladder: Ladder) -> np.ndarray:
    # token counts per chunk are memoised on the ladder and summed from its units: the units are
    # counted once, not every level's texts
    cols = []
    for j in range(ladder.n_levels):
        n = ladder.chunk_tokens(j)
        ids = hits.ids[:, j, 0]
        cols.append(np.where(ids >= 0, np.log1p(n[np.maximum(ids, 0)]), 0.0))
    return np.stack(cols, axis=1)


def gap_features(hits: Hits) -> np.ndarray:
    s = _scores(hits)
    k_r = s.shape[2]
    gap = (s[:, :, 0] - s[:, :, 1]) / np.maximum(s[:, :, 0], 1e-9) if k_r > 1 else np.zeros(s.shape[:2])
    p = s / np.maximum(s.sum(axis=2, keepdims=True), 1e-9)
    ent = -(p * np.log(np.maximum(p, 1e-12))).sum(axis=2) / (np.log(k_r) if k_r > 1 else 1.0)
    return np.concatenate([gap, ent], axis=1)


def overlap_features(hits: Hits, ladder: Ladder, questions: Sequence[str]) -> np.ndarray:
    from sklearn.feature_extraction.text import CountVectorizer

    from mogg.core.text import tokenize

    top1 = _top1_texts(hits, ladder)
    vec = CountVectorizer(tokenizer=lambda t: tokenize(t, stopwords=True), lowercase=False, token_pattern=None, binary=True)
    vec.fit(list(questions))  # only query words matter: the vocabulary of the questions
    q = vec.transform(list(questions))
    n_q = np.maximum(np.asarray(q.sum(axis=1)).ravel(), 1)
    return np.stack([np.asarray(q.multiply(vec.transform(t)).sum(axis=1)).ravel() / n_q for t in top1], axis=1)


def candidate_features(sim: np.ndarray) -> np.ndarray:
    """[Q, L*k_r + L] from query-chunk cosines ``sim`` [Q, L, k_r] (0 where a level has no hit)."""
    top1 = sim[:, :, 0]
    return np.concatenate([sim.reshape(len(sim), -1), top1 - top1.max(axis=1, keepdims=True)], axis=1)


def candidate_similarity(hits: Hits, ladder: Ladder, query_emb: np.ndarray, encode) -> np.ndarray:
    """Cosine [Q, L, k_r] between each query and each of its hits, 0 for padding. ``encode``:
    texts -> float [N, d]; each level's distinct hit chunks are encoded once (one call per level)."""
    q = np.asarray(query_emb, dtype=np.float64)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    out = np.zeros(hits.shape, dtype=np.float64)
    for j in range(ladder.n_levels):
        ids = hits.ids[:, j]  # [Q, k_r]
        uniq, inv = np.unique(np.maximum(ids, 0), return_inverse=True)
        texts = ladder.texts(j)
        e = np.asarray(encode([texts[c] for c in uniq]), dtype=np.float64)
        e = e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
        sim = np.einsum("qkd,qd->qk", e[inv.reshape(ids.shape)], q)
        out[:, j] = np.where(ids >= 0, sim, 0.0)
    return out


def qlen_features(questions: Sequence[str]) -> np.ndarray:
    from mogg.core.text import count_tokens

    return np.log1p(np.array([count_tokens(q) for q in questions], dtype=np.float64))[:, None]


@dataclass(frozen=True)
class FeatureRecipe:
    """What a router's input vector is made of; JSON round-trips with :meth:`to_json`.

    ``encoder`` is the Hydra node of the query encoder (``_target_`` + arguments) when the
    ``query`` group is used, so a saved router can rebuild it; ``encoder_config`` is that
    encoder's ``config()`` (what defines its embeddings), checked against the one supplied.
    """

    groups: tuple[str, ...]
    hits_per_level: int  # k_r, times the number of corpora for multi-corpus retrieval
    n_levels: int
    version: int = FEATURE_VERSION
    encoder: dict | None = None
    encoder_config: dict | None = None
    normalise: str = "none"  # none | question (score features relative to the query's best: corpus-free scale)

    @classmethod
    def make(cls, inputs, hits_per_level: int, n_levels: int, encoder_node: dict | None = None, encoder=None,
             normalise: str = "none") -> "FeatureRecipe":
        groups = parse_groups(inputs)
        if hits_per_level < 1:
            raise ValueError(f"hits_per_level must be >= 1, got {hits_per_level}")
        if normalise not in NORMALISE:
            raise ValueError(f"router.normalise must be one of {NORMALISE}, got {normalise!r}")
        needs = any(g in groups for g in NEEDS_ENCODER)
        if needs and encoder is None and encoder_node is None:
            raise ValueError(f"router inputs {'+'.join(groups)} include {' or '.join(NEEDS_ENCODER)} and need an encoder")
        return cls(groups, int(hits_per_level), int(n_levels), FEATURE_VERSION,
                   encoder_node if needs else None, encoder.config() if (needs and encoder is not None) else None,
                   normalise)

    @property
    def needs_embeddings(self) -> bool:
        return any(g in self.groups for g in NEEDS_ENCODER)

    def compute(self, hits: Hits, ladder: Ladder, questions: Sequence[str], query_emb: np.ndarray | None = None,
                cand_sim: np.ndarray | None = None) -> np.ndarray:
        """The router input matrix float32 [Q, D] for these hits (shape [Q, L, k_r]); ``cand_sim``
        [Q, L, k_r] the query-chunk cosines the ``candidates`` group reads."""
        n_q, n_l, k_r = hits.shape
        if n_l != self.n_levels or n_l != ladder.n_levels:
            raise ValueError(f"the recipe is for {self.n_levels} levels; hits have {n_l}, the ladder {ladder.n_levels}")
        if k_r != self.hits_per_level:
            raise ValueError(f"the recipe was made for {self.hits_per_level} hits per level; these hits have {k_r}")
        if len(questions) != n_q:
            raise ValueError(f"{len(questions)} questions for {n_q} rows of hits")
        parts = []
        for g in self.groups:
            if g == "query":
                if query_emb is None:
                    raise ValueError("router input 'query' needs query embeddings")
                parts.append(np.asarray(query_emb, dtype=np.float64))
            elif g == "scores":
                parts.append(score_features(hits, self.normalise))
            elif g == "agreement":
                parts.append(agreement_features(hits, ladder))
            elif g == "lengths":
                parts.append(length_features(hits, ladder))
            elif g == "gaps":
                parts.append(gap_features(hits))
            elif g == "overlap":
                parts.append(overlap_features(hits, ladder, questions))
            elif g == "candidates":
                if cand_sim is None or cand_sim.shape != hits.shape:
                    raise ValueError("router input 'candidates' needs query-chunk similarities shaped like the hits")
                parts.append(candidate_features(cand_sim))
            else:
                parts.append(qlen_features(questions))
        return np.concatenate(parts, axis=1).astype(np.float32)

    def column_names(self, level_names: Sequence[str] | None = None, width: int | None = None) -> list[str]:
        """A name per input column, in :meth:`compute`'s order (``width``: the matrix's columns, to
        size the ``query`` embedding group)."""
        lv = list(level_names) if level_names else [f"L{j}" for j in range(self.n_levels)]
        k_r = self.hits_per_level
        fixed = {
            "scores": [f"score {v} #{k + 1}/best" for v in lv for k in range(k_r)] + [f"log top-1 score {v}" for v in lv],
            "agreement": [f"top-1 same document {lv[i]}~{lv[j]}" for i in range(len(lv)) for j in range(i + 1, len(lv))]
            + [f"{v} hits in its top-1's document" for v in lv],
            "lengths": [f"log tokens of top-1 {v}" for v in lv],
            "gaps": [f"score gap {v}" for v in lv] + [f"score entropy {v}" for v in lv],
            "overlap": [f"question words in top-1 {v}" for v in lv],
            "candidates": [f"cosine {v} #{k + 1}" for v in lv for k in range(k_r)] + [f"top-1 cosine {v} - best" for v in lv],
            "qlen": ["log question tokens"],
        }
        known = sum(len(fixed[g]) for g in self.groups if g != "query")
        emb = max((width or known) - known, 0)
        return [name for g in self.groups for name in (fixed[g] if g != "query" else [f"query {i}" for i in range(emb)])]

    def to_json(self) -> dict:
        d = asdict(self)
        d["groups"] = list(self.groups)
        if d["normalise"] == "none":  # the default stays out: routers and data keys from before the option are unchanged
            del d["normalise"]
        return d

    @classmethod
    def from_json(cls, d: dict) -> "FeatureRecipe":
        if d.get("version") != FEATURE_VERSION:
            raise ValueError(f"feature recipe version {d.get('version')} is not this mogg's ({FEATURE_VERSION}): retrain the router")
        normalise = d.get("normalise", "none")  # routers saved before the option existed: none
        if normalise not in NORMALISE:
            raise ValueError(f"feature recipe normalise={normalise!r} is not one of {NORMALISE}")
        return cls(tuple(d["groups"]), int(d["hits_per_level"]), int(d["n_levels"]), int(d["version"]), d.get("encoder"),
                   d.get("encoder_config"), normalise)


def compute_features(recipe: FeatureRecipe, hits: Hits, ladder: Ladder, texts: Sequence[str], encoder=None,
                     artifacts: Path | None = None) -> np.ndarray:
    """Router inputs [Q, D] for ``recipe``; query embeddings (cached) when the recipe needs them, and
    the candidates' embeddings (cached by the encoder's ``cache_dir``) for ``candidates``."""
    emb = None
    if recipe.needs_embeddings:
        if encoder is None:
            raise ValueError(f"router inputs {'+'.join(recipe.groups)} need a query encoder")
        if recipe.encoder_config is not None and encoder.config() != recipe.encoder_config:
            raise ValueError(f"the router's query encoder was {recipe.encoder_config}; got {encoder.config()}")
        from mogg.encoders import embed_queries

        emb = embed_queries(encoder, list(texts), artifacts)
    sim = candidate_similarity(hits, ladder, emb, encoder.encode) if "candidates" in recipe.groups else None
    return recipe.compute(hits, ladder, list(texts), emb, sim)
