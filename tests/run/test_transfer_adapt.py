"""The transferred selector's label-free adaptations (mogg.run.budget.selector.adapt) against brute
force, and the feature view a transfer directory records being the one mogg-route reads with."""

import numpy as np
import pytest

from mogg.run.budget.selector.adapt import VIEWS, feature_view, self_train, shift_weights, within_question


def _toy(seed=0, n_q=7, f=3):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, n_q)
    q = np.repeat(np.arange(n_q), sizes)
    x = rng.normal(size=(len(q), f)).round(1)  # rounded: ties happen
    x[rng.random(x.shape) < 0.1] = np.nan
    return x, q, n_q



def _candidate_units(rng: np.random.Generator, n_q: int, n_units: int, most: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate rows (question [N], unit [N]): each of ``n_q`` questions draws 1 to ``most`` - 1 distinct units of
    ``n_units``, in unit order, questions in order (``_random_candidates`` draws documents instead)."""
    rows = [(qi, int(x)) for qi in range(n_q)
            for x in np.sort(rng.choice(n_units, size=rng.integers(1, most), replace=False))]
    q, u = (np.array(c) for c in zip(*rows))
    return q, u


def _paged_units(rng: np.random.Generator, n_pages: int, per_page: int, p_break: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A corpus of ``n_pages`` pages of ``per_page`` units: each unit's page [U], its paragraph [U] (a new one at each
    page and, inside a page, after a unit with probability ``p_break``), its tokens [U] (5-39), and the paragraph
    starts inside the pages (:meth:`mogg.ladders.base.Ladder.paragraph_starts`)."""
    n = n_pages * per_page
    unit_doc = np.repeat(np.arange(n_pages), per_page)
    unit_par = np.cumsum(np.r_[True, (np.diff(unit_doc) > 0) | (rng.random(n - 1) < p_break)]) - 1
    unit_tokens = rng.integers(5, 40, n).astype(float)
    starts = np.flatnonzero((np.diff(unit_par) > 0) & (np.diff(unit_doc) == 0)) + 1
    return unit_doc, unit_par, unit_tokens, starts


def test_within_question_matches_a_loop_over_questions():
    x, q, n_q = _toy()
    got = within_question(x, q, n_q)
    f = x.shape[1]
    for qi in range(n_q):
        rows = np.flatnonzero(q == qi)
        xx = np.nan_to_num(x[rows], nan=0.0)
        sd = xx.std(axis=0)
        z = np.where(sd > 1e-9, (xx - xx.mean(axis=0)) / np.maximum(sd, 1e-9), 0.0)
        np.testing.assert_allclose(got[rows, :f], z, rtol=1e-5, atol=1e-5)
        for j in range(f):
            key = np.where(np.isnan(x[rows, j]), np.inf, -x[rows, j])
            order = np.lexsort((key,))  # stable: ties keep row order, as the vectorised sort does
            rank = np.empty(len(rows))
            rank[order] = np.arange(len(rows))
            np.testing.assert_allclose(got[rows, f + j], rank / max(len(rows) - 1, 1), atol=1e-6)


def test_within_question_is_the_same_whatever_the_other_questions():
    x, q, n_q = _toy(1)
    a = within_question(x, q, n_q)
    keep = q < 3  # the first three questions alone
    b = within_question(x[keep], q[keep], 3)
    np.testing.assert_allclose(a[keep], b)


def test_views():
    x, q, n_q = _toy(2, f=4)
    names = ["score mog", "option_match", "question_log_tokens", "bm25"]
    assert feature_view(x, q, n_q, "raw", names) is x
    assert feature_view(x, q, n_q, "within_question", names).shape == (len(q), 12)
    assert feature_view(x, q, n_q, "no_options", names).shape == (len(q), 3)
    only = feature_view(x, q, n_q, "within_question_only", names)
    assert only.shape == (len(q), 9) and np.array_equal(only[:, 0], x[:, 2], equal_nan=True)
    with pytest.raises(ValueError, match="one of"):
        feature_view(x, q, n_q, "zscore", names)
    with pytest.raises(ValueError, match="names"):
        feature_view(x, q, n_q, "no_options")
    assert set(VIEWS) >= {"raw", "within_question"}


def test_document_views_drop_the_document_columns_by_name():
    from mogg.run.budget.selector.candidates import FEATURES

    x, q, n_q = _toy(3, f=5)
    names = ["score mog", "doc_vote", "log_doc_units", "match", "doc_position"]
    nodoc = feature_view(x, q, n_q, "no_document", names)
    np.testing.assert_array_equal(nodoc, x[:, [0, 3]])
    both = feature_view(x, q, n_q, "within_question_no_document", names)
    np.testing.assert_allclose(both, np.concatenate([x[:, [0, 3]], within_question(x[:, [0, 3]], q, n_q)], axis=1))
    # the shipped columns: every document column is dropped, every unit column kept
    from mogg.run.budget.selector.adapt import document_columns
    kept = [FEATURES[i] for i in range(len(FEATURES)) if i not in document_columns(list(FEATURES))]
    assert "match" in kept and "cosine" in kept and "vote" in kept
    assert not any(f.startswith("doc_") or f == "log_doc_units" for f in kept)


def test_shift_weights_favour_training_rows_that_look_like_the_new_set():
    rng = np.random.default_rng(0)
    a = rng.normal(0.0, 1.0, (3000, 2))
    b = rng.normal(0.0, 1.0, (3000, 2))
    target = rng.normal(1.5, 0.5, (3000, 2))
    wa, wb = shift_weights([a, b], target, seed=0)
    assert wa.shape == (3000,) and abs(wa.mean() - 1) < 1e-9 and abs(wb.mean() - 1) < 1e-9
    near = (a[:, 0] > 1.0) & (a[:, 1] > 1.0)
    assert wa[near].mean() > 2 * wa[~near].mean()


def test_self_train_is_cross_fitted_and_learns_the_confident_choice():
    rng = np.random.default_rng(0)
    n_q, per = 400, 6
    q = np.repeat(np.arange(n_q), per)
    signal = rng.normal(size=len(q))
    x = np.stack([signal, rng.normal(size=len(q))], axis=1)
    pred = signal + rng.normal(0, 0.3, len(q))  # the transferred scorer: right, noisily
    out = self_train(x, q, n_q, pred, seed=0)
    assert out.shape == (len(q),) and (out >= 0).all() and (out <= 1).all()
    assert np.corrcoef(out, signal)[0, 1] > 0.5
    # cross-fitted: changing one half's pseudo-labels leaves the other half's scores unchanged
    half = np.random.default_rng(0).integers(0, 2, n_q)
    pred2 = pred.copy()
    pred2[half[q] == 0] = rng.normal(size=(half[q] == 0).sum())
    out2 = self_train(x, q, n_q, pred2, seed=0)
    np.testing.assert_allclose(out[half[q] == 0], out2[half[q] == 0])


def test_block_evidence_against_a_walk_from_the_best_candidate():
    from mogg.run.budget.selector.adapt import block_evidence

    rng = np.random.default_rng(3)
    unit_doc = np.repeat(np.arange(6), 5)  # 6 documents of 5 units
    rows = []
    for qi in range(40):
        units = np.sort(rng.choice(30, size=rng.integers(1, 12), replace=False))
        rows += [(qi, u) for u in units]
    q, u = (np.array(c) for c in zip(*rows))
    tokens = rng.integers(5, 40, len(q)).astype(float)
    pred = rng.random(len(q))
    got = block_evidence(q, u, unit_doc, tokens, pred, 40, ratio=0.5)
    for qi in range(40):
        r = np.flatnonzero(q == qi)
        best = r[np.argmax(pred[r])]
        ok = {int(u[i]): i for i in r if pred[i] >= 0.5 * pred[best] and unit_doc[u[i]] == unit_doc[u[best]]}
        total, k = tokens[best], int(u[best])
        for step in (-1, 1):  # walk out while the next unit is a good candidate of the same document
            j = k + step
            while j in ok:
                total += tokens[ok[j]]
                j += step
        assert got[qi] == total, qi


def test_relative_choice():
    from mogg.run.budget.selector.adapt import relative_choice

    rp = np.array([[1.0, 0.8, 0.3, 0.9], [0.5, 0.1, -np.inf, -np.inf], [0.2, -np.inf, -np.inf, -np.inf]])
    assert relative_choice(rp, 0.5).tolist() == [1, 0, 0]
    assert relative_choice(rp, 0.2).tolist() == [3, 1, 0]  # 0.1 / 0.5 = 0.2: kept


def test_whole_documents_and_the_fits_target_against_a_loop():
    """The ``fits`` rule's inputs (per question: the best candidate's document tokens, whether the block
    around that candidate covers half of it) against a loop, and its target: min(B, median reach) where
    at least half the questions' best documents are covered, at every budget, else None (learned)."""
    from mogg.run.budget.selector.adapt import block_evidence
    from mogg.run.budget.selector.set_shape import (
        CLOSE_RATIO,
        FITS_COVER,
        OWN_RATIO,
        SetShape,
        close_reach,
        fits_target,
        linked_rows,
        owned_reach,
        whole_documents,
        whole_shape,
    )

    rng = np.random.default_rng(5)
    unit_doc = np.repeat(np.arange(8), 4)  # 8 documents of 4 units
    unit_tokens = rng.integers(5, 60, 32).astype(float)
    q, u = _candidate_units(rng, 30, 32, 10)
    tokens = unit_tokens[u]
    doc_tokens = np.bincount(unit_doc, weights=unit_tokens)[unit_doc[u]]
    pred = rng.random(len(q)).round(2)
    shape = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, 31)  # question 30: no candidates
    doc, covered, close, chain, linked, _, block_of, owned, owns, paragraph, parts, shared, declared = shape
    assert declared == "auto"  # the candidates decide (set_shape.declared)
    assert paragraph is None and parts is None and shared is None  # no paragraphs read (paragraph_cover, page_parts)
    # owned: the tokens owned at CLOSE_RATIO (the floor's reach); owns: the documents owned at OWN_RATIO (the decision)
    np.testing.assert_array_equal(owned, owned_reach(q, unit_doc[u], pred, doc_tokens, 31, CLOSE_RATIO)[0])
    np.testing.assert_array_equal(owns, owned_reach(q, unit_doc[u], pred, doc_tokens, 31, OWN_RATIO)[1])
    block = block_evidence(q, u, unit_doc, tokens, pred, 31)
    np.testing.assert_array_equal(block_of, block)  # the block around the best candidate (set_shape.block_cover)
    assert all(np.array_equal(a, b) for a, b in zip((close, chain), close_reach(q, unit_doc[u], pred, doc_tokens, 31)))
    np.testing.assert_array_equal(linked, linked_rows(q, unit_doc[u], pred, 31))
    for qi in range(30):
        r = np.flatnonzero(q == qi)
        best = r[np.argmax(pred[r])]  # the first of equal scores
        assert doc[qi] == doc_tokens[best]
        assert covered[qi] == (block[qi] >= FITS_COVER * doc_tokens[best])
        assert close[qi] >= chain[qi] >= doc[qi]
    assert doc[30] == 0 and not covered[30] and close[30] == chain[30] == 0  # no candidates: nothing fits or is covered

    def target(d, c, b, every=None, chain=None):
        return fits_target(SetShape(d, c, d if every is None else every, d if chain is None else chain), b)
    # the target: a majority of covered best documents -> min(B, their median) at every budget; else None
    d = np.array([100.0, 120, 140, 900, 1000])
    assert target(d, np.ones(5, bool), 150) == 140.0 and target(d, np.ones(5, bool), 1000) == 140.0
    # one decision at every budget: where only some best documents fit in B it still reads up to B (the version
    # that asked half of them to fit in B returned None here, and PubMedQA* stopped inside its abstracts)
    assert target(d, np.ones(5, bool), 130) == 130.0 and target(d, np.ones(5, bool), 120) == 120.0
    assert target(d, np.array([True, True, False, True, True]), 150) == 140.0  # 4 of 5 covered
    assert target(d, np.array([True, False, False, False, True]), 150) is None  # 2 of 5 covered
    # the reach: with the chained close documents (sections of one source: the snippet shapes), and every close
    # document only where most questions with several have a neighbour among them (sections_share >= 0.5)
    ones, plus = np.ones(5, bool), np.array([0, 0, 200, 0, 0])
    assert target(d, ones, 512, d + plus, d + plus) == 340.0  # one question with several: all chained
    assert target(d, ones, 256, d + 200, d + 200) == 256.0
    assert target(d, ones, 512, d + 300, d + np.array([0, 100, 100, 100, 0])) == 440.0  # 3 of 5 chained: every close one
    assert target(d, ones, 512, d + 300, d + np.array([0, 0, 100, 100, 0])) == 240.0  # 2 of 5: the chains (MedMCQA)
    assert target(d, ones, 512, d + 300, d) == 140.0  # none chained (a shuffled corpus): the best documents
    # where the read hands the chain E is bounded by (set_shape.source_chain), the floor is that chain on sections of
    # sources (every close document counted other sources' sections too) and is ignored elsewhere
    src = d + np.array([0, 20, 40, 10, 0])
    sections, apart = SetShape(d, ones, d + 300, d + np.array([0, 100, 100, 100, 0])), SetShape(d, ones, d + 300, d)
    assert fits_target(sections, 512, src) == 180.0 and fits_target(sections, 160, src) == 160.0
    assert fits_target(apart, 512, src) == 140.0
    # questions without candidates (document 0) neither count nor lower the median
    d0, c0 = np.array([0.0, 0, 0, 100, 120]), np.array([False, False, False, True, True])
    assert whole_shape(d0, c0) and target(d0, c0, 512) == 110.0
    assert target(np.zeros(0), np.zeros(0, bool), 128) is None and not whole_shape(np.zeros(3), np.zeros(3, bool))


