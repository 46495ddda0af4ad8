"""Benchmark RAPTOR trees: build time per stage and collapsed-tree retrieval latency.

    python scripts/bench_raptor.py --leaves 2000 10000 --encoder fake
    python scripts/bench_raptor.py --leaves 2000 --encoder minilm

Leaves are the real PubMedQA* contexts + MedMCQA explanations (MOGG_DATA_DIR or ../shared/data),
packed to ~100 tokens and replicated with perturbation (one word dropped per replica) to reach the
requested count. ``--encoder minilm`` embeds the distinct base leaves for real (the measured rate is
reported, and extrapolated to all leaves); replicas get the base embedding plus small noise, so
clustering sees realistic geometry. ``--encoder fake`` uses hashed random vectors to time the other
stages alone. Retrieval: 1,000 queries through :func:`collapsed_tree_select` vs a per-node Python
loop in the style of the reference implementation (scipy cosine per node, then a budget loop that
stops at the first overflow), timed on ``--ref-queries`` queries and scaled to 1,000.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import time
from pathlib import Path

import numpy as np

from mogg.data.corpus import Corpus, MedMCQAExplanations, PubMedQAContexts
from mogg.ladders.base import Units
from mogg.ladders.raptor import RaptorLadderBuilder
from mogg.ladders.summarizers import ExtractiveSummarizer
from mogg.selection.tree import collapsed_tree_select, tree_nodes


class HashEncoder:
    dim = 384

    def encode(self, texts, show_progress=False):
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
            out[i] = np.random.default_rng(seed).normal(size=self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def config(self):
        return {"name_or_path": "hash", "dim": self.dim}


def base_leaves(builder: RaptorLadderBuilder) -> list[str]:
    root = Path(os.environ.get("MOGG_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
    raw = root / "mirage" / "rawdata"
    corpus = Corpus([PubMedQAContexts(raw / "pubmedqa" / "data" / "test_set.json"),
                     MedMCQAExplanations(raw / "medmcqa" / "data" / "dev.json")])
    return builder.units(corpus.documents()).text


def replicate(base: list[str], n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """``n`` leaf texts: base leaves, then copies with one word dropped; returns (texts, base index)."""
    rng = np.random.default_rng(seed)
    idx = np.arange(n) % len(base)
    texts = []
    for i, b in enumerate(idx):
        t = base[b]
        if i >= len(base):
            words = t.split()
            if len(words) > 1:
                del words[int(rng.integers(len(words)))]
            t = " ".join(words)
        texts.append(t)
    return texts, idx


def leaf_embeddings(kind: str, texts: list[str], idx: np.ndarray, base: list[str], cache: Path) -> tuple[np.ndarray, float]:
    """Embeddings [N, d] and the (measured or extrapolated) embedding seconds for all N leaves."""
    if kind == "fake":
        t0 = time.perf_counter()
        return HashEncoder().encode(texts), time.perf_counter() - t0
    from mogg.encoders import HFEncoder

    n_base = int(idx.max()) + 1
    if cache.exists():
        z = np.load(cache)
        emb_base, rate = z["emb"], float(z["rate"])
    else:
        enc = HFEncoder("minilm")
        enc.encode(["warm up"])
        t0 = time.perf_counter()
        emb_base = enc.encode(base[:n_base])
        rate = n_base / (time.perf_counter() - t0)
        np.savez(cache, emb=emb_base, rate=rate)
    if len(emb_base) < n_base:
        raise SystemExit(f"cached embeddings in {cache} cover fewer leaves; delete it")
    rng = np.random.default_rng(1)
    emb = emb_base[idx] + (np.arange(len(idx)) >= len(base))[:, None] * rng.normal(0, 0.02, (len(idx), emb_base.shape[1]))
    return (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32), len(texts) / rate


def reference_collapsed(emb: np.ndarray, tok: np.ndarray, q: np.ndarray, budget: int) -> list[list[int]]:
    """Per-node Python loop in the reference's style: scipy cosine distance per node, sort, fill."""
    from scipy.spatial import distance

    out = []
    for qv in q:
        dist = [distance.cosine(qv, e) for e in emb]
        picked, total = [], 0
        for i in np.argsort(dist):
            if total + tok[i] > budget:
                break
            picked.append(int(i))
            total += tok[i]
        out.append(picked)
    return out


