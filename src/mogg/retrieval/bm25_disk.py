"""BM25 where one machine's memory ends: a per-level index in tantivy, built in bounded memory and
searched memory-mapped.

Why tantivy (docs/benchmarks.md, "A BM25 engine on disk", measured side by side with bm25s
memory-mapped and mogg's in-memory kernel): its writer flushes segments to disk whenever a fixed
heap budget fills, so a build's memory does not grow with the corpus; a search memory-maps the
segments and reads only the postings blocks of the query's terms, skipping with block-max WAND
what cannot enter the top k; and an index is a list of self-contained segments, so shard indexes
become one index by listing their segments in one ``meta.json`` (files hard-linked, nothing
re-read or re-written) and the engine searches them with corpus-wide statistics. bm25s builds in
memory (a corpus-sized sparse matrix) and has no segments to merge; Pyserini needs Java 21, which
this machine's Debian does not package.

**Tokens.** The index holds the project's tokens (:func:`mogg.core.text.tokenize`, stop words
dropped), joined by spaces and split by tantivy's whitespace tokenizer, so a term here is a term of
the in-memory index; queries are tokenized the same way, each occurrence one clause (a duplicated
query token counts twice, as in rank-bm25).

**BM25 variant: tantivy's (Lucene's), fixed in the engine.** ``k1 = 1.2``, ``b = 0.75``,
``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` (never negative: no epsilon floor), a term's weight
``idf * (k1 + 1) * tf / (tf + k1 * (1 - b + b * len / avglen))`` with the document length stored in
one byte (exact up to 40 tokens, then within a few per cent). The default backend
(:class:`~mogg.retrieval.bm25.BM25Retriever`) is rank-bm25's Okapi with k1 = 1.5 and an epsilon
floor on negative idf: rankings agree on most queries, scores are on another scale. A test holds
this backend to a brute-force implementation of the variant above, and its top-k to the default
backend's where the variants agree.

Ids: every document carries its chunk index within its part (``id``) and its part's token
(``part``) as fast fields; the part offsets are the merge's, so a global id is ``offset[part] +
id`` whatever order tantivy keeps segments and documents in. Rows are ordered by (-score, id);
a query matching fewer than ``k`` chunks is padded with score-0 chunks by ascending id, as the
in-memory backend's rows of zeros are.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from mogg.core.text import tokenize
from mogg.retrieval.base import check_runtime_kwargs, check_saved_config, order_rows, trivial_topk

logger = logging.getLogger(__name__)

__all__ = ["DiskBM25"]

PARAMS_FILE = "bm25_disk.json"
FIELD, ID, PART = "text", "id", "part"
FORMAT_VERSION = 1
_RUNTIME_KEYS = ("heap_mb", "threads", "search_threads")


def _tantivy():
    try:
        import tantivy
    except ImportError as e:  # an optional engine: say how to get it
        raise ImportError("retriever=bm25_disk needs tantivy: pip install 'mogg[engine]' (or pip install tantivy)") from e
    return tantivy


def _schema():
    t = _tantivy()
    sb = t.SchemaBuilder()
    # term frequencies, no positions: BM25 needs no phrase queries (positions would ~double the index)
    sb.add_text_field(FIELD, stored=False, tokenizer_name="whitespace", index_option="freq")
    sb.add_unsigned_field(ID, stored=False, indexed=False, fast=True)
    sb.add_unsigned_field(PART, stored=False, indexed=False, fast=True)
    return sb.build()


class DiskBM25:
    """Per-level BM25 over a tantivy index on disk (see the module doc for the variant).

    Args:
        stopwords: drop sklearn's English stop words (as ``retriever=bm25``).
        heap_mb: the index writer's memory budget in MiB (all its threads together; tantivy
            needs at least 15 MiB per thread): a build's memory is about this plus the texts in flight.
        threads: indexing threads (0: tantivy's choice, up to the cores).
        search_threads: threads the queries are dealt to (one engine call each; the default, 1, is what
            the benchmarks measured).
    """

    def __init__(self, stopwords: bool = True, heap_mb: int = 256, threads: int = 1, search_threads: int = 1) -> None:
        if heap_mb < 16 or threads < 0 or search_threads < 1:
            raise ValueError(f"heap_mb must be >= 16, threads >= 0, search_threads >= 1; got {heap_mb}, {threads}, {search_threads}")
        self.stopwords = bool(stopwords)
        self.heap_mb, self.threads, self.search_threads = int(heap_mb), int(threads), int(search_threads)
        self.n_docs = 0
        self._dir: Path | None = None  # where the index's files are (a private temp dir until saved)
        self._offsets: dict[int, int] = {}  # part token -> first global id of the part
        self._sources: list[Path] = []  # shard index directories (fit_shards), linked in by save()
        self._index = self._searcher = None
        self._finalizer = None

    def config(self) -> dict:
        """Index-defining parameters: the engine, its fixed BM25 variant and the tokenizer's setting."""
        return {"engine": "tantivy", "variant": "lucene", "k1": 1.2, "b": 0.75, "stopwords": self.stopwords,
                "format_version": FORMAT_VERSION}

    # ------------------------------------------------------------------ build
    def fit(self, texts: Iterable[str]) -> Self:
        """Index ``texts`` (text ``i`` gets id ``i``) into a private temporary directory."""
        return self._fit_tokens(" ".join(tokenize(t, self.stopwords)) for t in texts)

    def fit_terms(self, terms) -> Self:
        """Index one ladder level from its units' tokens (:class:`mogg.ladders.unit_terms.LevelTerms`)."""
        return self._fit_tokens(terms.token_texts())

    def _fit_tokens(self, token_texts: Iterable[str]) -> Self:
        d = Path(tempfile.mkdtemp(prefix="mogg-bm25-disk-"))
        self._own(d)
        part, n = self._write_index(token_texts, d)
        self._dir, self._sources, self._offsets, self.n_docs = d, [], {part: 0}, n
        self._open()
        return self

    def _own(self, d: Path) -> None:
        # a private build directory goes with this object (a saved copy is hard links or copies)
        if self._finalizer is not None:
            self._finalizer()
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(d), True)

    def _write_index(self, token_texts: Iterable[str], directory: Path) -> tuple[int, int]:
        """One part: every text a document (``id`` = its position), under a fresh part token.
        Returns (part token, documents). Memory: the writer's heap budget, flushed as segments."""
        t = _tantivy()
        part = secrets.randbits(63)  # tells this part's documents apart after a merge
        index = t.Index(_schema(), path=str(directory), reuse=False)
        writer = index.writer(heap_size=self.heap_mb << 20, num_threads=self.threads)
        n = 0
        Document = t.Document
        for n, text in enumerate(token_texts, 1):
            doc = Document()
            doc.add_text(FIELD, text)
            doc.add_unsigned(ID, n - 1)
            doc.add_unsigned(PART, part)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        (directory / "part.json").write_text(json.dumps({"part": part, "n_docs": n}))
        logger.info("tantivy BM25 part: %d documents -> %s", n, directory)
        return part, n

    # ------------------------------------------------------------------ shards (map / reduce)
    def save_shard(self, texts: Sequence[str], directory: Path, prefix: str) -> None:
        """Map step: the shard's index in ``directory/{prefix}_tantivy/``."""
        self._write_index((" ".join(tokenize(t, self.stopwords)) for t in texts), _shard_dir(directory, prefix))

    def save_shard_terms(self, terms, directory: Path, prefix: str) -> None:
        """:meth:`save_shard` from a level's unit tokens (:mod:`mogg.ladders.unit_terms`)."""
        self._write_index(terms.token_texts(), _shard_dir(directory, prefix))

    def fit_shards(self, directories: Sequence[Path], prefix: str) -> Self:
        """Reduce step: one index over the shards' segments, in shard order. Nothing is re-indexed:
        :meth:`save` links the segment files into the artifact and lists them in one ``meta.json``."""
        self._sources = [_shard_dir(Path(d), prefix, create=False) for d in directories]
        parts = [json.loads((s / "part.json").read_text()) for s in self._sources]
        offsets = np.cumsum([0] + [p["n_docs"] for p in parts]).tolist()
        self._offsets = {p["part"]: o for p, o in zip(parts, offsets)}
        if len(self._offsets) != len(parts):
            raise ValueError(f"two shards of {prefix} carry the same part token; rebuild one of {self._sources}")
        self.n_docs = int(offsets[-1])
        d = Path(tempfile.mkdtemp(prefix="mogg-bm25-disk-"))  # searchable before save(): links only
        self._own(d)
        _union(self._sources, d)
        self._dir = d
        self._open()
        logger.info("tantivy BM25: %d documents in %d shard parts", self.n_docs, len(parts))
        return self

    # ------------------------------------------------------------------ search
    def _open(self) -> None:
        t = _tantivy()
        self._index = t.Index.open(str(self._dir))
        self._searcher = self._index.searcher()
        if self._searcher.num_docs != self.n_docs:
            raise ValueError(f"{self._dir}: the tantivy index holds {self._searcher.num_docs} documents, "
                             f"its parts say {self.n_docs}")
        self._schema = self._index.schema

    def query(self, text: str):
        """The tantivy query of ``text``: one SHOULD clause per token occurrence (None: no tokens)."""
        t = _tantivy()
        toks = tokenize(text, self.stopwords)
        if not toks:
            return None
        term = t.Query.term_query
        return t.Query.boolean_query([(t.Occur.Should, term(self._schema, FIELD, tok)) for tok in toks])

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ``(scores float32 [Q, k], ids int64 [Q, k])``, as in :mod:`.base`."""
        queries = list(queries)
        if (trivial := trivial_topk(self.n_docs, len(queries), k)) is not None:
            return trivial
        if self._searcher is None:
            raise RuntimeError("DiskBM25.search before fit, fit_shards or restore")
        m = min(k, self.n_docs)
        searcher = self._searcher

        # One engine call per query: the bindings have no batch search. Each call runs in Rust
        # (block-max WAND over the query terms' postings); the Python per query is
        # its tokenizing and clause list (~0.1 ms for a 70-token MedQA vignette).
        def one(q: str):
            query = self.query(q)
            return [] if query is None else searcher.search(query, m, count=False).hits

        if self.search_threads > 1 and len(queries) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(self.search_threads) as pool:
                hits = list(pool.map(one, queries, chunksize=64))
        else:
            hits = [one(q) for q in queries]
        n_hit = np.fromiter(map(len, hits), dtype=np.int64, count=len(hits))  # [Q]
        flat = [h for row in hits for h in row]
        scores = np.fromiter((s for s, _ in flat), dtype=np.float32, count=len(flat))
        addrs = [a for _, a in flat]
        local = np.asarray(searcher.fast_field_values(ID, addrs), dtype=np.int64) if addrs else np.zeros(0, np.int64)
        parts = searcher.fast_field_values(PART, addrs) if addrs else []
        offset = np.fromiter((self._offsets[p] for p in parts), dtype=np.int64, count=len(parts))
        ids = local + offset
        vals = np.full((len(queries), m), -np.inf, dtype=np.float32)
        out = np.full((len(queries), m), -1, dtype=np.int64)
        rows = np.repeat(np.arange(len(queries)), n_hit)
        cols = np.arange(len(flat)) - np.repeat(np.cumsum(n_hit) - n_hit, n_hit)
        vals[rows, cols], out[rows, cols] = scores, ids
        _pad_with_zeros(vals, out, n_hit, self.n_docs)
        return order_rows(vals, out, k)

    # ------------------------------------------------------------------ persistence
    def save(self, directory: Path) -> list[str]:
        """The index files (hard links where the file system allows, else copies) and parameters."""
        directory = Path(directory)
        if self._dir is None:
            raise RuntimeError("DiskBM25.save before fit or fit_shards")
        if self._sources:
            names = _union(self._sources, directory)
        else:
            names = _link_all(self._dir, directory)
        params = {"config": self.config(), "n_docs": self.n_docs,
                  "offsets": [[str(p), o] for p, o in self._offsets.items()]}  # str: JSON loses 63-bit ints in some readers
        (directory / PARAMS_FILE).write_text(json.dumps(params, indent=2), encoding="utf-8")
        # tantivy's reader flock()s this file while it reads meta.json; made here, a search never
        # creates a file in the published artifact
        (directory / ".tantivy-meta.lock").touch()
        return [*names, PARAMS_FILE, ".tantivy-meta.lock"]

    def restore(self, directory: Path) -> Self:
        """Open a saved index memory-mapped (files are read as searches touch them), keeping this
        instance's runtime options; its index-defining config must equal the saved one."""
        directory = Path(directory)
        params = json.loads((directory / PARAMS_FILE).read_text(encoding="utf-8"))
        check_saved_config(type(self).__name__, directory, params["config"], self.config())
        self.n_docs = int(params["n_docs"])
        self._offsets = {int(p): int(o) for p, o in params["offsets"]}
        self._dir, self._sources = directory, []
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._open()
        return self

    @classmethod
    def load(cls, directory: Path, **runtime_kwargs: Any) -> Self:
        """A new retriever from a saved index; only ``heap_mb``, ``threads`` and ``search_threads`` may be given."""
        check_runtime_kwargs("DiskBM25", runtime_kwargs, _RUNTIME_KEYS)
        params = json.loads((Path(directory) / PARAMS_FILE).read_text(encoding="utf-8"))
        return cls(stopwords=params["config"]["stopwords"], **runtime_kwargs).restore(directory)