def _random_candidates(seed: int, n_docs: int, n_q: int, most: int):
    """Random candidates: per question 1 to ``most`` - 1 documents drawn with repeats (a repeat: two units of one
    document); returns (question [N], document [N], prediction [N] rounded to 0.01, every document's tokens)."""
    rng = np.random.default_rng(seed)
    dtok = rng.integers(10, 90, n_docs).astype(float)
    rows = [(qi, int(dd)) for qi in range(n_q) for dd in rng.choice(n_docs, size=rng.integers(1, most))]
    q, cdoc = (np.array(c) for c in zip(*rows))
    return q, cdoc, rng.random(len(q)).round(2), dtok


def test_close_reach_against_a_loop():
    """The close documents (the best one and those whose best candidate is predicted >= ratio x the question's
    best) and the run of them chained to the best in corpus order, against a loop on random candidates; a
    corpus whose close documents are not neighbours reads the best document alone; sections_share counts the
    questions with several close documents whose chain holds more than the best; linked_rows says whether the
    chain holds another document, linked_share the share of such questions among those with candidates."""
    from mogg.run.budget.selector.set_shape import (
        CLOSE_RATIO,
        SetShape,
        chain_rows,
        close_reach,
        linked_rows,
        linked_share,
        sections_share,
    )

    n_q = 60
    q, cdoc, pred, dtok = _random_candidates(11, 40, n_q, 12)
    for gap in (0, 1):
        every, chain = close_reach(q, cdoc, pred, dtok[cdoc], n_q + 1, gap=gap)  # the last question: no candidates
        member = chain_rows(q, cdoc, pred, n_q + 1, gap=gap)  # each candidate: is its document in the chain
        linked = linked_rows(q, cdoc, pred, n_q + 1, CLOSE_RATIO, gap)  # each question: does the chain hold two
        for qi in range(n_q):
            r = np.flatnonzero(q == qi)
            best_row = r[np.argmax(pred[r])]
            best = {int(dd): pred[r][cdoc[r] == dd].max() for dd in np.unique(cdoc[r])}
            close = {dd for dd, v in best.items() if v >= CLOSE_RATIO * pred[best_row]}
            run, lo, hi = {int(cdoc[best_row])}, int(cdoc[best_row]), int(cdoc[best_row])
            while any(lo - k in close for k in range(1, gap + 2)):
                lo = max(lo - k for k in range(1, gap + 2) if lo - k in close)
                run.add(lo)
            while any(hi + k in close for k in range(1, gap + 2)):
                hi = min(hi + k for k in range(1, gap + 2) if hi + k in close)
                run.add(hi)
            assert every[qi] == pytest.approx(sum(dtok[x] for x in close)), qi
            assert chain[qi] == pytest.approx(sum(dtok[x] for x in run)), (qi, gap)
            assert member[r].tolist() == [int(dd) in run for dd in cdoc[r]], (qi, gap)
            assert linked[qi] == (len(run) > 1), (qi, gap)
        assert every[n_q] == chain[n_q] == 0 and not linked[n_q]
        has = np.r_[np.ones(n_q), 0.0]
        assert linked_share(SetShape(has, has > 0, has, has, linked)) == pytest.approx(linked[:n_q].mean())
    # three sections of one source (documents 3, 4, 5) beside a competing document far away (20)
    q1, d1, p1, t1 = np.zeros(4, int), np.array([3, 4, 5, 20]), np.array([0.9, 0.5, 0.3, 0.8]), np.array([10.0, 20, 30, 40])
    assert close_reach(q1, d1, p1, t1, 1) == (100.0, 60.0)
    assert close_reach(q1, d1, p1, t1, 1, ratio=0.5) == (70.0, 30.0)  # 0.3 < 0.45: the chain stops at 4
    assert close_reach(q1, np.array([3, 7, 11, 20]), p1, t1, 1)[1] == 10.0  # shuffled: the best document alone
    assert close_reach(q1, np.array([3, 5, 11, 20]), p1, t1, 1, gap=1)[1] == 30.0  # one gap: 3 and 5 chain
    # linked at the chain's defaults (any candidate document, one gap): a low-scored section still links
    assert linked_rows(q1, np.array([3, 5, 11, 20]), np.array([0.9, 0.01, 0.3, 0.8]), 1).tolist() == [True]
    assert linked_rows(q1, np.array([3, 7, 11, 20]), p1, 1).tolist() == [False]  # shuffled: it stands alone
    assert linked_share(SetShape(t1, t1 > 0, t1, t1)) == 0.0  # not computed
    d = np.array([10.0, 10, 10, 10])
    assert sections_share(SetShape(d, d > 0, d + [5, 5, 5, 0], d + [5, 5, 0, 0])) == pytest.approx(2 / 3)
    assert sections_share(SetShape(d, d > 0, d, d)) == 0.0  # no question with several close documents


def test_owned_reach_against_a_loop():
    """set_shape.owned_reach: the documents a question owns (predicted >= OWN_RATIO x its best, and no other
    question predicts them higher), against a loop on random candidates; owned_share counts the questions that own
    two or more; fits_target reads each question's owned documents where the corpus order shows nothing and the
    questions own several (owned_sections), and the best documents where they do not (stands_alone)."""
    from mogg.run.budget.selector.set_shape import (
        ALONE_EXCESS,
        OWN_RATIO,
        SetShape,
        fits_target,
        owned_reach,
        owned_sections,
        owned_share,
        stands_alone,
    )

    n_q = 40
    q, cdoc, pred, dtok = _random_candidates(3, 50, n_q, 10)
    tok, n = owned_reach(q, cdoc, pred, dtok[cdoc], n_q + 1)  # the last question: no candidates
    best_of = {}  # (question, document) -> its best prediction
    for qi, dd, p in zip(q, cdoc, pred):
        best_of[(int(qi), int(dd))] = max(p, best_of.get((int(qi), int(dd)), -1.0))
    for qi in range(n_q):
        mine = {dd: v for (qq, dd), v in best_of.items() if qq == qi}
        top = max(mine.values())
        own = [dd for dd, v in mine.items() if v >= OWN_RATIO * top
               and all(v >= w for (qq, d2), w in best_of.items() if d2 == dd)]
        assert n[qi] == len(own) and tok[qi] == pytest.approx(sum(dtok[x] for x in own)), qi
    assert tok[n_q] == n[n_q] == 0
    # two questions: q0 owns documents 1 and 2 (3 is q1's: it predicts it higher); q1 owns 3 alone
    q2, d2, p2 = np.array([0, 0, 0, 1, 1]), np.array([1, 2, 3, 3, 4]), np.array([0.9, 0.6, 0.7, 0.8, 0.1])
    assert [x.tolist() for x in owned_reach(q2, d2, p2, np.array([10.0, 20, 30, 30, 40]), 2)] == [[30.0, 30.0], [2, 1]]
    # the decision and the floor: five questions, best documents of 100 tokens, owned 100-300
    d, ones = np.full(5, 100.0), np.ones(5, bool)
    owned, owns = np.array([100.0, 300, 300, 200, 100]), np.array([1, 3, 3, 2, 1])
    apart = SetShape(d, ones, d + 300, d, np.zeros(5, bool), 0.0, None, owned, owns)  # no neighbours: unordered
    assert owned_share(apart) == pytest.approx(0.6) and owned_sections(apart) and not stands_alone(apart)
    assert fits_target(apart, 512) == 200.0 and fits_target(apart, 128) == 128.0  # the owned documents' median
    one = apart._replace(owns=np.array([1, 2, 1, 1, 1]))  # 1 of 5 owns several (MedMCQA 0.17-0.19)
    assert not owned_sections(one) and stands_alone(one) and fits_target(one, 512) == 100.0
    # ordered (neighbours far above chance): the corpus order decides, not the owned documents
    linked = apart._replace(linked=np.ones(5, bool))
    assert 1.0 - 0.0 >= ALONE_EXCESS and not owned_sections(linked) and fits_target(linked, 512) == 100.0
    assert owned_share(SetShape(d, ones, d, d)) == 0.0  # not computed


