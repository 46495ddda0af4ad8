"""A run's routers on disk: where they live (``checkpoints/<run>/<ladder>/``), what their spec
records, and how an evaluation obtains each router policy's weights from them (this run's
cross-fit, or a router trained elsewhere and applied here).

It sits in the application layer, not in :mod:`mogg.routing`, because it reads the run config and
the prepared question set, both of which live above the routing layer.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from mogg.core.artifacts import ArtifactError, config_hash
from mogg.core.secrets import redact
from mogg.core.trusted import build
from mogg.evaluation import names as N
from mogg.prepared import Prepared
from mogg.routing.fitting.experts import load_router
from mogg.routing.fitting.folds import check_run, crossfit_key
from mogg.routing.fitting.kfold import predict_crossfit
from mogg.routing.inputs.features import compute_features
from mogg.routing.kinds.base import RouterKind, input_cost_ms
from mogg.routing.router_dir import Routing, TrainedRouter
from mogg.run.option_pairs import FIT_ALL_IN_SET
from mogg.selection import level_contexts, one_hot

log = logging.getLogger(__name__)


def router_settings(cfg: DictConfig) -> RouterKind:
    """The router's knobs from its config group (``_target_``)."""
    return instantiate(cfg.router)

def _artifacts(cfg: DictConfig) -> Path | None:
    return Path(cfg.paths.artifacts) if cfg.paths.get("artifacts") else None

def router_inputs(cfg: DictConfig, settings: RouterKind, prep: Prepared):
    """What this run's router reads for ``prep`` (its kind's :meth:`~RouterKind.router_inputs`)."""
    return settings.router_inputs(prep, _artifacts(cfg))

def retriever_node(cfg: DictConfig, ladder: str):
    """The retriever config of one ladder: ``retrievers.<ladder>`` when the run sets it (to compare
    retrievers on one ladder builder, e.g. BM25 vs dense vs hybrid), else ``retriever``."""
    per = cfg.get("retrievers") or {}
    return per[ladder] if ladder in per else cfg.retriever

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

def portable_config(node) -> dict | None:
    """A config node as plain data with secrets redacted and machine-local paths dropped (it is
    written into router directories and hashed into their fit keys)."""
    return _portable(redact(OmegaConf.to_container(node, resolve=True))) if node is not None else None

def router_spec(cfg: DictConfig, name: str, prep: Prepared, transfer: bool = False) -> dict:
    """The part of a router's spec that comes from the data: levels, feature recipe, the ladder and
    retriever it expects, where its training data came from, and the components' configs (so
    the route CLI can rebuild the ladder and retriever from the router directory alone);
    ``transfer``: a router trained on other sets (``train_sources``) holds no corpus (a scorer and
    a recipe): ``mogg-route --corpus`` names the one it routes (:mod:`mogg.run.route_corpus`)."""
    datasets = sorted({it.dataset for it in prep.items if it.dataset}) or ["questions"]
    return {
        "levels": prep.ladder.level_names,
        "recipe": prep.recipe.to_json(),
        "compat": {"ladder_key": prep.ladder_key, "retriever": prep.retriever_config, "k_r": prep.k_r},
        "provenance": {
            "questions_name": "+".join(datasets), "questions": prep.questions_fingerprint,
            "n_questions": len(prep.items), "data_key": prep.data_key, "labels": portable_config(cfg.labels),
            "run_name": cfg.run_name, "ladder_name": name, "run": run_stamp(cfg),
        },
        "components": {"corpus": None if transfer else portable_config(cfg.corpus), "ladder": portable_config(cfg.ladders[name]),
                       "retriever": portable_config(retriever_node(cfg, name)), "encoder": portable_config(cfg.get("encoder")), "k": cfg.k,
                       "max_context_tokens": cfg.get("max_context_tokens"),
                       # the training machine's data folder: mogg-route re-roots corpus files under
                       # another machine's MOGG_DATA_DIR (the same setting train.py reads)
                       "data_dir": str(Path(cfg.paths.data_dir).resolve())},
    }

FINAL = "final"


def run_stamp(cfg: DictConfig) -> dict:
    """What a run's routers were trained under (settings, trainer, seed): saved in every router's
    spec so an evaluation of the same run can refuse routers trained under other settings."""
    from dataclasses import asdict

    return {"settings": router_settings(cfg).key(), "trainer": asdict(instantiate(cfg.trainer)), "seed": cfg.seed}

def source_dir(name: str) -> str:
    """The folder (under ``<run>/<ladder>/``) of the router trained on one source only."""
    return f"{FINAL}@{name}"

