"""Cross-fitting the action router: one fold router per fold, saved beside the level router.

``<checkpoint>/<ladder>/actions/fold<k>/`` holds each fold's :class:`ActionRouter`;
``actions/folds.json`` (written last) the run id, the folds' test/train/val question ids and the
action space. Evaluation reloads the folds and predicts every question's utilities with the
router that never saw it, and each fold's validation questions with that fold's router (where
the cost weight lambda is calibrated).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError
from mogg.core.bounded import read_json
from mogg.routing.fitting.folds import CrossFit, make_folds
from mogg.routing.fitting.kfold import RouterTrainingError, _digest
from mogg.routing.plans import ActionSpace
from mogg.run.budget.actions import NODE
from mogg.run.budget.actions.fit import FIT_CODE, fit_action_routers
from mogg.run.budget.actions.scorer import ActionRouter

log = logging.getLogger(__name__)


@dataclass
class ActionFolds:
    """Out-of-fold utilities [Q, A], the fold of every question, and per fold its validation rows
    with that fold's predictions on them (for lambda calibration)."""

    space: ActionSpace
    util: np.ndarray
    fold: np.ndarray
    val: list[tuple[np.ndarray, np.ndarray]]  # per fold: (rows, util [n_val, A])
    info: dict


def crossfit_actions(xq: np.ndarray, xa: np.ndarray, y: np.ndarray, space: ActionSpace, query_ids: list[str],
                     n_folds: int, seed: int, kind, val_fraction: float, out_dir: Path,
                     data_key: str = "", store: Path | None = None) -> dict:
    """Train one action router per fold under ``kind``'s knobs (:class:`mogg.run.budget.actions.ActionRouterKind`),
    all folds as one stacked fit (:func:`mogg.run.budget.actions.fit.fit_action_routers`), into ``out_dir/fold<k>``; ``folds.json``
    last. Folds and validation slices are drawn exactly as the level router's
    (:mod:`mogg.routing.fitting.kfold`). ``store``: the artifact store, where finished folds are kept by
    run id and reused by any run that needs the same ones (:class:`mogg.routing.fitting.folds.CrossFit`)."""
    key = action_key(xq, xa, y, space, n_folds, seed, kind, val_fraction, data_key)
    cf = CrossFit(Path(out_dir), key, len(xq), n_folds, seed, val_fraction, store)
    out_dir, run_id = cf.out_dir, cf.run_id
    done = cf.finished("action router", query_ids, lambda d, k: _check_fold(d, k, cf.run_id))
    if done is not None:
        return done
    splits = [cf.split(k) for k in range(n_folds)]
    try:  # every fold in one stacked fit, each equal to the fold fitted alone
        routers = fit_action_routers(xq, xa, y, [t for t, _ in splits], [v for _, v in splits],
                                     [seed + k for k in range(n_folds)], kind)
    except FloatingPointError as e:
        k = getattr(e, "index", None)
        where = f"fold {k} ({out_dir / f'fold{k}'})" if k is not None else f"({out_dir})"
        raise RouterTrainingError(f"action router {where} failed: {e}") from e
    for k, (r, (train, val)) in enumerate(zip(routers, splits)):
        r.save(out_dir / f"fold{k}", {"fold": k, "run_id": run_id, "space": space.to_json()})
        log.info("action fold %d: %d train / %d val / %d test, %d epochs, best val loss %.4f", k, len(train), len(val),
                 len(cf.test(k)), r.summary["epochs"], r.summary["best_val_loss"])
    return cf.finish(query_ids, space=space.to_json())


def _check_fold(d: Path, k: int, run_id: str) -> None:
    """A stored fold directory that loads (whole weights) and says it is fold ``k`` of ``run_id``."""
    _, spec = ActionRouter.load(d)
    if spec.get("fold") != k or spec.get("run_id") != run_id:
        raise ArtifactError(f"{d} holds fold {spec.get('fold')} of run {spec.get('run_id')}, not fold {k} of {run_id}")


def action_key(xq: np.ndarray, xa: np.ndarray, y: np.ndarray, space: ActionSpace, n_folds: int, seed: int,
               kind, val_fraction: float, data_key: str = "") -> dict:
    """What an action-router cross-fit depends on (its run id hashes it; ``folds.json`` keeps it):
    the data, folds, seed, the fit's knobs (every field of ``kind``) and code, the action space, the
    validation share."""
    fold = make_folds(len(xq), n_folds, seed)
    return {"data_key": data_key, "n_folds": n_folds, "seed": seed, "fit": kind.knobs(), "code": FIT_CODE,
            "space": space.to_json(), "val_fraction": val_fraction,
            "data": _digest(xq, xa.astype(np.float32), np.nan_to_num(y, nan=-1.0), fold)}


def predict_action_folds(xq: np.ndarray, xa: np.ndarray, query_ids: list[str], out_dir: Path,
                         space: ActionSpace, expected: dict | None = None, retrain: str = "") -> ActionFolds:
    """Out-of-fold utilities for every question and each fold's validation predictions."""
    out_dir = Path(out_dir)
    path = out_dir / "folds.json"
    if not path.is_file():
        raise FileNotFoundError(f"no finished action-router cross-fit in {out_dir}: run `python train.py` with the same overrides")
    info = read_json(path)
    if expected is not None:  # trained with the settings, folds, seed and data this evaluation asks for?
        from mogg.routing.fitting.folds import check_run

        check_run(path, info, expected, retrain or "python train.py with the same overrides", {"fit": NODE})
    if ActionSpace.from_json(info["space"]) != space:
        raise ArtifactError(f"{path}: trained on actions {info['space']}, but this run's are {space.to_json()}; retrain")
    pos = {q: i for i, q in enumerate(query_ids)}
    util = np.full((len(query_ids), space.n), np.nan)
    fold = np.full(len(query_ids), -1, dtype=np.int64)
    val = []
    for k, f in enumerate(info["folds"]):
        r, spec = ActionRouter.load(out_dir / f"fold{k}")
        if spec.get("run_id") != info["run_id"]:
            raise ArtifactError(f"{out_dir / f'fold{k}'} belongs to another run than {path}: rerun `python train.py`")
        if spec.get("fold") != k:  # a fold scored on the questions it was trained on
            raise ArtifactError(f"{out_dir / f'fold{k}'} holds fold {spec.get('fold')}'s router, not fold {k}'s: "
                                "rerun `python train.py`")
        rows = np.array([pos[q] for q in f["test"] if q in pos], dtype=np.int64)
        vrows = np.array([pos[q] for q in f["val"] if q in pos], dtype=np.int64)
        if len(rows):
            util[rows] = r.utilities(xq[rows], xa[rows])
            fold[rows] = k
        val.append((vrows, r.utilities(xq[vrows], xa[vrows]) if len(vrows) else np.zeros((0, space.n))))
    if (fold < 0).any():
        raise ValueError(f"{(fold < 0).sum()} questions have no held-out action router in {out_dir}")
    return ActionFolds(space, util, fold, val, info)
