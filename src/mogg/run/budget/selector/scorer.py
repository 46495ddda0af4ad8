"""The evidence selector's scorer, the model that scores: gradient-boosted trees (LightGBM) over each
candidate unit's features (:mod:`mogg.run.budget.selector.candidates`) regressing its evidence density
(gold-evidence tokens per token): its LightGBM knobs checked (:func:`check_params`), one fit
(:func:`fit_scorer`), a fold's saved model read back (:func:`load_scorer`). Its cross-fit is
:mod:`mogg.run.budget.selector.folds`. Each candidate is weighted by its share of its question's
candidate tokens (:func:`candidate_weights`), so a question counts once whatever its number of
candidates (a 4,000-token paper holds hundreds).
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError
from mogg.core.progress import Heartbeat

log = logging.getLogger(__name__)

PARAMS = {"n_estimators": 400, "learning_rate": 0.05, "num_leaves": 31, "min_child_samples": 40, "max_bin": 63,
          "subsample": 1.0, "colsample_bytree": 1.0, "reg_lambda": 0.0}
EARLY_STOP = 30  # rounds without a better validation loss


def candidate_weights(q: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Each candidate's share of its question's candidate tokens (``q`` [N] its question, ``tokens``
    [N]): a question counts once in a fit, whatever its number of candidates."""
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
