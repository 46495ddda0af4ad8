"""Sharded builds of document-local ladders (MoG): one task per corpus shard (map), one merge (reduce).

A shard task builds the ladder of its document range and the per-level retriever shard state
(``save_shard``: BM25 term counts, or dense embeddings); the merge concatenates the shard ladders
and fits each level's retriever from all shards (``fit_shards``: global document frequencies, idf
and average length for BM25; one faiss index for dense) and writes the *same* ladder and
retriever artifacts a single-machine build writes (same keys), so ``train.py``/``evaluate.py``
pick them up unchanged. Graph ladders link nodes across shards: see :mod:`mogg.sharding.graph`.

Shard tasks are artifacts too: a finished shard (valid manifest) is skipped on rerun, a
half-written one (no manifest: killed before the atomic rename) is rebuilt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mogg.artifacts import MANIFEST, artifact_dir, read_manifest, write_artifact
from mogg.ladders.base import Ladder, Level, Units
from mogg.retrieval.hits import retriever_key

log = logging.getLogger(__name__)

# Ladders whose levels never cross documents can be built per shard and concatenated.
SHARDABLE = ("mog", "nodes")  # "nodes": the node-only ladders of a graph build's first stage


def build_once(root: Path, kind: str, key: dict, produce: Callable[[], tuple], label: str) -> Path:
    """A map task as an artifact: skipped when finished (manifest), else ``produce()`` and written.

    ``produce()`` returns ``(writer(tmp_dir), manifest kwargs)`` (``inputs`` / ``extra``); a task
    killed before the atomic rename left no manifest and is redone.
    """
    d = artifact_dir(root, kind, key)
    if finished(d, key):
        log.info("%s already built: %s", label, d)
        return d
    writer, meta = produce()
    write_artifact(d, writer, key, **meta)
    log.info("%s: %s -> %s", label, meta.get("extra"), d)
    return d


def shard_documents(corpus, index: int, count: int) -> list:
    """Shard ``index`` of ``count`` of ``corpus`` (its own byte-range reader when it has one)."""
    if hasattr(corpus, "shard_documents"):
        return corpus.shard_documents(index, count)
    docs = corpus.documents()
    start, end = shard_range(len(docs), index, count)
    return docs[start:end]


def check_unique_ids(doc_ids: Sequence[str], dirs: Sequence[Path]) -> None:
    """Shards read separately cannot see each other's ids: the merge checks them (DataError names the id)."""
    if len(set(doc_ids)) != len(doc_ids):
        from collections import Counter

        from mogg.data.errors import DataError

        dup = next(d for d, c in Counter(doc_ids).items() if c > 1)
        raise DataError(str(dirs[0].parent), f"duplicate document id {dup!r} across shards; fix the corpus")


def shard_range(n_docs: int, index: int, count: int) -> tuple[int, int]:
    """Document range [start, end) of shard ``index`` of ``count`` (balanced, contiguous)."""
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} outside 0..{count - 1}")
    return n_docs * index // count, n_docs * (index + 1) // count


def concat_ladders(parts: Sequence[Ladder], independent: bool = False) -> Ladder:
    """Concatenate ladders built over consecutive document ranges (units, docs, chunks offset).

    Shards of one corpus need ``method in SHARDABLE`` (a graph or tree would miss cross-shard
    links); ``independent=True`` is for separate corpora, where no links are wanted.
    """
    if not parts:
        raise ValueError("no ladders to concatenate")
    method = parts[0].method
    if method not in SHARDABLE and not independent:
        raise ValueError(f"ladders of method {method!r} link units across documents and cannot be concatenated")
    if len({p.n_levels for p in parts}) != 1:
        raise ValueError("ladders to concatenate differ in their number of levels")
    doc_off = np.cumsum([0] + [len(p.units.doc_ids) for p in parts])
    units = Units(
        text=[t for p in parts for t in p.units.text],
        doc=np.concatenate([p.units.doc + o for p, o in zip(parts, doc_off)]),
        doc_ids=[d for p in parts for d in p.units.doc_ids],
    )
    levels = []
    for j, lv0 in enumerate(parts[0].levels):
        lvs = [p.levels[j] for p in parts]
        chunk_off = np.cumsum([0] + [len(lv) for lv in lvs])
        home = np.concatenate([np.where(lv.home >= 0, lv.home + o, -1) for lv, o in zip(lvs, chunk_off)])
        texts = None if lv0.texts is None else [t for lv in lvs for t in lv.texts]
        levels.append(Level(lv0.name, sp.block_diag([lv.coverage for lv in lvs], format="csr", dtype=np.float32), home, texts))
    return Ladder(method, units, levels, dict(parts[0].meta))