def test_the_chance_of_a_neighbour_is_a_shuffled_corpus_s():
    """set_shape.chance_linked: the linked share (linked_rows) of the same candidates in permuted corpora; a set
    of sections beside each other links far above it, one of documents scattered in the corpus at it, and
    stands_alone tells the two apart (the whole_documents shape carries both)."""
    from mogg.run.budget.selector.set_shape import (
        chance_linked,
        linked_rows,
        owned_sections,
        stands_alone,
        whole_documents,
    )

    rng = np.random.default_rng(5)
    n_q, n_docs, per = 300, 4000, 6
    q = np.repeat(np.arange(n_q), per)
    pred = rng.random(len(q))
    start = rng.integers(0, n_docs - per, n_q)
    sections = (start[:, None] + np.arange(per)).ravel()  # each question's candidates: one source's sections
    scattered = rng.choice(n_docs, size=len(q))  # ... documents anywhere in the corpus
    assert linked_rows(q, sections, pred, n_q).all()
    chance = chance_linked(q, sections, pred, n_q, n_docs, seed=0)
    assert chance == chance_linked(q, sections, pred, n_q, n_docs, seed=0) < 0.05  # seeded; 4 x 5 / 4000 a question
    assert abs(chance_linked(q, scattered, pred, n_q, n_docs) - linked_rows(q, scattered, pred, n_q).mean()) < 0.03
    assert chance_linked(q[:0], sections[:0], pred[:0], n_q, n_docs) == 0.0
    # whole_documents: one unit a document of 40 tokens (blocks cover them: whole short documents); scattered
    # documents stand alone where each question has one clear best (the others under OWN_RATIO of it), and not
    # where each owns several close ones (owned_sections: a source's sections written in another order)
    tok = np.full(n_docs, 40.0)
    one_best = np.where(np.arange(len(q)) % per == 0, 1.0, 0.4 * pred)
    for cand_doc, p, alone, owned in ((sections, pred, False, False), (scattered, one_best, True, False),
                                      (scattered, 0.5 + 0.5 * pred, False, True)):
        shape = whole_documents(q, cand_doc, np.arange(n_docs), tok[cand_doc], p, tok[cand_doc], n_q)
        assert shape.chance is not None and stands_alone(shape) is alone and owned_sections(shape) is owned


