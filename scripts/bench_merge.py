"""Peak RAM of the reduce step: BM25 joined into one index vs BM25 in parts (global statistics only).

Builds ``--shards`` shards of ``--words`` words each (the real PubMedQA* + MedMCQA passages,
replicated with new ids; MoG token ladder, 5 levels) once, then runs the merge twice, each in a
fresh process, with ``retriever=bm25`` (:class:`BM25Retriever`, all postings in memory) and with
``retriever=bm25_sharded`` (:class:`ShardedBM25`, one shard's counts at a time), and reports wall
time and peak RSS side by side with their ratio. Both merged artifacts return the same top-10 ids
and scores for 200 questions (checked here).

    python scripts/bench_merge.py [--data-dir ../shared/data] [--shards 4] [--words 2e6]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = {"bm25": "mogg.retrieval.bm25:BM25Retriever", "bm25_sharded": "mogg.retrieval.bm25_sharded:ShardedBM25"}



def _corpus(data_dir: str, words: float, shards: int):
    from mogg.data.corpus import Corpus, DocumentList, MedMCQAExplanations, PubMedQAContexts
    from mogg.data.records import Document

    m = Path(data_dir) / "mirage"
    base = Corpus([PubMedQAContexts(str(m / "rawdata/pubmedqa/data/test_set.json")),
                   MedMCQAExplanations(str(m / "rawdata/medmcqa/data/dev.json"))]).documents()
    n = sum(len(d.text.split()) for d in base)
    reps = max(1, round(words * shards / n))
    return DocumentList([Document(f"{d.id}#{r}", d.title, d.content) for r in range(reps) for d in base]), n * reps, base


def _retriever(kind: str):
    import importlib

    mod, cls = KINDS[kind].split(":")
    return lambda: getattr(importlib.import_module(mod), cls)(backend="scipy")


def _builder():
    from mogg.ladders import MoGLadderBuilder

    return MoGLadderBuilder(unit="tokens", unit_size=64, n_levels=5)


def _child(args) -> None:
    """One merge in this (fresh) process; prints seconds and peak RSS as JSON."""
    from mogg.sharding import merge_shards

    corpus, _, _ = _corpus(args.data_dir, args.words, args.shards)
    # A forked child starts with its parent's high-water mark (ru_maxrss): reset the peak (Linux
    # clear_refs 5) and read VmHWM, so the figure is this merge's own (corpus in memory included).
    Path("/proc/self/clear_refs").write_text("5")
    rss0 = _status_mb("VmRSS")
    t0 = time.perf_counter()
    merge_shards(corpus, _builder(), _retriever(args.child), args.shards, Path(args.root))
    print(json.dumps({"seconds": time.perf_counter() - t0, "peak_rss_mb": _status_mb("VmHWM"), "rss_before_merge_mb": rss0}))


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def main() -> None:
    from mogg.core.flags import existing_dir, positive_float, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=existing_dir, default=os.environ.get("MOGG_DATA_DIR", "data"))
    ap.add_argument("--shards", type=positive_int, default=4)
    ap.add_argument("--words", type=positive_float, default=2e6, help="words per shard")
    ap.add_argument("--child", choices=sorted(KINDS), help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)

    import numpy as np

    from mogg.ladders.store import build_ladder
    from mogg.search import level_retrievers, search_levels
    from mogg.sharding import build_shard

    corpus, n_words, base = _corpus(args.data_dir, args.words, args.shards)
    print(f"{args.shards} shards, {n_words / 1e6:.1f}M words, {len(corpus.docs):,} documents")
    roots = {k: Path(tempfile.mkdtemp(prefix=f"mogg-merge-{k}-")) for k in KINDS}
    try:
        t0 = time.perf_counter()
        for kind, root in roots.items():  # shard state is the same files for both kinds
            for i in range(args.shards):
                build_shard(corpus, _builder(), _retriever(kind), i, args.shards, root)
        print(f"map: {time.perf_counter() - t0:.0f} s for both kinds")
        res, hits = {}, {}
        for kind, root in roots.items():
            out = subprocess.run([sys.executable, __file__, "--child", kind, "--root", str(root), "--data-dir", str(args.data_dir),
                                  "--shards", str(args.shards), "--words", str(args.words)],
                                 capture_output=True, text=True, check=True)
            res[kind] = json.loads(out.stdout.strip().splitlines()[-1])
        for kind, root in roots.items():
            lad, key = build_ladder(corpus, _builder(), root)
            questions = [d.text[:200] for d in base[:200]]
            hits[kind] = search_levels(level_retrievers(lad, _retriever(kind), root, key), questions, 10)
        same = all(np.array_equal(getattr(hits["bm25"], a), getattr(hits["bm25_sharded"], a)) for a in ("ids", "scores"))
        a, b = res["bm25"], res["bm25_sharded"]
        grow = {k: v["peak_rss_mb"] - v["rss_before_merge_mb"] for k, v in res.items()}
        print("\n| merge | wall (s) | peak RSS (MiB) | added by the merge (MiB) |\n|---|---|---|---|")
        print(f"| joined postings (`retriever=bm25`) | {a['seconds']:.1f} | {a['peak_rss_mb']:.0f} | {grow['bm25']:.0f} |")
        print(f"| parts + global statistics (`retriever=bm25_sharded`) | {b['seconds']:.1f} | {b['peak_rss_mb']:.0f} "
              f"| {grow['bm25_sharded']:.0f} |")
        print(f"| ratio | {a['seconds'] / b['seconds']:.2f}x | {a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x "
              f"| {grow['bm25'] / max(grow['bm25_sharded'], 1):.2f}x |")
        print(f"\nsame top-10 ids and scores for 200 queries x 5 levels: {same}")
    finally:
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
