"""What a trained router's network answers, whatever its kind: the network half of the router-kind
interface (:class:`mogg.routing.kinds.base.RouterKind` is the other half), below the kinds that
train networks and the networks themselves."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np


class RouterNetwork:
    """What a trained router's network answers (a mixin beside ``torch.nn.Module``).

    ``REQUIRED``: the ``hparams`` keys ``router.json`` must hold; :meth:`from_hparams` an
    untrained network of that shape (the weights are loaded after); :meth:`logits` the outputs
    z float64 [Q, L] for inputs; :meth:`input_error` why inputs do not fit (None when they do);
    :meth:`route_inputs` what a saved router reads for new questions.
    """

    REQUIRED: tuple[str, ...] = ("in_dim", "n_levels", "hidden", "dropout")

    @classmethod
    def kind_path(cls) -> str:
        """``"package.module:Class"``: what a new network writes as ``hparams["kind"]`` so that
        :func:`mogg.routing.kinds.registry.network_class` finds it again."""
        return f"{cls.__module__}:{cls.__qualname__}"

    @classmethod
    def from_hparams(cls, net: dict):
        raise NotImplementedError

    def logits(self, x) -> np.ndarray:
        raise NotImplementedError

    def input_error(self, x) -> str | None:
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.hparams["in_dim"]:
            return f"router inputs have shape {x.shape}; the router expects [Q, {self.hparams['in_dim']}]"
        return None

    @classmethod
    def route_inputs(cls, net: dict, features: Callable[[], np.ndarray], questions: Sequence[str],
                     contexts: Callable[[], list[list[str]]], artifacts: Path | None):
        """A saved router's inputs for ``questions``: ``features()`` its recipe's feature matrix
        [Q, D], ``contexts()`` per question, per level, the text that level's fixed top-k hands
        the reader [Q][L] (both computed only when asked for)."""
        return features()
