"""Question sets: MIRAGE ``benchmark.json``, PubMedQA* with gold evidence, and generic jsonl.

Each set is built from explicit arguments (Hydra ``_target_``) and has ``load() -> list[QAItem]``
and ``fingerprint()``. ``limit`` keeps the first ``limit`` questions in file order.

Length (over ~350 lines): four question-set readers on one ``_QASet`` contract and its validation
helpers; each reader is 50-90 lines.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from mogg.data.corpus import (
    Fingerprinted,
    abstract_conclusion,
    context_sections,
    excluded_pmids,
    explanation_sentences,
)
from mogg.data.errors import DataError
from mogg.data.files import check_unicode, iter_jsonl, load_json, str_field
from mogg.data.records import QAItem

logger = logging.getLogger(__name__)

_GENERIC_FIELDS = {"id", "question", "options", "answer", "label", "gold_doc_ids", "gold_evidence", "dataset"}


def _check_limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    limit = int(limit)
    if limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}")
    return limit


def _options(value: Any, path: str, line: int | None, what: str) -> dict[str, str]:
    """Validate an ``{"A": text, ...}`` mapping (absent/null means no options)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DataError(
            path, f"{what}: 'options' must be an object of letter -> text, got {type(value).__name__}", line
        )
    for key, text in value.items():
        if not isinstance(text, str):
            raise DataError(path, f"{what}: option {key!r} must be a string, got {type(text).__name__}", line)
        check_unicode(text, path, line, f"{what}: option {key!r}")
    return dict(value)


def _str_list(obj: dict, key: str, path: str, line: int | None, what: str) -> list[str]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(path, f"{what}: {key!r} must be a list of strings", line)
    return [check_unicode(v, path, line, f"{what}: {key!r}") for v in value]


class _QASet(Fingerprinted):
    """A question set: ``load()`` plus the shared fingerprint of its files and parameters."""

    def load(self) -> list[QAItem]:
        raise NotImplementedError

    def split_files(self) -> list[Path]:
        """The files the questions come from (a corpus must not share their content)."""
        return self.files()


# The raw split each MIRAGE set was built from, under <benchmark dir>/rawdata (when present).
_RAW_SPLITS = {
    "pubmedqa": ["pubmedqa/data/test_set.json"],
    "medmcqa": ["medmcqa/data/dev.json"],
    "medqa": ["medqa/data_clean/questions/US/4_options/phrases_no_exclude_test.jsonl"],
    "mmlu": ["mmlu/data/test/*.csv"],
    "bioasq": [],
}


