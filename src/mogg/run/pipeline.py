"""The shared pipeline: ladder -> per-level retrieval -> fixed-level metrics -> labels -> features.

``train.py`` and ``evaluate.py`` both call :func:`prepare`; every expensive step is an artifact
(ladder, retriever state, query embeddings) keyed by its config and input fingerprints, so the
second call only loads.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mogg.core.artifacts import cached, config_hash
from mogg.core.metrics import token_prf
from mogg.core.text import TEXT_VERSION
from mogg.data.leakage import LeakReport, find_leaks, guard
from mogg.data.records import QAItem
from mogg.ladders.base import Ladder
from mogg.prepared import Prepared
from mogg.routing.inputs.features import FeatureRecipe, compute_features
from mogg.routing.inputs.labels import METRIC_SOURCES, SoftLabeler
from mogg.routing.profiles import ProfileSpace
from mogg.search import Hits, LadderIndex
from mogg.selection import cap_contexts, fixed_level_select, mog_select

log = logging.getLogger(__name__)


def profiles_label(source) -> str:
    """The refusal of eq. 1 profiles under labels other than ``metric``: one message for :func:`prepare`
    and :func:`mogg.run.option_pairs.check_run_options`, which refuses it before any work."""
    return (f"router.profiles needs labels=metric (an action's utility is the evidence F1 of its eq. 1-2 selection); "
            f"labels.source is {source!r}")


def prepare(
    name: str,
    corpus,
    questions,
    builder,
    make_retriever: Callable[[], object],
    labeler: SoftLabeler,
    *,
    k_r: int,
    k: int,
    inputs="retrieval",
    normalise: str = "none",
    encoder=None,
    artifacts: Path | None = None,
    encoder_node: dict | None = None,
    max_context_tokens: int | None = None,
    depth: int | None = None,
    profiles: Sequence[str] = (),
) -> Prepared:
    """Run the shared stages for one ladder. Retrieval uses the question text only (never options).

    ``inputs``: the router's feature groups (:func:`mogg.routing.inputs.features.parse_groups`), ``normalise``
    how its score inputs are scaled (:data:`mogg.routing.inputs.features.NORMALISE`);
    ``encoder_node``: the encoder's Hydra config, saved in the feature recipe so a trained
    router can rebuild its query encoder; ``max_context_tokens``: the cap on every context;
    ``depth``: also keep hits this deep per level (``Prepared.deep``, for the frontier and the
    action router; one search serves both depths); ``profiles``: also score every eq. 1 action
    (:mod:`mogg.routing.profiles`) for a router that chooses among them (needs ``labels=metric``).
    """
    if k_r < 1 or k < 1:
        raise ValueError(f"k_r and k must be >= 1 (got k_r={k_r}, k={k})")
    items = questions.load()
    if not items:
        raise ValueError("no questions to run on")
    texts = [it.question for it in items]
    index = LadderIndex.build(corpus, builder, make_retriever, artifacts)
    ladder, ladder_key = index.ladder, index.key
    leak_notes, in_corpus = check_leakage(corpus, questions, items, ladder, ladder_key, artifacts)  # before retrieval
    if depth:
        hits, deep = index.search_deep(texts, k_r, depth)
    else:
        hits, deep = index.search(texts, k_r), None
    gold_ids, notes = present_gold_ids(items, ladder, name)
    notes = leak_notes + duplicate_questions(items, name) + notes
    fixed = [fixed_level_select(ladder, hits, j, k) for j in range(ladder.n_levels)]
    fixed_snippets = []
    for lv, s in zip(ladder.level_names, fixed):
        ctx, n_cut = cap_contexts(s.contexts(ladder), max_context_tokens)
        if n_cut:
            # the cap is part of the setting (long documents, e.g. COVID-QA's papers, reach it): info, not a fault
            log.info("level %s: %d of %d contexts reach max_context_tokens=%d and are cut there (the cap on every "
                     "context; set max_context_tokens to change it)", lv, n_cut, len(items), max_context_tokens)
        fixed_snippets.append(ctx)
    fixed_f1 = fixed_level_f1(items, fixed_snippets, {"ladder": ladder_key, "retriever": index.retriever_config, "k_r": k_r,
                                                      "k": k, "max_context_tokens": max_context_tokens}, artifacts)
    best = [[ladder.texts(j)[c] if c >= 0 else "" for c in hits.ids[:, j, 0]] for j in range(ladder.n_levels)]
    scores = labeler.level_scores(items, best, fixed_f1, fixed_snippets)
    labels = labeler.labels(scores)
    profiles = tuple(profiles or ())
    prof_f1 = prof_labels = None
    if profiles:
        if labeler.source != "metric":
            raise ValueError(profiles_label(labeler.source))  # train/evaluate refuse it first (run.option_pairs)
        prof_f1 = profile_f1(items, ladder, hits, ProfileSpace(profiles, ladder.n_levels), k, max_context_tokens,
                             {"ladder": ladder_key, "retriever": index.retriever_config, "k_r": k_r}, artifacts)
        prof_labels = labeler.labels(prof_f1)
    recipe = FeatureRecipe.make(inputs, hits.shape[2], ladder.n_levels, encoder_node, encoder, normalise)
    features = compute_features(recipe, hits, ladder, texts, encoder, artifacts)
    retriever_config = index.retriever_config
    data_key = config_hash({
        "ladder": ladder_key, "retriever": retriever_config, "k_r": k_r, "k": k,
        "labels": labeler.config(), "recipe": recipe.to_json(), "max_context_tokens": max_context_tokens,
        **({"profiles": list(profiles)} if profiles else {}),  # without profiles: the keys of earlier runs
        # everything labels, metrics and features depend on, per question
        "questions": [[it.id, it.question, it.answer, it.label_text, it.gold_evidence, it.gold_doc_ids] for it in items],
    })
    log.info("%s: %d questions, %d levels, data key %s", name, len(items), ladder.n_levels, data_key)
    return Prepared(name, ladder, ladder_key, items, hits, fixed, fixed_f1, scores, labels, features, k_r, data_key,
                    recipe, retriever_config, max_context_tokens, gold_ids, notes,
                    utility_is_metric=labeler.source in METRIC_SOURCES, deep=deep, profiles=profiles,
                    profile_f1=prof_f1, profile_labels=prof_labels, evidence_in_corpus=in_corpus)


def fixed_level_f1(items: Sequence[QAItem], snippets: list[list[list[str]]], key: dict,
                   artifacts: Path | None = None) -> np.ndarray:
    """Evidence token F1 of every level's fixed context, float64 [Q, L] (NaN: no gold evidence).

    Cached as an artifact keyed by what the contexts come from (``key``: ladder, retriever, k_r, k,
    cap) and each question's text and evidence, so a rerun skips tokenising every context.
    """
    def build() -> np.ndarray:
        evidence = [it.evidence_text for it in items]
        return np.stack([token_prf([" ".join(c) for c in ctx], evidence)[2] for ctx in snippets], axis=1)

    return _cached_f1("fixed_f1", key, items, build, artifacts)


def _cached_f1(kind: str, key: dict, items: Sequence[QAItem], build: Callable[[], np.ndarray],
               artifacts: Path | None) -> np.ndarray:
    """An evidence-F1 matrix as an artifact of ``kind``, keyed by ``key`` (what the contexts come
    from) and each question's text and evidence; ``build`` makes it on a miss (or without artifacts)."""
    if artifacts is None:
        return build()
    full = {**key, "questions": config_hash([[it.id, it.question, it.evidence_text] for it in items]),
            "text_version": TEXT_VERSION, "version": 1}  # TEXT_VERSION: the tokenizer the F1 counts with
    return cached(artifacts, kind, full, build=build,
                  save=lambda a, d: np.save(d / "f1.npy", a), load=lambda d: np.load(d / "f1.npy"))


