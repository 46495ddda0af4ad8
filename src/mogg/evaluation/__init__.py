"""Evaluation: policies scored, reports and plots, reader accuracy, sweep collection.

``names`` (policy names, defined once), ``policies`` (every policy's selection scored:
``run_policies``, ``summarize``), ``report`` (metrics.json, results.md, plots), ``sections``
(transfer table, verdict, per-question records), ``budgets`` (equal-budget table), ``frontier`` +
``families`` + ``frontier_guard`` (the guard and the interface a budget router's rows implement) + ``frontier_report`` (matched reading cost), ``prefix``, ``qa_accuracy`` (the LLM
reader's accuracy), ``collect`` (a sweep's reports into one table).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "policies": ("PolicyResult", "run_policies", "score_selection", "summarize"),
    "report": ("write_report", "markdown_table"),
    "sections": ("transfer_section", "verdict", "question_records"),
    "budgets": ("budget_table",),
    "frontier": ("Family", "pareto"),
    "frontier_guard": ("BudgetPolicy", "Learned"),
    "frontier_report": ("frontier_evaluation",),
    "qa_accuracy": ("read_policies", "accuracy_section"),
    "collect": ("collect",),
})
