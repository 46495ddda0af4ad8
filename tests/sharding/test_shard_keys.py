"""A shard is identified by its own documents: moving, copying or touching the corpus orphans no shard,
a changed document rebuilds only its shard, and the merge names what is missing and how to build it."""

import json
import os
import shutil

import numpy as np
import pytest

from mogg.data.corpus import Corpus, MedRAGJsonl
from mogg.data.records import Document
from mogg.ladders import MoGLadderBuilder
from mogg.ladders.base import Ladder
from mogg.ladders.store import build_ladder
from mogg.retrieval.bm25 import BM25Retriever
from mogg.sharding import build_graph_shard, build_shard, merge_graph_shards, merge_shards

COUNT = 3


def _write_corpus(folder, n=18):
    folder.mkdir(parents=True, exist_ok=True)
    docs = [Document(f"d{i}", "", " ".join(f"Sentence {j} of {i} on topic{(i * j) % 5}." for j in range(i % 4 + 1)))
            for i in range(n)]
    files = []
    for f in range(2):
        p = folder / f"part{f}.jsonl"
        p.write_text("".join(json.dumps({"id": d.id, "title": d.title, "content": d.content}) + "\n"
                             for d in docs[f * n // 2:(f + 1) * n // 2]))
        files.append(p)
    return files


class _Counting(MoGLadderBuilder):
    """Counts the shard builds (a reused shard builds nothing)."""

    calls = 0

    def build(self, docs, **kw):
        type(self).calls += 1
        return super().build(docs, **kw)


def _build_all(files, builder, root):
    corpus = Corpus([MedRAGJsonl([str(f) for f in files])])
    dirs = [build_shard(corpus, builder, BM25Retriever, i, COUNT, root) for i in range(COUNT)]
    return corpus, dirs


def _same_ladder(a: Ladder, b: Ladder) -> None:
    assert a.units.text == b.units.text and a.units.doc_ids == b.units.doc_ids
    for x, y in zip(a.levels, b.levels):
        assert (x.coverage != y.coverage).nnz == 0 and np.array_equal(x.home, y.home)


@pytest.mark.parametrize("change", ["move", "touch", "copy"])
def test_moved_or_touched_corpus_reuses_every_shard(tmp_path, change):
    files = _write_corpus(tmp_path / "a")
    builder, root = _Counting(n_levels=2, document_level=True), tmp_path / "store"
    corpus, dirs = _build_all(files, builder, root)
    first = Ladder.load(merge_shards(corpus, builder, BM25Retriever, COUNT, root))
    single, _ = build_ladder(corpus, builder, None)
    _same_ladder(first, single)
    stamps = [(d / "manifest.json").stat().st_mtime_ns for d in dirs]

    if change == "touch":
        for f in files:
            os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    else:  # another folder, e.g. staged to node-local disk
        (tmp_path / "b").mkdir()
        files = [shutil.move(f, tmp_path / "b" / f.name) if change == "move" else shutil.copy(f, tmp_path / "b")
                 for f in files]
    _Counting.calls = 0
    corpus2, dirs2 = _build_all(files, builder, root)
    assert _Counting.calls == 0 and dirs2 == dirs  # every shard reused, none rebuilt
    assert [(d / "manifest.json").stat().st_mtime_ns for d in dirs2] == stamps
    merged = Ladder.load(merge_shards(corpus2, builder, BM25Retriever, COUNT, root))
    _same_ladder(merged, first)
    assert _Counting.calls == 0


def test_changed_document_rebuilds_only_its_shard_and_the_merge_says_so(tmp_path):
    files = _write_corpus(tmp_path / "a")
    builder, root = _Counting(n_levels=2, document_level=True), tmp_path / "store"
    corpus, dirs = _build_all(files, builder, root)
    # same size, other bytes: an edit a size or mtime check could miss
    text = files[1].read_text()
    at = text.rindex("topic") + 5  # a word of the last document: the last shard's
    files[1].write_text(text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1:])
    assert len(files[1].read_text()) == len(text)
    with pytest.raises(FileNotFoundError) as err:
        merge_shards(corpus, builder, BM25Retriever, COUNT, root)
    msg = str(err.value)
    assert "shards [2] of 3 are not built" in msg and "built from other documents" in msg
    assert f"python build.py -m shard.index=2 shard.count={COUNT}" in msg
    _Counting.calls = 0
    _, dirs2 = _build_all(files, builder, root)
    assert _Counting.calls == 1 and dirs2[:2] == dirs[:2] and dirs2[2] != dirs[2]
    merged = Ladder.load(merge_shards(corpus, builder, BM25Retriever, COUNT, root))
    single, _ = build_ladder(Corpus([MedRAGJsonl([str(f) for f in files])]), builder, None)
    _same_ladder(merged, single)


def test_corrupt_shard_is_named(tmp_path):
    files = _write_corpus(tmp_path / "a")
    builder, root = MoGLadderBuilder(n_levels=2, document_level=True), tmp_path / "store"
    corpus, dirs = _build_all(files, builder, root)
    victim = next(p for p in sorted(dirs[1].iterdir()) if p.name != "manifest.json")
    victim.write_bytes(victim.read_bytes() + b"x")
    with pytest.raises(Exception, match=f"{dirs[1]}.*sha256") as err:
        merge_shards(corpus, builder, BM25Retriever, COUNT, root)
    assert f"python build.py -m shard.index=1 shard.count={COUNT}" in str(err.value)


@pytest.mark.parametrize("damage", ["payload", "manifest"])
def test_rerunning_a_damaged_shards_task_rebuilds_it(tmp_path, damage):
    """Issue 60: the merge names a corrupt shard, and rerunning that shard's task rebuilds it (before,
    the rerun refused the damaged directory again); the merge then equals the single build."""
    files = _write_corpus(tmp_path / "a")
    builder, root = _Counting(n_levels=2, document_level=True), tmp_path / "store"
    corpus, dirs = _build_all(files, builder, root)
    victim = dirs[1] / "manifest.json" if damage == "manifest" else \
        next(p for p in sorted(dirs[1].iterdir()) if p.name != "manifest.json")
    victim.write_bytes(victim.read_bytes()[:-7])
    _Counting.calls = 0
    assert build_shard(corpus, builder, BM25Retriever, 1, COUNT, root) == dirs[1]
    assert _Counting.calls == 1  # rebuilt, not refused
    _, dirs2 = _build_all(files, builder, root)
    assert _Counting.calls == 1 and dirs2 == dirs  # the intact shards are reused
    merged = Ladder.load(merge_shards(corpus, builder, BM25Retriever, COUNT, root))
    _same_ladder(merged, build_ladder(corpus, builder, None)[0])


def test_moved_corpus_reuses_graph_shards(tmp_path):
    from mogg.ladders.graph import GraphLadderBuilder

    files = _write_corpus(tmp_path / "a", n=24)
    b = GraphLadderBuilder(k_graph=3, t_graph=0.1, hops=2, max_tokens=60, similarity="bm25")
    root = tmp_path / "store"

    def run(files):
        corpus = Corpus([MedRAGJsonl([str(f) for f in files])])
        nodes = [build_graph_shard(corpus, b, "nodes", i, COUNT, root) for i in range(COUNT)]
        merge_graph_shards(corpus, b, "nodes", COUNT, root)
        knn = [build_graph_shard(corpus, b, "knn", i, COUNT, root) for i in range(COUNT)]
        return nodes + knn, Ladder.load(merge_graph_shards(corpus, b, "knn", COUNT, root))

    dirs, first = run(files)
    stamps = [(d / "manifest.json").stat().st_mtime_ns for d in dirs]
    (tmp_path / "b").mkdir()
    moved = [shutil.move(f, tmp_path / "b" / f.name) for f in files]
    dirs2, merged = run(moved)
    assert dirs2 == dirs and [(d / "manifest.json").stat().st_mtime_ns for d in dirs2] == stamps
    assert np.array_equal(merged.arrays["edges"], first.arrays["edges"])
    single = b.build(Corpus([MedRAGJsonl([str(f) for f in moved])]).documents())
    assert np.array_equal(merged.arrays["edges"], single.arrays["edges"])
