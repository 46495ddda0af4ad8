"""The page-section stand-in (issue 49): a visible set of the page-section evidence shape, derived
from MedMCQA's explained questions when it is read (no file to prepare first).

The shape it stands in for: a document is one consumer-health page of about five sections, and a
question's evidence is one whole section of it. The explanations of one subject are ordered by
topic and by their words (the first component of their TF-IDF vectors, so neighbours on a page are
related), and every ``sections`` consecutive explanations become one page, each explanation a
section (paragraph) of it. A question's gold evidence is its own explanation, one section of its
page; its gold document is the page. The answer options are left out unless ``options``: the
pages' questions are open questions.

:class:`PagesQA` (the questions) and :class:`PagesCorpus` (the pages) take the same arguments and
build the same book (:func:`page_book`, deterministic: ``seed`` is the SVD's); the corpus holds the
questions' evidence, a gold-context setting the experiment declares (``corpus.allow_gold``).
``scripts/make_pages_standin.py`` writes the same book as generic-format files.

:class:`PagesCorpus` with ``halves`` writes each section of two sentences or more as two paragraphs (a blank line
at the sentence break nearest its middle): a page whose sections run over several paragraphs, as a web page's
often do, where a paragraph is not a section (the long-section shape so written: ``conf/heldout/pages_halves``); with
``headings`` each section opens with a heading line (its topic), as a web page's sections do
(``conf/heldout/pages_headed``: the halves under headings).
"""

from __future__ import annotations

import logging
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from mogg.core.text import HEADING_WORDS
from mogg.data.corpus import Located, _Source
from mogg.data.errors import DataError
from mogg.data.files import iter_jsonl, str_field
from mogg.data.qa import MedMCQAExplained, QAItem, _check_limit, _QASet
from mogg.data.records import Document

logger = logging.getLogger(__name__)

DATASET = "pages"


def page_book(items: list[QAItem], subjects: dict[str, tuple[str, str]], sections: int, seed: int
              ) -> list[tuple[str, list[QAItem]]]:
    """(page id, its items in section order) for every page: items grouped by subject, ordered by
    topic then by the first TF-IDF component of their evidence, cut into runs of ``sections``."""
    import numpy as np
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    if sections < 2:
        raise ValueError(f"sections={sections}: a page needs >= 2 sections (one section is the plain MedMCQA set)")
    by_subject: dict[str, list[QAItem]] = defaultdict(list)
    for it in items:
        by_subject[subjects.get(it.id, ("", ""))[0] or "other"].append(it)
    out = []
    for subject in sorted(by_subject):
        group = by_subject[subject]
        if len(group) > 2:
            x = TfidfVectorizer(stop_words="english", min_df=1).fit_transform([it.evidence_text for it in group])
            comp = TruncatedSVD(n_components=1, random_state=seed).fit_transform(x)[:, 0]
        else:
            comp = np.zeros(len(group))
        order = sorted(range(len(group)),
                       key=lambda i: (subjects.get(group[i].id, ("", ""))[1] or "~", comp[i], group[i].id))
        for a in range(0, len(order), sections):
            out.append((f"page-{subject.lower().replace(' ', '_')}-{a // sections}",
                        [group[i] for i in order[a:a + sections]]))
    return out


class _PagesInput:
    """What the questions and the corpus share: MedMCQA's explained questions (the arguments of
    :class:`mogg.data.qa.MedMCQAExplained`) cut into pages of ``sections`` sections."""

    def __init__(self, benchmark_path: str, raw_path: str, sections: int = 5, seed: int = 0, options: bool = False,
                 min_chars: int = 40, min_evidence_tokens: int = 5) -> None:
        if int(sections) < 2:
            raise ValueError(f"sections={sections}: a page needs >= 2 sections (one section is the plain MedMCQA set)")
        self.explained = MedMCQAExplained(benchmark_path, raw_path, min_chars=min_chars,
                                          min_evidence_tokens=min_evidence_tokens)
        self.sections, self.seed, self.options = int(sections), int(seed), bool(options)

    def files(self) -> list[Path]:
        return self.explained.files()

    def params(self) -> dict:
        p = self.explained.params()
        p.pop("limit")
        return {**p, "sections": self.sections, "seed": self.seed, "options": self.options}

    def book(self) -> list[tuple[str, list[QAItem]]]:
        items = [it for it in self.explained.load() if it.evidence_text.strip()]
        book = page_book(items, self.subjects(), self.sections, self.seed)
        if not book:
            raise DataError(self.explained.raw_path, "no explained MedMCQA question to build pages from")
        return book

    def subjects(self) -> dict[str, tuple[str, str]]:
        """Each raw MedMCQA row's (subject, topic) by its id (empty strings where the row names none)."""
        raw = self.explained.raw_path
        subjects = {}
        for lineno, obj in iter_jsonl(raw):
            row_id = str_field(obj, "id", raw, lineno)
            subjects[row_id] = (obj.get("subject_name") or "", obj.get("topic_name") or "")
        return subjects


