"""Corpus sources (MedRAG jsonl, plain text, PubMedQA contexts, MedMCQA explanations) and ``Corpus``.

Every source is built from explicit arguments (Hydra ``_target_``), streams :class:`Document`
objects when iterated, and has ``fingerprint()`` for artifact manifests. Bad input raises
:class:`DataError` naming the file and line; nothing is dropped silently.

Files are read through :mod:`mogg.data.files` (fingerprints, jsonl/json readers with file:line
errors).

Length (over ~350 lines): the four corpus sources and the ``Corpus``/``MultiCorpus``/``DocumentList``
wrappers share one iteration and position-sharding contract; each source is under 60 lines.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mogg.data.chunks import check_group_by, group_rows, source_key
from mogg.data.errors import DataError
from mogg.data.files import (
    as_path_list,
    decode_utf8,
    expand_paths,
    file_fingerprint,
    is_gzip,
    iter_jsonl,
    iter_jsonl_positions,
    line_before,
    load_json,
    read_bytes,
    str_field,
)
from mogg.data.records import Document

logger = logging.getLogger(__name__)


# (document, file path, 1-based line or None) -- where each document came from.
Located = tuple[Document, str, int | None]


# ---------------------------------------------------------------------------------------------
# Sources


class Fingerprinted:
    """An input defined by files + parameters: its fingerprint (for artifact keys) and repr."""

    def files(self) -> list[Path]:
        raise NotImplementedError

    def params(self) -> dict:
        raise NotImplementedError

    def fingerprint(self) -> dict:
        return {
            "type": type(self).__name__,
            "params": self.params(),
            "files": [file_fingerprint(f) for f in self.files()],
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class _Source(Fingerprinted):
    """Shared behaviour: iteration via :meth:`located`, fingerprint from files + parameters."""

    splits_by_bytes = False  # line-oriented sources whose shards can read byte ranges override this

    def located(self) -> Iterator[Located]:
        """Yield ``(document, path, line)``; ``line`` is None where a document spans a file."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[Document]:
        for doc, _path, _line in self.located():
            yield doc


class MedRAGJsonl(_Source):
    """MedRAG chunk jsonl (``id``, ``content`` required, ``title`` optional).

    ``paths``: a file, a directory (its ``*.jsonl``), a glob pattern, or a list of those.
    ``group_by``: regroup consecutive chunk rows into their source documents
    (:mod:`mogg.data.chunks`: ``id_prefix`` for Textbooks/StatPearls, ``title`` for Wikipedia,
    null for one document per row, e.g. PubMed abstracts).
    """

    def __init__(self, paths: str | list[str], group_by: str | None = None) -> None:
        self.paths = as_path_list(paths)
        self.group_by = check_group_by(group_by)

    def files(self) -> list[Path]:
        return expand_paths(self.paths, ".jsonl")

    def params(self) -> dict:
        return {"paths": list(self.paths), **({"group_by": self.group_by} if self.group_by else {})}

    @property
    def splits_by_bytes(self) -> bool:
        """Line-oriented: shards take byte ranges of the files (not of gzip files)."""
        return not any(is_gzip(f) for f in self.files())

    def located(self, byte_ranges: dict[Path, tuple[int, int]] | None = None) -> Iterator[Located]:
        """All documents, or with ``byte_ranges`` ({file: (start, end)}) those whose first line
        starts in those ranges (a regrouped source belongs to the range holding its first chunk)."""
        yield from group_rows(self._rows(byte_ranges), self.group_by)

    def _doc(self, obj: dict, path, lineno: int) -> Document:
        return Document(id=str_field(obj, "id", path, lineno),
                        title=str_field(obj, "title", path, lineno, required=False, nonempty=False),
                        content=str_field(obj, "content", path, lineno))

    def _rows(self, byte_ranges) -> Iterator[Located]:
        for path in self.files():
            start, end = 0, None
            if byte_ranges is not None:
                if path not in byte_ranges:
                    continue
                start, end = byte_ranges[path]
            # a source that began before ``start`` is the previous range's; one that begins before
            # ``end`` is read to its last chunk, past ``end``
            prev = None
            if self.group_by and start > 0:
                obj = line_before(path, start)
                prev = source_key(self._doc(obj, path, 0), self.group_by)[0] if obj else None
            cur, leading = None, True
            for lineno, pos, obj in iter_jsonl_positions(path, start):
                doc = self._doc(obj, path, lineno)
                key = source_key(doc, self.group_by)[0] if self.group_by else None
                if leading and prev is not None and key == prev:
                    continue
                leading = False
                if end is not None and pos >= end and (self.group_by is None or key != cur):
                    break
                cur = key
                yield doc, str(path), lineno


