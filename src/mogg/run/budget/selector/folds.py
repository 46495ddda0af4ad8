"""Cross-fitting the evidence selector, like the routers: one scorer (:mod:`mogg.run.budget.selector.scorer`)
per fold, saved beside the level router.

:func:`crossfit_selector` fits one model per fold on the candidates of the fold's training questions,
early stopping on its validation questions' candidates, and saves them under
``<checkpoint>/<ladder>/selector/fold<k>/`` as LightGBM's own text format (``model.txt``: no
pickle) with ``selector.json`` (features, parameters, the evidence-length estimate ``E`` of its
training questions, the fit summary); ``folds.json`` (written last) holds the run id and its key,
and the folds' question ids. :func:`predict_selector_folds` gives every candidate's out-of-fold
prediction and each fold's predictions on its validation questions (where the selection's cost
weight is calibrated).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, atomic_path, strict_json
from mogg.core.progress import progress_disabled
from mogg.routing.fitting.folds import CrossFit, check_run, make_folds
from mogg.run.budget.selector.scorer import PARAMS, candidate_weights, fit_scorer, load_scorer

log = logging.getLogger(__name__)


@dataclass
class SelectorFolds:
    """Out-of-fold predictions [N] for every candidate, each question's fold, and per fold its
    validation questions with that fold's predictions on their candidates (rows into the candidates)."""

    pred: np.ndarray
    fold: np.ndarray
    val: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per fold: (val questions, candidate rows, predictions)
    evidence_len: list[float]  # per fold: the median evidence tokens of its training questions
    info: dict


def selector_key(x: np.ndarray, y: np.ndarray, cand_q: np.ndarray, n_questions: int, n_folds: int, seed: int,
                 params: dict, val_fraction: float, data_key: str) -> dict:
    """What a selector cross-fit depends on (its run id hashes it)."""
    from mogg.routing.fitting.kfold import _digest

    return {"data_key": data_key, "n_folds": n_folds, "seed": seed, "params": {**PARAMS, **params},
            "val_fraction": val_fraction, "code": "lgbm-1",
            "data": _digest(x.astype(np.float32), np.nan_to_num(y, nan=-1.0), cand_q, make_folds(n_questions, n_folds, seed))}


def crossfit_selector(x: np.ndarray, y: np.ndarray, tokens: np.ndarray, cand_q: np.ndarray, evidence_len: np.ndarray,
                      query_ids: list[str], n_folds: int, seed: int, params: dict, val_fraction: float, out_dir: Path,
                      data_key: str = "", threads: int | None = None) -> dict:
    """Fit one scorer per fold into ``out_dir/fold<k>``; ``folds.json`` last. ``x`` [N, F] features
    and ``y`` [N] evidence density of every candidate (NaN: its question has no evidence),
    ``tokens`` [N], ``cand_q`` [N] their questions, ``evidence_len`` [Q] each question's evidence tokens."""
    n_q = len(query_ids)
    key = selector_key(x, y, cand_q, n_q, n_folds, seed, params, val_fraction, data_key)
    cf = CrossFit(Path(out_dir), key, n_q, n_folds, seed, val_fraction)
    out_dir, run_id = cf.out_dir, cf.run_id
    done = cf.finished("selector")
    if done is not None:
        return done
    has = ~np.isnan(y)
    w = candidate_weights(cand_q, tokens.astype(float))
    from tqdm.auto import tqdm

    for k in tqdm(range(n_folds), desc="selector folds", unit="fold", leave=False, disable=progress_disabled()):  # a few folds: one model each
        train, val = cf.split(k)
        rtr = np.flatnonzero(np.isin(cand_q, train) & has)
        rva = np.flatnonzero(np.isin(cand_q, val) & has)
        if not len(rtr):
            raise ValueError("no training question with gold evidence: the selector needs evidence labels")
        m = fit_scorer(x, y, w, rtr, rva, params, seed + k, threads)
        e_len = float(np.median(evidence_len[train][~np.isnan(evidence_len[train])])) if len(train) else 0.0
        d = out_dir / f"fold{k}"
        d.mkdir(parents=True, exist_ok=True)
        with atomic_path(d / "model.txt") as tmp:
            m.booster_.save_model(str(tmp), num_iteration=m.best_iteration_ or None)
        spec = {"fold": k, "run_id": run_id, "params": {**PARAMS, **params}, "evidence_len": e_len,
                "n_features": int(x.shape[1]), "best_iteration": int(m.best_iteration_ or m.n_estimators),
                "n_train_candidates": int(len(rtr)), "n_val_candidates": int(len(rva))}
        with atomic_path(d / "selector.json") as tmp:
            tmp.write_text(strict_json(spec, indent=1))
        log.info("selector fold %d: %d / %d candidates, %d trees, E = %.0f tokens", k, len(rtr), len(rva),
                 spec["best_iteration"], e_len)
    return cf.finish(query_ids)


def predict_selector_folds(x: np.ndarray, cand_q: np.ndarray, query_ids: list[str], out_dir: Path,
                           expected: dict | None = None, retrain: str = "") -> SelectorFolds:
    """Every candidate's out-of-fold prediction and each fold's predictions on its validation questions."""
    out_dir = Path(out_dir)
    path = out_dir / "folds.json"
    if not path.is_file():
        raise FileNotFoundError(f"no finished selector cross-fit in {out_dir}: run `python train.py` with the same overrides")
    info = json.loads(path.read_text())
    if expected is not None:
        check_run(path, info, expected, retrain or "python train.py with the same overrides")
    pos = {q: i for i, q in enumerate(query_ids)}
    pred = np.full(len(cand_q), np.nan)
    fold = np.full(len(query_ids), -1, dtype=np.int64)
    val, e_lens = [], []
    for k, f in enumerate(info["folds"]):
        booster, spec = load_scorer(out_dir / f"fold{k}")
        if spec.get("run_id") != info["run_id"]:
            raise ArtifactError(f"{out_dir / f'fold{k}'} belongs to another run than {path}: rerun `python train.py`")
        test = np.array([pos[q] for q in f["test"] if q in pos], dtype=np.int64)
        vq = np.array([pos[q] for q in f["val"] if q in pos], dtype=np.int64)
        fold[test] = k
        rows = np.flatnonzero(np.isin(cand_q, test))
        if len(rows):
            pred[rows] = booster.predict(x[rows])
        vrows = np.flatnonzero(np.isin(cand_q, vq))
        val.append((vq, vrows, booster.predict(x[vrows]) if len(vrows) else np.zeros(0)))
        e_lens.append(float(spec["evidence_len"]))
    if (fold < 0).any():
        raise ValueError(f"{(fold < 0).sum()} questions have no held-out selector in {out_dir}")
    return SelectorFolds(pred, fold, val, e_lens, info)
