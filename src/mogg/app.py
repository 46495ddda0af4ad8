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
from omegaconf import DictConfig

from mogg.artifacts import atomic_path, staged_dir, strict_json
from mogg.evaluation import names as N
from mogg.evaluation.budgets import budget_overview, budget_section, budget_table, plot_budgets
from mogg.evaluation.frontier_report import plot_cross_ladders
from mogg.evaluation.policies import run_policies, summarize
from mogg.evaluation.qa_accuracy import (
    accuracy_section,
    plot_accuracy,
    read_policies,
    resolve_policies,
    versus_cot,
)
from mogg.evaluation.report import log_summaries, write_report
from mogg.evaluation.sections import question_records, transfer_section, verdict
from mogg.frontier_stage import (
    CROSS,
    evaluate_cross_ladder,
    evaluate_frontier,
    frontier_settings,
    train_actions,
    train_cross_ladder,
)
from mogg.pipeline import prepare
from mogg.prepared import Prepared
from mogg.router_store import (
    checkpoint_dir,
    portable_config,
    retriever_node,
    router_settings,
    router_spec,
    router_weights,
    source_nodes,
)
from mogg.routing.crossfit import crossfit
from mogg.routing.features import NEEDS_ENCODER
from mogg.runconfig import check_run_config, container
from mogg.search import LadderIndex
from mogg.selection.policy import PolicyInputs, SelectionPolicy
from mogg.transfer_stage import train_final

log = logging.getLogger(__name__)


def make_reader(cfg: DictConfig):
    """The run's LLM reader (None with ``reader=none``)."""
    return instantiate(cfg.reader) if cfg.get("reader") else None


def make_labeler(cfg: DictConfig, encoder=None, reader=None):
    """The soft labeler, given the encoder or reader its source needs."""
    source = cfg.labels.get("source")
    if source == "encoder":
        return instantiate(cfg.labels, encoder=encoder)
    if source == "reader":
        reader = reader if reader is not None else make_reader(cfg)
        if reader is None:
            raise ValueError("labels=reader needs a reader: add reader=hf (a local model) or reader=openai (a server)")
        return instantiate(cfg.labels, reader=reader)
    return instantiate(cfg.labels)


def prepare_all(cfg: DictConfig, questions_cfg: DictConfig | None = None, reader=None,
                corpus_cfg: DictConfig | None = None) -> dict[str, Prepared]:
    """Instantiate corpus, questions, encoder, labeler and each ladder; run the shared stages.

    ``questions_cfg`` and ``corpus_cfg`` replace ``cfg.questions`` and ``cfg.corpus`` (a transfer
    source set: ``train_questions``, ``train_sources``); ``reader`` is the run's reader when the
    caller already holds one (``labels=reader``).
    """
    corpus = instantiate(corpus_cfg if corpus_cfg is not None else cfg.corpus)
    questions = instantiate(questions_cfg if questions_cfg is not None else cfg.questions)
    settings = router_settings(cfg)
    needs_encoder = any(g in settings.inputs for g in NEEDS_ENCODER) or cfg.labels.get("source") == "encoder"
    encoder = instantiate(cfg.encoder) if needs_encoder else None
    labeler = make_labeler(cfg, encoder, reader)
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    encoder_node = portable_config(cfg.encoder) if cfg.get("encoder") else None
    builders = {name: instantiate(ladder_cfg) for name, ladder_cfg in cfg.ladders.items()}  # every knob checked first
    out = {}
    for name, builder in builders.items():
        out[name] = prepare(
            name, corpus, questions, builder, instantiate(retriever_node(cfg, name)), labeler, inputs=settings.inputs,
            normalise=settings.normalise, k_r=cfg.k_r, k=cfg.k, encoder=encoder, artifacts=artifacts, encoder_node=encoder_node,
            max_context_tokens=cfg.get("max_context_tokens"),
            depth=cfg.frontier.depth if cfg.get("frontier") else None,
        )
        out[name].builder = builder
        out[name].questions_fingerprint = questions.fingerprint()
    return out


def ladder_policies(cfg: DictConfig, prep: Prepared, k: int | None = None, fill_budget: int | None = None) -> dict:
    """Selections of the policies only this ladder has (its builder's ``policies`` hook: a tree's
    collapsed tree, MAL's cumulative softmax), under the same k, scored like every other policy.
    ``fill_budget``: an equal-budget comparison's token budget, replacing each policy's own."""
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    inputs = PolicyInputs(ladder=prep.ladder, hits=prep.hits, questions=prep.questions, k=k or cfg.k,
                          builder=prep.builder, artifacts=artifacts, fill_budget=fill_budget)
    out = {}
    for name, pol in prep.builder.policies.items():
        if not isinstance(pol, SelectionPolicy):
            raise TypeError(f"ladder policy {name!r} ({type(pol).__name__}) has no select(inputs)")
        out[name] = pol.select(inputs)
    return out