def _adaptations_script():
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "transfer_adaptations.py"
    spec = importlib.util.spec_from_file_location("transfer_adaptations", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up there
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod, path


def test_the_script_splits_are_the_heldout_configs_and_train_also_never_shares_texts():
    """scripts/transfer_adaptations.py reads each shape's training shapes from conf/heldout (one source);
    --train-also adds a shape only where its questions' raw file is not the held-out shape's."""
    mod, _ = _adaptations_script()
    base = mod.splits_of([])
    assert base["snippets"] == ("medmcqa", "covidqa", "pages", "medmcqa_long")
    assert base["medmcqa_sentences"] == base["medmcqa_long"] == ("pubmedqa", "covidqa")
    more = mod.splits_of([], ("snippets", "medmcqa_sentences"))
    assert "snippets" not in more["pubmedqa"] and "medmcqa_sentences" in more["pubmedqa"]
    assert "medmcqa_sentences" not in more["medmcqa"] + more["pages"] and "snippets" in more["medmcqa"]
    assert {"snippets", "medmcqa_sentences"} <= set(more["covidqa"]) and "snippets" not in more["snippets"]
    assert all(base[h] == more[h][: len(base[h])] for h in base)
    # the second snippet shape (PubMedQA-L's other half) shares no raw file with PubMedQA* or the stand-in
    assert base["snippets_l"] == base["snippets"] and "snippets_l" not in base["pubmedqa"] + base["snippets"]
    twin = mod.splits_of([], ("snippets_l",))
    assert "snippets_l" in twin["snippets"] + twin["pubmedqa"] and twin["snippets_l"] == base["snippets_l"]
    with pytest.raises(ValueError, match="not among the shapes"):
        mod.splits_of([], ("nonsense",))


def test_only_takes_adaptation_names_that_hold_commas():
    """``scripts/transfer_adaptations.py --only`` split on every comma, so no name holding one
    ("within_question, E median") could be asked for: the longest run of pieces naming one is taken."""
    mod, path = _adaptations_script()
    assert mod.only_names("raw,within_question") == (["raw", "within_question"], [])
    assert mod.only_names("within_question, E median,raw, lambda fits,within_question") == (
        ["within_question, E median", "raw, lambda fits", "within_question"], [])
    assert mod.only_names("raw,nonsense") == (["raw"], ["nonsense"])
    assert mod.only_names("") == (list(mod.ADAPTATIONS), [])
    import re  # every --only the docs give names adaptations the script has
    docs = (path.parents[1] / "docs" / "results.md").read_text()
    asked = re.findall(r'transfer_adaptations\.py [^\n]*--only "([^"]+)"', docs)
    assert len(asked) >= 5
    for only in asked:
        assert mod.only_names(only)[1] == [], only
    known = {f.stem for f in mod.HELDOUT.glob("*.yaml")}  # and every --shapes names held-out shapes
    shapes = re.findall(r"transfer_adaptations\.py [^\n]*--shapes (\S+)", docs)
    assert shapes and all(set(x.split(",")) <= known for x in shapes), shapes


def test_shapes_refuses_an_unknown_shape_before_preparing_any(monkeypatch):
    """``--shapes`` names held-out shapes (conf/heldout); a wrong one is refused before the minutes of
    preparing every shape."""
    mod, _ = _adaptations_script()
    monkeypatch.setattr(mod, "load_shapes", lambda *a, **k: pytest.fail("prepared shapes before refusing"))
    with pytest.raises(SystemExit) as e:
        mod.main(["--shapes", "snippets,nonsense", "--only", "raw"])
    assert e.value.code == 2


def test_reorder_hands_each_question_its_own_values_in_the_scores_order():
    from mogg.run.budget.selector.adapt import reorder

    rng = np.random.default_rng(5)
    q = np.sort(rng.integers(0, 30, 400))
    pred, score = rng.random(len(q)), rng.random(len(q))
    score = np.round(score, 1)  # ties: pred's order decides
    got = reorder(pred, q, score)
    for qi in np.unique(q):  # against a loop: the k-th best by (score, pred) gets the k-th largest pred
        r = np.flatnonzero(q == qi)
        by_score = r[np.lexsort((np.arange(len(r)), -pred[r], -score[r]))]
        np.testing.assert_array_equal(got[by_score], np.sort(pred[r])[::-1])
    np.testing.assert_array_equal(reorder(pred, q, pred), pred)  # its own order: unchanged


def test_self_trained_reorders_a_transfer_directorys_ranking_only_where_asked(caplog):
    """self_training.self_trained: the values stay the question's own (the price of a token keeps its
    scale), the order is the refit's; nothing moves in-set, below transfer_self_train questions, or
    for a directory written before the knob."""
    from types import SimpleNamespace

    from mogg.run.budget.selector.adapt import reorder
    from mogg.run.budget.selector.kind import EvidenceSelectorKind
    from mogg.run.budget.selector.self_training import self_trained

    rng = np.random.default_rng(0)
    n_q, per = 200, 6
    q = np.repeat(np.arange(n_q), per)
    signal = rng.normal(size=len(q))
    x = np.stack([signal, rng.normal(size=len(q))], axis=1)
    pred = np.exp(signal + rng.normal(0, 1.0, len(q)))  # right, noisily, on a density scale

    def directory(settings, transfer=True):
        return SimpleNamespace(deploy={"settings": settings, "fit": {"seed": 3}}, transfer=transfer)

    got = self_trained(directory({"transfer_self_train": 50}), EvidenceSelectorKind, x, pred, q, n_q)
    np.testing.assert_array_equal(got, reorder(pred, q, self_train(x, q, n_q, pred, seed=3)))
    for qi in range(n_q):
        np.testing.assert_array_equal(np.sort(got[q == qi]), np.sort(pred[q == qi]))
    top = lambda p: np.array([np.argmax(p[q == i]) for i in range(n_q)])  # noqa: E731
    truth = top(signal)
    assert (top(got) == truth).mean() > (top(pred) == truth).mean()  # the refit ranks the signal better
    # under the whole-document scorer: documents in the order of the refit's best candidate in each, the
    # units within one in the transferred order
    doc = np.tile(np.repeat(np.arange(3), 2), n_q)  # 3 documents of 2 candidates per question
    by_doc = self_trained(directory({"transfer_self_train": 50}), EvidenceSelectorKind, x, pred, q, n_q, doc)
    own = self_train(x, q, n_q, pred, seed=3)
    for qi in range(n_q):  # against a loop: the k-th by (its document's best refit score, pred) gets the k-th value
        r = np.flatnonzero(q == qi)
        key = {i: (-max(own[j] for j in r if doc[j] == doc[i]), -pred[i]) for i in r}
        order = sorted(r, key=lambda i: key[i])
        np.testing.assert_array_equal(by_doc[order], np.sort(pred[r])[::-1])
        for d in set(doc[r]):  # inside a document the transferred order
            inside = [i for i in order if doc[i] == d]
            assert np.all(np.diff(pred[inside]) <= 0)
    # rounds (transfer_self_train_rounds): each round's pseudo-labels the previous round's order; a directory
    # without the key (written before it) reads one round; under the whole-document scorer one round
    from mogg.run.budget.selector.self_training import ROUND_SEED

    two = self_trained(directory({"transfer_self_train": 50, "transfer_self_train_rounds": 2}), EvidenceSelectorKind,
                       x, pred, q, n_q)
    np.testing.assert_array_equal(two, reorder(pred, q, self_train(x, q, n_q, got, seed=3 + ROUND_SEED)))
    assert not np.array_equal(two, got)
    np.testing.assert_array_equal(self_trained(directory({"transfer_self_train": 50, "transfer_self_train_rounds": 1}),
                                               EvidenceSelectorKind, x, pred, q, n_q), got)
    np.testing.assert_array_equal(self_trained(directory({"transfer_self_train": 50, "transfer_self_train_rounds": 3}),
                                               EvidenceSelectorKind, x, pred, q, n_q, doc), by_doc)
    for dep in (directory({"transfer_self_train": None}), directory({"transfer_self_train": n_q + 1}),
                directory({}), directory({"transfer_self_train": 1}, transfer=False)):
        assert self_trained(dep, EvidenceSelectorKind, x, pred, q, n_q) is pred


def test_agreement_is_reciprocal_rank_fusion_question_by_question():
    """adapt.agreement (the columns' agreement as the refit's pseudo-labels; measured, not deployed)
    against a loop: within each question, sum over the columns of 1 / (60 + the candidate's rank),
    ties ranked in row order."""
    from mogg.run.budget.selector.adapt import RRF_K, agreement

    x, q, n_q = _toy(seed=3, f=4)
    x = np.nan_to_num(x)
    names = ["match", "bm25", "other", "cosine"]
    extra = np.random.default_rng(1).normal(size=len(q))
    got = agreement(x, names, q, extra)
    want = np.zeros(len(q))
    for qi in range(n_q):
        rows = np.flatnonzero(q == qi)
        for v in [x[rows, 0], x[rows, 1], x[rows, 3], extra[rows]]:  # "vote" is absent: skipped
            order = sorted(range(len(rows)), key=lambda i: (-v[i], i))
            for r, i in enumerate(order):
                want[rows[i]] += 1.0 / (RRF_K + r)
    np.testing.assert_allclose(got, want)
    assert not np.allclose(agreement(x, names, q), got)  # extra is one more voter
    with pytest.raises(ValueError, match="none of"):
        agreement(x, ["a", "b", "c", "d"], q)


def test_the_options_vote_fuses_the_order_with_the_options_words_question_by_question():
    """adapt.options_vote against a loop: within each question with options, the candidates ordered by
    1 / (60 + rank by pred) + 1 / (60 + rank by the options' share), ties by pred, each question keeping its own
    values; with documents, each document read whole, in the order of its best fused candidate; a question without
    options (NaN) keeps its order, and a set without any is returned as it is."""
    from mogg.run.budget.selector.adapt import RRF_K, options_vote

    rng = np.random.default_rng(11)
    q = np.sort(rng.integers(0, 25, 300))
    doc = rng.integers(0, 6, len(q))
    pred, opt = rng.random(len(q)), np.round(rng.random(len(q)), 1)  # ties among the options' shares
    opt[np.isin(q, [0, 3, 7])] = np.nan  # three questions without options
    for d in (None, doc):
        got = options_vote(pred, q, opt, d)
        for qi in np.unique(q):
            r = np.flatnonzero(q == qi)
            np.testing.assert_array_equal(np.sort(got[r]), np.sort(pred[r]))  # the question's own values
            if np.isnan(opt[r]).all():
                np.testing.assert_array_equal(got[r], pred[r])
                continue
            fused = np.zeros(len(r))
            for v in (pred[r], opt[r]):
                for k, i in enumerate(sorted(range(len(r)), key=lambda i: (-v[i], i))):
                    fused[i] += 1.0 / (RRF_K + k)
            if d is not None:  # a document's rows all take its best
                fused = np.array([fused[d[r] == d[r][i]].max() for i in range(len(r))])
            want = sorted(range(len(r)), key=lambda i: (-fused[i], -pred[r][i], i))
            np.testing.assert_array_equal(got[r][want], np.sort(pred[r])[::-1])
    assert not np.array_equal(options_vote(pred, q, opt), pred)  # the vote moves some question
    none = np.full(len(q), np.nan)
    assert options_vote(pred, q, none) is pred and options_vote(pred, q, none, doc) is pred


def test_the_refit_s_pseudo_labels_come_from_the_voted_order_where_options_vote():
    """self_training.self_trained with ``options`` (the answer options' vote, transfer_options_vote): each round's
    pseudo-labels are drawn from that round's order with the options' vote (adapt.options_vote over the candidates),
    under either scorer; the values stay the question's own; without options it reads as before."""
    from types import SimpleNamespace

    from mogg.run.budget.selector.adapt import document_best, options_vote, reorder
    from mogg.run.budget.selector.kind import EvidenceSelectorKind
    from mogg.run.budget.selector.self_training import ROUND_SEED, self_trained

    rng = np.random.default_rng(4)
    n_q, per = 120, 6
    q = np.repeat(np.arange(n_q), per)
    x = rng.normal(size=(len(q), 3))
    pred, opt = rng.random(len(q)), rng.random(len(q))
    d = SimpleNamespace(deploy={"settings": {"transfer_self_train": 50, "transfer_self_train_rounds": 2},
                                "fit": {"seed": 3}}, transfer=True)
    got = self_trained(d, EvidenceSelectorKind, x, pred, q, n_q, options=opt)
    once = reorder(pred, q, self_train(x, q, n_q, options_vote(pred, q, opt), seed=3))
    np.testing.assert_array_equal(got, reorder(pred, q, self_train(x, q, n_q, options_vote(once, q, opt),
                                                                   seed=3 + ROUND_SEED)))
    assert not np.array_equal(got, self_trained(d, EvidenceSelectorKind, x, pred, q, n_q))  # the vote moved it
    doc = np.tile(np.repeat(np.arange(3), 2), n_q)  # the whole-document scorer: one round, the documents' order
    by_doc = self_trained(d, EvidenceSelectorKind, x, pred, q, n_q, doc, opt)
    own = self_train(x, q, n_q, options_vote(pred, q, opt), seed=3)
    np.testing.assert_array_equal(by_doc, reorder(pred, q, document_best(own, q, doc)))
    np.testing.assert_array_equal(self_trained(d, EvidenceSelectorKind, x, pred, q, n_q, options=np.full(len(q), np.nan)),
                                  self_trained(d, EvidenceSelectorKind, x, pred, q, n_q))  # nothing votes


def test_a_fixed_answer_set_never_votes():
    """adapt.fixed_answers: options shared (case and spacing aside) by at least half of a set's questions with
    options, and two or more, are a fixed answer set (PubMedQA's yes / no / maybe): voting_options reads them as
    NaN, and a question's own options as they are."""
    from mogg.run.budget.selector.adapt import fixed_answers, voting_options

    yn = ["yes no maybe", "Yes  no maybe", "yes no maybe", "aspirin heparin warfarin", ""]
    assert fixed_answers(yn).tolist() == [True, True, True, False, False]
    assert fixed_answers(["a b", "c d", "a b", "e f"]).tolist() == [True, False, True, False]  # half of four
    assert fixed_answers(["a b", "c d", "a b", "e f", "g h"]).tolist() == [False] * 5  # two of five
    assert fixed_answers(["yes no"]).tolist() == [False]  # one question: nothing shared
    assert fixed_answers(["", ""]).tolist() == [False, False] and fixed_answers([]).tolist() == []
    q = np.array([0, 0, 1, 3, 3, 4])
    got = voting_options(np.array([0.1, 0.2, 0.3, 0.4, 0.5, np.nan]), q, yn)
    np.testing.assert_array_equal(got, [np.nan, np.nan, np.nan, 0.4, 0.5, np.nan])
    assert voting_options(np.ones(6), q, None) is None  # no option texts given: nothing votes
    # one question with options (routed alone): nothing to tell a fixed answer set by, so it never votes
    assert np.isnan(voting_options(np.ones(3), np.array([0, 0, 1]), ["yes no maybe", ""])).all()
    assert not np.isnan(voting_options(np.ones(3), np.array([0, 0, 1]), ["a b", "c d"])).any()


def test_rank_within_matches_a_per_question_sort():
    """adapt.rank_within (the one rank the within-question view, self-training and the agreement share)
    against a plain per-question stable sort: best first, ties in row order, NaN last."""
    from mogg.run.budget.selector.adapt import rank_within

    rng = np.random.default_rng(0)
    q = rng.integers(0, 7, 200)
    v = rng.integers(0, 5, 200).astype(float)  # ties on purpose
    v[rng.random(200) < 0.1] = np.nan
    got = rank_within(v, q)
    for g in np.unique(q):
        rows = np.flatnonzero(q == g)
        key = np.where(np.isnan(v[rows]), np.inf, -v[rows])
        want = np.empty(len(rows))
        want[np.argsort(key, kind="stable")] = np.arange(len(rows))
        assert np.array_equal(got[rows], want)


def test_chain_first_reads_the_best_source_sections_before_another_source():
    """Where the set is sections of sources (sections_share >= SECTIONS_SHARE), each question's documents
    beside its best one in corpus order come first (each part in the predictions' document order, the values
    handed out again: the price keeps its scale); elsewhere, or on a shuffled corpus, the order is pred's."""
    from mogg.run.budget.selector.set_shape import SetShape, chain_first

    # question 0: sections 3, 4, 5 of one source (4 and 5 scored low) and a competing document 20 scored second;
    # question 1: one document
    q = np.array([0, 0, 0, 0, 0, 1])
    doc = np.array([3, 4, 4, 5, 20, 7])
    pred = np.array([0.9, 0.2, 0.15, 0.1, 0.8, 0.5])
    d = np.array([10.0, 10.0])
    sections = SetShape(d, d > 0, d + 5, d + 5)  # every question with several close documents chains them
    out = chain_first(pred, q, doc, 2, sections)
    assert out.tolist() == [0.9, 0.8, 0.2, 0.15, 0.1, 0.5]  # 3, then 4's units (in their order), 5, then 20
    assert sorted(out[q == 0]) == sorted(pred[q == 0])
    assert np.array_equal(chain_first(pred, q, doc, 2, SetShape(d, d > 0, d + 5, d)), pred)  # not sections: as is
    assert np.array_equal(chain_first(pred, q, np.array([3, 9, 9, 14, 20, 7]), 2, sections), pred)  # shuffled
    # close at a quarter: section 4 (0.2 < 0.225) breaks the chain, the best document alone comes first
    assert np.array_equal(chain_first(pred, q, doc, 2, sections, ratio=0.25), pred)
    assert chain_first(pred, q, np.array([3, 5, 5, 6, 20, 7]), 2, sections, gap=0).tolist() == pred.tolist()
    assert chain_first(pred, q, np.array([3, 5, 5, 6, 20, 7]), 2, sections, gap=1).tolist() == out.tolist()


def test_owned_first_reads_the_documents_a_question_owns_before_another_question_s():
    """Where the corpus order shows nothing and the questions own several documents (owned_sections), each question
    reads first the close documents it owns (no other question predicts them higher), each part by its documents'
    best candidate, the values handed out again; elsewhere the order is pred's."""
    from mogg.run.budget.selector.set_shape import SetShape, owned_first, owned_rows

    # question 0: its documents 3 (0.9), 9 (0.3) and 14 (0.35), and 20 (0.8), which question 1 predicts higher (0.95)
    q = np.array([0, 0, 0, 0, 0, 1])
    doc = np.array([3, 9, 9, 14, 20, 20])
    pred = np.array([0.9, 0.3, 0.1, 0.35, 0.8, 0.95])
    assert owned_rows(q, doc, pred, 2).tolist() == [True, True, True, True, False, True]
    assert owned_rows(q, doc, pred, 2, ratio=0.5).tolist() == [True, False, False, False, False, True]
    d, linked = np.array([10.0, 10.0]), np.zeros(2, bool)
    owned = SetShape(d, d > 0, d + 5, d, linked, 0.0, None, d + 5, np.array([2, 2]))  # unordered, both own two
    out = owned_first(pred, q, doc, 2, owned)
    assert out.tolist() == [0.9, 0.35, 0.3, 0.8, 0.1, 0.95]  # 3, 14, 9's two units, then 20 (question 1's)
    assert sorted(out[q == 0]) == sorted(pred[q == 0])
    assert np.array_equal(owned_first(pred, q, doc, 2, owned._replace(owns=np.array([1, 1]))), pred)  # one each
    assert np.array_equal(owned_first(pred, q, doc, 2, owned._replace(linked=np.ones(2, bool))), pred)  # ordered


def test_chain_evidence_is_e_bounded_by_the_chain_against_a_loop():
    """set_shape.chain_evidence: each question's E at most the tokens of its candidate documents chained to its
    best-scored one in corpus order (every candidate document, at most CHAIN_GAP documents missing between two),
    against a loop; sources_sections: only whole short documents whose close documents neighbour."""
    from mogg.run.budget.selector.set_shape import CHAIN_GAP, SetShape, chain_evidence, sources_sections

    rng = np.random.default_rng(5)
    n_q, per = 12, 7
    q = np.repeat(np.arange(n_q), per)
    cand_doc = (np.arange(n_q)[:, None] * 40 + np.cumsum(rng.integers(0, 4, (n_q, per)), axis=1)).ravel()
    tok_of_doc = rng.integers(10, 90, int(cand_doc.max()) + 1).astype(float)
    pred = rng.uniform(0.05, 0.9, len(q))
    e = rng.uniform(20, 200, n_q)
    got = chain_evidence(e, q, cand_doc, pred, tok_of_doc[cand_doc], n_q)
    bound = []
    for qi in range(n_q):
        rows = np.flatnonzero(q == qi)
        best = cand_doc[rows[np.argmax(pred[rows])]]
        docs = sorted(set(cand_doc[rows].tolist()))
        chain = {best}
        for d in docs[docs.index(best) + 1:]:  # upward while no more than CHAIN_GAP documents are missing
            if d - max(chain) > CHAIN_GAP + 1:
                break
            chain.add(d)
        for d in reversed(docs[:docs.index(best)]):
            if min(chain) - d > CHAIN_GAP + 1:
                break
            chain.add(d)
        bound.append(sum(tok_of_doc[d] for d in chain))
    np.testing.assert_allclose(got, np.minimum(e, bound))
    assert (got < e).any() and (got == e).any()  # binding on some questions only
    np.testing.assert_allclose(chain_evidence(30.0, q, cand_doc, pred, tok_of_doc[cand_doc], n_q),
                               np.minimum(30.0, bound))  # one number: per question
    assert chain_evidence(e[:0], q[:0], cand_doc[:0], pred[:0], pred[:0], 0).shape == (0,)
    d = np.full(4, 50.0)
    sections = SetShape(d, d > 0, d + 20, d + 20)  # several close documents, chained to the best
    assert sources_sections(sections)
    assert not sources_sections(sections._replace(chain=d))  # close documents anywhere (competing explanations)
    assert not sources_sections(sections._replace(covered=d < 0))  # not whole short documents (a page, a paper)


def test_neighbour_sum_against_a_loop_in_any_row_order():
    """neighbour_sum: each candidate's sum of the predictions of its question's candidates on the unit just before
    and just after it in the same document, whatever order the rows come in."""
    from mogg.run.budget.selector.set_shape import neighbour_sum

    rng = np.random.default_rng(3)
    n_units = 60
    unit_doc = np.repeat(np.arange(6), 10)  # six documents of ten units
    rows = [(q, u) for q in range(5) for u in sorted(rng.choice(n_units, 18, replace=False))]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    q = np.array([r[0] for r in rows])
    unit = np.array([r[1] for r in rows])
    pred = rng.random(len(rows))
    got = neighbour_sum(pred, q, unit, unit_doc)
    at = {(int(a), int(b)): float(p) for a, b, p in zip(q, unit, pred)}
    for i, (a, b) in enumerate(zip(q, unit)):
        want = sum(at.get((int(a), int(b) + d), 0.0) for d in (-1, 1)
                   if 0 <= b + d < n_units and unit_doc[b + d] == unit_doc[b])
        assert got[i] == pytest.approx(want)
    assert neighbour_sum(pred[:1], q[:1], unit[:1], unit_doc).tolist() == [0.0]


def test_page_order_ranks_a_run_of_matches_above_a_lone_one_on_sections_of_a_page_only():
    """Where the set is sections of a page (page_sections), a sentence whose neighbours match too comes before a
    lone match scored a little higher, the values handed out again (the price keeps its scale); elsewhere (a
    sentence of a long paper, whole documents) the order is pred's."""
    from mogg.run.budget.selector.set_shape import SetShape, page_order, page_sections

    # question 0: unit 2 a lone match (0.6); units 10-12 a run (0.5, 0.45, 0.4) in the same document;
    # unit 20, the next document's first unit, is not unit 12's neighbour
    q = np.array([0, 0, 0, 0, 0])
    unit = np.array([2, 10, 11, 12, 20])
    unit_doc = np.repeat([0, 1], 20)  # units 0-19 one page, 20-39 another
    unit_doc[10:20] = 0
    pred = np.array([0.6, 0.5, 0.45, 0.4, 0.1])
    d = np.array([400.0])
    page = SetShape(d, np.array([False]), d, d, block=np.array([80.0]))  # the best block a fifth of its page
    sentence = page._replace(block=np.array([4.0]))  # ... a hundredth: a sentence of a long paper
    assert page_sections(page) and not page_sections(sentence)
    out = page_order(pred, q, unit, unit_doc, page, weight=0.25)
    # unit 11 (0.45 + 0.9w) first, then 10 (0.5 + 0.45w), 2 (alone: 0.6), 12, 20: the rows get 0.6, 0.5, 0.45, ...
    assert out.tolist() == [0.45, 0.5, 0.6, 0.4, 0.1]
    assert np.array_equal(page_order(pred, q, unit, unit_doc, sentence), pred)
    whole = page._replace(covered=np.array([True]))
    assert np.array_equal(page_order(pred, q, unit, unit_doc, whole), pred)
    assert np.array_equal(page_order(pred, q, unit, unit_doc, page, weight=0.0), pred)


def test_source_positions_put_a_sources_sections_together_and_keep_a_grouped_corpus():
    """A corpus written in another order (shuffled) gets each source's sections ("<id>-<k>", "<id>_<k>") back beside
    each other, at the source's first place and in corpus order within it; a grouped corpus keeps its order (the
    identity), ids without a trailing number are their own source. The chain a shuffled corpus then gives is the
    grouped corpus's (sections of sources: what chain_first reads first, E's bound and the fits floor)."""
    from mogg.ladders.sources import source_positions
    from mogg.run.budget.selector.set_shape import sections_share, source_chain, whole_documents

    ids = ["a-0", "b_1", "a-1", "covidqa:7", "b_0", "x-y", "a-2"]
    np.testing.assert_array_equal(source_positions(ids), [0, 4, 1, 5, 3, 6, 2])  # b_0 before b_1
    grouped = ["12-0", "12-1", "13-0", "medmcqa:9f1c-2d3e-4a5b-0", "medmcqa:9f1c-2d3e-4a5b-1", "page-surgery-0",
               "page-surgery-1", "covidqa:630", "covidqa:650"]
    np.testing.assert_array_equal(source_positions(grouped), np.arange(len(grouped)))
    assert len(source_positions([])) == 0

    # 12 abstracts of 5 sections; each question's candidates its abstract's first 3 sections and another abstract's
    # first section (a competitor, two sections or more from any of them in a grouped corpus: never chained)
    rng = np.random.default_rng(3)
    ids = [f"{s}-{k}" for s in range(12) for k in range(5)]
    rows = [(qi, 5 * qi + k) for qi in range(12) for k in range(3)] + [(qi, 5 * ((qi + 5) % 12)) for qi in range(12)]
    q, doc = (np.array(c) for c in zip(*rows))
    unit, unit_doc = np.arange(len(q)), doc  # one unit per candidate, in its document
    tokens = rng.integers(20, 80, len(q)).astype(float)
    pred = rng.random(len(q))
    pred[3 * 12:] *= 0.3  # the competitor scores lower than the abstract's best section
    perm = rng.permutation(len(ids))  # the corpus written shuffled: document i sits at place perm[i]
    shuffled = [None] * len(ids)
    for i, p in enumerate(perm):
        shuffled[p] = ids[i]
    as_read = {}
    for name, doc_ids, udoc in (("grouped", ids, unit_doc), ("shuffled", shuffled, perm[unit_doc])):
        sd = source_positions(doc_ids)[udoc]  # as Ladder.source_unit_docs reads them
        shape = whole_documents(q, unit, sd, tokens, pred, tokens, 12)
        as_read[name] = (sections_share(shape), source_chain(q, sd[unit], pred, tokens, 12))
    assert as_read["grouped"][0] == as_read["shuffled"][0] > 0.5
    np.testing.assert_array_equal(as_read["grouped"][1], as_read["shuffled"][1])
    raw = whole_documents(q, unit, perm[unit_doc], tokens, pred, tokens, 12)  # read by the shuffled order itself
    assert sections_share(raw) < 0.5


def test_paragraph_first_and_section_evidence_against_a_loop():
    """With the ladder's paragraphs, sections of a page read the best candidate's paragraph first (each question's
    values handed out again), E is that paragraph's tokens, and the fits floor its median over the questions; where
    the set is not sections of a page, or the ladder has no paragraphs, nothing of this applies."""
    from mogg.run.budget.selector.set_shape import (
        PAGE_SHARE,
        SetShape,
        candidate_paragraphs,
        fits_target,
        page_order,
        paragraph_first,
        section_evidence,
    )

    rng = np.random.default_rng(11)
    unit_doc = np.repeat(np.arange(6), 8)  # 6 pages of 8 units
    unit_par = np.cumsum(np.r_[True, (np.diff(unit_doc) > 0) | (rng.random(47) < 0.3)]) - 1  # paragraphs in pages
    unit_tokens = rng.integers(5, 40, 48).astype(float)
    q, u = _candidate_units(rng, 12, 48, 9)
    pred = rng.random(len(q)).round(3)
    starts = np.flatnonzero((np.diff(unit_par) > 0) & (np.diff(unit_doc) == 0)) + 1  # as the ladder keeps them
    paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    assert paras.cand.tolist() == unit_par[u].tolist()
    out = paragraph_first(pred, q, unit_par[u])
    e = section_evidence(q, pred, paras, 13, ratio=None)  # question 12: no candidates; the paragraph alone
    for qi in range(12):
        r = np.flatnonzero(q == qi)
        best = r[np.argmax(pred[r])]
        inside = [x for x in r[np.argsort(-pred[r], kind="stable")] if unit_par[u[x]] == unit_par[u[best]]]
        rest = [x for x in r[np.argsort(-pred[r], kind="stable")] if unit_par[u[x]] != unit_par[u[best]]]
        assert out[inside + rest].tolist() == sorted(pred[r], reverse=True)  # that order gets the values, best first
        assert e[qi] == unit_tokens[unit_par == unit_par[u[best]]].sum()  # the whole paragraph, not its candidates
    assert e[12] == 0
    page = SetShape(np.full(12, 300.0), np.zeros(12, bool), np.full(12, 300.0), np.full(12, 300.0), block=np.full(12, 60.0))
    with pytest.raises(ValueError, match="paragraphs of"):  # paragraphs of other candidates than the predictions'
        page_order(pred[:-1], q[:-1], u[:-1], unit_doc, page, paras=paras)
    assert candidate_paragraphs(None, unit_tokens, u, unit_doc) is None
    # pages that keep no blank lines (one paragraph each, or most of them): the rule before reads there
    assert candidate_paragraphs(np.zeros(0, dtype=np.int64), unit_tokens, u, unit_doc) is None
    mostly = np.array([4])  # one page of six with a second paragraph: still most hold one
    assert candidate_paragraphs(mostly, unit_tokens, u, unit_doc) is None

    d = np.full(13, 300.0)
    d[12] = 0
    page = SetShape(d, np.zeros(13, bool), d, d, block=np.full(13, 60.0))
    sentence = page._replace(block=np.full(13, 1.0))
    assert np.array_equal(page_order(pred, q, u, unit_doc, page, paras=paras, ratio=None), out)
    assert np.array_equal(page_order(pred, q, u, unit_doc, sentence, paras=paras), pred)
    assert fits_target(page, 512, section=e) == float(np.median(e[e > 0]))
    assert fits_target(page, 20, section=e) == 20.0
    assert fits_target(page, 512) == PAGE_SHARE * 300.0  # a ladder without its paragraphs: a share of the page
    assert fits_target(sentence, 512, section=e) is None  # not sections of a page: the training sets' price


def test_paragraph_first_by_its_best_candidates_against_a_loop():
    """``top`` > 1: the paragraph whose ``top`` best candidates' predictions (negatives as 0) sum highest comes first
    (ties: the best-scored candidate's), each question keeping its values; ``top`` 1 is the best candidate's."""
    from mogg.run.budget.selector.set_shape import paragraph_first, paragraph_scores

    rng = np.random.default_rng(5)
    q = np.repeat(np.arange(40), rng.integers(1, 12, 40))
    para = rng.integers(0, 4, len(q))
    pred = rng.normal(0.2, 0.3, len(q)).round(2)  # ties and negatives both occur
    for top in (1, 2, 3):
        out = paragraph_first(pred, q, para, top)
        for qi in range(40):
            r = np.flatnonzero(q == qi)
            sums = {p: sum(sorted(np.maximum(pred[r][para[r] == p], 0), reverse=True)[:top]) for p in set(para[r])}
            if top == 1:
                sums = {p: pred[r][para[r] == p].max() for p in sums}
            best_pred = {p: pred[r][para[r] == p].max() for p in sums}
            chosen = max(sums, key=lambda p: (round(sums[p], 9), best_pred[p], -np.flatnonzero(
                (para[r] == p) & (pred[r] == best_pred[p]))[0]))
            by = r[np.argsort(-pred[r], kind="stable")]
            order = [x for x in by if para[x] == chosen] + [x for x in by if para[x] != chosen]
            assert out[order].tolist() == sorted(pred[r], reverse=True)
            if top > 1:
                got = paragraph_scores(pred, q, para, top)[r]
                assert np.allclose(got, [sums[p] for p in para[r]])
    assert np.array_equal(paragraph_first(pred, q, para), paragraph_first(pred, q, para, 1))


def test_section_rows_against_a_loop():
    """A section over several paragraphs (``ratio``): the best candidate's paragraph and the paragraphs beside it in
    its page (the next id, the same document) whose best candidate predicts at least ``ratio`` of the question's best,
    chained while they do; a paragraph without candidates, or another page, ends the run. E is the run's paragraphs'
    tokens; the run's candidates are read first; and E read on the reordered predictions is the same run (the run's
    rows only gain values, the others only lose them). ``ratio`` None: the best paragraph alone, as before."""
    from mogg.run.budget.selector.set_shape import (
        candidate_paragraphs,
        paragraph_first,
        section_evidence,
        section_rows,
    )

    rng = np.random.default_rng(17)
    unit_doc, unit_par, unit_tokens, starts = _paged_units(rng, 8, 10, 0.35)  # 8 pages of 10 units
    q, u = _candidate_units(rng, 30, 80, 14)
    pred = rng.normal(0.4, 0.3, len(q)).round(2)  # ties and negatives both occur
    paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    assert paras.doc.tolist() == unit_doc[u].tolist()
    assert np.array_equal(section_rows(pred, q, paras, 1, None), unit_par[u] == unit_par[u][[
        np.flatnonzero(q == qi)[np.argmax(pred[q == qi])] for qi in q]])
    best_of = {qi: np.flatnonzero(q == qi)[np.argmax(pred[q == qi])] for qi in range(30)}
    for ratio, owned in ((0.25, False), (0.5, False), (0.75, False), (0.25, True), (0.5, True)):
        inside = section_rows(pred, q, paras, 1, ratio, owned)
        e = section_evidence(q, pred, paras, 31, ratio, owned)  # question 30: no candidates
        out = paragraph_first(pred, q, unit_par[u], 1, paras, ratio, owned)
        for qi in range(30):
            r = np.flatnonzero(q == qi)
            best = best_of[qi]
            top = pred[best]
            par_best = {int(p): pred[r][unit_par[u[r]] == p].max() for p in set(unit_par[u[r]].tolist())}
            shared = sum(unit_doc[u[b]] == unit_doc[u[best]] for b in best_of.values()) >= 2
            run = {int(unit_par[u[best]])}
            for step in (-1, 1):  # walk out of the best paragraph both ways while the next one joins the run
                p = int(unit_par[u[best]]) + step
                while (p in par_best and unit_doc[unit_par == p][0] == unit_doc[u[best]] and top > 0
                       and par_best[p] >= ratio * top
                       and (not owned or (shared and par_best[p] >= pred[unit_par[u] == p].max()))):
                    run.add(p)
                    p += step
            assert inside[r].tolist() == [int(unit_par[u[x]]) in run for x in r], (qi, ratio, owned)
            assert e[qi] == sum(unit_tokens[unit_par == p].sum() for p in run)
            by = r[np.argsort(-pred[r], kind="stable")]
            order = [x for x in by if inside[x]] + [x for x in by if not inside[x]]
            assert out[order].tolist() == sorted(pred[r], reverse=True)
        assert e[30] == 0
        assert np.array_equal(section_evidence(q, out, paras, 31, ratio, owned), e)  # read on page_order's output

    # by hand: page 0 (paragraphs 0-3) holds two questions' best paragraphs, page 1 (paragraphs 4-5) one's. Question 0
    # owns paragraph 1 beside its best (question 1 predicts it lower): its section is 0-1; question 1's is 2-3 (it
    # owns 2, its best is 3); question 2, alone on page 1, reads its best paragraph only, unless ownership is not asked
    pid = np.array([0, 1, 3, 2, 1, 4, 5])
    doc = np.array([0, 0, 0, 0, 0, 1, 1])
    hq = np.array([0, 0, 1, 1, 1, 2, 2])
    hp = np.array([0.9, 0.5, 0.8, 0.6, 0.4, 0.7, 0.6])
    tok = np.array([10.0, 20, 40, 30, 20, 50, 60])
    hand = type(paras)(pid, tok, np.array([4, 4, 4, 4, 4, 2, 2]), doc)
    assert section_rows(hp, hq, hand, 1, 0.0).tolist() == [True, True, True, True, False, True, False]
    assert section_evidence(hq, hp, hand, 3, 0.0).tolist() == [30.0, 70.0, 50.0]
    assert section_evidence(hq, hp, hand, 3, 0.0, owned=False).tolist() == [30.0, 90.0, 110.0]  # q1: 1-3 (not owned)
    assert section_evidence(hq, hp, hand, 3, 0.8).tolist() == [10.0, 40.0, 50.0]  # 0.5 < 0.8 * 0.9; 0.6 < 0.8 * 0.8
    assert section_evidence(hq, hp, hand, 3).tolist() == [30.0, 70.0, 50.0]  # the deployed ratio (SECTION_RATIO)


def test_section_density_against_a_loop():
    """On sections of a page the plans' estimated F1 reads each candidate of its question's section (section_rows) as
    likely as the question's best, and every other candidate at its own prediction; the ranking is not touched. Read
    on page_order's output (the section first), the section holds the question's best, so the section's rows take it."""
    from mogg.run.budget.selector.set_shape import candidate_paragraphs, paragraph_first, section_density, section_rows

    rng = np.random.default_rng(23)
    unit_doc, unit_par, unit_tokens, starts = _paged_units(rng, 6, 12, 0.3)  # 6 pages of 12 units
    q, u = _candidate_units(rng, 25, 72, 12)
    pred = rng.normal(0.4, 0.3, len(q)).round(2)
    paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    for ratio, owned in ((None, True), (0.0, True), (0.5, False)):
        for p in (pred, paragraph_first(pred, q, unit_par[u], 1, paras, ratio, owned)):
            dens = section_density(p, q, paras, ratio, owned)
            inside = section_rows(p, q, paras, 1, ratio, owned)
            for qi in range(25):
                r = np.flatnonzero(q == qi)
                want = np.where(inside[r], p[r].max(), p[r])
                assert dens[r].tolist() == want.tolist(), (qi, ratio, owned)
                assert dens[r][p[r].argmax()] == p[r].max()  # the best keeps its own
            assert (dens >= p).all() and (dens[~inside] == p[~inside]).all()
    assert section_density(np.zeros(0), np.zeros(0, dtype=np.int64), paras).shape == (0,)


def test_short_first_against_a_loop():
    """Where a question's section is longer than the budget, its best paragraph's candidates come first, shortest first
    (ties: the prediction's order), then the rest of its section, then the rest, each in the prediction's order; every
    other question keeps the prediction's order, and every question its values. The F1 estimate's densities
    (section_density) are the same on either order, so only the ranking moves."""
    from mogg.run.budget.selector.set_shape import (
        candidate_paragraphs,
        paragraph_first,
        section_density,
        section_evidence,
        section_rows,
        short_first,
    )

    rng = np.random.default_rng(29)
    unit_doc, unit_par, unit_tokens, starts = _paged_units(rng, 6, 12, 0.3)
    q, u = _candidate_units(rng, 25, 72, 12)
    paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    tok = unit_tokens[u]
    pred = paragraph_first(rng.normal(0.4, 0.3, len(q)).round(2), q, unit_par[u], 1, paras, 0.0)  # as page_order reads
    sec = section_evidence(q, pred, paras, 25)
    for budget in (0.0, 40.0, float(np.median(sec)), 1e9):
        out = short_first(pred, q, tok, paras, sec, budget)
        inside = section_rows(pred, q, paras, 1, 0.0)
        best_par = section_rows(pred, q, paras, 1, None)
        for qi in range(25):
            r = np.flatnonzero(q == qi)
            by = list(r[np.lexsort((r, -pred[r]))])  # the prediction's order (ties: row order, as reorder's)
            if sec[qi] > budget:
                want = (sorted([x for x in by if best_par[x]], key=lambda x: (tok[x], by.index(x)))
                        + [x for x in by if inside[x] and not best_par[x]] + [x for x in by if not inside[x]])
            else:
                want = by
            assert out[want].tolist() == sorted(pred[r], reverse=True), (qi, budget)
        np.testing.assert_array_equal(section_density(out, q, paras), section_density(pred, q, paras))
        if budget > 1e8:
            assert np.array_equal(out, pred)  # no section longer than the budget: the order as it was
        elif budget == 0.0:
            assert not np.array_equal(out, pred)  # every section is longer: the order moved (the test tells them apart)


def test_candidate_paragraphs_against_whole_corpus_ids_and_its_cost_follows_the_candidates():
    """candidate_paragraphs' ids and tokens equal the whole-corpus ones (sources.paragraph_ids, a bincount), documents
    numbered with gaps included; and it never builds anything corpus-sized: over four million units, with a few
    candidates, tracemalloc's peak stays far below one corpus-length array (the per-session bincount it replaced)."""
    import tracemalloc

    from mogg.ladders.sources import paragraph_ids
    from mogg.run.budget.selector.plans import document_tokens
    from mogg.run.budget.selector.set_shape import candidate_paragraphs

    rng = np.random.default_rng(5)
    unit_doc = np.sort(rng.choice(np.arange(0, 60, 2), 300))  # 300 units in up to 30 documents, ids with gaps
    same = np.flatnonzero(np.diff(unit_doc) == 0) + 1
    starts = np.sort(rng.choice(same, len(same) // 3, replace=False))
    unit_tokens = rng.integers(1, 30, 300)
    unit = rng.choice(300, 80)
    got = candidate_paragraphs(starts, unit_tokens, unit, unit_doc)
    ids = paragraph_ids(unit_doc, starts)
    assert (got.cand[:, None] == got.cand[None, :]).tolist() == (ids[unit][:, None] == ids[unit][None, :]).tolist()
    assert got.tokens.tolist() == np.bincount(ids, weights=unit_tokens)[ids[unit]].tolist()

    n = 4_000_000  # pages of 40 units, a paragraph every 8
    unit_doc = np.arange(n, dtype=np.int64) // 40
    starts = np.flatnonzero(np.arange(n) % 40 % 8 == 0)[1:]
    starts = starts[starts % 40 != 0]
    unit_tokens = np.full(n, 3, dtype=np.int32)
    unit = np.array([5, 17, 2_000_003, 3_999_999])
    tracemalloc.start()
    try:
        paras = candidate_paragraphs(starts, unit_tokens, unit, unit_doc)
        doc_tok = document_tokens(unit_doc, unit_tokens, unit)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert paras.tokens.tolist() == [24.0] * 4 and doc_tok.tolist() == [120.0] * 4
    assert len(set(paras.cand.tolist())) == 4 and peak < n  # one int64 corpus array is 8n bytes


def test_a_block_covering_a_page_of_paragraphs_is_not_a_whole_document():
    """whole_documents with the ladder's paragraphs: a question whose best block covers a document of two or more
    paragraphs is not covered (a one-topic page, every sentence a candidate), so a set of such pages reads as
    sections of a page (page_sections), not whole short documents; documents of one paragraph keep their cover,
    and without paragraphs (a corpus without blank lines: candidate_paragraphs gives None) nothing changes."""
    from mogg.run.budget.selector.set_shape import (
        candidate_paragraphs,
        page_sections,
        whole_documents,
        whole_shape,
    )

    n_docs, per = 12, 8  # pages of 8 units, each unit a candidate of its page's question (one topic)
    unit_doc = np.repeat(np.arange(n_docs), per)
    unit_tokens = np.full(n_docs * per, 20.0)
    u = np.arange(n_docs * per)
    q = unit_doc.copy()
    pred = np.tile(np.linspace(1.0, 0.3, per), n_docs)
    doc_tokens = np.full(len(u), per * 20.0)
    tokens = unit_tokens[u]
    starts = np.flatnonzero(np.arange(n_docs * per) % per % 2 == 0)  # a paragraph every two units
    starts = starts[starts % per != 0]
    paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    assert paras.in_doc.tolist() == [4] * len(u)
    bare = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, n_docs)
    assert bare.covered.all() and whole_shape(bare.doc, bare.covered)  # read as whole short documents before
    shape = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, n_docs, paras)
    assert not shape.covered.any() and not whole_shape(shape.doc, shape.covered) and page_sections(shape)
    assert shape.parts.tolist() == [4] * n_docs and bare.parts is None  # the best document's paragraphs (page_parts)
    assert not shape.shared.any()  # each page one question's best
    for a, b in zip(shape._replace(paragraph=None, parts=None, shared=None)[2:], bare[2:]):  # the rest is the same
        assert (a is None and b is None) or np.array_equal(a, b)
    # half the pages of one paragraph (no start inside them): those keep their cover, the set's majority decides
    one = starts[unit_doc[starts] % 2 == 0]
    half = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, n_docs,
                           candidate_paragraphs(one, unit_tokens, u, unit_doc))
    assert half.covered.tolist() == [d % 2 == 1 for d in range(n_docs)] and whole_shape(half.doc, half.covered)


