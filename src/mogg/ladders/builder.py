"""What every ladder builder is: a config, a build, and the hooks the shared spine calls.

The spine (pipeline, evaluation, sharding, app) never asks which method a builder implements; it
asks the builder:

* ``config()``: what the ladder artifact depends on (its key);
* ``build(documents)``: the :class:`~mogg.ladders.base.Ladder`;
* ``policies``: extra selection policies only this ladder has (RAPTOR's collapsed tree), each a
  :class:`mogg.selection.policy.SelectionPolicy` (``select(inputs: PolicyInputs) -> Selection``);
  they come from the method's config file (``_target_``), so this layer imports no policy code;
* ``reports``: report sections only this ladder has (graph statistics, the tree plot), each a
  callable ``(name, ladder, out_dir) -> (stats dict, markdown lines)``;
* ``document_local``: every chunk lies inside one document, so shards build independently and
  concatenate; ``shard_stages``: the map/reduce stages a sharded build runs (a graph links nodes
  across shards, so it needs a node stage and a kNN stage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mogg.data.records import Document
from mogg.ladders.base import Ladder


class LadderBuilder:
    """Base class of the ladder builders (see the module doc for the contract)."""

    method: str = "ladder"
    document_local: bool = True
    shard_stages: tuple[str, ...] = ("ladder",)

    def __init__(self, policies: Mapping[str, Any] | None = None, reports: Sequence[Any] | None = None) -> None:
        self.policies: dict[str, Any] = dict(policies or {})
        self.reports: list[Any] = list(reports or [])
        for name, p in self.policies.items():
            if not hasattr(p, "select"):
                raise TypeError(f"policy {name!r} of a {self.method} ladder has no select(): {p!r}")
        for r in self.reports:
            if not callable(r):
                raise TypeError(f"report hook {r!r} of a {self.method} ladder is not callable")

    def config(self) -> dict:
        """Build-defining parameters (JSON-able): the ladder artifact's key. Hooks are not part of it."""
        raise NotImplementedError

    def build(self, documents: Sequence[Document], show_progress: bool = False) -> Ladder:
        raise NotImplementedError
