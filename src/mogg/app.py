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

from mogg.artifacts import ArtifactError, atomic_path, staged_dir, strict_json
from mogg.evaluation.budgets import budget_overview, budget_section, budget_table, plot_budgets
from mogg.evaluation.policies import run_policies, summarize
from mogg.evaluation.qa_accuracy import (
    accuracy_section,
    plot_accuracy,
    read_policies,
    resolve_policies,
    versus_cot,
)
from mogg.evaluation.frontier_report import plot_cross_ladders
from mogg.evaluation.report import log_summaries, write_report
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
from mogg.routing.crossfit import RouterSettings, crossfit, fit_all, predict_crossfit
from mogg.routing.features import compute_features
from mogg.routing.model import Routing, TrainedRouter
from mogg.runconfig import check_run_config, container, redact
from mogg.search import LadderIndex
from mogg.selection import one_hot

log = logging.getLogger(__name__)


def router_settings(cfg: DictConfig) -> RouterSettings:
    """The router's knobs from its config group (``_target_``)."""
    return instantiate(cfg.router)


def retriever_node(cfg: DictConfig, ladder: str):
    """The retriever config of one ladder: ``retrievers.<ladder>`` when the run sets it (to compare
    retrievers on one ladder builder, e.g. BM25 vs dense vs hybrid), else ``retriever``."""
    per = cfg.get("retrievers") or {}
    return per[ladder] if ladder in per else cfg.retriever


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


def prepare_all(cfg: DictConfig, questions_cfg: DictConfig | None = None, reader=None) -> dict[str, Prepared]:
    """Instantiate corpus, questions, encoder, labeler and each ladder; run the shared stages.

    ``questions_cfg`` replaces ``cfg.questions`` (the transfer source set of ``train_questions``);
    ``reader`` is the run's reader when the caller already holds one (``labels=reader``).
    """
    corpus = instantiate(cfg.corpus)
    questions = instantiate(questions_cfg if questions_cfg is not None else cfg.questions)
    settings = router_settings(cfg)
    needs_encoder = "query" in settings.inputs or cfg.labels.get("source") == "encoder"
    encoder = instantiate(cfg.encoder) if needs_encoder else None
    labeler = make_labeler(cfg, encoder, reader)
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    encoder_node = _container(cfg.encoder) if cfg.get("encoder") else None
    builders = {name: instantiate(ladder_cfg) for name, ladder_cfg in cfg.ladders.items()}  # every knob checked first
    out = {}
    for name, builder in builders.items():
        out[name] = prepare(
            name, corpus, questions, builder, instantiate(retriever_node(cfg, name)), labeler, inputs=settings.inputs,
            k_r=cfg.k_r, k=cfg.k, encoder=encoder, artifacts=artifacts, encoder_node=encoder_node,
            max_context_tokens=cfg.get("max_context_tokens"),
            depth=cfg.frontier.depth if cfg.get("frontier") else None,
        )
        out[name].builder = builder
        out[name].questions_fingerprint = questions.fingerprint()
    return out


def ladder_policies(cfg: DictConfig, prep: Prepared, k: int | None = None, budget: int | None = None) -> dict:
    """Selections of the policies only this ladder has (its builder's ``policies`` hook: a tree's
    collapsed tree, MAL's cumulative softmax), under the same k, scored like every other policy."""
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    return {name: pol.select(ladder=prep.ladder, hits=prep.hits, questions=prep.questions, k=k or cfg.k,
                             builder=prep.builder, artifacts=artifacts, budget=budget)
            for name, pol in prep.builder.policies.items()}


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


def checkpoint_dir(cfg: DictConfig, ladder: str) -> Path:
    return Path(cfg.paths.checkpoints) / cfg.run_name / ladder


# Machine-local runtime paths: they never change results, and keeping them in a router's spec
# would make the same training on another checkout (or tmp dir) look like a different router.
_LOCAL_KEYS = frozenset({"cache_dir"})


