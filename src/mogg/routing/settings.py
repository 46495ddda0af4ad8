"""The router's settings: one dataclass, one default per knob (``conf/router/*.yaml`` builds it
with ``_target_``; every other place reads these defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mogg.routing import objectives
from mogg.routing.features import NORMALISE, parse_groups
from mogg.routing.profiles import check_profiles

FITS = ("crossfit", "all", "both")
MODELS = ("mlp", "cross")
TRANSFERS = ("pooled", "experts")  # mogg.routing.experts


@dataclass
class RouterSettings:
    """The router's knobs (``conf/router/*.yaml``, built with ``_target_``).

    ``inputs``: feature groups or an alias (:mod:`mogg.routing.features`); ``objective``:
    bce | utility | listwise; ``temperature``: softmax temperature of the utility objectives'
    weights; ``decision``: argmax | fallback (the rule the report calls "the router");
    ``fit``: what ``train.py`` fits - crossfit (in-set evaluation), all (one router to apply
    elsewhere) or both; ``checkpoint``: a trained router (directory, or a run directory holding
    ``<ladder>/final``) that ``evaluate.py`` applies to its question set; ``allow_overlap``: let
    such a router be evaluated on questions it was trained on (refused by default).

    ``model``: mlp (the network over ``inputs``) | cross (:mod:`mogg.routing.cross`: a transformer
    reading each (question, level context) pair; ``base`` its encoder by name or path, the top
    ``train_layers`` blocks fine-tuned at ``encoder_lr``, the head at ``lr``, the head also reading
    the MLP's ``inputs`` with ``features``; ``epochs``,
    ``patience`` and ``batch_size`` (questions, each with its L pairs) are its own, the MLP's are
    the trainer's).

    ``profiles``: eq. 1 profiles (:mod:`mogg.routing.profiles`): the router chooses an action
    (profile, level), i.e. which levels vote as well as the level injected; null (default): one
    output per level and softmax(z / T) weights.

    ``transfer``: how a router over several training sets (``train_sources``) is built: pooled
    (one network over the stacked sets, :mod:`mogg.routing.sources`) or experts (one per set, a
    gate and a support check, :mod:`mogg.routing.experts`; ``support``, ``decline`` its knobs).

    ``members``: the MLP router as a bagged committee of this many networks
    (:func:`mogg.routing.committee.member_fits`): each draws its own validation slice from the
    fit's rows and its own seed; the router's output is their mean. 1 = one network.
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
    model: str = "mlp"
    # the cross router's (model=cross) encoder and fit
    base: str = "minilm"
    max_length: int = 256
    train_layers: int = 1
    features: bool = True  # the head also reads the MLP's inputs (router.inputs)
    encoder_lr: float = 5e-5
    epochs: int = 20
    patience: int = 3
    batch_size: int = 16
    profiles: Any = None
    # a router trained on several sets (train_sources): pooled (one network) | experts (one per set,
    # a gate and a support check: mogg.routing.experts); support: the quantile of the training
    # questions' own k-NN distances beyond which a question takes the fallback; decline: the share
    # of a set outside the support beyond which the router declines the whole set
    transfer: str = "pooled"
    support: float = 0.99
    decline: float = 0.5
    members: int = 1

    def __post_init__(self) -> None:
        self.inputs = parse_groups(self.inputs if isinstance(self.inputs, str) else list(self.inputs))
        self.profiles = check_profiles(self.profiles if self.profiles is None or isinstance(self.profiles, str)
                                       else list(self.profiles))
        if self.profiles and self.model != "mlp":
            raise ValueError("router.profiles needs router.model=mlp (the cross router reads one pair per level)")
        if self.normalise not in NORMALISE:
            raise ValueError(f"router.normalise must be one of {NORMALISE}, got {self.normalise!r}")
        objectives.check_objective(self.objective)
        if self.decision not in objectives.DECISIONS:
            raise ValueError(f"router.decision must be one of {objectives.DECISIONS}, got {self.decision!r}")
        if self.model not in MODELS:
            raise ValueError(f"router.model must be one of {MODELS}, got {self.model!r}")
        if self.model == "cross" and (self.train_layers < 0 or self.max_length < 8 or self.epochs < 1
                                      or self.patience < 0 or self.batch_size < 1 or not 0 < self.encoder_lr <= 1):
            raise ValueError("router=cross: train_layers >= 0, max_length >= 8, epochs >= 1, patience >= 0, "
                             f"batch_size >= 1 and 0 < encoder_lr <= 1 required; got {self}")
        if self.transfer not in TRANSFERS:
            raise ValueError(f"router.transfer must be one of {TRANSFERS}, got {self.transfer!r}")
        if self.transfer == "experts" and self.model != "mlp":
            raise ValueError("router.transfer=experts needs router.model=mlp (its gate reads the MLP's inputs); set router.transfer=pooled")
        if not (isinstance(self.members, int) and self.members >= 1):
            raise ValueError(f"router.members must be an integer >= 1 (networks in the committee), got {self.members!r}")
        if self.members > 1 and self.model != "mlp":
            raise ValueError("router.members > 1 needs router.model=mlp (a committee of MLPs); set router.members=1")
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

    def module_kwargs(self) -> dict:
        return {"hidden": self.hidden, "dropout": self.dropout, "lr": self.lr, "weight_decay": self.weight_decay,
                "objective": self.objective}

    def key(self) -> dict:
        """What changes a trained router (not where it is saved or how it is used)."""
        key = {**self.module_kwargs(), "inputs": list(self.inputs), "temperature": self.temperature}
        if self.model == "cross":  # MLP keys stay as they were: their routers and run ids are unchanged
            key.update(model="cross", base=self.base, max_length=self.max_length, train_layers=self.train_layers,
                       features=self.features,
                       encoder_lr=self.encoder_lr, epochs=self.epochs, patience=self.patience, batch_size=self.batch_size)
        if self.profiles:
            key["profiles"] = list(self.profiles)
        if self.members != 1:  # one network: keys (and run ids) as before the committee existed
            key["members"] = self.members
        return key

    def cross_encoder(self):
        """The cross router's encoder (:class:`mogg.encoders.HFEncoder`, loaded on first use)."""
        from mogg.encoders import HFEncoder

        if "_encoder" not in self.__dict__:  # one model load per run (not a dataclass field: not in key())
            self.__dict__["_encoder"] = HFEncoder(self.base, max_length=self.max_length, normalize=False)
        return self.__dict__["_encoder"]
