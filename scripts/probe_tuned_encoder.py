"""Would a stronger question-unit scorer close the sentence oracle's gap, and what would it cost here?
(issue 49; a probe, not part of any run.)

The evidence selector's loss is ranking: the gold unit is among a question's candidates far more
often than the selector ranks it first (the hit rates below). This probe fine-tunes the bundled
query encoder (all-MiniLM-L6-v2, the encoder of ``experiment=selector``) as a bi-encoder on one
fold's training questions, listwise (a softmax over each question's top ``--k`` candidates of the
selector's out-of-fold ranking against their gold-token shares), then re-ranks the fold's test
questions' top ``--k`` by

- the selector (the real cross-fit of ``experiment=selector``: LightGBM over its features),
- the frozen encoder's question-unit cosine (the selector's ``cosine`` column),
- the fine-tuned encoder's cosine,
- the selector and the fine-tuned cosine mixed (z-scores; the weight chosen on a validation slice
  of the training questions held out of the fine-tuning),

and prints each one's hit@1 (the top unit is gold evidence: density > 0.5) and the evidence F1 of
reading the top unit alone (what the selector reads at B = 128 on one-sentence evidence), with n
and standard errors, and the fine-tuning's throughput on this machine, extrapolated to what every
fold of a default run would take, beside the selector's own train time (features + fit, measured
in the same process).

    python scripts/probe_tuned_encoder.py --data covidqa [--questions 600] [--epochs 1] [--k 10]
    python scripts/probe_tuned_encoder.py --experiment selector_pages
    python scripts/probe_tuned_encoder.py --experiment selector_pages \
        questions.path=DIR/questions.jsonl corpus.sources.0.paths=DIR/corpus.jsonl   # Hydra overrides

``--device`` (default ``auto``: CUDA when torch sees a device, else the CPU) places the fine-tuned
model, its batches and the evaluation encodings, and is passed on as ``encoder.device`` so the
selector's own encoder (its ``cosine`` feature, the ladder's embeddings) runs there too. On CUDA
the arithmetic stays float32 and TF32 off, as on the CPU (``scripts/gpu_checks.sh`` runs both
probes on a GPU machine).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def compose(overrides: list[str]):
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hcompose(config_name="config", overrides=overrides)


def ranks(score: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Each row's 0-based rank within its question, best score first."""
    from mogg.core.segments import segment_rank

    order = np.lexsort((-score, q))
    r = np.empty(len(q), dtype=np.int64)
    r[order] = segment_rank(q[order])
    return r


