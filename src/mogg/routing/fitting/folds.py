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
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mogg.core.artifacts import (
    MANIFEST,
    ArtifactError,
    artifact_lock,
    atomic_path,
    config_hash,
    diff_fields,
    read_manifest,
    staged_dir,
    strict_json,
    write_artifact,
)
from mogg.core.bounded import read_json

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


@dataclass
class CrossFit:
    """The bookkeeping every router kind's cross-fit shares (the level router and each budget-router
    kind): what its routers depend on (``key``; its hash is the run id), the seeded
    folds of the ``n`` questions and each fold's training/validation split (validation slice seeded
    ``seed + 1000 + k``), the finished run recognised by ``out_dir/folds.json`` and that file
    written last (:meth:`finish`), so a half-finished retrain never mixes with an older run."""

    out_dir: Path
    key: dict
    n: int
    n_folds: int
    seed: int
    val_fraction: float
    store: Path | None = None  # the artifact store: finished folds kept by run id, for any run that needs them
    fold: np.ndarray = field(init=False)
    run_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.fold = make_folds(self.n, self.n_folds, self.seed)
        self.run_id = config_hash(self.key)

    @property
    def path(self) -> Path:
        return self.out_dir / "folds.json"

    def split(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Fold k's (training, validation) rows: the other folds' questions, a seeded slice held out."""
        return split_train_val(np.flatnonzero(self.fold != k), self.val_fraction, self.seed + 1000 + k)

    def test(self, k: int) -> np.ndarray:
        return np.flatnonzero(self.fold == k)

    @property
    def stored(self) -> Path | None:
        """Where the artifact store keeps this run's folds (``<store>/crossfits/<run id>``), if any."""
        return None if self.store is None else Path(self.store) / "crossfits" / self.run_id

    def finished(self, what: str, query_ids: list[str] | None = None,
                 check: Callable[[Path, int], None] | None = None) -> dict | None:
        """``folds.json`` when it records this run (the folds are done: skip them); else the same
        folds from the artifact store when another run trained them (the run id hashes the data,
        folds, seed, knobs and code: the same folds), verified (:meth:`verify_stored`: ``query_ids``
        and ``check``), copied in and said in the log; else None after removing a stale
        ``folds.json`` (:func:`finished_run`). A damaged store entry is named in a warning and
        removed: the folds are retrained and stored afresh."""
        found = finished_run(self.out_dir, self.run_id, what)
        if found is not None or self.stored is None or not self.stored.is_dir():
            return found
        try:
            with artifact_lock(self.stored, shared=True):
                self.verify_stored(query_ids, check)
        except (ArtifactError, ValueError, OSError) as e:
            log.warning("%s fold store entry %s is damaged (%s): removed, the folds are retrained", what, self.stored, e)
            with artifact_lock(self.stored):
                shutil.rmtree(self.stored, ignore_errors=True)
            return None
        for d in _fold_dirs(self.stored):
            with staged_dir(self.out_dir / d.name) as tmp:
                shutil.copytree(d, tmp, dirs_exist_ok=True)
        with atomic_path(self.path) as tmp:  # last, as a fit writes it
            shutil.copyfile(self.stored / "folds.json", tmp)
        log.info("%s folds of this run id (%s) already trained by another run: reused from %s (the same data, folds, "
                 "seed, knobs and code)", what, self.run_id, self.stored)
        return read_json(self.path)

    def folds_record(self, query_ids: list[str]) -> list[dict]:
        """Per fold its test, training and validation question ids (what ``folds.json`` records)."""
        out = []
        for k in range(self.n_folds):
            train, val = self.split(k)
            out.append({"test": [query_ids[i] for i in self.test(k)], "train": [query_ids[i] for i in train],
                        "val": [query_ids[i] for i in val]})
        return out

    def verify_stored(self, query_ids: list[str] | None = None, check: Callable[[Path, int], None] | None = None) -> None:
        """Refuse (``ArtifactError``) a store entry that is not this run's folds, whole: its manifest
        (every file's sha256, its config this run's key), ``folds.json`` (this run id, and with
        ``query_ids`` each fold's questions as this run's seed draws them: an edited or reordered
        record does not pass a re-signed manifest), and each ``fold<k>`` (``check(dir, k)``: its
        weights load and it says it is fold k of this run)."""
        d = self.stored
        if not (d / MANIFEST).is_file():
            raise ArtifactError(f"{d}: no {MANIFEST} (written before store entries were verified)")
        manifest = read_manifest(d, self.key)
        info = read_json(d / "folds.json")
        if not isinstance(info, dict) or info.get("run_id") != self.run_id or info.get("key") != json.loads(
                strict_json(self.key)):
            raise ArtifactError(f"{d / 'folds.json'}: records another run than {self.run_id}")
        folds = info.get("folds")
        if not isinstance(folds, list) or len(folds) != self.n_folds:
            raise ArtifactError(f"{d / 'folds.json'}: records {len(folds) if isinstance(folds, list) else 'no'} folds, "
                                f"not {self.n_folds}")
        if query_ids is not None:
            for k, (got, want) in enumerate(zip(folds, self.folds_record(query_ids))):
                if not isinstance(got, dict) or any(got.get(s) != want[s] for s in want):
                    raise ArtifactError(f"{d / 'folds.json'}: fold {k}'s questions are not the ones seed {self.seed} "
                                        "draws (edited)")
        dirs = sorted({Path(f).parts[0] for f in manifest.get("files", {}) if len(Path(f).parts) > 1})
        if dirs != [f"fold{k}" for k in range(self.n_folds)] or [p.name for p in _fold_dirs(d)] != dirs:
            raise ArtifactError(f"{d}: holds folds {[p.name for p in _fold_dirs(d)]}, not fold0..fold{self.n_folds - 1}")
        for k in range(self.n_folds):
            if check is not None:
                check(d / f"fold{k}", k)

    def finish(self, query_ids: list[str], per_fold: list[dict] | None = None, indent: int | None = None,
               **extra) -> dict:
        """Write ``folds.json`` (last): the run id, folds, seed, any ``extra`` fields, the key and
        per fold its question ids (with ``per_fold[k]``'s facts: epochs, ...)."""
        folds = [{**f, **((per_fold or [{}] * self.n_folds)[k])} for k, f in enumerate(self.folds_record(query_ids))]
        info = {"run_id": self.run_id, "n_folds": self.n_folds, "seed": self.seed, **extra, "key": self.key,
                "folds": folds}
        with atomic_path(self.path) as tmp:
            tmp.write_text(strict_json(info, indent=indent))
        if self.stored is not None:  # kept for any later run that needs the same folds, with a manifest
            def write(tmp: Path) -> None:
                for d in _fold_dirs(self.out_dir):
                    shutil.copytree(d, tmp / d.name)
                shutil.copyfile(self.path, tmp / "folds.json")
            write_artifact(self.stored, write, self.key)
        return info


def _fold_dirs(root: Path) -> list[Path]:
    """A cross-fit's per-fold directories under ``root`` (``fold0``, ``fold1``, ...)."""
    return [d for d in sorted(Path(root).glob("fold*")) if d.is_dir()]


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


def check_run(path: Path, found: dict, expected: dict, retrain: str, nodes: dict[str, str] | None = None) -> None:
    """Refuse a trained run (``found``: its ``folds.json``) whose key differs from ``expected``
    (:func:`crossfit_key`), naming the differing fields and the command that retrains it; ``nodes``:
    the config node a key's part comes from (its caller's, e.g. ``{"fit": "<the kind's node>"}``;
    the level router's ``settings`` are ``router``), so a field reads as the knob a user sets."""
    nodes = {"settings": "router", **(nodes or {})}
    if found.get("run_id") == config_hash(expected):
        return
    if "key" not in found:
        what = "settings that cannot be checked (trained before folds.json recorded them)"
    else:
        diff = diff_fields(expected, found["key"])
        exp, got = _flat(expected), _flat(found["key"])
        what = "; ".join(_knob(f, nodes) + (f" ({got.get(f)!r} there, {exp.get(f)!r} here)" if _scalar(exp.get(f), got.get(f))
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


def _knob(field: str, nodes: dict[str, str]) -> str:
    """A key field as the config knob a user sets (``settings.hidden`` -> ``router.hidden``)."""
    head, _, rest = field.partition(".")
    name = nodes.get(head, head) + (f".{rest}" if rest else "")
    return {"data_key": "data, labels or features (data key)", "fold": "folds", "space": "actions (frontier.depth, caps)",
            "data": "inputs or labels"}.get(name, name)
