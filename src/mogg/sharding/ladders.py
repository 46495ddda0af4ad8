"""Sharded builds of document-local ladders (MoG): one task per corpus shard (map), one merge (reduce).

A shard task builds the ladder of its document range and the per-level retriever shard state
(``save_shard``: BM25 term counts, or dense embeddings); the merge concatenates the shard ladders
and fits each level's retriever from all shards (``fit_shards``: global document frequencies, idf
and average length for BM25; one faiss index for dense) and writes the *same* ladder and
retriever artifacts a single-machine build writes (same keys), so ``train.py``/``evaluate.py``
pick them up unchanged. Graph ladders link nodes across shards: see :mod:`mogg.sharding.graph`.

Shard tasks are artifacts too, keyed by their own documents (:mod:`mogg.sharding.keys`): a
finished shard (valid manifest) is skipped on rerun, also after the corpus was moved, copied or
touched; a half-written one (no manifest: killed before the atomic rename) is rebuilt.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mogg.core.artifacts import MANIFEST, ArtifactError, artifact_dir, read_manifest, write_artifact
from mogg.core.text import TEXT_VERSION
from mogg.ladders.base import Ladder
from mogg.ladders.concat import concat_ladders, concat_saved  # noqa: F401 (concat_ladders: re-exported)
from mogg.ladders.store import with_structure
from mogg.search import retriever_key
from mogg.sharding.keys import content_digest, corpus_shard_digests, missing_shards_error

log = logging.getLogger(__name__)

def build_once(root: Path, kind: str, key: dict, produce: Callable[[], tuple], label: str) -> Path:
    """A map task as an artifact: skipped when finished (manifest), else ``produce()`` and written.

    ``produce()`` returns ``(writer(tmp_dir), manifest kwargs)`` (``inputs`` / ``extra``); a task
    killed before the atomic rename left no manifest and is redone; a damaged one (a file failing
    its checksum, a corrupt manifest) is rebuilt.
    """
    d = artifact_dir(root, kind, key)
    try:
        if finished(d, key):
            log.info("%s already built: %s", label, d)
            return d
    except ArtifactError as e:
        # a shard is derived data its task can make again: rerunning the task the merge named rebuilds
        # it (write_artifact replaces the damaged directory), where refusing would fail every rerun
        log.warning("%s is damaged (%s): rebuilding it", label, e)
    writer, meta = produce()
    write_artifact(d, writer, key, **meta)
    log.info("%s: %s -> %s", label, meta.get("extra"), d)
    return d


def shard_documents(corpus, index: int, count: int) -> list:
    """Shard ``index`` of ``count`` of ``corpus`` (each corpus reads its own share: a byte range of
    jsonl files, else a position range)."""
    return corpus.shard_documents(index, count)


def check_unique_ids(doc_ids: Sequence[str], dirs: Sequence[Path]) -> None:
    """Shards read separately cannot see each other's ids: the merge checks them (DataError names the id)."""
    if len(set(doc_ids)) != len(doc_ids):
        from collections import Counter

        from mogg.data.errors import DataError

        dup = next(d for d, c in Counter(doc_ids).items() if c > 1)
        raise DataError(str(dirs[0].parent), f"duplicate document id {dup!r} across shards; fix the corpus")


def _id_hashes(ids: Sequence[str]) -> np.ndarray:
    """A 64-bit FNV-1a hash of each id's code points and length, vectorised over the ids (one pass
    per character position). Equal ids hash equal; unequal ones rarely do, and the caller checks."""
    h = np.full(len(ids), 0xCBF29CE484222325, np.uint64)
    if not ids:
        return h
    a = np.array(ids, dtype=str)  # fixed-width UCS-4, zero-padded
    prime = np.uint64(0x100000001B3)
    for col in a.view(np.uint32).reshape(len(ids), -1).T:
        h = (h ^ col) * prime  # wraps modulo 2**64
    return (h ^ np.char.str_len(a).astype(np.uint64)) * prime


def check_unique_shard_ids(dirs: Sequence[Path]) -> None:
    """:func:`check_unique_ids` over the shards' ``doc_ids.json``, one shard's ids in memory at a time:
    8 bytes per document (their hashes, sorted) instead of every id as a string (PubMed: 24M)."""
    hashes = np.concatenate([_id_hashes(json.loads((d / "doc_ids.json").read_text())) for d in dirs])
    hashes.sort()
    twice = np.unique(hashes[1:][hashes[1:] == hashes[:-1]])
    if not twice.size:
        return
    # equal hashes: the ids that carry them, compared as strings (a hash collision is no duplicate)
    suspects = []
    for d in dirs:
        ids = json.loads((d / "doc_ids.json").read_text())
        suspects += [ids[i] for i in np.flatnonzero(np.isin(_id_hashes(ids), twice))]
    check_unique_ids(suspects, dirs)