def main() -> None:
    from mogg.core.flags import nonnegative_int, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leaves", type=positive_int, nargs="+", default=[2000, 10000])
    ap.add_argument("--encoder", choices=["fake", "minilm"], default="fake")
    ap.add_argument("--queries", type=positive_int, default=1000)
    ap.add_argument("--ref-queries", type=positive_int, default=20)
    ap.add_argument("--budget", type=positive_int, default=2000)
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    ap.add_argument("--cache", default="/tmp/bench_raptor_minilm.npz")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    enc = HashEncoder()  # summaries are embedded with it in both modes (minilm only times leaves)
    builder = RaptorLadderBuilder(enc, ExtractiveSummarizer(max_tokens=128), seed=args.seed)
    base = base_leaves(builder)
    print(f"base leaves from PubMedQA* + MedMCQA: {len(base)}; encoder for leaves: {args.encoder}")
    rows = []
    for n in args.leaves:
        texts, idx = replicate(base, n, args.seed)
        emb, t_emb = leaf_embeddings(args.encoder, texts, idx, base, Path(args.cache))
        units = Units(text=texts, doc=np.zeros(n, dtype=np.int64), doc_ids=["bench"])
        builder.timings = {"embedding": 0.0}
        t0 = time.perf_counter()
        lad = builder.build_from_leaves(units, emb)
        total = time.perf_counter() - t0
        tm = builder.timings
        nodes = [len(lv) for lv in lad.levels]
        # retrieval: queries = perturbed leaf embeddings
        rng = np.random.default_rng(2)
        q = emb[rng.integers(0, n, args.queries)] + rng.normal(0, 0.05, (args.queries, emb.shape[1])).astype(np.float32)
        collapsed_tree_select(lad, q[:8], args.budget, 64)  # warm (stacks node arrays once)
        t_ours = np.inf
        for _ in range(3):  # best of 3: the figure is the method's cost, not a neighbour's CPU burst
            t0 = time.perf_counter()
            collapsed_tree_select(lad, q, args.budget, 64)
            t_ours = min(t_ours, time.perf_counter() - t0)
        e_all, tok_all, _, _ = tree_nodes(lad)
        t0 = time.perf_counter()
        reference_collapsed(e_all, tok_all, q[: args.ref_queries], args.budget)
        t_ref = (time.perf_counter() - t0) * args.queries / args.ref_queries
        rows.append((n, nodes, t_emb, tm["umap"], tm["mixture"], tm["summarizing"], tm["embedding"], total,
                     t_ours, t_ref))
        print(f"n={n}: nodes/layer {nodes}; leaf embedding {t_emb:.1f}s; umap {tm['umap']:.1f}s; "
              f"mixture {tm['mixture']:.1f}s; summarizing {tm['summarizing']:.1f}s; "
              f"summary embedding (hash) {tm['embedding']:.1f}s; tree total {total:.1f}s; "
              f"retrieval {args.queries} q: ours {t_ours * 1000:.0f} ms, reference loop ~{t_ref:.1f}s "
              f"(x{t_ref / t_ours:.0f})", flush=True)
    print("\n| leaves | nodes per layer | leaf embedding (s) | UMAP (s) | mixture (s) | summarizing (s) "
          "| tree total (s) | 1k-query collapsed tree (ms) | reference loop (s) | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, nodes, te, tu, tg, ts, _tse, tt, to, tr in rows:
        print(f"| {n} | {nodes} | {te:.1f}{' (rate x N)' if args.encoder == 'minilm' else ''} | {tu:.1f} "
              f"| {tg:.1f} | {ts:.1f} | {tt:.1f} | {to * 1000:.0f} | {tr:.1f} | {tr / to:.0f}x |")


if __name__ == "__main__":
    main()
