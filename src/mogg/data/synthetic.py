"""Scale corpora made of real sentences: the three visible sets' sentences recombined into new documents.

A rehearsal at PubMed scale needs tens of millions of sentences; the visible sets hold ~0.2M. Each
synthetic document draws ``per_doc`` sentences uniformly (seeded) from the pool of real sentences
(PubMedQA* contexts, MedMCQA explanations, COVID-QA papers), so word statistics, sentence lengths
and questions' vocabulary overlap are those of the real texts, while every document (and every
chunk of two or more sentences) is a new text. Single sentences repeat (~N / pool times each): a
level of one-sentence chunks has many exact ties, which only the tie rule decides.

Documents are generated block by block from (seed, block index), so any document range can be
produced without the ones before it, and a corpus file is written in bounded memory.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from mogg.data.records import Document

log = logging.getLogger(__name__)

__all__ = ["real_sentences", "recombined_documents", "write_recombined_jsonl"]

_BLOCK = 10_000  # documents per generated block (one RNG stream each)


def real_sentences(data_dir: str | os.PathLike, min_tokens: int = 3) -> list[str]:
    """The visible sets' sentences (PubMedQA* contexts, MedMCQA dev explanations, COVID-QA papers),
    split with :func:`mogg.core.text.split_sentences`; those under ``min_tokens`` tokens are dropped.
    Sources missing under ``data_dir`` are skipped (logged); none at all is an error."""
    from mogg.core.text import count_tokens, split_sentences
    from mogg.data.corpus import MedMCQAExplanations, PubMedQAContexts
    from mogg.data.squad import SquadPapers

    d = Path(data_dir)
    sources = [PubMedQAContexts(str(d / "mirage/rawdata/pubmedqa/data/test_set.json")),
               MedMCQAExplanations(str(d / "mirage/rawdata/medmcqa/data/dev.json")),
               SquadPapers(str(d / "covidqa/200423_covidQA.json"))]
    out: list[str] = []
    for s in sources:
        if not all(f.exists() for f in s.files()):
            log.warning("synthetic corpus: %s not found under %s, skipped", s.files()[0].name, d)
            continue
        for doc in s:
            out.extend(x for x in split_sentences(doc.text, 256) if count_tokens(x) >= min_tokens)
    if not out:
        raise FileNotFoundError(f"no PubMedQA*, MedMCQA or COVID-QA data under {d} (set MOGG_DATA_DIR)")
    return out


def recombined_documents(pool: list[str], n_docs: int, per_doc: int = 10, seed: int = 0,
                         start: int = 0) -> Iterator[Document]:
    """Documents ``start..n_docs-1`` of the corpus of ``per_doc`` sentences each drawn from ``pool``
    (ids ``syn:<i>``); the same (pool, seed) always gives the same document ``i``."""
    n = len(pool)
    first = start // _BLOCK
    for b in range(first, (n_docs + _BLOCK - 1) // _BLOCK):
        lo, hi = b * _BLOCK, min((b + 1) * _BLOCK, n_docs)
        picks = np.random.default_rng([seed, b]).integers(0, n, size=(hi - lo, per_doc))  # [docs, per_doc]
        for i in range(max(lo, start), hi):
            yield Document(id=f"syn:{i}", title="", content=" ".join(pool[j] for j in picks[i - lo]))


def write_recombined_jsonl(path: str | os.PathLike, pool: list[str], n_docs: int, per_doc: int = 10,
                           seed: int = 0) -> Path:
    """Write the corpus as MedRAG jsonl (``id``, ``title``, ``content``), atomically; returns ``path``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for doc in recombined_documents(pool, n_docs, per_doc, seed):
            f.write(json.dumps({"id": doc.id, "title": doc.title, "content": doc.content}, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path
