"""The evidence selector, a budget-router kind in one package: it reads inside the chunk, scoring
each candidate unit (sentence) of every level's top chunks and reading the best prefix of its
ranking within the budget.

``kind`` (its knobs and the interface the spine calls: :class:`EvidenceSelectorKind`),
``candidates`` (the units a question may read and their features), ``scorer`` (the LightGBM
scorer and its cross-fit), ``plans`` (rankings, plan tables, the estimated F1, the sentence
oracle), ``stage`` (candidates, features and rows of one ladder), ``policy`` (its frontier rows: the
selector, route + trim, the sentence oracle), ``final`` (the deployable directory:
:class:`DeployedSelector`), ``session`` (``mogg-route`` on it). What it shares with the other kinds
lives below it (:mod:`mogg.routing.plans`, :mod:`mogg.evaluation.frontier_guard`,
:mod:`mogg.run.budget.shared`).

Names are imported lazily, so ``_target_: mogg.run.budget.selector.EvidenceSelectorKind`` loads
the kind on first use.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {"kind": ("EvidenceSelectorKind",)})
