"""Foundation benchmarks, side by side in one run on one machine.

1. BM25 query throughput: mogg's batched BM25 vs rank-bm25 (the reference) on the same chunks
   and the same tokens, with a check that both return the same top-k.
2. MoG ladder build time per 1M words (sentence split + nested levels).
3. Router training time for 1000 epochs on cached arrays.

    python scripts/benchmark.py [--data-dir ../shared/data] [--level 2] [--ref-queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.environ.get("MOGG_DATA_DIR", "data"))
    ap.add_argument("--level", type=int, default=2, help="MoG level whose chunks are indexed (0 = sentences)")
    ap.add_argument("--ref-queries", type=int, default=200, help="queries timed with rank-bm25 (it is slow)")
    ap.add_argument("--words", type=float, default=1e6, help="corpus size (words) for the ladder build timing")
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--out", default="reports/benchmark.json")
    args = ap.parse_args()

    from rank_bm25 import BM25Okapi

    from mogg.data.corpus import Corpus, MedMCQAExplanations, PubMedQAContexts
    from mogg.data.qa import MirageBenchmark
    from mogg.data.records import Document
    from mogg.ladders import MoGLadderBuilder
    from mogg.retrieval import BM25Retriever
    from mogg.routing.training import TrainerConfig, fit_router
    from mogg.text import tokenize

    m = Path(args.data_dir) / "mirage"
    corpus = Corpus([PubMedQAContexts(str(m / "rawdata/pubmedqa/data/test_set.json")),
                     MedMCQAExplanations(str(m / "rawdata/medmcqa/data/dev.json"))])
    docs = corpus.documents()
    questions = [it.question for it in MirageBenchmark(str(m / "benchmark.json")).load()]
    results: dict = {}

    # --- 1. BM25 throughput -------------------------------------------------------------
    ladder = MoGLadderBuilder(unit="sentences", unit_size=1, n_levels=4, document_level=True).build(docs)
    chunks = ladder.texts(args.level)
    t0 = time.perf_counter()
    ours = BM25Retriever(backend="scipy").fit(chunks)
    t_index = time.perf_counter() - t0
    t0 = time.perf_counter()
    s_ours, i_ours = ours.search(questions, 10)
    t_ours = time.perf_counter() - t0
    qps_ours = len(questions) / t_ours

    t0 = time.perf_counter()
    ref = BM25Okapi([tokenize(c, stopwords=True) for c in chunks])
    t_ref_index = time.perf_counter() - t0
    sub = questions[: args.ref_queries]
    t0 = time.perf_counter()
    ref_scores = np.stack([ref.get_scores(tokenize(q, stopwords=True)) for q in sub])
    t_ref = time.perf_counter() - t0
    qps_ref = len(sub) / t_ref
    ref_top = np.argsort(-ref_scores, axis=1, kind="stable")[:, :10]
    same = float(np.mean([set(a) == set(b) for a, b in zip(ref_top, i_ours[: len(sub)])]))
    results["bm25"] = {
        "chunks": len(chunks), "queries_ours": len(questions), "queries_ref": len(sub),
        "index_s_ours": t_index, "index_s_ref": t_ref_index,
        "qps_ours": qps_ours, "qps_ref": qps_ref, "speedup": qps_ours / qps_ref, "same_top10": same,
    }

    # --- 2. ladder build per 1M words ---------------------------------------------------
    words = sum(len(d.text.split()) for d in docs)
    reps = max(1, int(np.ceil(args.words / words)))
    big = [Document(f"{d.id}#{r}", d.title, d.content) for r in range(reps) for d in docs]
    big_words = words * reps
    t0 = time.perf_counter()
    lad = MoGLadderBuilder(unit="tokens", unit_size=64, n_levels=5).build(big)
    t_build = time.perf_counter() - t0
    results["ladder"] = {"words": big_words, "units": len(lad.units), "seconds": t_build,
                         "seconds_per_1M_words": t_build / big_words * 1e6}

    # --- 3. router training, 1000 epochs ------------------------------------------------
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 24)).astype(np.float32)
    y = np.eye(5)[rng.integers(0, 5, 500)] * 0.8
    t0 = time.perf_counter()
    fit_router(x[:400], y[:400], x[400:], y[400:], {"hidden": 64, "dropout": 0.2, "lr": 1e-3, "weight_decay": 1e-4},
               TrainerConfig(max_epochs=args.epochs, batch_size=128, patience=0), seed=0, ckpt_dir=Path("outputs/bench_router"))
    t_train = time.perf_counter() - t0
    results["router"] = {"epochs": args.epochs, "train_queries": 400, "seconds": t_train}

    b, lad, r = results["bm25"], results["ladder"], results["router"]
    print(f"{'benchmark':<34}{'mogg':>14}{'reference':>14}{'ratio':>10}")
    print(f"{'BM25 queries/s (' + str(b['chunks']) + ' chunks)':<34}{b['qps_ours']:>14.1f}{b['qps_ref']:>14.1f}{b['speedup']:>9.1f}x")
    print(f"{'BM25 index build s':<34}{b['index_s_ours']:>14.2f}{b['index_s_ref']:>14.2f}{b['index_s_ref'] / b['index_s_ours']:>9.1f}x")
    print(f"{'same top-10 as rank-bm25':<34}{b['same_top10']:>14.1%}")
    print(f"{'MoG ladder build s / 1M words':<34}{lad['seconds_per_1M_words']:>14.2f}   ({lad['words']:,} words, {lad['units']:,} units)")
    print(f"{'router training s / 1000 epochs':<34}{r['seconds'] * 1000 / r['epochs']:>14.2f}   (400 queries, batch 128)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
