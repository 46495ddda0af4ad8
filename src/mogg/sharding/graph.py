"""Sharded MoGG builds: the kNN graph links nodes across shards, so the build runs in two map/reduce stages.

===========  ========  ==================================================================================
stage        step      what it writes
===========  ========  ==================================================================================
``nodes``    map i     shard i's nodes (its documents' sentence groups) + node-index shard state
                       (BM25 term counts, or the nodes' embeddings: the GPU-heavy part of a dense graph)
``nodes``    reduce    all nodes in corpus order + one node index over all of them (``fit_shards``)
``knn``      map i     shard i's nodes searched against the *full* node index: kNN rows [U_i, k_graph]
``knn``      reduce    rows concatenated -> edges -> hop levels: the ladder artifact a single build
                       writes (same key), plus the per-level retriever state
===========  ========  ==================================================================================

Every step is an artifact with a manifest: a finished map task is skipped on rerun, a half-written
one (no manifest) is rebuilt, and a reduce refuses to run while a shard is missing. The kNN rows of
a node range equal the rows of a single-machine build (:meth:`GraphLadderBuilder.knn_rows`), so the
merged ladder is the single build's ladder, edge for edge.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mogg.core.artifacts import artifact_dir, write_artifact
from mogg.ladders.base import Ladder, Units, partition_level
from mogg.sharding.ladders import build_once, check_unique_ids, concat_ladders, shard_dirs, shard_documents

log = logging.getLogger(__name__)

__all__ = ["STAGES", "build_graph_shard", "merge_graph_shards"]

STAGES = ("nodes", "knn")
NODES = "nodes"  # the node-index shard state prefix


def _key(builder, corpus, count: int, **extra) -> dict:
    return {"builder": builder.config(), "corpus": corpus.fingerprint(), "count": count, **extra}


def _check(builder, stage: str) -> None:
    if tuple(getattr(builder, "shard_stages", ())) != STAGES:
        raise ValueError(f"staged graph sharding needs a graph ladder builder (stages {STAGES}), got {type(builder).__name__}")
    if stage not in STAGES:
        raise ValueError(f"shard.stage must be one of {STAGES}, got {stage!r}")


def _load_index(builder, d: Path):
    return builder.node_index().restore(d)  # the builder's instance keeps its encoder and runtime options


def _node_ladder(units: Units) -> Ladder:
    """The nodes alone, as a one-level document-local ladder (so shard parts concatenate)."""
    return Ladder("nodes", units, [partition_level("nodes", np.arange(len(units)))], {})


def build_graph_shard(corpus, builder, stage: str, index: int, count: int, root: Path) -> Path:
    """Map task ``index`` of ``count`` for ``stage`` (``nodes`` or ``knn``); idempotent."""
    _check(builder, stage)
    key = _key(builder, corpus, count, stage=stage, shard=index)

    def nodes():
        docs = shard_documents(corpus, index, count)
        units = builder.nodes(docs, show_progress=True)

        def write(tmp: Path) -> None:
            _node_ladder(units).save(tmp)
            builder.node_index().save_shard(units.text, tmp, NODES)

        return write, {"extra": {"documents": len(docs), "first": docs[0].id, "nodes": len(units)}}

    def knn():
        idx_dir = shard_dirs(root, "graph_index", [_key(builder, corpus, count)])[0]
        offsets = np.load(idx_dir / "node_offsets.npy", allow_pickle=False)  # [count + 1]
        lo, hi = int(offsets[index]), int(offsets[index + 1])
        texts = Ladder.load(idx_dir).units.text[lo:hi]
        sim, ids = builder.knn_rows(_load_index(builder, idx_dir), texts, lo)

        def write(tmp: Path) -> None:
            np.save(tmp / "knn_sim.npy", sim, allow_pickle=False)
            np.save(tmp / "knn_ids.npy", ids, allow_pickle=False)

        return write, {"inputs": {"graph_index": str(idx_dir)}, "extra": {"nodes": [lo, hi]}}

    return build_once(root, "graph_shard", key, nodes if stage == "nodes" else knn,
                      f"graph {stage} shard {index}/{count}")


def merge_graph_shards(corpus, builder, stage: str, count: int, root: Path,
                       make_retriever: Callable[[], object] | None = None) -> Path:
    """Reduce step of ``stage``: the node index (``nodes``) or the MoGG ladder (``knn``); returns
    the artifact directory it wrote (``Ladder.load`` it for the ``knn`` stage)."""
    _check(builder, stage)
    keys = [_key(builder, corpus, count, stage=stage, shard=i) for i in range(count)]
    dirs = shard_dirs(root, "graph_shard", keys)
    if stage == "nodes":
        parts = [Ladder.load(d) for d in dirs]
        nodes = concat_ladders(parts)
        check_unique_ids(nodes.units.doc_ids, dirs)
        offsets = np.cumsum([0] + [len(p.units) for p in parts]).astype(np.int64)
        index = builder.node_index().fit_shards(dirs, NODES)
        key = _key(builder, corpus, count)

        def write(tmp: Path) -> None:
            nodes.save(tmp)
            np.save(tmp / "node_offsets.npy", offsets, allow_pickle=False)
            index.save(tmp)

        d = write_artifact(artifact_dir(root, "graph_index", key), write, key,
                           inputs={"shards": [str(x) for x in dirs]})
        log.info("graph node index: %d nodes from %d shards -> %s", len(nodes.units), count, d)
        return d

    from mogg.ladders.store import ladder_key

    idx_dir = shard_dirs(root, "graph_index", [_key(builder, corpus, count)])[0]
    units = Ladder.load(idx_dir).units
    sim = np.concatenate([np.load(d / "knn_sim.npy", allow_pickle=False) for d in dirs])
    ids = np.concatenate([np.load(d / "knn_ids.npy", allow_pickle=False) for d in dirs])
    if len(sim) != len(units):
        raise ValueError(f"kNN shards hold {len(sim)} rows for {len(units)} nodes; rebuild the kNN stage")
    builder.timings = {}
    emb = _load_index(builder, idx_dir).embeddings if builder.approximate else None  # for the recall check
    ladder = builder.ladder_from_knn(units, sim, ids, emb)
    lkey = ladder_key(corpus, builder)
    ldir = write_artifact(artifact_dir(root, "ladder", lkey), ladder.save, lkey,
                          inputs={"shards": [str(x) for x in dirs], "graph_index": str(idx_dir)})
    if make_retriever is not None:
        from mogg.search import level_retrievers

        level_retrievers(ladder, make_retriever, root, lkey)  # hop chunks span shards: fit on the merged texts
    log.info("merged graph: %d nodes, %s", len(units), json.dumps(ladder.meta.get("n_edges")))
    return ldir
