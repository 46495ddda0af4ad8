"""The router-kind interface: what the spine asks of a router, whatever its network.

A router kind is one class (a dataclass of its knobs, subclassing :class:`RouterKind`) and one
config file (``conf/router/<kind>.yaml``, whose ``_target_`` names the class). Cross-fitting, the
final fit, training sources, router directories, ``mogg-route`` and the reports call only this
interface: :meth:`RouterKind.router_inputs` (what it reads for a prepared question set),
:meth:`RouterKind.fit_networks` (its networks on the folds' rows), :meth:`RouterKind.key` (what
changes a trained router). The network a kind trains carries the other half (applying and loading
a saved router: :class:`RouterNetwork`), found again from ``router.json`` by
:func:`mogg.routing.kinds.registry.network_class`. How to add a kind: ``docs/extending.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mogg.routing.inputs import objectives
from mogg.routing.inputs.features import NORMALISE, parse_groups
from mogg.routing.networks.base import RouterNetwork  # noqa: F401 (the kind interface's other half, named here)
from mogg.routing.profiles import check_profiles

FITS = ("crossfit", "all", "both")
TRANSFERS = ("pooled", "experts")  # mogg.routing.fitting.experts


@dataclass
class RouterKind:
    """The knobs every router kind shares (``conf/router/*.yaml``, built with ``_target_``).

    ``inputs``: feature groups or an alias (:mod:`mogg.routing.inputs.features`); ``objective``:
    bce | utility | listwise; ``temperature``: softmax temperature of the utility objectives'
    weights; ``decision``: argmax | fallback (the rule the report calls "the router");
    ``hidden``, ``dropout``, ``lr``, ``weight_decay``: the network's head and its optimiser;
    ``fit``: what ``train.py`` fits - crossfit (in-set evaluation), all (one router to apply
    elsewhere) or both; ``checkpoint``: a trained router (directory, or a run directory holding
    ``<ladder>/final``) that ``evaluate.py`` applies to its question set; ``allow_overlap``: let
    such a router be evaluated on questions it was trained on (refused by default).

    ``profiles``: eq. 1 profiles (:mod:`mogg.routing.profiles`): the router chooses an
    action (profile, level), i.e. which levels vote as well as the level injected; null (default):
    one output per level and softmax(z / T) weights.

    ``transfer``: how a router over several training sets (``train_sources``) is built: pooled
    (one network over the stacked sets, :mod:`mogg.routing.fitting.sources`) or experts (one per
    set, a gate and a support check, :mod:`mogg.routing.fitting.experts`; ``support``,
    ``decline`` its knobs).
    """

    inputs: Any = "retrieval+lengths"
    normalise: str = "none"  # none | question: score inputs relative to the query's best (features.NORMALISE)
    objective: str = "utility"
    temperature: float = 1.0
    decision: str = "argmax"
    hidden: int = 64
    dropout: float = 0.2
    lr: float = 1e-3
    weight_decay: float = 1e-4
    fit: str = "crossfit"
    checkpoint: str | None = None
    allow_overlap: bool = False
    profiles: Any = None
    # a router trained on several sets (train_sources): pooled (one network) | experts (one per set,
    # a gate and a support check: mogg.routing.fitting.experts); support: the quantile of the training
    # questions' own k-NN distances beyond which a question takes the fallback; decline: the share
    # of a set outside the support beyond which the router declines the whole set
    transfer: str = "pooled"
    support: float = 0.99
    decline: float = 0.5

    # what a kind allows beside its own knobs (a kind that reads something else than the feature
    # matrix cannot be a source expert, whose gate reads that matrix; nor score eq. 1 actions)
    experts_ok = True
    profiles_ok = True

    def __post_init__(self) -> None:
        self.inputs = parse_groups(self.inputs if isinstance(self.inputs, str) else list(self.inputs))
        self.profiles = check_profiles(self.profiles if self.profiles is None or isinstance(self.profiles, str)
                                       else list(self.profiles))
        if self.profiles and not self.profiles_ok:
            raise ValueError(f"router.profiles needs a router that scores one output per action; {self.kind_name} "
                             "reads one input per level (use router=profiles)")
        if self.normalise not in NORMALISE:
            raise ValueError(f"router.normalise must be one of {NORMALISE}, got {self.normalise!r}")
        objectives.check_objective(self.objective)
        if self.decision not in objectives.DECISIONS:
            raise ValueError(f"router.decision must be one of {objectives.DECISIONS}, got {self.decision!r}")
        if self.transfer not in TRANSFERS:
            raise ValueError(f"router.transfer must be one of {TRANSFERS}, got {self.transfer!r}")
        if self.transfer == "experts" and not self.experts_ok:
            raise ValueError(f"router.transfer=experts needs a router over the feature matrix (its gate reads it); "
                             f"{self.kind_name} is not one: set router.transfer=pooled")
        if not (0 < self.support <= 1 and 0 <= self.decline <= 1):
            raise ValueError(f"router.support must be in (0, 1] and router.decline in [0, 1]; got {self.support}, {self.decline}")
        if self.fit not in FITS:
            raise ValueError(f"router.fit must be one of {FITS}, got {self.fit!r}")
        if not self.temperature > 0:
            raise ValueError(f"router.temperature must be > 0, got {self.temperature}")
        if not 0 < self.lr <= 10:  # Adam steps of 1e30 are a typo, not a setting (they diverge to NaN)
            raise ValueError(f"router.lr={self.lr!r}: the learning rate must be in (0, 10]")
        if self.hidden < 0 or not 0 <= self.dropout < 1 or not self.lr > 0 or self.weight_decay < 0:
            raise ValueError(f"router: hidden >= 0, 0 <= dropout < 1, lr > 0, weight_decay >= 0 required; got {self}")

    @property
    def kind_name(self) -> str:
        return type(self).__name__

    def module_kwargs(self) -> dict:
        return {"hidden": self.hidden, "dropout": self.dropout, "lr": self.lr, "weight_decay": self.weight_decay,
                "objective": self.objective}

    def key(self) -> dict:
        """What changes a trained router (not where it is saved or how it is used): the shared
        knobs, then :meth:`kind_key` (a kind adds its own; the default MLP adds nothing, so its
        run ids are those of every earlier run)."""
        key = {**self.module_kwargs(), "inputs": list(self.inputs), "temperature": self.temperature}
        key.update(self.kind_key())
        if self.profiles:
            key["profiles"] = list(self.profiles)
        return key

    # -- the interface a kind implements --------------------------------------------------------
    def kind_key(self) -> dict:
        """The kind's own knobs that change a trained router ({} for the default MLP)."""
        return {}

    def router_inputs(self, prep, artifacts: Path | None):
        """What this kind reads for a prepared question set (:class:`mogg.prepared.Prepared`):
        the feature matrix [Q, D] by default, or any object with ``len``, row indexing, a
        ``fingerprint()`` (hashed into fit keys) and a ``concat`` classmethod (training sources)."""
        return prep.features

    def fit_networks(self, x, targets: Sequence[np.ndarray], fits: Sequence, trainer, ckpt_dir: Path | None,
                     logger=False, names: list[str] | None = None) -> list[tuple[Any, dict, tuple | None]]:
        """Train one network per fit in ``fits`` (rows ``train``, early stopping on ``val``, a
        ``seed``; :class:`mogg.routing.fitting.kfold.Fit`) to ``targets[i]`` [Q, L]. Returns per
        fit ``(network, summary, held_out)``: the network a :class:`RouterNetwork`, ``summary``
        its training record (``epochs``, ``best_val_loss``), ``held_out`` None (the decision
        rule's margin is tuned on ``val``) or ``(rows, outputs)`` to tune it on instead."""
        raise NotImplementedError(f"{self.kind_name} does not implement fit_networks")


def concat_inputs(xs: Sequence):
    """Several question sets' router inputs, rows stacked: feature matrices by numpy (float32),
    any other inputs type by its ``concat`` classmethod."""
    concat = getattr(type(xs[0]), "concat", None)  # None: an array (or array-like rows)
    if concat is None:
        return np.concatenate([np.asarray(x, dtype=np.float32) for x in xs])
    return concat(list(xs))


def input_cost_ms(x, n: int) -> dict:
    """Per-question ms an inputs object spent reading its questions ({} for a feature matrix)."""
    return {} if isinstance(x, np.ndarray) else x.cost_ms(n)
