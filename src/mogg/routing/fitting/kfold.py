"""Fitting routers: k-fold cross-fitting for in-set evaluation, and one final router to apply.

``crossfit`` trains one router per fold on the other folds (minus a seeded validation slice used
for early stopping and for tuning the fallback margin) and routes each question only with the
router that never saw it. ``fit_all`` trains the router a user deploys or transfers to another
question set. Both save :class:`mogg.routing.router_dir.TrainedRouter` directories.

A cross-fit run is stamped with a run id (data key, folds, seed, settings, trainer); every fold's
router carries it and :func:`predict_crossfit` refuses folds from different runs, so a retrain
killed half-way can never be combined with the folds of an older one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, config_hash
from mogg.routing.fitting.folds import CrossFit, crossfit_key, split_train_val
from mogg.routing.inputs import objectives
from mogg.routing.kinds.base import RouterKind
from mogg.routing.networks.training import FitError, TrainerConfig, end_run
from mogg.routing.router_dir import Routing, TrainedRouter, question_hash

log = logging.getLogger(__name__)

def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:  # arrays by their bytes; a kind's other inputs by their fingerprint()
        h.update(np.ascontiguousarray(a).tobytes() if isinstance(a, (np.ndarray, list, tuple)) else a.fingerprint().encode())
    return h.hexdigest()


class RouterTrainingError(RuntimeError):
    """A router fit produced non-finite losses, weights or predictions (names the fold and directory)."""


@dataclass
class Fit:
    """One router to fit: rows ``train`` (early stopping and the fallback margin on ``val``), its
    seed and the ladder/recipe/provenance part of its spec."""

    train: np.ndarray
    val: np.ndarray
    seed: int
    spec: dict


def train_routers(
    x: np.ndarray,
    labels: np.ndarray,
    utilities: np.ndarray,
    questions: Sequence[str],
    fits: Sequence[Fit],
    settings: RouterKind,
    trainer: TrainerConfig,
    ckpt_dir: Path | None = None,
    logger=False,
) -> list[TrainedRouter]:
    """Fit every router in ``fits`` (the MLP kind: at once, as one stacked model).

    ``x`` router inputs (:meth:`RouterKind.router_inputs`: the feature matrix [Q, D] by default),
    ``labels`` [Q, L] soft labels, ``utilities`` [Q, L] the level scores the labels come from. Each
    router's targets are scaled on its own training rows; the kind trains the networks
    (:meth:`RouterKind.fit_networks`).
    """
    scales = [objectives.utility_scale(utilities[f.train]) for f in fits]
    targets = [objectives.targets(settings.objective, labels, utilities, sc) for sc in scales]
    trained = settings.fit_networks(x, targets, fits, trainer, ckpt_dir, logger, names=_column_names(fits[0].spec, x))
    return [_finish(net, summary, f, sc, x, labels, utilities, questions, settings, trainer, held_out=held)
            for (net, summary, held), f, sc in zip(trained, fits, scales)]


def _column_names(spec: dict, x) -> list[str] | None:
    """Input column names of a feature matrix ``x`` from a router spec's recipe and levels (None
    when it has no recipe, or ``x`` is another kind's inputs)."""
    from mogg.routing.inputs.features import FeatureRecipe

    if "recipe" not in spec or not isinstance(x, np.ndarray) or x.ndim != 2:
        return None
    width = x.shape[1]
    names = FeatureRecipe.from_json(spec["recipe"]).column_names(spec.get("levels"), width)
    return names if len(names) == width else None


def train_router(x: np.ndarray, labels: np.ndarray, utilities: np.ndarray, questions: Sequence[str], train: np.ndarray,
                 val: np.ndarray, settings: RouterKind, trainer: TrainerConfig, seed: int, spec: dict,
                 ckpt_dir: Path | None = None, logger=False) -> TrainedRouter:
    """Fit one router on rows ``train`` (early stopping and the fallback margin on ``val``)."""
    return train_routers(x, labels, utilities, questions, [Fit(train, val, seed, spec)], settings, trainer, ckpt_dir,
                         logger)[0]


def _finish(module, summary: dict, f: Fit, scale: float, x, labels, utilities, questions, settings: RouterKind,
            trainer: TrainerConfig, held_out: tuple[np.ndarray, np.ndarray] | None = None) -> TrainedRouter:
    """A trained network plus its decision rule (fallback level, margin tuned on ``f.val``, or on
    ``held_out``: rows and their outputs, when the kind tuned on others) and spec."""
    seen = np.r_[f.train, f.val]
    fallback = objectives.best_fixed_level(utilities[seen])
    router = TrainedRouter(module, {}, [])
    router.spec = {**f.spec, "network": module.hparams, "objective": settings.objective,
                   "temperature": settings.temperature, "utility_scale": scale}
    if settings.profiles:  # outputs are eq. 1 actions (profile, level), not levels
        router.spec["profiles"] = list(settings.profiles)
    val, z = held_out if held_out is not None else (f.val, router.logits(x[f.val]) if len(f.val) else None)
    if len(val):
        pref = objectives.preference(settings.objective, z)
        margin = objectives.tune_margin(objectives.advantage(pref, fallback), z.argmax(axis=1), utilities[val], fallback)
    else:
        margin = 0.0
        log.warning("no validation questions (trainer.val_fraction=0): the fallback margin is 0, not tuned")
    router.spec.update({
        "decision": {"rule": settings.decision, "fallback_level": fallback, "margin": margin},
        "prior": labels[f.train].mean(axis=0).tolist(),
        "training": {"seed": f.seed, "n_train": int(len(f.train)), "n_val": int(len(val)), **summary,
                     "optim": {"lr": settings.lr, "weight_decay": settings.weight_decay}, "trainer": asdict(trainer)},
    })
    router.train_question_hashes = sorted({question_hash(questions[i]) for i in seen})
    return router


