"""Source experts: a transfer router that routes each new question with the training set it resembles.

A router trained on several question sets at once (:mod:`mogg.routing.fitting.sources`, ``transfer=pooled``)
must reconcile sets whose evidence has different shapes; measured on the three gold-evidence sets,
pooling routed a held-out set worse than either source alone (docs/routers.md, "Leave-one-set-out").
``router.transfer=experts`` keeps one router per source instead and adds two label-free models of
the sources' router inputs, both fitted on training sources only:

* a **gate**: a multinomial logistic regression predicting which source a question's inputs come
  from (balanced classes, standardised inputs); a new question's outputs are the gate-weighted
  mean of the experts' outputs (each expert's outputs are standardised utilities of its own set);
* a **support check**: the mean Euclidean distance from a question's standardised inputs to its
  ``k`` nearest training questions; a question farther than the ``support`` quantile of the
  training questions' own (leave-one-out) distances lies outside every source and takes the
  fallback: the fixed action chosen on the training sets (as the pooled router's). When more than
  ``decline`` of a set lies outside, the router declines the whole set (every question takes the
  fallback, with a warning): its sources say nothing about such a set.

The experts router is a :class:`~mogg.routing.router_dir.TrainedRouter` (same recipe, levels, spec and
``route``), so evaluation, ``mogg-route`` and the reports apply it unchanged; its directory holds
``experts.safetensors`` (gate and support) and one router directory per source under ``members/``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from mogg.core.artifacts import ArtifactError
from mogg.core.seal import seal_holder
from mogg.routing.inputs import objectives
from mogg.routing.networks.mlp import standardisation
from mogg.routing.router_dir import RouterMismatch, Routing, TrainedRouter

log = logging.getLogger(__name__)

@dataclass
class SourceGate:
    """p(source | router inputs): standardisation ``mean``/``std`` [D], ``coef`` [S, D], ``intercept`` [S]."""

    names: list[str]
    mean: np.ndarray
    std: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray

    @classmethod
    def fit(cls, xs: Sequence[np.ndarray], names: Sequence[str], seed: int) -> "SourceGate":
        from sklearn.linear_model import LogisticRegression

        x = np.concatenate([np.asarray(a, dtype=np.float64) for a in xs])
        y = np.concatenate([np.full(len(a), i) for i, a in enumerate(xs)])
        mean, std, _ = (t.numpy() for t in standardisation(torch.from_numpy(x)))  # the MLP's own rule for flat columns
        clf = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000, random_state=seed)
        clf.fit((x - mean) / std, y)
        coef, icpt = clf.coef_, clf.intercept_
        if len(xs) == 2:  # sklearn's binary model is one logit a; softmax([-a/2, a/2]) = [1 - sigmoid(a), sigmoid(a)]
            coef, icpt = np.r_[-coef / 2, coef / 2], np.r_[-icpt / 2, icpt / 2]
        return cls(list(names), mean, std, coef, icpt)

    def standardise(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float64) - self.mean) / self.std

    def proba(self, x: np.ndarray) -> np.ndarray:
        """float64 [Q, S], rows sum to 1."""
        a = self.standardise(x) @ self.coef.T + self.intercept
        a = np.exp(a - a.max(axis=1, keepdims=True))
        return a / a.sum(axis=1, keepdims=True)


@dataclass
class Support:
    """Where the training sources have questions: ``ref`` [N, D] their standardised inputs, ``k``
    neighbours, ``threshold`` the ``quantile`` of their own leave-one-out mean k-NN distances."""

    ref: np.ndarray
    k: int
    quantile: float
    threshold: float

    @classmethod
    def fit(cls, z: np.ndarray, k: int, quantile: float) -> "Support":
        z = np.asarray(z, dtype=np.float32)
        k = max(1, min(int(k), len(z) - 1))
        d = _knn_mean(z, z, k + 1, skip_self=True)
        return cls(z, k, float(quantile), float(np.quantile(d, quantile)))

    def distance(self, z: np.ndarray) -> np.ndarray:
        """Mean distance [Q] to the ``k`` nearest training questions."""
        return _knn_mean(np.asarray(z, dtype=np.float32), self.ref, self.k)

    def inside(self, z: np.ndarray) -> np.ndarray:
        return self.distance(z) <= self.threshold


def _knn_mean(q: np.ndarray, ref: np.ndarray, k: int, skip_self: bool = False, batch: int = 2048) -> np.ndarray:
    """Mean Euclidean distance [Q] from each row of ``q`` to its ``k`` nearest rows of ``ref``
    (``skip_self``: q is ref, drop each row's own zero distance). Batched torch.cdist + topk."""
    r = torch.as_tensor(ref)
    out = []
    for i in range(0, len(q), batch):
        d = torch.cdist(torch.as_tensor(q[i:i + batch]), r)
        top = d.topk(min(k, r.shape[0]), dim=1, largest=False).values
        out.append((top[:, 1:] if skip_self else top).mean(dim=1))
    return torch.cat(out).double().numpy() if out else np.zeros(0)


class ExpertsRouter(TrainedRouter):
    """One router per training source, a gate and a support check (see the module doc)."""

    def __init__(self, members: dict[str, TrainedRouter], gate: SourceGate, support: Support, decline: float,
                 spec: dict):
        hashes = sorted({h for m in members.values() for h in m.train_question_hashes})
        super().__init__(None, spec, hashes)
        self.members, self.gate, self.support, self.decline = members, gate, support, float(decline)
        self.last_outside, self.last_declined = 0.0, False  # the last route(): share outside the support, declined?

    def logits(self, x) -> np.ndarray:
        """Gate-weighted mean of the experts' outputs, float64 [Q, L or A]."""
        p = self.gate.proba(x)
        return sum(p[:, [i]] * self.members[n].logits(x) for i, n in enumerate(self.gate.names))

    def inputs(self, features, questions, contexts, artifacts=None) -> np.ndarray:
        """The feature matrix by the experts' shared recipe (the gate and support read it too)."""
        return features()

    def inside(self, x) -> np.ndarray:
        """bool [Q]: the question lies within the training sources' support."""
        return self.support.inside(self.gate.standardise(x))

    def route(self, x, decision: str | None = None) -> Routing:
        err = next(iter(self.members.values())).module.input_error(x)  # the gate reads the members' inputs
        if err is not None:
            raise RouterMismatch(err)
        x = np.asarray(x)
        keep = self.inside(x)
        out = float(1.0 - keep.mean()) if len(keep) else 0.0
        self.last_outside, self.last_declined = out, bool(out > self.decline)
        if self.last_declined:
            log.warning("%s: %.0f%% of these %d questions lie outside the training sets' support (> %.0f%%): the "
                        "router declines the set, every question takes the fallback (the training sets' fixed choice)",
                        self.spec.get("_dir", "source experts"), 100 * out, len(keep), 100 * self.decline)
            keep = np.zeros_like(keep)
        return self._decide(self.logits(x), decision, keep)

    def route_notes(self) -> list[str]:
        return [self.support_note()]

    def support_note(self) -> str:
        """One report line on the last :meth:`route`: the share outside the support, and whether it declined."""
        s = self.support
        txt = (f"source experts ({' + '.join(self.gate.names)}): {self.last_outside:.0%} of these questions lie outside "
               f"the training sets' support (mean distance to the {s.k} nearest training questions beyond their own "
               f"{s.quantile:.0%} quantile) and take the fallback")
        if self.last_declined:
            txt += f"; more than {self.decline:.0%} do, so the router declined the set (every question takes the fallback)"
        return txt

    # -- persistence ----------------------------------------------------------------------------
    def _write(self, tmp: Path, spec: dict) -> None:
        g, s = self.gate, self.support
        spec = {**spec, "gate": {"names": g.names}, "support": {"k": s.k, "quantile": s.quantile, "threshold": s.threshold},
                "decline": self.decline}
        self._write_spec(tmp, spec)
        save_file({"gate_mean": torch.from_numpy(g.mean), "gate_std": torch.from_numpy(g.std),
                   "gate_coef": torch.from_numpy(np.ascontiguousarray(g.coef)),
                   "gate_intercept": torch.from_numpy(np.ascontiguousarray(g.intercept)),
                   "support_ref": torch.from_numpy(np.ascontiguousarray(s.ref))}, tmp / "experts.safetensors")
        for name, m in self.members.items():
            d = tmp / "members" / name
            d.mkdir(parents=True)
            m._write(d, {**{k: v for k, v in m.spec.items() if not k.startswith("_")}, "format": spec["format"]})
            seal_holder(d, "router.json")  # each member sealed on its own; the whole directory by TrainedRouter.save

    @classmethod
    def from_files(cls, directory: Path, spec: dict) -> "ExpertsRouter":
        """The experts router in ``directory`` (its manifest already verified), from ``spec``."""
        path = directory / "experts.safetensors"
        try:
            t = {k: v.numpy() for k, v in load_file(path).items()}
        except Exception as e:  # a truncated or foreign file (SafetensorError) that passed the manifest
            raise ArtifactError(f"{path}: cannot be read ({e}); the router directory is damaged, retrain it") from None
        try:
            names = list(spec["gate"]["names"])
            bad = [n for n in names if not isinstance(n, str) or not n or Path(n).name != n or n.startswith(".")]
            if bad:
                raise ValueError(f"gate.names holds {bad[0]!r}, not a member folder name")
            sup = spec["support"]
            gate = SourceGate(names, t["gate_mean"], t["gate_std"], t["gate_coef"], t["gate_intercept"])
            support = Support(t["support_ref"], int(sup["k"]), float(sup["quantile"]), float(sup["threshold"]))
            members = {n: TrainedRouter._from_files(directory / "members" / n) for n in names}
        except (KeyError, TypeError, OSError, ValueError) as e:
            raise ArtifactError(f"{directory}: not a complete source-experts router ({e!r}); retrain it") from e
        if not all(np.isfinite(a).all() for a in t.values()):
            raise ArtifactError(f"{path}: non-finite values; the router is unusable, retrain it")
        spec["_dir"] = str(directory)
        return cls(members, gate, support, float(spec.get("decline", 0.5)), spec)


def build_experts(members: dict[str, TrainedRouter], xs: Sequence[np.ndarray], utilities: Sequence[np.ndarray],
                  vals: Sequence[np.ndarray], trains: Sequence[np.ndarray], seed: int, support: float, decline: float,
                  k: int, spec: dict) -> ExpertsRouter:
    """An experts router over ``members`` (name -> router trained on that source alone).

    ``xs`` each source's router inputs [Q_s, D]; ``utilities`` each source's scaled utilities
    [Q_s, L] (:func:`mogg.routing.fitting.sources.stack_sources`); ``trains``/``vals`` the rows each member
    trained on (with the per-set repeats) and validated on. The fallback is the best mean over the
    weighted rows (the pooled router's choice); the fallback margin is tuned, as for one router, on
    the members' validation rows, which no member trained on.
    """
    names = list(members)
    gate = SourceGate.fit(xs, names, seed)
    sup = Support.fit(np.concatenate([gate.standardise(a) for a in xs]), k, support)
    first = members[names[0]]
    seen = np.concatenate([u[np.r_[tr, va]] for u, tr, va in zip(utilities, trains, vals)])
    fallback = objectives.best_fixed_level(seen)
    router = ExpertsRouter(members, gate, sup, decline, {})
    router.spec = {**{k_: v for k_, v in first.spec.items() if not k_.startswith("_") and k_ not in ("training",)},
                   **spec, "network": {"kind": "experts", "in_dim": first.spec["network"]["in_dim"],
                                       "n_levels": first.spec["network"]["n_levels"], "sources": names}}
    xv = np.concatenate([np.asarray(a)[v] for a, v in zip(xs, vals)])
    uv = np.concatenate([u[v] for u, v in zip(utilities, vals)])
    margin = 0.0
    if len(xv):
        z = router.logits(xv)
        pref = objectives.preference(router.objective, z)
        margin = objectives.tune_margin(objectives.advantage(pref, fallback), z.argmax(axis=1), uv, fallback)
    router.spec["decision"] = {"rule": first.decision["rule"], "fallback_level": fallback, "margin": margin}
    router.spec["prior"] = np.mean([m.spec["prior"] for m in members.values()], axis=0).tolist()
    log.info("source experts over %s: support threshold %.3f (q=%.2f, k=%d), fallback output %d, margin %.3f",
             " + ".join(names), sup.threshold, support, sup.k, fallback, margin)
    return router


def load_router(directory: Path) -> TrainedRouter:
    """Any router directory: a source-experts router, or one network (:meth:`TrainedRouter.load`)."""
    return TrainedRouter.load(Path(directory), {"experts": ExpertsRouter.from_files})
