"""The evidence selector trained on several question sets (``train_sources``) and read on a new set
without its labels: ``<run>/<ladder>/selector/transfer`` (``router.fit=all`` or ``both``).

**Fit.** Every source's candidates (each over its own corpus and ladder, one builder) go into one
LightGBM scorer. A candidate weighs its share of its question's candidate tokens (a question counts
once, however many candidates it has) times its set's weight, so that every training set counts as
much as the others whatever its size (``train_sources.<name>.weight`` scales that). Each set keeps a
seeded validation slice (early stopping; lambda per budget on the pooled slices, each raised to every larger
budget's: :func:`~mogg.evaluation.frontier_guard.monotone_prices`); the guard asks,
per budget, whether the selector beats the training sets' envelope on those pooled validation
questions by ``frontier.guard_se`` standard errors.

**Read on a new set** (the leave-one-set-out rows, ``mogg-route --calibrate-here``): lambda is the
smallest whose plans read at most B mean tokens on these questions (their token counts only;
``transfer_lambda=here``), or that one raised to the lambda the training sets' pooled validation
chose for B where it is larger (``learned``: their price of a token, which stops reading where more
tokens lowered F1 there, as the in-set selector's validation lambda does; still at most B here), or,
where the block of candidates around at least half of these questions' best-scored candidate mostly
covers that candidate's document (the evidence looks like whole short documents: an abstract, an
explanation; decided once for the set, on the directory's first scorer, at no budget:
:func:`mogg.run.budget.selector.set_shape.whole_shape`), the smaller of ``learned``'s and the one reading
min(B, the median reach: those documents with their chain where the set's close documents sit beside each
other in the corpus, sections of one source (:func:`mogg.run.budget.selector.set_shape.source_chain`), else with
the close documents chained to them: :func:`mogg.run.budget.selector.set_shape.close_reach`) (it reads at least up to them, more where the training
sets' price reads more), else ``learned`` (``fits``: :func:`mogg.run.budget.selector.set_shape.fits_target`;
there E is the best candidate's section (its paragraph, and those beside it the question owns), read first and at
least to the median one, where the set is sections of a page: ``set_shape.page_sections``,
``set_shape.section_evidence``, and at most the chain where it is sections of
sources: ``set_shape.chain_evidence``; where the set's documents stand alone, E is the best candidate's document,
read whole and at most it: ``set_shape.stands_alone``, ``set_shape.document_density``), and where the
guard kept the envelope, the training sets' best configuration among those reading <= B here. The estimated F1's
evidence length E is label-free too: ``median`` (the training sets' median evidence tokens), ``predicted`` (per
question, the evidence tokens its candidates predict: :func:`mogg.run.budget.selector.plans.predicted_evidence`) or
``document`` (per question, the tokens of the document its best-scored candidate sits in:
:func:`~mogg.run.budget.selector.plans.document_evidence`); the report shows a row for each (lambda ``here``) and
one for the deployed estimate with the learned lambda; the selector's ``transfer_evidence`` and ``transfer_lambda``
knobs say what the transfer directory deploys (and ``mogg-route`` reads it with).

Length (over ~350 lines): the fit, the new set's scorer and the reading there are one contract (the same
directory keys and plans); the shape decisions they read live in ``set_shape``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from mogg.evaluation.frontier import choose_config
from mogg.evaluation.frontier_guard import best_lambda, guard_check, monotone_prices
from mogg.routing.fitting.folds import split_train_val
from mogg.routing.plans import calibrate_lambda, decide
from mogg.run.budget.base import TRANSFER_DIR, LadderFrontier
from mogg.run.budget.selector.adapt import feature_view, options_vote, voting_options
from mogg.run.budget.selector.best_source import ReadRows, read_best_source
from mogg.run.budget.selector.candidates import feature_names, option_column
from mogg.run.budget.selector.deploy import FORMAT, DeployedSelector, plans_of
from mogg.run.budget.selector.plans import (
    EVIDENCE,
    LAMBDA_RULES,
    document_evidence,
    document_tokens,
    evidence_estimate,
    plan_table,
)
from mogg.run.budget.selector.scorer import candidate_weights, fit_scorer
from mogg.run.budget.selector.self_training import self_trained
from mogg.run.budget.selector.set_shape import (
    OWN_SHARE,
    PAGE_COVER,
    PARAGRAPH_COVER,
    Paragraphs,
    SetShape,
    block_cover,
    candidate_paragraphs,
    chain_evidence,
    chain_first,
    covered_share,
    declared,
    document_density,
    fits_cap,
    fits_target,
    heading_rows,
    headings_last,
    linked_share,
    owned_first,
    owned_share,
    page_evidence,
    page_order,
    page_parts,
    page_sections,
    paragraph_cover,
    reads_whole_document,
    section_cap,
    section_density,
    section_evidence,
    sections_share,
    shared_share,
    short_first,
    source_chain,
    sources_sections,
    whole_documents,
    whole_set,
)
from mogg.run.budget.selector.stage import questions_only, reading_data
from mogg.run.budget.selector.units import AUTO
from mogg.run.budget.shared import config_stats, envelope_here
from mogg.run.context import RunContext
from mogg.run.route_paths import searchable

log = logging.getLogger(__name__)


def set_weights(n_questions: list[int], weights: list[float]) -> np.ndarray:
    """Per question of the pooled sets, the factor that makes every set's questions weigh
    ``weights[s]`` in total (questions of a larger set weigh less each), normalised to mean 1."""
    out = np.concatenate([np.full(n, w / max(n, 1)) for n, w in zip(n_questions, weights)])
    return out * (len(out) / max(out.sum(), 1e-12))


def transfer_view(x: np.ndarray, cand_q: np.ndarray, n_questions: int, view: str, level_names, context: bool,
                  page: bool = False) -> np.ndarray:
    """A set's candidate features [N, F] as the transfer scorer reads them (``view``:
    :data:`mogg.run.budget.selector.adapt.VIEWS`; the same on the training sets and the new one; ``page``: ``x``
    holds the page-contrastive columns)."""
    return feature_view(x, cand_q, n_questions, view, feature_names(list(level_names), context, page))


def fit_transfer_selector(ctx: RunContext, name: str, sources: dict[str, LadderFrontier], kind, selector_dir: Path,
                          weights: dict[str, float] | None = None) -> dict:
    """Fit the transfer selector (module doc) into ``selector_dir/transfer``: the scorer over
    ``transfer_features``, and where ``transfer_whole_features`` names a view, the whole-document
    scorer over it (the same candidates, weights and validation slices)."""
    fs = next(iter(sources.values())).fs
    datas = {s: reading_data(ctx, lf.prep, kind, page=kind.transfer_page_words) for s, lf in sources.items()}
    names = list(sources)
    n_q = [len(sources[s].prep.items) for s in names]
    space = sources[names[0]].space
    for s in names:
        if sources[s].space != space:
            raise ValueError(f"train_sources.{s}: its ladder's actions differ from {space.to_json()}: one ladder builder "
                             "for every training set")
    per_q = set_weights(n_q, [float((weights or {}).get(s, 1.0)) for s in names])
    ys, ws, rtr, rva, trains, vals, off_c, off_q = [], [], [], [], [], [], 0, 0
    for i, s in enumerate(names):
        d = datas[s]
        q = d.cand.q
        has = np.flatnonzero(~np.isnan(d.evidence_len))
        t, v = split_train_val(has, ctx.val_fraction, ctx.seed + 3000 + i)
        trains.append(t)
        vals.append(v)
        labelled = ~np.isnan(d.density)
        rtr.append(np.flatnonzero(np.isin(q, t) & labelled) + off_c)
        rva.append(np.flatnonzero(np.isin(q, v) & labelled) + off_c)
        ys.append(d.density)
        ws.append(candidate_weights(q, d.tokens) * per_q[off_q + q])
        off_c += len(q)
        off_q += n_q[i]
    y, w, rtr, rva = np.concatenate(ys), np.concatenate(ws), np.concatenate(rtr), np.concatenate(rva)
    median = float(np.median(np.concatenate([datas[s].evidence_len[t] for s, t in zip(names, trains)])))
    # the fixed table's rows: the training sets' envelope (their fitting questions) and each B's guard
    ff = np.concatenate([sources[s].table.f1[t] for s, t in zip(names, trains)])
    ft = np.concatenate([sources[s].table.tokens[t] for s, t in zip(names, trains)])
    ffv = np.concatenate([sources[s].table.f1[v] for s, v in zip(names, vals)])

    def fit_view(view: str, label: str):
        """One scorer over ``view``: its booster, its feature count and per budget lambda, guard, envelope."""
        xv = {s: transfer_view(d.x, d.cand.q, len(sources[s].prep.items), view, sources[s].prep.ladder.level_names,
                               kind.context, kind.transfer_page_words) for s, d in datas.items()}
        x = np.concatenate([xv[s] for s in names])
        model = fit_scorer(x, y, w, rtr, rva, kind.params, ctx.seed, ctx.threads)
        import lightgbm as lgb

        booster = lgb.Booster(model_str=model.booster_.model_to_string(num_iteration=model.best_iteration_ or None))
        util_v, f_v, t_v = [], [], []  # the pooled validation plans (estimated and true F1, tokens)
        for s, v in zip(names, vals):
            d, lf = datas[s], sources[s]
            texts, ev = lf.prep.ladder.units.text, [it.evidence_text for it in lf.prep.items]
            pred = booster.predict(xv[s])
            e = evidence_estimate(kind.transfer_evidence, median, d.cand.q, pred, d.tokens, d.doc_tokens,
                                  len(lf.prep.items))
            ranked, util, _ = plans_of(pred, d.cand.q, d.cand.unit, d.tokens, texts, len(lf.prep.items), kind.plans, e)
            vf, vt = plan_table(ranked, texts, d.cand.unit, ev, v)
            util_v.append(util[v])
            f_v.append(vf)
            t_v.append(vt)
        util_v, f_v, t_v = np.concatenate(util_v), np.concatenate(f_v), np.concatenate(t_v)
        rows_v = np.arange(len(util_v))
        budgets = {}
        # each B's price on the pooled validation slices, raised to every larger B's (monotone_prices); the guard
        # asks about the price deployed
        prices = monotone_prices({b: best_lambda(util_v, t_v, f_v, b) for b in fs.budgets})
        for b in fs.budgets:
            lam = prices[b]
            env = choose_config(ff, ft, np.arange(len(ff)), b)
            a = decide(util_v, t_v, lam)
            g = guard_check(f_v[rows_v, a] - ffv[:, env], float(t_v[rows_v, a].mean()) if len(a) else 0.0, b,
                            fs.guard_se)
            deploy = "router" if g["passes"] or not fs.guard else "envelope"
            budgets[str(int(b))] = {"lambda": lam, "deploy": deploy, "envelope": int(env),
                                    "envelope_config": space.describe(env),
                                    "guard": {"gain": g["gain"], "se": g["se"], "n": g["n"], "tokens": g["tokens"],
                                              "guard": fs.guard, "on": "the training sets' pooled validation questions"}}
            log.info("%s transfer evidence selector%s (trained on %s) at B=%d: %s deployed (validation gain %+.4f ± "
                     "%.4f over %d questions, %.1f tokens); lambda %.3g", name, label, " + ".join(names), b, deploy,
                     g["gain"], g["se"], g["n"], g["tokens"], lam)
        return booster, {"features_view": view, "n_features": int(x.shape[1]), "budgets": budgets,
                         "trees": int(booster.num_trees())}

    booster, own = fit_view(kind.transfer_features, "")
    whole_booster, whole = None, None
    if kind.transfer_whole_features is not None:
        whole_booster, whole = fit_view(kind.transfer_whole_features, " (whole-document scorer)")
    first = sources[names[0]].prep
    spec = ctx.router_spec(name, first, transfer=True)  # no corpus: the user's, named when routing
    spec["frontier"] = {"depth": fs.depth, "caps": list(fs.caps), "budgets": list(fs.budgets),
                        "max_context_tokens": first.max_context_tokens}
    spec["configs"] = config_stats(ff, ft)  # the training sets' envelope on a new set (envelope_here)
    with_options = float(np.mean([bool(it.options) for s in names for it in sources[s].prep.items]))
    deploy = {"format": FORMAT, "settings": kind.knobs(), "evidence_len": median, "evidence": kind.transfer_evidence,
              "lambda_rule": kind.transfer_lambda, "features_view": own["features_view"],
              "n_features": own["n_features"], "with_options": with_options, "budgets": own["budgets"],
              "space": space.to_json(), "spec": spec,
              "fit": {"seed": int(ctx.seed), "val_fraction": ctx.val_fraction, "sources": names,
                      "n_train": int(sum(len(t) for t in trains)), "n_val": int(sum(len(v) for v in vals)),
                      "trees": own["trees"]},
              **({"whole": whole} if whole is not None else {})}
    ids = [f"{s}:{q}" for s in names for q in sources[s].prep.query_ids]
    dep = DeployedSelector(booster, deploy, {"ids": ids, "val": [], "budgets": {}}, whole_booster)
    out = dep.save(Path(selector_dir) / TRANSFER_DIR)
    log.info("transfer %s evidence selector in %s (trained on %s)", name, out, " + ".join(names))
    return {"dir": str(out), "budgets": {b: p["deploy"] for b, p in own["budgets"].items()}}


def shape_scorer(dep: DeployedSelector, kind, x_of, cand_q: np.ndarray, unit: np.ndarray, unit_doc: np.ndarray,
                 tokens: np.ndarray, doc_tokens: np.ndarray, n_questions: int, paras: Paragraphs | None = None,
                 evidence_unit: str | None = None, options: np.ndarray | None = None
                 ) -> tuple[DeployedSelector, np.ndarray, SetShape]:
    """The scorer a transfer directory reads these new questions with, its predictions [N], and the
    set's shape (:func:`~mogg.run.budget.selector.set_shape.whole_documents` on the directory's own scorer's
    predictions, before any refit: what the ``fits`` price reads, so that it and the scorer follow one
    decision): the directory's own scorer, or, where it has a whole-document scorer and at least
    :data:`~mogg.run.budget.selector.set_shape.FITS_SHARE` of the questions with candidates have their best
    candidate's block covering its document (the evidence looks like whole short documents:
    :func:`~mogg.run.budget.selector.set_shape.whole_shape`, no labels), that one. Where ``transfer_self_train`` questions or more are read together, the
    predictions are reordered by :func:`~mogg.run.budget.selector.self_training.self_trained` (label-free;
    under the whole-document scorer, the documents in the refit's order, those chained to the best one first
    where the set is sections of sources: :func:`~mogg.run.budget.selector.set_shape.chain_first`; under the
    directory's scorer, where the set is sections of a page, the best candidate's paragraph first (the ladder's
    ``paras``; without them each candidate ranked with its neighbours): :func:`~mogg.run.budget.selector.set_shape.page_order`).
    ``x_of(view)``: the candidates' features [N, F] in a view. ``evidence_unit``: the set's evidence unit as declared
    (:data:`~mogg.run.budget.selector.units.UNITS`, ``mogg-route --evidence-unit``; None: what a transfer directory
    recorded, its ``transfer_unit``; an in-set directory decides from its candidates), in place of those decisions
    (:func:`~mogg.run.budget.selector.set_shape.declared`). ``options`` [N]: each candidate's share of its question's
    answer options' words (:func:`~mogg.run.budget.selector.adapt.voting_options`; NaN without options, or where
    they are a fixed answer set): where the directory's ``transfer_options_vote`` is on, they vote in the refit's
    pseudo-labels and in its order (:func:`~mogg.run.budget.selector.adapt.options_vote`)."""
    x = x_of(dep.reads("features_view", kind))  # once: the prediction and the refit read the same view
    pred = dep.booster.predict(x) if len(cand_q) else np.zeros(0)
    docs = whole_documents(cand_q, unit, unit_doc, tokens, pred, doc_tokens, n_questions, paras)
    if evidence_unit is None and dep.transfer:
        evidence_unit = dep.knob("transfer_unit", kind)  # a directory written before the knob: its default, auto
    docs = declared(docs, evidence_unit)
    whole = dep.whole()
    if not len(cand_q):
        return dep, pred, docs
    share = covered_share(docs.doc, docs.covered)
    log.info("%.0f%% of the questions' best documents have a candidate neighbour in corpus order (a shuffled corpus: "
             "%.0f%%); %.0f%% of those with several close documents have one beside the best; %.0f%% own several; "
             "%.0f%% share their best document with another question", 100 * linked_share(docs),
             100 * (docs.chance or 0.0), 100 * sections_share(docs), 100 * owned_share(docs), 100 * shared_share(docs))
    if docs.declared != AUTO:  # the user's word for it, not the candidates'
        log.info("the evidence unit declared: %s (frontier.routers.selector.transfer_unit or mogg-route "
                 "--evidence-unit); from the candidates alone the set reads as %s", docs.declared,
                 _decided(docs._replace(declared=AUTO)))
    if whole is not None and whole_set(docs):
        if docs.declared == AUTO and page_parts(docs):
            log.info("%.0f%% of the questions' best blocks cover their document, but the best documents hold %.0f "
                     "paragraphs at the median and sit beside their pages' other parts (parts of pages, a section a "
                     "document): the whole-document scorer (%s)", 100 * share,
                     float(np.median(np.asarray(docs.parts)[np.asarray(docs.doc) > 0])), whole.deploy["features_view"])
        else:
            log.info("%.0f%% of the questions' best blocks cover their document (whole short documents): the "
                     "whole-document scorer (%s)", 100 * share, whole.deploy["features_view"])
        if reads_whole_document(docs):  # the fits rows and mogg-route --calibrate-here read it so (read_here)
            log.info("%.0f%% of the questions own several close documents (under %.0f%%): the documents stand alone, "
                     "each question reads its best document whole and at most it", 100 * owned_share(docs),
                     100 * OWN_SHARE)
        xw = x_of(whole.deploy["features_view"])
        cand_doc = np.asarray(unit_doc)[unit]
        vote = _voting(dep, kind, options)
        pred = self_trained(whole, kind, xw, whole.booster.predict(xw), cand_q, n_questions, cand_doc, vote)
        pred = _options_voted(dep, kind, pred, cand_q, options, cand_doc)
        pred = chain_first(pred, cand_q, cand_doc, n_questions, docs)
        return whole, owned_first(pred, cand_q, cand_doc, n_questions, docs), docs
    log.info("%.0f%% of the questions' best blocks cover their document: the directory's scorer", 100 * share)
    cover = block_cover(docs)
    # where the candidates decided, the log names the knob and the flag that declare the unit instead: no label-free
    # rule tells a section of a long paper from a sentence of it (docs/results.md, "One topic, many questions")
    declare = ("; where the evidence is a %s, declare it: frontier.routers.selector.transfer_unit=%s or mogg-route "
               "--calibrate-here --evidence-unit %s")
    covers = ("the block around the best candidate covers %.1f%% of its document and %.0f%% of its paragraph at the "
              "median (sections of a page from %.0f%% of the document or %.0f%% of the paragraph, set_shape.PAGE_COVER "
              "and PARAGRAPH_COVER)")
    covered = (100 * cover, 100 * paragraph_cover(docs), 100 * PAGE_COVER, 100 * PARAGRAPH_COVER)
    if docs.declared == AUTO and page_sections(docs):  # a declared unit was said above
        log.info("sections of a page: " + covers + ": each question reads its section" + declare, *covered,
                 "sentence", "sentence", "sentence")
    elif docs.declared == AUTO:
        log.info("sentences of long documents: " + covers + ": each question reads at the training sets' price of a "
                 "token, not a section" + declare, *covered, "section of a page", "section", "section")
    pred = self_trained(dep, kind, x, pred, cand_q, n_questions, options=_voting(dep, kind, options))
    pred = _options_voted(dep, kind, pred, cand_q, options)
    return dep, page_order(pred, cand_q, unit, unit_doc, docs, paras=paras), docs


def _voting(dep: DeployedSelector, kind, options: np.ndarray | None) -> np.ndarray | None:
    """``options`` where this is a transfer directory fitted with ``transfer_options_vote`` (they vote in the refit's
    pseudo-labels and in its order), else None."""
    return options if options is not None and dep.transfer and dep.knob("transfer_options_vote", kind) else None


def _options_voted(dep: DeployedSelector, kind, pred: np.ndarray, cand_q: np.ndarray, options: np.ndarray | None,
                   doc: np.ndarray | None = None) -> np.ndarray:
    """``pred`` with the answer options' vote (:func:`~mogg.run.budget.selector.adapt.options_vote`) where this is a
    transfer directory fitted with ``transfer_options_vote`` and the questions carry options; else as it is."""
    if _voting(dep, kind, options) is None:
        return pred
    voted = options_vote(pred, cand_q, options, doc)
    if voted is not pred:
        log.info("%d of %d questions carry answer options: their words vote in the order (reciprocal ranks)",
                 int(np.unique(cand_q[np.isfinite(options)]).size), int(np.unique(cand_q).size))
    return voted


def _decided(docs: SetShape) -> str:
    """The evidence unit the candidates decide (the log's words for :data:`~mogg.run.budget.selector.units.UNITS`)."""
    return "document" if whole_set(docs) else "section" if page_sections(docs) else "sentence"


def _plans_with(dep: DeployedSelector, pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray,
                texts, n_questions: int, e):
    """The ranking, estimated F1 and tokens [Q, K] of a directory's plans on new questions with E ``e``."""
    return plans_of(pred, cand_q, unit, tokens, texts, n_questions, int(dep.deploy["settings"]["plans"]), e)


def _estimate(dep: DeployedSelector, evidence: str, cand_q: np.ndarray, pred: np.ndarray, tokens: np.ndarray,
              doc_tokens: np.ndarray | None, n_questions: int):
    """E by the estimate ``evidence`` (the directory's training median where it reads one)."""
    return evidence_estimate(evidence, float(dep.deploy["evidence_len"]), cand_q, pred, tokens, doc_tokens, n_questions)


def here_plans(dep: DeployedSelector, pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray,
               texts, n_questions: int, evidence: str, doc_tokens: np.ndarray | None = None):
    """The ranking, the plans' estimated F1 and their tokens [Q, K] of a deployed selector on new
    questions with evidence estimate ``evidence`` (the same at every budget)."""
    return _plans_with(dep, pred, cand_q, unit, tokens, texts, n_questions,
                       _estimate(dep, evidence, cand_q, pred, tokens, doc_tokens, n_questions))


PAGE = "page"  # the key of the plans on sections of a page in read_here's ``plans`` dict (beside each E's)
SOURCES = "sources"  # ... and (SOURCES, E) those of each E on sections of sources, E bounded by the chain
ALONE = "alone"  # ... and ALONE those where the set's documents stand alone (alone_plans)


def alone_plans(dep: DeployedSelector, pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray,
                texts, n_questions: int, doc_tokens: np.ndarray, unit_doc: np.ndarray):
    """:func:`here_plans` where the set's documents stand alone (:func:`~mogg.run.budget.selector.set_shape.stands_alone`):
    E the best candidate's document (:func:`~mogg.run.budget.selector.plans.document_evidence`), each of its candidates
    as likely as the best (:func:`~mogg.run.budget.selector.set_shape.document_density`): the document is read whole."""
    return plans_of(pred, cand_q, unit, tokens, texts, n_questions, int(dep.deploy["settings"]["plans"]),
                    document_evidence(cand_q, pred, doc_tokens, n_questions),
                    document_density(pred, cand_q, np.asarray(unit_doc)[unit]))


def sources_plans(dep: DeployedSelector, pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray,
                  texts, n_questions: int, evidence: str, doc_tokens: np.ndarray, unit_doc: np.ndarray):
    """:func:`here_plans` on sections of sources: E ``evidence``'s estimate bounded by each question's chain
    (:func:`~mogg.run.budget.selector.set_shape.chain_evidence`)."""
    e = chain_evidence(_estimate(dep, evidence, cand_q, pred, tokens, doc_tokens, n_questions), cand_q,
                       np.asarray(unit_doc)[unit], pred, doc_tokens, n_questions)
    return _plans_with(dep, pred, cand_q, unit, tokens, texts, n_questions, e)


def page_plans(dep: DeployedSelector, pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray,
               texts, n_questions: int, doc_tokens: np.ndarray, paras: Paragraphs | None = None,
               budget: float | None = None):
    """:func:`here_plans` on sections of a page: E the best candidate's section
    (:func:`~mogg.run.budget.selector.set_shape.section_evidence`), each of its candidates as likely as the best
    (:func:`~mogg.run.budget.selector.set_shape.section_density`), and at ``budget`` a section longer than it read
    from its best paragraph's shortest candidate (:func:`~mogg.run.budget.selector.set_shape.short_first`), a question
    line heading a paragraph read last, as no evidence (:func:`~mogg.run.budget.selector.set_shape.headings_last`); or
    without the ladder's ``paras`` E a share of its page (:func:`~mogg.run.budget.selector.set_shape.page_evidence`)."""
    if paras is None:
        return _plans_with(dep, pred, cand_q, unit, tokens, texts, n_questions,
                           page_evidence(cand_q, pred, doc_tokens, n_questions))
    e = section_evidence(cand_q, pred, paras, n_questions)
    order = pred if budget is None else short_first(pred, cand_q, tokens, paras, e, budget)
    order, density = headings_last(order, section_density(pred, cand_q, paras), cand_q,
                                   heading_rows(unit, paras, texts) if paras.heading is None else paras.heading)
    return plans_of(order, cand_q, unit, tokens, texts, n_questions, int(dep.deploy["settings"]["plans"]), e,
                    density)


def read_source_here(c: ReadRows, ladder, unit_tokens: np.ndarray, docs: SetShape | None) -> ReadRows:
    """:func:`~mogg.run.budget.selector.best_source.read_best_source` on a ladder's candidates (``ladder``: its
    units' documents and :meth:`~mogg.ladders.base.Ladder.sources`; ``unit_tokens`` [U]): what the report's
    transferred rows and ``mogg-route --calibrate-here`` read."""
    udoc = ladder.units.doc
    return read_best_source(c, udoc, unit_tokens, lambda u: document_tokens(udoc, unit_tokens, u), ladder.sources(),
                            docs)


def read_here(dep: DeployedSelector, pred: np.ndarray, cand_q: np.ndarray, unit: np.ndarray, tokens: np.ndarray,
              texts, n_questions: int, budget: float, evidence: str, table_tokens: np.ndarray | None = None,
              deploy: str | None = None, doc_tokens: np.ndarray | None = None, rule: str = "here",
              plans: tuple | None = None, unit_doc: np.ndarray | None = None, docs: tuple | None = None,
              chain: np.ndarray | None = None, paras: Paragraphs | None = None, chain_cap: bool = False):
    """A deployed selector read on new questions at ``budget`` without their labels (module doc): the plan per
    question (-1: the envelope, where the guard kept it), the ranking and plan tokens, the plan as applied
    (``{"lambda", "deploy", "envelope", "reads_to"}``). ``table_tokens`` [Q, A]: the fixed configurations' tokens on
    these questions (where the guard kept the envelope, it is chosen here); ``deploy``: router | envelope instead of
    the guard's decision (``--unguarded``); ``doc_tokens`` [N]: each candidate's document's tokens
    (``evidence=document``, ``rule=fits``); ``rule``: ``here`` (lambda from these questions' tokens), ``learned`` (at
    least the training sets' lambda for B) or ``fits`` (:func:`mogg.run.budget.selector.set_shape.fits_target`: at
    least up to the best candidate's document where these questions' evidence looks like whole short documents, else
    ``learned``; where the set's documents stand alone its best document read whole and at most it (``fits_cap``,
    :func:`alone_plans`); E the best
    candidate's paragraph (the ladder's ``paras``; without them a share of the best document) where the set is
    sections of a page (``page_sections``), read at least to the median one there, E at most the chain where it is
    sections of sources (``sources_sections``); needs ``unit_doc`` [U], every unit's document);
    ``plans``: what :func:`here_plans` gives for these arguments (or a dict of them per E, :func:`page_plans`'s
    under (:data:`PAGE`, B) on sections of a page (B None without ``paras``), :func:`sources_plans`' under
    (:data:`SOURCES`, E) on sections of sources, :func:`alone_plans`' under :data:`ALONE`), ``docs``: the set's shape
    as :func:`shape_scorer` gives it, ``chain`` [Q]: on sections of sources each question's chain on ``pred``
    (:func:`~mogg.run.budget.selector.set_shape.source_chain`; each computed here from ``pred`` when None);
    ``chain_cap`` (the directory's ``transfer_chain_cap``): there under ``fits`` each question reads at most its chain,
    the price calibrated on the plans within it."""
    if rule not in LAMBDA_RULES:
        raise ValueError(f"lambda rule {rule!r}: one of {LAMBDA_RULES}")
    if rule == "fits" and (doc_tokens is None or unit_doc is None):
        raise ValueError("lambda rule 'fits' needs each candidate's document tokens and every unit's document")
    if rule != "fits":
        docs = None
    elif docs is None:
        docs = whole_documents(cand_q, unit, unit_doc, tokens, pred, doc_tokens, n_questions, paras)
    page = docs is not None and page_sections(docs)  # a section of a page: E a share of the page (set_shape.PAGE_SHARE)
    sources = docs is not None and sources_sections(docs)  # sections of sources: E at most the chain
    alone = docs is not None and reads_whole_document(docs)  # E the best document, read whole
    page_b = None if paras is None else budget  # with the ladder's paragraphs the page's plans follow the budget
    if isinstance(plans, dict):
        plans = plans.get((PAGE, page_b) if page else (SOURCES, evidence) if sources else ALONE if alone else evidence)
    elif page or sources or alone:  # one tuple is one E's plans as here_plans gives them, never these
        plans = None
    if plans is None and page:
        plans = page_plans(dep, pred, cand_q, unit, tokens, texts, n_questions, doc_tokens, paras, page_b)
    elif plans is None and sources:
        plans = sources_plans(dep, pred, cand_q, unit, tokens, texts, n_questions, evidence, doc_tokens, unit_doc)
    elif plans is None and alone:
        plans = alone_plans(dep, pred, cand_q, unit, tokens, texts, n_questions, doc_tokens, unit_doc)
    elif plans is None:
        plans = here_plans(dep, pred, cand_q, unit, tokens, texts, n_questions, evidence, doc_tokens)
    ranked, util, plan_tok = plans
    p = dep.deploy["budgets"][str(int(budget))]
    applied = {"lambda": None, "deploy": deploy or p["deploy"], "envelope": int(p["envelope"]), "reads_to": None}
    if applied["deploy"] == "envelope":
        if table_tokens is not None and dep.deploy["spec"].get("configs"):
            applied["envelope"] = envelope_here(dep.deploy["spec"]["configs"], table_tokens, budget)
        return np.full(n_questions, -1, dtype=np.int64), ranked, plan_tok, applied
    if not sources:
        chain = None
    elif chain is None:
        chain = source_chain(cand_q, np.asarray(unit_doc)[unit], pred, doc_tokens, n_questions)
    section = section_evidence(cand_q, pred, paras, n_questions) if page and paras is not None else None
    # documents that stand alone: at most the best one; sections of a page: at most the best paragraph (or the median)
    cap = (fits_cap(docs) if section is None else section_cap(docs, section)) if rule == "fits" else None
    capped = alone  # the plans past the cap out of the price's calibration
    if chain_cap and chain is not None and rule == "fits":
        # sections of sources: at most the chain (what E is bounded by); past it a plan reads another source (the
        # snippet stand-in read 213 tokens for F1 0.877 at B = 256, 203 for 0.940 so capped; docs/results.md, "At
        # most the chain")
        cap, capped = np.where(chain > 0, chain, np.inf)[:, None], True
    # where the documents stand alone (or under the chain) the price is calibrated on the plans within the cap, what
    # the questions read: past it a plan reads nothing more, so the mean under B would leave the budget unspent (the
    # page stand-in written a section per document read 54 tokens at B = 64; docs/results.md, "A page written one
    # section per document")
    u_lam = np.where(plan_tok > cap, -1e30, util) if capped and cap is not None else util
    applied["lambda"], applied["reads_to"] = lambda_here(rule, u_lam, plan_tok, budget, float(p["lambda"]), docs, chain,
                                                         section)
    return decide(util, plan_tok, applied["lambda"], cap).astype(np.int64), ranked, plan_tok, applied


def lambda_here(rule: str, util: np.ndarray, plan_tok: np.ndarray, budget: float, learned: float,
                docs: SetShape | None = None, chain: np.ndarray | None = None,
                section: np.ndarray | None = None) -> tuple[float, float | None]:
    """The price of a token on new questions at ``budget`` by ``rule`` (:data:`LAMBDA_RULES`; the
    plans' estimated F1 and tokens [Q, K]; ``learned``: the training sets' lambda for B; ``docs``:
    :func:`~mogg.run.budget.selector.set_shape.whole_documents` for ``fits``, and ``chain`` [Q] on sections of
    sources, :func:`~mogg.run.budget.selector.set_shape.source_chain`; ``section`` [Q] on sections of a page,
    :func:`~mogg.run.budget.selector.set_shape.section_evidence`) and, where ``fits`` found whole short documents
    (or a section of a page), the mean tokens it reads at least (at most B; else None). No labels."""
    lam = calibrate_lambda(util, plan_tok, budget)  # these questions' own tokens: at most B
    if rule != "here":  # never below the training sets' price of a token (it only lowers tokens)
        lam = max(lam, learned)
    target = fits_target(docs, budget, chain, section) if rule == "fits" else None
    if target is not None:  # whole short documents: read at least up to them (the price may stop earlier)
        lam = min(lam, calibrate_lambda(util, plan_tok, target))
    return lam, target


def deployed_row(dep: DeployedSelector, kind) -> str:
    """The report's name of the row a transfer directory deploys (its evidence estimate and lambda
    rule, as ``mogg-route --calibrate-here`` reads it; ``kind``: the selector, whose knobs' defaults
    a directory written before one reads with)."""
    return f"transferred selector (deployed: E {dep.reads('evidence', kind)}, lambda {dep.reads('lambda_rule', kind)})"


def candidate_row(evidence: str, rule: str) -> str:
    """The report's name of a transfer rule the directory does not deploy."""
    return f"transferred selector (E {evidence}{'' if rule == 'here' else ', lambda ' + rule})"


def transferred_rows(ctx: RunContext, ladder: LadderFrontier, kind, directory: Path) -> dict:
    """budget -> {row: (F1 [Q], tokens [Q], config)} of the transfer selector on this set: with
    each evidence estimate (:data:`EVIDENCE`), and the training sets' envelope (both label-free)."""
    from mogg.evaluation.frontier_report import TRAINING_ENVELOPE

    dep = DeployedSelector.load(directory)
    if dep.space != ladder.space:
        raise ValueError(f"{directory}: trained on actions {dep.deploy['space']}, this set's are {ladder.space.to_json()}; "
                         "retrain")
    prep, table = ladder.prep, ladder.table
    settings = dep.deploy["settings"]
    if any(settings.get(k) != getattr(kind, k) for k in ("depth", "per_chunk", "cosine")):
        raise ValueError(f"{directory}: trained with selector knobs {settings}; this run's differ: retrain it")
    # mogg-route gives a question without an indexable word an empty record and reads the others as one set
    # (route_paths.route_with_empty): so do these rows, or the set's label-free steps (the self-training's halves,
    # the price, the shape) would read another set than the routing does
    kept = np.flatnonzero([searchable(q, prep) for q in prep.questions])
    page = dep.page_columns(kind)  # as mogg-route reads this directory
    d = questions_only(reading_data(ctx, prep, kind, page=page), kept)
    texts, ev, n = prep.ladder.units.text, [prep.items[i].evidence_text for i in kept], len(kept)
    if n < len(prep.items):
        log.info("%d question(s) without an indexable word read nothing in the transferred rows, as mogg-route "
                 "routes them", len(prep.items) - n)

    def spread(v: np.ndarray) -> np.ndarray:  # [n] -> every question [Q], 0 where a question read nothing
        out = np.zeros(len(prep.items), dtype=np.float64)
        out[kept] = v
        return out
    udoc = prep.ladder.source_unit_docs()  # a source's sections together (stored with the ladder at build)
    paras = candidate_paragraphs(prep.ladder.paragraph_starts(), d.unit_tokens, d.cand.unit, prep.ladder.units.doc,
                                 texts, bool(dep.knob("transfer_section_cohesion", kind)))
    named = dep  # the rows' names: the directory's rule
    dep, pred, docs = shape_scorer(dep, kind, lambda v: transfer_view(d.x, d.cand.q, n, v, prep.ladder.level_names,
                                                                      kind.context, page),
                                   d.cand.q, d.cand.unit, udoc, d.tokens, d.doc_tokens, n, paras,
                                   options=voting_options(option_column(d.x, len(prep.ladder.level_names)), d.cand.q,
                                                          [" ".join(prep.items[i].options.values()) for i in kept]))
    # where the ids name short sources, each question's best candidate's whole source first (best_source)
    cq, cu, ctok, cdoc, pred = read_source_here(ReadRows(d.cand.q, d.cand.unit, d.tokens, d.doc_tokens, pred),
                                                prep.ladder, d.unit_tokens, docs)
    if len(cu) != len(d.cand.unit):
        paras = None  # never sections of a page there (best_source.reads_sources)
    scorer = "" if dep is named else f" (whole-document scorer, {dep.deploy['features_view']})"
    rows = np.arange(n)

    # every candidate rule (E x lambda rule, the leave-one-shape-out choice's candidates:
    # scripts/choose_transfer_rule.py), the one the directory deploys (mogg-route --calibrate-here
    # reads with it) marked so in its name
    own = (named.reads("evidence", kind), named.reads("lambda_rule", kind))
    reads = [(deployed_row(named, kind) if (e, rule) == own else candidate_row(e, rule), e, rule)
             for rule in LAMBDA_RULES for e in EVIDENCE]

    # the plans of each E (the same at every budget), and their true F1 once: the ranking is by the
    # scorer alone, so every E shares it
    plans = {e: here_plans(dep, pred, cq, cu, ctok, texts, n, e, cdoc) for e in EVIDENCE}
    if docs is not None and page_sections(docs):  # the fits rows' plans there (read_here), per budget with paragraphs
        for b in [None] if paras is None else [float(b) for b in dep.deploy["budgets"]]:
            plans[(PAGE, b)] = page_plans(dep, pred, cq, cu, ctok, texts, n, cdoc, paras, b)
    chain = None  # sections of sources: each question's chain on pred, read by every row at every budget
    chain_cap = bool(named.knob("transfer_chain_cap", kind))  # ... and at most it under fits (a directory before: past it)
    if docs is not None and sources_sections(docs):
        plans.update({(SOURCES, e): sources_plans(dep, pred, cq, cu, ctok, texts, n, e, cdoc,
                                                  udoc) for e in EVIDENCE})
        chain = source_chain(cq, udoc[cu], pred, cdoc, n)
    if docs is not None and reads_whole_document(docs):
        plans[ALONE] = alone_plans(dep, pred, cq, cu, ctok, texts, n, cdoc, udoc)

    truths = {}  # the plans' true F1 and tokens, once per ranking (every E shares one; the page's follows B)

    def truth(ranked) -> tuple[np.ndarray, np.ndarray]:  # on the first row that deploys the selector
        key = ranked.rows.tobytes()
        if key not in truths:
            truths[key] = plan_table(ranked, texts, cu, ev, rows)
        return truths[key]

    def at(b: float) -> dict:
        if str(int(b)) not in dep.deploy["budgets"]:
            return {}
        out = {}
        for row, evidence, rule in reads:
            choice, ranked, _, applied = read_here(dep, pred, cq, cu, ctok, texts, n, b, evidence,
                                                   table.tokens[kept], doc_tokens=cdoc, rule=rule,
                                                   plans=plans, unit_doc=udoc, docs=docs, chain=chain, paras=paras,
                                                   chain_cap=chain_cap)
            if applied["deploy"] == "envelope":
                env = applied["envelope"]
                f1, tok, conf = table.f1[kept, env], table.tokens[kept, env], "envelope deployed"
            else:
                pf, pt = truth(ranked)
                f1, tok, conf = pf[rows, choice], pt[rows, choice], "selector deployed" + scorer
            out[row] = (spread(f1), spread(tok), conf)
        env = envelope_here(dep.deploy["spec"]["configs"], table.tokens, b)
        out[TRAINING_ENVELOPE] = (table.f1[:, env], table.tokens[:, env], ladder.space.names()[env])
        return out
    return at
