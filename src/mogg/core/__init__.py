"""The ground floor (layer 1): helpers every other layer may use, importing nothing of mogg.

``artifacts`` (atomic artifact directories, manifests, hashes, locks, build-or-load), ``text``
(tokens, sentences), ``segments`` (segment sums and ranks), ``metrics`` (token F1, TF-IDF,
aggregates), ``vectors`` (normalisation), ``runconfig`` (run-config checks, secrets out of argv),
``threads`` (one thread knob for torch, numba, faiss and BLAS), ``exports`` (lazy package exports),
``gcpolicy`` (collector settings for a job), ``slots`` (at most N jobs computing at once on a machine),
``seal`` (a router directory's decisions bound to its weights), ``trusted`` (what a router
directory may name: mogg components with plain arguments, kinds looked up without an import),
``text_store`` (vectors kept by a text's digest: each text embedded once, ever), ``flags``
(command-line flags checked before any work), ``disk`` (a full or read-only disk as one line),
``bounded`` (a directory's JSON within depth and size limits, its numbers within bounds).

Names are imported lazily (``__getattr__``), so importing this package loads none of its modules.
"""

from __future__ import annotations

from mogg.core.exports import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "artifacts": ("ArtifactError", "cached", "config_hash", "atomic_path", "write_artifact", "read_manifest",
                   "sha256_file", "strict_json"),
    "text": ("tokenize", "count_tokens", "split_sentences", "TEXT_VERSION"),
    "metrics": ("token_prf", "tfidf_cosine", "aggregate"),
    "vectors": ("l2_normalize",),
    "exports": ("lazy_exports",),
    "runconfig": ("check_run_config",),
    "threads": ("configure_threads", "single_threaded"),
    "gcpolicy": ("configure_gc",),
    "slots": ("job_slot",),
})
