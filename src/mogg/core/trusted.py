"""What a router directory may name: it is data, not code.

A router directory someone sends (a colleague's ``final/``, a paper's supplement) holds the configs
of the components it was trained with (corpus, ladder, retriever, encoder) and the kind of router it
is. Rebuilding them with a plain ``hydra.utils.instantiate`` would run any callable the files name
(``shutil.copyfile``, ``builtins.open``), and importing a kind named as ``"module:Class"`` would run
any module on ``sys.path``. So:

* :func:`check_node` accepts a component node only if every ``_target_`` in it is a mogg class on
  the allow-list (:data:`COMPONENTS`, or one a package registers under the entry-point group
  ``mogg.components``) and every argument is a plain value (string, number, boolean, null, or a
  list or map of those); nothing is imported to decide. :func:`build` then instantiates it, with
  the paths a component writes to (:data:`LOCAL_PATHS`) re-rooted under this machine's artifact
  store: a directory cannot choose where the machine that routes with it writes.
* :func:`resolve_kind` finds the class a directory names as its kind without importing anything
  the directory chose: a built-in kind, one a package registers under an entry-point group, or a
  class already loaded in this process (a kind the user's own code defined). Anything else is
  refused in one line naming the file and the field.

The directory's files are verified (manifest, seal: :mod:`mogg.core.seal`) before any of this runs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mogg.core.artifacts import ArtifactError
from mogg.core.bounded import COMPONENT_INTS, integer

# Every class a router directory's components may name (the paths the shipped configs write,
# conf/{corpus,ladder,retriever,encoder}/: tests/core/test_shared_dirs.py checks that each one is here).
COMPONENTS = frozenset({
    # corpora (mogg.data.corpus)
    "mogg.data.corpus.Corpus", "mogg.data.corpus.MultiCorpus", "mogg.data.corpus.MedRAGJsonl",
    "mogg.data.corpus.PlainText", "mogg.data.corpus.PubMedQAContexts", "mogg.data.corpus.MedMCQAExplanations",
    "mogg.data.squad.SquadPapers", "mogg.data.pages.PagesCorpus",
    # ladder builders and what they hold (policies, reports, chunkers, summarizers that run here)
    "mogg.ladders.MoGLadderBuilder", "mogg.ladders.mog.MoGLadderBuilder",
    "mogg.ladders.GraphLadderBuilder", "mogg.ladders.graph.GraphLadderBuilder",
    "mogg.ladders.raptor.RaptorLadderBuilder", "mogg.ladders.structural.StructuralLadderBuilder",
    "mogg.ladders.semantic.SemanticChunker", "mogg.ladders.summarizers.SummaryCache",
    "mogg.ladders.summarizers.ExtractiveSummarizer", "mogg.ladders.summarizers.HFCausalLMSummarizer",
    "mogg.ladders.raptor_plot.TreeReport", "mogg.ladders.graph_stats.GraphReport",
    "mogg.selection.tree.CollapsedTree", "mogg.selection.tree.TreeTraversal", "mogg.selection.mal.CumulativeSoftmax",
    # retrievers and encoders
    "mogg.retrieval.BM25Retriever", "mogg.retrieval.bm25.BM25Retriever",
    "mogg.retrieval.DenseRetriever", "mogg.retrieval.dense.DenseRetriever",
    "mogg.retrieval.bm25_sharded.ShardedBM25", "mogg.retrieval.hybrid.HybridRetriever",
    # its arguments are sizes and thread counts; its index lives in the artifact store
    "mogg.retrieval.bm25_disk.DiskBM25",
    "mogg.retrieval.rerank.RerankRetriever", "mogg.retrieval.rerank.CrossEncoderScorer",
    "mogg.retrieval.rerank.BiEncoderScorer", "mogg.encoders.HFEncoder",
})
# Named, but never rebuilt from a shared directory, with the reason given to the user.
REFUSED = {
    "mogg.ladders.summarizers.OpenAISummarizer":
        "it sends the corpus to the server the directory names; build this ladder on this machine with "
        "build.py (your own config) so the artifact store holds it, then route",
}
# Arguments that name where a component writes: re-rooted under this machine's artifact store
# (a subfolder of it), whatever the directory says. None: the argument is dropped.
LOCAL_PATHS = {"directory": "summary_cache", "cache_dir": None}
_META = {"_target_", "_partial_"}  # the only Hydra keys a directory's node may hold (_partial_: retrievers only)
# Components mogg builds as factories (the ladder index calls them per level): the one place a saved
# ``_partial_: true`` is accepted, as the shipped retriever configs write it; anywhere else it would
# hand a half-built object to code expecting the component (issue 59).
FACTORIES = frozenset({
    "mogg.retrieval.BM25Retriever", "mogg.retrieval.bm25.BM25Retriever", "mogg.retrieval.DenseRetriever",
    "mogg.retrieval.dense.DenseRetriever", "mogg.retrieval.bm25_sharded.ShardedBM25",
    "mogg.retrieval.bm25_disk.DiskBM25", "mogg.retrieval.hybrid.HybridRetriever", "mogg.retrieval.rerank.RerankRetriever",
})
_NEVER = {"trust_remote_code"}  # a model repository's own code would run
ENTRY_COMPONENTS = "mogg.components"  # entry-point group: a package's own components (value: "pkg.mod.Class")


def _entry_points(group: str) -> dict[str, str]:
    """{name: value} of the installed packages' entry points in ``group`` (nothing is imported)."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=group)}


