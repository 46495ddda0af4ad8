"""MoGG graph ladder build benchmark: time per stage and peak memory at 100k / 300k nodes.

Nodes come from the real corpus (PubMedQA* contexts + MedMCQA explanations, ~7k nodes of 2
sentences), replicated with new document ids up to the requested node count. Replicas are
perturbed (one random word dropped per sentence, seeded) so the kNN is not a set of exact ties.
Every size runs in its own subprocess so that its peak memory is its own: memory is the process
peak resident set size, ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (corpus + replicas + build),
next to the RSS before the build starts.

    python scripts/bench_graph.py [--nodes 100000 300000] [--backends numba scipy] [--data-dir ../shared/data]

Dense similarity (``--similarity dense``): every size runs once per ``--dense-indexes`` entry (a
faiss factory string: Flat = exact, e.g. IVF1024,Flat or HNSW32 approximate). Node embeddings:
``--encoder minilm`` embeds the real base nodes with the offline MiniLM (cached in
``--cache``) and gives each replica its base node's embedding plus small noise (sd 0.02, seeded;
real geometry at any size); ``--encoder fake`` hashes texts to random vectors (no structure: the
hardest case for an approximate index). An approximate build states its neighbour recall against
brute force on 1,000 seeded nodes (the builder's own check); with Flat in the same run the whole
edge lists are compared too (``edge_recall``).

    python scripts/bench_graph.py --similarity dense --nodes 100000 --dense-indexes Flat IVF1024,Flat HNSW32

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
    from mogg.core.text import split_sentences
    from mogg.data.corpus import Corpus, MedMCQAExplanations, PubMedQAContexts
    from mogg.data.records import Document

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


class TableEncoder:
    """Precomputed node embeddings served by text (the benchmark's stand-in for encoding)."""

    def __init__(self, texts, emb, name):
        self.table, self.name = dict(zip(texts, emb)), name

    def encode(self, texts, show_progress=False):
        return np.stack([self.table[t] for t in texts]).astype(np.float32)

    def config(self):
        return {"name_or_path": self.name}


def node_encoder(kind: str, docs, node_sentences: int, cache: Path) -> TableEncoder:
    """Embeddings of every node of ``docs``: real MiniLM for base nodes, base + noise for replicas."""
    from mogg.ladders.graph import GraphLadderBuilder

    units = GraphLadderBuilder(node_sentences=node_sentences).nodes(docs)
    texts = list(units.text)
    if kind == "fake":
        import hashlib

        emb = np.stack([np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=384)
                        for t in texts])
        return TableEncoder(texts, emb / np.linalg.norm(emb, axis=1, keepdims=True), "hash")
    doc_ids = np.asarray(units.doc_ids)[units.doc]  # [U] the document id of each node
    base_doc = np.array([d.split("#r")[0] for d in doc_ids])
    is_base = base_doc == doc_ids
    pos = np.arange(len(texts)) - np.searchsorted(units.doc, units.doc)  # position of the node in its document
    base_rows = {(d, p): i for i, (d, p, b) in enumerate(zip(base_doc, pos, is_base)) if b}
    base_texts = [texts[i] for i in np.flatnonzero(is_base)]
    if cache.exists():
        emb_base = np.load(cache)["emb"]
    else:
        from mogg.encoders import HFEncoder

        emb_base = HFEncoder("minilm").encode(base_texts, show_progress=True)
        np.savez(cache, emb=emb_base)
    if len(emb_base) != len(base_texts):
        raise SystemExit(f"{cache} holds {len(emb_base)} base nodes, the corpus {len(base_texts)}: delete it")
    full = np.empty((len(texts), emb_base.shape[1]), dtype=np.float64)
    full[is_base] = emb_base
    where = np.cumsum(is_base) - 1  # base node row of each base node
    rng = np.random.default_rng(1)
    for i in np.flatnonzero(~is_base):  # replicas: the same-position base node (or its last one) + noise
        j = base_rows.get((base_doc[i], pos[i]))
        while j is None:
            pos[i] -= 1
            j = base_rows.get((base_doc[i], pos[i]))
        full[i] = emb_base[where[j]] + rng.normal(0, 0.02, emb_base.shape[1])
    return TableEncoder(texts, full / np.linalg.norm(full, axis=1, keepdims=True), "minilm+noise")