class MirageBenchmark(_QASet):
    """Questions from MIRAGE ``benchmark.json``; id = qid, dataset = the dataset's name.

    ``datasets`` selects datasets (default: all, in file order); items keep file order.
    ``gold_doc_ids`` holds the PMIDs that PubMedQA*/BioASQ entries carry.
    """

    def __init__(self, path: str, datasets: list[str] | None = None, limit: int | None = None,
                 per_dataset: int | None = None) -> None:
        self.path = os.fspath(path)
        if isinstance(datasets, str):
            datasets = [datasets]
        self.datasets = None if datasets is None else [str(d) for d in datasets]
        self.limit = _check_limit(limit)
        self.per_dataset = _check_limit(per_dataset)  # first N of every dataset: balanced subsets

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def params(self) -> dict:
        return {"path": self.path, "datasets": self.datasets, "limit": self.limit, "per_dataset": self.per_dataset}

    def split_files(self) -> list[Path]:
        raw = Path(self.path).parent / "rawdata"
        names = self.datasets if self.datasets is not None else list(_RAW_SPLITS)
        out = [Path(self.path)]
        for name in names:
            for pattern in _RAW_SPLITS.get(name, []):
                out.extend(sorted(raw.glob(pattern)))
        return out

    def _read(self) -> dict[str, dict]:
        data = load_json(self.path)
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise DataError(self.path, "expected {dataset: {qid: {question, options, answer}}}")
        return data

    def _selected(self, data: dict[str, dict]) -> list[str]:
        if self.datasets is None:
            return list(data)
        unknown = [d for d in self.datasets if d not in data]
        if unknown:
            raise DataError(
                self.path, f"unknown dataset(s) {', '.join(unknown)}; available: {', '.join(data)}"
            )
        if not self.datasets:
            raise DataError(self.path, "no datasets selected")
        return list(self.datasets)

    def load(self) -> list[QAItem]:
        data = self._read()
        selected = set(self._selected(data))
        items: list[QAItem] = []
        owner: dict[str, str] = {}
        for name, questions in data.items():
            if name not in selected:
                continue
            for n_in_set, (qid, entry) in enumerate(questions.items()):
                if self.per_dataset is not None and n_in_set >= self.per_dataset:
                    break
                if self.limit is not None and len(items) >= self.limit:
                    return items
                if qid in owner:
                    raise DataError(self.path, f"question id {qid!r} is in both {owner[qid]!r} and {name!r}")
                owner[qid] = name
                items.append(self._item(name, qid, entry))
        if not items and self.limit != 0:
            raise DataError(self.path, f"no questions in dataset(s) {', '.join(sorted(selected))}")
        return items

    def _item(self, name: str, qid: str, entry: Any) -> QAItem:
        what = f"{name}/{qid}"
        if not isinstance(entry, dict):
            raise DataError(self.path, f"{what}: expected an object, got {type(entry).__name__}")
        question = str_field(entry, "question", self.path, None, what=what)
        options = _options(entry.get("options"), self.path, None, what)
        answer = str_field(entry, "answer", self.path, None, what=what)
        if options and answer not in options:
            raise DataError(self.path, f"{what}: answer {answer!r} is not among options {', '.join(options)}")
        pmids = entry.get("PMID") or []
        if not isinstance(pmids, list):
            raise DataError(self.path, f"{what}: 'PMID' must be a list")
        return QAItem(
            id=qid,
            question=question,
            answer=answer,
            options=options,
            gold_doc_ids=[str(p) for p in pmids],
            dataset=name,
        )


class PubMedQAStar(_QASet):
    """MIRAGE PubMedQA* joined with the raw PubMedQA test set for gold evidence.

    gold_evidence = CONTEXTS, gold_doc_ids = [PMID], label = LONG_ANSWER; question, options and
    answer come from ``benchmark.json``. ``section_ids=True``: gold_doc_ids = ``<PMID>-<k>`` for each
    non-empty context k, the documents of ``PubMedQAContexts(sections=True)`` (the snippet stand-in).
    """

    def __init__(self, benchmark_path: str, raw_path: str, limit: int | None = None, section_ids: bool = False) -> None:
        self.benchmark_path = os.fspath(benchmark_path)
        self.raw_path = os.fspath(raw_path)
        self.limit = _check_limit(limit)
        self.section_ids = bool(section_ids)

    def files(self) -> list[Path]:
        return [Path(self.benchmark_path), Path(self.raw_path)]

    def params(self) -> dict:
        return {"benchmark_path": self.benchmark_path, "raw_path": self.raw_path, "limit": self.limit,
                **({"section_ids": True} if self.section_ids else {})}

    def load(self) -> list[QAItem]:
        items = MirageBenchmark(self.benchmark_path, ["pubmedqa"], self.limit).load()
        raw = load_json(self.raw_path)
        if not isinstance(raw, dict):
            raise DataError(self.raw_path, f"expected an object keyed by PMID, got {type(raw).__name__}")
        for item in items:
            entry = raw.get(item.id)
            if not isinstance(entry, dict):
                raise DataError(
                    self.raw_path,
                    f"PubMedQA* question {item.id} (from {self.benchmark_path}) is missing here",
                )
            what = f"PMID {item.id}"
            evidence = _str_list(entry, "CONTEXTS", self.raw_path, None, what)
            if not any(e.strip() for e in evidence):
                raise DataError(self.raw_path, f"{what}: CONTEXTS are empty")
            decision = entry.get("final_decision")
            # A differing decision means the two files are not the same release: refuse to mix them.
            if decision is not None and decision != item.answer_text:
                raise DataError(
                    self.raw_path,
                    f"{what}: final_decision {decision!r} disagrees with the benchmark answer "
                    f"{item.answer_text!r}",
                )
            item.gold_evidence = evidence
            item.gold_doc_ids = ([i for i, _ in context_sections(item.id, evidence)] if self.section_ids
                                 else [item.id])
            item.label = (
                str_field(entry, "LONG_ANSWER", self.raw_path, None, required=False, what=what) or None
            )
        return items