def allowed_components() -> frozenset[str]:
    """:data:`COMPONENTS` and every class a package registers under ``mogg.components``."""
    extra = {v.replace(":", ".") for v in _entry_points(ENTRY_COMPONENTS).values()}
    return COMPONENTS | extra


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def check_node(node: Any, where: str, field: str, allowed: frozenset[str] | None = None) -> None:
    """Refuse (``ArtifactError`` naming ``where`` and the field) a component node that names anything
    but an allowed mogg class, or holds anything but plain values; imports nothing."""
    allowed = allowed_components() if allowed is None else allowed
    if isinstance(node, Mapping):
        if "_target_" in node:
            target = node["_target_"]
            if not isinstance(target, str) or target not in allowed:
                why = REFUSED.get(str(target)) if isinstance(target, str) else None
                raise ArtifactError(
                    f"{where}: {field}._target_={target!r} is refused: "
                    + (why if why else "a router directory may only name mogg components (corpora, ladders, "
                       "retrievers, encoders; mogg.core.trusted.COMPONENTS, or a package's 'mogg.components' "
                       "entry points)"))
            if "_partial_" in node and (node["_partial_"] is not True or target not in FACTORIES):
                raise ArtifactError(f"{where}: {field}._partial_={node['_partial_']!r} is refused: only a retriever is "
                                    "built as a factory (_partial_: true), and mogg decides that, not the directory")
        elif "_partial_" in node:
            raise ArtifactError(f"{where}: {field}._partial_ is refused: it steers nothing without a _target_")
        for key, value in node.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ArtifactError(f"{where}: {field} holds the key {key!r}; a component's arguments are names")
            if key.startswith("_") and key not in _META:
                raise ArtifactError(f"{where}: {field}.{key} is refused: only _target_ and _partial_ may steer how a "
                                    "component is built")
            if key in _NEVER and value not in (None, False):
                raise ArtifactError(f"{where}: {field}.{key}={value!r} is refused: it would run a model "
                                    "repository's own code")
            if key in COMPONENT_INTS and value is not None:  # a token count, level or depth: bounded
                integer(value, where, f"{field}.{key}", *COMPONENT_INTS[key])
            if key not in _META:
                check_node(value, where, f"{field}.{key}", allowed)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            check_node(value, where, f"{field}.{i}", allowed)
    elif not _plain(node):
        raise ArtifactError(f"{where}: {field} holds a {type(node).__name__}; a component's arguments are plain values")
    elif isinstance(node, str) and "${" in node:
        # an OmegaConf interpolation would be resolved when built: resolvers read the environment
        raise ArtifactError(f"{where}: {field}={node!r} is refused: interpolations are not resolved from a router "
                            "directory (its components are saved resolved)")


def check_components(components: Any, where: str, field: str = "components") -> None:
    """:func:`check_node` over a saved ``components`` map (corpus, ladder, retriever, encoder, k, ...)."""
    if components is None:
        return
    if not isinstance(components, Mapping):
        raise ArtifactError(f"{where}: {field} must be a map of component configs; retrain the router")
    check_node(components, where, field)


def _rerooted(node: Any, local: Path | None) -> Any:
    """``node`` with every write location (:data:`LOCAL_PATHS`) moved under ``local`` (None: a fresh
    temporary folder for the process)."""
    import tempfile

    if isinstance(node, Mapping):
        out = {}
        for k, v in node.items():
            if k in LOCAL_PATHS and "_target_" in node:
                sub = LOCAL_PATHS[k]
                if sub is None:
                    continue
                root = local if local is not None else Path(tempfile.mkdtemp(prefix="mogg-route-"))
                out[k] = str(Path(root) / sub)
            else:
                out[k] = _rerooted(v, local)
        return out
    if isinstance(node, (list, tuple)):
        return [_rerooted(v, local) for v in node]
    return node


def build(node: Any, where: str, field: str, local: Path | None = None, **kwargs: Any) -> Any:
    """Check ``node`` (:func:`check_node`), re-root the paths it writes to under ``local`` (this
    machine's artifact store), and instantiate it; ``kwargs`` are this machine's own arguments."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    if node is None:
        return None
    plain = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else node
    check_node(plain, where, field)
    return instantiate(_rerooted(plain, local), **kwargs)


def resolve_kind(path: Any, builtin: Mapping[str, str], group: str, base: type, where: str, field: str) -> type:
    """The class ``path`` (``"package.module:Class"``) names, found without importing anything the
    directory chose: ``builtin`` (short or full names -> mogg's own classes, imported here), a
    package's entry points in ``group`` (installed code), or a class already loaded in this process
    (code the user ran). It must subclass ``base``. Else ``ArtifactError`` naming ``where`` and ``field``."""
    import importlib
    import inspect

    if not isinstance(path, str) or ":" not in path.strip(":"):
        raise ArtifactError(f"{where}: {field}={path!r} is not a kind (\"package.module:Class\"); retrain the router")
    full = builtin.get(path, path)
    module, _, name = full.partition(":")
    cls = None
    if full in builtin.values():
        cls = getattr(importlib.import_module(module), name, None)
    elif path in _entry_points(group) or full in _entry_points(group).values():
        target = _entry_points(group).get(path, full)
        mod, _, attr = target.partition(":")
        cls = getattr(importlib.import_module(mod), attr, None)
    elif module in sys.modules:  # already loaded by the user's own code: nothing new runs
        cls = getattr(sys.modules[module], name, None)
    if cls is None:
        raise ArtifactError(
            f"{where}: {field}={path!r} is not a known kind: nothing a router directory names is imported; a kind "
            f"of your own is found when its package registers it (entry-point group '{group}') or your code has "
            "loaded it")
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ArtifactError(f"{where}: {field}={path!r} is not a {base.__name__}; retrain the router")
    if (cls is base and base is not object) or inspect.isabstract(cls):
        raise ArtifactError(f"{where}: {field}={path!r} is an abstract kind (the interface, not a router); retrain "
                            "the router")
    return cls
