"""Concatenating ladders built over consecutive document ranges (shards) or separate corpora."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mogg.ladders.base import Ladder, Level, Units


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
    return Ladder(method, units, levels, dict(parts[0].meta))


def concat_saved(dirs: Sequence[Path], out: Path) -> dict:
    """``concat_ladders([Ladder.load(d) for d in dirs]).save(out)`` without holding the ladders:
    unit and stored chunk texts are copied as bytes (a saved ladder's jsonl lines are the texts'
    JSON, so the copies are the lines ``save`` would write), arrays are offset, and one level's
    coverage is in memory at a time. The files equal those of the in-memory concatenation (a test
    holds them to it); a shard merge of PubMed-size corpora needs no memory for their texts.
    Returns ``{"units": U, "documents": D, "chunks": [C per level], "doc_ids": [...]}``.
    """
    dirs = [Path(d) for d in dirs]
    if not dirs:
        raise ValueError("no ladders to concatenate")
    specs = [json.loads((d / "ladder.json").read_text()) for d in dirs]
    if len({len(s["levels"]) for s in specs}) != 1:
        raise ValueError("ladders to concatenate differ in their number of levels")
    docs = [np.load(d / "unit_doc.npy", allow_pickle=False) for d in dirs]
    doc_ids = [json.loads((d / "doc_ids.json").read_text()) for d in dirs]
    doc_off = np.cumsum([0] + [len(x) for x in doc_ids])
    _copy_bytes([d / "units.jsonl" for d in dirs], out / "units.jsonl")
    np.save(out / "unit_doc.npy", np.concatenate([x + o for x, o in zip(docs, doc_off)]).astype(np.int64))
    all_ids = [i for x in doc_ids for i in x]
    (out / "doc_ids.json").write_text(json.dumps(all_ids, ensure_ascii=False))
    chunks = []
    for j, lv0 in enumerate(specs[0]["levels"]):
        covs = [sp.load_npz(d / f"level{j}_coverage.npz").tocsr() for d in dirs]
        for d, doc, cov in zip(dirs, docs, covs):  # what concat_ladders checks of every part
            probe = Ladder("probe", Units([], doc, []), [Level("probe", cov, np.zeros(0, np.int64))])
            if not probe.is_document_local():
                raise ValueError(f"{d}: level {j} links units across documents and cannot be concatenated")
        homes = [np.load(d / f"level{j}_home.npy", allow_pickle=False) for d in dirs]
        chunk_off = np.cumsum([0] + [c.shape[0] for c in covs])
        home = np.concatenate([np.where(h >= 0, h + o, -1) for h, o in zip(homes, chunk_off)])
        sp.save_npz(out / f"level{j}_coverage.npz", _block_diag_csr(covs), compressed=True)
        np.save(out / f"level{j}_home.npy", home.astype(np.int64))
        if lv0["stored_texts"]:
            _copy_bytes([d / f"level{j}_texts.jsonl" for d in dirs], out / f"level{j}_texts.jsonl")
        chunks.append(int(chunk_off[-1]))
        del covs, homes
    levels = [{"name": lv["name"], "stored_texts": lv["stored_texts"]} for lv in specs[0]["levels"]]
    (out / "ladder.json").write_text(json.dumps({"method": specs[0]["method"], "levels": levels,
                                                 "meta": specs[0].get("meta", {})}, indent=2))
    np.savez(out / "arrays.npz")  # concat_ladders keeps no extra arrays
    return {"units": int(sum(len(x) for x in docs)), "documents": len(all_ids), "chunks": chunks, "doc_ids": all_ids}


def _copy_bytes(sources: Sequence[Path], dest: Path) -> None:
    with open(dest, "wb") as out:
        for s in sources:
            with open(s, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)


def _block_diag_csr(covs: Sequence[sp.csr_matrix]) -> sp.csr_matrix:
    """``sp.block_diag(covs, format="csr", dtype=float32)`` from the parts' CSR arrays directly (its
    COO detour holds two int64 index arrays per entry: ~4x the memory at PubMed's 275M units)."""
    col_off = np.cumsum([0] + [c.shape[1] for c in covs])
    nnz_off = np.cumsum([0] + [c.nnz for c in covs])
    shape = (sum(c.shape[0] for c in covs), int(col_off[-1]))
    idx_dtype = np.int32 if max(shape[1], int(nnz_off[-1])) < np.iinfo(np.int32).max else np.int64
    indices = np.concatenate([c.indices.astype(idx_dtype) + idx_dtype(o) for c, o in zip(covs, col_off)])
    indptr = np.concatenate([np.zeros(1, idx_dtype)] + [c.indptr[1:].astype(idx_dtype) + idx_dtype(o) for c, o in zip(covs, nnz_off)])
    data = np.concatenate([c.data.astype(np.float32, copy=False) for c in covs])
    return sp.csr_matrix((data, indices, indptr), shape=shape)