class PagesQA(_PagesInput, _QASet):
    """The stand-in's questions (module doc): gold evidence its own explanation, gold document its page."""

    def __init__(self, benchmark_path: str, raw_path: str, sections: int = 5, seed: int = 0, options: bool = False,
                 min_chars: int = 40, min_evidence_tokens: int = 5, limit: int | None = None) -> None:
        super().__init__(benchmark_path, raw_path, sections, seed, options, min_chars, min_evidence_tokens)
        self.limit = _check_limit(limit)

    def params(self) -> dict:
        return {**super().params(), "limit": self.limit}

    def load(self) -> list[QAItem]:
        out = []
        for pid, members in self.book():
            for it in members:
                keep = self.options and it.options
                out.append(QAItem(id=it.id, question=it.question, answer=it.answer if keep else it.answer_text,
                                  options=dict(it.options) if keep else {}, gold_evidence=[it.evidence_text],
                                  gold_doc_ids=[pid], dataset=DATASET))
        # the book's order (page by page), then the first ``limit``: a limit keeps whole pages' questions
        return out if self.limit is None else out[: self.limit]


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")  # a sentence's end, then a capital or a digit


def halved(section: str) -> str:
    """``section`` written as two paragraphs: a blank line at the sentence break nearest its middle (in
    characters); unchanged where it holds no break between two sentences."""
    cuts = [m for m in _SENTENCE_BREAK.finditer(section) if 0 < m.start() and m.end() < len(section)]
    if not cuts:
        return section
    m = min(cuts, key=lambda c: abs(c.start() - len(section) / 2))
    return section[:m.start()] + "\n\n" + section[m.end():]


def heading_of(subject: str, topic: str, k: int) -> str:
    """A section's heading line: its topic (else its subject, else "Section <k>"), at most ``HEADING_WORDS`` words,
    without a closing stop, so that :func:`mogg.core.text.is_heading` reads it as one."""
    words = " ".join((topic or subject).split()).rstrip(".! ").split()[:HEADING_WORDS]
    return " ".join(words).rstrip(".! ") or f"Section {k}"


class PagesCorpus(_PagesInput, _Source):
    """The stand-in's pages as documents (id ``page-<subject>-<n>``, its sections joined by blank lines; with
    ``halves`` each section two paragraphs: :func:`halved`; with ``headings`` each section under a heading line, its
    topic: :func:`heading_of`)."""

    def __init__(self, benchmark_path: str, raw_path: str, sections: int = 5, seed: int = 0, options: bool = False,
                 min_chars: int = 40, min_evidence_tokens: int = 5, halves: bool = False, headings: bool = False) -> None:
        super().__init__(benchmark_path, raw_path, sections, seed, options, min_chars, min_evidence_tokens)
        self.halves, self.headings = bool(halves), bool(headings)

    def params(self) -> dict:
        # named only where set: the pages written as before keep their fingerprint (and their cached ladders)
        return {**super().params(), **({"halves": True} if self.halves else {}),
                **({"headings": True} if self.headings else {})}

    def located(self) -> Iterator[Located]:
        where = os.fspath(self.explained.raw_path)
        write = halved if self.halves else str
        subjects = self.subjects() if self.headings else {}
        for pid, members in self.book():
            sections = [write(it.evidence_text) for it in members]
            if self.headings:
                sections = [f"{heading_of(*subjects.get(it.id, ('', '')), k)}\n\n{s}"
                            for k, (it, s) in enumerate(zip(members, sections), 1)]
            yield Document(id=pid, title="", content="\n\n".join(sections)), where, None
