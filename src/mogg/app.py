"""What ``train.py`` and ``evaluate.py`` do, as plain functions that tests call too.

The entry points only compose the Hydra config; here components are instantiated from their own
config nodes (``_target_``) and passed explicitly to the pipeline functions.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from mogg.artifacts import ArtifactError
from mogg.evaluation.ladder_extras import ladder_report
from mogg.evaluation.policies import run_policies, summarize
from mogg.evaluation.qa_accuracy import (
    accuracy_section,
    read_policies,
    resolve_policies,
)
from mogg.evaluation.report import write_report
from mogg.pipeline import Prepared, prepare
from mogg.routing.training import TrainerConfig, crossfit, predict_crossfit

log = logging.getLogger(__name__)


def prepare_all(cfg: DictConfig) -> dict[str, Prepared]:
    """Instantiate corpus, questions, encoder, labeler and each ladder; run the shared stages."""
    corpus = instantiate(cfg.corpus)
    questions = instantiate(cfg.questions)
    router_inputs = cfg.router.inputs
    needs_encoder = router_inputs in ("query", "query+retrieval") or cfg.labels.get("source") == "encoder"
    encoder = instantiate(cfg.encoder) if needs_encoder else None
    labeler = instantiate(cfg.labels, encoder=encoder) if cfg.labels.get("source") == "encoder" else instantiate(cfg.labels)
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    out = {}
    for name, ladder_cfg in cfg.ladders.items():
        builder = instantiate(ladder_cfg)
        out[name] = prepare(
            name, corpus, questions, builder, instantiate(cfg.retriever), labeler, router_inputs,
            k_r=cfg.k_r, k=cfg.k, encoder=encoder, artifacts=artifacts,
        )
        out[name].extras["builder"] = builder
    return out


def ladder_policies(cfg: DictConfig, prep: Prepared) -> dict:
    """Policies that only some ladders have: RAPTOR's collapsed tree and tree traversal, ranked by
    the tree's own encoder over all layers (the reference's retrieval), under the same k and a
    token budget comparable to the other policies' contexts."""
    if prep.ladder.method != "raptor":
        return {}
    from mogg.pipeline import embed_queries
    from mogg.retrieval.tree import collapsed_tree_select, tree_traversal_select

    enc = prep.extras["builder"].encoder
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    q = embed_queries(enc, [it.question for it in prep.items], artifacts)
    return {
        "collapsed_tree": collapsed_tree_select(prep.ladder, q, token_budget=cfg.tree.token_budget, k_max=cfg.tree.k_max),
        "tree_traversal": tree_traversal_select(prep.ladder, q, top_k_per_layer=cfg.tree.top_k_per_layer, k=cfg.k),
    }


def build(cfg: DictConfig) -> None:
    """``build.py``: build ladders and retriever state; with ``shard.*`` one shard or the merge."""
    from mogg.sharding import build_graph_shard, build_shard, merge_graph_shards, merge_shards

    corpus = instantiate(cfg.corpus)
    artifacts = Path(cfg.paths.artifacts)
    sh = cfg.shard
    for name, ladder_cfg in cfg.ladders.items():
        builder = instantiate(ladder_cfg)
        make_retriever = instantiate(cfg.retriever)
        staged = hasattr(builder, "knn_rows")  # graph ladders: nodes stage, then kNN stage
        if staged and (sh.merge or sh.index is not None):
            if sh.merge:
                merge_graph_shards(corpus, builder, sh.stage, sh.count, artifacts, make_retriever)
            else:
                build_graph_shard(corpus, builder, sh.stage, sh.index, sh.count, artifacts)
        elif sh.stage != "nodes":
            raise ValueError(f"shard.stage={sh.stage!r} applies to graph ladders only ({name} is {builder.method!r})")
        elif sh.merge:
            merge_shards(corpus, builder, make_retriever, sh.count, artifacts)
        elif sh.index is not None:
            build_shard(corpus, builder, make_retriever, sh.index, sh.count, artifacts)
        else:
            from mogg.pipeline import build_ladder
            from mogg.retrieval.hits import level_retrievers

            ladder, key = build_ladder(corpus, builder, artifacts)
            level_retrievers(ladder, make_retriever, artifacts, key)
        log.info("built %s", name)


def _router_kwargs(cfg: DictConfig) -> dict:
    r = OmegaConf.to_container(cfg.router, resolve=True)
    return {k: r[k] for k in ("hidden", "dropout", "lr", "weight_decay")}


def checkpoint_dir(cfg: DictConfig, ladder: str) -> Path:
    return Path(cfg.paths.checkpoints) / cfg.run_name / ladder


def train(cfg: DictConfig) -> dict:
    """Cross-fit a router per ladder; checkpoints under ``checkpoints/<run_name>/<ladder>/``."""
    trainer = TrainerConfig(**OmegaConf.to_container(cfg.trainer, resolve=True))
    results = {}
    for name, prep in prepare_all(cfg).items():
        out = checkpoint_dir(cfg, name)
        out.mkdir(parents=True, exist_ok=True)
        logger_factory = None
        if cfg.get("logger"):
            # a stable run id: a requeued job continues the same wandb run instead of starting a new one
            logger_factory = lambda k, name=name: instantiate(
                cfg.logger, name=f"{cfg.run_name}-{name}-fold{k}", id=f"{cfg.run_name}-{name}-s{cfg.seed}-fold{k}"
            )
        info = crossfit(
            prep.features, prep.labels, prep.query_ids, cfg.n_folds, cfg.seed, _router_kwargs(cfg), trainer, out,
            logger_factory=logger_factory,
        )
        meta = {"data_key": prep.data_key, "levels": prep.ladder.level_names, "inputs": cfg.router.inputs,
                "config": OmegaConf.to_container(cfg, resolve=True)}
        (out / "train_manifest.json").write_text(json.dumps(meta, indent=1, default=str))
        results[name] = {"dir": str(out), "epochs": [f["epochs"] for f in info["folds"]]}
        log.info("trained %s routers in %s", name, out)
    if cfg.get("evaluate_after"):
        results["evaluation"] = evaluate(cfg)
    return results