def test_a_page_of_many_sections_reads_as_sections_by_its_paragraphs():
    """page_sections with the ladder's paragraphs: where the block around the best candidate covers half its
    paragraph or more at the median (PARAGRAPH_COVER), the set is sections of a page however many sections a page
    holds; the share of the page alone (PAGE_COVER) read a page of 25 sections as sentences of a long document (the
    page stand-in written 15 sections a page: docs/results.md, "Pages of many sections"). A sentence of a long
    paragraph (COVID-QA's) stays a sentence; without paragraphs the rule is as before. ``paragraph``: the best
    candidate's paragraph's tokens, against a loop."""
    from mogg.run.budget.selector.set_shape import (
        PAGE_COVER,
        PARAGRAPH_COVER,
        block_cover,
        candidate_paragraphs,
        page_sections,
        paragraph_cover,
        whole_documents,
    )

    rng = np.random.default_rng(11)
    n_pages, per_para, n_para = 8, 3, 25  # pages of 25 paragraphs of 3 units of 20 tokens: 1500 tokens a page
    per = per_para * n_para
    unit_doc = np.repeat(np.arange(n_pages), per)
    unit_tokens = np.full(n_pages * per, 20.0)
    starts = np.flatnonzero(np.arange(n_pages * per) % per_para == 0)
    starts = starts[starts % per != 0]
    n_q = 3 * n_pages
    page_q = np.arange(n_q) // 3  # three questions a page, each reading one section (paragraph) and a stray unit

    def candidates(sentence: bool):
        q, u, p = [], [], []
        for qi in range(n_q):
            para = int(rng.integers(0, n_para))
            first = page_q[qi] * per + para * per_para
            rows = [first + 1] if sentence else list(range(first, first + per_para))
            stray = page_q[qi] * per + ((para + 5) % n_para) * per_para  # a lone match elsewhere on the page
            rows = sorted(set(rows) | {stray})
            q += [qi] * len(rows)
            u += rows
            p += [0.2 if r == stray else 0.9 for r in rows]
        return np.array(q), np.array(u), np.array(p)

    for sentence in (False, True):
        q, u, pred = candidates(sentence)
        tokens, doc_tokens = unit_tokens[u], np.full(len(u), per * 20.0)
        paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
        shape = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, n_q, paras)
        bare = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, n_q)
        for qi in range(n_q):  # the best candidate's paragraph: 3 units of 20 tokens
            r = np.flatnonzero(q == qi)
            assert shape.paragraph[qi] == paras.tokens[r[np.argmax(pred[r])]] == 60.0
        assert bare.paragraph is None and paragraph_cover(bare) == 0.0
        assert block_cover(shape) < PAGE_COVER and not page_sections(bare)  # under the page share: as before
        if sentence:  # one unit of its paragraph: a third, under half
            assert paragraph_cover(shape) == pytest.approx(1 / 3) and not page_sections(shape)
        else:  # the whole paragraph
            assert paragraph_cover(shape) == pytest.approx(1.0) and PARAGRAPH_COVER <= 1.0 and page_sections(shape)
    assert not page_sections(shape._replace(declared="sentence"))  # a declared unit decides