def _shard_dir(directory: Path, prefix: str, create: bool = True) -> Path:
    d = Path(directory) / f"{prefix}_tantivy"
    if create:
        d.mkdir()
    elif not (d / "meta.json").is_file():
        raise FileNotFoundError(f"{d}: no tantivy shard index (built with another retriever?)")
    return d


def _segment_files(d: Path, meta: dict) -> list[str]:
    ids = {s["segment_id"].replace("-", "") for s in meta["segments"]}
    return sorted(p.name for p in d.iterdir() if p.is_file() and p.name.split(".")[0] in ids)


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # same file system: no bytes copied, and the shard may be deleted later
    except OSError:
        shutil.copy2(src, dst)


def _link_all(src: Path, dst: Path) -> list[str]:
    meta = json.loads((src / "meta.json").read_text())
    names = _segment_files(src, meta)
    for name in names:
        _link(src / name, dst / name)
    shutil.copy2(src / "meta.json", dst / "meta.json")
    shutil.copy2(src / "part.json", dst / "part.json")
    return [*names, "meta.json", "part.json"]


def _union(sources: Sequence[Path], dst: Path) -> list[str]:
    """One tantivy index in ``dst`` holding every segment of the ``sources`` indexes (same schema):
    segment files linked, their metas listed in one ``meta.json`` (tantivy's own index format:
    segments are self-contained, a reader takes corpus statistics over all of them)."""
    metas = [json.loads((s / "meta.json").read_text()) for s in sources]
    for m, s in zip(metas, sources):
        if m["schema"] != metas[0]["schema"]:
            raise ValueError(f"{s}: its tantivy schema differs from {sources[0]}'s; rebuild the shards with one config")
        if any(seg.get("deletes") for seg in m["segments"]):
            raise ValueError(f"{s}: segments with deletes; a shard index never deletes")
    names = []
    for m, s in zip(metas, sources):
        for name in _segment_files(s, m):
            _link(s / name, dst / name)
            names.append(name)
    meta = {**{k: v for k, v in metas[0].items() if k != "payload"},
            "segments": [seg for m in metas for seg in m["segments"]], "opstamp": max(m["opstamp"] for m in metas)}
    (dst / "meta.json").write_text(json.dumps(meta, indent=2))
    (dst / ".managed.json").write_text(json.dumps(sorted([*names, "meta.json"])))
    return [*names, "meta.json", ".managed.json"]


def _pad_with_zeros(vals: np.ndarray, ids: np.ndarray, n_hit: np.ndarray, n_docs: int) -> None:
    """Rows with fewer hits than columns take score-0 chunks by ascending id (not already hits),
    as documents a query does not touch score 0 in the in-memory backend."""
    m = vals.shape[1]
    for q in np.flatnonzero(n_hit < m):  # rare: a query matching fewer than k chunks
        have = set(ids[q, : n_hit[q]].tolist())
        fill = [i for i in range(min(n_docs, m + len(have))) if i not in have][: m - n_hit[q]]
        vals[q, n_hit[q]:], ids[q, n_hit[q]:] = 0.0, fill
