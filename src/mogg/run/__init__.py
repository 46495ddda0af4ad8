"""What runs (layers 11-12): the shared pipeline and the stages the entry points compose.

``pipeline`` (ladder -> retrieval -> metrics -> labels -> features: :func:`prepare`),
``prepare_stage`` (components from config), ``app`` (``build``, ``train``, ``evaluate``),
``crossfit_stage`` (the level routers' cross-fit), ``transfer_stage`` and ``frontier_stage`` (final
routers, matched reading cost), ``router_store``
(a run's routers on disk), ``route`` (``mogg-route``).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "pipeline": ("prepare",),
    "prepare_stage": ("prepare_all",),
    "app": ("build", "train", "evaluate"),
    "transfer_stage": ("train_final",),
    "router_store": ("router_weights", "checkpoint_dir"),
})
