"""Cost of the newer methods, side by side in one process (not a test).

    MOGG_DATA_DIR=../shared/data python scripts/bench_methods.py [--docs 600] [--queries 200] [--depth 20]

* semantic chunking throughput (sentences/s) with the bundled MiniLM, embeddings not cached,
  against plain rule-based sentence splitting (what MoG's units cost);
* reranking cost per query at ``--depth`` candidates: BM25 alone, BM25 + the MiniLM bi-encoder
  scorer (text embeddings prepared once), and BM25 + a cross-encoder of MiniLM's size (MiniLM's
  weights under a fresh classification head: the compute of a real MiniLM cross-encoder; its
  scores are meaningless, only its time is measured).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def main() -> None:
    from mogg.core.flags import positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=positive_int, default=600, help="PubMedQA* abstracts to chunk")
    ap.add_argument("--queries", type=positive_int, default=200)
    ap.add_argument("--depth", type=positive_int, default=20)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    from mogg.core.text import split_sentences
    from mogg.data.corpus import PubMedQAContexts
    from mogg.data.qa import PubMedQAStar
    from mogg.encoders import HFEncoder, resolve_model_path
    from mogg.ladders.semantic import SemanticChunker
    from mogg.retrieval import BM25Retriever
    from mogg.retrieval.rerank import BiEncoderScorer, CrossEncoderScorer, RerankRetriever

    mirage = Path(os.environ.get("MOGG_DATA_DIR", "data")) / "mirage"
    docs = list(PubMedQAContexts(str(mirage / "rawdata/pubmedqa/data/test_set.json")))[: args.docs]
    texts = [d.text for d in docs]
    enc = HFEncoder("minilm", batch_size=64, device="cpu")  # no cache_dir: every run embeds
    enc.encode(["warm up"])

    t = time.perf_counter()
    n_sent = sum(len(split_sentences(x)) for x in texts)
    t_split = time.perf_counter() - t
    t = time.perf_counter()
    chunks = SemanticChunker(enc).chunk_texts(texts)
    t_sem = time.perf_counter() - t
    print(f"{'stage':<46}{'seconds':>10}{'sentences/s':>14}")
    print(f"{'rule-based sentence split':<46}{t_split:>10.2f}{n_sent / t_split:>14,.0f}")
    print(f"{'semantic chunking (MiniLM, embeddings + cuts)':<46}{t_sem:>10.2f}{n_sent / t_sem:>14,.0f}")
    print(f"  {n_sent} sentences -> {sum(map(len, chunks))} chunks ({t_sem / t_split:.0f}x the split)\n")

    paragraphs = [c for cs in chunks for c in cs]
    questions = [it.question for it in PubMedQAStar(str(mirage / "benchmark.json"),
                                                    str(mirage / "rawdata/pubmedqa/data/test_set.json")).load()][: args.queries]
    bm25 = BM25Retriever(backend="scipy").fit(paragraphs)
    t = time.perf_counter()
    bm25.search(questions, args.depth)
    base = (time.perf_counter() - t) / len(questions)
    rows = [("BM25 top-%d" % args.depth, base)]
    bi = RerankRetriever(BM25Retriever(backend="scipy"), BiEncoderScorer(enc), depth=args.depth)
    t = time.perf_counter()
    bi.fit(paragraphs)
    prep = time.perf_counter() - t
    t = time.perf_counter()
    bi.search(questions, 3)
    rows.append(("+ MiniLM bi-encoder rerank", (time.perf_counter() - t) / len(questions)))
    path, _ = resolve_model_path("minilm")
    cross = RerankRetriever(BM25Retriever(backend="scipy"), CrossEncoderScorer(path, max_length=256, batch_size=64, device="cpu"),
                            depth=args.depth).fit(paragraphs)
    cross.search(questions[:2], 3)  # load the model
    t = time.perf_counter()
    cross.search(questions, 3)
    rows.append(("+ cross-encoder of MiniLM's size rerank", (time.perf_counter() - t) / len(questions)))
    print(f"{'retrieval (' + str(len(paragraphs)) + ' chunks, ' + str(len(questions)) + ' queries)':<46}{'ms/query':>10}{'x BM25':>10}")
    for name, sec in rows:
        print(f"{name:<46}{sec * 1000:>10.1f}{sec / base:>10.1f}")
    print(f"(bi-encoder: text embeddings prepared once at fit, {prep:.1f} s for {len(paragraphs)} chunks)")
    assert np.isfinite(base)


if __name__ == "__main__":
    main()