def top1(score: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The best-scored row of each question among ``rows`` (one per question, questions ascending)."""
    r = ranks(score[rows], q[rows])
    return rows[r == 0][np.argsort(q[rows][r == 0])]


def main() -> None:
    from mogg.core.flags import nonnegative_int, positive_float, positive_int  # every flag checked before any work

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="covidqa", help="the gold-evidence set (data=...) of experiment=selector")
    ap.add_argument("--experiment", default="selector", help="e.g. selector_pages (the stand-in; then --data is ignored)")
    ap.add_argument("--fold", type=nonnegative_int, default=0)
    ap.add_argument("--questions", type=positive_int, default=600, help="training questions fine-tuned on (of the fold's)")
    ap.add_argument("--epochs", type=positive_float, default=1.0)
    ap.add_argument("--k", type=positive_int, default=10, help="candidates per question (the selector's top k)")
    ap.add_argument("--lr", type=positive_float, default=2e-5)
    ap.add_argument("--group", type=positive_int, default=4, help="questions per step")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    ap.add_argument("--artifacts", type=Path, default=None, help="an embedding / ladder store to reuse")
    ap.add_argument("--out", type=Path, default=ROOT / "outputs/probe_tuned_encoder.json")
    ap.add_argument("--device", default="auto", help="auto (cuda if available, else cpu), cpu, cuda or cuda:N")
    ap.add_argument("overrides", nargs="*", help="further Hydra overrides (e.g. the stand-in's questions.path=...)")
    args = ap.parse_args()

    import torch
    from hydra.utils import instantiate
    from transformers import AutoModel, AutoTokenizer

    from mogg.core.threads import configure_threads
    from mogg.encoders import resolve_model_path
    from mogg.run.budget.selector.candidates import FEATURES
    from mogg.run.budget.selector.folds import crossfit_selector, predict_selector_folds
    from mogg.run.budget.selector.kind import EvidenceSelectorKind
    from mogg.run.budget.selector.stage import reading_data
    from mogg.run.context import run_context
    from mogg.run.frontier_stage import frontier_settings
    from mogg.run.prepare_stage import prepare_all

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")  # the stages say what they do
    configure_threads(None)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device)
    if device.type == "cuda":
        # float32 and no TF32 (torch's matmul default, set here explicitly): the same arithmetic as the
        # CPU runs in docs/results.md, so a GPU run's ranking numbers compare with them and only the
        # times change; bf16 or TF32 would be faster but would move the fine-tuned cosine's F1 too.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        name = f"{device} ({torch.cuda.get_device_name(device)}, torch {torch.__version__}, CUDA {torch.version.cuda})"
    else:
        name = f"{device} (torch {torch.__version__})"
    print(f"device: {name}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="mogg-tuned-"))
    over = [f"experiment={args.experiment}", f"seed={args.seed}", f"paths.artifacts={args.artifacts or tmp / 'art'}",
            f"encoder.device='{device}'"]  # the selector's encoder (conf/encoder: device) on the same device
    if args.experiment == "selector":
        over.append(f"data={args.data}")
    cfg = compose(over + list(args.overrides))
    sel = next(k for k in frontier_settings(cfg).routers if isinstance(k, EvidenceSelectorKind))
    prep = next(iter(prepare_all(cfg).values()))
    ctx = run_context(cfg)
    t0 = time.perf_counter()
    data = reading_data(ctx, prep, sel)
    crossfit_selector(data.x, data.density, data.tokens, data.cand.q, data.evidence_len, prep.query_ids, ctx.n_folds,
                      ctx.seed, sel.params, ctx.val_fraction, tmp / "selector", prep.data_key, threads=ctx.threads)
    selector_s = time.perf_counter() - t0
    folds = predict_selector_folds(data.x, data.cand.q, prep.query_ids, tmp / "selector")

    q, dens = data.cand.q, np.nan_to_num(data.density)
    has = ~np.isnan(data.evidence_len)
    top = ranks(folds.pred, q) < args.k  # the selector's out-of-fold top k: the rows anyone re-ranks
    units = prep.ladder.units.text
    questions = list(prep.questions)
    rng = np.random.default_rng(args.seed)
    train_q = rng.permutation(np.flatnonzero((folds.fold != args.fold) & has))
    n_val = max(len(train_q) // 10, 1)
    val_q, fit_q = train_q[:n_val], train_q[n_val:][: args.questions]
    test_q = np.flatnonzero((folds.fold == args.fold) & has)

    def rows_of(qs: np.ndarray) -> np.ndarray:
        return np.flatnonzero(top & np.isin(q, qs))

    enc = instantiate(cfg.encoder)
    path, _ = resolve_model_path(enc.name_or_path)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).to(device=device, dtype=torch.float32)  # float32 on any device (above)
    torch.manual_seed(args.seed)  # seeds the CUDA generators too (dropout draws differ from the CPU's all the same)

    def embed(texts: list[str], grad: bool) -> torch.Tensor:  # mean pooling, L2-normalised [n, d]
        b = tok(texts, truncation=True, max_length=enc.max_length, padding=True, return_tensors="pt").to(device)
        with torch.set_grad_enabled(grad):
            h = model(**b).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).float()
            return torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)

    fit_rows = rows_of(fit_q)
    groups = [g for g in np.split(fit_rows, np.flatnonzero(np.diff(q[fit_rows])) + 1) if dens[g].sum() > 0]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    temp = 20.0  # cosine -> logit scale (the usual contrastive temperature 0.05)
    steps = int(np.ceil(len(groups) * args.epochs / args.group))
    model.train()
    texts = 0
    t0 = time.perf_counter()
    from tqdm.auto import tqdm

    for s in tqdm(range(steps), desc="fine-tuning", unit="step"):
        gs = [groups[(s * args.group + j) % len(groups)] for j in range(args.group)]
        qv = embed([questions[q[g[0]]] for g in gs], True)
        rows = np.concatenate(gs)
        uv = embed([units[u] for u in data.cand.unit[rows]], True)
        loss, o = 0.0, 0
        for i, g in enumerate(gs):
            p = torch.tensor(dens[g] / dens[g].sum(), dtype=torch.float32, device=device)
            loss = loss - (p * torch.log_softmax(temp * uv[o:o + len(g)] @ qv[i], 0)).sum()
            o += len(g)
        opt.zero_grad()
        (loss / len(gs)).backward()
        opt.step()
        texts += len(rows) + len(gs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the steps are queued asynchronously: time them to their end
    tune_s = time.perf_counter() - t0
    model.eval()
    eval_rows = rows_of(np.r_[val_q, test_q])
    uu = np.unique(data.cand.unit[eval_rows])
    t0 = time.perf_counter()
    ue = np.concatenate([embed([units[u] for u in uu[a:a + 128]], False).cpu().numpy()
                         for a in tqdm(range(0, len(uu), 128), desc="encoding the evaluated candidates", unit="batch")])
    qe = embed(questions, False).cpu().numpy()
    encode_s = time.perf_counter() - t0
    tuned = np.full(len(q), -np.inf)
    tuned[eval_rows] = np.einsum("nd,nd->n", ue[np.searchsorted(uu, data.cand.unit[eval_rows])], qe[q[eval_rows]])
    frozen = data.x[:, 2 * prep.ladder.n_levels + FEATURES.index("cosine")].astype(float)  # [per level 2 columns, FEATURES]

    def z(v: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(v))
        out[rows] = (v[rows] - v[rows].mean()) / max(v[rows].std(), 1e-12)
        return out

    def score(rows_q: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        best = top1(s, rows_of(rows_q), q)
        f1 = 2 * dens[best] * data.tokens[best] / (data.tokens[best] + data.evidence_len[q[best]])
        return (dens[best] > 0.5).astype(float), f1

    mixes = (0.25, 0.5, 0.75)
    mix_val = {a: score(val_q, a * z(tuned, eval_rows) + (1 - a) * z(folds.pred, eval_rows))[1].mean() for a in mixes}
    a_best = max(mixes, key=lambda a: mix_val[a])
    rows = {"selector (LightGBM, today)": folds.pred, "frozen encoder cosine": frozen, "fine-tuned encoder cosine": tuned,
            f"selector + fine-tuned (weight {a_best}, chosen on validation)": a_best * z(tuned, eval_rows) + (1 - a_best) * z(folds.pred, eval_rows)}
    n_train_all = int(((folds.fold != args.fold) & has).sum())
    per_text = tune_s / max(texts, 1)
    full_s = ctx.n_folds * (n_train_all * args.epochs * (args.k + 1) * per_text + encode_s * len(np.unique(data.cand.unit)) / max(len(uu), 1))
    label_set = args.experiment if args.experiment != "selector" else args.data
    print(f"\n{label_set}, fold {args.fold}: {len(test_q)} test questions with evidence, each question's top {args.k} "
          f"candidates of the selector's out-of-fold ranking; fine-tuned on {len(groups)} training questions, "
          f"{args.epochs:g} epoch(s), {os.cpu_count()} cores, device {name}")
    print(f"{'scorer':<58} {'hit@1':>14} {'top-unit F1':>14} {'F1 - selector (paired)':>24}")
    report = {"set": label_set, "device": name, "fold": args.fold, "n": len(test_q), "k": args.k, "fine_tuned_questions": len(groups),
              "epochs": args.epochs, "rows": {}}
    ref = score(test_q, folds.pred)[1]

    def se(v: np.ndarray) -> float:
        return float(v.std(ddof=1) / np.sqrt(len(v)))

    for label, s in rows.items():
        hit, f1 = score(test_q, s)
        print(f"{label:<58} {hit.mean():>7.3f} ± {se(hit):.3f} {f1.mean():>7.3f} ± {se(f1):.3f} "
              f"{(f1 - ref).mean():>+15.3f} ± {se(f1 - ref):.3f}")
        report["rows"][label] = {"hit1": hit.mean(), "hit1_se": se(hit), "f1": f1.mean(), "f1_se": se(f1),
                                 "f1_minus_selector": (f1 - ref).mean(), "f1_minus_selector_se": se(f1 - ref)}
    print(f"\nfine-tuning: {texts} texts in {tune_s:.0f} s ({texts / tune_s:.1f} texts/s); encoding {len(uu)} units in {encode_s:.0f} s")
    print(f"the selector today (features + {ctx.n_folds}-fold fit, cold encoder store unless --artifacts): {selector_s:.0f} s")
    print(f"a default run with the fine-tuned column ({ctx.n_folds} folds x {n_train_all} training questions x "
          f"{args.epochs:g} epoch(s), re-encoding every candidate unit per fold), extrapolated: {full_s:.0f} s "
          f"= {(selector_s + full_s) / selector_s:.1f}x the selector's train time (issue 49's bar: 2x)")
    report.update(tune_seconds=tune_s, texts=texts, selector_seconds=selector_s, extrapolated_seconds=full_s,
                  ratio=(selector_s + full_s) / selector_s, mix_validation=mix_val)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.exit(main())