def test_headings_are_read_last_against_a_loop():
    """On a page of questions and answers (docs/results.md, "Question lines of any length"): a candidate whose unit is
    a question line opening its paragraph is a heading (heading_rows: a question inside a paragraph, a statement that
    opens one, or a long question are not); headings_last reads each question's headings after all its other
    candidates, the rest in the order given, every question keeping its values, and gives them density 0; with no
    heading nothing moves. candidate_paragraphs knows each candidate's paragraph's first unit."""
    from mogg.core.text import QUESTION_WORDS
    from mogg.run.budget.selector.set_shape import candidate_paragraphs, heading_rows, headings_last

    rng = np.random.default_rng(31)
    unit_doc, unit_par, unit_tokens, starts = _paged_units(rng, 6, 12, 0.3)
    n_units = len(unit_doc)
    opens = np.r_[True, np.diff(unit_par) > 0]  # [U] the unit opens its paragraph
    kinds = rng.integers(0, 4, n_units)
    texts = np.where(kinds == 0, "What are the symptoms of the disease ?",
                     np.where(kinds == 1, "The symptoms include a fever.",
                              np.where(kinds == 2, "Is " + " ".join(["word"] * QUESTION_WORDS) + "?",
                                       "Who is at risk ?"))).tolist()
    q, u = _candidate_units(rng, 25, 72, 12)
    paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    first_unit = np.array([np.flatnonzero(unit_par == unit_par[x])[0] for x in u])
    assert np.array_equal(paras.first, first_unit)
    head = heading_rows(u, paras, texts)
    assert np.array_equal(head, opens[u] & np.isin(kinds[u], (0, 3)))  # a question line, opening its paragraph
    assert head.any() and (~head & opens[u]).any() and (np.isin(kinds[u], (0, 3)) & ~opens[u]).any()
    pred = rng.normal(0.4, 0.3, len(q)).round(2)
    dens = rng.random(len(q))
    out, d = headings_last(pred, dens, q, head)
    for qi in range(25):
        r = np.flatnonzero(q == qi)
        by = list(r[np.lexsort((r, -pred[r]))])  # the order given (ties: row order, as reorder's)
        want = [x for x in by if not head[x]] + [x for x in by if head[x]]
        assert out[want].tolist() == sorted(pred[r], reverse=True), qi
    np.testing.assert_array_equal(d, np.where(head, 0.0, dens))
    same, d0 = headings_last(pred, dens, q, np.zeros(len(q), dtype=bool))
    assert same is pred and d0 is dens
    no_first = paras._replace(first=None)  # Paragraphs built without the first units: no heading known
    assert not heading_rows(u, no_first, texts).any()


