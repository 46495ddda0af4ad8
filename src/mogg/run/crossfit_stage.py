"""The level routers' cross-fit of ``train.py`` (``router.fit=crossfit|both``): one router per fold
of one ladder's questions, trained together (:func:`mogg.routing.fitting.kfold.crossfit`), into
``checkpoints/<run>/<ladder>/`` (``fold<k>/`` + ``folds.json``), with ``train_manifest.json``
beside them (the run id, levels, inputs, objective and the run's config)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig

from mogg.core.runconfig import container
from mogg.prepared import Prepared
from mogg.routing.fitting.kfold import crossfit
from mogg.routing.kinds.base import RouterKind
from mogg.run.router_store import router_inputs, router_spec

log = logging.getLogger(__name__)


def crossfit_ladder(cfg: DictConfig, settings: RouterKind, trainer, name: str, prep: Prepared, out: Path) -> dict:
    """Cross-fit ladder ``name``'s level routers into ``out``: ``{"epochs": [per fold]}``."""
    # one run for all folds (they train as one model; losses per fold), with a stable id so a
    # requeued job continues the same wandb run instead of starting a new one
    logger = instantiate(cfg.logger, name=f"{cfg.run_name}-{name}-folds",
                         id=f"{cfg.run_name}-{name}-s{cfg.seed}-folds") if cfg.get("logger") else False
    info = crossfit(router_inputs(cfg, settings, prep), *prep.router_targets(), prep.questions, prep.query_ids,
                    cfg.n_folds, cfg.seed, settings, trainer, out, router_spec(cfg, name, prep), logger=logger)
    meta = {"data_key": prep.data_key, "run_id": info["run_id"], "levels": prep.ladder.level_names,
            "inputs": list(settings.inputs), "objective": settings.objective, "config": container(cfg)}
    (out / "train_manifest.json").write_text(json.dumps(meta, indent=1, default=str))
    log.info("cross-fitted %s routers in %s", name, out)
    return {"epochs": [f["epochs"] for f in info["folds"]]}