class PlainText(_Source):
    """Plain text files, one document each: id = file stem, title = "".

    ``paths``: files, directories (their ``*suffix`` files) or glob patterns.
    """

    def __init__(self, paths: str | list[str], suffix: str = ".txt") -> None:
        self.paths = as_path_list(paths)
        self.suffix = suffix

    def files(self) -> list[Path]:
        return expand_paths(self.paths, self.suffix)

    def params(self) -> dict:
        return {"paths": list(self.paths), "suffix": self.suffix}

    def located(self) -> Iterator[Located]:
        for path in self.files():
            text = decode_utf8(read_bytes(path), path).removeprefix("\ufeff")
            if not text.strip():
                raise DataError(path, "empty text file")
            yield Document(id=path.stem, title="", content=text), str(path), None


class PubMedQAContexts(_Source):
    """PubMedQA ``test_set.json`` abstracts: one document per PMID, content = joined CONTEXTS.

    ``structured=True`` keeps the abstract's structure for structural ladders (MAL): each context
    becomes a paragraph under its label (BACKGROUND, METHODS, RESULTS, ...) as a heading line,
    blocks separated by blank lines; consecutive contexts with one label share its heading.
    ``sections=True`` makes each context its own short document (id ``<PMID>-<k>``, k from 0): the
    snippet stand-in, whose evidence spans several documents (``PubMedQAStar(section_ids=True)``).
    ``exclude_path``: a file in the same format whose PMIDs are left out (PubMedQA-L's ``ori_pqal.json``
    without the 500 test abstracts PubMedQA* reads: the second snippet shape shares no text with it).
    ``page=True`` makes each abstract a page (id ``<PMID>``): its contexts, then its conclusion (LONG_ANSWER,
    which the other forms leave out), each one a paragraph (:func:`abstract_page`): the abstract-page
    shape, whose evidence is the conclusion, one section of the page (``PubMedQALabelled(evidence="conclusion")``).
    """

    def __init__(self, path: str, structured: bool = False, sections: bool = False,
                 exclude_path: str | None = None, page: bool = False) -> None:
        self.path = os.fspath(path)
        self.structured = bool(structured)
        self.sections = bool(sections)
        self.page = bool(page)
        self.exclude_path = os.fspath(exclude_path) if exclude_path else None
        if self.structured + self.sections + self.page > 1:
            raise ValueError("PubMedQAContexts: structured, sections and page exclude each other "
                             f"(got structured={self.structured}, sections={self.sections}, page={self.page})")

    def files(self) -> list[Path]:
        return [Path(self.path), *([Path(self.exclude_path)] if self.exclude_path else [])]

    def params(self) -> dict:
        return {"path": self.path, **({"structured": True} if self.structured else {}),
                **({"sections": True} if self.sections else {}),
                **({"page": True} if self.page else {}),
                **({"exclude_path": self.exclude_path} if self.exclude_path else {})}

    def located(self) -> Iterator[Located]:
        data = load_json(self.path)
        if not isinstance(data, dict):
            raise DataError(self.path, f"expected an object keyed by PMID, got {type(data).__name__}")
        drop = excluded_pmids(self.exclude_path)
        for pmid, entry in data.items():
            if pmid in drop:
                continue
            contexts = entry.get("CONTEXTS") if isinstance(entry, dict) else None
            if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
                raise DataError(self.path, f"PMID {pmid}: CONTEXTS must be a list of strings")
            content = " ".join(contexts)
            if not content.strip():
                raise DataError(self.path, f"PMID {pmid}: CONTEXTS are empty")
            if self.page:  # the contexts and the conclusion, each a paragraph of one page
                yield Document(id=str(pmid), title="", content=abstract_page(pmid, entry, self.path)), self.path, None
                continue
            if self.sections:  # one short document per context (an empty one is skipped, its number kept)
                for doc_id, ctx in context_sections(pmid, contexts):
                    yield Document(id=doc_id, title="", content=ctx), self.path, None
                continue
            if self.structured:
                labels = entry.get("LABELS") or [""] * len(contexts)
                blocks, prev = [], None
                for label, ctx in zip(labels, contexts):
                    if label and label != prev:
                        blocks.append(str(label))
                    blocks.append(ctx.strip())
                    prev = label
                content = "\n\n".join(b for b in blocks if b)
            yield Document(id=str(pmid), title="", content=content), self.path, None