def ladder_reports(name: str, prep: Prepared, out_dir: Path) -> tuple[dict, list[str]]:
    """Statistics and report sections only this ladder has (its builder's ``reports`` hook)."""
    stats, md = {}, []
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for hook in prep.builder.reports:
        st, lines = hook(name, prep.ladder, Path(out_dir))
        stats.update(st)
        md.extend(lines)
    return stats, md


def build(cfg: DictConfig) -> None:
    """``build.py``: build ladders and retriever state; with ``shard.*`` one shard or the merge."""
    from mogg.sharding import merge_task, shard_task

    check_run_config(cfg, "build")
    corpus = instantiate(cfg.corpus)
    artifacts = Path(cfg.paths.artifacts)
    sh = cfg.shard
    for name, ladder_cfg in cfg.ladders.items():
        builder = instantiate(ladder_cfg)
        make_retriever = instantiate(retriever_node(cfg, name))
        if sh.merge:
            merge_task(corpus, builder, make_retriever, sh.stage, sh.count, artifacts)
        elif sh.index is not None:
            shard_task(corpus, builder, make_retriever, sh.stage, sh.index, sh.count, artifacts)
        else:
            LadderIndex.build(corpus, builder, make_retriever, artifacts)
        log.info("built %s", name)


def train(cfg: DictConfig) -> dict:
    """Fit routers per ladder under ``checkpoints/<run_name>/<ladder>/``: the cross-fit
    (``fold<k>/`` + ``folds.json``) and/or one final router (``final/``), per ``router.fit``.

    With ``train_questions`` (or ``train_sources``) set, the final router is trained on that question
    set (those sets) instead: the transfer protocol, :mod:`mogg.transfer_stage`.
    """
    check_run_config(cfg, "train")
    settings = router_settings(cfg)
    trainer = instantiate(cfg.trainer)
    reader = make_reader(cfg) if cfg.labels.get("source") == "reader" else None  # one model for all label passes
    nodes = source_nodes(cfg)  # checked before anything is prepared
    preps = prepare_all(cfg, reader=reader)
    fits_final = settings.fit in ("all", "both")
    source_preps = {s: prepare_all(cfg, n["questions"], reader=reader, corpus_cfg=n["corpus"])
                    for s, n in nodes.items()} if fits_final else None
    tq_preps = prepare_all(cfg, cfg.train_questions, reader=reader) \
        if fits_final and cfg.get("train_questions") is not None else None
    results = {}
    for name, prep in preps.items():
        out = checkpoint_dir(cfg, name)
        out.mkdir(parents=True, exist_ok=True)
        results[name] = {"dir": str(out)}
        if settings.fit in ("crossfit", "both"):
            # one run for all folds (they train as one model; losses per fold), with a stable id so a
            # requeued job continues the same wandb run instead of starting a new one
            logger = instantiate(cfg.logger, name=f"{cfg.run_name}-{name}-folds",
                                 id=f"{cfg.run_name}-{name}-s{cfg.seed}-folds") if cfg.get("logger") else False
            info = crossfit(
                prep.features, prep.labels, prep.level_scores, prep.questions, prep.query_ids, cfg.n_folds, cfg.seed,
                settings, trainer, out, router_spec(cfg, name, prep), logger=logger,
            )
            meta = {"data_key": prep.data_key, "run_id": info["run_id"], "levels": prep.ladder.level_names,
                    "inputs": list(settings.inputs), "objective": settings.objective,
                    "config": container(cfg)}
            (out / "train_manifest.json").write_text(json.dumps(meta, indent=1, default=str))
            results[name]["epochs"] = [f["epochs"] for f in info["folds"]]
            log.info("cross-fitted %s routers in %s", name, out)
        fs = frontier_settings(cfg)
        if fs is not None and fs.actions:
            info = train_actions(cfg, settings, prep, out / "actions", fs)
            results[name]["action_folds"] = len(info["folds"])
            log.info("cross-fitted %s action routers in %s", name, out / "actions")
    if fits_final:
        for name, r in train_final(cfg, settings, trainer, preps, source_preps, tq_preps).items():
            results[name].update(r)
    fs = frontier_settings(cfg)
    if fs is not None and fs.actions and len(preps) > 1:
        out = checkpoint_dir(cfg, CROSS) / "actions"
        results[CROSS] = {"action_folds": len(train_cross_ladder(cfg, settings, preps, out, fs)["folds"])}
        log.info("cross-fitted the cross-ladder action routers in %s", out)
    if cfg.get("evaluate_after"):
        results["evaluation"] = evaluate(cfg)
    return results


