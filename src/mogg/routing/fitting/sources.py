"""Many question sets, one router: stacking training sources with per-set weights and scales.

A *source* is one question set prepared over its own corpus with the same ladder builder (same
levels, same feature recipe). :func:`fit_sources` trains the final router on several at once:

* **validation per set**: each set keeps its own seeded validation slice (early stopping and the
  fallback margin see every set), split before any row is repeated, so no repeated row sits on
  both sides;
* **per-set weights**: a set of weight w has its training rows repeated
  ``max(1, round(w * n_largest / n_set))`` times, so with equal weights every set counts about
  as much as the largest (a loss weight would do the same in expectation; repetition keeps the
  router's objectives and batches unchanged);
* **per-set utility scale**: each set's level utilities are divided by their own spread
  (:func:`mogg.routing.inputs.objectives.utility_scale`) before stacking, so a set whose levels differ
  by 0.3 F1 does not drown one whose levels differ by 0.05; the fallback level (the fixed level
  "chosen on the training sets") is then the best mean over the scaled, weighted rows.

``router.transfer=experts`` (:func:`fit_experts`) keeps one router per source instead, with a
gate and a support check (:mod:`mogg.routing.fitting.experts`); the fallback is chosen as above.

Feature scales across corpora are the recipe's business (``router.normalise=question``:
within-question score features; :mod:`mogg.routing.inputs.features`), not this module's: a router
applied to a new corpus must rebuild its inputs from that corpus alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.routing.fitting.kfold import fit_and_save, split_train_val
from mogg.routing.inputs import objectives
from mogg.routing.kinds.base import RouterKind, concat_inputs
from mogg.routing.networks.training import TrainerConfig
from mogg.routing.router_dir import TrainedRouter

log = logging.getLogger(__name__)


@dataclass
class Source:
    """One training question set: router inputs (the kind's: a feature matrix [Q, D] by default), soft labels and
    utilities [Q, L]."""

    name: str
    x: np.ndarray
    labels: np.ndarray
    utilities: np.ndarray
    questions: Sequence[str]
    weight: float = 1.0

    def __post_init__(self) -> None:
        n = len(self.x)
        if not (len(self.labels) == len(self.utilities) == len(self.questions) == n):
            raise ValueError(f"source {self.name!r}: {n} feature rows, {len(self.labels)} labels, "
                             f"{len(self.utilities)} utilities, {len(self.questions)} questions")
        if n == 0:
            raise ValueError(f"source {self.name!r} has no questions")
        if not (np.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"source {self.name!r}: weight must be > 0, got {self.weight}")


def check_sources(sources: Sequence[Source]) -> None:
    """Refuse sources a single router cannot be trained on (different input widths or levels)."""
    if not sources:
        raise ValueError("no training sources")
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"training source names must be unique, got {names}")
    d, n_l = sources[0].x.shape[1], sources[0].labels.shape[1]
    for s in sources[1:]:
        if s.x.shape[1] != d or s.labels.shape[1] != n_l:
            raise ValueError(f"source {s.name!r} has {s.x.shape[1]} inputs x {s.labels.shape[1]} levels; "
                             f"{sources[0].name!r} has {d} x {n_l}: sources need one ladder builder and one recipe")


def repeats(sizes: Sequence[int], weights: Sequence[float]) -> list[int]:
    """How many times each set's training rows are repeated: ``max(1, round(w * n_max / n))``."""
    n_max = max(sizes)
    return [max(1, int(round(w * n_max / n))) for n, w in zip(sizes, weights)]


def stack_sources(sources: Sequence[Source], val_fraction: float, seed: int) -> dict:
    """Stacked arrays and row indices: ``x``, ``labels``, ``utilities`` (per-set scaled),
    ``questions``, ``train`` (with repeats), ``val``, and ``per_source`` bookkeeping."""
    check_sources(sources)
    reps = repeats([len(s.x) for s in sources], [s.weight for s in sources])
    xs, ls, us, qs, train, val, info = [], [], [], [], [], [], []
    offset = 0
    for i, (s, rep) in enumerate(zip(sources, reps)):
        n = len(s.x)
        tr, va = split_train_val(np.arange(n), val_fraction, seed + 999 + 7919 * i)
        scale = objectives.utility_scale(np.asarray(s.utilities, dtype=np.float64))
        xs.append(s.x)
        ls.append(np.asarray(s.labels, dtype=np.float32))
        us.append(np.asarray(s.utilities, dtype=np.float64) / scale)
        qs.extend(s.questions)
        train.append(np.tile(tr + offset, rep))
        val.append(va + offset)
        info.append({"name": s.name, "n_questions": n, "weight": s.weight, "repeats": rep, "utility_scale": scale,
                     "n_train": int(len(tr)), "n_val": int(len(va))})
        offset += n
    x = concat_inputs(xs)
    return {"x": x, "labels": np.concatenate(ls), "utilities": np.concatenate(us), "questions": qs,
            "train": np.sort(np.concatenate(train)), "val": np.concatenate(val), "per_source": info}


def fit_sources(sources: Sequence[Source], seed: int, settings: RouterKind, trainer: TrainerConfig, out_dir: Path,
                spec: dict, logger=False) -> TrainedRouter:
    """One router trained on every source (see the module docstring), saved to ``out_dir``;
    an unchanged rerun reuses it (the fit key covers every row, weight and setting)."""
    out_dir = Path(out_dir)
    st = stack_sources(sources, trainer.val_fraction, seed)
    fspec = {**spec, "provenance": {**spec.get("provenance", {}), "fit": {"kind": "sources", "sources": st["per_source"]},
                                    "questions_name": "+".join(s.name for s in sources),
                                    "n_questions": int(sum(len(s.x) for s in sources))}}
    router, fresh = fit_and_save(st["x"], st["labels"], st["utilities"], st["questions"], st["train"], st["val"],
                                 settings, trainer, seed, fspec, out_dir, "multi-source router", logger)
    if not fresh:
        return router
    log.info("router on %s -> %s", ", ".join(f"{p['name']} ({p['n_questions']} x{p['repeats']})" for p in st["per_source"]),
             out_dir)
    return router


def fit_experts(sources: Sequence[Source], members: dict[str, TrainedRouter], seed: int, settings: RouterKind,
                trainer: TrainerConfig, out_dir: Path, spec: dict, k: int = 10) -> TrainedRouter:
    """A source-experts router (:mod:`mogg.routing.fitting.experts`) over ``members`` (source name -> the
    router :func:`fit_sources` trained on that source alone, same seed and trainer), saved to
    ``out_dir``. Each member's validation rows are its own split; the fallback weighs the sets as
    :func:`fit_sources` does."""
    from mogg.routing.fitting.experts import build_experts

    check_sources(sources)
    if set(members) != {s.name for s in sources}:
        raise ValueError(f"experts {sorted(members)} do not match the sources {[s.name for s in sources]}")
    reps = repeats([len(s.x) for s in sources], [s.weight for s in sources])
    xs, us, trains, vals, info = [], [], [], [], []
    for s, rep in zip(sources, reps):
        st = stack_sources([s], trainer.val_fraction, seed)  # the member's own split: fit_sources([s], seed)
        xs.append(np.asarray(s.x, dtype=np.float32))
        us.append(st["utilities"])
        trains.append(np.tile(st["train"], rep))
        vals.append(st["val"])
        info.append({**st["per_source"][0], "weight": s.weight, "repeats": rep})
    fspec = {**spec, "provenance": {**spec.get("provenance", {}), "fit": {"kind": "experts", "sources": info},
                                    "questions_name": "+".join(s.name for s in sources),
                                    "n_questions": int(sum(len(s.x) for s in sources))}}
    router = build_experts({s.name: members[s.name] for s in sources}, xs, us, vals, trains, seed, settings.support,
                           settings.decline, k, fspec)
    router.save(Path(out_dir))
    log.info("source experts on %s -> %s", ", ".join(s.name for s in sources), out_dir)
    return router