def test_a_question_line_heading_its_answer_is_no_candidate_for_the_page_decision():
    """A page of many questions and their answers (docs/results.md, "A page of many questions and their answers"):
    each question's best candidate is the question line that heads its answer (it repeats the question), the answer's
    units predicted under half of it, so the block around the best was that line alone: under PAGE_COVER of a long
    page and under PARAGRAPH_COVER of the paragraph, and the set read as sentences of a long paper (0.264 at 64
    tokens against its envelope's 0.355). The decision now reads the best candidate that is no heading
    (Paragraphs.heading, computed once by candidate_paragraphs from the units' texts, as heading_rows finds them):
    the block is the answer, the set sections of a page. Without the texts (no heading known) it reads as before, and
    a page with no question line reads the same shape either way."""
    from mogg.run.budget.selector.set_shape import (
        PAGE_COVER,
        PARAGRAPH_COVER,
        block_cover,
        candidate_paragraphs,
        heading_rows,
        page_sections,
        paragraph_cover,
        whole_documents,
    )

    n_pages, per_para, n_para = 6, 5, 10  # pages of 10 paragraphs: a question line and 4 answer units of 30 tokens
    per = per_para * n_para
    unit_doc = np.repeat(np.arange(n_pages), per)
    unit_tokens = np.full(n_pages * per, 30.0)
    opens = np.arange(n_pages * per) % per_para == 0
    unit_tokens[opens] = 10.0
    starts = np.flatnonzero(opens)
    starts = starts[starts % per != 0]
    texts = np.where(opens, "What are the symptoms of the disease ?", "The symptoms include a fever.").tolist()
    q, u, pred = [], [], []
    for qi in range(n_pages * 3):  # three questions a page, each its own answer (paragraph) and a stray unit
        first = (qi // 3) * per + ((qi % 3) * 3) * per_para
        rows = list(range(first, first + per_para)) + [first + 2 * per_para + 1]
        q += [qi] * len(rows)
        u += rows
        pred += [0.9, 0.4, 0.35, 0.4, 0.3, 0.1]
    q, u, pred = np.array(q), np.array(u), np.array(pred)
    tokens, doc_tokens = unit_tokens[u], np.full(len(u), unit_tokens[:per].sum())
    paras = candidate_paragraphs(starts, unit_tokens, u, unit_doc, texts)
    np.testing.assert_array_equal(paras.heading, heading_rows(u, paras, texts))
    assert np.array_equal(paras.heading, opens[u]) and paras.heading.any()
    blind = paras._replace(heading=None)  # the rule before: the heading is the best candidate
    before = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, len(set(q)), blind)
    assert block_cover(before) < PAGE_COVER and paragraph_cover(before) < PARAGRAPH_COVER
    assert not page_sections(before)
    now = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, len(set(q)), paras)
    assert paragraph_cover(now) == pytest.approx(120 / 130) and page_sections(now)  # the answer, under its line
    no_texts = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    assert no_texts.heading is None
    assert paragraph_cover(whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, len(set(q)), no_texts)) == \
        paragraph_cover(before)
    plain = ["The fever comes first."] * len(texts)  # no question line: the same shape with or without texts
    a = whole_documents(q, u, unit_doc, tokens, pred, doc_tokens, len(set(q)),
                        candidate_paragraphs(starts, unit_tokens, u, unit_doc, plain))
    for x, y in zip(a, before):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


