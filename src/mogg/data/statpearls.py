"""StatPearls NXML articles -> MedRAG-style chunk jsonl (StatPearls is not shipped as chunks).

The NCBI Bookshelf archive (``statpearls_NBK430685.tar.gz``) holds one JATS book-part XML file
(``.nxml``) per article. Each paragraph becomes one chunk: ``id`` = ``<article>_<i>`` (stable:
file stem and paragraph order), ``title`` = article title and section path joined by `` -- ``,
``content`` = the paragraph's text (a list becomes one chunk, its items joined). Regrouped with
``group_by=id_prefix`` an article is one document again, its chunks in order.
"""

from __future__ import annotations

import json
import logging
import os
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path

from mogg.core.artifacts import atomic_path
from mogg.data.errors import DataError

log = logging.getLogger(__name__)

_BLOCK = {"p", "list"}


def _text(el: ET.Element) -> str:
    return " ".join("".join(el.itertext()).split())


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]  # drop an XML namespace


def article_chunks(xml: bytes | str, article_id: str, where: str = "") -> list[dict]:
    """The chunks of one NXML article, in document order."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise DataError(where or article_id, f"invalid NXML ({e})") from None
    for el in root.iter():
        el.tag = _local(el.tag)
    title_el = next((t for path in (".//book-part-meta//title-group/title", ".//title-group/title", ".//article-title", ".//title")
                     for t in root.findall(path)), None)
    title = _text(title_el) if title_el is not None else article_id
    body = root.find(".//body")
    out: list[dict] = []

    def emit(path: list[str], text: str) -> None:
        if text:
            out.append({"id": f"{article_id}_{len(out)}", "title": " -- ".join([title, *path]), "content": text})

    def walk(node: ET.Element, path: list[str]) -> None:
        for child in node:
            if child.tag == "sec":
                t = child.find("title")
                walk(child, path + ([_text(t)] if t is not None and _text(t) else []))
            elif child.tag == "p":
                emit(path, _text(child))
            elif child.tag == "list":
                emit(path, " ".join(_text(li) for li in child.iter("list-item")))

    walk(body if body is not None else root, [])
    return out


def _articles(source: Path) -> Iterator[tuple[str, bytes, str]]:
    """(article id, NXML bytes, where) from a ``.tar.gz`` archive (streamed) or a directory of ``.nxml``."""
    if source.is_dir():
        for f in sorted(source.rglob("*.nxml")):
            yield f.stem, f.read_bytes(), str(f)
        return
    with tarfile.open(source, mode="r|*") as tar:  # streaming: members are read in archive order
        for m in tar:
            if m.isfile() and m.name.endswith(".nxml"):
                fh = tar.extractfile(m)
                yield Path(m.name).stem, fh.read(), f"{source}:{m.name}"


def chunk_statpearls(source: str | os.PathLike, out_dir: str | os.PathLike, progress: bool = True) -> tuple[int, int]:
    """Write one ``<article>.jsonl`` per article into ``out_dir``; returns (articles, chunks)."""
    from tqdm import tqdm

    source, out_dir = Path(source), Path(out_dir)
    if not source.exists():
        raise DataError(source, "no StatPearls archive or NXML directory here")
    out_dir.mkdir(parents=True, exist_ok=True)
    n_articles = n_chunks = 0
    for article, xml, where in tqdm(_articles(source), desc="statpearls", unit="article", disable=not progress):
        chunks = article_chunks(xml, article, where)
        if not chunks:
            log.warning("%s: no paragraphs; skipped", where)
            continue
        _write_jsonl(out_dir / f"{article}.jsonl", chunks)
        n_articles += 1
        n_chunks += len(chunks)
    if n_articles == 0:
        raise DataError(source, "no NXML article with paragraphs found")
    log.info("StatPearls: %d articles -> %d chunks in %s", n_articles, n_chunks, out_dir)
    return n_articles, n_chunks


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