class PubMedQALabelled(_QASet):
    """PubMedQA-L (``ori_pqal.json``, 1,000 expert-labelled questions) without the abstracts of
    ``exclude_path`` (PubMedQA*'s 500 test questions): a second long-evidence set sharing no text with
    PubMedQA* or the snippet stand-in. Options yes / no / maybe as MIRAGE writes PubMedQA*; the answer
    from ``final_decision``; gold_evidence = CONTEXTS; gold_doc_ids = [PMID], or with
    ``section_ids=True`` ``<PMID>-<k>`` per non-empty context (``PubMedQAContexts(sections=True)``'s
    documents: a second snippet shape). label = LONG_ANSWER. ``evidence="conclusion"``: gold_evidence =
    [LONG_ANSWER], the last section of ``PubMedQAContexts(page=True)``'s page [PMID] (the abstract-page shape)."""

    OPTIONS = {"A": "yes", "B": "no", "C": "maybe"}  # benchmark.json's PubMedQA* options

    EVIDENCE = ("contexts", "conclusion")

    def __init__(self, raw_path: str, exclude_path: str | None = None, limit: int | None = None,
                 section_ids: bool = False, evidence: str = "contexts") -> None:
        self.raw_path = os.fspath(raw_path)
        self.exclude_path = os.fspath(exclude_path) if exclude_path else None
        self.limit = _check_limit(limit)
        self.section_ids = bool(section_ids)
        if evidence not in self.EVIDENCE:
            raise ValueError(f"PubMedQALabelled: evidence={evidence!r} is not one of {', '.join(self.EVIDENCE)}")
        if evidence == "conclusion" and self.section_ids:
            raise ValueError("PubMedQALabelled: evidence='conclusion' is one section of the page [PMID]; "
                             "section_ids names the contexts' documents")
        self.evidence = evidence

    def files(self) -> list[Path]:
        return [Path(self.raw_path), *([Path(self.exclude_path)] if self.exclude_path else [])]

    def params(self) -> dict:
        return {"raw_path": self.raw_path, "exclude_path": self.exclude_path, "limit": self.limit,
                **({"section_ids": True} if self.section_ids else {}),
                **({"evidence": self.evidence} if self.evidence != "contexts" else {})}

    def load(self) -> list[QAItem]:
        raw = load_json(self.raw_path)
        if not isinstance(raw, dict):
            raise DataError(self.raw_path, f"expected an object keyed by PMID, got {type(raw).__name__}")
        drop = excluded_pmids(self.exclude_path)
        letter = {v: k for k, v in self.OPTIONS.items()}
        items: list[QAItem] = []
        for pmid, entry in raw.items():
            if str(pmid) in drop:
                continue
            if self.limit is not None and len(items) >= self.limit:
                break
            what = f"PMID {pmid}"
            if not isinstance(entry, dict):
                raise DataError(self.raw_path, f"{what}: expected an object, got {type(entry).__name__}")
            question = str_field(entry, "QUESTION", self.raw_path, None, what=what)
            evidence = _str_list(entry, "CONTEXTS", self.raw_path, None, what)
            if not any(e.strip() for e in evidence):
                raise DataError(self.raw_path, f"{what}: CONTEXTS are empty")
            decision = str_field(entry, "final_decision", self.raw_path, None, what=what)
            if decision not in letter:
                raise DataError(self.raw_path, f"{what}: final_decision {decision!r} is not one of yes, no, maybe")
            label = str_field(entry, "LONG_ANSWER", self.raw_path, None, required=False, what=what) or None
            if self.evidence == "conclusion":  # the page's last section (abstract_page)
                evidence = [abstract_conclusion(str(pmid), entry, self.raw_path)]
            items.append(QAItem(
                id=str(pmid), question=question, answer=letter[decision], options=dict(self.OPTIONS),
                label=label,
                gold_doc_ids=([i for i, _ in context_sections(pmid, evidence)] if self.section_ids
                              else [str(pmid)]),
                gold_evidence=evidence, dataset="pubmedqa_l"))
        if not items and self.limit != 0:
            raise DataError(self.raw_path, "no questions left (every PMID is excluded)")
        return items


