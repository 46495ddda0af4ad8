"""Sharded builds through a real launcher (Hydra multirun + submitit's local executor), then merge:
the merged artifacts retrieve exactly like a single-machine build."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, compose
from fakes import BagOfWordsEncoder
from hydra.utils import instantiate

from mogg.data.corpus import DocumentList
from mogg.data.records import Document
from mogg.ladders import MoGLadderBuilder
from mogg.ladders.base import Ladder
from mogg.ladders.concat import concat_ladders
from mogg.ladders.store import build_ladder
from mogg.retrieval.bm25 import BM25Retriever, merge_term_counts
from mogg.search import level_retrievers, search_levels
from mogg.sharding import shard_range


def test_concat_equals_single_build():
    docs = [Document(f"d{i}", "", " ".join(f"Sentence {j} of {i} about topic{(i * j) % 7}." for j in range(i % 9 + 1))) for i in range(40)]
    b = MoGLadderBuilder(n_levels=3, document_level=True)
    single = b.build(docs)
    parts = [b.build(docs[slice(*shard_range(40, i, 3))]) for i in range(3)]
    merged = concat_ladders(parts)
    assert merged.units.text == single.units.text and merged.units.doc_ids == single.units.doc_ids
    for a, m in zip(single.levels, merged.levels):
        assert (a.coverage != m.coverage).nnz == 0 and np.array_equal(a.home, m.home)
    # BM25: merged term counts give the single index exactly
    texts = single.texts(1)
    cuts = [0, 11, 30, len(texts)]
    r = BM25Retriever()
    merged_r = BM25Retriever().fit_counts(*merge_term_counts([r.count_terms(texts[a:b]) for a, b in zip(cuts, cuts[1:])]))
    ref = BM25Retriever().fit(texts)
    assert merged_r.vocab == ref.vocab and (merged_r.weights != ref.weights).nnz == 0


@pytest.mark.parametrize("block", [None, 7])
def test_concat_saved_writes_the_files_of_the_in_memory_concatenation(tmp_path, block):
    """The merge concatenates saved shard ladders as streams, one shard's arrays at a time (no unit
    text, no corpus-sized array in memory): every file equals what concat_ladders(...).save writes,
    byte for byte, stored chunk texts included; blocks of 7 values cut the arrays inside shards."""
    from mogg.ladders.base import Level
    from mogg.ladders.concat import BLOCK, concat_saved

    docs = [Document(f"d{i}", "", " ".join(f"Sentence {j} of {i}, \u00e9t\u00e9 \"q\" {(i * j) % 7}." for j in range(i % 9 + 1)))
            for i in range(40)]
    b = MoGLadderBuilder(n_levels=3, document_level=True)
    parts = [b.build(docs[slice(*shard_range(40, i, 3))]) for i in range(3)]
    for p in parts:  # a level with stored texts, as summaries are
        lv = p.levels[1]
        p.levels.append(Level("stored", lv.coverage, lv.home, [f"summary {c}" for c in range(len(lv))]))
    dirs = []
    for i, p in enumerate(parts):
        (tmp_path / f"s{i}").mkdir()
        p.save(tmp_path / f"s{i}")
        dirs.append(tmp_path / f"s{i}")
    (tmp_path / "mem").mkdir()
    (tmp_path / "disk").mkdir()
    concat_ladders(parts).save(tmp_path / "mem")
    info = concat_saved(dirs, tmp_path / "disk", block or BLOCK)
    names = sorted(p.name for p in (tmp_path / "mem").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "disk").iterdir())
    for n in names:
        assert (tmp_path / "mem" / n).read_bytes() == (tmp_path / "disk" / n).read_bytes(), n
    assert info["units"] == sum(len(p.units) for p in parts) and len(info["chunks"]) == 5
    assert info["documents"] == 40 and info["chunks"][0] == sum(len(p.levels[0]) for p in parts)


def test_unique_ids_across_shards_by_hash_then_by_string(tmp_path, monkeypatch):
    """The merge checks document ids across shards from 8-byte hashes (one shard's ids in memory at a
    time); equal hashes are compared as strings, so a collision is no duplicate and a duplicate is named."""
    import json

    import mogg.sharding.ladders as sl
    from mogg.data.errors import DataError

    def shards(*lists):
        dirs = []
        for ids in lists:
            dirs.append(tmp_path / f"s{len(list(tmp_path.iterdir()))}")
            dirs[-1].mkdir()
            (dirs[-1] / "doc_ids.json").write_text(json.dumps(ids, ensure_ascii=False))
        return dirs

    ok = shards(["a", "ab", "b\u00e9", "PMID:1"], ["ab0", "ba", "b\u00e9 ", "PMID:10"], ["x" * 300])
    sl.check_unique_shard_ids(ok)
    assert len(set(sl._id_hashes(["a", "ab", "ab0", "ba", "b\u00e9", "b\u00e9 "]).tolist())) == 6
    with pytest.raises(DataError, match="duplicate document id 'b\u00e9'"):
        sl.check_unique_shard_ids(shards(["a", "b\u00e9"], ["c"], ["d", "b\u00e9"]))
    monkeypatch.setattr(sl, "_id_hashes", lambda ids: np.zeros(len(ids), np.uint64))  # every id collides
    sl.check_unique_shard_ids(ok)
    with pytest.raises(DataError, match="duplicate document id 'PMID:1'"):
        sl.check_unique_shard_ids(shards(["a", "PMID:1"], ["PMID:1"], []))


@pytest.mark.slow  # ~15-20 s: the default run stays under 10 minutes on 2 cores (pytest -m slow runs it)
def test_three_shards_through_submitit_local(tmp_path, mirage):
    common = [f"paths.data_dir={mirage.parent}", "corpus.sources.1.min_chars=300"]
    single_cfg = compose(common + [f"paths.artifacts={tmp_path / 'single'}"])
    corpus, builder = instantiate(single_cfg.corpus), instantiate(single_cfg.ladders.mog)
    ladder, key = build_ladder(corpus, builder, tmp_path / "single")
    questions = [it.question for it in instantiate(single_cfg.questions).load()]
    ref = search_levels(level_retrievers(ladder, instantiate(single_cfg.retriever), tmp_path / "single", key), questions, 3)

    sharded = tmp_path / "sharded"
    args = [sys.executable, str(ROOT / "build.py"), "-m", "hydra/launcher=submitit_local", "shard.index=0,1,2", "shard.count=3",
            f"paths.artifacts={sharded}", f"paths.outputs={tmp_path / 'out'}", *common]
    res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(list((sharded / "shard").iterdir())) == 3
    # a rerun skips finished shards (idempotent) and a merge makes the single-build artifacts
    merge = [sys.executable, str(ROOT / "build.py"), "shard.count=3", "shard.merge=true", f"paths.artifacts={sharded}",
             f"paths.outputs={tmp_path / 'out'}", *common]
    res = subprocess.run(merge, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]

    cfg = compose(common + [f"paths.artifacts={sharded}"])
    lad2, key2 = build_ladder(instantiate(cfg.corpus), instantiate(cfg.ladders.mog), sharded)  # loads the merged artifact
    assert key2 == key and lad2.units.text == ladder.units.text
    import json

    from mogg.core.artifacts import artifact_dir
    manifest = json.loads((artifact_dir(sharded, "ladder", key) / "manifest.json").read_text())
    assert len(manifest["inputs"]["shards"]) == 3  # the merged artifact, not a fresh single build
    got = search_levels(level_retrievers(lad2, instantiate(cfg.retriever), sharded, key2), questions, 3)
    assert np.array_equal(got.ids, ref.ids)
    assert np.array_equal(got.scores, ref.scores)


# --------------------------------------------------------------------------- MoGG (two stages) and dense state
def _HashEncoder():
    """A bag of hashed words: similar texts get similar vectors."""
    return BagOfWordsEncoder(12, {"name_or_path": "hash", "dim": 12}, lambda t: t.lower().replace(".", " ").split(),
                             lambda w: int(hashlib.md5(w.encode()).hexdigest()[:4], 16))


def _topic_docs(n=30, seed=0):
    rng = np.random.default_rng(seed)
    vocab = [f"term{i}" for i in range(50)]
    return [Document(f"d{i}", "", " ".join(" ".join(rng.choice(vocab, size=int(rng.integers(3, 9)))).capitalize() + "."
                                            for _ in range(int(rng.integers(1, 8))))) for i in range(n)]


@pytest.mark.parametrize("similarity", ["bm25", "dense", "dense_ivf"])
def test_graph_shards_equal_single_build(tmp_path, similarity):
    from mogg.ladders.graph import GraphLadderBuilder
    from mogg.sharding import build_graph_shard, merge_graph_shards

    corpus = DocumentList(_topic_docs())
    ivf = {"dense_index": "IVF4,Flat", "nprobe": 1} if similarity == "dense_ivf" else {}
    b = GraphLadderBuilder(k_graph=3, t_graph=0.1, hops=3, max_tokens=60, similarity=similarity.split("_")[0],
                           encoder=_HashEncoder() if similarity != "bm25" else None, batch_size=7, **ivf)
    single = b.build(corpus.documents())
    root = tmp_path / "a"
    with pytest.raises(FileNotFoundError, match="not built"):
        merge_graph_shards(corpus, b, "nodes", 3, root)
    for i in range(3):
        build_graph_shard(corpus, b, "nodes", i, 3, root)
    with pytest.raises(FileNotFoundError, match="graph_index"):  # kNN before the node index exists
        build_graph_shard(corpus, b, "knn", 0, 3, root)
    from mogg.retrieval import DenseRetriever

    trained = []  # approximate: the faiss index is trained once, at the node index's merge
    real_build_ann = DenseRetriever._build_ann
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(DenseRetriever, "_build_ann", lambda self: trained.append(1) or real_build_ann(self))
        merge_graph_shards(corpus, b, "nodes", 3, root)
        dirs = [build_graph_shard(corpus, b, "knn", i, 3, root) for i in range(3)]
    assert len(trained) == bool(ivf)  # not once more per kNN shard
    mtime = (dirs[1] / "manifest.json").stat().st_mtime_ns
    assert build_graph_shard(corpus, b, "knn", 1, 3, root) == dirs[1]  # finished: skipped
    assert (dirs[1] / "manifest.json").stat().st_mtime_ns == mtime
    merged = Ladder.load(merge_graph_shards(corpus, b, "knn", 3, root, make_retriever=BM25Retriever))
    assert merged.units.text == single.units.text
    assert len(single.arrays["edges"]) > 10
    assert np.array_equal(merged.arrays["edges"], single.arrays["edges"])
    assert np.array_equal(merged.arrays["edge_sim"], single.arrays["edge_sim"])
    # an approximate kNN states its measured recall in both (the merge checks it on the merged rows)
    assert merged.meta.get("knn_recall") == single.meta.get("knn_recall") and (("knn_recall" in single.meta) == bool(ivf))
    assert any(e[0] < 10 <= e[1] for e in single.arrays["edges"])  # edges do cross shard boundaries
    for a, m in zip(single.levels, merged.levels):
        assert (a.coverage != m.coverage).nnz == 0
    # the merge wrote the single build's artifact: build_ladder loads it instead of rebuilding
    lad, _ = build_ladder(corpus, b, root)
    assert np.array_equal(lad.arrays["edges"], single.arrays["edges"])
    assert len(list((root / "retriever").iterdir())) == single.n_levels


def test_dense_mog_shards_merge_through_faiss(tmp_path):
    from mogg.retrieval.dense import DenseRetriever
    from mogg.sharding import build_shard, merge_shards

    corpus = DocumentList(_topic_docs(25, seed=3))
    b = MoGLadderBuilder(n_levels=3, document_level=True)
    make = lambda: DenseRetriever(_HashEncoder(), backend="faiss")  # noqa: E731
    single, key = build_ladder(corpus, b, tmp_path / "single")
    queries = ["term1 term2 term3", "term40 term7", "term11"]
    ref = search_levels(level_retrievers(single, make, tmp_path / "single", key), queries, 4)
    root = tmp_path / "sharded"
    for i in range(3):
        build_shard(corpus, b, make, i, 3, root)
    merge_shards(corpus, b, make, 3, root)
    lad, key2 = build_ladder(corpus, b, root)
    np.testing.assert_array_equal(lad.doc_paragraphs(), single.doc_paragraphs())  # the shards' counts, merged
    np.testing.assert_array_equal(lad.unit_paragraphs(), single.unit_paragraphs())  # ... and paragraph starts
    from mogg.ladders.sources import PARAGRAPH_STARTS, PARAGRAPHS
    stored = np.load(next((root / "ladder").iterdir()) / "arrays.npz").files
    assert PARAGRAPHS in stored and PARAGRAPH_STARTS in stored  # not a derived refill
    retrs = level_retrievers(lad, make, root, key2)
    assert all(r._index is not None and r._index.ntotal == len(lad.levels[j]) for j, r in enumerate(retrs))  # faiss
    got = search_levels(retrs, queries, 4)
    assert np.array_equal(got.ids, ref.ids) and np.array_equal(got.scores, ref.scores)


@pytest.mark.slow  # ~15-20 s: the default run stays under 10 minutes on 2 cores (pytest -m slow runs it)
def test_mogg_two_stage_shards_through_build_py(tmp_path, mirage):
    """The MoGG ladder built by build.py in 3 shards x 2 stages (Hydra multirun) is the single build's."""
    common = [f"paths.data_dir={mirage.parent}", "corpus.sources.1.min_chars=300", "experiment=mogg",
              f"paths.outputs={tmp_path / 'out'}"]
    root = tmp_path / "sharded"
    for stage in ("nodes", "knn"):
        for extra in (["-m", "shard.index=0,1,2"], ["shard.merge=true"]):
            args = [sys.executable, str(ROOT / "build.py"), *extra, "shard.count=3", f"shard.stage={stage}",
                    f"paths.artifacts={root}", *common]
            res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
            assert res.returncode == 0, res.stderr[-3000:]
    cfg = compose(common + [f"paths.artifacts={tmp_path / 'single'}"])
    corpus, builder = instantiate(cfg.corpus), instantiate(cfg.ladders.mogg)
    single = builder.build(corpus.documents())
    merged, key = build_ladder(corpus, builder, root)  # loads the merged artifact
    import json

    from mogg.core.artifacts import artifact_dir
    manifest = json.loads((artifact_dir(root, "ladder", key) / "manifest.json").read_text())
    assert len(manifest["inputs"]["shards"]) == 3  # made by the kNN merge, not a fresh single build
    assert np.array_equal(merged.arrays["edges"], single.arrays["edges"])
    assert np.array_equal(merged.arrays["edge_sim"], single.arrays["edge_sim"])
    for a, m in zip(single.levels, merged.levels):
        assert (a.coverage != m.coverage).nnz == 0


