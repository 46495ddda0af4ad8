"""The evidence selector, a budget-router kind in one package: it reads inside the chunk, scoring
each candidate unit (sentence) of every level's top chunks and reading the best prefix of its
ranking within the budget.

Its modules, named as the other kinds' are (a name means the same job in every kind): ``kind`` (its
knobs and the interface the spine calls: :class:`EvidenceSelectorKind`), ``scorer`` (the model that
scores: LightGBM), ``folds`` (the cross-fit), ``policy`` (its frontier rows: the selector, route +
trim, the sentence oracle), ``final`` (the final fit on this set), ``transfer`` (the fit on
``train_sources``, read on a new set), ``deploy`` (the deployed directory:
:class:`DeployedSelector`), ``session`` (``mogg-route`` on it); its own: ``candidates`` (the units a
question may read and their features), ``lexicon`` (their lexical statistics), ``plans``
(rankings, plan tables, the estimated F1, the sentence oracle), ``stage`` (candidates, features and
rows of one ladder), ``adapt`` (label-free adaptations to a new set). What it shares with the other
kinds lives beside it in :mod:`mogg.run.budget` or below (:mod:`mogg.routing.plans`,
:mod:`mogg.evaluation.frontier_guard`).

Names are imported lazily, so ``_target_: mogg.run.budget.selector.EvidenceSelectorKind`` loads
the kind on first use.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {"kind": ("EvidenceSelectorKind",)})
