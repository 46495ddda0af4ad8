"""The evidence selector's feature cost against corpus size (issue 48): does it follow the questions?

Builds the real ``experiment=selector`` ladders twice, over a gold-evidence set's corpus and over
the same corpus padded ``--pad``-fold with distractor documents (its real sentences recombined at
random into documents of the corpus' median sentence count, as ``bench_scale.py`` replicates real
passages), then times :func:`mogg.run.budget.selector.stage.reading_data` (candidates, lexicon,
encoding, features, labels) cold on each, side by side in one process: every timed run gets an
empty embedding store, so nothing it encodes is cached. The ladder builds and the retrieval are not
timed, nor the units' term matrices the lexicon keeps beside each ladder (the index's cost, paid
once per corpus, not the selector's).

``--reference`` also times what the selector did before issue 48 (encoding every unit of the
ladder) on the unpadded corpus, on a ``--reference-sample`` of the units, extrapolated linearly.

    python scripts/bench_selector_cost.py [--data pubmedqa] [--pad 10] [--reference]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compose(overrides: list[str]):
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hcompose(config_name="config", overrides=overrides)


def distractors(corpus, fold: int, seed: int, path: Path) -> int:
    """Write ``fold`` x the corpus' sentences, recombined at random into documents of its median
    sentence count, as MedRAG jsonl at ``path``; returns the number of documents. Each distractor
    sentence splices the first half of one real sentence to the second half of another: real words
    and lengths, but a new text (a copied sentence would be encoded once for all its copies, which
    a real corpus does not grant)."""
    import numpy as np

    from mogg.core.text import split_sentences

    docs = [split_sentences(d.content) for d in corpus.documents()]
    sents = [s for d in docs for s in d]
    per = max(1, int(np.median([len(d) for d in docs])))
    rng = random.Random(seed)
    n = 0
    with path.open("w") as f:
        for _ in range(fold):
            pool = [_splice(a, b) for a, b in zip(rng.sample(sents, len(sents)), rng.sample(sents, len(sents)))]
            for a in range(0, len(pool), per):
                f.write(json.dumps({"id": f"pad-{n}", "title": "", "content": " ".join(pool[a:a + per])}) + "\n")
                n += 1
    return n


def _splice(a: str, b: str) -> str:
    wa, wb = a.split(), b.split()
    return " ".join(wa[:len(wa) // 2] + wb[len(wb) // 2:])


def main() -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from mogg.core.flags import nonnegative_int, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="pubmedqa", choices=("pubmedqa", "medmcqa", "covidqa"))
    ap.add_argument("--pad", type=positive_int, default=10, help="the padded corpus is this many times the original")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    ap.add_argument("--reference", action="store_true", help="also time encoding every unit (before issue 48)")
    ap.add_argument("--reference-sample", type=positive_int, default=2000)
    ap.add_argument("--artifacts", type=Path, default=None, help="ladder store (default: a temporary folder)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench_selector_cost.json")
    args = ap.parse_args()
    if args.pad < 2:
        ap.error("--pad must be >= 2")
    sys.path.insert(0, str(ROOT / "src"))
    os.environ.setdefault("MOGG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    from hydra.utils import instantiate
    from omegaconf import open_dict

    from mogg.core.threads import configure_threads

    configure_threads(None)
    from mogg.run.budget.selector.kind import EvidenceSelectorKind
    from mogg.run.budget.selector.lexicon import unit_terms
    from mogg.run.budget.selector.stage import reading_data
    from mogg.run.context import run_context
    from mogg.run.frontier_stage import frontier_settings
    from mogg.run.prepare_stage import prepare_all

    tmp = Path(tempfile.mkdtemp(prefix="mogg-selcost-"))
    store = args.artifacts or tmp / "ladders"
    base = compose(["experiment=selector", f"data={args.data}", f"paths.artifacts={store}", f"seed={args.seed}"])
    pad_file = tmp / "distractors.jsonl"
    n_pad = distractors(instantiate(base.corpus), args.pad - 1, args.seed, pad_file)
    padded = base.copy()
    with open_dict(padded):
        padded.corpus.sources.append({"_target_": "mogg.data.corpus.MedRAGJsonl", "paths": str(pad_file)})
    fs = frontier_settings(base)
    sel = next(k for k in fs.routers if isinstance(k, EvidenceSelectorKind))
    rows = {}
    for name, cfg in (("corpus", base), (f"corpus x{args.pad}", padded)):
        t0 = time.perf_counter()
        preps = prepare_all(cfg)  # ladders + retrieval: not the selector's cost
        t_prep = time.perf_counter() - t0
        for ladder, prep in preps.items():
            ctx = dataclasses.replace(run_context(cfg), artifacts=tmp / f"cold-{name}-{ladder}")  # no embedding
            t0 = time.perf_counter()
            # the units' term matrices are the index's (built once per ladder, beside it), not the selector's
            unit_terms(prep.ladder, prep.ladder_key, ctx.artifacts)
            t_prep += time.perf_counter() - t0
            t0 = time.perf_counter()
            data = reading_data(ctx, prep, sel)
            secs = time.perf_counter() - t0
            rows[(name, ladder)] = {"units": len(prep.ladder.units.text), "documents": len(prep.ladder.units.doc_ids),
                                    "candidates": len(data.cand), "unique candidate units":
                                    int(len(set(data.cand.unit.tolist()))), "texts encoded":
                                    len({prep.ladder.units.text[u] for u in set(data.cand.unit.tolist())}), "feature seconds": secs,
                                    "index seconds (untimed part)": t_prep}
    ref = None
    if args.reference:
        from mogg.encoders import embed_texts

        prep = next(iter(prepare_all(base).values()))
        units = list(prep.ladder.units.text)
        sample = random.Random(args.seed).sample(units, min(args.reference_sample, len(units)))
        t0 = time.perf_counter()
        embed_texts(instantiate(base.encoder), sample, None, what="reference sample")
        ref = (time.perf_counter() - t0) * len(units) / len(sample)
    print(f"\nevidence selector features, {args.data}, cold (empty embedding store), {os.cpu_count()} cores")
    print(f"{'corpus':<14} {'ladder':<8} {'units':>9} {'candidates':>11} {'unique units':>13} {'texts encoded':>14} {'seconds':>9} {'ms/text':>8} {'ratio':>6}")
    first = {}
    for (name, ladder), r in rows.items():
        first.setdefault(ladder, r["feature seconds"])
        print(f"{name:<14} {ladder:<8} {r['units']:>9} {r['candidates']:>11} {r['unique candidate units']:>13} "
              f"{r['texts encoded']:>14} {r['feature seconds']:>9.1f} {1e3 * r['feature seconds'] / max(r['texts encoded'], 1):>8.1f} "
              f"{r['feature seconds'] / first[ladder]:>6.2f}")
    if ref is not None:  # seconds per unit from the sample, times each corpus' units
        for (name, ladder), r in rows.items():
            secs = ref * r["units"] / next(iter(rows.values()))["units"]
            print(f"{'before #48, ' + name + ': encoding every unit (extrapolated from a sample)':<83} {secs:>9.1f} "
                  f"{'':>8} {secs / first[ladder]:>6.2f}")
    print(f"padding: {n_pad} distractor documents of recombined real sentences; bar: padded / unpadded <= 1.5")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"data": args.data, "pad": args.pad, "rows": [
        {"corpus": n, "ladder": lad, **r} for (n, lad), r in rows.items()], "reference_encode_all_seconds": ref},
        indent=1))
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
