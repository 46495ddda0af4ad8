"""What ``build.py``, ``train.py`` and ``evaluate.py`` do, as plain functions that tests call too.

The entry points only compose the Hydra config; this module composes the stages: the shared
preparation (:mod:`mogg.run.prepare_stage`), the level routers' cross-fit
(:mod:`mogg.run.crossfit_stage`), the final and transfer routers (:mod:`mogg.run.transfer_stage`),
the frontier (:mod:`mogg.run.frontier_stage`) and the report.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig

from mogg.core.artifacts import staged_dir
from mogg.core.preemption import requeue_on_usr1
from mogg.core.runconfig import check_run_config
from mogg.evaluation import names as N
from mogg.evaluation.budgets import budget_overview, budget_section, budget_table, plot_budgets
from mogg.evaluation.policies import run_policies, summarize
from mogg.evaluation.qa_accuracy import accuracy_section, plot_accuracy, read_policies, resolve_policies, versus_cot
from mogg.evaluation.report import check_report_dir, log_summaries, write_report
from mogg.evaluation.sections import question_records, questions_key, transfer_section, verdict
from mogg.routing.networks.training import check_requeue
from mogg.run.budget.base import ALL_LADDERS
from mogg.run.context import run_context
from mogg.run.crossfit_stage import crossfit_ladder
from mogg.run.frontier_stage import evaluate_frontier, frontier_settings, ladders_section, train_budget_routers
from mogg.run.option_pairs import check_evaluable, check_run_options
from mogg.run.prepare_stage import ladder_policies, ladder_reports, make_reader, prepare_all
from mogg.run.router_store import checkpoint_dir, retriever_node, router_settings, router_weights, source_nodes
from mogg.run.transfer_stage import train_final
from mogg.search import LadderIndex

log = logging.getLogger(__name__)


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
    set (those sets) instead: the transfer protocol, :mod:`mogg.run.transfer_stage`.
    """
    check_run_options(cfg, "train")
    trainer = instantiate(cfg.trainer)
    check_requeue(trainer.requeue)
    # trainer.requeue=job (slurm/train.sbatch): SLURM's USR1 before the time limit requeues the job, at
    # any stage of the run (mogg.core.preemption)
    with requeue_on_usr1(trainer.requeue == "job"):
        return _train(cfg, trainer)


def _train(cfg: DictConfig, trainer) -> dict:
    settings = router_settings(cfg)
    if cfg.get("evaluate_after"):  # an evaluation that must fail is refused before the training, not after
        check_evaluable(cfg, settings, source_nodes(cfg))
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
            results[name].update(crossfit_ladder(cfg, settings, trainer, name, prep, out))
    if fits_final:
        for name, r in train_final(cfg, settings, trainer, preps, source_preps, tq_preps).items():
            results[name].update(r)
    fs = frontier_settings(cfg)
    if fs is not None and fs.budget_routers:  # the learned budget routers: <run>/<ladder>/<kind>/
        in_set = fits_final and not nodes and cfg.get("train_questions") is None  # the deployable ones
        frontier = train_budget_routers(run_context(cfg), fs, preps, lambda n: checkpoint_dir(cfg, n), in_set,
                                        source_preps if fits_final else None)
        for name, r in frontier.items():
            results.setdefault(name, {}).update(r)
    if cfg.get("evaluate_after"):
        results["evaluation"] = evaluate(cfg)
    return results


def evaluate(cfg: DictConfig) -> dict:
    """Route -> select -> metrics for every ladder; writes the report to ``cfg.report_dir``, whole:
    everything is written into a staging folder that replaces the report in one step."""
    check_run_options(cfg, "evaluate")
    check_evaluable(cfg, router_settings(cfg), source_nodes(cfg))  # before the data is prepared
    check_report_dir(Path(cfg.report_dir), cfg.run_name)  # never replaces another run's results
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
    ctx, fs = run_context(cfg), frontier_settings(cfg)
    preps = prepare_all(cfg, reader=reader)
    for name, prep in preps.items():
        weights, routings, router_notes = router_weights(cfg, name, prep)
        results = run_policies(prep, cfg.k, weights, seed=cfg.seed, extra=ladder_policies(cfg, prep))
        s = summarize(prep, results)
        s["n_questions"] = len(prep.items)
        s["questions_key"] = questions_key(prep.query_ids)  # collect pairs and averages runs over one question set
        if prep.evidence_in_corpus is not None:
            s["evidence_in_corpus"] = prep.evidence_in_corpus
        if prep.evidence_in_corpus is False:  # shares of a gap between overlap scores mean nothing
            s.pop("gap_closed", None)
            s.pop("action_gap_closed", None)
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
        if fs is not None:
            if np.isnan(prep.fixed_f1).all():
                raise ValueError(f"{name}: the frontier needs gold evidence; {cfg.questions._target_} has none")
            own = ladder_policies(cfg, prep.ranked_deep(), k=fs.depth, fill_budget=max(fs.budgets))
            s["frontier"], md = evaluate_frontier(ctx, name, prep, fs, weights, own, checkpoint_dir(cfg, name), report_dir)
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
        sections = ladders_section(ctx, fs, preps, frontiers, checkpoint_dir(cfg, ALL_LADDERS), report_dir) + sections
    notes = list(dict.fromkeys(notes))  # a note shared by every ladder (the gold-context setting) once
    report = write_report(report_dir, summaries, records, notes, sections, run_name=cfg.run_name)
    if cfg.get("logger"):
        log_summaries(instantiate(cfg.logger, name=f"{cfg.run_name}-evaluate", id=f"{cfg.run_name}-evaluate-s{cfg.seed}"),
                      summaries)
    return summaries, report["markdown"]


