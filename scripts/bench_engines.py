"""BM25 engines side by side where one machine's memory ends: build time, peak RSS, search RSS, queries/s.

One index of N real sentences (the visible sets' sentences drawn with replacement,
:mod:`mogg.data.synthetic`), the project's tokens (stop words dropped) for every engine; each build
and each search runs in a fresh process (its peak RSS its own, :mod:`mogg.core.measure`):

* ``mogg``: the default in-memory index (:class:`~mogg.retrieval.bm25.BM25Retriever`, numba kernel);
* ``bm25s``: bm25s's index built in memory, searched memory-mapped (``BM25.load(..., mmap=True)``);
* ``tantivy``: :class:`~mogg.retrieval.bm25_disk.DiskBM25` (writer heap budget, memory-mapped segments).

Searches take the first ``--questions`` MIRAGE questions (shuffled with a fixed seed), top ``--k``,
on ``--threads`` threads; queries/s include tokenizing the questions. Pyserini is not measured: its
Lucene needs Java 21, which this machine's Debian does not package.

    python scripts/bench_engines.py --sentences 300000 1000000
    python scripts/bench_engines.py --per-level 300000   # tokenise once per unit vs once per level

``--per-level N`` builds a 5-level MoG ladder of N recombined sentences (10 per document) and
times, side by side in this process, every level's BM25 term counts (and token texts for tantivy)
from the chunk texts (a tokenizer pass per level, as before issue 60) and from the units' terms
(:class:`mogg.ladders.unit_terms.LadderTerms`: one pass), checking that both give the same counts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ENGINES = ("mogg", "bm25s", "tantivy")


def _child(args) -> None:
    """One build or one search, in this process; prints one JSON line."""
    from mogg.core.measure import child_report, rss_now
    from mogg.core.text import encode_texts, tokenize

    if args.child == "build":
        texts = Path(args.texts).read_text(encoding="utf-8").split("\n")
        t0 = time.process_time()
        if args.engine == "mogg":
            from mogg.retrieval import BM25Retriever

            r = BM25Retriever(backend="numba").fit(texts)
            r.save(Path(args.index))
        elif args.engine == "bm25s":
            import bm25s
            import numpy as np

            vocab, ids, lengths = encode_texts(texts, stopwords=True)  # the same tokens as mogg's
            tokens = [[vocab[t] for t in row] for row in np.split(ids, np.cumsum(lengths)[:-1]).__iter__()]
            r = bm25s.BM25(k1=1.5, b=0.75)
            r.index(tokens, show_progress=False)
            del tokens
            r.save(args.index)
        else:
            from mogg.retrieval.bm25_disk import DiskBM25

            r = DiskBM25(heap_mb=args.heap_mb, threads=1).fit(texts)
            r.save(Path(args.index))
        size = sum(p.stat().st_size for p in Path(args.index).rglob("*") if p.is_file())
        print(child_report(disk_mb=size / 2**20, cpu_main_s=time.process_time() - t0))
        return
    questions = json.loads(Path(args.qfile).read_text())
    before = rss_now()
    t_load = time.perf_counter()
    if args.engine == "mogg":
        from mogg.retrieval import BM25Retriever

        r = BM25Retriever.load(Path(args.index), backend="numba")
        r.search(questions[:8], args.k)  # compile the kernel outside the timing
        run = lambda: r.search(questions, args.k)  # noqa: E731
    elif args.engine == "bm25s":
        import bm25s

        r = bm25s.BM25.load(args.index, mmap=True)
        r.retrieve([tokenize(q, True) for q in questions[:8]], k=args.k, show_progress=False, n_threads=args.threads)

        def run():
            return r.retrieve([tokenize(q, True) for q in questions], k=args.k, show_progress=False,
                              n_threads=args.threads)
    else:
        from mogg.retrieval.bm25_disk import DiskBM25

        r = DiskBM25.load(Path(args.index), search_threads=args.threads)
        r.search(questions[:8], args.k)  # as the others: the first queries outside the timing
        run = lambda: r.search(questions, args.k)  # noqa: E731
    load_s = time.perf_counter() - t_load
    t0, c0 = time.perf_counter(), time.process_time()
    run()
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(child_report(load_s=load_s, search_s=secs, search_cpu_s=cpu, qps=len(questions) / secs,
                       rss_before_mb=before.get("rss")))


def _per_level(args) -> None:
    import numpy as np

    from mogg.core.text import tokenize
    from mogg.data.synthetic import real_sentences, recombined_documents
    from mogg.ladders import MoGLadderBuilder
    from mogg.ladders.unit_terms import LadderTerms
    from mogg.retrieval import BM25Retriever

    pool = real_sentences(args.data_dir)
    docs = list(recombined_documents(pool, args.per_level // 10, 10))
    ladder = MoGLadderBuilder(unit="sentences", unit_size=1, n_levels=5).build(docs)
    texts = [ladder.texts(j) for j in range(ladder.n_levels)]  # joined outside the timing
    tokenize("warm up", True)
    rows = []
    c0 = time.process_time()
    per_level = [BM25Retriever().count_terms(t) for t in texts]
    rows.append(("BM25 counts, a tokenizer pass per level", time.process_time() - c0))
    c0 = time.process_time()
    terms = LadderTerms(ladder)
    once = [terms.level(j, True).counts() for j in range(ladder.n_levels)]
    rows.append(("BM25 counts from the units' terms", time.process_time() - c0))
    same = all(a[0] == b[0] and (a[1] != b[1]).nnz == 0 and np.array_equal(a[2], b[2]) for a, b in zip(per_level, once))
    c0 = time.process_time()
    for t in texts:
        for _ in (" ".join(tokenize(x, True)) for x in t):
            pass
    rows.append(("token texts (tantivy), a tokenizer pass per level", time.process_time() - c0))
    c0 = time.process_time()
    terms = LadderTerms(ladder)
    for j in range(ladder.n_levels):
        for _ in terms.level(j, True).token_texts():
            pass
    rows.append(("token texts from the units' terms", time.process_time() - c0))
    print(f"{len(ladder.units):,} units, chunks per level {[len(lv) for lv in ladder.levels]}; counts equal: {same}")
    for (name, secs), ratio in zip(rows, [1, rows[0][1] / rows[1][1], 1, rows[2][1] / rows[3][1]]):
        print(f"{name:<55} {secs:7.1f} s CPU" + (f"   {ratio:.2f}x faster" if ratio != 1 else ""))


def main() -> None:
    from mogg.core.flags import existing_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=existing_dir, default=os.environ.get("MOGG_DATA_DIR", "data"))
    ap.add_argument("--sentences", type=int, nargs="+", default=[300_000, 1_000_000])
    ap.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="search threads of every engine")
    ap.add_argument("--heap-mb", type=int, default=256, help="tantivy's writer budget")
    ap.add_argument("--per-level", type=int, default=0, metavar="N", help="tokenise once per unit vs per level, N sentences")
    ap.add_argument("--out", default="reports/bench_engines.json")
    ap.add_argument("--child", choices=["build", "search"], help=argparse.SUPPRESS)
    ap.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)
    ap.add_argument("--texts", help=argparse.SUPPRESS)
    ap.add_argument("--index", help=argparse.SUPPRESS)
    ap.add_argument("--qfile", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)
    if args.per_level:
        return _per_level(args)

    from mogg.core.measure import run_child
    from mogg.data.qa import MirageBenchmark
    from mogg.data.synthetic import real_sentences

    pool = real_sentences(args.data_dir)
    items = MirageBenchmark(str(Path(args.data_dir) / "mirage/benchmark.json")).load()
    random.Random(0).shuffle(items)
    work = Path(tempfile.mkdtemp(prefix="mogg-engines-"))
    qfile = work / "questions.json"
    qfile.write_text(json.dumps([it.question for it in items[: args.questions]]))
    env = {**os.environ, "NUMBA_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    me = [sys.executable, os.path.abspath(__file__)]
    results = []
    for n in args.sentences:
        rng = random.Random(n)
        texts = work / f"sentences{n}.txt"
        texts.write_text("\n".join(pool[rng.randrange(len(pool))].replace("\n", " ") for _ in range(n)), encoding="utf-8")
        for engine in args.engines:
            index = work / f"{engine}{n}"
            index.mkdir()
            b = run_child([*me, "--child", "build", "--engine", engine, "--texts", str(texts), "--index", str(index),
                           "--heap-mb", str(args.heap_mb)], env, work / "log.txt")
            s = run_child([*me, "--child", "search", "--engine", engine, "--index", str(index), "--qfile",
                           str(qfile), "--k", str(args.k), "--threads", str(args.threads)], env, work / "log.txt")
            row = {"sentences": n, "engine": engine, "build": b, "search": s}
            results.append(row)
            print(f"{n:>10,} {engine:<8} build {b['wall_s']:7.1f} s wall {b['cpu_s']:7.1f} s CPU, peak RSS "
                  f"{b['peak_rss_mb']:7.0f} MiB, {b.get('disk_mb', 0):6.0f} MiB on disk | search {s.get('qps', 0):8.1f} q/s, "
                  f"RSS {s.get('rss_mb', 0):6.0f} MiB (anon {s.get('anon_mb', 0):.0f}, file {s.get('file_mb', 0):.0f}), "
                  f"peak {s['peak_rss_mb']:.0f} MiB, load {s.get('load_s', 0):.1f} s  [rc {b['rc']}/{s['rc']}]", flush=True)
            import shutil

            shutil.rmtree(index, ignore_errors=True)
        texts.unlink()
        base = {r["engine"]: r for r in results if r["sentences"] == n}
        if "tantivy" in base:
            t = base["tantivy"]
            for e, r in base.items():
                if e != "tantivy" and r["search"].get("qps") and r["build"]["cpu_s"]:
                    print(f"{n:>10,} tantivy / {e}: queries/s {t['search']['qps'] / r['search']['qps']:.2f}x, "
                          f"build CPU {t['build']['cpu_s'] / r['build']['cpu_s']:.2f}x, build peak RSS "
                          f"{t['build']['peak_rss_mb'] / r['build']['peak_rss_mb']:.2f}x, search RSS "
                          f"{t['search']['rss_mb'] / r['search']['rss_mb']:.2f}x", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
