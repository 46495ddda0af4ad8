"""Per-level retrieval over a ladder: one retriever per level, batched over all queries."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.artifacts import MANIFEST, artifact_dir, read_manifest, write_artifact
from mogg.ladders.base import Ladder

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
    load_kwargs: dict | None = None,
) -> list:
    """Fit (or load from the artifact store) one retriever per level.

    ``make_retriever()`` returns an unfitted retriever (``fit``/``search``/``save``/``load``/
    ``config``). With ``root`` and ``ladder_key`` the fitted state is cached as an artifact keyed
    by the ladder's key, the level and the retriever's config.
    """
    out = []
    for j in range(ladder.n_levels):
        r = make_retriever()
        if root is None or ladder_key is None:
            out.append(r.fit(ladder.texts(j)))
            continue
        key = retriever_key(ladder_key, j, r)
        d = artifact_dir(root, "retriever", key)
        if (d / MANIFEST).exists():
            read_manifest(d, key)
            # runtime objects a saved retriever cannot hold (the dense retriever's encoder)
            kwargs = load_kwargs if load_kwargs is not None else ({"encoder": r.encoder} if hasattr(r, "encoder") else {})
            out.append(type(r).load(d, **kwargs))
            log.info("level %d: loaded %s from %s", j, type(r).__name__, d)
            continue
        r.fit(ladder.texts(j))
        write_artifact(d, r.save, key)
        out.append(r)
    return out


def search_levels(retrievers: Sequence, queries: Sequence[str], k_r: int) -> Hits:
    """Top-k_r chunks per level for all queries (each retriever is called once, batched)."""
    ids, scores = [], []
    for r in retrievers:
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
