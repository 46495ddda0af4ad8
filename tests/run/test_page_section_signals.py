"""scripts/page_section_signals.py: the in-page hit@1 and the label-free scores it measures, against
brute-force loops over questions and pages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from mogg.ladders.sources import paragraph_ids

PATH = Path(__file__).resolve().parents[2] / "scripts" / "page_section_signals.py"


def _script(path: Path):
    """A script of scripts/ as a module (registered while it runs: a dataclass looks its module up)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    try:
        spec.loader.exec_module(m)
    finally:
        del sys.modules[spec.name]
    return m


@pytest.fixture(scope="module")
def mod():
    return _script(PATH)


def _rows(seed: int = 0, n_q: int = 30):
    rng = np.random.default_rng(seed)
    q = np.sort(rng.integers(0, n_q, 400))
    doc = rng.integers(0, 6, len(q))
    group = np.unique(q * 10 + doc, return_inverse=True)[1]
    density = np.where(rng.random(len(q)) < 0.2, rng.uniform(0.5, 1.0, len(q)), rng.uniform(0, 0.5, len(q)))
    density[rng.random(len(q)) < 0.05] = np.nan  # a question without evidence reads NaN
    return q, doc, group, density, n_q


def test_gold_pages_is_the_heaviest_page_with_a_gold_unit_and_two_candidates(mod):
    q, doc, group, density, n_q = _rows()
    got = mod.gold_pages(q, group, density, n_q)
    want = np.zeros(len(q), dtype=bool)
    d0 = np.nan_to_num(density)
    for qi in range(n_q):
        rows = np.flatnonzero(q == qi)
        if not len(rows):
            continue
        pages = sorted(set(group[rows]))
        weight = [d0[rows[group[rows] == g]].sum() for g in pages]
        g = pages[int(np.argmax(weight))]  # the first heaviest
        on = rows[group[rows] == g]
        if (d0[on] > mod.GOLD).any() and len(on) >= 2:
            want[on] = True
    np.testing.assert_array_equal(got, want)
    assert got.any() and not got.all()


def test_hit_at_one_and_chance_match_a_loop_and_ties_are_not_the_row_order(mod):
    q, doc, group, density, n_q = _rows(1)
    rows = np.flatnonzero(mod.gold_pages(q, group, density, n_q))
    gold = np.nan_to_num(density) > mod.GOLD
    score = np.random.default_rng(2).random(len(q))
    p, se, n = mod.hit_at_one(q, score, gold, rows)
    tops = [rows[q[rows] == qi][np.argmax(score[rows[q[rows] == qi]])] for qi in np.unique(q[rows])]
    assert n == len(tops) and p == pytest.approx(np.mean(gold[tops]))
    assert se == pytest.approx(np.sqrt(p * (1 - p) / n))
    want = np.mean([gold[rows[q[rows] == qi]].mean() for qi in np.unique(q[rows])])
    assert mod.chance(q, gold, rows) == pytest.approx(want)
    # a constant score cannot tell units apart: chance, not the first row of each page (all gold here)
    first_gold = gold.copy()
    for qi in np.unique(q[rows]):
        r = rows[q[rows] == qi]
        first_gold[r] = False
        first_gold[r[0]] = True
    flat = np.mean([mod.hit_at_one(q, np.zeros(len(q)), first_gold, rows, seed=s)[0] for s in range(20)])
    assert flat == pytest.approx(mod.chance(q, first_gold, rows), abs=0.05) and flat < 0.9


def test_local_share_weighs_each_word_by_the_page_candidates_that_lack_it(mod):
    rng = np.random.default_rng(3)
    n_q, n_u, n_v = 4, 12, 9
    idf = rng.uniform(0.5, 3.0, n_v)
    qt = sp.csr_matrix((rng.random((n_q, n_v)) < 0.5) * idf[None, :])
    ut = sp.csr_matrix((rng.random((n_u, n_v)) < 0.4).astype(np.float32))
    q = np.repeat(np.arange(n_q), 6)
    unit = rng.integers(0, n_u, len(q))
    page = rng.integers(0, 2, len(q))
    group = np.unique(q * 10 + page, return_inverse=True)[1]
    mass = np.asarray(qt.sum(axis=1)).ravel()
    got = mod.local_share(qt.tocsr(), ut.tocsr(), q, unit, group, mass)
    Q, U = qt.toarray(), ut.toarray()
    for r in range(len(q)):
        same = np.flatnonzero(group == group[r])
        others = max(len(same) - 1, 1)
        s = 0.0
        for w in range(n_v):
            if Q[q[r], w] > 0 and U[unit[r], w] > 0:
                holding_others = sum(U[unit[o], w] > 0 for o in same) - 1
                s += Q[q[r], w] * (1 - holding_others / others)
        assert got[r] == pytest.approx(s / max(mass[q[r]], 1e-9), abs=1e-6)