def test_bm25_parts_merge_holds_no_joint_postings(tmp_path):
    """retriever=bm25_sharded: the merge keeps one BM25 part per shard (global statistics only joined)
    and the merged artifact retrieves exactly like a single-machine BM25 index."""
    from mogg.retrieval.bm25_sharded import ShardedBM25
    from mogg.sharding import build_shard, merge_shards

    corpus = DocumentList(_topic_docs(40, seed=5))
    b = MoGLadderBuilder(n_levels=3, document_level=True)
    single, key = build_ladder(corpus, b, tmp_path / "single")
    queries = ["term1 term2 term3", "term40 term7", "term11", "nothing here"]
    ref = search_levels(level_retrievers(single, lambda: BM25Retriever(backend="scipy"), tmp_path / "single", key), queries, 4)
    root = tmp_path / "sharded"
    make = lambda: ShardedBM25(backend="scipy")  # noqa: E731
    for i in range(3):
        build_shard(corpus, b, make, i, 3, root)
    merge_shards(corpus, b, make, 3, root)
    lad, key2 = build_ladder(corpus, b, root)
    retrs = level_retrievers(lad, make, root, key2)  # loaded from the merged artifacts
    assert all(isinstance(r, ShardedBM25) and r.n_parts == 3 for r in retrs)
    got = search_levels(retrs, queries, 4)
    assert np.array_equal(got.ids, ref.ids) and np.array_equal(got.scores, ref.scores)