def run_one(args) -> dict:
    from mogg.ladders.graph import GraphLadderBuilder

    docs = replicated_documents(Path(args.data_dir), args.one, args.node_sentences)
    dense = {}
    if args.similarity == "dense":
        enc = node_encoder(args.encoder, docs, args.node_sentences, Path(args.cache))
        dense = {"similarity": "dense", "encoder": enc, "dense_index": args.dense_index, "nprobe": args.nprobe,
                 "ef_search": args.ef_search}
    rss_before = _rss_mib()
    builder = GraphLadderBuilder(node_sentences=args.node_sentences, k_graph=args.k_graph, t_graph=args.t_graph,
                                 hops=args.hops, max_tokens=args.max_tokens, batch_size=args.batch_size,
                                 knn_backend=args.backend, **dense)
    t0 = time.perf_counter()
    ladder = builder.build(docs)
    total = time.perf_counter() - t0
    check = _check_rows(ladder, builder, args.check_rows) if args.check_rows and not dense else {}
    if dense:
        np.save(Path(args.edges_out), ladder.arrays["edges"], allow_pickle=False)
        check = {"dense_index": args.dense_index, **{f"sampled_{k}": round(v, 4) for k, v in ladder.meta.get("knn_recall", {}).items()
                                                       if k in ("neighbour_recall", "rows_equal")}}
    return {**check,
        "backend": args.backend if not dense else "faiss", "nodes": len(ladder.units), "documents": len(docs),
        "edges": int(len(ladder.arrays["edges"])),
        "edges_sha256": hashlib.sha256(np.ascontiguousarray(ladder.arrays["edges"]).tobytes()
                                       + np.ascontiguousarray(ladder.arrays["edge_sim"]).tobytes()).hexdigest()[:16],
        "total_s": round(total, 1),
        **{f"{k}_s": round(builder.timings.get(k, 0.0), 1) for k in (*STAGES, "encoding", "recall_check")},
        "rss_before_build_mib": round(rss_before), "peak_rss_mib": round(_rss_mib()),
        "mean_chunk_nodes": [round(lv.coverage.nnz / len(ladder.units), 2) for lv in ladder.levels],
    }