def test_page_contrast_removes_the_page_mean_from_both_sides(mod):
    rng = np.random.default_rng(4)
    e = rng.normal(size=(8, 5))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    qe = rng.normal(size=(2, 5))
    qe /= np.linalg.norm(qe, axis=1, keepdims=True)
    q = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    group = np.array([0, 0, 1, 1, 2, 2, 2, 3])
    contrast, centrality = mod.page_contrast(e, qe, q, group)
    for r in range(8):
        c = e[group == group[r]].mean(axis=0)
        a, b = e[r] - c, qe[q[r]] - c
        if np.linalg.norm(a) > 1e-9:
            assert contrast[r] == pytest.approx(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        assert centrality[r] == pytest.approx(e[r] @ c / np.linalg.norm(c))
    assert contrast[7] == 0.0  # a page of one candidate: nothing left once its mean is removed


def test_unknown_shapes_are_refused_by_name(mod, capsys):
    with pytest.raises(SystemExit):
        mod.main(["--shapes", "pages_l,nope"])
    assert "nope" in capsys.readouterr().err


def test_the_adaptations_script_names_the_library_s_deployed_reading():
    """transfer_adaptations.py's DEPLOYED is a name its table holds, spelling the library's deployed reading (the
    docs' tables and the leximin read it by that name)."""
    ta = _script(PATH.parent / "transfer_adaptations.py")
    assert ta.DEPLOYED in ta.ADAPTATIONS
    view, _, selftrain, e_rule, rule = ta.ADAPTATIONS[ta.DEPLOYED]
    from mogg.run.budget.selector.set_shape import CHAIN_GAP, CHAIN_RATIO, PARA_TOP, SECTION_RATIO

    # the library's deployed reading, as the script spells it: the chain's constants, the best candidate's
    # section first on sections of a page (PARA_TOP: the best candidate's paragraph, and the paragraphs beside it
    # that it owns at SECTION_RATIO), E that section read at least to the median one and at most it, its candidates as
    # likely as the best in the F1 estimate (set_shape.section_density: "fits-para-flat"), read from the best
    # paragraph's shortest candidate where the section is longer than B (set_shape.short_first: ":shortparaB"), and
    # the best candidate's whole source first where the ids name short sources; where the set's documents stand alone,
    # the best document read whole (set_shape.document_density), the price under the cap (ALONE_CAL), and each budget's
    # price at least every larger budget's (MONOTONE: frontier_guard.monotone_prices, the directory's prices); where
    # the questions carry answer options that are not a fixed answer set, their words vote in the order (OPTIONS:
    # adapt.voting_options, options_vote; the directory's transfer_options_vote); on sections of sources each question
    # at most its chain, the price under it (CHAIN_CAP: the directory's transfer_chain_cap); on sections of a page, a
    # paragraph another question predicts higher joins the section it shares its words with (CONTESTED: the
    # directory's transfer_section_cohesion)
    assert (e_rule, rule) == ("predicted", "fits-para-flat:shortparaB" + ta.ALONE_CAL + ta.MONOTONE + ta.OPTIONS
                              + ta.CHAIN_CAP + ta.CONTESTED)
    from mogg.run.budget.selector.kind import EvidenceSelectorKind

    kind = EvidenceSelectorKind()
    assert kind.transfer_options_vote is True and kind.transfer_chain_cap is True
    assert kind.transfer_section_cohesion is True
    assert ta.ADAPTATIONS[ta.VOTED][-1] + ta.CHAIN_CAP + ta.CONTESTED == rule  # the rule before: past the chain
    assert PARA_TOP == 1
    # the refit's pseudo-labels from the voted order (self_training.self_trained with the options)
    assert selftrain == f"near2+docs+vote+chain:{CHAIN_RATIO:g}:{CHAIN_GAP}+pageownrun:{SECTION_RATIO:g}+source"


def test_paragraph_places_and_position_lift_against_loops(mod):
    """A paragraph's place in its page by a walk over the units, and the cross-fitted lift by a loop over the
    questions: each parity's rows scaled by the other parity's (top-choice share / on-top-page share) per place."""
    rng = np.random.default_rng(2)
    unit_doc = np.sort(rng.integers(0, 25, 300))
    same = np.flatnonzero(np.diff(unit_doc) == 0) + 1
    starts = np.sort(rng.choice(same, len(same) // 4, replace=False))
    n_q = 40
    q = np.sort(rng.integers(0, n_q, 500))
    unit = rng.integers(0, 300, len(q))
    group = np.unique(q * 100 + unit_doc[unit], return_inverse=True)[1]
    score = rng.random(len(q))
    place = mod.paragraph_places(unit, unit_doc, paragraph_ids(unit_doc, starts))
    para, p = [], 0
    for i in range(300):  # walk: a new paragraph at a document's first unit or at a start
        p += i > 0 and (unit_doc[i] != unit_doc[i - 1] or i in set(starts))
        para.append(p)
    para = np.array(para)
    for r in range(len(q)):
        ps = sorted(set(para[unit_doc == unit_doc[unit[r]]]))
        k = ps.index(para[unit[r]])
        assert place[r] == (3 if len(ps) == 1 else 0 if k == 0 else 2 if k == len(ps) - 1 else 1)

    got = mod.position_lift(score, q, group, place)
    want = score.copy()
    for half in (0, 1):
        picked, share, n_est = np.zeros(4), np.zeros(4), 0
        for qi in np.unique(q):
            if qi % 2 == half:
                continue
            rows = np.flatnonzero(q == qi)
            t = rows[np.argmax(score[rows])]
            picked[place[t]] += 1
            on = rows[group[rows] == group[t]]
            for r in on:
                share[place[r]] += 1.0 / len(on)
            n_est += 1
        lift = np.where(share > 0, (picked / n_est) / np.maximum(share / n_est, 1e-12), 1.0)
        rows = np.flatnonzero(q % 2 == half)
        want[rows] = score[rows] * lift[place[rows]]
    np.testing.assert_allclose(got, want)
    assert not np.allclose(got, score)
