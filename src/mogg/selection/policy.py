"""The one interface of a ladder's own selection policies (its builder's ``policies`` hook:
RAPTOR's collapsed tree and tree traversal, MAL's cumulative softmax).

Every hook gets the same typed :class:`PolicyInputs` and returns a :class:`Selection`; a hook
reads the fields it needs. ``fill_budget`` is explicit about the one override the spine makes:
in an equal-budget comparison every policy is filled to the comparison's token budget instead of
its own (a tree's ``token_budget``, MAL's ``C``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mogg.ladders.base import Ladder
from mogg.search import Hits
from mogg.selection.mog import Selection


@dataclass(frozen=True)
class PolicyInputs:
    """What a ladder policy may read: the ladder, its per-level hits [Q, L, k_r], the questions,
    the number of snippets ``k``, the builder (a tree's encoder), the artifact store, and
    ``fill_budget`` (tokens; None = the policy's own budget)."""

    ladder: Ladder
    hits: Hits
    questions: Sequence[str]
    k: int
    builder: Any
    artifacts: Path | None = None
    fill_budget: int | None = None


@runtime_checkable
class SelectionPolicy(Protocol):
    """A ladder's own selection policy."""

    def select(self, inputs: PolicyInputs) -> Selection: ...
