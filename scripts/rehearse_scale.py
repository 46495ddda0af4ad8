"""A rehearsal at PubMed scale on one machine: a sharded MoG + BM25-on-disk build and search of N sentences.

The corpus recombines the visible sets' real sentences into 10-sentence documents
(:mod:`mogg.data.synthetic`), written as MedRAG jsonl. The build runs as the cluster runs it: one
process per shard task (``mogg.sharding.shard_task``: the shard's byte range of the corpus, its MoG
ladder of 5 sentence levels, its tantivy index per level), ``--workers`` at a time, then one merge
process (``merge_task``: the ladder and one index per level listing every shard's segments). With
``--scheduler slurm`` the build goes through a running SLURM (``slurm/local_cluster.sh start``) by the
documented command: ``build.py -m hydra/launcher=slurm shard.index=range(0,N) shard.count=N`` (one
array task per shard), then the merge as a one-task sweep of ``build.py shard.merge=true``; each
task's wall, CPU and peak RSS come from ``sacct``. The search process opens the five merged indexes memory-mapped and answers ``--questions`` real MIRAGE
questions at k = ``--k`` per level; bm25s builds the same five levels' chunks (the same tokens) in
memory, one process per level, and searches them memory-mapped, side by side in this run. Every
process is measured alone (:mod:`mogg.core.measure`: wall, CPU, peak RSS; RSS by kind after search).

    python scripts/rehearse_scale.py --sentences 1e6
    python scripts/rehearse_scale.py --sentences 1e7 --shards 20 --work /tmp/rehearsal   # ten million
    python scripts/rehearse_scale.py --sentences 2e5 --scheduler slurm --no-bm25s        # through SLURM
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

N_LEVELS = 5
PER_DOC = 10
ROOT = Path(__file__).resolve().parent.parent


def _setup(work: Path, heap_mb: int):
    from mogg.data.corpus import Corpus, MedRAGJsonl
    from mogg.ladders import MoGLadderBuilder
    from mogg.retrieval.bm25_disk import DiskBM25

    corpus = Corpus([MedRAGJsonl(str(work / "corpus.jsonl"))])
    builder = MoGLadderBuilder(unit="sentences", unit_size=1, n_levels=N_LEVELS)
    return corpus, builder, lambda: DiskBM25(heap_mb=heap_mb, threads=1)


def _level_dirs(work: Path, corpus, builder, make) -> tuple[Path, list[tuple[Path, dict]]]:
    from mogg.core.artifacts import artifact_dir
    from mogg.ladders.store import ladder_key
    from mogg.search import retriever_key

    lkey = ladder_key(corpus, builder)
    root = work / "artifacts"
    keys = [retriever_key(lkey, j, make()) for j in range(N_LEVELS)]
    return artifact_dir(root, "ladder", lkey), [(artifact_dir(root, "retriever", k), k) for k in keys]


def _merged(work: Path, heap_mb: int) -> dict:
    """Chunks per level and the indexes' size of the merged artifacts (an error if they are missing)."""
    corpus, builder, make = _setup(work, heap_mb)
    ldir, levels = _level_dirs(work, corpus, builder, make)
    missing = [str(d) for d in [ldir, *(d for d, _ in levels)] if not (d / "manifest.json").is_file()]
    if missing:
        raise FileNotFoundError(f"the merge wrote no artifact at the keys this script searches: {missing}")
    return {"chunks": [make().restore(d).n_docs for d, _ in levels],
            "index_mb": sum(p.stat().st_size for d, _ in levels for p in d.iterdir() if p.is_file()) / 2**20}