def _shard_key(builder, corpus, retriever, index: int, count: int) -> dict:
    return {"builder": builder.config(), "corpus": corpus.fingerprint(), "retriever": retriever.config(),
            "shard": index, "count": count}


def check_shard_retriever(retriever) -> None:
    """Sharded builds need a retriever with map/reduce hooks (``save_shard`` / ``fit_shards``)."""
    if not (hasattr(retriever, "save_shard") and hasattr(retriever, "fit_shards")):
        raise ValueError(f"sharded builds need a retriever with save_shard/fit_shards (BM25, dense); "
                         f"got {type(retriever).__name__}")


def finished(d: Path, key: dict) -> bool:
    """A shard or stage artifact is done when its manifest exists (and matches ``key``)."""
    if (d / MANIFEST).exists():
        read_manifest(d, key)
        return True
    return False


def build_shard(corpus, builder, make_retriever: Callable[[], object], index: int, count: int, root: Path) -> Path:
    """Build shard ``index`` of ``count``: its ladder and per-level retriever shard state (idempotent)."""
    retr = make_retriever()
    check_shard_retriever(retr)
    if builder.method not in SHARDABLE:
        raise ValueError(f"{builder.method!r} ladders are sharded in stages: use mogg.sharding.graph")

    def produce():
        docs = shard_documents(corpus, index, count)
        ladder = builder.build(docs, show_progress=True)

        def write(tmp: Path) -> None:
            ladder.save(tmp)
            for j in range(ladder.n_levels):
                retr.save_shard(ladder.texts(j), tmp, f"level{j}")

        return write, {"extra": {"documents": len(docs), "first": docs[0].id, "last": docs[-1].id}}

    return build_once(root, "shard", _shard_key(builder, corpus, retr, index, count), produce, f"shard {index}/{count}")


def shard_dirs(root: Path, stage: str, keys: Sequence[dict]) -> list[Path]:
    """The finished artifact directories of all shards of a stage, or a clear error naming the missing ones."""
    dirs = [artifact_dir(root, stage, k) for k in keys]
    missing = [i for i, (d, k) in enumerate(zip(dirs, keys)) if not finished(d, k)]
    if missing:
        raise FileNotFoundError(f"{stage}: shards {missing} of {len(keys)} are not built (under {root / stage}); "
                                f"run their tasks first")
    return dirs


def merge_shards(corpus, builder, make_retriever: Callable[[], object], count: int, root: Path) -> Ladder:
    """Merge the ``count`` shards into the single-build ladder and retriever artifacts under ``root``."""
    from mogg.pipeline import ladder_key

    retr0 = make_retriever()
    check_shard_retriever(retr0)
    dirs = shard_dirs(root, "shard", [_shard_key(builder, corpus, retr0, i, count) for i in range(count)])
    ladder = concat_ladders([Ladder.load(d) for d in dirs])
    check_unique_ids(ladder.units.doc_ids, dirs)
    lkey = ladder_key(corpus, builder)
    ldir = artifact_dir(root, "ladder", lkey)
    write_artifact(ldir, ladder.save, lkey, inputs={"shards": [str(d) for d in dirs]})
    for j in range(ladder.n_levels):
        r = make_retriever().fit_shards(dirs, f"level{j}")
        rkey = retriever_key(lkey, j, r)
        write_artifact(artifact_dir(root, "retriever", rkey), r.save, rkey)
    log.info("merged %d shards: %d units, chunks per level %s", count, len(ladder.units), [len(lv) for lv in ladder.levels])
    return ladder
