"""Data: question sets and corpora behind one contract (``QAItem``, ``Document``).

``records`` (the contract), ``qa`` (MIRAGE, PubMedQA*, MedMCQA explanations, generic jsonl),
``squad`` (COVID-QA and other SQuAD-format sets), ``corpus`` (corpora, fingerprints, hostile-input
reading), ``medrag``/``statpearls`` (MedRAG corpora), ``leakage`` (the guard that keeps evaluated
answers out of the corpus), ``prepare``/``download`` (``mogg-prepare``: fetch with checksums).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "QAItem": "records",
    "Document": "records",
    "DataError": "errors",
    "MirageBenchmark": "qa",
    "PubMedQAStar": "qa",
    "MedMCQAExplained": "qa",
    "GenericQA": "qa",
    "SquadQA": "squad",
    "SquadPapers": "squad",
    "MedRAGJsonl": "corpus",
    "LeakReport": "leakage",
    "LeakageError": "leakage",
    "find_leaks": "leakage",
    "guard": "leakage",
    "download": "download",
    "RemoteFile": "download",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
