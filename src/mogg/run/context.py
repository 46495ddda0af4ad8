"""What a run's stages and router kinds read of its config, built once (``app.train`` /
``app.evaluate``): the seed, the folds, the validation share, threads, where artifacts live, the
encoder node, whether it trains on other sets, and the two things only the whole config can give
(the command that retrains this run, a router directory's spec). A budget-router kind gets this
context and its own node, never the whole config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig


@dataclass(frozen=True)
class RunContext:
    """One run's settings as the router kinds read them (see the module doc)."""

    run_name: str
    seed: int
    n_folds: int
    val_fraction: float  # the validation share of a fit's training questions (trainer.val_fraction)
    threads: int | None  # a job's threads for LightGBM, torch, numba (mogg.core.threads)
    artifacts: Path | None  # the artifact store (paths.artifacts)
    encoder: Any = None  # the run's encoder node (what a kind reading encoder cosines instantiates)
    train_sources: tuple[str, ...] = ()  # the sets a transfer router trains on (train_sources), by name
    source_weights: dict = field(default_factory=dict)  # train_sources.<name>.weight
    use_router: bool = True  # evaluate.py reads the trained routers (false: baselines only)
    retrain: str = "python train.py"  # the command that retrains this run's routers
    spec: Callable[..., dict] = field(default=lambda name, prep, transfer=False: {}, repr=False, compare=False)

    def router_spec(self, name: str, prep, transfer: bool = False) -> dict:
        """A router directory's spec part from the data (levels, recipe, the components to rebuild,
        provenance): :func:`mogg.run.router_store.router_spec` for this run (``transfer``: a
        directory trained on other sets, which holds no corpus)."""
        return self.spec(name, prep, transfer)


def run_context(cfg: DictConfig) -> RunContext:
    """The run's :class:`RunContext` (the config is read here, once)."""
    from mogg.core.threads import check_threads
    from mogg.run.router_store import retrain_command, router_spec

    paths = cfg.get("paths") or {}
    return RunContext(
        run_name=str(cfg.run_name), seed=int(cfg.seed), n_folds=int(cfg.n_folds),
        val_fraction=float(cfg.trainer.val_fraction), threads=check_threads(cfg.get("threads")),
        artifacts=Path(paths["artifacts"]) if paths.get("artifacts") else None, encoder=cfg.get("encoder"),
        train_sources=tuple(str(s) for s in (cfg.get("train_sources") or {})),
        source_weights={str(s): float((n or {}).get("weight", 1.0)) for s, n in (cfg.get("train_sources") or {}).items()},
        use_router=bool(cfg.get("use_router", True)),
        retrain=retrain_command(cfg),
        spec=lambda name, prep, transfer=False: router_spec(cfg, name, prep, transfer))