def evaluate(cfg: DictConfig) -> dict:
    """Route -> select -> metrics for every ladder; writes the report to ``cfg.report_dir``, whole:
    everything is written into a staging folder that replaces the report in one step."""
    check_run_config(cfg, "evaluate")
    with staged_dir(Path(cfg.report_dir)) as stage:
        summaries, markdown = _evaluate(cfg, stage)
    log.info("report written to %s\n%s", cfg.report_dir, markdown)
    return summaries


def _evaluate(cfg: DictConfig, report_dir: Path) -> tuple[dict, str]:
    summaries, records = {}, []
    notes, sections = [], []
    reader = make_reader(cfg)
    settings = router_settings(cfg)
    frontiers: dict[str, dict] = {}
    budgets = [int(b) for b in cfg.get("budgets") or []]  # the equal-budget table's token budgets
    preps = prepare_all(cfg, reader=reader)
    for name, prep in preps.items():
        weights, routings, router_notes = router_weights(cfg, name, prep)
        results = run_policies(prep, cfg.k, weights, seed=cfg.seed, extra=ladder_policies(cfg, prep))
        s = summarize(prep, results)
        s["n_questions"] = len(prep.items)
        extra_stats, md = ladder_reports(name, prep, report_dir)
        s.update(extra_stats)
        sections.extend(md)
        if N.TRANSFER in routings:
            sections.extend(transfer_section(name, s, routings[N.TRANSFER], list(source_nodes(cfg))))
        if budgets and not np.isnan(prep.fixed_f1).all():  # equal-budget comparison (needs gold evidence)
            deep = run_policies(prep, cfg.budget_k, weights, seed=cfg.seed,
                                extra=ladder_policies(cfg, prep, k=cfg.budget_k, fill_budget=max(budgets)))
            s["budgets"] = budget_table(prep, deep, budgets)
            sections.extend(budget_section(name, s["budgets"], budgets))
            plot_budgets(name, s["budgets"], budgets, report_dir / f"{name}_budgets.png")
        fs = frontier_settings(cfg)
        if fs is not None:
            if np.isnan(prep.fixed_f1).all():
                raise ValueError(f"{name}: the frontier needs gold evidence; {cfg.questions._target_} has none")
            deep_prep = Prepared(**{**prep.__dict__, "hits": prep.deep})  # the ladder's own policies, ranked deep
            own = ladder_policies(cfg, deep_prep, k=fs.depth, fill_budget=max(fs.budgets))
            s["frontier"], md = evaluate_frontier(cfg, settings, name, prep, fs, weights, own, checkpoint_dir(cfg, name),
                                                  report_dir)
            sections.extend(md)
            frontiers[name] = s["frontier"]
        reader_recs = {}
        if reader is not None:
            pols = resolve_policies(list(cfg.reader_policies), results, s["best_fixed"])
            tables, reader_recs = read_policies(
                prep.items, results, pols, reader, Path(cfg.paths.answers) / "answers.jsonl",
                step_by_step=cfg.get("step_by_step", False), batch_size=cfg.get("reader_batch_size", 16),
            )
            s["accuracy"] = tables
            s["accuracy_vs_cot"] = versus_cot(reader_recs)
            sections.extend(accuracy_section(name, tables, s["accuracy_vs_cot"]))
            plot_accuracy(tables, report_dir / f"{name}_accuracy.png", name)
        summaries[name] = s
        records.extend(question_records(name, prep, results, routings, reader_recs))
        notes.append(verdict(name, s, settings.decision))
        notes.extend(prep.notes + router_notes)
    if budgets and len([s for s in summaries.values() if "budgets" in s]) > 1:
        sections = budget_overview(summaries, budgets) + sections
    if len(frontiers) > 1:
        head = ["## Ladders at matched reading cost", "", "![ladders](ladders_frontier.png)", ""]
        fs = frontier_settings(cfg)
        if fs.actions and cfg.get("use_router", True):  # one router choosing the ladder too
            cross, md = evaluate_cross_ladder(cfg, settings, preps, fs, checkpoint_dir(cfg, CROSS), report_dir)
            frontiers = {**frontiers, CROSS: cross}
            head += md
            report_dir.mkdir(parents=True, exist_ok=True)
            with atomic_path(report_dir / f"{CROSS}_frontier.json") as tmp:
                tmp.write_text(strict_json(cross, indent=1))
        plot_cross_ladders(frontiers, report_dir / "ladders_frontier.png")
        sections = head + sections
    notes = list(dict.fromkeys(notes))  # a note shared by every ladder (the gold-context setting) once
    report = write_report(report_dir, summaries, records, notes, sections)
    if cfg.get("logger"):
        log_summaries(instantiate(cfg.logger, name=f"{cfg.run_name}-evaluate", id=f"{cfg.run_name}-evaluate-s{cfg.seed}"),
                      summaries)
    return summaries, report["markdown"]


