"""Budget-router kinds by name: built from ``frontier.routers`` (``_target_``), and found again from a
deployed directory's ``deploy.json``.

A deployed directory names its kind as ``"kind": "package.module:Class"``; the two kinds deployed
before that field existed are known by their ``format`` (:data:`FORMATS`). A directory is data: its
kind is looked up only after its files are verified, and the lookup imports nothing it names.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from mogg.core.artifacts import ArtifactError, read_manifest
from mogg.core.seal import check_seal
from mogg.core.trusted import resolve_kind
from mogg.run.budget.base import BudgetRouter

DEPLOY = "deploy.json"
FORMATS = {  # deploy.json formats written before deployed directories named their kind
    "mogg-action-router/1": "mogg.run.budget.actions:ActionRouterKind",
    "mogg-evidence-selector/1": "mogg.run.budget.selector:EvidenceSelectorKind",
}


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
        module, _, name = str(sub["_target_"]).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
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
                raise ValueError(f"frontier.routers.{slot}.{extra[0]} is not a knob of {cls.__name__} "
                                 f"({', '.join(known) or 'it has none'})")
        try:
            kind = instantiate(sub, _convert_="all")
        except InstantiationException as e:
            cause = str(e.__cause__ or e)
            raise ValueError(cause if cause.startswith(f"frontier.routers.{slot}") else
                             f"frontier.routers.{slot}: {cause}") from None
        kind.slot = str(slot)
        out.append(kind)
    return out


def kind_class(path: str, where: str = DEPLOY) -> type[BudgetRouter]:
    """The kind ``"package.module:Class"`` names, found without importing anything a directory chose
    (:func:`mogg.core.trusted.resolve_kind`): the kinds shipped here, a package's entry points in the group
    ``mogg.budget_kinds``, or a class the user's code has loaded."""
    builtin = {v: v for v in FORMATS.values()}
    return resolve_kind(path, builtin, "mogg.budget_kinds", BudgetRouter, where, "kind")


def deployed_kind(directory: Path) -> type[BudgetRouter] | None:
    """The kind of a deployed budget router's ``directory`` (None: not one, e.g. a level router).

    The directory is data: its files are verified against the manifest and ``deploy.json`` against
    its seal (:mod:`mogg.core.seal`) before the kind it names is looked up, and that lookup imports
    nothing the directory chose."""
    d = Path(directory)
    p = d / DEPLOY
    if not p.is_file():
        return None
    read_manifest(d)  # every file against its sha256, before anything it names is looked up
    try:
        deploy = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ArtifactError(f"{p}: unreadable ({e}); retrain the router") from None
    if not isinstance(deploy, dict):
        raise ArtifactError(f"{p}: expected a JSON object; retrain the router")
    check_seal(d, DEPLOY, deploy)
    path = deploy.get("kind") or FORMATS.get(deploy.get("format"))
    if path is None:
        raise ArtifactError(f"{p}: names no kind (format {deploy.get('format')!r}); retrain the router")
    return kind_class(path, str(p))
