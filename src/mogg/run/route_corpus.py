"""Which corpus a routing reads: only one the routing machine names (issues 58, 59).

A router directory is data: it may have been written by anyone and re-sealed (its seal is a
checksum). So the files ``mogg-route`` reads are never the directory's choice alone:

* **named here** (``mogg-route --corpus FILE``, or ``--set corpus.sources.<i>.path(s)=...``): the
  user's corpus, in any format the project reads (:func:`user_corpus`). A transfer directory holds
  no corpus at all (a scorer and a recipe: builder, retriever, encoder), so it always routes one
  named here.
* **an in-set directory's own corpus**: its saved corpus paths are read only under this machine's
  data folder (``--data-dir`` / ``MOGG_DATA_DIR``, else ``data``, as ``paths.data_dir``), as paths
  relative to the training machine's data folder (:func:`under_data_folder`). An absolute path
  elsewhere, ``~``, ``..``, a glob or a link leading out of the data folder is refused in one line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path, PurePath

log = logging.getLogger(__name__)

# what --corpus reads, by file name; a folder is read as MedRAG jsonl (its *.jsonl files)
FORMATS = {".jsonl": "mogg.data.corpus.MedRAGJsonl", ".jsonl.gz": "mogg.data.corpus.MedRAGJsonl",
           ".txt": "mogg.data.corpus.PlainText"}
NO_CORPUS = ("holds no corpus (a transfer directory is a scorer and a recipe); name the corpus to route with "
             "--corpus FILE (MedRAG or generic jsonl: id, title, content; or plain .txt files)")


def _format(path: Path) -> str:
    if path.is_dir():
        return FORMATS[".jsonl"]
    name = path.name.lower()
    for suffix, target in sorted(FORMATS.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix):
            return target
    raise ValueError(f"--corpus {path}: unknown format; give {', '.join(sorted(FORMATS))} files or a folder of .jsonl")


def user_corpus(files: Sequence[str | Path], allow_gold: bool = False) -> dict:
    """The corpus node (``mogg.data.corpus.Corpus``) of the files the user names, one source per
    format, in the order given; each file must exist (a folder is read as its ``*.jsonl``)."""
    if not files:
        raise ValueError("--corpus: name at least one file")
    by_format: dict[str, list[str]] = {}
    for f in files:
        p = Path(os.path.expanduser(str(f)))  # the user's own shell path: ~ is theirs to use
        if not p.exists():
            raise ValueError(f"--corpus {f}: no such file or folder")
        by_format.setdefault(_format(p), []).append(str(p.resolve()))
    return {"_target_": "mogg.data.corpus.Corpus", "allow_gold": bool(allow_gold),
            "sources": [{"_target_": t, "paths": paths} for t, paths in by_format.items()]}


def data_folder(data_dir: str | Path | None) -> Path:
    """This machine's data folder: ``data_dir`` (``--data-dir`` / ``MOGG_DATA_DIR``), else ``data``
    in the current folder (``paths.data_dir``'s default)."""
    return Path(data_dir or os.environ.get("MOGG_DATA_DIR") or "data")


def under_data_folder(path: str, saved: str | None, local: Path, where: str) -> str:
    """A corpus path a directory names, as a file under this machine's data folder ``local``.

    ``path`` must be relative to the training machine's data folder ``saved`` (an absolute path
    under ``saved``, a relative one that starts with ``saved``'s last part as ``data/mirage/x``, or a
    bare relative one); ``~``, ``..``, globs and anything else are refused naming ``where``. The
    file must exist under ``local`` without leaving it through a link."""
    why = None
    if path.startswith("~"):
        why = "a home-folder path"
    elif any(ch in path for ch in "*?["):
        why = "a glob"
    elif ".." in PurePath(path).parts:
        why = "a path with '..'"
    if why:
        raise ValueError(f"{where}: corpus path {path!r} is {why}; a directory may name only files under the data "
                         "folder (route your own corpus with --corpus FILE)")
    p = PurePath(path)
    rel = None
    if p.is_absolute():
        if saved:
            try:
                rel = p.relative_to(saved)
            except ValueError:
                rel = None
        if rel is None:
            raise ValueError(f"{where}: corpus path {path!r} is outside the data folder it was trained with "
                             f"({saved}); a directory may name only files under the data folder (route your own "
                             "corpus with --corpus FILE)")
    elif saved and p.parts and p.parts[0] == PurePath(saved).name:
        rel = PurePath(*p.parts[1:])  # "data/mirage/x" as the run's relative data folder wrote it
    else:
        rel = p
    target = local / rel
    root = local.resolve()
    if not target.exists():
        raise FileNotFoundError(str(target))
    if not target.resolve().is_relative_to(root):
        raise ValueError(f"{where}: corpus path {path!r} leads out of the data folder {root} (a link); route your "
                         "own corpus with --corpus FILE")
    return str(target)
