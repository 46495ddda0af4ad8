"""Folds, and what a trained run depends on: the refusal of routers trained under anything else.

:func:`make_folds` splits a question set into seeded, balanced folds (cross-fitting: every question
is routed by a router that never saw it) and :func:`split_train_val` a fold's training rows into
training and validation rows. A cross-fit's run id hashes :func:`crossfit_key` (data key, folds, seed, router settings, trainer);
``folds.json`` keeps the key itself, so an evaluation that recomputes it from its own config can
name what differs (:func:`check_run`) and print the command that retrains: evaluating routers under
settings they were not trained with would report one run's numbers as another's.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, config_hash, diff_fields

log = logging.getLogger(__name__)


def make_folds(n: int, n_folds: int, seed: int) -> np.ndarray:
    """Fold index per query (int64 [n]), seeded and balanced."""
    if n_folds < 2:
        raise ValueError("n_folds must be >= 2 (cross-fitting never evaluates on training queries)")
    if n < n_folds:
        raise ValueError(f"{n} queries cannot make {n_folds} folds")
    perm = np.random.default_rng(seed).permutation(n)
    fold = np.empty(n, dtype=np.int64)
    fold[perm] = np.arange(n) % n_folds
    return fold


def split_train_val(idx: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded disjoint (train, val) split of index array ``idx``."""
    perm = np.random.default_rng(seed).permutation(idx)
    n_val = int(round(len(idx) * val_fraction))
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def fold_digest(n: int, n_folds: int, seed: int) -> str:
    """sha256 of the fold assignment (the bytes ``crossfit._digest`` hashes for one array)."""
    return hashlib.sha256(np.ascontiguousarray(make_folds(n, n_folds, seed)).tobytes()).hexdigest()


def crossfit_key(data_key: str | None, n: int, n_folds: int, seed: int, settings, trainer) -> dict:
    """What a cross-fit's routers depend on (hashed into its run id, saved in ``folds.json``): an
    evaluation recomputes it from its own config and refuses routers trained under another."""
    return {"data_key": data_key, "n_folds": n_folds, "seed": seed, "settings": settings.key(),
            "trainer": asdict(trainer), "fold": fold_digest(n, n_folds, seed)}


class StaleRouters(ArtifactError):
    """Routers on disk trained with other settings, folds, seed or data than the run asks for."""


def finished_run(out_dir: Path, run_id: str, what: str) -> dict | None:
    """``out_dir/folds.json`` when it records this ``run_id`` (the folds are done: skip them), else
    None after removing a stale one (written last, so its absence marks an unfinished run)."""
    path = Path(out_dir) / "folds.json"
    if path.is_file():
        found = json.loads(path.read_text())
        if found.get("run_id") == run_id:
            log.info("%s folds already trained for this run (%s): skipped", what, out_dir)
            return found
    path.unlink(missing_ok=True)
    return None


def check_run(path: Path, found: dict, expected: dict, retrain: str) -> None:
    """Refuse a trained run (``found``: its ``folds.json``) whose key differs from ``expected``
    (:func:`crossfit_key`), naming the differing fields and the command that retrains it."""
    if found.get("run_id") == config_hash(expected):
        return
    if "key" not in found:
        what = "settings that cannot be checked (trained before folds.json recorded them)"
    else:
        diff = diff_fields(expected, found["key"])
        exp, got = _flat(expected), _flat(found["key"])
        what = "; ".join(_knob(f) + (f" ({got.get(f)!r} there, {exp.get(f)!r} here)" if _scalar(exp.get(f), got.get(f))
                                     else "") for f in diff[:6]) + (" ..." if len(diff) > 6 else "") or "its run id"
    raise StaleRouters(f"{path} was trained with other {what} than this evaluation asks for: its routers would be "
                       f"reported under settings they were not trained with. Retrain: {retrain}")


def _flat(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update({f"{k}.{a}": b for a, b in _flat(v).items()})
        else:
            out[k] = v
    return out


def _scalar(*values) -> bool:
    return all(v is None or isinstance(v, (str, int, float, bool)) and len(str(v)) <= 40 for v in values)


def _knob(field: str) -> str:
    """A key field as the config knob a user sets (``settings.hidden`` -> ``router.hidden``)."""
    head, _, rest = field.partition(".")
    name = {"settings": "router", "fit": "frontier.routers.actions"}.get(head, head) + (f".{rest}" if rest else "")
    return {"data_key": "data, labels or features (data key)", "fold": "folds", "space": "actions (frontier.depth, caps)",
            "data": "inputs or labels"}.get(name, name)
