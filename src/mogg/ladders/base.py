"""The granularity ladder: units, levels and coverage (docs/design.md section 2).

Every method (MoG, MoGG, RAPTOR, MAL) builds a :class:`Ladder`; retrieval, selection, labels,
routing and evaluation only ever see this structure.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

log = logging.getLogger(__name__)


@dataclass
class Units:
    """The finest pieces of text. Unit ``i`` has text ``text[i]`` and document ``doc[i]``.

    Units are stored in corpus order (by document, then position), so ids are stable integers.
    """

    text: list[str]
    doc: np.ndarray  # int64 [U], index into doc_ids
    doc_ids: list[str]  # [D] corpus ids

    def __len__(self) -> int:
        return len(self.text)


@dataclass
class Level:
    """One granularity: chunks and the units each covers.

    ``coverage`` is a CSR (chunks x units) 0/1 matrix. ``home[u]`` is the chunk of this level that
    eq. 2 injects for unit ``u`` (the containing chunk for partitions, the chunk centred on ``u``
    for graph neighbourhoods, the ancestor for trees); -1 when the level has none for ``u``.
    ``texts`` is ``None`` when chunk text is the concatenation of its units in corpus order.
    """

    name: str
    coverage: sp.csr_matrix  # [C, U]
    home: np.ndarray  # int64 [U]
    texts: list[str] | None = None

    def __len__(self) -> int:
        return self.coverage.shape[0]

    def chunk_texts(self, units: Units) -> list[str]:
        """Text of every chunk (stored, or joined from its units)."""
        if self.texts is not None:
            return self.texts
        ind, ptr = self.coverage.indices, self.coverage.indptr
        return [" ".join(units.text[u] for u in ind[ptr[c] : ptr[c + 1]]) for c in range(len(self))]

    def chunk_docs(self, units: Units) -> list[np.ndarray]:
        """Document indices each chunk touches (one for nested levels, several for graphs)."""
        docs = units.doc[self.coverage.indices]
        ptr = self.coverage.indptr
        return [np.unique(docs[ptr[c] : ptr[c + 1]]) for c in range(len(self))]


@dataclass
class Ladder:
    """Units plus an ordered list of levels (finest first)."""

    method: str
    units: Units
    levels: list[Level]
    meta: dict = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # extra named arrays, e.g. graph edges
    _texts: dict = field(default_factory=dict, repr=False)  # memo: chunk texts and docs per level

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @property
    def level_names(self) -> list[str]:
        return [lv.name for lv in self.levels]

    def texts(self, level: int) -> list[str]:
        """Chunk texts of one level (memoised: joining units is not free)."""
        if level not in self._texts:
            self._texts[level] = self.levels[level].chunk_texts(self.units)
        return self._texts[level]

    def chunk_tokens(self, level: int) -> np.ndarray:
        """:func:`~mogg.core.text.count_tokens` of every chunk of a level (float64 [C], memoised).

        A chunk joined from its units has their token counts summed (no token spans the joining
        space), so the units are counted once for all levels instead of each level's texts again.
        """
        key = ("tokens", level)
        if key not in self._texts:
            from mogg.core.text import count_tokens

            lv = self.levels[level]
            if lv.texts is not None:
                n = np.fromiter((count_tokens(t) for t in lv.texts), dtype=np.float64, count=len(lv.texts))
            else:
                if "unit_tokens" not in self._texts:
                    self._texts["unit_tokens"] = np.fromiter((count_tokens(t) for t in self.units.text),
                                                             dtype=np.float64, count=len(self.units))
                ones = lv.coverage.astype(bool).astype(np.float64)
                n = np.asarray(ones @ self._texts["unit_tokens"], dtype=np.float64)
            self._texts[key] = n
        return self._texts[key]

    def chunk_doc(self, level: int) -> np.ndarray:
        """Document index of every chunk of a level (int64 [C]).

        A chunk's document is that of its centre: the first unit whose ``home`` it is (the node
        itself for graph neighbourhoods, any unit for partitions), else its first covered unit.
        """
        key = ("doc", level)
        if key not in self._texts:
            lv = self.levels[level]
            cov = lv.coverage
            centre = cov.indices[np.minimum(cov.indptr[:-1], max(len(cov.indices) - 1, 0))].astype(np.int64)
            has = np.flatnonzero(lv.home >= 0)[::-1]  # reversed: the smallest unit id wins
            centre[lv.home[has]] = has
            self._texts[key] = self.units.doc[centre]
        return self._texts[key]

    def source_positions(self) -> np.ndarray:
        """Each document's place [D] with a source's sections together (:func:`mogg.ladders.sources.source_positions`):
        the array :func:`mogg.ladders.store.build_ladder` attaches (:data:`~mogg.ladders.sources.SOURCE_POSITIONS`,
        computed once per artifact store) where it is a permutation of the documents, else computed from the ids once
        (a ladder built outside the store, a concatenation of parts); memoised."""
        from mogg.ladders.sources import SOURCE_POSITIONS, is_permutation, source_positions

        if "source_positions" not in self._texts:
            stored = self.arrays.get(SOURCE_POSITIONS)
            n = len(self.units.doc_ids)
            if stored is not None and is_permutation(stored, n):
                self._texts["source_positions"] = np.asarray(stored, dtype=np.int64)
            else:
                if stored is not None:  # a checksummed artifact cannot differ; an array edited in memory can
                    log.warning("ladder's stored %s is not a permutation of its %d documents: recomputed",
                                SOURCE_POSITIONS, n)
                self._texts["source_positions"] = source_positions(self.units.doc_ids)
        return self._texts["source_positions"]

    def doc_paragraphs(self) -> np.ndarray | None:
        """Each document's paragraphs [D] (int64, >= 1: :func:`mogg.ladders.sources.paragraph_counts`) as
        :func:`mogg.ladders.store.build_ladder` attaches them (stored at build, or a derived artifact for a ladder
        saved before they were, or a merge of shards); None where the ladder was built without them."""
        from mogg.ladders.sources import PARAGRAPHS

        counts = self.arrays.get(PARAGRAPHS)
        if counts is None:
            return None
        counts = np.asarray(counts)
        if counts.shape != (len(self.units.doc_ids),) or not np.issubdtype(counts.dtype, np.integer) or \
                (len(counts) and counts.min() < 1):
            raise ValueError(f"ladder's {PARAGRAPHS} is not one count >= 1 per document ({counts.shape} for "
                             f"{len(self.units.doc_ids)} documents)")
        return counts.astype(np.int64, copy=False)

    def paragraph_starts(self) -> np.ndarray | None:
        """The units that open a paragraph other than their document's first (int64, increasing:
        :data:`~mogg.ladders.sources.PARAGRAPH_STARTS`, attached as :meth:`doc_paragraphs`' counts are); None where
        the ladder was built without them. What routing reads (a binary search per candidate, so that its cost
        follows the questions); validated once, memoised."""
        from mogg.ladders.sources import PARAGRAPH_STARTS

        starts = self.arrays.get(PARAGRAPH_STARTS)
        if starts is None:
            return None
        if "paragraph_starts" not in self._texts:
            starts = np.asarray(starts)
            n = len(self.units.doc)
            if starts.ndim != 1 or not np.issubdtype(starts.dtype, np.integer) or (len(starts) and (
                    starts.min() < 1 or starts.max() >= n or (np.diff(starts) <= 0).any())):
                raise ValueError(f"ladder's {PARAGRAPH_STARTS} is not increasing unit indices in [1, {n}) "
                                 f"({starts.shape}, {starts.dtype})")
            self._texts["paragraph_starts"] = starts.astype(np.int64, copy=False)
        return self._texts["paragraph_starts"]

    def unit_paragraphs(self) -> np.ndarray | None:
        """Every unit's paragraph as one id over the corpus (int64 [U]: :func:`mogg.ladders.sources.paragraph_ids`
        of :meth:`paragraph_starts`); None where the ladder was built without them. A whole-corpus view for
        analysis; routing reads :meth:`paragraph_starts` instead, so that its cost follows the questions."""
        from mogg.ladders.sources import paragraph_ids

        starts = self.paragraph_starts()
        return None if starts is None else paragraph_ids(self.units.doc, starts)

    def sources(self):
        """The corpus in :meth:`source_positions`' order (:class:`mogg.ladders.sources.Sources`: a source's documents
        one run, read by :func:`mogg.ladders.sources.source_runs` around given documents); memoised, no id read."""
        from mogg.ladders.sources import corpus_sources

        if "sources" not in self._texts:
            self._texts["sources"] = corpus_sources(self.units.doc_ids, self.source_positions())
        return self._texts["sources"]

    def source_unit_docs(self) -> np.ndarray:
        """Every unit's document [U] numbered by :meth:`source_positions`: what the set-shape decisions read as a
        unit's document (a source's sections neighbour in any corpus order); memoised."""
        if "source_unit_docs" not in self._texts:
            self._texts["source_unit_docs"] = self.source_positions()[self.units.doc]
        return self._texts["source_unit_docs"]

    def is_document_local(self) -> bool:
        """Whether every chunk of every level lies inside one document (nested MoG levels, a graph's
        node-only stage), i.e. ladders of consecutive document ranges concatenate exactly."""
        doc = self.units.doc
        for lv in self.levels:
            cov = lv.coverage
            if cov.nnz == 0:
                continue
            d = doc[cov.indices]
            starts = cov.indptr[:-1][np.diff(cov.indptr) > 0]
            if (np.minimum.reduceat(d, starts) != np.maximum.reduceat(d, starts)).any():
                return False
        return True

    def save(self, directory: Path) -> None:
        """Write the ladder's files (units jsonl, coverage npz, home npy, meta json)."""
        directory = Path(directory)
        with open(directory / "units.jsonl", "w", encoding="utf-8") as f:
            for t in self.units.text:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        np.save(directory / "unit_doc.npy", self.units.doc.astype(np.int64))
        (directory / "doc_ids.json").write_text(json.dumps(self.units.doc_ids, ensure_ascii=False))
        levels = []
        for j, lv in enumerate(self.levels):
            sp.save_npz(directory / f"level{j}_coverage.npz", lv.coverage.tocsr(), compressed=True)
            np.save(directory / f"level{j}_home.npy", lv.home.astype(np.int64))
            if lv.texts is not None:
                with open(directory / f"level{j}_texts.jsonl", "w", encoding="utf-8") as f:
                    for t in lv.texts:
                        f.write(json.dumps(t, ensure_ascii=False) + "\n")
            levels.append({"name": lv.name, "stored_texts": lv.texts is not None})
        (directory / "ladder.json").write_text(
            json.dumps({"method": self.method, "levels": levels, "meta": self.meta}, indent=2)
        )
        np.savez(directory / "arrays.npz", **self.arrays)

    @classmethod
    def load(cls, directory: Path) -> "Ladder":
        """Read a ladder written by :meth:`save` (no pickle anywhere)."""
        directory = Path(directory)
        spec = json.loads((directory / "ladder.json").read_text())
        with open(directory / "units.jsonl", encoding="utf-8") as f:
            text = [json.loads(line) for line in f]
        units = Units(
            text=text,
            doc=np.load(directory / "unit_doc.npy", allow_pickle=False),
            doc_ids=json.loads((directory / "doc_ids.json").read_text()),
        )
        levels = []
        for j, ls in enumerate(spec["levels"]):
            texts = None
            if ls["stored_texts"]:
                with open(directory / f"level{j}_texts.jsonl", encoding="utf-8") as f:
                    texts = [json.loads(line) for line in f]
            levels.append(
                Level(
                    name=ls["name"],
                    coverage=sp.load_npz(directory / f"level{j}_coverage.npz").tocsr(),
                    home=np.load(directory / f"level{j}_home.npy", allow_pickle=False),
                    texts=texts,
                )
            )
        arrays = {}
        if (directory / "arrays.npz").exists():  # ladders saved before the field existed have none
            with np.load(directory / "arrays.npz", allow_pickle=False) as z:
                arrays = {name: z[name] for name in z.files}
        return cls(method=spec["method"], units=units, levels=levels, meta=spec.get("meta", {}), arrays=arrays)


def partition_level(name: str, chunk_of_unit: np.ndarray) -> Level:
    """A level that partitions the units: ``chunk_of_unit[u]`` (int64 [U], values 0..C-1)."""
    n_units = len(chunk_of_unit)
    n_chunks = int(chunk_of_unit.max()) + 1 if n_units else 0
    cov = sp.csr_matrix(
        (np.ones(n_units, dtype=np.float32), (chunk_of_unit, np.arange(n_units))), shape=(n_chunks, n_units)
    )
    return Level(name=name, coverage=cov, home=chunk_of_unit.astype(np.int64))
