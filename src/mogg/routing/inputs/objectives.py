"""Router objectives, the weights they give MoG's eq. 1-2, and the fallback decision rule.

Each training question q has a utility per level ``u[q, l]`` (the labeler's level scores: with
``labels=metric`` the evidence F1 of that level's fixed-level context) and a soft label (0.8 best
level, 0.2 second). Objectives over router logits ``z`` [B, L]:

* ``bce`` (the MoG paper): BCE between sigmoid(z) and the soft label. Blind to how far apart the
  levels are: a near-tie and a landslide give the same target.
* ``utility``: regression of the centred, standardised utility ``(u - mean_l u) / s`` (``s``: the
  std of centred utilities over the training questions) with MSE; the router's choice is
  argmax z. Sees the size of every gap.
* ``listwise``: expected utility, ``-sum_l softmax(z)_l * u'_l`` with the same standardised
  ``u'`` (a listwise objective: probability moves to a level in proportion to how much better
  it is than the router's current mix).

Weights for eq. 1 are sigmoid(z) for ``bce`` and softmax(z / T) for the utility objectives (in
standardised-utility units T=1 means one standard deviation of utility is a factor e in weight).
The decision rule ``fallback`` replaces a question's weights by the best fixed level's one-hot
unless the router's predicted advantage of its own choice over that level exceeds a margin
tuned on validation questions.
"""

from __future__ import annotations

import numpy as np
import torch

DECISIONS = ("argmax", "fallback")


