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

from mogg.core.artifacts import artifact_dir, atomic_path, read_manifest, write_artifact
from mogg.core.text import TEXT_VERSION
from mogg.ladders.base import Ladder, Units, partition_level
from mogg.sharding.keys import content_digest, corpus_shard_digests
from mogg.sharding.ladders import (
    build_command,
    build_once,
    check_unique_ids,
    concat_ladders,
    shard_dirs,
    shard_documents,
)

log = logging.getLogger(__name__)

__all__ = ["STAGES", "build_graph_shard", "merge_graph_shards"]

STAGES = ("nodes", "knn")
NODES = "nodes"  # the node-index shard state prefix


def _key(builder, count: int, **extra) -> dict:
    # no corpus fingerprint: a nodes shard is keyed by its documents' digest, the node index by
    # all shards' digests in order, a kNN shard by its node index (mogg.sharding.keys)
    return {"builder": builder.config(), "count": count, "text_version": TEXT_VERSION, **extra}


def _index_key(builder, digests: list[dict]) -> dict:
    return _key(builder, len(digests), shards=digests)


def _latest_index(root: Path, builder, count: int) -> Path:
    """The node index the last ``nodes`` merge of this builder and count wrote (a kNN task reads no
    corpus; the kNN merge checks that the index is the one of the current documents)."""
    pointer = artifact_dir(root, "graph_index", _key(builder, count)).with_suffix(".latest")
    if not pointer.is_file():
        raise FileNotFoundError(f"graph_index: no node index for these {count} shards under {root / 'graph_index'}; "
                                f"merge the nodes stage first (`python build.py shard.count={count} "
                                "shard.merge=true shard.stage=nodes`)")
    d = pointer.parent / pointer.read_text().strip()
    read_manifest(d)  # a damaged node index is named here, not used
    return d


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
    if stage == "nodes":
        docs = shard_documents(corpus, index, count)  # its slice only: the key is its content
        key = _key(builder, count, stage=stage, shard=index, content=content_digest(docs))
    else:
        idx_dir = _latest_index(root, builder, count)
        key = _key(builder, count, stage=stage, shard=index, graph_index=idx_dir.name)

    def nodes():
        units = builder.nodes(docs, show_progress=True)

        def write(tmp: Path) -> None:
            _node_ladder(units).save(tmp)
            builder.node_index().save_shard(units.text, tmp, NODES)

        return write, {"extra": {"documents": len(docs), "first": docs[0].id, "nodes": len(units)}}

    def knn():
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
    digests = corpus_shard_digests(corpus, count)
    index_key = _index_key(builder, digests)
    if stage == "nodes":
        keys = [_key(builder, count, stage=stage, shard=i, content=c) for i, c in enumerate(digests)]
    else:
        idx_dir = shard_dirs(root, "graph_index", [index_key], lambda _: f"python build.py shard.count={count} "
                             "shard.merge=true shard.stage=nodes")[0]
        keys = [_key(builder, count, stage=stage, shard=i, graph_index=idx_dir.name) for i in range(count)]
    dirs = shard_dirs(root, "graph_shard", keys, build_command(count, stage))
    if stage == "nodes":
        parts = [Ladder.load(d) for d in dirs]
        nodes = concat_ladders(parts)
        check_unique_ids(nodes.units.doc_ids, dirs)
        offsets = np.cumsum([0] + [len(p.units) for p in parts]).astype(np.int64)
        index = builder.node_index().fit_shards(dirs, NODES)

        def write(tmp: Path) -> None:
            nodes.save(tmp)
            np.save(tmp / "node_offsets.npy", offsets, allow_pickle=False)
            index.save(tmp)

        d = write_artifact(artifact_dir(root, "graph_index", index_key), write, index_key,
                           inputs={"shards": [str(x) for x in dirs]})
        with atomic_path(artifact_dir(root, "graph_index", _key(builder, count)).with_suffix(".latest")) as tmp:
            tmp.write_text(d.name + "\n")  # where the kNN tasks find it
        log.info("graph node index: %d nodes from %d shards -> %s", len(nodes.units), count, d)
        return d

    from mogg.ladders.store import ladder_key, with_structure

    units = Ladder.load(idx_dir).units
    sim = np.concatenate([np.load(d / "knn_sim.npy", allow_pickle=False) for d in dirs])
    ids = np.concatenate([np.load(d / "knn_ids.npy", allow_pickle=False) for d in dirs])
    if len(sim) != len(units):
        raise ValueError(f"kNN shards hold {len(sim)} rows for {len(units)} nodes; rebuild the kNN stage")
    builder.timings = {}
    emb = _load_index(builder, idx_dir).embeddings if builder.approximate else None  # for the recall check
    ladder = with_structure(builder.ladder_from_knn(units, sim, ids, emb), corpus.documents())  # as a single build
    lkey = ladder_key(corpus, builder)
    ldir = write_artifact(artifact_dir(root, "ladder", lkey), ladder.save, lkey,
                          inputs={"shards": [str(x) for x in dirs], "graph_index": str(idx_dir)})
    if make_retriever is not None:
        from mogg.search import level_retrievers

        level_retrievers(ladder, make_retriever, root, lkey)  # hop chunks span shards: fit on the merged texts
    log.info("merged graph: %d nodes, %s", len(units), json.dumps(ladder.meta.get("n_edges")))
    return ldir
