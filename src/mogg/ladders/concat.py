"""Concatenating ladders built over consecutive document ranges (shards) or separate corpora."""

from __future__ import annotations

import itertools
import json
import shutil
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.lib.format as npformat
import scipy.sparse as sp

from mogg.ladders.base import Ladder, Level, Units
from mogg.ladders.sources import PARAGRAPH_STARTS, PARAGRAPHS

BLOCK = 1 << 21  # values per write of a streamed array (16 MiB of int64)


def concat_ladders(parts: Sequence[Ladder], independent: bool = False) -> Ladder:
    """Concatenate ladders built over consecutive document ranges (units, docs, chunks offset).

    Shards of one corpus need document-local ladders (a graph or tree level whose chunks span
    documents would miss the links across shards); ``independent=True`` is for separate corpora,
    where no links are wanted.
    """
    if not parts:
        raise ValueError("no ladders to concatenate")
    method = parts[0].method
    if not independent and not all(p.is_document_local() for p in parts):
        raise ValueError(f"ladders of method {method!r} link units across documents and cannot be concatenated")
    if len({p.n_levels for p in parts}) != 1:
        raise ValueError("ladders to concatenate differ in their number of levels")
    doc_off = np.cumsum([0] + [len(p.units.doc_ids) for p in parts])
    units = Units(
        text=[t for p in parts for t in p.units.text],
        doc=np.concatenate([p.units.doc + o for p, o in zip(parts, doc_off)]),
        doc_ids=[d for p in parts for d in p.units.doc_ids],
    )
    levels = []
    for j, lv0 in enumerate(parts[0].levels):
        lvs = [p.levels[j] for p in parts]
        chunk_off = np.cumsum([0] + [len(lv) for lv in lvs])
        home = np.concatenate([np.where(lv.home >= 0, lv.home + o, -1) for lv, o in zip(lvs, chunk_off)])
        texts = None if lv0.texts is None else [t for lv in lvs for t in lv.texts]
        levels.append(Level(lv0.name, sp.block_diag([lv.coverage for lv in lvs], format="csr", dtype=np.float32), home, texts))
    arrays = {}
    if all(PARAGRAPHS in p.arrays for p in parts):  # per document: the parts' counts in their order
        arrays[PARAGRAPHS] = np.concatenate([np.asarray(p.arrays[PARAGRAPHS], dtype=np.int64) for p in parts])
    if all(PARAGRAPH_STARTS in p.arrays for p in parts):  # unit indices: each part's moved past the units before it
        unit_off = np.cumsum([0] + [len(p.units.doc) for p in parts])
        arrays[PARAGRAPH_STARTS] = np.concatenate([np.asarray(p.arrays[PARAGRAPH_STARTS], dtype=np.int64) + o
                                                   for p, o in zip(parts, unit_off)])
    return Ladder(method, units, levels, dict(parts[0].meta), arrays)


