"""Lazy package exports: a package names what it holds without importing any of it.

A package ``__init__`` writes ``__all__, __getattr__, __dir__ = lazy_exports(__name__, {module: names})``;
``import mogg.routing`` then loads none of routing's modules (nor torch), and
``mogg.routing.fit_routers`` imports ``mogg.routing.networks.training`` on first use (PEP 562).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping


def lazy_exports(package: str, modules: Mapping[str, Iterable[str]]) -> tuple[list[str], Callable[[str], object],
                                                                       Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package``; ``modules`` maps a submodule to the names it exports."""
    pairs = [(name, module) for module, names in modules.items() for name in names]
    exports = dict(pairs)
    if len(exports) < len(pairs):
        raise ValueError(f"{package}: a name is exported twice")
    names = sorted(exports)

    def __getattr__(name: str) -> object:
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return names, __getattr__, __dir__
