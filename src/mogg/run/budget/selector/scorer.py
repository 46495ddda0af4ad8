"""The evidence selector's scorer: gradient-boosted trees (LightGBM) over each candidate unit's
features (:mod:`mogg.run.budget.selector.candidates`) regressing its evidence density (gold-evidence tokens
per token), cross-fitted like the routers.

``crossfit_selector`` fits one model per fold on the candidates of the fold's training questions,
early stopping on its validation questions' candidates, and saves them under
``<checkpoint>/<ladder>/selector/fold<k>/`` as LightGBM's own text format (``model.txt``: no
pickle) with ``selector.json`` (features, parameters, the evidence-length estimate ``E`` of its
training questions, the fit summary); ``folds.json`` (written last) holds the run id and its key,
and the folds' question ids. ``predict_selector_folds`` gives every candidate's out-of-fold
prediction and each fold's predictions on its validation questions (where the selection's cost
weight is calibrated). Each candidate is weighted by its share of its question's candidate tokens,
so a question counts once whatever its number of candidates (a 4,000-token paper holds hundreds).
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, atomic_path, strict_json
from mogg.core.progress import Heartbeat, progress_disabled
from mogg.routing.fitting.folds import CrossFit, check_run, make_folds

log = logging.getLogger(__name__)

PARAMS = {"n_estimators": 400, "learning_rate": 0.05, "num_leaves": 31, "min_child_samples": 40, "max_bin": 63,
          "subsample": 1.0, "colsample_bytree": 1.0, "reg_lambda": 0.0}
EARLY_STOP = 30  # rounds without a better validation loss


@dataclass
class SelectorFolds:
    """Out-of-fold predictions [N] for every candidate, each question's fold, and per fold its
    validation questions with that fold's predictions on their candidates (rows into the candidates)."""

    pred: np.ndarray
    fold: np.ndarray
    val: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # per fold: (val questions, candidate rows, predictions)
    evidence_len: list[float]  # per fold: the median evidence tokens of its training questions
    info: dict


def _weights(q: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    total = np.bincount(q, weights=tokens)
    return tokens / np.maximum(total[q], 1.0)


# set by mogg for every fit (the seed, determinism, threads, quiet logs, the regression objective)
_SET_HERE = {"random_state", "seed", "deterministic", "force_col_wise", "n_jobs", "num_threads", "verbose", "verbosity",
             "objective", "boosting_type"}


def check_params(params: dict, where: str = "frontier.routers.selector.params") -> dict:
    """LightGBM knobs checked before any fit (an unknown one would be ignored, a bad value would fail
    minutes later): every name one LightGBM knows (its parameters and their aliases), none that mogg
    sets itself, plain values, and the values LightGBM accepts (a one-round fit on a toy problem)."""
    import inspect
    import os
    import sys

    import lightgbm as lgb

    aliases = lgb.basic._ConfigAliases._get_all_param_aliases()
    known = {a for name, al in aliases.items() for a in (name, *al)}
    known |= set(inspect.signature(lgb.LGBMRegressor.__init__).parameters) - {"self", "kwargs"}
    rounds = {"num_iterations", *aliases.get("num_iterations", ())}
    for k, v in params.items():
        if k not in known:
            raise ValueError(f"{where}.{k} is not a LightGBM knob (e.g. {', '.join(PARAMS)})")
        if k in _SET_HERE or k in {a for n in _SET_HERE for a in aliases.get(n, ())}:
            raise ValueError(f"{where}.{k}: set by mogg for every fit (the seed, threads, objective); remove it")
        if not (v is None or isinstance(v, (bool, int, float, str))):
            raise ValueError(f"{where}.{k}={v!r}: a LightGBM knob takes a number, a string or a boolean")
        if k in rounds and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{where}.{k}={v!r}: the number of trees must be an integer >= 1")
    trial = {k: v for k, v in {**PARAMS, **params}.items() if k not in rounds}
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 3)), rng.random(64)
    devnull = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(devnull, 2)  # LightGBM prints its own "[Fatal]" line before raising: the error below says it
        try:
            lgb.train({**trial, "objective": "regression", "verbose": -1, "num_threads": 1},
                      lgb.Dataset(x, label=y), num_boost_round=1)
        except lgb.basic.LightGBMError as e:
            raise ValueError(f"{where}: LightGBM refuses {params} ({str(e).split(' at ')[0].strip()})") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    return dict(params)


def _model(params: dict, seed: int, threads: int | None):
    import lightgbm as lgb

    return lgb.LGBMRegressor(**{**PARAMS, **params}, random_state=seed, deterministic=True, force_col_wise=True,
                             # the job's threads: the trees are the same for any count (deterministic=True;
                             # only the saved model's num_threads line differs), ~1.7x faster on 2 cores
                             n_jobs=threads or 1, verbose=-1)


def fit_scorer(x: np.ndarray, y: np.ndarray, w: np.ndarray, rtr: np.ndarray, rva: np.ndarray, params: dict, seed: int,
               threads: int | None = None):
    """One scorer (LightGBM regressor) on candidate rows ``rtr`` of ``x`` [N, F] with targets ``y``
    and weights ``w`` [N], early stopping on rows ``rva`` (none: every tree of ``n_estimators``)."""
    m = _model(params, seed, threads)
    heart = Heartbeat(log)  # a batch log hears from a long fit every 15 s

    def beat(env) -> None:
        heart.beat(lambda: f"selector scorer: tree {env.iteration + 1} of at most {env.end_iteration}")

    fit_kw = {"callbacks": [beat]}
    if len(rva):
        import lightgbm as lgb

        fit_kw = {"eval_set": [(x[rva], y[rva])], "eval_sample_weight": [w[rva]],
                  "callbacks": [lgb.early_stopping(EARLY_STOP, verbose=False), beat]}
    with warnings.catch_warnings():  # eval_set: deprecated in LightGBM 4.6+, the only form 4.0-4.5 know
        warnings.filterwarnings("ignore", message=".*'eval_set' is deprecated")
        m.fit(x[rtr], y[rtr], sample_weight=w[rtr], **fit_kw)
    return m


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
    w = _weights(cand_q, tokens.astype(float))
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


def load_scorer(d: Path):
    """A fold's scorer (LightGBM booster) and its spec."""
    import lightgbm as lgb

    d = Path(d)
    try:
        spec = json.loads((d / "selector.json").read_text())
        booster = lgb.Booster(model_file=str(d / "model.txt"))
    except (OSError, ValueError, json.JSONDecodeError) as e:
        raise ArtifactError(f"{d}: not a selector fold ({e}); retrain with `python train.py`") from None
    return booster, spec


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
