"""Corpus sources (MedRAG jsonl, plain text, PubMedQA contexts, MedMCQA explanations) and ``Corpus``.

Every source is built from explicit arguments (Hydra ``_target_``), streams :class:`Document`
objects when iterated, and has ``fingerprint()`` for artifact manifests. Bad input raises
:class:`DataError` naming the file and line; nothing is dropped silently.

The small file helpers at the top (streaming sha256, fingerprints, jsonl/json readers with
file:line errors) are shared by :mod:`mogg.data.qa` and :mod:`mogg.data.prepare`.
"""

from __future__ import annotations

import functools
import glob
import gzip
import hashlib
import json
import logging
import os
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mogg.artifacts import sha256_file
from mogg.data.chunks import check_group_by, group_rows, source_key
from mogg.data.errors import DataError
from mogg.data.records import Document

logger = logging.getLogger(__name__)


# (document, file path, 1-based line or None) -- where each document came from.
Located = tuple[Document, str, int | None]


# ---------------------------------------------------------------------------------------------
# File helpers


def require_file(path: str | os.PathLike) -> Path:
    """``path`` as a Path, or a DataError that says how to get the data."""
    p = Path(path)
    if not p.is_file():
        raise DataError(
            str(path),
            "file not found; run `python -m mogg.data.prepare` (or set MOGG_DATA_DIR / paths.data_dir to a MIRAGE copy)",
        )
    return p


@functools.lru_cache(maxsize=65536)
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    # Keyed by (path, size, mtime): a process hashes each input once however often it asks for
    # fingerprints (artifact keys of every stage and shard); a changed file gets a new key.
    return sha256_file(Path(path))


def file_fingerprint(path: str | os.PathLike) -> dict:
    """Path, size, mtime_ns and sha256 of one input file (for artifact manifests)."""
    p = require_file(path)
    st = p.stat()
    return {
        "path": str(p.absolute()),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "sha256": _sha256_of(str(p.absolute()), st.st_size, st.st_mtime_ns),
    }


def as_path_list(paths: Any) -> list[str]:
    """One path or a sequence of paths (list, tuple, OmegaConf ListConfig) as a list of str."""
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def expand_paths(paths: Any, suffix: str) -> list[Path]:
    """Expand files, directories (their ``*suffix`` files) and glob patterns, in sorted order."""
    items = as_path_list(paths)
    if not items:
        raise DataError("<paths>", "no input paths given")
    out: list[Path] = []
    for item in items:
        expanded = os.path.expanduser(item)
        if any(c in expanded for c in "*?["):
            matches = [Path(m) for m in sorted(glob.glob(expanded, recursive=True))]
            matches = [m for m in matches if m.is_file()]
            if not matches:
                raise DataError(item, "glob pattern matches no files")
            out.extend(matches)
        elif os.path.isdir(expanded):
            matches = sorted(p for p in Path(expanded).glob(f"*{suffix}") if p.is_file())
            if not matches:
                raise DataError(item, f"directory holds no *{suffix} files")
            out.extend(matches)
        elif os.path.isfile(expanded):
            out.append(Path(expanded))
        else:
            raise DataError(item, "no such file or directory")
    return out