def test_a_best_list_item_reads_its_list_as_the_block():
    """On a page whose sections list (a lead-in, then items, each a unit: mogg.core.text.split_units), the best
    candidate is one item and its neighbours are items the question's words miss, so the block around it covered a
    few units of its paragraph and the set read as sentences of a long paper (the list stand-in written one item a
    line: 14% of the paragraph, docs/results.md, "A page's lists"). A list's items answer together: the block around
    a best item (or its lead-in) is its whole list (list_spans, Paragraphs.listed), so the set reads as sections of a
    page; a best candidate outside any list keeps its block, and so does a paragraph of one bulleted line."""
    from mogg.run.budget.selector.set_shape import (
        candidate_paragraphs,
        list_spans,
        page_sections,
        paragraph_cover,
        whole_documents,
    )

    # pages of 4 paragraphs: a sentence, a lead-in, 6 items (units of 10 tokens); paragraph 0 of a page is prose
    per_para, n_pages, n_para = 8, 6, 4
    per = per_para * n_para
    text = []
    for _ in range(n_pages):
        text += ["Prose sentence one.", "Prose two.", "Prose three.", "Prose four.", "Prose five.", "Prose six.",
                 "Prose seven.", "Prose eight."]
        for _ in range(n_para - 1):
            text += ["Plain sentence here.", "Signs may include:", *[f"- item {k}" for k in range(6)]]
    unit_doc = np.repeat(np.arange(n_pages), per)
    unit_tokens = np.full(n_pages * per, 10.0)
    starts = np.flatnonzero(np.arange(n_pages * per) % per_para == 0)
    starts = starts[starts % per != 0]
    slo, shi = list_spans(text, np.array([0, 8, 8]), np.array([8, 16, 9]))
    assert slo.tolist() == [0, 9, 8] and shi.tolist() == [0, 16, 8]  # prose: none; a list: lead-in to last item
    n_q = n_pages
    q = np.repeat(np.arange(n_q), 2)
    u = np.stack([np.arange(n_q) * per + per_para + 3, np.arange(n_q) * per + per_para + 6], 1).ravel()  # two items
    pred = np.tile([0.9, 0.3], n_q)
    doc_tokens = np.full(len(u), per * 10.0)
    bare = candidate_paragraphs(starts, unit_tokens, u, unit_doc)
    worded = candidate_paragraphs(starts, unit_tokens, u, unit_doc, text)
    assert bare.listed is None and worded.listed.tolist() == [70.0] * len(u)  # the lead-in and six items
    before = whole_documents(q, u, unit_doc, unit_tokens[u], pred, doc_tokens, n_q, bare)
    after = whole_documents(q, u, unit_doc, unit_tokens[u], pred, doc_tokens, n_q, worded)
    assert paragraph_cover(before) == pytest.approx(10 / 80) and not page_sections(before)  # one item of 80 tokens
    assert paragraph_cover(after) == pytest.approx(70 / 80) and page_sections(after)
    prose = candidate_paragraphs(starts, unit_tokens, np.arange(n_q) * per + 2, unit_doc, text)
    assert prose.listed.tolist() == [0.0] * n_q  # outside a list: its block as before


def test_monotone_prices_never_let_a_smaller_budget_read_more():
    """The deployed MONOTONE rule ("The price at a smaller budget at least a larger one's"; the transfer directory's
    prices, frontier_guard.monotone_prices): each budget's price of a token at least every larger budget's, against
    a brute force over the budgets; the script's rule is the one before it with the suffix."""
    from mogg.evaluation.frontier_guard import monotone_prices

    mod, _ = _adaptations_script()
    rng = np.random.default_rng(0)
    for _ in range(50):
        price = {b: float(rng.exponential(1e-3)) for b in mod.BUDGETS}
        out = monotone_prices(price)
        assert out == {b: max(price[c] for c in mod.BUDGETS if c >= b) for b in mod.BUDGETS}
        assert all(out[a] >= out[b] for a, b in zip(mod.BUDGETS, mod.BUDGETS[1:]))
    # the seed-1 COVID-QA directory's near-scorer prices (docs/results.md): 128 reads at 256's price
    assert monotone_prices({64: 0.00219, 128: 0.00092, 256: 0.00116, 512: 0.00114})[128] == 0.00116
    assert list(monotone_prices({"512": 1.0, "64": 0.5})) == ["512", "64"]  # the keys as given, compared as numbers
    assert monotone_prices({"512": 1.0, "64": 0.5})["64"] == 1.0
    assert mod.PREVIOUS == mod.BEFORE_MONOTONE + ", the price at a smaller budget at least a larger one's"
    assert mod.ADAPTATIONS[mod.PREVIOUS][-1] == mod.ADAPTATIONS[mod.BEFORE_MONOTONE][-1] + mod.MONOTONE
    # the deployed rule since: the same, with the answer options' vote (adapt.voting_options, options_vote) in the
    # order and in the refit's pseudo-labels
    assert mod.VOTE_ORDER == mod.PREVIOUS + ", the answer options' words vote in the order"
    assert mod.ADAPTATIONS[mod.VOTE_ORDER][-1] == mod.ADAPTATIONS[mod.PREVIOUS][-1] + mod.OPTIONS
    assert mod.VOTED == mod.VOTE_ORDER + ", the refit's pseudo-labels from the voted order"
    assert mod.ADAPTATIONS[mod.VOTED][2] == mod.ADAPTATIONS[mod.VOTE_ORDER][2].replace("near2+docs", "near2+docs+vote")
    assert mod.CHAINED == mod.VOTED + ", at most the chain on sections of sources"
    assert mod.ADAPTATIONS[mod.CHAINED][-1] == mod.ADAPTATIONS[mod.VOTED][-1] + mod.CHAIN_CAP
    # and since: a contested paragraph joins the section it shares its words with (transfer_section_cohesion)
    assert mod.DEPLOYED == mod.CHAINED + ", a contested paragraph goes with the section it shares its words with"
    assert mod.ADAPTATIONS[mod.DEPLOYED][-1] == mod.ADAPTATIONS[mod.CHAINED][-1] + mod.CONTESTED
    # measured, not kept (docs/results.md, "A sentence's E"): the reading then deployed with E the best sentence where
    # the set reads as sentences of long documents
    assert mod.SENTENCE == mod.CHAINED + ", E the best sentence on sentences of long documents"
    assert mod.ADAPTATIONS[mod.SENTENCE][-1] == mod.ADAPTATIONS[mod.CHAINED][-1] + mod.SENTENCE_E


def test_the_ceiling_stops_a_ranking_in_hindsight_better_than_any_read_within_its_tokens():
    """scripts/transfer_adaptations.py --ceiling (ceiling_read): the plans stopped with the labels at B mean tokens
    read at most B on the mean, and no choice of one plan per question reading at most as many tokens scores more
    (a brute force over every choice); a plan past a question's candidates (NaN) is never chosen; the per-budget
    results the table reads leave the ceilings out."""
    import itertools

    mod, _ = _adaptations_script()
    rng = np.random.default_rng(3)
    for _ in range(30):
        q, k = 4, 3
        f1 = rng.random((q, k))
        tokens = np.sort(rng.integers(5, 60, (q, k)), axis=1).astype(float)
        f1[0, 2] = np.nan  # the first question has two plans
        b = float(rng.integers(10, 60))
        f, t = mod.ceiling_read(f1, tokens, b)
        assert not np.isnan(f).any()
        if t.mean() > b + 1e-9:  # only where even every question's cheapest plan reads more than B
            assert np.allclose(t, tokens[:, 0])
            continue
        for pick in itertools.product(range(k), repeat=q):
            rows = np.arange(q)
            ft, tt = f1[rows, pick], tokens[rows, pick]
            if not np.isnan(ft).any() and tt.sum() <= t.sum() + 1e-9:
                assert ft.sum() <= f.sum() + 1e-9
    out = {64: "cells", "docs": None, "ceiling": {64: None}}
    assert mod._budgets(out) == {64: "cells"}