def context_sections(pmid: str, contexts: list[str]) -> list[tuple[str, str]]:
    """``(<PMID>-<k>, text)`` for each non-empty context k (an empty one skipped, its number kept): the
    documents of ``PubMedQAContexts(sections=True)`` and the gold ids of the PubMedQA sets'
    ``section_ids=True`` both come from here, so they always agree."""
    return [(f"{pmid}-{k}", c.strip()) for k, c in enumerate(contexts) if c.strip()]


def abstract_page(pmid: str, entry: dict, path: str) -> str:
    """A PubMedQA abstract as a page: its non-empty contexts, then its conclusion (``LONG_ANSWER``), each a
    paragraph (blank-line separated, as the page stand-in's sections are). The page of
    ``PubMedQAContexts(page=True)``, whose last paragraph is ``PubMedQALabelled(evidence="conclusion")``'s gold
    evidence: both read the conclusion through :func:`abstract_conclusion`, so they always agree."""
    contexts = [c.strip() for c in entry.get("CONTEXTS") or [] if c.strip()]
    return "\n\n".join([*contexts, abstract_conclusion(pmid, entry, path)])


def abstract_conclusion(pmid: str, entry: dict, path: str) -> str:
    """The abstract's conclusion (``LONG_ANSWER``, stripped); a clear error where it is missing or empty."""
    conclusion = entry.get("LONG_ANSWER")
    if not isinstance(conclusion, str) or not conclusion.strip():
        raise DataError(path, f"PMID {pmid}: LONG_ANSWER (the conclusion) is missing or empty")
    return conclusion.strip()


def excluded_pmids(path: str | None) -> frozenset[str]:
    """The PMIDs (keys) of a PubMedQA-format file, or none without one: the abstracts a second
    PubMedQA-L shape leaves out so that it shares no text with PubMedQA* (its corpus and its questions
    both read them here, so they always agree)."""
    if not path:
        return frozenset()
    data = load_json(path)
    if not isinstance(data, dict):
        raise DataError(path, f"expected an object keyed by PMID, got {type(data).__name__}")
    return frozenset(str(k) for k in data)


def explanation_sentences(text: str, min_chars: int) -> list[str]:
    """``text`` cut into its sentences, a piece shorter than ``min_chars`` characters joined to the next
    (the last to the one before): the documents of ``MedMCQAExplanations(sentences=True)`` and the gold
    ids of ``MedMCQAExplained(sentence_ids=True)`` both come from here, so they always agree."""
    from mogg.core.text import split_sentences

    pieces: list[str] = []
    carry = ""
    for s in split_sentences(text):
        carry = f"{carry} {s}".strip()
        if len(carry) >= min_chars:
            pieces.append(carry)
            carry = ""
    if carry:
        if pieces:
            pieces[-1] = f"{pieces[-1]} {carry}"
        else:
            pieces.append(carry)
    return pieces


class MedMCQAExplanations(_Source):
    """MedMCQA explanations as documents: rows whose stripped ``exp`` has >= ``min_chars`` chars.

    id = ``medmcqa:{row id}``, title = ``subject_name`` (or ""), content = the stripped ``exp``.
    Rows without an explanation are skipped by design (most MedMCQA rows have none).
    ``sentences=True`` makes each sentence of an explanation its own short document (id
    ``medmcqa:{row id}-{k}``, k from 0; a sentence under ``min_chars`` characters joins the next:
    :func:`explanation_sentences`): the second multi-document shape, whose evidence spans several
    documents (``MedMCQAExplained(sentence_ids=True)``), beside the snippet stand-in.
    """

    def __init__(self, path: str, min_chars: int = 40, sentences: bool = False) -> None:
        self.path = os.fspath(path)
        self.min_chars = int(min_chars)
        self.sentences = bool(sentences)

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def params(self) -> dict:
        # the flag only when set: the default corpora's fingerprints stay what they were
        return {"path": self.path, "min_chars": self.min_chars, **({"sentences": True} if self.sentences else {})}

    def located(self) -> Iterator[Located]:
        kept = total = 0
        for lineno, obj in iter_jsonl(self.path):
            total += 1
            row_id = str_field(obj, "id", self.path, lineno)
            exp = str_field(obj, "exp", self.path, lineno, required=False, nonempty=False).strip()
            if len(exp) < self.min_chars:
                continue
            title = str_field(obj, "subject_name", self.path, lineno, required=False, nonempty=False)
            kept += 1
            if self.sentences:
                for k, piece in enumerate(explanation_sentences(exp, self.min_chars)):
                    yield Document(id=f"medmcqa:{row_id}-{k}", title=title, content=piece), self.path, lineno
                continue
            yield Document(id=f"medmcqa:{row_id}", title=title, content=exp), self.path, lineno
        logger.debug("%s: kept %d of %d rows (min_chars=%d)", self.path, kept, total, self.min_chars)