class GenericQA(_QASet):
    """The generic jsonl question format (see docs/design.md section 3).

    ``answer`` may be an option letter or an option's text (mapped to its letter); without
    options it is the answer text. Each item's dataset is the ``dataset`` argument if given,
    else the line's ``dataset`` field, else the file stem.
    """

    def __init__(self, path: str, limit: int | None = None, dataset: str | None = None) -> None:
        self.path = os.fspath(path)
        self.limit = _check_limit(limit)
        self.dataset = dataset

    def files(self) -> list[Path]:
        return [Path(self.path)]

    def params(self) -> dict:
        return {"path": self.path, "limit": self.limit, "dataset": self.dataset}

    def load(self) -> list[QAItem]:
        if not os.path.isfile(self.path):
            raise DataError(self.path, "no such file")
        items: list[QAItem] = []
        first_line: dict[str, int] = {}
        warned: set[str] = set()
        for lineno, obj in iter_jsonl(self.path):
            if self.limit is not None and len(items) >= self.limit:
                break
            for key in obj.keys() - _GENERIC_FIELDS - warned:
                # Extra metadata is allowed, but a typo ("gold_doc_id") should not pass unseen.
                logger.warning("%s:%d: ignoring unknown field %r", self.path, lineno, key)
                warned.add(key)
            item = self._item(obj, lineno)
            if item.id in first_line:
                raise DataError(
                    self.path,
                    f"duplicate question id {item.id!r} (first on line {first_line[item.id]})",
                    lineno,
                )
            first_line[item.id] = lineno
            items.append(item)
        if not items and self.limit != 0:
            raise DataError(self.path, "no questions in file")
        return items

    def _item(self, obj: dict, line: int) -> QAItem:
        path = self.path
        qid = str_field(obj, "id", path, line)
        what = f"question {qid!r}"
        question = str_field(obj, "question", path, line, what=what)
        options = _options(obj.get("options"), path, line, what)
        answer = str_field(obj, "answer", path, line, what=what)
        if options and answer not in options:
            matches = [k for k, text in options.items() if text.strip() == answer.strip()]
            if len(matches) != 1:
                raise DataError(
                    path,
                    f"{what}: answer {answer!r} is neither an option letter ({', '.join(options)}) "
                    "nor the text of exactly one option",
                    line,
                )
            answer = matches[0]
        label = str_field(obj, "label", path, line, required=False, nonempty=False, what=what) or None
        dataset = self.dataset or str_field(
            obj, "dataset", path, line, required=False, default=Path(path).stem, what=what
        )
        return QAItem(
            id=qid,
            question=question,
            answer=answer,
            options=options,
            label=label,
            gold_doc_ids=_str_list(obj, "gold_doc_ids", path, line, what),
            gold_evidence=_str_list(obj, "gold_evidence", path, line, what),
            dataset=dataset,
        )


# An explanation that opens by stating the answer ("Ans-a.", "Answer- B.", "Ans. is 'c' i.e.,",
# "Option 2:", "(b)") - about half of MedMCQA's. The letter must not reach a label or gold
# evidence: a context that happens to hold "a" or "ans" would score on the answer key, not on
# the explanation. The letter must stand alone ("Ans: Amyloid" keeps its "A", "Ans. 45XO" its
# "45"); an upper-case letter glued to the next capitalised word ("Answer DThyrotoxic") counts.
_KEYWORD = r"(?i:ans(?:wer)?|option|correct\s+answer)\b[-:.,\s]*(?:(?i:is)\b[-:.,\s]*)?"
_OPEN, _CLOSE = r"""[('"\[]?\s*""", r"""\s*[)'"\]]?[-:.,)\s]*(?:i\.?\s*e\.?\s*,?\s*)?"""
_ANSWER_STATEMENT_RE = re.compile(
    rf"^\W*(?:{_KEYWORD}{_OPEN}(?:[A-Da-d1-4](?=[^A-Za-z0-9]|$)|[A-D](?=[A-Z][a-z])){_CLOSE}"
    rf"|[(\[]?[A-Da-d][).\]](?=\s){_CLOSE})"
)


