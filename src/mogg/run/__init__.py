"""What runs (layers 11-12): the shared pipeline and the stages the entry points compose.

``pipeline`` (ladder -> retrieval -> metrics -> labels -> features: :func:`prepare`),
``prepare_stage`` (components from config), ``app`` (``build``, ``train``, ``evaluate``),
``transfer_stage`` and ``frontier_stage`` (final routers, matched reading cost), ``router_store``
(a run's routers on disk), ``route`` (``mogg-route``).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "prepare": "pipeline",
    "prepare_all": "prepare_stage",
    "build": "app",
    "train": "app",
    "evaluate": "app",
    "train_final": "transfer_stage",
    "router_weights": "router_store",
    "checkpoint_dir": "router_store",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