def _fit_key(settings, trainer, seed, spec, x, t, rows) -> str:
    return config_hash({"settings": settings.key(), "trainer": asdict(trainer), "seed": seed, "spec": config_hash(spec),
                        "x": _digest(x[rows[0]], x[rows[1]]), "t": _digest(t[rows[0]], t[rows[1]]),
                        "rows": _digest(rows[0], rows[1])})


def _reuse(fdir: Path, fit_key: str) -> TrainedRouter | None:
    """The router already in ``fdir`` if it was trained under ``fit_key`` (a finished fold)."""
    if not (fdir / "router.json").is_file():
        return None
    try:
        r = TrainedRouter.load(fdir)
    except (ArtifactError, ValueError) as e:
        log.warning("%s is not reusable (%s): retraining", fdir, e)
        return None
    return r if r.spec.get("training", {}).get("fit_key") == fit_key else None


def crossfit(
    x: np.ndarray,
    labels: np.ndarray,
    utilities: np.ndarray,
    questions: Sequence[str],
    query_ids: list[str],
    n_folds: int,
    seed: int,
    settings: RouterKind,
    trainer: TrainerConfig,
    out_dir: Path,
    spec: dict,
    logger=False,
) -> dict:
    """Train one router per fold into ``out_dir/fold<k>/``; write ``out_dir/folds.json`` last.

    The folds train together as one stacked model (``logger`` gets every fold's losses). A rerun
    with the same run id skips finished folds and resumes interrupted ones (Lightning's
    ``last.ckpt`` under the unfinished folds' fit keys). A run with a new id removes the old ``folds.json``
    first, so nothing can combine its folds with the old run's until it has finished.
    """
    run_key = crossfit_key(spec.get("provenance", {}).get("data_key"), len(x), n_folds, seed, settings, trainer)
    cf = CrossFit(Path(out_dir), run_key, len(x), n_folds, seed, trainer.val_fraction)
    out_dir, run_id = cf.out_dir, cf.run_id
    if cf.path.is_file() and json.loads(cf.path.read_text()).get("run_id") != run_id:
        cf.path.unlink()  # an older run: unusable from here on (finished folds are still reused by their fit keys)
    scale = objectives.utility_scale(utilities)  # only for the fit key's targets
    t = objectives.targets(settings.objective, labels, utilities, scale)
    plan = []  # (k, test rows, Fit, fit key) per fold
    for k in range(n_folds):
        test = cf.test(k)
        train, val = cf.split(k)
        fspec = {**spec, "provenance": {**spec.get("provenance", {}),
                                        "fit": {"kind": "fold", "fold": k, "n_folds": n_folds, "run_id": run_id}}}
        plan.append((k, test, Fit(train, val, seed + k, fspec), _fit_key(settings, trainer, seed + k, fspec, x, t, (train, val))))
    routers = {k: _reuse(out_dir / f"fold{k}", key) for k, _, _, key in plan}
    for k in (k for k, r in routers.items() if r is not None):
        log.info("fold %d already trained (%s): skipped", k, out_dir / f"fold{k}")
    todo = [p for p in plan if routers[p[0]] is None]
    if todo:
        # all folds left to train as one stacked model; a resumable Lightning directory per set of folds
        lightning_dir = out_dir / ".lightning" / ("folds-" + config_hash([key for *_, key in todo]))
        log.info("training %d router fold(s) (%s)", len(todo), settings.kind_name)
        try:
            trained = train_routers(x, labels, utilities, questions, [f for _, _, f, _ in todo], settings, trainer,
                                    lightning_dir, logger=logger)
        except FloatingPointError as e:  # FitError names the router; bad inputs concern them all
            k = todo[getattr(e, "index", 0)][0]
            raise RouterTrainingError(f"router fold {k} ({out_dir / f'fold{k}'}) failed: {e}") from e
        finally:
            end_run(logger)  # the folds' run ends with their fit: the next logger starts its own
        for (k, test, f, key), router in zip(todo, trained):
            router.spec["training"]["fit_key"] = key
            router.save(out_dir / f"fold{k}")
            routers[k] = router
            log.info("fold %d: %d train / %d val / %d test, %s", k, len(f.train), len(f.val), len(test),
                     {key: router.spec["training"].get(key) for key in ("epochs", "best_val_loss")})
        shutil.rmtree(lightning_dir, ignore_errors=True)
    per_fold = [{"epochs": routers[k].spec["training"].get("epochs"),
                 "best_val_loss": routers[k].spec["training"].get("best_val_loss"), "decision": routers[k].decision}
                for k in range(n_folds)]
    return cf.finish(query_ids, per_fold, indent=1)