def strip_answer_statement(text: str) -> str:
    """``text`` without a leading answer statement ("Ans-a.", "Answer- B.", "Ans. is 'c' i.e., ...").

    Only a statement at the very start is removed, and only when it names an option (A-D, or
    1-4 after "Ans"/"Option"); the explanation that follows (which may repeat the option's
    text) is kept.
    """
    text = text.strip()
    m = _ANSWER_STATEMENT_RE.match(text)
    return text[m.end():].strip() if m else text


class MedMCQAExplained(_QASet):
    """MIRAGE MedMCQA questions whose raw dev row has an explanation, as a gold-evidence set.

    gold_evidence = the explanation with its leading answer statement stripped
    (:func:`strip_answer_statement`), gold_doc_ids = ``medmcqa:{id}`` (the explanation's document
    in :class:`mogg.data.corpus.MedMCQAExplanations`, same ``min_chars`` rule so every gold
    document is in that corpus); question, options and answer come from ``benchmark.json``.
    A corpus that holds these explanations is a gold-context setting: it measures how well a
    ladder finds and sizes the evidence, not open-domain retrieval. ``sentence_ids=True``:
    gold_doc_ids = ``medmcqa:{id}-{k}`` for every sentence document of the explanation
    (``MedMCQAExplanations(sentences=True)``, same ``min_chars``): the explanation-sentence stand-in.
    """

    def __init__(self, benchmark_path: str, raw_path: str, min_chars: int = 40, min_evidence_tokens: int = 5,
                 limit: int | None = None, sentence_ids: bool = False) -> None:
        self.benchmark_path = os.fspath(benchmark_path)
        self.raw_path = os.fspath(raw_path)
        self.min_chars = int(min_chars)
        self.min_evidence_tokens = int(min_evidence_tokens)
        self.limit = _check_limit(limit)
        self.sentence_ids = bool(sentence_ids)

    def files(self) -> list[Path]:
        return [Path(self.benchmark_path), Path(self.raw_path)]

    def params(self) -> dict:
        return {"benchmark_path": self.benchmark_path, "raw_path": self.raw_path, "min_chars": self.min_chars,
                "min_evidence_tokens": self.min_evidence_tokens, "limit": self.limit,
                **({"sentence_ids": True} if self.sentence_ids else {})}

    def load(self) -> list[QAItem]:
        from mogg.core.text import count_tokens

        explanation: dict[str, str] = {}
        for lineno, obj in iter_jsonl(self.raw_path):
            row_id = str_field(obj, "id", self.raw_path, lineno)
            exp = str_field(obj, "exp", self.raw_path, lineno, required=False, nonempty=False).strip()
            if len(exp) >= self.min_chars:
                explanation[row_id] = exp
        items = []
        skipped = 0
        for item in MirageBenchmark(self.benchmark_path, ["medmcqa"]).load():
            exp = explanation.get(item.id)
            if exp is None:
                continue
            evidence = strip_answer_statement(exp)
            if count_tokens(evidence) < self.min_evidence_tokens:
                skipped += 1  # the explanation was only the answer ("Ans. a. Pain")
                continue
            item.gold_evidence = [evidence]
            item.gold_doc_ids = ([f"medmcqa:{item.id}-{k}" for k in range(len(explanation_sentences(exp, self.min_chars)))]
                                 if self.sentence_ids else [f"medmcqa:{item.id}"])
            items.append(item)
            if self.limit is not None and len(items) >= self.limit:
                break
        if not items and self.limit != 0:
            raise DataError(self.raw_path, "no MIRAGE MedMCQA question has an explanation here")
        logger.info("MedMCQA with explanations: %d questions (%d skipped: explanation is only the answer)",
                    len(items), skipped)
        return items