def profile_f1(items: Sequence[QAItem], ladder: Ladder, hits: Hits, space: ProfileSpace, k: int,
               max_context_tokens: int | None, key: dict, artifacts: Path | None = None) -> np.ndarray:
    """Evidence token F1 of every eq. 1 action's selection (top ``k``, capped), float64 [Q, A].

    One vectorised eq. 1-2 selection over all questions per action (A = profiles x levels, a
    few dozen); cached like :func:`fixed_level_f1`, keyed by ``key`` (ladder, retriever, k_r),
    the action weights, k, the cap and each question's text and evidence.
    """
    mat = space.matrix()  # [A, L]
    evidence = [it.evidence_text for it in items]

    def build() -> np.ndarray:
        cols = []
        for w in mat:
            sel = mog_select(ladder, hits, np.broadcast_to(w, (len(items), len(w))), k)
            snippets, _ = cap_contexts(sel.contexts(ladder), max_context_tokens)
            cols.append(token_prf(snippets, evidence)[2])  # chunks tokenised once, as in score_selection
        return np.stack(cols, axis=1)

    return _cached_f1("profile_f1", {**key, "weights": mat.round(9).tolist(), "k": k,
                                     "max_context_tokens": max_context_tokens}, items, build, artifacts)


def present_gold_ids(items: Sequence[QAItem], ladder: Ladder, name: str = "") -> tuple[list[list[str]], list[str]]:
    """Each question's gold document ids that the corpus holds, and a note (and a warning) when
    some are missing: a gold id the corpus lacks can never be hit, so gold hit would read 0 for a
    reason that has nothing to do with retrieval. Questions left with none get NaN gold hit."""
    have = set(ladder.units.doc_ids)
    out = [[g for g in it.gold_doc_ids if g in have] for it in items]
    bad = [it for it, g in zip(items, out) if len(g) < len(it.gold_doc_ids)]
    notes = []
    if bad:
        example = ", ".join(f"{it.id} -> {[g for g in it.gold_doc_ids if g not in have][:2]}" for it in bad[:3])
        notes.append(f"{name}: {len(bad)} of {len(items)} questions name gold documents the corpus does not hold "
                     f"(e.g. {example}); gold hit counts only the documents present (NaN where none is)")
        log.warning(notes[-1])
    return out, notes