def shard_range(n_docs: int, index: int, count: int) -> tuple[int, int]:
    """Document range [start, end) of shard ``index`` of ``count`` (balanced, contiguous)."""
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} outside 0..{count - 1}")
    return n_docs * index // count, n_docs * (index + 1) // count


def _shard_key(builder, retriever, index: int, count: int, content: dict) -> dict:
    # the shard's own documents (mogg.sharding.keys), not the corpus files' paths, mtimes or sha256
    return {"builder": builder.config(), "retriever": retriever.config(), "shard": index, "count": count,
            "content": content, "text_version": TEXT_VERSION}


def build_command(count: int, stage: str | None = None) -> Callable[[list[int]], str]:
    """The ``build.py`` command line that builds the given shards (for the merge's error)."""
    extra = f" shard.stage={stage}" if stage else ""
    return lambda missing: (f"python build.py -m shard.index={','.join(map(str, missing))} "
                            f"shard.count={count}{extra}")


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
    if not getattr(builder, "document_local", False):
        raise ValueError(f"{builder.method!r} ladders link documents: they are sharded in stages {builder.shard_stages}")

    docs = shard_documents(corpus, index, count)  # its slice only: the key is its content

    def produce():
        ladder = with_structure(builder.build(docs, show_progress=True), docs)  # the merge concatenates the counts

        def write(tmp: Path) -> None:
            from mogg.ladders.unit_terms import LadderTerms
            from mogg.search import save_level_shard

            ladder.save(tmp)
            terms = LadderTerms(ladder)  # units tokenized once for all levels
            for j in range(ladder.n_levels):
                save_level_shard(retr, ladder, j, terms, tmp, f"level{j}")

        return write, {"extra": {"documents": len(docs), "first": docs[0].id, "last": docs[-1].id}}

    key = _shard_key(builder, retr, index, count, content_digest(docs))
    return build_once(root, "shard", key, produce, f"shard {index}/{count}")


def shard_dirs(root: Path, stage: str, keys: Sequence[dict],
               command: Callable[[list[int]], str] | None = None) -> list[Path]:
    """The finished artifact directories of all shards of a stage, or an error naming the damaged
    (checksum, manifest) or missing ones and the command that builds them."""
    dirs = [artifact_dir(root, stage, k) for k in keys]
    command = command or build_command(len(keys))
    missing, damaged = [], {}
    for i, (d, k) in enumerate(zip(dirs, keys)):
        try:
            if not finished(d, k):
                missing.append(i)
        except ArtifactError as e:
            damaged[i] = e
    if damaged:
        raise ArtifactError(f"{stage}: shards {list(damaged)} of {len(keys)} are damaged ({'; '.join(map(str, damaged.values()))}); "
                            f"rebuild them with `{command(list(damaged))}` (a rerun of a damaged shard's task rebuilds "
                            "it), then merge again")
    if missing:
        raise missing_shards_error(root, stage, keys, missing, command)
    return dirs


def merge_shards(corpus, builder, make_retriever: Callable[[], object], count: int, root: Path) -> Ladder:
    """Merge the ``count`` shards into the single-build ladder and retriever artifacts under ``root``."""
    from mogg.ladders.store import ladder_key

    retr0 = make_retriever()
    check_shard_retriever(retr0)
    keys = [_shard_key(builder, retr0, i, count, c) for i, c in enumerate(corpus_shard_digests(corpus, count))]
    dirs = shard_dirs(root, "shard", keys)
    check_unique_shard_ids(dirs)
    lkey = ladder_key(corpus, builder)
    ldir = artifact_dir(root, "ladder", lkey)
    merged: dict = {}
    # the shards' saved ladders concatenated file by file: no unit text held (PubMed: ~55 GB of them)
    write_artifact(ldir, lambda tmp: merged.update(concat_saved(dirs, tmp)), lkey, inputs={"shards": [str(d) for d in dirs]})
    for j in range(len(merged["chunks"])):
        r = make_retriever().fit_shards(dirs, f"level{j}")
        rkey = retriever_key(lkey, j, r)
        write_artifact(artifact_dir(root, "retriever", rkey), r.save, rkey)
    log.info("merged %d shards: %d units, chunks per level %s", count, merged["units"], merged["chunks"])
    return ldir
