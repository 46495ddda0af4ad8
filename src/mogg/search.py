"""Per-ladder search: one fitted retriever per level, batched over all queries (``Hits``), and
:class:`LadderIndex`, a ladder with its retrievers ready for any batch of questions."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.core.artifacts import MANIFEST, artifact_dir, read_manifest, write_artifact
from mogg.core.progress import progress_disabled
from mogg.ladders.base import Ladder
from mogg.ladders.concat import concat_ladders
from mogg.ladders.store import build_ladder

log = logging.getLogger(__name__)


@dataclass
class Hits:
    """Top-k_r chunks of every level for every query.

    ``ids[q, l, r]`` is a chunk index of level ``l`` (-1 = none), ``scores`` the retriever score
    (float32, -inf for padding). Shapes [Q, L, k_r].
    """

    ids: np.ndarray
    scores: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.ids.shape

    def subset(self, rows: np.ndarray) -> "Hits":
        return Hits(self.ids[rows], self.scores[rows])

    def save(self, directory: Path) -> None:
        np.save(Path(directory) / "hit_ids.npy", self.ids)
        np.save(Path(directory) / "hit_scores.npy", self.scores)

    @classmethod
    def load(cls, directory: Path) -> "Hits":
        d = Path(directory)
        return cls(np.load(d / "hit_ids.npy", allow_pickle=False), np.load(d / "hit_scores.npy", allow_pickle=False))


def retriever_key(ladder_key: dict, level: int, retriever) -> dict:
    """Artifact key of a level's fitted retriever state (single builds and shard merges share it)."""
    return {"ladder": ladder_key, "level": level, "retriever": retriever.config(), "kind": type(retriever).__name__}


def level_retrievers(
    ladder: Ladder,
    make_retriever: Callable[[], object],
    root: Path | None = None,
    ladder_key: dict | None = None,
) -> list:
    """Fit (or restore from the artifact store) one retriever per level.

    ``make_retriever()`` returns an unfitted retriever (``fit``/``search``/``save``/``restore``/
    ``config``). With ``root`` and ``ladder_key`` the fitted state is cached as an artifact keyed
    by the ladder's key, the level and the retriever's config; a cached state is restored into a
    fresh ``make_retriever()`` instance, so its runtime options (encoder, backend, device, batch
    size) are the configured ones, not the ones it was saved with.
    """
    from tqdm.auto import tqdm

    from mogg.ladders.unit_terms import LadderTerms

    out = []
    terms = LadderTerms(ladder)  # the units tokenized once for all levels (only if a level is fitted)
    # a bar over the levels (ETA per level fit); silent when every level is restored from the store
    quiet = ladder.n_levels < 2 or not log.isEnabledFor(logging.INFO)
    for j in tqdm(range(ladder.n_levels), desc="index levels", unit="level", leave=False,
                  disable=True if quiet else progress_disabled()):  # mogg.core.progress's rule
        r = make_retriever()
        if root is None or ladder_key is None:
            out.append(fit_level(r, ladder, j, terms))
            continue
        key = retriever_key(ladder_key, j, r)
        d = artifact_dir(root, "retriever", key)
        if (d / MANIFEST).exists():
            read_manifest(d, key)
            out.append(r.restore(d))
            log.info("level %d: restored %s from %s", j, type(r).__name__, d)
            continue
        t0 = time.perf_counter()
        fit_level(r, ladder, j, terms)
        write_artifact(d, r.save, key)
        log.info("level %d: fitted %s on %d chunks in %.1f s", j, type(r).__name__, len(ladder.levels[j]),
                 time.perf_counter() - t0)
        out.append(r)
    return out


def fit_level(retriever, ladder: Ladder, level: int, terms):
    """Fit ``retriever`` on level ``level``: from the units' terms (tokenized once per ladder,
    :class:`mogg.ladders.unit_terms.LadderTerms`) when it takes them (``fit_terms``: BM25), else on
    the chunk texts (dense encoders read the text)."""
    if hasattr(retriever, "fit_terms"):
        return retriever.fit_terms(terms.level(level, bool(retriever.config().get("stopwords", True))))
    return retriever.fit(ladder.texts(level))


def save_level_shard(retriever, ladder: Ladder, level: int, terms, directory: Path, prefix: str) -> None:
    """The map step's retriever state of one level, from the units' terms where the retriever takes them."""
    if hasattr(retriever, "save_shard_terms"):
        retriever.save_shard_terms(terms.level(level, bool(retriever.config().get("stopwords", True))), directory, prefix)
    else:
        retriever.save_shard(ladder.texts(level), directory, prefix)