def decode_utf8(data: bytes, path: str | os.PathLike, line: int | None = None) -> str:
    """Decode UTF-8 or raise DataError; without ``line`` the line is found from the byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if line is None:
            line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.start + 1].hex()
        raise DataError(path, f"invalid UTF-8 ({exc.reason}, byte 0x{bad})", line) from None


def _count_newlines(fh, upto: int, block: int = 1 << 24) -> int:
    """Newlines in the first ``upto`` bytes of a binary file (read in blocks)."""
    fh.seek(0)
    n, left = 0, upto
    while left > 0:
        data = fh.read(min(block, left))
        if not data:
            break
        n += data.count(b"\n")
        left -= len(data)
    return n


def iter_jsonl(path: str | os.PathLike, start: int = 0, end: int | None = None) -> Iterator[tuple[int, dict]]:
    """Stream ``(line_number, object)`` from a jsonl file; blank lines are skipped.

    Lines are read as bytes and decoded one by one so bad UTF-8 is reported with its line. With
    ``start``/``end`` only the lines whose first byte lies in ``[start, end)`` are read (a shard of
    the file by byte range: consecutive ranges yield every line exactly once); line numbers stay
    those of the whole file.
    """
    if end is not None and is_gzip(path):
        raise DataError(path, "gzip-compressed: a shard cannot seek into it; decompress it (gunzip) to shard by bytes")
    for lineno, pos, obj in iter_jsonl_positions(path, start):
        if end is not None and pos >= end:
            break
        yield lineno, obj


def iter_jsonl_positions(path: str | os.PathLike, start: int = 0) -> Iterator[tuple[int, int, dict]]:
    """``(line_number, byte offset of the line, object)`` from the first line starting at or after
    ``start`` to the end of the file (gzip files: from the start only)."""
    if is_gzip(path):
        if start > 0:
            raise DataError(path, "gzip-compressed: a shard cannot seek into it; decompress it (gunzip) to shard by bytes")
        yield from _iter_jsonl_lines(path, gzip.open(require_file(path), "rb"))
        return
    with open(require_file(path), "rb") as fh:
        lineno, pos = 1, 0
        if start > 0:
            lineno = _count_newlines(fh, start) + 1  # the line holding byte ``start``
            fh.seek(start - 1)
            pos = start
            if fh.read(1) != b"\n":  # ``start`` is inside a line that belongs to the previous range
                pos += len(fh.readline())
                lineno += 1
        first = lineno
        for lineno, raw in enumerate(fh, start=first):
            at = pos
            pos += len(raw)
            obj = _parse_line(raw, path, lineno)
            if obj is not None:
                yield lineno, at, obj


def line_before(path: str | os.PathLike, start: int) -> dict | None:
    """The object on the last non-blank line that starts before byte ``start`` (None if none)."""
    with open(require_file(path), "rb") as fh:
        end, block, buf = start, 1 << 16, b""
        fh.seek(start - 1)
        if fh.read(1) != b"\n":  # ``start`` is inside a line: it is that line, read it whole
            end = start + len(fh.readline())
        while end > 0:
            lo = max(0, end - block)
            fh.seek(lo)
            buf = fh.read(end - lo) + buf
            lines = [ln for ln in buf.split(b"\n") if ln.strip()]
            if len(lines) > 1 or lo == 0:
                return json.loads(lines[-1]) if lines else None
            end, block = lo, block * 2
    return None


def is_gzip(path: str | os.PathLike) -> bool:
    """Whether a file starts with the gzip magic bytes (whatever its name)."""
    with open(require_file(path), "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _parse_line(raw: bytes, path, lineno: int) -> dict | None:
    """One jsonl line -> object (None for a blank line), with file:line errors."""
    if not raw.strip():
        return None
    # without the line break: json would otherwise place an error at the end of the line on "line 2"
    text = decode_utf8(raw.rstrip(b"\r\n"), path, lineno)
    if lineno == 1:
        text = text.removeprefix("\ufeff")  # files saved by some editors start with a BOM
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", lineno) from None
    if not isinstance(obj, dict):
        raise DataError(path, f"expected a JSON object, got {type(obj).__name__}", lineno)
    return obj


def _iter_jsonl_lines(path, fh) -> Iterator[tuple[int, int, dict]]:
    """``(line, offset in the decompressed stream, object)`` from an opened binary stream."""
    with fh:
        try:
            pos = 0
            for lineno, raw in enumerate(fh, start=1):
                at, pos = pos, pos + len(raw)
                obj = _parse_line(raw, path, lineno)
                if obj is not None:
                    yield lineno, at, obj
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            raise DataError(path, f"corrupt gzip data ({exc})") from None


def read_bytes(path: str | os.PathLike) -> bytes:
    """A file's bytes, decompressed when it is gzip data (detected by its magic bytes)."""
    p = require_file(path)
    if is_gzip(p):
        try:
            return gzip.decompress(p.read_bytes())
        except (OSError, EOFError) as exc:
            raise DataError(path, f"corrupt gzip data ({exc})") from None
    return p.read_bytes()


def load_json(path: str | os.PathLike) -> Any:
    """Load one (non-jsonl) JSON file with file:line errors for bad UTF-8 and bad JSON; gzip is read transparently."""
    text = decode_utf8(read_bytes(path), path).removeprefix("\ufeff")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None


def str_field(
    obj: dict,
    key: str,
    path: str | os.PathLike,
    line: int | None,
    *,
    required: bool = True,
    nonempty: bool = True,
    default: str = "",
    what: str = "",
) -> str:
    """``obj[key]`` checked to be a string (non-blank unless ``nonempty=False``)."""
    prefix = f"{what}: " if what else ""
    if key not in obj or obj[key] is None:
        if required:
            raise DataError(path, f"{prefix}missing required field {key!r}", line)
        return default
    value = obj[key]
    if not isinstance(value, str):
        raise DataError(path, f"{prefix}field {key!r} must be a string, got {type(value).__name__}", line)
    if nonempty and not value.strip():
        raise DataError(path, f"{prefix}field {key!r} is empty", line)
    return value


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
    """

    def __init__(self, path: str, structured: bool = False) -> None:
        self.path = os.fspath(path)
        self.structured = bool(structured)

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def params(self) -> dict:
        return {"path": self.path, **({"structured": True} if self.structured else {})}

    def located(self) -> Iterator[Located]:
        data = load_json(self.path)
        if not isinstance(data, dict):
            raise DataError(self.path, f"expected an object keyed by PMID, got {type(data).__name__}")
        for pmid, entry in data.items():
            contexts = entry.get("CONTEXTS") if isinstance(entry, dict) else None
            if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
                raise DataError(self.path, f"PMID {pmid}: CONTEXTS must be a list of strings")
            content = " ".join(contexts)
            if not content.strip():
                raise DataError(self.path, f"PMID {pmid}: CONTEXTS are empty")
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


class MedMCQAExplanations(_Source):
    """MedMCQA explanations as documents: rows whose stripped ``exp`` has >= ``min_chars`` chars.

    id = ``medmcqa:{row id}``, title = ``subject_name`` (or ""), content = the stripped ``exp``.
    Rows without an explanation are skipped by design (most MedMCQA rows have none).
    """

    def __init__(self, path: str, min_chars: int = 40) -> None:
        self.path = os.fspath(path)
        self.min_chars = int(min_chars)

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def params(self) -> dict:
        return {"path": self.path, "min_chars": self.min_chars}

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