def source_nodes(cfg: DictConfig) -> dict[str, dict]:
    """``train_sources`` as name -> {questions, corpus (None: the run's), weight}; checked here,
    before anything is prepared, so a typo fails in a second."""
    raw = cfg.get("train_sources") or {}
    _check_sources_override(raw)
    out = {}
    for name, node in raw.items():
        if not isinstance(node, DictConfig) or node.get("questions") is None:
            raise ValueError(f"train_sources.{name} needs a questions node: on the command line "
                             f"+questions@train_sources.{name}.questions=pubmedqa (in an experiment file's defaults: "
                             f"- /questions@train_sources.{name}.questions: pubmedqa)")
        weight = node.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise ValueError(f"train_sources.{name}.weight must be a number > 0, got {weight!r}")
        out[str(name)] = {"questions": node.questions, "corpus": node.get("corpus"), "weight": float(weight)}
    if out and cfg.get("train_questions") is not None:
        raise ValueError("set train_questions (one set over this corpus) or train_sources (several), not both")
    seen: dict[str, str] = {}
    for name, n in out.items():  # one question set under two names would be trained on twice
        same = config_hash([OmegaConf.to_container(n["questions"], resolve=True),
                            OmegaConf.to_container(n["corpus"], resolve=True) if n["corpus"] is not None else None])
        if same in seen:
            raise ValueError(f"train_sources.{seen[same]} and train_sources.{name} are the same question set over the same "
                             "corpus: it would be trained on twice; give it once (its weight sets how much it counts)")
        seen[same] = name
    return out