def test_shard_misuse_is_refused_clearly(tmp_path):
    from mogg.ladders.graph import GraphLadderBuilder
    from mogg.sharding import build_graph_shard, build_shard

    corpus = DocumentList(_topic_docs(6))
    with pytest.raises(ValueError, match="they are sharded in stages"):
        build_shard(corpus, GraphLadderBuilder(), BM25Retriever, 0, 2, tmp_path)
    with pytest.raises(ValueError, match="shard.stage"):
        build_graph_shard(corpus, GraphLadderBuilder(), "edges", 0, 2, tmp_path)
    with pytest.raises(ValueError, match="graph ladder builder"):
        build_graph_shard(corpus, MoGLadderBuilder(), "nodes", 0, 2, tmp_path)
    with pytest.raises(ValueError, match="save_shard"):
        build_shard(corpus, MoGLadderBuilder(), object, 0, 2, tmp_path)
    with pytest.raises(ValueError, match="outside"):
        build_shard(corpus, MoGLadderBuilder(), BM25Retriever, 2, 2, tmp_path)


def test_jsonl_shards_never_load_the_whole_corpus(tmp_path, monkeypatch):
    """MedRAG-style jsonl: each shard task reads its own byte range (documents() is never called) and
    the merge equals the single build; a duplicate id across shards is refused by the merge."""
    import json

    from mogg.data.corpus import Corpus, MedRAGJsonl
    from mogg.data.errors import DataError
    from mogg.sharding import build_shard, merge_shards

    docs = _topic_docs(45, seed=9)
    files = []
    for f in range(3):
        p = tmp_path / f"pubmed{f}.jsonl"
        p.write_text("".join(json.dumps({"id": d.id, "title": d.title, "content": d.content}) + "\n" for d in docs[f * 15:(f + 1) * 15]))
        files.append(str(p))
    b = MoGLadderBuilder(n_levels=3, document_level=True)
    single, key = build_ladder(Corpus([MedRAGJsonl(files)]), b, tmp_path / "single")
    queries = ["term1 term2 term3", "term40 term7"]
    ref = search_levels(level_retrievers(single, BM25Retriever, tmp_path / "single", key), queries, 4)

    def no_full_load(self):
        raise AssertionError("a shard task loaded the whole corpus")

    monkeypatch.setattr(Corpus, "documents", no_full_load)
    root = tmp_path / "sharded"
    for i in range(4):  # 4 byte ranges over 3 files: ranges cut files in the middle
        build_shard(Corpus([MedRAGJsonl(files)]), b, BM25Retriever, i, 4, root)
    merge_shards(Corpus([MedRAGJsonl(files)]), b, BM25Retriever, 4, root)
    monkeypatch.undo()
    lad, key2 = build_ladder(Corpus([MedRAGJsonl(files)]), b, root)
    assert key2 == key and lad.units.doc_ids == single.units.doc_ids
    got = search_levels(level_retrievers(lad, BM25Retriever, root, key2), queries, 4)
    assert np.array_equal(got.ids, ref.ids) and np.array_equal(got.scores, ref.scores)

    dup = tmp_path / "dup.jsonl"  # the first document again, in another file: only the merge can see it
    dup.write_text(json.dumps({"id": docs[0].id, "content": "again"}) + "\n")
    corpus = Corpus([MedRAGJsonl([*files, str(dup)])])
    for i in range(2):
        build_shard(corpus, b, BM25Retriever, i, 2, tmp_path / "dup")
    with pytest.raises(DataError, match="duplicate document id 'd0'"):
        merge_shards(corpus, b, BM25Retriever, 2, tmp_path / "dup")