# ---------------------------------------------------------------------------------------------
# Corpus


class _IterableSource:
    """Any iterable of Documents (a list built in code) as a source: located, fingerprinted by repr."""

    splits_by_bytes = False

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items

    def located(self) -> Iterator[Located]:
        for doc in self.items:
            if not isinstance(doc, Document):
                raise DataError(repr(self.items), f"expected Document objects, got {type(doc).__name__}")
            yield doc, repr(self.items), None

    def fingerprint(self) -> dict:
        return {"type": type(self.items).__name__, "repr": repr(self.items)}

    def files(self) -> list[Path]:
        return []

    def __repr__(self) -> str:
        return repr(self.items)


def _where(path: str, line: int) -> str:
    return f"{path}:{line}" if line > 0 else path


@runtime_checkable
class CorpusProtocol(Protocol):
    """What the spine needs from a corpus (:class:`Corpus`, :class:`DocumentList`, :class:`MultiCorpus`)."""

    @property
    def parts(self) -> list[tuple[str, Any]]:
        """The corpora indexed separately (a plain corpus is its own single part)."""
        ...

    def documents(self) -> list[Document]: ...

    def shard_documents(self, index: int, count: int) -> list[Document]: ...

    def fingerprint(self) -> dict: ...

    def files(self) -> list[Path]: ...


class Corpus:
    """Concatenation of sources with globally unique document ids; never empty.

    Every corpus (this, :class:`DocumentList`, :class:`MultiCorpus`) offers ``documents()``,
    ``shard_documents(index, count)``, ``fingerprint()`` and ``parts``: the corpora that are indexed
    separately (a plain corpus is its own single part).
    """

    def __init__(self, sources: Iterable[Any], allow_gold: bool = False) -> None:
        self.sources = [s if isinstance(s, _Source) else _IterableSource(s) for s in sources]
        self.allow_gold = bool(allow_gold)  # a declared gold-context setting (mogg.data.leakage)
        self._docs: list[Document] | None = None

    def files(self) -> list[Path]:
        """Every input file of every source."""
        return [f for s in self.sources for f in s.files()]

    @property
    def parts(self) -> list[tuple[str, "Corpus"]]:
        return [("corpus", self)]

    def documents(self) -> list[Document]:
        """All documents in source order (loaded and validated once, then cached)."""
        if self._docs is None:
            self._docs = self._load()
        return self._docs

    def shard_documents(self, index: int, count: int) -> list[Document]:
        """Documents of shard ``index`` of ``count``, in corpus order; the shards concatenate to :meth:`documents`.

        When every source is line-oriented (jsonl), a shard reads only its contiguous byte range of
        the corpus files (balanced by bytes; a line belongs to the range holding its first byte), so
        a shard task never loads the whole corpus. Other sources are loaded and split by position.
        Duplicate ids are then caught within a shard here and across shards by the merge.
        """
        if not 0 <= index < count:
            raise ValueError(f"shard index {index} outside 0..{count - 1}")
        if not all(s.splits_by_bytes for s in self.sources):
            docs = self.documents()
            return docs[len(docs) * index // count : len(docs) * (index + 1) // count]
        files = [(i, f, f.stat().st_size) for i, s in enumerate(self.sources) for f in s.files()]
        total = sum(size for _, _, size in files)
        lo, hi = total * index // count, total * (index + 1) // count
        ranges: dict[int, dict[Path, tuple[int, int]]] = {}
        offset = 0
        for i, f, size in files:
            if offset < hi and offset + size > lo:
                ranges.setdefault(i, {})[f] = (max(lo - offset, 0), min(hi - offset, size))
            offset += size
        docs = self._load(ranges, allow_empty=True)
        if not docs:
            raise DataError(repr(self), f"shard {index} of {count} holds no documents (bytes {lo}..{hi} of {total}: "
                                        "no document starts there; a regrouped source belongs to the shard of its first chunk); use fewer shards")
        return docs

    def _load(self, ranges: dict[int, dict[Path, tuple[int, int]]] | None = None, allow_empty: bool = False) -> list[Document]:
        docs: list[Document] = []
        index: dict[str, int] = {}
        # Compact per-document origin (source, file, line) so duplicates can name both places
        # without a tuple per document (corpora reach tens of millions of snippets).
        origin_file = array("l")
        origin_line = array("l")
        file_ids: dict[tuple[int, str], int] = {}
        file_keys: list[tuple[int, str]] = []
        for s_idx, source in enumerate(self.sources):
            if ranges is not None and s_idx not in ranges:
                continue
            located = source.located(ranges[s_idx]) if ranges is not None else source.located()
            for doc, path, line in located:
                prev = index.get(doc.id)
                if prev is not None:
                    p_src, p_path = file_keys[origin_file[prev]]
                    raise DataError(
                        path,
                        f"duplicate document id {doc.id!r}: first at "
                        f"{_where(p_path, origin_line[prev])} in {self.sources[p_src]!r}, "
                        f"again in {source!r}",
                        line,
                    )
                key = (s_idx, path)
                if key not in file_ids:
                    file_ids[key] = len(file_keys)
                    file_keys.append(key)
                index[doc.id] = len(docs)
                origin_file.append(file_ids[key])
                origin_line.append(line or 0)
                docs.append(doc)
        if not docs and not allow_empty:
            raise DataError(repr(self), "corpus is empty: its sources yielded no documents")
        logger.info("corpus: %d documents from %d sources", len(docs), len(self.sources))
        return docs

    def fingerprint(self) -> dict:
        """Fingerprints of all sources, in order."""
        return {
            "type": "Corpus",
            "sources": [s.fingerprint() for s in self.sources],
        }

    def __len__(self) -> int:
        return len(self.documents())

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents())

    def __repr__(self) -> str:
        return f"Corpus({self.sources!r})"


