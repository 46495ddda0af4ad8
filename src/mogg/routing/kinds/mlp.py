"""The MLP router (``router=mlp``, the default; ``router=paper`` and ``router=profiles`` are the
same kind with other knobs): an MLP over the feature matrix (:mod:`mogg.routing.networks.mlp`),
every fold of a cross-fit trained as one stacked model (:mod:`mogg.routing.networks.training`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mogg.routing.kinds.base import RouterKind


@dataclass
class MLPRouter(RouterKind):
    """The default router kind: its knobs are :class:`RouterKind`'s; the trainer's epochs,
    patience and batch size (``conf/trainer``) drive its fit."""

    def fit_networks(self, x, targets: Sequence[np.ndarray], fits: Sequence, trainer, ckpt_dir: Path | None,
                     logger=False, names: list[str] | None = None) -> list[tuple]:
        from mogg.routing.networks.training import fit_routers

        trained = fit_routers(x, list(targets), [f.train for f in fits], [f.val for f in fits], [f.seed for f in fits],
                              self.module_kwargs(), trainer, ckpt_dir, logger, names=names)
        return [(net, summary, None) for net, summary in trained]
