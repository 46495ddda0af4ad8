"""Cluster-scale builds as map/reduce over corpus shards.

* :mod:`mogg.sharding.ladders`: document-local ladders (MoG) with BM25 or dense retriever state.
* :mod:`mogg.sharding.graph`: ladders that link documents through a kNN graph (MoGG), in two
  stages (nodes + node index, then kNN against the full index).
* :mod:`mogg.sharding.keys`: shard keys from the documents a shard reads (a moved or touched corpus
  orphans no shard), and the merge's error for missing shards.

:func:`shard_task` and :func:`merge_task` pick the strategy from what the builder declares
(``document_local``, ``shard_stages``), never from its method name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mogg.sharding.graph import STAGES, build_graph_shard, merge_graph_shards
from mogg.sharding.ladders import build_shard, merge_shards, shard_range

__all__ = ["STAGES", "build_graph_shard", "build_shard", "merge_graph_shards", "merge_shards", "merge_task",
           "shard_range", "shard_task"]


def _stage(builder, stage: str | None) -> str:
    stages = tuple(builder.shard_stages)
    stage = stage or stages[0]
    if stage not in stages:
        raise ValueError(f"shard.stage={stage!r}: a {builder.method} ladder is built in stages {stages}")
    return stage


def _staged(builder) -> bool:
    if tuple(builder.shard_stages) == STAGES:
        return True
    if builder.document_local:
        return False
    raise ValueError(f"{builder.method} ladders link documents and declare no sharded build (stages {builder.shard_stages})")


def shard_task(corpus, builder, make_retriever: Callable[[], object], stage: str | None, index: int, count: int,
               root: Path) -> Path:
    """Map task ``index`` of ``count`` (of ``stage``, default the builder's first); idempotent."""
    stage = _stage(builder, stage)
    if _staged(builder):
        return build_graph_shard(corpus, builder, stage, index, count, root)
    return build_shard(corpus, builder, make_retriever, index, count, root)


def merge_task(corpus, builder, make_retriever: Callable[[], object], stage: str | None, count: int, root: Path) -> Path:
    """Reduce step (of ``stage``): writes what a single-machine build writes; returns its directory."""
    stage = _stage(builder, stage)
    if _staged(builder):
        return merge_graph_shards(corpus, builder, stage, count, root, make_retriever)
    return merge_shards(corpus, builder, make_retriever, count, root)
