"""Knobs declared once: a config dataclass's field is the only place a knob's name, default, check
and one-line description are written (issue 61).

A knob is a dataclass field made by :func:`knob`: its default, a :class:`Check` (what a value must
be, and the words that say so) and ``doc`` (what it does) sit in the field and its metadata.
:func:`check_knobs` (one generic ``__post_init__`` step) refuses a bad value in one line,
``<node>.<name>=<value>: <what it must be>``, and keeps the checked value's normal form (a tuple
for a list, sorted budgets). Everything else reads the field: the Hydra node's defaults
(:func:`defaults`, registered in Hydra's ConfigStore so a config file holds only ``_target_`` and
deliberate overrides), a deployed directory written before a knob existed (:func:`recorded`), the
docs' knob tables (:func:`knob_table`) and ``tests/core/test_knobs.py``, which fails where a knob's
default is written anywhere else.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """What a knob's value must be: ``ok(value)`` and ``says`` (the message after ``<node>.<name>=<value>:``);
    ``convert``: the value as kept once it passed (a tuple for a list, a normalised mapping)."""

    ok: Callable[[Any], bool]
    says: str
    convert: Callable[[Any], Any] | None = None


def knob(default: Any = dataclasses.MISSING, check: Check | None = None, doc: str = "", *,
         factory: Callable[[], Any] | None = None, **meta) -> Any:
    """A dataclass field that is a knob: its ``default`` (or ``factory`` for a mutable one), its
    ``check`` and its one-line ``doc``; ``meta``: more facts a kind reads (e.g. ``variant=True``)."""
    metadata = {"check": check, "doc": doc, **meta}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def knob_fields(cls) -> tuple[dataclasses.Field, ...]:
    """The knobs of a dataclass (class or instance): its fields made by :func:`knob`."""
    return tuple(f for f in dataclasses.fields(cls) if "check" in f.metadata)


def default_of(cls, name: str) -> Any:
    """Knob ``name``'s default as its field declares it (a fresh one for a factory)."""
    f = next((f for f in dataclasses.fields(cls) if f.name == name), None)
    if f is None:
        raise KeyError(f"{getattr(cls, '__name__', cls)} has no knob {name!r}")
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise KeyError(f"{cls.__name__}.{name} has no default")


def defaults(cls) -> dict[str, Any]:
    """Every knob's default, by name, as plain values (tuples as lists): the Hydra node of ``cls``."""
    def plain(v):
        return [plain(x) for x in v] if isinstance(v, (tuple, list)) else v

    return {f.name: plain(default_of(cls, f.name)) for f in knob_fields(cls)}


def recorded(values: Mapping | None, cls, name: str) -> Any:
    """Knob ``name`` as a deployed directory recorded it in ``values`` (its knobs at training); a
    directory written before the knob existed: the knob's own default, declared in ``cls``."""
    if values is not None and name in values:
        return values[name]
    return default_of(cls, name)


def accepts(f: dataclasses.Field, value) -> bool:
    """Whether knob field ``f``'s check passes ``value`` (a knob without a check takes anything)."""
    check: Check | None = f.metadata.get("check")
    if check is None:
        return True
    try:
        return bool(check.ok(value))
    except (TypeError, ValueError):
        return False


def check_knobs(obj, node: str) -> None:
    """Refuse (``ValueError``, one line: ``<node>.<name>=<value>: <says>``) the first knob of ``obj``
    whose value fails its field's :class:`Check`, in field order; keep each checked value's
    ``convert`` form."""
    for f in knob_fields(obj):
        check: Check | None = f.metadata["check"]
        if check is None:
            continue
        v = getattr(obj, f.name)
        if not accepts(f, v):
            raise ValueError(f"{node}.{f.name}={v!r}: {check.says}")
        if check.convert is not None:
            setattr(obj, f.name, check.convert(v))


def knob_table(cls, node: str) -> str:
    """A markdown table of ``cls``'s knobs (the docs' knob tables are this text: ``scripts/knob_tables.py``):
    one row per field, in field order, with its override, default and doc."""
    lines = ["| knob | default | what it sets |", "|---|---|---|"]
    for f in knob_fields(cls):
        doc = " ".join(f.metadata["doc"].split()).replace("|", "\\|")
        lines.append(f"| `{node}.{f.name}` | `{shown(default_of(cls, f.name))}` | {doc} |")
    return "\n".join(lines)


def shown(v) -> str:
    """A default as a Hydra override writes it (``null``, ``true``, ``[null,16]``, ``{}``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (tuple, list)):
        return "[" + ",".join(shown(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {shown(x)}" for k, x in v.items()) + "}"
    return str(v)


# -- common checks ---------------------------------------------------------------------------------


def is_int(v, minimum: int = 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def is_number(v, low: float = -math.inf, high: float = math.inf, low_open: bool = False) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return False
    return (v > low if low_open else v >= low) and v <= high


def count(says: str = "must be an integer >= 1", minimum: int = 1) -> Check:
    """An integer >= ``minimum``."""
    return Check(lambda v: is_int(v, minimum), says)


def flag(says: str = "must be true or false") -> Check:
    return Check(lambda v: isinstance(v, bool), says)


def one_of(choices, says: str | None = None) -> Check:
    """One of ``choices`` (said as ``one of (...)`` unless ``says``)."""
    return Check(lambda v: isinstance(v, str) and v in choices, says or f"one of {tuple(choices)}")


def number(says: str, low: float = -math.inf, high: float = math.inf, low_open: bool = False) -> Check:
    """A finite number in [low, high] (``low_open``: above ``low``)."""
    return Check(lambda v: is_number(v, low, high, low_open), says)