def _position_shard(docs: list[Document], index: int, count: int) -> list[Document]:
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} outside 0..{count - 1}")
    return docs[len(docs) * index // count : len(docs) * (index + 1) // count]


class DocumentList:
    """Documents already in memory (generated, filtered, replicated) as a corpus.

    The fingerprint hashes ids, titles and contents, so artifacts keyed by it change with the text.
    """

    def __init__(self, documents: Iterable[Document], name: str = "documents", allow_gold: bool = False) -> None:
        self.docs, self.name, self.allow_gold = list(documents), name, bool(allow_gold)
        if not self.docs:
            raise DataError(name, "corpus is empty: no documents given")
        self._fp: dict | None = None

    def documents(self) -> list[Document]:
        return self.docs

    @property
    def parts(self) -> list[tuple[str, "DocumentList"]]:
        return [(self.name, self)]

    def files(self) -> list[Path]:
        return []

    def shard_documents(self, index: int, count: int) -> list[Document]:
        """Shard ``index`` of ``count`` by position (balanced, contiguous)."""
        return _position_shard(self.docs, index, count)

    def fingerprint(self) -> dict:
        if self._fp is None:
            h = hashlib.sha256()
            for d in self.docs:
                h.update(json.dumps([d.id, d.title, d.content], ensure_ascii=False).encode())
            self._fp = {"type": "DocumentList", "name": self.name, "n": len(self.docs), "sha256": h.hexdigest()}
        return self._fp

    def __len__(self) -> int:
        return len(self.docs)

    def __repr__(self) -> str:
        return f"DocumentList({self.name!r}, {len(self.docs)} documents)"


class MultiCorpus:
    """Several corpora searched separately (MedCorp style): each keeps its own ladder and
    retriever statistics; hits are merged per level (top-k_r from every corpus, then selection
    picks the top-k overall)."""

    def __init__(self, corpora: dict[str, Any], allow_gold: bool = False) -> None:
        if not corpora:
            raise ValueError("MultiCorpus needs at least one corpus")
        self.parts = list(dict(corpora).items())
        self.allow_gold = bool(allow_gold)

    def files(self) -> list[Path]:
        return [f for _, c in self.parts for f in c.files()]

    def fingerprint(self) -> dict:
        return {"type": "MultiCorpus", "parts": {name: c.fingerprint() for name, c in self.parts}}

    def documents(self) -> list[Document]:
        return [d for _, c in self.parts for d in c.documents()]

    def shard_documents(self, index: int, count: int) -> list[Document]:
        raise ValueError("a multi-corpus is sharded one corpus at a time: build each part with corpus=<that part>")