def _check_rows(ladder, builder, n_rows: int) -> dict:
    """kNN rows of ``n_rows`` nodes (4 random contiguous ranges, searched against the index of all
    nodes as a shard would; equal to the build's rows) against brute force: the full float32 BM25
    product of those rows, the same filters, top-k by (-sim, id). Returns how many are identical."""
    from mogg.ladders.knn import bm25_knn
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
    from mogg.core.flags import (  # every flag checked before any work
        existing_dir,
        nonnegative_float,
        nonnegative_int,
        positive_int,
    )

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=existing_dir, default=os.environ.get("MOGG_DATA_DIR", "data"))
    ap.add_argument("--nodes", type=positive_int, nargs="+", default=[100_000, 300_000])
    ap.add_argument("--node-sentences", type=positive_int, default=2)
    ap.add_argument("--k-graph", type=positive_int, default=3)
    ap.add_argument("--t-graph", type=nonnegative_float, default=0.2)
    ap.add_argument("--hops", type=nonnegative_int, default=4)
    ap.add_argument("--max-tokens", type=positive_int, default=512)
    ap.add_argument("--batch-size", type=positive_int, default=2048)
    ap.add_argument("--check-rows", type=nonnegative_int, default=2000, help="rows compared with brute force after the build (0: none)")
    ap.add_argument("--backends", nargs="+", default=["auto"], choices=["auto", "numba", "scipy"])
    ap.add_argument("--backend", default="auto", help=argparse.SUPPRESS)  # child process: one backend
    ap.add_argument("--similarity", choices=["bm25", "dense"], default="bm25")
    ap.add_argument("--dense-indexes", nargs="+", default=["Flat", "IVF1024,Flat"], help="faiss factory strings (dense)")
    ap.add_argument("--dense-index", default="Flat", help=argparse.SUPPRESS)  # child process: one index
    ap.add_argument("--nprobe", type=positive_int, default=32)
    ap.add_argument("--ef-search", type=positive_int, default=128)
    ap.add_argument("--encoder", choices=["minilm", "fake"], default="minilm")
    ap.add_argument("--cache", default="outputs/bench_graph_minilm.npz", help="MiniLM embeddings of the base nodes")
    ap.add_argument("--edges-out", default="", help=argparse.SUPPRESS)  # child process: where the edges go
    ap.add_argument("--out", default="reports/bench_graph.json")
    ap.add_argument("--one", type=positive_int, default=None, help=argparse.SUPPRESS)  # child process: one size
    args = ap.parse_args()
    if args.one is not None:
        print(json.dumps(run_one(args)))
        return
    rows = []
    Path(args.cache).parent.mkdir(parents=True, exist_ok=True)
    variants = [("--backend", b) for b in args.backends] if args.similarity == "bm25" else \
        [("--dense-index", x) for x in args.dense_indexes]
    for n in args.nodes:
        flat_edges = None
        for flag, value in variants:
            edges_file = Path(args.cache).with_name(f"bench_graph_edges_{n}_{len(rows)}.npy")
            cmd = [sys.executable, __file__, "--one", str(n), flag, value, "--edges-out", str(edges_file)] + [
                a for k in ("data_dir", "node_sentences", "k_graph", "t_graph", "hops", "max_tokens", "batch_size",
                          "check_rows", "similarity", "nprobe", "ef_search", "encoder", "cache")
                for a in (f"--{k.replace('_', '-')}", str(getattr(args, k)))]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-3000:]}")
            rows.append({**json.loads(res.stdout.strip().splitlines()[-1]), "requested": n})
            if args.similarity == "dense":
                edges = {tuple(e) for e in np.load(edges_file).tolist()}
                edges_file.unlink()
                if value == "Flat":
                    flat_edges = edges
                elif flat_edges is not None:  # the whole edge list against the exact build's
                    rows[-1]["edge_recall"] = round(len(edges & flat_edges) / max(len(flat_edges), 1), 4)
            print(json.dumps(rows[-1]), flush=True)
    cols = ["backend", "nodes", "edges", "total_s", *[f"{k}_s" for k in STAGES], "rss_before_build_mib",
            "peak_rss_mib", "edges_sha256", "checked_rows", "rows_equal_brute_force"]
    if args.similarity == "dense":
        cols = ["dense_index", "nodes", "edges", "total_s", "encoding_s", *[f"{k}_s" for k in STAGES[1:]],
                "recall_check_s", "sampled_neighbour_recall", "sampled_rows_equal", "edge_recall", "peak_rss_mib"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    for n in args.nodes:  # side by side: the first backend against each other one at this size
        same = [r for r in rows if _size(r, n)]
        for other in same[1:]:
            first = same[0]
            if args.similarity == "dense":
                print(f"{n:,} nodes: {first['dense_index']} {first['total_s']} s vs {other['dense_index']} "
                      f"{other['total_s']} s ({first['total_s'] / max(other['total_s'], 1e-9):.1f}x faster), kNN search "
                      f"{first['knn_search_s'] / max(other['knn_search_s'], 1e-9):.1f}x; edge recall {other.get('edge_recall')}")
                continue
            print(f"{n:,} nodes: {first['backend']} {first['total_s']} s vs {other['backend']} {other['total_s']} s "
                  f"({other['total_s'] / max(first['total_s'], 1e-9):.1f}x), kNN search "
                  f"{other['knn_search_s'] / max(first['knn_search_s'], 1e-9):.1f}x; same edges: "
                  f"{first['edges_sha256'] == other['edges_sha256']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
