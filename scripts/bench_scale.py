"""Per-shard cost of a sharded MoG + BM25 build, and the scale plan it implies for MedRAG corpora.

Builds one shard of ~N words (the real PubMedQA* + MedMCQA passages, replicated with new ids)
through :func:`mogg.sharding.build_shard` in a fresh process, and reports wall time, peak RSS and
artifact size per 1M words; then extrapolates to each MedRAG corpus (snippet counts and mean
lengths from the MedRAG paper, Xiong et al. 2024).

    python scripts/bench_scale.py [--data-dir ../shared/data] [--words 2e6]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

# MedRAG corpora: snippets and mean snippet length (tokens), Table 1 of the MedRAG paper.
CORPORA = {"textbooks": (125_847, 182), "statpearls": (301_202, 119), "pubmed": (23_898_701, 296), "wikipedia": (29_913_202, 162)}



def main() -> None:
    from mogg.core.flags import existing_dir, positive_float  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=existing_dir, default=os.environ.get("MOGG_DATA_DIR", "data"))
    ap.add_argument("--words", type=positive_float, default=2e6)
    ap.add_argument("--out", default="reports/bench_scale.json")
    args = ap.parse_args()

    from mogg.data.corpus import Corpus, DocumentList, MedMCQAExplanations, PubMedQAContexts
    from mogg.data.records import Document
    from mogg.ladders import MoGLadderBuilder
    from mogg.retrieval import BM25Retriever
    from mogg.sharding import build_shard

    m = Path(args.data_dir) / "mirage"
    base = Corpus([PubMedQAContexts(str(m / "rawdata/pubmedqa/data/test_set.json")),
                   MedMCQAExplanations(str(m / "rawdata/medmcqa/data/dev.json"))]).documents()
    words = sum(len(d.text.split()) for d in base)
    reps = max(1, round(args.words / words))
    docs = [Document(f"{d.id}#{r}", d.title, d.content) for r in range(reps) for d in base]
    n_words = words * reps
    root = Path(tempfile.mkdtemp(prefix="mogg-scale-"))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    d = build_shard(DocumentList(docs), MoGLadderBuilder(unit="tokens", unit_size=64, n_levels=5), BM25Retriever, 0, 1, root)
    secs = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux: process peak
    disk = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    import scipy.sparse as sp

    nnz = sum(sp.load_npz(p).nnz for p in d.glob("level*_tf.npz"))  # term postings over all levels
    shutil.rmtree(root, ignore_errors=True)
    # the merge holds every level's global tf (COO int64 row/col + float64 data: 24 B per posting)
    per = {"seconds": secs / n_words * 1e6, "disk_mb": disk / n_words, "postings": nnz / n_words * 1e6,
           "merge_ram_gb": nnz / n_words * 1e6 * 24 / 1e9}
    res = {"shard_words": n_words, "shard_docs": len(docs), "seconds": secs, "disk_mb": disk / 2**20,
           "peak_rss_mb": rss / 1024, "rss_before_mb": rss0 / 1024, "per_1M_words": per, "plan": {}}
    print(f"shard: {n_words:,} words, {len(docs):,} docs: {secs:.1f} s, peak RSS {rss / 1024:.0f} MiB, artifact {disk / 2**20:.0f} MiB")
    print(f"per 1M words: {per['seconds']:.1f} s (one core), {per['disk_mb']:.0f} MB on disk, {per['postings'] / 1e6:.2f}M postings")
    print(f"{'corpus':<12}{'snippets':>12}{'words':>10}{'core-hours':>12}{'disk GB':>10}{'merge RAM GB':>14}{'shards@2M':>11}")
    for name, (n, length) in CORPORA.items():
        w = n * length
        plan = {"words": w, "core_hours": w / 1e6 * per["seconds"] / 3600, "disk_gb": w / 1e6 * per["disk_mb"] / 1e3,
                "merge_ram_gb": w / 1e6 * per["merge_ram_gb"], "shards_of_2M_words": max(1, round(w / 2e6))}
        res["plan"][name] = plan
        print(f"{name:<12}{n:>12,}{w / 1e9:>9.2f}B{plan['core_hours']:>12.1f}{plan['disk_gb']:>10.1f}"
              f"{plan['merge_ram_gb']:>14.1f}{plan['shards_of_2M_words']:>11,}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