def _child(args) -> None:
    """One step in this process; prints one JSON line."""
    from mogg.core.measure import child_report

    work = Path(args.work)
    corpus, builder, make = _setup(work, args.heap_mb)
    root = work / "artifacts"
    out: dict = {}
    if args.child == "shard":
        from mogg.sharding import shard_task

        shard_task(corpus, builder, make, None, args.index, args.count, root)
    elif args.child == "merge":
        from mogg.sharding import merge_task

        merge_task(corpus, builder, make, None, args.count, root)
        out.update(_merged(work, args.heap_mb))
    elif args.child == "search":
        from mogg.core.artifacts import read_manifest

        questions = json.loads((work / "questions.json").read_text())
        _, levels = _level_dirs(work, corpus, builder, make)
        t0 = time.perf_counter()
        rs = []
        for d, key in levels:
            read_manifest(d, key, verify=False)  # the artifact as the pipeline finds it (sha256 checked at build)
            rs.append(make().restore(d))
        out["open_s"] = time.perf_counter() - t0
        out.update(_timed_search(lambda j, qs: rs[j].search(qs, args.k), questions))
        if 0 < args.compare_questions < len(questions):  # the subset bm25s answers, for the ratio
            sub = _timed_search(lambda j, qs: rs[j].search(qs, args.k), questions[: args.compare_questions])
            out["compare"] = sub
    elif args.child == "bm25s_prep":
        from mogg.core.text import encode_texts

        ldir, _ = _level_dirs(work, corpus, builder, make)
        with open(ldir / "units.jsonl", encoding="utf-8") as f:
            vocab, ids, lengths = encode_texts((json.loads(line) for line in f), stopwords=True)
        import numpy as np

        np.save(work / "bm25s_ids.npy", ids.astype(np.int32))
        np.save(work / "bm25s_ptr.npy", np.r_[0, np.cumsum(lengths)].astype(np.int64))
        (work / "bm25s_vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    elif args.child == "bm25s_build":
        import resource

        import bm25s

        # a cap on this process's address space: bm25s holds the level in memory (1.5 GB per 1M
        # chunks), and a shared machine should see a MemoryError here rather than its OOM killer
        cap = int(args.bm25s_mem_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        import numpy as np
        import scipy.sparse as sp

        ldir, _ = _level_dirs(work, corpus, builder, make)
        ids = np.load(work / "bm25s_ids.npy")
        ptr = np.load(work / "bm25s_ptr.npy")
        vocab = json.loads((work / "bm25s_vocab.json").read_text())
        cov = sp.load_npz(ldir / f"level{args.index}_coverage.npz").tocsr()
        first = cov.indices[cov.indptr[:-1]]  # nested MoG chunks cover consecutive units
        last = cov.indices[cov.indptr[1:] - 1]
        bounds = np.stack([ptr[first], ptr[last + 1]], axis=1).tolist()
        chunks = [ids[a:b].tolist() for a, b in bounds]  # the chunk's unit tokens, in order
        del ids
        r = bm25s.BM25(k1=1.5, b=0.75)
        r.index(bm25s.tokenization.Tokenized(ids=chunks, vocab={t: i for i, t in enumerate(vocab)}), show_progress=False)
        del chunks
        r.save(str(work / f"bm25s_level{args.index}"))
    elif args.child == "bm25s_search":
        import bm25s

        from mogg.core.text import tokenize

        questions = json.loads((work / "questions.json").read_text())
        if args.compare_questions:
            questions = questions[: args.compare_questions]
        t0 = time.perf_counter()
        # the levels bm25s could build here (a level's in-memory build may exceed --bm25s-mem-gb)
        built = [j for j in range(N_LEVELS) if (work / f"bm25s_level{j}").is_dir()]
        rs = {j: bm25s.BM25.load(str(work / f"bm25s_level{j}"), mmap=True) for j in built}
        out["open_s"] = time.perf_counter() - t0
        def run(j, qs):  # queries/s include tokenizing the questions, as DiskBM25.search's do
            return rs[j].retrieve([tokenize(q, True) for q in qs], k=args.k, show_progress=False, n_threads=1)

        out.update(_timed_search(run, questions, built))
    print(child_report(**out))


def _timed_search(run, questions: list[str], levels=range(N_LEVELS)) -> dict:
    """Warm up on 8 questions per level, then all questions level by level: queries/s over the levels."""
    levels = list(levels)
    for j in levels:
        run(j, questions[:8])
    t0, c0 = time.perf_counter(), time.process_time()
    per, per_cpu = [], []
    for j in levels:
        t, c = time.perf_counter(), time.process_time()
        run(j, questions)
        per.append(time.perf_counter() - t)
        per_cpu.append(time.process_time() - c)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"levels": levels, "search_s": secs, "search_cpu_s": cpu, "qps": len(questions) / secs,
            "per_level_s": per, "per_level_cpu_s": per_cpu}


def _search_side_by_side(args, res: dict, me: list[str], env: dict, log: Path) -> None:
    """tantivy's search, then bm25s's (built here unless --search-only) on the same levels and questions."""
    from mogg.core.measure import run_child

    res["search"] = s = run_child([*me, "--child", "search"], env, log)
    print(f"search (tantivy, memory-mapped): {s.get('qps', 0):.1f} questions/s over {N_LEVELS} levels "
          f"({s.get('search_s', 0):.1f} s wall, {s.get('search_cpu_s', 0):.1f} s CPU for {args.questions}), RSS "
          f"{s.get('rss_mb', 0):.0f} MiB (anon {s.get('anon_mb', 0):.0f}, file {s.get('file_mb', 0):.0f}), "
          f"peak {s['peak_rss_mb']:.0f} MiB, open {s.get('open_s', 0):.1f} s [rc {s['rc']}]", flush=True)
    if args.no_bm25s:
        return
    if not args.search_only:
        prep = run_child([*me, "--child", "bm25s_prep"], env, log)
        builds = [run_child([*me, "--child", "bm25s_build", "--index", str(j)], env, log) for j in range(N_LEVELS)]
        res["bm25s_build"] = {"prep": prep, "levels": builds,
                              "wall_s": prep["wall_s"] + sum(b["wall_s"] for b in builds),
                              "cpu_s": prep["cpu_s"] + sum(b["cpu_s"] for b in builds)}
        print(f"bm25s build (in memory, one process per level, tokens given): {res['bm25s_build']['wall_s']:.0f} s wall, "
              f"{res['bm25s_build']['cpu_s']:.0f} s CPU, peak RSS per level "
              f"{[round(b['peak_rss_mb']) for b in builds]} MiB [rc {[b['rc'] for b in [prep, *builds]]}: a level "
              f"over --bm25s-mem-gb {args.bm25s_mem_gb:g} GiB fails and is left out of its search]", flush=True)
    res["bm25s_search"] = b = run_child([*me, "--child", "bm25s_search"], env, log)
    if b["rc"] != 0 or not b.get("levels"):
        print(f"bm25s search: nothing to search (rc {b['rc']}; log {log})", flush=True)
        return
    n_b = args.compare_questions or args.questions
    lv = b["levels"]
    print(f"search (bm25s, memory-mapped): {b['qps']:.2f} questions/s over levels {lv} ({b['search_s']:.1f} s wall, "
          f"{b['search_cpu_s']:.1f} s CPU for {n_b}), RSS {b['rss_mb']:.0f} MiB (anon {b['anon_mb']:.0f}, "
          f"file {b['file_mb']:.0f}), peak {b['peak_rss_mb']:.0f} MiB [rc {b['rc']}]", flush=True)
    t = s.get("compare", s)  # tantivy on the questions bm25s answered, on the levels it searched
    t_wall = sum(t["per_level_s"][j] for j in lv)
    t_cpu = sum(t["per_level_cpu_s"][j] for j in lv)
    b_cpu = sum(b["per_level_cpu_s"])
    res["ratio"] = {"levels": lv, "questions": n_b, "tantivy_qps": n_b / t_wall, "bm25s_qps": n_b / sum(b["per_level_s"]),
                    "qps": sum(b["per_level_s"]) / t_wall, "per_cpu": b_cpu / t_cpu}
    print(f"side by side on the same {n_b} questions, levels {lv}: tantivy {n_b / t_wall:.1f} questions/s, bm25s "
          f"{n_b / sum(b['per_level_s']):.2f} ({res['ratio']['qps']:.1f}x; per CPU-second {res['ratio']['per_cpu']:.1f}x); "
          f"search RSS {s['rss_mb']:.0f} vs {b['rss_mb']:.0f} MiB", flush=True)


def _pool(jobs: list[list[str]], workers: int, env: dict, log: Path) -> list[dict]:
    """Run child commands ``workers`` at a time (a local scheduler), each measured alone."""
    from concurrent.futures import ThreadPoolExecutor

    from mogg.core.measure import run_child

    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(lambda a: run_child(a, env, log), jobs))


