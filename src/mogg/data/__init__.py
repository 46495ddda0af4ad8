"""Data: question sets and corpora behind one contract (``QAItem``, ``Document``).

``records`` (the contract), ``qa`` (MIRAGE, PubMedQA*, MedMCQA explanations, generic jsonl),
``squad`` (COVID-QA and other SQuAD-format sets), ``corpus`` (corpora, fingerprints, hostile-input
reading), ``medrag``/``statpearls`` (MedRAG corpora), ``leakage`` (the guard that keeps evaluated
answers out of the corpus), ``prepare``/``download`` (``mogg-prepare``: fetch with checksums).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "records": ("QAItem", "Document"),
    "errors": ("DataError",),
    "qa": ("MirageBenchmark", "PubMedQAStar", "PubMedQALabelled", "MedMCQAExplained", "GenericQA"),
    "squad": ("SquadQA", "SquadPapers"),
    "corpus": ("MedRAGJsonl",),
    "leakage": ("LeakReport", "LeakageError", "find_leaks", "guard"),
    "download": ("download", "RemoteFile"),
})