def test_sacct_usage_per_array_task():
    """scripts/rehearse_scale.py --scheduler slurm reads each task's figures from sacct: wall from the
    allocation's Elapsed, CPU from its TotalCPU, peak RSS the largest MaxRSS of its steps."""
    from mogg.core.measure import parse_sacct

    out = parse_sacct(
        "141_0|COMPLETED|00:01:26|01:12.505||2026-11-28T01:00:00|2026-11-28T01:01:26\n"
        "141_0.batch|COMPLETED|00:01:26|00:00.010|11076K|2026-11-28T01:00:00|2026-11-28T01:01:26\n"
        "141_0.0|COMPLETED|00:01:25|01:12.495|912384K|2026-11-28T01:00:01|2026-11-28T01:01:26\n"
        "141_1|CANCELLED by 0|1-00:00:02|1:02:03||2026-11-28T01:00:00|2026-11-29T01:00:02\n"
        "141_1.0|CANCELLED|1-00:00:01|1:02:03|1.5G|2026-11-28T01:00:00|2026-11-29T01:00:01\n"
        "143|COMPLETED|00:00:08|00:03.100||2026-11-28T01:02:00|2026-11-28T01:02:08\n")
    assert out["141_0"] == {"state": "COMPLETED", "wall_s": 86.0, "cpu_s": 72.505, "peak_rss_mb": 891.0,
                            "start": "2026-11-28T01:00:00", "end": "2026-11-28T01:01:26", "settling": False}
    # a step still running, or one whose MaxRSS its siblings have and it has not yet: still settling
    late = parse_sacct("9_0|COMPLETED|00:00:10|00:00:09||2026-11-28T01:00:00|2026-11-28T01:00:10\n"
                       "9_0.batch|COMPLETED|00:00:10|00:00:00|12360K|2026-11-28T01:00:00|2026-11-28T01:00:10\n"
                       "9_0.0|COMPLETED|00:00:10|00:00:09||2026-11-28T01:00:00|2026-11-28T01:00:10\n")
    assert late["9_0"]["settling"] and late["9_0"]["peak_rss_mb"] < 50
    assert out["141_1"]["state"] == "CANCELLED" and out["141_1"]["wall_s"] == 86402.0
    assert out["141_1"]["cpu_s"] == 3723.0 and out["141_1"]["peak_rss_mb"] == 1536.0
    assert out["143"]["peak_rss_mb"] is None  # no step sampled: no accounting gathered


