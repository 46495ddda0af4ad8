"""MAL-RAG (Zheng et al.): levels from the documents' own structure.

A document's content is read as blocks (:func:`mogg.core.text.text_blocks`: separated by blank lines, or lines that
end sentences): a short single-line block that ends no statement is a section heading
(:func:`mogg.core.text.is_heading`), every other block a paragraph (PubMedQA's
labelled contexts with ``structured=True``, regrouped StatPearls articles and plain text with
headings all read this way). Units are a paragraph's sentences and list items (:func:`mogg.core.text.split_units`,
the MoG ladder's rule); the levels, finest first:

* ``multi``: ``multi_sentences`` consecutive sentences of one paragraph (or, with a ``chunker``,
  the semantic chunks of each paragraph);
* ``paragraph``; ``section`` (the paragraphs under one heading); ``document``.

Section and document chunks hold **map-reduce summaries** (paragraph summaries -> section
summary -> document summary) from any summarizer of :mod:`mogg.ladders.summarizers`; without a
summarizer they hold their text. A level that does not split anything further (no document has
two sections, say) is dropped with a logged note (``ladder.meta["notes"]``), never a crash.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from mogg.core.text import BLOCK_RULE, UNIT_RULE, is_heading, log_cuts, split_units, text_blocks
from mogg.data.records import Document
from mogg.ladders.base import Ladder, Level, Units, partition_level
from mogg.ladders.builder import LadderBuilder

log = logging.getLogger(__name__)

def parse_structure(content: str, heading_max_words: int = 12) -> list[tuple[str | None, list[str]]]:
    """``[(heading or None, [paragraph, ...]), ...]`` of one document's content (empty blocks dropped; whitespace
    normalised)."""
    return [(h, [" ".join(p.split()) for p in ps]) for h, ps in _blocks(content, heading_max_words)]


def _blocks(content: str, heading_max_words: int) -> list[tuple[str | None, list[str]]]:
    """:func:`parse_structure` with each paragraph's block as written: its line breaks mark its list items
    (:func:`mogg.core.text.split_units`)."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for block in text_blocks(content):
        if is_heading(block, heading_max_words):
            text = " ".join(block.split())
            sections.append((text.lstrip("#").strip() or text, []))
        else:
            sections[-1][1].append(block)
    return [(h, ps) for h, ps in sections if ps]


