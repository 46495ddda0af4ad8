"""Where a router directory's components are on this machine: ``--set`` overrides of the saved
component configs, corpus files re-rooted under this machine's data folder, and the cache.

``mogg-route`` (:mod:`mogg.run.route`) rebuilds a router's corpus, ladder and retrievers from the
configs saved in its directory; these functions make that work from any folder and on another
machine, checking every change before anything is built.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from mogg.core.artifacts import ArtifactError
from mogg.core.trusted import build, check_components, check_node

log = logging.getLogger(__name__)


def default_artifacts() -> Path:
    """Where ``mogg-route`` caches ladders and retriever state unless told (``--artifacts``):
    ``$MOGG_ARTIFACTS`` (what ``paths.artifacts`` defaults to for train.py and evaluate.py too), else
    the user's cache folder (:func:`mogg.core.artifacts.user_artifacts`): never ``./artifacts`` of
    whatever folder the command runs in unless asked."""
    from mogg.core.artifacts import user_artifacts

    return user_artifacts()


# What --set may change on another machine: where files are and how the same numbers are
# computed. Anything else (a ladder's unit size, BM25's k1, ...) would change what the router
# was trained on, and is refused before any index is built.
_MOVABLE = ("path", "paths", "backend", "device", "batch_size", "cache_dir", "name_or_path", "num_workers")


def apply_overrides(comps, overrides: Sequence[str]):
    """``key=value`` overrides applied to a router's saved component configs (list indices as in
    ``corpus.sources.0.path``), each checked first: well formed, an existing key, and one that
    may differ between machines (:data:`_MOVABLE`); errors name the override."""
    import yaml
    from omegaconf import OmegaConf

    comps = OmegaConf.create(OmegaConf.to_container(comps))
    for o in overrides:
        key, eq, raw = str(o).partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"--set {o!r}: expected KEY=VALUE, e.g. corpus.sources.0.path=/data/test_set.json")
        if OmegaConf.select(comps, key, default=_MISSING) is _MISSING:
            top = ", ".join(sorted(comps.keys()))
            raise ValueError(f"--set {o!r}: {key} is not in the router's saved components ({top})")
        if key.rsplit(".", 1)[-1] not in _MOVABLE:
            raise ValueError(f"--set {o!r}: {key} changes what the router was trained on; only file locations, "
                             f"backends and batch sizes may differ ({', '.join(_MOVABLE)})")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise ValueError(f"--set {o!r}: cannot parse the value ({e})") from None
        OmegaConf.update(comps, key, value, merge=False)
    return comps


_MISSING = object()


def check_corpus_paths(comps, data_dir: str | Path | None = None, named: Sequence[str] = (),
                       where: str = "the router directory"):
    """The corpus files a routing reads (:mod:`mogg.run.route_corpus`): those the user named here
    (``named``: the ``--set`` keys, e.g. ``corpus.sources.0.paths``) must exist; those the directory
    names are read only under this machine's data folder (``data_dir``, else ``MOGG_DATA_DIR``, else
    ``data``), re-rooted from the training machine's (saved as ``data_dir`` in the components), and
    anything else is refused before anything is built. Returns the (re-rooted) components."""
    from omegaconf import OmegaConf

    from mogg.run.route_corpus import data_folder, under_data_folder

    saved = comps.get("data_dir")
    local = data_folder(data_dir)
    sources = (comps.get("corpus") or {}).get("sources") or []
    for i, src in enumerate(sources):
        for key in ("path", "paths"):
            value = src.get(key) if hasattr(src, "get") else None
            if value is None:
                continue
            many = not isinstance(value, str)
            field = f"corpus.sources.{i}.{key}"
            found = []
            for p in ([value] if not many else list(value or [])):
                p = str(p)
                if field in named:  # the user's own path on this machine
                    if not (any(ch in p for ch in "*?[") or Path(p).exists()):
                        raise ValueError(f"--set {field}: {p} does not exist on this machine")
                    found.append(p)
                    continue
                try:
                    found.append(under_data_folder(p, saved, local, f"{where} ({field})"))
                    log.info("corpus file %s (%s) read under this machine's data folder: %s", p, field, found[-1])
                except FileNotFoundError as e:
                    raise ValueError(f"corpus file {p} ({field}) is not under this machine's data folder {local} ({e} "
                                     "does not exist); set MOGG_DATA_DIR (--data-dir) to the folder holding it, or "
                                     f"name the corpus with --corpus FILE (or --set {field}=NEW_PATH)") from None
            OmegaConf.update(comps, field, found if many else found[0], merge=False)
    return comps


def route_components(comps, overrides: Sequence[str] = (), data_dir: str | Path | None = None,
                     corpus: Sequence[str] = (), where: str = "the router directory"):
    """A directory's saved components as this machine routes them: ``--set`` overrides applied
    (:func:`apply_overrides`), the corpus the user names (``corpus``: ``--corpus`` files) in place of
    the directory's, else the directory's own read under this machine's data folder only
    (:func:`check_corpus_paths`); a transfer directory without ``corpus`` is refused."""
    from omegaconf import OmegaConf

    from mogg.run.route_corpus import NO_CORPUS, user_corpus

    comps = apply_overrides(comps, overrides)
    if corpus:  # the corpus this machine names replaces whatever the directory holds
        own = comps.get("corpus") or {}
        OmegaConf.update(comps, "corpus", user_corpus(corpus, bool(own.get("allow_gold", False))), merge=False)
        return comps
    if comps.get("corpus") is None:
        raise ValueError(f"{where} {NO_CORPUS}")
    named = [str(o).partition("=")[0].strip() for o in overrides]
    return check_corpus_paths(comps, data_dir, named, where)


def rebuild_index(components: dict, overrides: Sequence[str] = (), data_dir: str | Path | None = None,
                  artifacts: str | Path | None = "auto", where: str = "the router directory", also: dict | None = None,
                  corpus: Sequence[str] = ()):
    """A saved directory's components (``spec["components"]``) with ``overrides`` applied and the
    corpus files looked up under ``data_dir``, the artifact store (``"auto"``:
    :func:`default_artifacts`; None: no cache) and the ladder index rebuilt (or loaded) from them:
    ``(components, artifacts, index)``. Every router session starts here. A directory is data:
    before anything is built, every component node (and ``also``: {field: node} the session builds
    later, a recipe's encoder) must name allowed components with plain arguments
    (:mod:`mogg.core.trusted`; ``where`` names the file in errors). ``corpus``: the files of the
    corpus to route (``mogg-route --corpus``) in place of the directory's own; a transfer directory
    holds none and needs them (:mod:`mogg.run.route_corpus`)."""
    from omegaconf import OmegaConf

    from mogg.search import LadderIndex

    if not isinstance(components, dict):
        raise ArtifactError(f"{where}: components are missing; retrain the router")
    check_components(components, where, "components" if where.endswith("router.json") else "spec.components")
    for field, node in (also or {}).items():
        check_node(node, where, field)
    comps = route_components(OmegaConf.create(components), overrides, data_dir, corpus, where)
    art = default_artifacts() if artifacts == "auto" else Path(artifacts) if artifacts else None
    parts = [build(comps.get(k), where, f"components.{k}", art) for k in ("corpus", "ladder", "retriever")]
    index = LadderIndex.build(*parts, art)
    return comps, art, index


def build_encoder(node, where: str, field: str, artifacts: Path | None = None, **kwargs):
    """A saved encoder config (a recipe's, or the components'), built only if it names a mogg
    encoder with plain arguments (:func:`mogg.core.trusted.build`)."""
    return build(node, where, field, artifacts, **kwargs)


def check_levels(spec: dict, ladder) -> None:
    """Refuse a ladder rebuilt from a saved directory's components whose levels are not those the
    directory was trained for (``spec["levels"]``)."""
    if list(ladder.level_names) != list(spec["levels"]):
        raise ValueError(f"{spec.get('_dir')}: trained for levels {spec['levels']}; the ladder rebuilt from its "
                         f"components has {ladder.level_names}")


EMPTY_REASON = "no indexable word: the retrievers have nothing to search with"


def searchable(question: str, index=None) -> bool:
    """Whether the retrievers have anything to search ``question`` with: a term of the BM25
    tokenizer after stop words (:func:`mogg.core.text.tokenize`), the terms the index holds. A
    question of stop words only ("what is the of and to in?"), punctuation, emoji or nothing has
    none: BM25 scores every chunk 0 and its "top" chunks are arbitrary. ``index``: a
    :class:`mogg.search.LadderIndex` whose BM25 kept stop words (``stopwords: false``) makes them
    searchable; every router kind decides here."""
    from mogg.core.text import tokenize

    config = getattr(index, "retriever_config", None) or {}
    return bool(tokenize(question, stopwords=bool(config.get("stopwords", True))))


def route_with_empty(questions: Sequence[str], ids: Sequence[str], route, index=None):
    """Questions the retrievers cannot search (:func:`searchable`: only stop words, punctuation,
    emoji, blank) get an explicit empty record and a warning, never a context of unrelated chunks
    or a silently empty one: ``route(keep)`` routes the others (their positions ``keep``) and
    returns ``(records, summary)`` (summary None for a level router). Returns None when every
    question is searchable (the caller routes them all), else ``(records in order, summary with
    n_empty)``. ``index``: the session's ladder index (its retriever's stop-word setting)."""
    empty = {i for i, q in enumerate(questions) if not searchable(q, index)}
    if not empty:
        return None
    first = ids[min(empty)]
    log.warning("%d question(s) have no indexable word (only stop words, punctuation or symbols; e.g. id %s): "
                "empty records", len(empty), first)
    keep = [i for i in range(len(questions)) if i not in empty]
    routed, summary = route(keep) if keep else ([], {"n": 0})
    it = iter(routed)
    records = [{"id": ids[i], "question": questions[i], "context": [], "empty": True, "reason": EMPTY_REASON}
               if i in empty else next(it) for i in range(len(questions))]
    return records, (None if summary is None else {**summary, "n_empty": len(empty)})