def _portable(obj):
    if isinstance(obj, dict):
        return {k: _portable(v) for k, v in obj.items() if k not in _LOCAL_KEYS}
    if isinstance(obj, list):
        return [_portable(v) for v in obj]
    return obj


def _container(node) -> dict | None:
    """A config node as plain data with secrets redacted and machine-local paths dropped (it is
    written into router directories and hashed into their fit keys)."""
    return _portable(redact(OmegaConf.to_container(node, resolve=True))) if node is not None else None


def router_spec(cfg: DictConfig, name: str, prep: Prepared) -> dict:
    """The part of a router's spec that comes from the data: levels, feature recipe, the ladder and
    retriever it expects, where its training data came from, and the components' configs (so
    the route CLI can rebuild the ladder and retriever from the router directory alone)."""
    datasets = sorted({it.dataset for it in prep.items if it.dataset}) or ["questions"]
    return {
        "levels": prep.ladder.level_names,
        "recipe": prep.recipe.to_json(),
        "compat": {"ladder_key": prep.ladder_key, "retriever": prep.retriever_config, "k_r": prep.k_r},
        "provenance": {
            "questions_name": "+".join(datasets), "questions": prep.questions_fingerprint,
            "n_questions": len(prep.items), "data_key": prep.data_key, "labels": _container(cfg.labels),
            "run_name": cfg.run_name, "ladder_name": name,
        },
        "components": {"corpus": _container(cfg.corpus), "ladder": _container(cfg.ladders[name]),
                       "retriever": _container(retriever_node(cfg, name)), "encoder": _container(cfg.get("encoder")), "k": cfg.k,
                       "max_context_tokens": cfg.get("max_context_tokens")},
    }


