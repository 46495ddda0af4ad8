"""The ground floor (layer 1): helpers every other layer may use, importing nothing of mogg.

``artifacts`` (atomic artifact directories, manifests, hashes, locks, build-or-load), ``text``
(tokens, sentences), ``segments`` (segment sums and ranks), ``metrics`` (token F1, TF-IDF,
aggregates), ``vectors`` (normalisation), ``runconfig`` (run-config checks, secrets out of argv),
``threads`` (one thread knob for torch, numba, faiss and BLAS).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ArtifactError": "artifacts",
    "cached": "artifacts",
    "config_hash": "artifacts",
    "atomic_path": "artifacts",
    "write_artifact": "artifacts",
    "read_manifest": "artifacts",
    "sha256_file": "artifacts",
    "strict_json": "artifacts",
    "tokenize": "text",
    "count_tokens": "text",
    "split_sentences": "text",
    "TEXT_VERSION": "text",
    "token_prf": "metrics",
    "tfidf_cosine": "metrics",
    "aggregate": "metrics",
    "l2_normalize": "vectors",
    "check_run_config": "runconfig",
    "configure_threads": "threads",
    "single_threaded": "threads",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