def _check_sources_override(composed) -> None:
    """``train_sources={...}`` on the command line merges into an experiment's map (Hydra merges maps):
    ``train_sources={}`` would keep every source silently. Refused where the composed map holds
    sources the override did not name, with the override that does what was meant."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    import yaml

    for o in HydraConfig.get().overrides.task:
        key, eq, value = str(o).partition("=")
        if not eq or key.lstrip("+~") != "train_sources" or key.startswith("~"):
            continue
        try:
            given = yaml.safe_load(value)
        except yaml.YAMLError:
            continue
        extra = sorted(set(composed or {}) - set(given or {})) if isinstance(given, dict) or given is None else []
        if extra:
            raise ValueError(f"{o}: Hydra merges it into the experiment's train_sources, which still holds "
                             f"{', '.join(extra)}; to drop them give ~train_sources (no sources: this set's own "
                             "questions) and add yours as +questions@train_sources.<name>.questions=...")

def applied_dirs(cfg: DictConfig, settings: RouterKind, name: str) -> dict[str, Path]:
    """Policy name -> router directory of every router trained elsewhere that this run applies
    (``router.checkpoint`` is resolved by the caller): the final router when it was trained on
    ``train_questions``/``train_sources``, and each single-source router beside it."""
    if settings.checkpoint or settings.fit not in ("all", "both"):
        return {}
    nodes = source_nodes(cfg)
    if not nodes and cfg.get("train_questions") is None:
        return {}
    d = checkpoint_dir(cfg, name)
    out = {N.TRANSFER: d / FINAL}
    if len(nodes) > 1:
        out.update({N.transfer_from(s): d / source_dir(s) for s in nodes})
    return out

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
    settings = router_settings(cfg)
    expected = crossfit_key(prep.data_key, len(prep.items), cfg.n_folds, cfg.seed, settings, instantiate(cfg.trainer))
    check_run(d / "folds.json", _json(d / "folds.json"), expected, retrain_command(cfg))
    x = router_inputs(cfg, settings, prep)
    t0 = time.perf_counter()
    r = predict_crossfit(x, prep.query_ids, d, run_id=config_hash(expected))
    r.cost_ms = routing_cost(x, time.perf_counter() - t0, len(prep.items))
    return r

def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path}: corrupt ({e}); retrain with `python train.py` and the same overrides") from None


def retrain_command(cfg: DictConfig, script: str = "train.py") -> str:
    """The command that trains what this run asks for: ``python train.py`` with this job's overrides
    (secrets redacted; the run name as resolved, so a sweep's job names its own run)."""
    import shlex

    from mogg.core.secrets import redact_config

    try:
        from hydra.core.hydra_config import HydraConfig

        task = [str(o) for o in HydraConfig.get().overrides.task]
    except ValueError:  # not inside a Hydra job (tests, the Python API)
        task = []
    task = [o for o in task if not o.lstrip("+~").startswith(("run_name=", "use_router="))]
    return " ".join(["python", script, *(shlex.quote(o) for o in redact_config(task)), f"run_name={cfg.run_name}"])


def routing_cost(x, network_s: float, n: int) -> dict:
    """Routing ms per question: the network's, and what reading its inputs took (by the inputs)."""
    return {"network_ms": round(1000 * network_s / max(n, 1), 3), **input_cost_ms(x, n)}

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

def applied_routers(cfg: DictConfig, settings: RouterKind, name: str, prep: Prepared) -> dict[str, TrainedRouter]:
    """Policy name -> router trained elsewhere that this evaluation applies: ``router.checkpoint``,
    or this run's final router(s) when trained on ``train_questions``/``train_sources``
    (:func:`mogg.run.transfer_stage.applied_dirs`)."""
    dirs = {N.TRANSFER: resolve_router_dir(settings.checkpoint, name)} if settings.checkpoint else \
        applied_dirs(cfg, settings, name)
    out = {pol: load_applied(d, settings, prep) for pol, d in dirs.items()}
    if not settings.checkpoint:  # this run's own final routers: trained under this run's settings?
        expected = run_stamp(cfg)
        for pol, r in out.items():
            found = {"run_id": config_hash(r.spec.get("provenance", {}).get("run"))}
            if "run" in r.spec.get("provenance", {}):
                found["key"] = r.spec["provenance"]["run"]
            check_run(dirs[pol], found, expected, retrain_command(cfg))
    return out

def load_applied(d: Path, settings: RouterKind, prep: Prepared) -> TrainedRouter:
    """A router trained elsewhere, checked against the ladder, retriever and k_r, and refused on
    questions it was trained on (unless ``router.allow_overlap``)."""
    router = load_router(d)
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
    x = router.inputs(lambda: _recipe_features(cfg, router, prep), prep.questions,
                      lambda: level_contexts(prep.ladder, prep.fixed), _artifacts(cfg))
    t0 = time.perf_counter()
    r = router.route(x)
    r.cost_ms = routing_cost(x, time.perf_counter() - t0, len(prep.items))
    return r

def _recipe_features(cfg: DictConfig, router: TrainedRouter, prep: Prepared):
    recipe = router.recipe
    # a router directory is data (router.checkpoint may be anyone's): only a mogg encoder is built from it
    where = f"{router.spec.get('_dir', 'the router')}/router.json"
    encoder = build(recipe.encoder, where, "recipe.encoder", _artifacts(cfg)) if recipe.needs_embeddings else None
    return compute_features(recipe, prep.hits, prep.ladder, prep.questions, encoder, _artifacts(cfg))

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
    applied = applied_routers(cfg, settings, name, prep)
    transfer = applied.get(N.TRANSFER)
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
            routings[N.ROUTER] = r
            weights[N.ROUTER] = r.weights
            weights[N.other_rule(N.ROUTER, other)] = r.argmax_weights if other == "argmax" else r.fallback_weights
            weights[N.PRIOR] = r.prior
    elif transfer is None:  # option_pairs.check_evaluable refuses this before any work; kept for other callers
        raise ValueError(FIT_ALL_IN_SET)
    if transfer is not None:
        t = route_prepared(cfg, transfer, prep)
        t.weights = t.fallback_weights if settings.decision == "fallback" else t.argmax_weights
        routings[N.TRANSFER] = t
        weights[N.TRANSFER] = t.weights
        weights[N.other_rule(N.TRANSFER, other)] = t.argmax_weights if other == "argmax" else t.fallback_weights
        fb_at, space = transfer.decision["fallback_level"], transfer.profile_space
        weights[N.SOURCE_BEST_FIXED] = space.weights(np.full(len(prep.items), fb_at)) if space is not None else \
            one_hot(np.full(len(prep.items), fb_at), prep.ladder.n_levels)
        fb_name = (space.names(prep.ladder.level_names) if space is not None else prep.ladder.level_names)[fb_at]
        for pol, r in applied.items():
            if pol != N.TRANSFER:  # a single-source router of a multi-source run
                rt = route_prepared(cfg, r, prep)
                routings[pol] = rt
                weights[pol] = rt.fallback_weights if settings.decision == "fallback" else rt.argmax_weights
        notes += transfer.spec.get("_notes", [])
        notes += [f"{name}: {n}" for n in transfer.route_notes()]  # e.g. source experts' support check
        notes.append(
            f"{name}: mog_transfer is the router in {transfer.spec['_dir']} trained on {transfer.source_name} "
            f"({transfer.spec['provenance']['n_questions']} questions, objective {transfer.objective}); "
            f"source_best_fixed is {fb_name}, the best fixed {'action' if space is not None else 'level'} on "
            f"{transfer.source_name}"
        )
    for pol, r in routings.items():  # logged, not in the report: wall-clock time would make reports differ per run
        if r.cost_ms:
            c = r.cost_ms
            extra = "".join(f" + {v:.1f} ms reading its inputs ({k.removesuffix('_ms')})" for k, v in c.items()
                            if k != "network_ms")
            log.info("%s: %s routing cost %.3f ms per question (router network)%s", name, pol, c["network_ms"], extra)
    return weights, routings, notes
