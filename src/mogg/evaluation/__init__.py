"""Evaluation: policies scored, reports and plots, reader accuracy, sweep collection.

``names`` (policy names, defined once), ``policies`` (every policy's selection scored:
``run_policies``, ``summarize``), ``report`` (metrics.json, results.md, plots), ``sections``
(transfer table, verdict, per-question records), ``budgets`` (equal-budget table), ``frontier`` +
``families`` + ``frontier_report`` (matched reading cost), ``prefix``, ``qa_accuracy`` (the LLM
reader's accuracy), ``collect`` (a sweep's reports into one table).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "PolicyResult": "policies",
    "run_policies": "policies",
    "score_selection": "policies",
    "summarize": "policies",
    "write_report": "report",
    "markdown_table": "report",
    "transfer_section": "sections",
    "verdict": "sections",
    "question_records": "sections",
    "budget_table": "budgets",
    "Family": "frontier",
    "pareto": "frontier",
    "frontier_evaluation": "frontier_report",
    "RouterFolds": "frontier_report",
    "read_policies": "qa_accuracy",
    "accuracy_section": "qa_accuracy",
    "collect": "collect",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