def load_router_predictions(cfg: DictConfig, name: str, prep: Prepared):
    """Out-of-fold router and prior weights for ``prep``; refuses a checkpoint built on other data."""
    d = checkpoint_dir(cfg, name)
    if not (d / "train_manifest.json").exists():
        raise FileNotFoundError(f"no trained router in {d}: run `python train.py` with the same overrides first")
    meta = json.loads((d / "train_manifest.json").read_text())
    if meta["data_key"] != prep.data_key:
        raise ArtifactError(
            f"{d} was trained on different data/labels/features (data key {meta['data_key']} != {prep.data_key}); "
            "retrain with the same overrides"
        )
    return predict_crossfit(prep.features, prep.query_ids, d)


def evaluate(cfg: DictConfig) -> dict:
    """Route -> select -> metrics for every ladder; writes the report to ``cfg.report_dir``."""
    summaries, records = {}, []
    notes, sections = [], []
    report_dir = Path(cfg.report_dir)
    reader = instantiate(cfg.reader) if cfg.get("reader") else None
    for name, prep in prepare_all(cfg).items():
        router_w = prior_w = fold = None
        if cfg.get("use_router", True):
            router_w, prior_w, fold = load_router_predictions(cfg, name, prep)
        results = run_policies(prep, cfg.k, router_w, prior_w, seed=cfg.seed, extra=ladder_policies(cfg, prep))
        s = summarize(prep, results)
        extra_stats, md = ladder_report(name, prep.ladder, report_dir)
        s.update(extra_stats)
        sections.extend(md)
        reader_recs = {}
        if reader is not None:
            pols = resolve_policies(list(cfg.reader_policies), results, s["best_fixed"])
            tables, reader_recs = read_policies(
                prep.items, results, pols, reader, Path(cfg.paths.answers) / "answers.jsonl",
                step_by_step=cfg.get("step_by_step", False), batch_size=cfg.get("reader_batch_size", 16),
            )
            s["accuracy"] = tables
            sections.extend(accuracy_section(name, tables))
        summaries[name] = s
        records.extend(question_records(name, prep, results, router_w, prior_w, fold, reader_recs))
        notes.append(verdict(name, s))
    report = write_report(report_dir, summaries, records, notes, sections)
    log.info("\n%s", report["markdown"])
    return summaries


def verdict(name: str, s: dict) -> str:
    """One honest sentence: does the router beat the best fixed level, and what share of the gap."""
    pol = s["policies"]
    if "mog_router" not in pol:
        return f"{name}: no router evaluated."
    bf = s["best_fixed"]
    r, b = pol["mog_router"]["f1"], pol[bf]["f1"]
    txt = f"{name}: router F1 {r['mean']:.3f} ± {r['se']:.3f} vs best fixed level {bf} {b['mean']:.3f} ± {b['se']:.3f}"
    if "gap_closed" in s:
        txt += f"; oracle {pol['oracle']['f1']['mean']:.3f}; the router closes {s['gap_closed']['mog_router']:.0%} of the best-fixed-to-oracle gap"
        txt += f" (prior weights: {s['gap_closed'].get('mog_prior', float('nan')):.0%})"
    return txt + "."


def question_records(name, prep: Prepared, results: dict, router_w, prior_w, fold, reader_recs=None) -> list[dict]:
    """Per-question jsonl records: retrieval per level, weights, labels and every policy's output."""
    lad = prep.ladder
    oracle = prep.oracle_level()
    recs = []
    for q, it in enumerate(prep.items):
        rec = {
            "ladder": name, "id": it.id, "question": it.question, "gold_doc_ids": it.gold_doc_ids,
            "retrieved": {lv.name: {"chunks": prep.hits.ids[q, j].tolist(), "scores": prep.hits.scores[q, j].tolist()}
                          for j, lv in enumerate(lad.levels)},
            "soft_label": prep.labels[q].tolist(), "level_scores": prep.level_scores[q].tolist(),
            "oracle_level": int(oracle[q]),
            "router_weights": None if router_w is None else router_w[q].tolist(),
            "prior_weights": None if prior_w is None else prior_w[q].tolist(),
            "fold": None if fold is None else int(fold[q]),
            "policies": {},
        }
        for pol, res in results.items():
            m = res["metrics"]
            sel = res["selection"]
            rec["policies"][pol] = {
                "levels": sel.level[q].tolist(), "chunks": sel.chunk[q].tolist(), "docs": m["_docs"][q],
                "context": m["_context"][q],
                **{k: (None if np.isnan(v[q]) else float(v[q])) for k, v in m.items() if not k.startswith("_")},
            }
        for pol, rr in (reader_recs or {}).items():
            keep = {k: rr[q][k] for k in ("prompt_hash", "raw", "parsed", "correct", "unparsed")}
            rec["policies"].setdefault(pol, {})["reader"] = keep
        recs.append(rec)
    return recs
