"""MedRAG chunk rows regrouped into their source documents.

MedRAG ships its corpora as chunks of ~1000 characters (Textbooks: ``Anatomy_Gray_0``,
``Anatomy_Gray_1``, ...; StatPearls as chunked here: ``<article>_<i>``; Wikipedia: consecutive
chunks of one article share its title; PubMed: one abstract per PMID). A ladder built over the
chunks as documents would stop at the chunk: its 2x..8x levels collapse into the chunk itself.
Regrouped, a document is a source (a book, an article) in chunk order, so coarser levels span
neighbouring chunks of one source and never cross sources.

``group_by``: ``None`` (a row is a document), ``"id_prefix"`` (rows ``<source>_<index>``, indices
increasing within a source) or ``"title"`` (consecutive rows with one title).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from mogg.data.errors import DataError
from mogg.data.records import Document

GROUP_BY = (None, "id_prefix", "title")
_ID_RE = re.compile(r"^(?P<source>.+)_(?P<index>\d+)$")


def check_group_by(group_by: str | None) -> str | None:
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, got {group_by!r}")
    return group_by


def source_key(doc: Document, group_by: str | None) -> tuple[str, int | None]:
    """(source key, chunk index or None) of one chunk row."""
    if group_by == "id_prefix":
        m = _ID_RE.match(doc.id)
        return (m.group("source"), int(m.group("index"))) if m else (doc.id, None)
    if group_by == "title":
        return doc.title or doc.id, None
    return doc.id, None


def group_rows(rows: Iterable[tuple[Document, str, int | None]], group_by: str | None) -> Iterator[tuple[Document, str, int | None]]:
    """Consecutive chunk rows of one source as one document (its first row's file and line).

    The document id is the source key, its title the first row's title (up to a `` -- `` section
    path), its content the chunks joined by blank lines in file order; where the rows' titles carry
    a section path (``Article -- Section``, as StatPearls is chunked here) and it changes, the
    section path is inserted as a heading line, so structural ladders see the sections. Chunk
    indices must increase within a source.
    """
    if group_by is None:
        yield from rows
        return
    cur_key, cur_title, parts, where, last, section = None, "", [], ("", None), None, None
    for doc, path, line in rows:
        key, index = source_key(doc, group_by)
        head, _, sec = doc.title.partition(" -- ")
        if key != cur_key:
            if parts:
                yield Document(cur_key, cur_title, "\n\n".join(parts)), where[0], where[1]
            cur_key, cur_title, parts, where, last, section = key, head, [], (path, line), None, None
        if index is not None and last is not None and index <= last:
            raise DataError(path, f"chunk {doc.id!r} of {key!r} comes after chunk index {last}: rows out of order", line)
        last = index if index is not None else last
        if sec and sec != section:
            parts.append(sec)
            section = sec
        parts.append(doc.content)
    if parts:
        yield Document(cur_key, cur_title, "\n\n".join(parts)), where[0], where[1]