def test_sacct_usage_waits_for_the_accounting_to_settle(tmp_path):
    """A launcher returns when the task's result file is written; sacct may still say RUNNING (its
    accounting trails the job's end: CI saw it). slurm_usage re-reads until every allocation is final."""
    from mogg.core.measure import slurm_usage

    calls = tmp_path / "calls"
    fake = tmp_path / "sacct"
    fake.write_text(
        "#!/bin/sh\n"
        f"echo x >> {calls}\n"
        f"if [ $(wc -l < {calls}) -lt 3 ]; then\n"
        "  echo '7_0|RUNNING|00:00:05|00:00:00||2026-11-28T01:00:00|Unknown'\n"
        "else\n"
        "  echo '7_0|COMPLETED|00:00:06|00:00:04.500||2026-11-28T01:00:00|2026-11-28T01:00:06'\n"
        "fi\n"
        "echo '7_0.0|COMPLETED|00:00:06|00:00:04.500|2048K|2026-11-28T01:00:00|2026-11-28T01:00:06'\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    got = slurm_usage(["7"], env, poll_s=0.01)
    assert got["7_0"]["state"] == "COMPLETED" and got["7_0"]["cpu_s"] == 4.5
    assert len(calls.read_text().splitlines()) == 3
    calls.unlink()  # never settles within settle_s: the last reading comes back as it is
    got = slurm_usage(["7"], env, settle_s=0.0, poll_s=0.01)
    assert got["7_0"]["state"] == "RUNNING"
    calls.write_text("x\nx\nx\n")  # every allocation final, but job 8 not yet known: waits for it
    got = slurm_usage(["7", "8"], env, settle_s=0.05, poll_s=0.01)
    assert "8" not in got and len(calls.read_text().splitlines()) > 4