class StructuralLadderBuilder(LadderBuilder):
    """Build the MAL ladder (see the module doc).

    Args:
        multi_sentences: sentences per chunk of the finest level.
        summarizer: map-reduce summaries for section and document chunks (None: their text).
        chunker: a :class:`mogg.ladders.semantic.SemanticChunker` for the finest level instead.
        heading_max_words: the longest single-line block still read as a heading.
        max_sentence_tokens: a longer "sentence" is cut (logged).
        summary_tokens: length budget of every summary.
    """

    method = "mal"

    def __init__(self, multi_sentences: int = 3, summarizer=None, chunker=None, heading_max_words: int = 12,
                 max_sentence_tokens: int = 256, summary_tokens: int = 128, policies=None, reports=None):
        super().__init__(policies, reports)
        if multi_sentences < 1 or heading_max_words < 1 or max_sentence_tokens < 1 or summary_tokens < 1:
            raise ValueError("multi_sentences, heading_max_words, max_sentence_tokens, summary_tokens must be >= 1")
        self.multi_sentences, self.summarizer, self.chunker = int(multi_sentences), summarizer, chunker
        self.heading_max_words, self.max_sentence_tokens = int(heading_max_words), int(max_sentence_tokens)
        self.summary_tokens = int(summary_tokens)

    def config(self) -> dict:
        return {"method": self.method, "multi_sentences": self.multi_sentences,
                "summarizer": self.summarizer.config() if self.summarizer is not None else None,
                "chunker": self.chunker.config() if self.chunker is not None else None,
                "heading_max_words": self.heading_max_words, "max_sentence_tokens": self.max_sentence_tokens,
                "summary_tokens": self.summary_tokens, "paragraph_rule": BLOCK_RULE,
                "unit_rule": UNIT_RULE}  # a paragraph's units (split_units): a new rule, a new ladder

    def build(self, documents: Sequence[Document], show_progress: bool = False) -> Ladder:
        structure = [_blocks(d.content, self.heading_max_words) or [(None, [d.content])] for d in documents]
        paragraphs = [p for secs in structure for _, ps in secs for p in ps]  # as written: line breaks mark items
        plain = [" ".join(p.split()) for p in paragraphs]  # a paragraph that splits into nothing is one unit
        # the finest chunks of every paragraph: semantic chunks, or groups of sentences
        if self.chunker is not None:
            pieces = self.chunker.chunk_texts(paragraphs, show_progress)
            units_per_par = [[[c] for c in chunks] or [[p]] for chunks, p in zip(pieces, plain)]  # a chunk = one unit
        else:
            cuts: dict = {}
            units_per_par = []
            for p, flat in zip(tqdm(paragraphs, desc="sentence split", disable=not show_progress), plain):
                ss = split_units(p, self.max_sentence_tokens, cuts) or [flat]
                units_per_par.append([ss[i:i + self.multi_sentences] for i in range(0, len(ss), self.multi_sentences)])
            log_cuts(cuts, self.max_sentence_tokens, "MAL units")
        text, doc, sec, par, multi = [], [], [], [], []
        k = s_id = m_id = 0
        for d, secs in enumerate(structure):
            for _, ps in secs:
                for _ in ps:
                    for group in units_per_par[k]:
                        for u in group:
                            text.append(u)
                            doc.append(d)
                            sec.append(s_id)
                            par.append(k)
                            multi.append(m_id)
                        m_id += 1
                    k += 1
                s_id += 1
        if not text:
            raise ValueError("cannot build a ladder over zero units (empty corpus?)")
        units = Units(text=text, doc=np.asarray(doc, dtype=np.int64), doc_ids=[d.id for d in documents])
        keys = {"multi": np.asarray(multi), "paragraph": np.asarray(par), "section": np.asarray(sec), "document": units.doc}
        chunks = {name: np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1 for name, key in keys.items()}
        n_doc = int(chunks["document"][-1]) + 1
        levels, notes = [], []
        for name, chunk in chunks.items():
            n = int(chunk[-1]) + 1  # nested partitions: equal counts mean equal partitions
            if name in ("paragraph", "section") and (n == int(levels[-1][1][-1]) + 1 or n == n_doc):
                same = levels[-1][0] if n == int(levels[-1][1][-1]) + 1 else "document"
                notes.append(f"level {name!r} dropped: it splits the corpus exactly as the {same!r} level")
                continue
            levels.append((name, chunk))
        for n in notes:
            log.info("MAL ladder: %s", n)
        built = [partition_level(name, chunk) for name, chunk in levels]
        if self.summarizer is not None:
            built = self._summarize(built, units, structure, show_progress)
        ladder = Ladder(method=self.method, units=units, levels=built,
                        meta={**self.config(), "levels": [lv.name for lv in built], "notes": notes})
        log.info("MAL ladder: %d units, chunks per level %s", len(units), {lv.name: len(lv) for lv in built})
        return ladder

    def _summarize(self, levels: list[Level], units: Units, structure, show_progress: bool) -> list[Level]:
        """Map-reduce: paragraph summaries -> section summaries -> document summaries."""
        by_name = {lv.name: lv for lv in levels}
        par_lv = by_name.get("paragraph") or levels[0]
        par_text = [" ".join(units.text[u] for u in par_lv.coverage.indices[par_lv.coverage.indptr[c]:par_lv.coverage.indptr[c + 1]])
                    for c in range(len(par_lv))]
        budget = self.summary_tokens
        par_sum = self.summarizer.summarize([[t] for t in par_text], budget)  # map
        out = []
        for lv in levels:
            if lv.name not in ("section", "document"):
                out.append(lv)
                continue
            # children of each chunk: the paragraphs whose units it covers, in order (reduce)
            groups: list[list[str]] = [[] for _ in range(len(lv))]
            first_unit = par_lv.coverage.indices[par_lv.coverage.indptr[:-1]]
            for p, u in enumerate(first_unit):
                groups[lv.home[u]].append(par_sum[p])
            if lv.name == "document" and "section" in by_name:
                sec = next(x for x in out if x.name == "section")
                groups = [[] for _ in range(len(lv))]
                first = sec.coverage.indices[sec.coverage.indptr[:-1]]
                for c, u in enumerate(first):
                    groups[lv.home[u]].append(sec.texts[c])
            texts = self.summarizer.summarize(groups, budget)
            out.append(Level(lv.name, lv.coverage, lv.home, [t if t.strip() else " ".join(g) for t, g in zip(texts, groups)]))
        log.info("MAL summaries: %d paragraphs, %s", len(par_sum), {lv.name: len(lv) for lv in out if lv.texts is not None})
        return out


def token_lengths(ladder: Ladder, level: int) -> np.ndarray:
    """Tokens of every chunk of a level (memoised on the ladder: :meth:`Ladder.chunk_tokens`)."""
    return ladder.chunk_tokens(level)
