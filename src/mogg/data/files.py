"""Reading input files safely: streaming sha256 fingerprints, path globs, jsonl/json readers whose
errors name the file and line, UTF-8 decoding that says where it failed, gzip detection.

Shared by the corpus sources (:mod:`mogg.data.corpus`), the question sets (:mod:`mogg.data.qa`,
:mod:`mogg.data.squad`) and ``mogg-prepare``.
"""

from __future__ import annotations

import functools
import glob
import gzip
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mogg.core.artifacts import sha256_file
from mogg.data.errors import DataError


def prepare_hint(path: str | os.PathLike) -> str:
    """The command that fetches a missing data file, from where it should be (``<data>/covidqa/...``:
    ``mogg-prepare --dataset covidqa``; ``<data>/medrag/<corpus>/...``: ``--corpus <corpus>``; MIRAGE)."""
    parts = Path(path).parts
    where = "(or set MOGG_DATA_DIR / paths.data_dir to the folder that holds it)"
    if "covidqa" in parts:
        return f"run `mogg-prepare --dataset covidqa` {where}"
    if "medrag" in parts and parts.index("medrag") + 1 < len(parts):
        return f"run `mogg-prepare --corpus {parts[parts.index('medrag') + 1]}` {where}"
    if "mirage" in parts:
        return f"run `mogg-prepare` (MIRAGE) {where}"
    return "check the path (relative paths are read from the folder the command runs in)"


def require_file(path: str | os.PathLike) -> Path:
    """``path`` as a Path, or a DataError that says how to get the data."""
    p = Path(path)
    if not p.is_file():
        raise DataError(str(path), f"file not found; {prepare_hint(path)}")
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
        for n, at, raw in _cr_lines(fh, lineno, pos):
            obj = _parse_line(raw, path, n)
            if obj is not None:
                yield n, at, obj


_LONE_CR = re.compile(rb"\r(?!\n)")


def _cr_lines(fh, lineno: int, pos: int) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, raw line)`` of a binary stream, where a lone ``\\r`` (classic Mac
    line ends) ends a line as ``\\n`` and ``\\r\\n`` do: two records never merge into one."""
    for raw in fh:
        if b"\r" in raw.rstrip(b"\r\n"):
            for part in _LONE_CR.split(raw):
                yield lineno, pos, part
                lineno, pos = lineno + 1, pos + len(part) + 1
            pos -= 1  # the last part ends the physical line (no \r of its own)
        else:
            yield lineno, pos, raw
            lineno, pos = lineno + 1, pos + len(raw)


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
            for lineno, at, raw in _cr_lines(fh, 1, 0):
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


def check_unicode(text: str, path: str | os.PathLike, line: int | None, what: str) -> str:
    """``text`` if it is valid Unicode (JSON's ``\\ud800`` escapes decode to lone surrogates, which no
    file or tokenizer can take), else a DataError naming the file, line and field."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise DataError(path, f"{what} holds a lone surrogate ({text[e.start]!a} at character {e.start + 1}): "
                              "not valid Unicode text; fix the escape", line) from None
    return text


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
    check_unicode(value, path, line, f"{prefix}field {key!r}")
    if nonempty and not value.strip():
        raise DataError(path, f"{prefix}field {key!r} is empty", line)
    return value
