"""Shard artifact keys from the documents a shard reads, never from the corpus files' paths or mtimes.

A shard's artifact is a function of the builder (and retriever) config and of its documents, so
its key holds exactly that: the config, the shard's place (index of count) and a digest of the
canonical documents the task parsed (id, title, content). A shard task therefore reads only its
own slice of the corpus (no whole-corpus sha256 per task), and moving, copying, staging or
touching the corpus files leaves every finished shard valid. A changed document changes only the
key of the shard that holds it.

The merge recomputes every shard's digest (it reads the corpus once, one shard at a time) and
finds each shard by its full key, so a shard built from other documents is never merged.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from mogg.core.artifacts import MANIFEST, canonical_json

log = logging.getLogger(__name__)

__all__ = ["content_digest", "corpus_shard_digests", "missing_shards_error"]


def content_digest(docs: Iterable) -> dict:
    """Count and sha256 of the canonical documents (JSON ``[id, title, content]`` each, in order)."""
    h, n = hashlib.sha256(), 0
    for d in docs:
        # one JSON array per document: self-delimiting, so no two document lists share a digest
        h.update(json.dumps([d.id, d.title, d.content], ensure_ascii=False).encode())
        n += 1
    return {"documents": n, "sha256": h.hexdigest()}


def corpus_shard_digests(corpus, count: int) -> list[dict]:
    """Every shard's :func:`content_digest`, reading the corpus one shard at a time (for the merge)."""
    return [content_digest(corpus.shard_documents(i, count)) for i in range(count)]


def _built_elsewhere(root: Path, stage: str, key: dict) -> bool:
    """Whether ``stage`` holds a shard of the same config and place but other documents."""
    want = {k: v for k, v in key.items() if k != "content"}
    for m in sorted((Path(root) / stage).glob(f"*/{MANIFEST}")):
        try:
            cfg = json.loads(m.read_text()).get("config", {})
        except (OSError, ValueError):
            continue
        if {k: v for k, v in cfg.items() if k != "content"} == json.loads(canonical_json(want)):
            return True
    return False


def missing_shards_error(root: Path, stage: str, keys: Sequence[dict], missing: Sequence[int],
                         command: Callable[[list[int]], str]) -> FileNotFoundError:
    """The error a merge raises for unbuilt shards: which ones, whether they were built from other
    documents (the corpus changed), and the command that builds them."""
    stale = [i for i in missing if _built_elsewhere(root, stage, keys[i])]
    why = (f"; shards {stale} exist but were built from other documents (the corpus changed since)"
           if stale else "")
    return FileNotFoundError(f"{stage}: shards {list(missing)} of {len(keys)} are not built for these documents "
                             f"(under {Path(root) / stage}){why}; build them with `{command(list(missing))}` "
                             "(with this merge's corpus and ladder overrides), then merge again")