def train(cfg: DictConfig) -> dict:
    """Fit routers per ladder under ``checkpoints/<run_name>/<ladder>/``: the cross-fit
    (``fold<k>/`` + ``folds.json``) and/or one final router (``final/``), per ``router.fit``.

    With ``train_questions`` set, the final router is trained on that question set instead
    (the transfer protocol: train on A, evaluate on ``questions`` = B).
    """
    check_run_config(cfg, "train")
    settings = router_settings(cfg)
    trainer = instantiate(cfg.trainer)
    reader = make_reader(cfg) if cfg.labels.get("source") == "reader" else None  # one model for all label passes
    preps = prepare_all(cfg, reader=reader)
    sources = preps
    if settings.fit in ("all", "both") and cfg.get("train_questions") is not None:
        sources = prepare_all(cfg, cfg.train_questions, reader=reader)
    results = {}
    for name, prep in preps.items():
        out = checkpoint_dir(cfg, name)
        out.mkdir(parents=True, exist_ok=True)
        results[name] = {"dir": str(out)}
        if settings.fit in ("crossfit", "both"):
            logger_factory = None
            if cfg.get("logger"):
                # a stable run id: a requeued job continues the same wandb run instead of starting a new one
                def logger_factory(k, name=name):
                    return instantiate(cfg.logger, name=f"{cfg.run_name}-{name}-fold{k}",
                                       id=f"{cfg.run_name}-{name}-s{cfg.seed}-fold{k}")
            info = crossfit(
                prep.features, prep.labels, prep.level_scores, prep.questions, prep.query_ids, cfg.n_folds, cfg.seed,
                settings, trainer, out, router_spec(cfg, name, prep), logger_factory=logger_factory,
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
        if settings.fit in ("all", "both"):
            src = sources[name]
            router = fit_all(src.features, src.labels, src.level_scores, src.questions, cfg.seed, settings, trainer,
                             out / "final", router_spec(cfg, name, src))
            results[name]["final"] = str(out / "final")
            log.info("final %s router (trained on %s, %d questions) in %s", name, router.source_name, len(src.items), out / "final")
    fs = frontier_settings(cfg)
    if fs is not None and fs.actions and len(preps) > 1:
        out = checkpoint_dir(cfg, CROSS) / "actions"
        results[CROSS] = {"action_folds": len(train_cross_ladder(cfg, settings, preps, out, fs)["folds"])}
        log.info("cross-fitted the cross-ladder action routers in %s", out)
    if cfg.get("evaluate_after"):
        results["evaluation"] = evaluate(cfg)
    return results


def load_router_predictions(cfg: DictConfig, name: str, prep: Prepared) -> Routing:
    """Out-of-fold decisions for ``prep`` from this run's cross-fit; refuses one built on other data."""
    d = checkpoint_dir(cfg, name)
    if not (d / "train_manifest.json").exists() or not (d / "folds.json").exists():
        raise FileNotFoundError(f"no trained router in {d}: run `python train.py` with the same overrides first")
    meta = json.loads((d / "train_manifest.json").read_text())
    if meta["data_key"] != prep.data_key:
        raise ArtifactError(
            f"{d} was trained on different data/labels/features (data key {meta['data_key']} != {prep.data_key}); "
            "retrain with the same overrides"
        )
    return predict_crossfit(prep.features, prep.query_ids, d, run_id=meta.get("run_id"))


def resolve_router_dir(path: str | Path, ladder: str) -> Path:
    """A router directory from ``router.checkpoint``: the directory itself, or ``<run>/<ladder>/final``."""
    p = Path(path)
    for cand in (p, p / ladder / "final", p / "final"):
        if (cand / "router.json").is_file():
            return cand
    raise FileNotFoundError(
        f"router.checkpoint={path}: no router.json in {p}, {p / ladder / 'final'} or {p / 'final'}; "
        "train one with `python train.py ... router.fit=all`"
    )


def applied_router(cfg: DictConfig, settings: RouterSettings, name: str, prep: Prepared) -> TrainedRouter | None:
    """The router trained elsewhere that this evaluation applies: ``router.checkpoint``, or this run's
    final router when it was trained on ``train_questions``. Checked against the ladder, retriever
    and k_r, and refused on questions it was trained on (unless ``router.allow_overlap``)."""
    if settings.checkpoint:
        d = resolve_router_dir(settings.checkpoint, name)
    elif settings.fit in ("all", "both") and cfg.get("train_questions") is not None:
        d = checkpoint_dir(cfg, name) / "final"
    else:
        return None
    router = TrainedRouter.load(d)
    router.spec["_notes"] = router.check_compatible(prep.ladder.level_names, prep.ladder_key, prep.retriever_config, prep.k_r)
    seen = router.overlap(prep.questions)
    if seen and not settings.allow_overlap:
        raise ArtifactError(
            f"{d} was trained on {seen} of these {len(prep.items)} questions: evaluating it on them measures memorisation. "
            "Evaluate it on another question set, use the cross-fit (router.fit=crossfit), or set router.allow_overlap=true"
        )
    if seen:
        router.spec["_notes"].append(f"{d} was trained on {seen} of these {len(prep.items)} questions (router.allow_overlap=true)")
    return router


def route_prepared(cfg: DictConfig, router: TrainedRouter, prep: Prepared) -> Routing:
    """Apply a trained router to a prepared question set, with the router's own feature recipe."""
    recipe = router.recipe
    encoder = instantiate(recipe.encoder) if recipe.needs_embeddings else None
    artifacts = Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None
    x = compute_features(recipe, prep.hits, prep.ladder, prep.questions, encoder, artifacts)
    return router.route(x)


def router_weights(cfg: DictConfig, name: str, prep: Prepared) -> tuple[dict[str, np.ndarray], dict[str, Routing], list[str]]:
    """Eq. 1 weights of every router policy for this ladder, their routings, and report notes.

    ``mog_router``: this run's cross-fit under ``router.decision`` (``mog_router[<other rule>]``
    beside it), ``mog_prior``: its folds' mean training labels; ``mog_transfer``: a router
    trained on another question set, with ``source_best_fixed``: the fixed level it falls back
    to, i.e. the best fixed level as chosen on its training set.
    """
    settings = router_settings(cfg)
    weights: dict[str, np.ndarray] = {}
    routings: dict[str, Routing] = {}
    notes: list[str] = []
    if not cfg.get("use_router", True):
        return weights, routings, notes
    other = "fallback" if settings.decision == "argmax" else "argmax"
    transfer = applied_router(cfg, settings, name, prep)
    in_set = settings.fit in ("crossfit", "both")
    if in_set:
        try:
            r = load_router_predictions(cfg, name, prep)
        except FileNotFoundError:
            if transfer is None:
                raise
            log.info("%s: no in-set cross-fitted router in %s; reporting the applied router only", name, checkpoint_dir(cfg, name))
            r = None
        if r is not None:
            # the fold routers carry their own rule; the config's decision says which one is "the router"
            r.weights = r.fallback_weights if settings.decision == "fallback" else r.argmax_weights
            routings["mog_router"] = r
            weights["mog_router"] = r.weights
            weights[f"mog_router[{other}]"] = r.argmax_weights if other == "argmax" else r.fallback_weights
            weights["mog_prior"] = r.prior
    elif transfer is None:
        raise ValueError(
            "router.fit=all trains one router on every question of this set, so it cannot be evaluated on them: "
            "evaluate it on another set (experiment=<B> router.checkpoint=...), set train_questions, or use router.fit=crossfit|both"
        )
    if transfer is not None:
        t = route_prepared(cfg, transfer, prep)
        t.weights = t.fallback_weights if settings.decision == "fallback" else t.argmax_weights
        routings["mog_transfer"] = t
        weights["mog_transfer"] = t.weights
        weights[f"mog_transfer[{other}]"] = t.argmax_weights if other == "argmax" else t.fallback_weights
        fb = one_hot(np.full(len(prep.items), transfer.decision["fallback_level"]), prep.ladder.n_levels)
        weights["source_best_fixed"] = fb
        notes += transfer.spec.get("_notes", [])
        notes.append(
            f"{name}: mog_transfer is the router in {transfer.spec['_dir']} trained on {transfer.source_name} "
            f"({transfer.spec['provenance']['n_questions']} questions, objective {transfer.objective}); "
            f"source_best_fixed is {prep.ladder.level_names[transfer.decision['fallback_level']]}, the best fixed level on "
            f"{transfer.source_name}"
        )
    return weights, routings, notes


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
    preps = prepare_all(cfg, reader=reader)
    for name, prep in preps.items():
        weights, routings, router_notes = router_weights(cfg, name, prep)
        results = run_policies(prep, cfg.k, weights, seed=cfg.seed, extra=ladder_policies(cfg, prep))
        s = summarize(prep, results)
        s["n_questions"] = len(prep.items)
        extra_stats, md = ladder_reports(name, prep, report_dir)
        s.update(extra_stats)
        sections.extend(md)
        if "mog_transfer" in routings:
            sections.extend(transfer_section(name, s, routings["mog_transfer"]))
        budgets = [int(b) for b in cfg.get("budgets") or []]
        if budgets and not np.isnan(prep.fixed_f1).all():  # equal-budget comparison (needs gold evidence)
            deep = run_policies(prep, cfg.budget_k, weights, seed=cfg.seed,
                                extra=ladder_policies(cfg, prep, k=cfg.budget_k, budget=max(budgets)))
            s["budgets"] = budget_table(prep, deep, budgets)
            sections.extend(budget_section(name, s["budgets"], budgets))
            plot_budgets(name, s["budgets"], budgets, report_dir / f"{name}_budgets.png")
        fs = frontier_settings(cfg)
        if fs is not None:
            if np.isnan(prep.fixed_f1).all():
                raise ValueError(f"{name}: the frontier needs gold evidence; {cfg.questions._target_} has none")
            deep_prep = Prepared(**{**prep.__dict__, "hits": prep.deep})  # the ladder's own policies, ranked deep
            own = ladder_policies(cfg, deep_prep, k=fs.depth, budget=max(fs.budgets))
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
    budgets = [int(b) for b in cfg.get("budgets") or []]
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


def transfer_section(name: str, s: dict, routing: Routing) -> list[str]:
    """The transfer protocol's rows side by side: in-set router, transferred router, the best fixed
    level chosen on the source set, the best fixed level here (hindsight) and the oracle."""
    pol, gap = s["policies"], s.get("gap_closed", {})
    rows = [("in-set cross-fitted router", "mog_router"), ("transferred router", "mog_transfer"),
            ("best fixed level chosen on the source set", "source_best_fixed"),
            (f"best fixed level here, in hindsight ({s['best_fixed']})", s["best_fixed"]), ("oracle level", "oracle")]
    md = [f"## Transfer: `{name}`", "", f"n = {s['n_questions']} questions; the transferred router routed "
          f"{routing.routed.mean():.0%} of them past its fallback margin.", "",
          "| policy | evidence F1 | gap closed |", "|---|---|---|"]
    for label, key in rows:
        if key in pol:
            f = pol[key]["f1"]
            g = gap.get(key, float("nan"))
            md.append(f"| {label} | {f['mean']:.3f} ± {f['se']:.3f} | {'-' if np.isnan(g) else f'{g:+.0%}'} |")
    return md + [""]


def verdict(name: str, s: dict, decision: str = "argmax") -> str:
    """One honest sentence: does the router beat the best fixed level, and what share of the gap."""
    pol = s["policies"]
    key = "mog_router" if "mog_router" in pol else "mog_transfer" if "mog_transfer" in pol else None
    if key is None:
        return f"{name}: no router evaluated."
    bf = s["best_fixed"]
    r, b = pol[key]["f1"], pol[bf]["f1"]
    what = "router" if key == "mog_router" else "transferred router"
    txt = (f"{name} (n={s.get('n_questions', r['n'])}): {what} ({decision} rule) F1 {r['mean']:.3f} ± {r['se']:.3f} "
           f"vs best fixed level {bf} {b['mean']:.3f} ± {b['se']:.3f}")
    if "gap_closed" in s:
        txt += f"; oracle {pol['oracle']['f1']['mean']:.3f}; the {what} closes {s['gap_closed'][key]:.0%} of the best-fixed-to-oracle gap"
        if "mog_prior" in pol:
            txt += f" (prior weights: {s['gap_closed']['mog_prior']:.0%})"
    return txt + "."


def question_records(name, prep: Prepared, results: dict, routings: dict[str, Routing] | None = None,
                     reader_recs=None) -> list[dict]:
    """Per-question jsonl records: retrieval per level, labels, every router's decision and every
    policy's output."""
    lad = prep.ladder
    oracle = prep.oracle_level()
    routings = routings or {}
    inset = routings.get("mog_router")
    recs = []
    for q, it in enumerate(prep.items):
        rec = {
            "ladder": name, "id": it.id, "question": it.question, "gold_doc_ids": it.gold_doc_ids,
            "retrieved": {lv.name: {"chunks": prep.hits.ids[q, j].tolist(), "scores": prep.hits.scores[q, j].tolist()}
                          for j, lv in enumerate(lad.levels)},
            "soft_label": prep.labels[q].tolist(), "level_scores": prep.level_scores[q].tolist(),
            "oracle_level": int(oracle[q]),
            "router_weights": None if inset is None else inset.weights[q].tolist(),
            "prior_weights": None if inset is None else inset.prior[q].tolist(),
            "fold": None if inset is None else int(inset.fold[q]),
            "routers": {pn: {"weights": r.weights[q].tolist(), "level": int(r.level[q]), "routed": bool(r.routed[q]),
                             "logits": r.logits[q].tolist()} for pn, r in routings.items()},
            "policies": {},
        }
        for pol, res in results.items():
            sel = res.selection
            rec["policies"][pol] = {
                "levels": sel.level[q].tolist(), "chunks": sel.chunk[q].tolist(), "docs": res.docs[q],
                "context": res.contexts[q],
                **{k: (None if np.isnan(v[q]) else float(v[q])) for k, v in res.metrics.items()},
            }
        for pol, rr in (reader_recs or {}).items():
            keep = {k: rr[q][k] for k in ("prompt_hash", "raw", "parsed", "correct", "unparsed")}
            rec["policies"].setdefault(pol, {})["reader"] = keep
        recs.append(rec)
    return recs