def _build_overrides(work: Path, heap_mb: int) -> list[str]:
    """build.py's overrides for what ``_setup`` builds (same builder, retriever and corpus: same keys)."""
    return ["corpus=jsonl", f"corpus.sources.0.paths={work / 'corpus.jsonl'}", f"ladders.mog.n_levels={N_LEVELS}",
            "ladders.mog.document_level=false", "retriever=bm25_disk", f"retriever.heap_mb={heap_mb}",
            "retriever.threads=1", f"paths.artifacts={work / 'artifacts'}", f"paths.outputs={work / 'outputs'}",
            "slots=null"]


def _sweep(args: list[str], env: dict, log: Path) -> tuple[str, dict]:
    """Run a ``build.py -m hydra/launcher=slurm`` sweep (it waits for its tasks); returns its job array's
    id and the submitting process's own wall, CPU and peak RSS."""
    t0 = time.perf_counter()
    with open(log, "a") as f:
        p = subprocess.Popen([sys.executable, str(ROOT / "build.py"), "-m", "hydra/launcher=slurm", *args],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = p.stdout.read()
        f.write(out)
        _, status, ru = os.wait4(p.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    ids = re.findall(r"submitted job array (\d+)", out)
    if rc != 0 or not ids:
        sys.exit(f"build.py -m hydra/launcher=slurm {' '.join(args[:3])} ... -> rc {rc} (see {log}): "
                 f"{out.strip().splitlines()[-1] if out.strip() else ''}")
    return ids[-1], {"rc": rc, "wall_s": time.perf_counter() - t0, "cpu_s": ru.ru_utime + ru.ru_stime,
                     "peak_rss_mb": ru.ru_maxrss / 1024}


def _build_slurm(args, res: dict, work: Path, shards: int, env: dict, log: Path) -> None:
    """The build through SLURM, by the documented commands (docs/cluster.md): the shard array, then the
    merge as a sweep of one task; every task measured by the scheduler's accounting (sacct)."""
    from mogg.core.measure import slurm_usage

    env = {**env, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])}
    if not env.get("SLURM_CONF"):  # the local cluster's (slurm/local_cluster.sh), when it runs
        conf = Path(env.get("MOGG_SLURM_DIR", "/tmp/mogg-slurm")) / "slurm.conf"
        if conf.is_file():
            env["SLURM_CONF"] = str(conf)
    env.pop("SLURM_JOB_ID", None)
    over = _build_overrides(work, args.heap_mb)
    t0 = time.perf_counter()
    array, res["shard_sweep"] = _sweep([f"shard.index=range(0,{shards})", f"shard.count={shards}",
                                        f"hydra.sweep.dir={work / 'sweep' / 'shards'}",
                                        f"hydra.launcher.mem_gb={args.task_mem_gb:g}", *over], env, log)
    res["shards_wall_s"] = time.perf_counter() - t0
    merge, res["merge_sweep"] = _sweep([f"shard.count={shards}", "shard.merge=true",
                                        f"hydra.sweep.dir={work / 'sweep' / 'merge'}",
                                        f"hydra.launcher.mem_gb={args.merge_mem_gb:g}", *over], env, log)
    res["build_wall_s"] = time.perf_counter() - t0
    usage = slurm_usage([array, merge], env)
    tasks = sorted((u for j, u in usage.items() if j.startswith(f"{array}_")), key=lambda u: u["start"])
    m = usage.get(merge) or usage.get(f"{merge}_0")
    if len(tasks) != shards or m is None:
        sys.exit(f"sacct knows {len(tasks)} of {shards} shard tasks and {'a' if m else 'no'} merge: {sorted(usage)}")
    res["slurm_jobs"] = {"array": array, "merge": merge}
    res["shard_tasks"], res["merge"] = tasks, {**m, **_merged(work, args.heap_mb)}
    res["array_span_s"] = _span(tasks[0]["start"], max(t["end"] for t in tasks))
    res["build_cpu_s"] = sum(t["cpu_s"] for t in tasks) + m["cpu_s"]
    if any(u["peak_rss_mb"] is None for u in [*tasks, m]):
        print("sacct has no MaxRSS for some tasks: the cluster gathers no accounting "
              "(JobAcctGatherType=jobacct_gather/none; slurm/local_cluster.sh sets jobacct_gather/linux)", flush=True)