def fit_all(
    x: np.ndarray,
    labels: np.ndarray,
    utilities: np.ndarray,
    questions: Sequence[str],
    seed: int,
    settings: RouterKind,
    trainer: TrainerConfig,
    out_dir: Path,
    spec: dict,
    logger=False,
) -> TrainedRouter:
    """One router on all questions (minus the validation slice) saved to ``out_dir``."""
    out_dir = Path(out_dir)
    train, val = split_train_val(np.arange(len(x)), trainer.val_fraction, seed + 999)
    fspec = {**spec, "provenance": {**spec.get("provenance", {}), "fit": {"kind": "all"}}}
    router, fresh = fit_and_save(x, labels, utilities, questions, train, val, settings, trainer, seed, fspec, out_dir,
                                 "final router", logger)
    if fresh:
        log.info("final router: %d train / %d val questions -> %s", len(train), len(val), out_dir)
    return router


def fit_and_save(x: np.ndarray, labels: np.ndarray, utilities: np.ndarray, questions: Sequence[str], train: np.ndarray,
                 val: np.ndarray, settings: RouterKind, trainer: TrainerConfig, seed: int, spec: dict, out_dir: Path,
                 what: str, logger=False) -> tuple[TrainedRouter, bool]:
    """Train one router on rows ``train`` (early stopping on ``val``) and save it to ``out_dir``.

    An unchanged rerun (same fit key: settings, trainer, seed, spec, inputs, targets, rows) reuses the
    saved router. Returns ``(router, fresh)``; ``fresh`` is False when it was reused.
    """
    t = objectives.targets(settings.objective, labels, utilities, objectives.utility_scale(utilities))
    fit_key = _fit_key(settings, trainer, seed, spec, x, t, (train, val))
    router = _reuse(out_dir, fit_key)
    if router is not None:
        log.info("%s already trained (%s): skipped", what, out_dir)
        return router, False
    lightning_dir = out_dir.parent / ".lightning" / f"{out_dir.name}-{fit_key}"
    try:
        router = train_router(x, labels, utilities, questions, train, val, settings, trainer, seed, spec, lightning_dir,
                              logger)
    except FitError as e:
        raise RouterTrainingError(f"{what} ({out_dir}) failed: {e}") from e
    router.spec["training"]["fit_key"] = fit_key
    router.save(out_dir)
    shutil.rmtree(lightning_dir, ignore_errors=True)
    return TrainedRouter.load(out_dir), True


def predict_crossfit(x: np.ndarray, query_ids: list[str], out_dir: Path, run_id: str | None = None) -> Routing:
    """Out-of-fold decisions for every query (``Routing.fold`` says which router routed it).

    Refuses a query in no fold's test set (the checkpoint was trained on other questions), a fold
    whose router belongs to another run than ``folds.json`` (a half-finished retrain), and, with
    ``run_id``, a run other than the expected one.
    """
    out_dir = Path(out_dir)
    path = out_dir / "folds.json"
    if not path.is_file():
        raise FileNotFoundError(f"no finished cross-fit in {out_dir} (no folds.json): run `python train.py` with the same overrides")
    info = json.loads(path.read_text())
    if run_id is not None and info.get("run_id") != run_id:
        raise ArtifactError(f"{path} belongs to run {info.get('run_id')}, not {run_id}: retrain with the same overrides")
    pos = {q: i for i, q in enumerate(query_ids)}
    out: Routing | None = None
    for k, f in enumerate(info["folds"]):
        router = TrainedRouter.load(out_dir / f"fold{k}")
        fit = router.spec.get("provenance", {}).get("fit", {})
        if fit.get("run_id") != info.get("run_id") or fit.get("fold") != k:
            raise ArtifactError(
                f"{out_dir / f'fold{k}'} was trained by run {fit.get('run_id')} (fold {fit.get('fold')}), but folds.json "
                f"is run {info.get('run_id')}: a retrain was interrupted; rerun `python train.py` to finish it"
            )
        rows = np.array([pos[q] for q in f["test"] if q in pos], dtype=np.int64)
        if out is None:
            n_out, space = router.spec["network"]["n_levels"], router.profile_space  # outputs: levels, or eq. 1 actions
            out = Routing.empty(len(query_ids), space.n_levels if space is not None else n_out, n_out)
        if len(rows):
            out.put(rows, router.route(x[rows]), k)
    missing = [query_ids[i] for i in np.flatnonzero(out.fold < 0)[:5]]
    if missing:
        raise ValueError(f"{(out.fold < 0).sum()} queries have no held-out router in {out_dir} (e.g. {missing})")
    return out
