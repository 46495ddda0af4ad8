"""Budget-router kinds built from ``frontier.routers`` (``_target_``, the run's own config). A
deployed directory's kind is found again by :mod:`mogg.run.registry` (every router kind's)."""

from __future__ import annotations

import importlib

from mogg.run.budget.base import BudgetRouter

# The built-in kinds by slot (conf/frontier/routers/<slot>.yaml names the class as its _target_):
# Hydra's ConfigStore holds each one's knob defaults, read from its dataclass fields, as
# knobs/<slot> (mogg.run.frontier_settings.register_configs), which that file's defaults list names.
KINDS = {"actions": "mogg.run.budget.actions.ActionRouterKind",
         "selector": "mogg.run.budget.selector.EvidenceSelectorKind"}


def target_class(target: str):
    """The class a ``_target_`` names (``module.Class``), or ValueError."""
    module, _, name = str(target).rpartition(".")
    return getattr(importlib.import_module(module), name)


def budget_routers(node) -> list[BudgetRouter]:
    """``frontier.routers`` ({slot: {_target_, knobs}}) as kinds, in order; each learns its ``slot``."""
    import dataclasses

    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    if node is not None and not isinstance(node, dict) and not OmegaConf.is_dict(node):
        raise ValueError(f"frontier.routers={node!r}: a mapping {{kind: its node}}; choose kinds with "
                         "frontier/routers=[actions,selector]")
    out = []
    for slot, sub in (node or {}).items():
        if not isinstance(sub, dict) and not OmegaConf.is_dict(sub):
            raise ValueError(f"frontier.routers.{slot}={sub!r}: a budget router node ({{_target_: ..., knobs}}); "
                             "choose kinds with frontier/routers=[actions,selector]")
        if "_target_" not in sub:
            raise ValueError(f"frontier.routers.{slot} has no _target_ (the kind's class): choose kinds with "
                             "frontier/routers=[actions,selector] and set their knobs as frontier.routers.<kind>.<knob>=...")
        try:
            cls = target_class(sub["_target_"])
        except (ImportError, AttributeError, ValueError):
            raise ValueError(f"frontier.routers.{slot}._target_={sub['_target_']!r} cannot be imported "
                             "(a budget router kind's class, e.g. mogg.run.budget.actions.ActionRouterKind)") from None
        if not (isinstance(cls, type) and issubclass(cls, BudgetRouter)):
            raise ValueError(f"frontier.routers.{slot}: {sub['_target_']} is not a budget router kind "
                             "(a subclass of mogg.run.budget.base.BudgetRouter)")
        if dataclasses.is_dataclass(cls):
            known = [f.name for f in dataclasses.fields(cls)]
            extra = sorted(set(sub) - set(known) - {"_target_"})
            if extra:
                renamed = getattr(cls, "RENAMED", {}).get(extra[0])
                hint = f"; it was renamed frontier.routers.{slot}.{renamed}" if renamed else ""
                raise ValueError(f"frontier.routers.{slot}.{extra[0]} is not a knob of {cls.__name__} "
                                 f"({', '.join(known) or 'it has none'}){hint}")
        try:
            kind = instantiate(sub, _convert_="all")
        except InstantiationException as e:
            cause = str(e.__cause__ or e)
            raise ValueError(cause if cause.startswith(f"frontier.routers.{slot}") else
                             f"frontier.routers.{slot}: {cause}") from None
        kind.slot = str(slot)
        out.append(kind)
    return out