def search_levels(retrievers: Sequence, queries: Sequence[str], k_r: int) -> Hits:
    """Top-k_r chunks per level for all queries (each retriever is called once, batched)."""
    from tqdm.auto import tqdm

    ids, scores = [], []
    big = len(queries) * sum(getattr(r, "n_docs", 0) for r in retrievers) > 1e9  # query x chunk pairs
    log.info("search: %d questions x %d levels, top %d per level", len(queries), len(retrievers), k_r)
    for r in tqdm(retrievers, desc="search levels", unit="level", leave=False, disable=True if not big else progress_disabled()):
        s, i = r.search(list(queries), k_r)
        scores.append(s.astype(np.float32))
        ids.append(i.astype(np.int64))
    return Hits(ids=np.stack(ids, axis=1), scores=np.stack(scores, axis=1))


def merge_hits(parts: Sequence[Hits], chunk_offsets: Sequence[np.ndarray]) -> Hits:
    """Hits of separately searched corpora as hits over their concatenated ladder.

    ``chunk_offsets[p][l]`` is where corpus p's level-l chunks start. Every corpus contributes
    its top-k_r per level ([Q, L, k_r * P] after merging), sorted by score per level.
    """
    ids = np.concatenate([np.where(h.ids >= 0, h.ids + np.asarray(o)[None, :, None], -1) for h, o in zip(parts, chunk_offsets)], axis=2)
    scores = np.concatenate([h.scores for h in parts], axis=2)
    order = np.argsort(-scores, axis=2, kind="stable")
    return Hits(np.take_along_axis(ids, order, 2), np.take_along_axis(scores, order, 2))


@dataclass
class LadderIndex:
    """A ladder with its fitted per-level retrievers: search it for any batch of questions.

    Several corpora (``corpus.parts``, MedCorp style) get one ladder and retriever set each;
    every part contributes its own top-k_r per level and the hits refer to the concatenated
    ladder (``offsets[p][l]``: where part p's level-l chunks start).
    """

    ladder: Ladder
    key: dict
    parts: list[tuple[list, np.ndarray]]  # (retrievers per level, chunk offsets [L]) per corpus part
    retriever_config: dict

    @classmethod
    def build(cls, corpus, builder, make_retriever: Callable[[], object], artifacts: Path | None = None) -> "LadderIndex":
        """Build (or load from ``artifacts``) the ladder(s) and the retrievers of every level."""
        retriever_config = make_retriever().config()
        parts = corpus.parts
        if len(parts) == 1 and parts[0][1] is corpus:  # one corpus: no concatenation
            ladder, key = build_ladder(corpus, builder, artifacts)
            retrievers = level_retrievers(ladder, make_retriever, artifacts, key)
            return cls(ladder, key, [(retrievers, np.zeros(ladder.n_levels, dtype=np.int64))], retriever_config)
        ladders, keys, retrievers = [], [], []
        for _, part in parts:
            lad, key = build_ladder(part, builder, artifacts)
            retrievers.append(level_retrievers(lad, make_retriever, artifacts, key))
            ladders.append(lad)
            keys.append(key)
        sizes = np.array([[len(lv) for lv in lad.levels] for lad in ladders])  # [P, L]
        offsets = np.vstack([np.zeros(sizes.shape[1], dtype=np.int64), np.cumsum(sizes, axis=0)[:-1]])
        return cls(concat_ladders(ladders, independent=True), {"parts": keys}, list(zip(retrievers, offsets)), retriever_config)

    def search(self, texts: Sequence[str], k_r: int) -> Hits:
        """Top-k_r chunks per level (per corpus part) for all ``texts`` (batched per retriever)."""
        return self.search_deep(texts, k_r, k_r)[0]

    def search_deep(self, texts: Sequence[str], k_r: int, depth: int) -> tuple[Hits, Hits]:
        """Hits at ``k_r`` (the router's features) and at ``depth`` (every k a frontier reads), from
        one search per retriever at the larger depth: the top-k_r of each part's deep ranking is
        its top-k_r ranking, and parts are merged after cutting, exactly as :meth:`search` would."""
        n = max(k_r, depth)
        parts = [search_levels(r, texts, n) for r, _ in self.parts]
        offsets = [o for _, o in self.parts]

        def cut(h: Hits, m: int) -> Hits:
            return Hits(h.ids[:, :, :m], h.scores[:, :, :m])

        if len(parts) == 1:
            return cut(parts[0], k_r), cut(parts[0], depth)
        return (merge_hits([cut(h, k_r) for h in parts], offsets), merge_hits([cut(h, depth) for h in parts], offsets))