def duplicate_questions(items: Sequence[QAItem], name: str = "") -> list[str]:
    """A note (and a warning) when questions repeat another's text, options, answer and evidence
    under another id (the same question twice): cross-fitting
    can then train on a copy of a test question, and every copy counts in the means."""
    first: dict[str, str] = {}
    first_text: dict[str, str] = {}
    dups, same_text = [], []
    for it in items:
        text = " ".join(it.question.lower().split())
        key = json.dumps([text, sorted(it.options.items()), it.answer, it.gold_evidence])
        if key in first:
            dups.append((it.id, first[key]))
        else:
            first[key] = it.id
            if text in first_text:  # the same words, another answer or evidence: one input, two labels
                same_text.append((it.id, first_text[text]))
        first_text.setdefault(text, it.id)
    notes = []
    if dups:
        notes.append(f"{name}: {len(dups)} of {len(items)} questions repeat another question (text, options, answer and "
                     f"evidence) under another id "
                     f"(e.g. {', '.join(f'{a} = {b}' for a, b in dups[:3])}): cross-fitting can train on a copy of a test "
                     "question and every copy counts in the means; deduplicate the question set")
    if same_text:
        notes.append(f"{name}: {len(same_text)} of {len(items)} questions share their text with another question "
                     f"whose options, answer or evidence differ (e.g. {', '.join(f'{a} ~ {b}' for a, b in same_text[:3])}):"
                     " a router sees the same input with different labels, and a copy of a test question's text may "
                     "sit in its training folds; check the question set")
    for n in notes:
        log.warning(n)
    return notes


def check_leakage(corpus, questions, items: Sequence[QAItem], ladder: Ladder, ladder_key: dict,
                  artifacts: Path | None = None) -> tuple[list[str], bool | None]:
    """The leakage guard (:mod:`mogg.data.leakage`) over the ladder's documents; raises on a leak
    unless the corpus declares a gold-context setting. The scan is cached as an artifact. Returns
    the report's notes and whether any question's gold evidence is in the corpus (None: no question
    has evidence to look for)."""
    split_files = questions.split_files()  # every question set (mogg.data.qa._QASet) names its files

    def scan() -> dict:
        log.info("leakage scan: do the %d documents hold the %d questions' answers? (once per corpus and question "
                 "set, cached)", len(ladder.units.doc_ids), len(items))
        t0 = time.perf_counter()
        rep = find_leaks(corpus.files(), split_files, ladder.units.doc_ids, _document_texts(ladder), items)
        log.info("leakage scan: done in %.1f s", time.perf_counter() - t0)
        return {"same_files": rep.same_files, "gold_ids": rep.gold_ids, "evidence": rep.evidence, "qa": rep.qa,
                "n_evidence": rep.n_evidence}

    key = {"ladder": ladder_key, "questions": config_hash([[it.id, it.gold_doc_ids, it.gold_evidence, it.question,
                                                            it.answer_text] for it in items]),
           "split_files": [str(p) for p in split_files], "version": 2}
    if artifacts is None:
        found = scan()
    else:
        found = cached(artifacts, "leakage", key, build=scan,
                       save=lambda r, d: (d / "leaks.json").write_text(json.dumps(r)),
                       load=lambda d: json.loads((d / "leaks.json").read_text()))
    report = LeakReport(*(list(map(tuple, found[k])) for k in ("same_files", "gold_ids", "evidence", "qa")),
                        n_evidence=found["n_evidence"])
    notes = guard(report, getattr(corpus, "allow_gold", False), repr(corpus)[:200])
    for n in notes[1 if getattr(corpus, "allow_gold", False) else 0:]:
        log.warning(n)
    return notes, (bool(report.evidence) if report.n_evidence else None)


def _document_texts(ladder: Ladder):
    """(document index, text) rebuilt from the ladder's units (in corpus order)."""
    doc = ladder.units.doc
    bounds = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield int(doc[a]), " ".join(ladder.units.text[a:b])
