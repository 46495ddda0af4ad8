"""Every router kind a directory can hold, found from the directory: one registry for ``mogg-route``.

A deployed budget router's ``deploy.json`` names its kind (``"kind": "package.module:Class"``; the two
kinds deployed before that field existed are known by their ``format``, :data:`FORMATS`); a
directory with ``router.json`` and no ``deploy.json`` is a level router (:class:`~mogg.run.level_router.LevelRouter`,
whose network kind ``router.json`` names in turn). Each kind declares what ``mogg-route`` needs:
``TITLE``, ``ROUTE_FLAGS`` (the options its session takes; ``ROUTE_CHOICES``, where one takes words: the words
it takes; ``ROUTE_NEEDS``, where one applies only with another: that one), ``session(directory, artifacts,
overrides, data_dir, **flags)`` whose ``route(questions, ids, **flags)`` gives ``(records, summary)``,
and ``summary_line(summary)``. ``mogg-route`` asks this registry and never branches on a kind.

A directory is data: its files are verified against the manifest and its decisions against their
seal (:mod:`mogg.core.seal`) before the kind it names is looked up, and the lookup imports nothing
the directory chose (:func:`mogg.core.trusted.resolve_kind`).
"""

from __future__ import annotations

from pathlib import Path

from mogg.core.artifacts import ArtifactError, read_manifest
from mogg.core.bounded import read_json
from mogg.core.seal import check_seal
from mogg.core.trusted import resolve_kind

DEPLOY = "deploy.json"
FORMATS = {  # deploy.json formats written before deployed directories named their kind
    "mogg-action-router/1": "mogg.run.budget.actions:ActionRouterKind",
    "mogg-evidence-selector/1": "mogg.run.budget.selector:EvidenceSelectorKind",
}
LEVEL_ROUTER = "mogg.run.level_router:LevelRouter"  # a directory holding router.json


def kind_class(path: str, where: str = DEPLOY) -> type:
    """The budget-router kind ``"package.module:Class"`` names, found without importing anything a
    directory chose (:func:`mogg.core.trusted.resolve_kind`): the kinds shipped here, a package's
    entry points in the group ``mogg.budget_kinds``, or a class the user's code has loaded."""
    from mogg.run.budget.base import BudgetRouter

    builtin = {v: v for v in FORMATS.values()}
    return resolve_kind(path, builtin, "mogg.budget_kinds", BudgetRouter, where, "kind")


def deployed_kind(directory: Path) -> type:
    """The kind of the router in ``directory``: a budget-router kind (``deploy.json``) or the level
    router (``router.json``); anything else is refused naming the directory.

    The directory is data: its files are verified against the manifest and ``deploy.json`` against
    its seal (:mod:`mogg.core.seal`) before the kind it names is looked up, and that lookup imports
    nothing the directory chose."""
    d = Path(directory)
    p = d / DEPLOY
    if not p.is_file():
        if (d / "router.json").is_file():
            return resolve_kind(LEVEL_ROUTER, {LEVEL_ROUTER: LEVEL_ROUTER}, "mogg.router_kinds", object, str(d), "kind")
        raise ArtifactError(f"{d}: not a router directory (no router.json or deploy.json); train one with "
                            "`python train.py ... router.fit=all`")
    read_manifest(d)  # every file against its sha256, before anything it names is looked up
    deploy = read_json(p)  # within the depth and size any deploy.json has
    if not isinstance(deploy, dict):
        raise ArtifactError(f"{p}: expected a JSON object; retrain the router")
    check_seal(d, DEPLOY, deploy)
    path = deploy.get("kind") or FORMATS.get(deploy.get("format"))
    if path is None:
        raise ArtifactError(f"{p}: names no kind (format {deploy.get('format')!r}); retrain the router")
    return kind_class(path, str(p))
