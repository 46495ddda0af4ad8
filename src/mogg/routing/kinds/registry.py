"""Which network class a saved router holds: ``router.json``'s ``network`` names it.

A network records its class as ``network.kind`` = ``"package.module:Class"`` (a kind added as
``docs/extending.md`` says writes :meth:`RouterNetwork.kind_path` there); the networks saved before
router kinds existed are found by their short names below, so their directories still load.
"""

from __future__ import annotations

import importlib

from mogg.core.artifacts import ArtifactError

# the short names of networks saved before router kinds existed (router.json's network.kind)
_SHORT = {
    "mlp": "mogg.routing.networks.mlp:RouterMLP",
    "committee": "mogg.routing.experimental.committee:RouterCommittee",
    "cross": "mogg.routing.experimental.cross:CrossRouter",
}


def network_path(net: dict) -> str:
    """The import path of the network class in a ``router.json`` network spec."""
    kind = net.get("kind")
    if kind is None:  # an MLP, or (with members) a bagged committee of MLPs: saved without a kind
        kind = "committee" if int(net.get("members", 1)) > 1 else "mlp"
    return _SHORT.get(kind, kind)


def network_class(net: dict, where: str = "router.json"):
    """The :class:`mogg.routing.kinds.base.RouterNetwork` subclass a network spec names."""
    from mogg.routing.kinds.base import RouterNetwork

    path = network_path(net)
    module, _, name = str(path).partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ArtifactError(f"{where}: network kind {path!r} cannot be imported ({e}); install the package that "
                            "defines it, or retrain the router") from None
    if not (isinstance(cls, type) and issubclass(cls, RouterNetwork)):
        raise ArtifactError(f"{where}: network kind {path!r} is not a router network (mogg.routing.kinds.base."
                            "RouterNetwork); retrain the router")
    return cls
