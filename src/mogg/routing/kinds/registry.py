"""Which network class a saved router holds: ``router.json``'s ``network`` names it.

A network records its class as ``network.kind`` = ``"package.module:Class"`` (a kind added as
``docs/extending.md`` says writes :meth:`RouterNetwork.kind_path` there); the networks saved before
router kinds existed are found by their short names below, so their directories still load.

A router directory is data: the class is found without importing anything it names
(:func:`mogg.core.trusted.resolve_kind`): mogg's own networks, a package's entry points in the
group ``mogg.router_networks``, or a class the user's code has already loaded.
"""

from __future__ import annotations

from mogg.core.trusted import resolve_kind

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
    from mogg.routing.networks.base import RouterNetwork

    builtin = {**_SHORT, **{v: v for v in _SHORT.values()}}
    return resolve_kind(network_path(net), builtin, "mogg.router_networks", RouterNetwork, where, "network.kind")