def concat_saved(dirs: Sequence[Path], out: Path, block: int = BLOCK) -> dict:
    """``concat_ladders([Ladder.load(d) for d in dirs]).save(out)`` in memory bounded by one shard.

    Every output file is written as a stream, one shard's part at a time, in the bytes ``save``
    writes: unit and stored chunk texts are copied as bytes (a saved ladder's jsonl lines are the
    texts' JSON), document ids are copied as JSON, and the arrays (unit documents, each level's
    coverage and home chunks) go to disk in blocks of ``block`` values with their offsets added, the
    coverage as the compressed npz ``scipy.sparse.save_npz`` writes (one zip member per array, each
    deflated as a stream; deflate's output does not depend on how its input is cut). So the merge's
    memory is one shard's arrays, whatever the corpus (a PubMed-size merge held 275M units' arrays
    before: ~14 GB). The files equal those of the in-memory concatenation (a test holds them to it).
    Returns ``{"units": U, "documents": D, "chunks": [C per level]}``.
    """
    dirs = [Path(d) for d in dirs]
    if not dirs:
        raise ValueError("no ladders to concatenate")
    specs = [json.loads((d / "ladder.json").read_text()) for d in dirs]
    if len({len(s["levels"]) for s in specs}) != 1:
        raise ValueError("ladders to concatenate differ in their number of levels")
    n_units = [_npy_length(d / "unit_doc.npy") for d in dirs]
    n_docs = _concat_json_lists([d / "doc_ids.json" for d in dirs], out / "doc_ids.json")
    doc_off = np.cumsum([0] + n_docs)
    _copy_bytes([d / "units.jsonl" for d in dirs], out / "units.jsonl")
    _write_npy(out / "unit_doc.npy", np.int64, sum(n_units),
               (np.load(d / "unit_doc.npy", allow_pickle=False) + o for d, o in zip(dirs, doc_off)), block)
    chunks = []
    for j, lv0 in enumerate(specs[0]["levels"]):
        covs = [d / f"level{j}_coverage.npz" for d in dirs]
        for d, cov in zip(dirs, covs):  # what concat_ladders checks of every part, one part at a time
            _check_document_local(d, j, np.load(d / "unit_doc.npy", allow_pickle=False), cov)
        shapes = [_npz_csr_shape(c) for c in covs]
        chunk_off = np.cumsum([0] + [r for r, _, _ in shapes])
        _save_block_diag_npz(covs, shapes, out / f"level{j}_coverage.npz", block)
        home_paths = [d / f"level{j}_home.npy" for d in dirs]  # each unit's home chunk (-1: none)
        homes = (np.load(p, allow_pickle=False) for p in home_paths)
        _write_npy(out / f"level{j}_home.npy", np.int64, sum(map(_npy_length, home_paths)),
                   (np.where(h >= 0, h + o, -1) for h, o in zip(homes, chunk_off)), block)
        if lv0["stored_texts"]:
            _copy_bytes([d / f"level{j}_texts.jsonl" for d in dirs], out / f"level{j}_texts.jsonl")
        chunks.append(int(chunk_off[-1]))
    levels = [{"name": lv["name"], "stored_texts": lv["stored_texts"]} for lv in specs[0]["levels"]]
    (out / "ladder.json").write_text(json.dumps({"method": specs[0]["method"], "levels": levels,
                                                 "meta": specs[0].get("meta", {})}, indent=2))
    # as concat_ladders: the parts' paragraph counts (one int64 per document) and the units opening a paragraph
    # (moved past the units before them), each where every part has them
    counts, starts = [], []
    for d, o in zip(dirs, np.cumsum([0] + n_units)):
        with np.load(d / "arrays.npz", allow_pickle=False) as z:
            counts.append(z[PARAGRAPHS].astype(np.int64) if PARAGRAPHS in z.files else None)
            starts.append(z[PARAGRAPH_STARTS].astype(np.int64) + o if PARAGRAPH_STARTS in z.files else None)
    arrays = {}
    if all(c is not None for c in counts):
        arrays[PARAGRAPHS] = np.concatenate(counts)
    if all(s is not None for s in starts):
        arrays[PARAGRAPH_STARTS] = np.concatenate(starts)
    np.savez(out / "arrays.npz", **arrays)
    return {"units": int(sum(n_units)), "documents": int(doc_off[-1]), "chunks": chunks}


def _copy_bytes(sources: Sequence[Path], dest: Path) -> None:
    with open(dest, "wb") as out:
        for s in sources:
            with open(s, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)


def _concat_json_lists(sources: Sequence[Path], dest: Path) -> list[int]:
    """The JSON of the concatenated lists (as ``json.dumps(all, ensure_ascii=False)`` writes it),
    one source list in memory at a time; returns each list's length."""
    lengths, first = [], True
    # the locale's encoding, as Ladder.save's write_text: the same bytes wherever both run
    with open(dest, "w") as out:
        out.write("[")
        for s in sources:
            items = json.loads(s.read_text())
            lengths.append(len(items))
            if items:
                out.write(("" if first else ", ") + json.dumps(items, ensure_ascii=False)[1:-1])
                first = False
        out.write("]")
    return lengths


def _npy_header(dtype, n: int) -> dict:
    return {"descr": npformat.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (int(n),)}