def _load() -> list[str] | None:
    """The load average (1, 5, 15 minutes): the machine is shared, and wall times grow with it."""
    return open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None


def _span(start: str, end: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def main() -> None:
    from mogg.core.flags import existing_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=existing_dir, default=os.environ.get("MOGG_DATA_DIR", "data"))
    ap.add_argument("--sentences", type=float, default=1e6)
    ap.add_argument("--shards", type=int, default=0, help="shard tasks (0: one per 500k sentences)")
    ap.add_argument("--workers", type=int, default=2, help="shard tasks running at once (--scheduler local)")
    ap.add_argument("--scheduler", choices=["local", "slurm"], default="local",
                    help="local: one process per task here, --workers at a time; slurm: the documented "
                         "build.py -m hydra/launcher=slurm commands against a running SLURM (SLURM_CONF, else "
                         "slurm/local_cluster.sh's), each task measured by sacct")
    ap.add_argument("--task-mem-gb", type=float, default=4, help="SLURM memory per shard task (hydra.launcher.mem_gb)")
    ap.add_argument("--merge-mem-gb", type=float, default=8, help="SLURM memory of the merge task")
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--heap-mb", type=int, default=256, help="tantivy's writer budget per task")
    ap.add_argument("--no-bm25s", action="store_true", help="skip the bm25s side of the search")
    ap.add_argument("--compare-questions", type=int, default=0,
                    help="bm25s answers only the first N questions (0: all; it scores every chunk per query), "
                         "and tantivy's rate on the same N is printed beside it")
    ap.add_argument("--bm25s-mem-gb", type=float, default=12.0, help="address-space cap of each bm25s build process")
    ap.add_argument("--work", default="", help="working folder (default: a new temp folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the working folder")
    ap.add_argument("--search-only", action="store_true",
                    help="only the two searches, over what an earlier run built in --work (with --keep or --work)")
    ap.add_argument("--out", default="reports/rehearse_scale.json")
    ap.add_argument("--child", choices=["shard", "merge", "search", "bm25s_prep", "bm25s_build", "bm25s_search"],
                    help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)

    import tempfile

    from mogg.core.measure import run_child
    from mogg.data.qa import MirageBenchmark
    from mogg.data.synthetic import real_sentences, write_recombined_jsonl

    n_docs = int(args.sentences) // PER_DOC
    shards = args.shards or max(1, -(-n_docs * PER_DOC // 500_000))
    work = Path(args.work or tempfile.mkdtemp(prefix="mogg-rehearsal-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "log.txt"
    pool = real_sentences(args.data_dir)
    items = MirageBenchmark(str(Path(args.data_dir) / "mirage/benchmark.json")).load()
    random.Random(0).shuffle(items)
    (work / "questions.json").write_text(json.dumps([it.question for it in items[: args.questions]]))
    t0 = time.perf_counter()
    if not (work / "corpus.jsonl").exists() and not args.search_only:
        write_recombined_jsonl(work / "corpus.jsonl", pool, n_docs, PER_DOC, seed=0)
    if not args.search_only:
        print(f"corpus: {n_docs:,} documents of {PER_DOC} real sentences ({len(pool):,} in the pool), "
              f"{(work / 'corpus.jsonl').stat().st_size / 2**30:.2f} GiB, written in {time.perf_counter() - t0:.0f} s; "
              f"{shards} shards, {args.workers} at a time; log {log}", flush=True)
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    me = [sys.executable, os.path.abspath(__file__), "--work", str(work), "--heap-mb", str(args.heap_mb),
          "--k", str(args.k), "--compare-questions", str(args.compare_questions), "--bm25s-mem-gb", str(args.bm25s_mem_gb)]
    res: dict = {"sentences": n_docs * PER_DOC, "documents": n_docs, "shards": shards, "workers": args.workers,
                 "pool": len(pool), "questions": args.questions, "k": args.k}
    if args.search_only:  # the built artifacts (and bm25s levels) of an earlier run in --work
        _search_side_by_side(args, res, me, env, log)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2))
        return
    res["scheduler"] = args.scheduler
    res["load_before"] = _load()
    if args.scheduler == "slurm":
        _build_slurm(args, res, work, shards, env, log)
    else:
        t0 = time.perf_counter()
        res["shard_tasks"] = _pool([[*me, "--child", "shard", "--index", str(i), "--count", str(shards)]
                                    for i in range(shards)], args.workers, env, log)
        res["shards_wall_s"] = time.perf_counter() - t0
        res["merge"] = run_child([*me, "--child", "merge", "--count", str(shards)], env, log)
        res["build_wall_s"] = time.perf_counter() - t0
        res["build_cpu_s"] = sum(r["cpu_s"] for r in res["shard_tasks"]) + res["merge"]["cpu_s"]
        bad = [r for r in [*res["shard_tasks"], res["merge"]] if r["rc"] != 0]
        if bad:
            sys.exit(f"a build step failed (see {log}): {bad[0]}")
    res["load_after_build"] = _load()
    sh, m = res["shard_tasks"], res["merge"]
    peaks = [r["peak_rss_mb"] or 0 for r in sh]
    where = (f"SLURM array {res['slurm_jobs']['array']} ({res['array_span_s']:.0f} s from the first task's start to "
             f"the last's end), merge job {res['slurm_jobs']['merge']}; per task from sacct"
             if args.scheduler == "slurm" else f"{args.workers} processes at a time")
    print(f"build ({where}): {res['build_wall_s']:.0f} s wall, {res['build_cpu_s']:.0f} s CPU; shard tasks peak RSS "
          f"{min(peaks):.0f}-{max(peaks):.0f} MiB (wall {min(r['wall_s'] for r in sh):.0f}-"
          f"{max(r['wall_s'] for r in sh):.0f} s, CPU {sum(r['cpu_s'] for r in sh) / len(sh):.0f} s each), merge "
          f"{m['wall_s']:.0f} s wall, {m['cpu_s']:.0f} s CPU, peak RSS {m['peak_rss_mb'] or 0:.0f} MiB; chunks per level "
          f"{m.get('chunks')}, indexes {m.get('index_mb', 0):.0f} MiB; load average {res['load_before']} -> "
          f"{res['load_after_build']}", flush=True)
    _search_side_by_side(args, res, me, env, log)
    res["load"] = _load()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2))
    if not (args.keep or args.work):
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
