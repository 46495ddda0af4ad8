"""MoGG graph ladder build benchmark: time per stage and peak memory at 100k / 300k nodes.

Nodes come from the real corpus (PubMedQA* contexts + MedMCQA explanations, ~7k nodes of 2
sentences), replicated with new document ids up to the requested node count. Replicas are
perturbed (one random word dropped per sentence, seeded) so the kNN is not a set of exact ties.
Every size runs in its own subprocess so that its peak memory is its own: memory is the process
peak resident set size, ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (corpus + replicas + build),
next to the RSS before the build starts.

    python scripts/bench_graph.py [--nodes 100000 300000] [--backends numba scipy] [--data-dir ../shared/data]

With several ``--backends`` every size runs once per kNN backend (numba: the compiled max-score
kernel; scipy: sparse products with pruning, the previous default), the rows print side by side
with the speed ratio, and the sha256 of the edge list (ids and similarities) shows whether both
built the same graph.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

STAGES = ("nodes", "indexing", "knn_search", "edge_filter", "hop_expansion")


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def replicated_documents(data_dir: Path, n_nodes: int, node_sentences: int, seed: int = 0):
    """Real documents, then perturbed copies (new ids) until about ``n_nodes`` nodes."""
    from mogg.data.corpus import Corpus, MedMCQAExplanations, PubMedQAContexts
    from mogg.data.records import Document
    from mogg.text import split_sentences

    m = data_dir / "mirage"
    docs = Corpus([PubMedQAContexts(str(m / "rawdata/pubmedqa/data/test_set.json")),
                   MedMCQAExplanations(str(m / "rawdata/medmcqa/data/dev.json"), min_chars=40)]).documents()
    sents = [split_sentences(d.content) for d in docs]
    per_doc = np.array([-(-len(s) // node_sentences) for s in sents])  # nodes per document
    rng = np.random.default_rng(seed)
    out, total, copy = list(docs), int(per_doc.sum()), 1
    while total < n_nodes:
        for d, ss, c in zip(docs, sents, per_doc):
            if total >= n_nodes:
                break
            words = [s.split() for s in ss]
            drop = [rng.integers(len(w)) if len(w) > 1 else -1 for w in words]
            content = " ".join(" ".join(w[:j] + w[j + 1:]) if j >= 0 else " ".join(w) for w, j in zip(words, drop))
            out.append(Document(id=f"{d.id}#r{copy}", title=d.title, content=content))
            total += int(c)
        copy += 1
    return out


def run_one(args) -> dict:
    from mogg.ladders.graph import GraphLadderBuilder

    docs = replicated_documents(Path(args.data_dir), args.one, args.node_sentences)
    rss_before = _rss_mib()
    builder = GraphLadderBuilder(node_sentences=args.node_sentences, k_graph=args.k_graph, t_graph=args.t_graph,
                                 hops=args.hops, max_tokens=args.max_tokens, batch_size=args.batch_size,
                                 knn_backend=args.backend)
    t0 = time.perf_counter()
    ladder = builder.build(docs)
    total = time.perf_counter() - t0
    check = _check_rows(ladder, builder, args.check_rows) if args.check_rows else {}
    return {**check,
        "backend": args.backend, "nodes": len(ladder.units), "documents": len(docs),
        "edges": int(len(ladder.arrays["edges"])),
        "edges_sha256": hashlib.sha256(np.ascontiguousarray(ladder.arrays["edges"]).tobytes()
                                       + np.ascontiguousarray(ladder.arrays["edge_sim"]).tobytes()).hexdigest()[:16],
        "total_s": round(total, 1), **{f"{k}_s": round(builder.timings.get(k, 0.0), 1) for k in STAGES},
        "rss_before_build_mib": round(rss_before), "peak_rss_mib": round(_rss_mib()),
        "mean_chunk_nodes": [round(lv.coverage.nnz / len(ladder.units), 2) for lv in ladder.levels],
    }


def _check_rows(ladder, builder, n_rows: int) -> dict:
    """kNN rows of ``n_rows`` nodes (4 random contiguous ranges, searched against the index of all
    nodes as a shard would; equal to the build's rows) against brute force: the full float32 BM25
    product of those rows, the same filters, top-k by (-sim, id). Returns how many are identical."""
    from mogg.ladders.graph import bm25_knn
    from mogg.retrieval import BM25Retriever

    texts = ladder.units.text
    n = len(texts)
    r = BM25Retriever(backend="scipy").fit(texts)
    size = max(1, min(n_rows, n) // 4)
    starts = np.random.default_rng(0).choice(max(1, n - size), size=4, replace=False)
    equal = checked = 0
    for a in map(int, starts):
        rows = np.arange(a, min(n, a + size))
        q = r.query_matrix([texts[i] for i in rows])
        full = (q @ r.weights).toarray()  # [R, U] float32, the product's own sums
        own = np.asarray(q.multiply(r.weights[:, rows].T.tocsr()).sum(axis=1), dtype=np.float64).ravel()
        with np.errstate(divide="ignore", invalid="ignore"):
            sim = (full.astype(np.float64) / own[:, None]).astype(np.float32)
        ok = (full > 0) & (own[:, None] > 0) & (sim.astype(np.float64) >= builder.t_graph)
        ok[np.arange(len(rows)), rows] = False
        cols = np.broadcast_to(np.arange(n), full.shape)
        order = np.lexsort((cols, np.where(ok, -sim, np.inf)), axis=1)[:, : builder.k_graph]
        want = np.where(np.take_along_axis(ok, order, 1), order, -1)
        _, got = bm25_knn([texts[i] for i in rows], builder.k_graph, builder.t_graph, retriever=r, offset=a,
                          backend=builder.knn_backend)
        equal += int((got == want).all(axis=1).sum())
        checked += len(rows)
    return {"checked_rows": checked, "rows_equal_brute_force": equal}


def _size(row: dict, requested: int) -> bool:
    return row.get("requested") == requested


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.environ.get("MOGG_DATA_DIR", "data"))
    ap.add_argument("--nodes", type=int, nargs="+", default=[100_000, 300_000])
    ap.add_argument("--node-sentences", type=int, default=2)
    ap.add_argument("--k-graph", type=int, default=3)
    ap.add_argument("--t-graph", type=float, default=0.2)
    ap.add_argument("--hops", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--check-rows", type=int, default=2000, help="rows compared with brute force after the build (0: none)")
    ap.add_argument("--backends", nargs="+", default=["auto"], choices=["auto", "numba", "scipy"])
    ap.add_argument("--backend", default="auto", help=argparse.SUPPRESS)  # child process: one backend
    ap.add_argument("--out", default="reports/bench_graph.json")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # child process: one size
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(run_one(args)))
        return
    rows = []
    for n in args.nodes:
        for backend in args.backends:
            cmd = [sys.executable, __file__, "--one", str(n), "--backend", backend] + [
                a for k in ("data_dir", "node_sentences", "k_graph", "t_graph", "hops", "max_tokens", "batch_size",
                          "check_rows")
                for a in (f"--{k.replace('_', '-')}", str(getattr(args, k)))]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows.append({**json.loads(res.stdout.strip().splitlines()[-1]), "requested": n})
            print(json.dumps(rows[-1]), flush=True)
    cols = ["backend", "nodes", "edges", "total_s", *[f"{k}_s" for k in STAGES], "rss_before_build_mib",
            "peak_rss_mib", "edges_sha256", "checked_rows", "rows_equal_brute_force"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    for n in args.nodes:  # side by side: the first backend against each other one at this size
        same = [r for r in rows if _size(r, n)]
        for other in same[1:]:
            first = same[0]
            print(f"{n:,} nodes: {first['backend']} {first['total_s']} s vs {other['backend']} {other['total_s']} s "
                  f"({other['total_s'] / max(first['total_s'], 1e-9):.1f}x), kNN search "
                  f"{other['knn_search_s'] / max(first['knn_search_s'], 1e-9):.1f}x; same edges: "
                  f"{first['edges_sha256'] == other['edges_sha256']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