def _write_npy_stream(f, dtype, n: int, parts: Iterable[np.ndarray], block: int) -> None:
    """A 1-d ``.npy`` of ``n`` values of ``dtype`` into the open binary ``f``, from consecutive parts:
    the bytes ``np.save`` writes for their concatenation."""
    npformat.write_array_header_1_0(f, _npy_header(dtype, n))
    written = 0
    for a in parts:
        a = np.ascontiguousarray(a, dtype=dtype)
        for s in range(0, len(a), block):
            f.write(a[s:s + block].tobytes())
        written += len(a)
    if written != n:
        raise ValueError(f"{getattr(f, 'name', f)}: {written} values written, the header says {n}")


def _write_npy(path: Path, dtype, n: int, parts: Iterable[np.ndarray], block: int) -> None:
    with open(path, "wb") as f:
        _write_npy_stream(f, dtype, n, parts, block)


def _read_npy_header(f) -> tuple:
    version = npformat.read_magic(f)
    read = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
    return read(f)  # (shape, fortran_order, dtype)


def _npy_length(path: Path) -> int:
    """The length of a 1-d ``.npy`` from its header (nothing else read)."""
    with open(path, "rb") as f:
        return int(_read_npy_header(f)[0][0])


def _npz_member(path: Path, name: str) -> np.ndarray:
    with np.load(path, allow_pickle=False) as z:
        return z[name]


def _npz_csr_shape(path: Path) -> tuple[int, int, int]:
    """(rows, columns, stored values) of a saved CSR matrix: its shape member and its indices' header."""
    rows, cols = (int(x) for x in _npz_member(path, "shape"))
    with zipfile.ZipFile(path) as z, z.open("indices.npy") as f:
        nnz = int(_read_npy_header(f)[0][0])
    return rows, cols, nnz


def _check_document_local(d: Path, j: int, doc: np.ndarray, cov_path: Path) -> None:
    indices, indptr = _npz_member(cov_path, "indices"), _npz_member(cov_path, "indptr")
    if len(indices) == 0:
        return
    dd = doc[indices]
    starts = indptr[:-1][np.diff(indptr) > 0]
    if (np.minimum.reduceat(dd, starts) != np.maximum.reduceat(dd, starts)).any():
        raise ValueError(f"{d}: level {j} links units across documents and cannot be concatenated")


def _save_block_diag_npz(paths: Sequence[Path], shapes: Sequence[tuple[int, int, int]], out: Path, block: int) -> None:
    """``sp.save_npz(out, sp.block_diag(covs, format="csr", dtype=float32), compressed=True)`` from
    the saved CSR parts, one part's array at a time (the members ``save_npz`` writes, in its order)."""
    rows = sum(r for r, _, _ in shapes)
    col_off = np.cumsum([0] + [c for _, c, _ in shapes])
    nnz_off = np.cumsum([0] + [n for _, _, n in shapes])
    cols, nnz = int(col_off[-1]), int(nnz_off[-1])
    # the index dtype scipy's CSR constructor keeps for the joined arrays (int64 only past int32)
    idx = np.int64 if max(rows, cols, nnz) > np.iinfo(np.int32).max else np.int32
    members = {
        "indices": (idx, nnz, (_npz_member(p, "indices").astype(idx) + idx(o) for p, o in zip(paths, col_off))),
        "indptr": (idx, rows + 1, itertools.chain([np.zeros(1, idx)], (
            _npz_member(p, "indptr")[1:].astype(idx) + idx(o) for p, o in zip(paths, nnz_off)))),
        "format": np.asanyarray(b"csr"),
        "shape": np.asanyarray((rows, cols)),
        "data": (np.float32, nnz, (_npz_member(p, "data") for p in paths)),
    }
    # as np.savez_compressed: zip64 members, deflated
    with zipfile.ZipFile(out, mode="w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        for name, spec in members.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as f:
                if isinstance(spec, np.ndarray):
                    npformat.write_array(f, spec)
                else:
                    _write_npy_stream(f, *spec, block)
