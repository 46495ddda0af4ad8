"""Option pairs that cannot work together, refused before any work: the check runs where the
config is validated, not where the conflict would surface minutes later."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from mogg.core.runconfig import check_run_config
from mogg.routing.kinds.base import RouterKind
from mogg.run.pipeline import profiles_label

FIT_ALL_IN_SET = ("router.fit=all trains one router on every question of this set, so it cannot be evaluated on them: "
                  "evaluate it on another set (experiment=<B> router.checkpoint=...), set train_questions, or use "
                  "router.fit=crossfit|both")


def check_run_options(cfg: DictConfig, stage: str) -> None:
    """The run-level knobs (:func:`mogg.core.runconfig.check_run_config`), then the option pairs the
    config alone shows cannot work, at the start of ``train.py`` and ``evaluate.py``: ``router=profiles``
    with soft labels other than ``labels=metric`` was refused by the pipeline after the ladders were
    built, searched and scored (issue 61)."""
    check_run_config(cfg, stage)
    profiles = OmegaConf.select(cfg, "router.profiles")
    source = OmegaConf.select(cfg, "labels.source")
    if profiles and source is not None and source != "metric":
        raise ValueError(profiles_label(source))


def check_evaluable(cfg: DictConfig, settings: RouterKind, sources: dict) -> None:
    """Refuse an evaluation with no router to report: ``router.fit=all`` trains on every question of
    this set, and nothing trained elsewhere is applied (no ``router.checkpoint``, ``train_questions``
    or ``sources``: ``train_sources`` as :func:`mogg.run.router_store.source_nodes` reads them).
    :func:`mogg.run.router_store.router_weights` finds the same once the data is prepared;
    ``train.py ... evaluate_after=true`` found it only after the training (36 s, issue 61)."""
    if cfg.get("use_router", True) is False or settings.fit != "all" or settings.checkpoint:
        return
    if not sources and cfg.get("train_questions") is None:
        raise ValueError(FIT_ALL_IN_SET)