class Objective:
    """A router objective: its training targets, its loss, and how its logits become eq. 1
    weights and per-level preferences. A subclass with a ``name`` registers itself, so a new
    objective is one class (``router.objective=<name>`` then selects it)."""

    name: str = ""
    registry: dict[str, type["Objective"]] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.name:
            Objective.registry[cls.name] = cls

    def targets(self, soft_labels: np.ndarray, utilities: np.ndarray, scale: float) -> np.ndarray:
        """Training targets [Q, L]; default: centred utilities / ``scale``."""
        u = np.asarray(utilities, dtype=np.float64)
        return ((u - u.mean(axis=1, keepdims=True)) / scale).astype(np.float32)

    def row_loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The loss of each question: logits and targets [..., B, L] -> [..., B] (the trainer
        averages it over each fold's rows, so every fold of a stacked fit has its own mean)."""
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The mean loss over questions [B, L] -> scalar."""
        return self.row_loss(logits, target).mean()

    def weights(self, logits: np.ndarray, temperature: float) -> np.ndarray:
        """Eq. 1 weights [Q, L]; default: softmax(z / T)."""
        if temperature <= 0:
            raise ValueError(f"router.temperature must be > 0, got {temperature}")
        return softmax(logits, temperature)

    def preference(self, logits: np.ndarray) -> np.ndarray:
        """The router's own score per level [Q, L]; default: the logits (predicted utility)."""
        return np.asarray(logits, dtype=np.float64)


def _sigmoid(z) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


class BCE(Objective):
    """The MoG paper's: BCE between sigmoid(z) and the 0.8/0.2 soft label; weights sigmoid(z)."""

    name = "bce"

    def targets(self, soft_labels, utilities, scale):
        return np.asarray(soft_labels, dtype=np.float32)

    def row_loss(self, logits, target):
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(-1)

    def weights(self, logits, temperature):
        return _sigmoid(logits)

    def preference(self, logits):
        return _sigmoid(logits)


class Utility(Objective):
    """MSE regression of the centred, standardised level utility."""

    name = "utility"

    def row_loss(self, logits, target):
        return (logits - target).square().mean(-1)


class Listwise(Objective):
    """Expected utility under softmax(z), maximised."""

    name = "listwise"

    def row_loss(self, logits, target):
        return -(torch.softmax(logits, dim=-1) * target).sum(dim=-1)


# the built-in objectives (the registry holds these and any subclass defined later)
OBJECTIVES = tuple(Objective.registry)


def get_objective(objective: str) -> Objective:
    """The registered objective called ``objective``."""
    cls = Objective.registry.get(objective)
    if cls is None:
        raise ValueError(f"router.objective must be one of {tuple(Objective.registry)}, got {objective!r}")
    return cls()


def check_objective(objective: str) -> str:
    get_objective(objective)
    return objective


def utility_scale(utilities: np.ndarray) -> float:
    """Std of per-question centred utilities [Q, L] (1.0 when they are all equal)."""
    c = utilities - utilities.mean(axis=1, keepdims=True)
    s = float(c.std())
    return s if s > 1e-12 else 1.0


def targets(objective: str, soft_labels: np.ndarray, utilities: np.ndarray, scale: float) -> np.ndarray:
    """Training targets [Q, L] of ``objective``."""
    return get_objective(objective).targets(soft_labels, utilities, scale)


def expected_utility_loss(logits: torch.Tensor, utility: torch.Tensor) -> torch.Tensor:
    """``-mean_q sum_l softmax(z_q)_l * u_ql`` (listwise; lower is better)."""
    return Listwise().loss(logits, utility)


def loss(objective: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean training loss of ``objective`` for logits and targets [B, L]."""
    return get_objective(objective).loss(logits, target)


def row_loss(objective: str, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-question training loss of ``objective``: [..., B, L] -> [..., B]."""
    return get_objective(objective).row_loss(logits, target)


def softmax(z: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64) / temperature
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def weights(objective: str, logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Eq. 1 weights in [0, 1]^L [Q, L] from router logits."""
    return get_objective(objective).weights(logits, temperature)


def preference(objective: str, logits: np.ndarray) -> np.ndarray:
    """The router's own score per level [Q, L], in which advantages and margins are measured:
    sigmoid probabilities for ``bce``, predicted standardised utility (logits) otherwise."""
    return get_objective(objective).preference(logits)


def advantage(pref: np.ndarray, fallback_level: int) -> np.ndarray:
    """Predicted advantage [Q] of the router's argmax level over ``fallback_level`` (>= 0)."""
    return pref.max(axis=1) - pref[:, fallback_level]


def tune_margin(adv: np.ndarray, choice: np.ndarray, utilities: np.ndarray, fallback_level: int,
                n_grid: int = 21) -> float:
    """The margin that maximises the mean utility of the fallback rule on validation questions.

    ``adv`` [V] predicted advantages, ``choice`` [V] the router's levels, ``utilities`` [V, L].
    A question is routed when ``adv > margin``. Candidates: -inf (always route), quantiles of
    ``adv``, +inf (never route); ties go to the larger margin (fall back when the evidence for
    routing is no better).
    """
    adv = np.asarray(adv, dtype=np.float64)
    if len(adv) == 0:
        return 0.0
    rows = np.arange(len(adv))
    routed_u = utilities[rows, choice]
    fixed_u = utilities[rows, fallback_level]
    cands = np.unique(np.r_[-np.inf, np.quantile(adv, np.linspace(0, 1, n_grid)), np.inf])
    util = np.array([np.where(adv > m, routed_u, fixed_u).mean() for m in cands])
    best = np.flatnonzero(util >= util.max() - 1e-12)
    return float(cands[best[-1]])


def best_fixed_level(utilities: np.ndarray) -> int:
    """The level with the highest mean utility (ties: the finer level)."""
    return int(np.argmax(np.asarray(utilities, dtype=np.float64).mean(axis=0)))


def decide(objective: str, logits: np.ndarray, temperature: float, decision: str, fallback_level: int,
           margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 1 weights [Q, L] and a routed mask [Q] under a decision rule.

    ``argmax``: the router's weights for every question. ``fallback``: the one-hot of
    ``fallback_level`` unless the predicted advantage exceeds ``margin``.
    """
    if decision not in DECISIONS:
        raise ValueError(f"router.decision must be one of {DECISIONS}, got {decision!r}")
    w = weights(objective, logits, temperature)
    if decision == "argmax":
        return w, np.ones(len(w), dtype=bool)
    routed = advantage(preference(objective, logits), fallback_level) > margin
    fixed = np.zeros_like(w)
    fixed[:, fallback_level] = 1.0
    return np.where(routed[:, None], w, fixed), routed
