"""Lexical cohesion between a page's paragraphs (mogg.run.budget.selector.cohesion): against scikit-learn's tf-idf
and a loop over each page's pairs, and what the page rule reads with it."""

import numpy as np
import pytest


def _pages(rng, n_pages: int, words: int = 40, parts: int = 2):
    """Units (sentences) of ``n_pages`` pages: each page three to five sections, each section ``parts`` paragraphs of
    one to three units drawn from the section's own words; returns (unit_text [U], unit_doc [U], starts,
    unit_section)."""
    vocab = [f"w{k}" for k in range(words * 20)]
    text, doc, starts, section = [], [], [], []
    s_id = 0
    for d in range(n_pages):
        first = True
        for _ in range(int(rng.integers(3, 6))):
            own = rng.choice(vocab, 6, replace=False)
            for _half in range(parts):
                if not first:
                    starts.append(len(text))
                first = False
                for _ in range(int(rng.integers(1, 4))):
                    text.append(" ".join(rng.choice(own, int(rng.integers(3, 7)))))
                    doc.append(d)
                    section.append(s_id)
            s_id += 1
    return text, np.array(doc), np.array(starts, dtype=np.int64), np.array(section)


def test_cohesion_against_sklearn_and_a_loop_over_pairs(monkeypatch):
    """Each paragraph's pair with the next: the tf-idf cosine (scikit-learn's sublinear tf, smooth idf over the pages'
    paragraphs, unit rows) less the page's median pairwise cosine; NaN for a page's last paragraph. Only the pages
    asked for are read: another page's words change no idf."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from mogg.core.text import tokenize
    from mogg.run.budget.selector import cohesion
    from mogg.run.budget.selector.cohesion import PageLinks

    rng = np.random.default_rng(3)
    text, doc, starts, _ = _pages(rng, 6)
    links = PageLinks(text, starts, doc)
    asked = np.array([4, 1, 2, 1])
    ids, c = links.cohesion(asked)
    pid = doc + np.searchsorted(starts, np.arange(len(text)), side="right")
    keep = np.isin(doc, [1, 2, 4])
    want_ids = np.unique(pid[keep])
    assert ids.tolist() == want_ids.tolist()
    paras = [" ".join(t for t, p in zip(text, pid) if p == i) for i in want_ids]
    vec = TfidfVectorizer(tokenizer=lambda t: tokenize(t, stopwords=True), lowercase=False, token_pattern=None,
                          sublinear_tf=True)
    x = vec.fit_transform(paras).toarray()
    p_doc = np.array([doc[pid == i][0] for i in want_ids])
    for k in range(len(want_ids)):
        same = np.flatnonzero(p_doc == p_doc[k])
        if k == same[-1]:
            assert np.isnan(c[k])
            continue
        s = x[same] @ x[same].T
        median = np.median(s[np.triu_indices(len(same), 1)])
        assert c[k] == pytest.approx(x[k] @ x[k + 1] - median, abs=1e-9)
    # a long page's median reads its pairs at most COHESION_WINDOW apart (the cost stays linear in its paragraphs)
    monkeypatch.setattr(cohesion, "COHESION_WINDOW", 2)
    _, near = PageLinks(text, starts, doc).cohesion(asked)
    for k in range(len(want_ids)):
        same = np.flatnonzero(p_doc == p_doc[k])
        if k == same[-1]:
            continue
        s = x[same] @ x[same].T
        i, j = np.triu_indices(len(same), 1)
        median = np.median(s[i, j][j - i <= 2])
        assert near[k] == pytest.approx(x[k] @ x[k + 1] - median, abs=1e-9)


def test_a_set_reads_over_paragraphs_where_its_neighbours_share_words_more_than_its_pages():
    """Pages whose sections run over two paragraphs: a section's halves share its words, so pairs above the page's
    median outnumber those below; the same pages with every paragraph its own section (a page of one topic's
    sections: each pair as alike as the page) do not, and no paragraph links to the next there."""
    from mogg.run.budget.selector.cohesion import (
        COHESION_MARGIN,
        PageLinks,
        cohesive_links,
        reads_over_paragraphs,
    )

    rng = np.random.default_rng(5)
    text, doc, starts, section = _pages(rng, 12)
    links = PageLinks(text, starts, doc)
    docs = np.arange(12)
    ids, c = links.cohesion(docs)
    assert reads_over_paragraphs(c)
    pid = doc + np.searchsorted(starts, np.arange(len(text)), side="right")
    sec_of = {int(p): int(s) for p, s in zip(pid, section)}
    joins = cohesive_links(links, docs, ids)
    same = np.array([i + 1 in sec_of and sec_of[i] == sec_of[i + 1] for i in ids])
    assert joins[same].mean() > 0.8 and joins[~same].mean() < 0.1
    # one topic: every paragraph draws from the page's words alike
    flat = []
    for d in range(12):
        own = rng.choice([f"v{k}" for k in range(400)], 12, replace=False)
        flat += [" ".join(rng.choice(own, 5)) for _ in range(int((doc == d).sum()))]
    one = PageLinks(flat, starts, doc)
    _, c1 = one.cohesion(docs)
    assert not reads_over_paragraphs(c1)
    assert not cohesive_links(one, docs, ids).any()
    assert not reads_over_paragraphs(np.array([np.nan, 0.0, -COHESION_MARGIN * 2]))


def test_the_page_rule_reads_a_one_question_page_s_section_over_its_cohesive_paragraphs():
    """On a page of one routed question (no other question marks its sections) the section is the best paragraph and
    the paragraphs beside it chained by shared words (:func:`set_shape.section_rows` with the pages' words); without
    them, the best paragraph alone, as before; a page holding two questions' best reads as it did."""
    from mogg.run.budget.selector.set_shape import candidate_paragraphs, section_evidence, section_rows

    rng = np.random.default_rng(7)
    text, doc, starts, section = _pages(rng, 12)
    unit_tokens = np.full(len(text), 10.0)
    pid = doc + np.searchsorted(starts, np.arange(len(text)), side="right")
    # one question a page on pages 0-10, its best unit the first of its page's second section; every unit of the page
    # a candidate, the best section's other units predicted lower than the best, the other sections' lower still
    q, u, p = [], [], []
    for d in range(11):
        units = np.flatnonzero(doc == d)
        target = section[units][np.searchsorted(section[units], section[units][0] + 1)]
        best = units[section[units] == target][0]
        for x in units:
            q.append(d)
            u.append(x)
            p.append(1.0 if x == best else 0.5 if section[x] == target else 0.1)
    q, u, p = np.array(q), np.array(u), np.array(p)
    plain = candidate_paragraphs(starts, unit_tokens, u, doc)
    worded = candidate_paragraphs(starts, unit_tokens, u, doc, text)
    alone = section_rows(p, q, plain, 1, 0.0)
    read = section_rows(p, q, worded, 1, 0.0)
    best_par = {int(qi): pid[u[(q == qi) & (p == 1.0)][0]] for qi in range(11)}
    assert alone.tolist() == [pid[x] == best_par[int(qi)] for qi, x in zip(q, u)]
    target_rows = p >= 0.5
    assert read[target_rows].mean() > 0.8 and not read[~target_rows].any()
    assert read[alone].all()
    e = section_evidence(q, p, worded, 11, 0.0)
    assert (e >= section_evidence(q, p, plain, 11, 0.0)).all()


def test_peak_links_are_the_cohesive_pairs_at_least_as_alike_as_the_pairs_beside_them():
    """cohesion.peak_links against the pairs' cohesion read one by one: a cohesive pair (cohesive_links) whose
    cosine less the page's median is at least that of the pair before it and the pair after it (a pair that does not
    exist, at a page's ends, counts as least alike)."""
    from mogg.run.budget.selector.cohesion import PageLinks, cohesive_links, peak_links

    rng = np.random.default_rng(11)
    text, doc, starts, _ = _pages(rng, 8, parts=3)  # a section's two pairs: the more alike one is the peak
    links = PageLinks(text, starts, doc)
    docs = np.arange(8)
    ids, c = links.cohesion(docs)
    value = {int(p): (-np.inf if np.isnan(v) else float(v)) for p, v in zip(ids, c)}
    got = peak_links(links, docs, ids)
    joins = cohesive_links(links, docs, ids)
    want = [bool(j) and value[p] >= value.get(p - 1, -np.inf) and value[p] >= value.get(p + 1, -np.inf)
            for p, j in zip(ids.tolist(), joins)]
    assert got.tolist() == want
    assert 0 < got.sum() < joins.sum()  # of a section's two cohesive pairs, mostly one
    # a paragraph of a page not read (pages 4-7 against pages 0-3 read) never links
    pid = doc + np.searchsorted(starts, np.arange(len(text)), side="right")
    later = np.unique(pid[doc >= 4])
    assert peak_links(links, np.arange(4), np.unique(pid[doc < 4])).any()
    assert not peak_links(links, np.arange(4), later).any()


def test_a_contested_half_joins_the_section_it_shares_its_words_with():
    """On pages of several questions whose sections run over two paragraphs, each question's second half predicted
    higher by the next section's question (not that question's best paragraph) is not the question's own: without
    ``contested`` its section is its first half alone; with it (a transfer directory's transfer_section_cohesion) the
    second half joins, since the two halves share their words more than either shares with the sections beside them.
    Another question's best paragraph never joins."""
    from mogg.run.budget.selector.set_shape import candidate_paragraphs, section_evidence, section_rows

    rng = np.random.default_rng(13)
    text, doc, starts, section = _pages(rng, 10)
    unit_tokens = np.full(len(text), 10.0)
    pid = doc + np.searchsorted(starts, np.arange(len(text)), side="right")
    q, u, p, half = [], [], [], []
    qid, last_of_page = 0, []
    for d in range(10):
        units = np.flatnonzero(doc == d)
        secs = np.unique(section[units])
        for j, s_ in enumerate(secs):
            own = units[section[units] == s_]
            h0 = own[pid[own] == pid[own][0]]
            prev = units[section[units] == secs[j - 1]] if j else np.zeros(0, dtype=np.int64)
            prev_h1 = prev[pid[prev] != pid[prev][0]] if len(prev) else prev
            for x in units:
                q.append(qid)
                u.append(x)
                half.append(0 if x in h0 else 1 if section[x] == s_ else -1)
                p.append(1.0 if x == h0[0] else 0.6 if x in h0 else 0.3 if section[x] == s_ else
                         0.4 if x in prev_h1 else 0.1)
            last_of_page.append(j == len(secs) - 1)
            qid += 1
    q, u, p, half = np.array(q), np.array(u), np.array(p), np.array(half)
    last = np.array(last_of_page)[q]
    plain = candidate_paragraphs(starts, unit_tokens, u, doc, text)
    contested = candidate_paragraphs(starts, unit_tokens, u, doc, text, contested=True)
    assert not plain.contested and contested.contested
    before, now = section_rows(p, q, plain, 1, 0.0), section_rows(p, q, contested, 1, 0.0)
    mid = ~last  # a question whose second half the next question contests
    assert before[(half == 0)].all() and now[(half == 0)].all()
    assert not before[mid & (half == 1)].any()
    assert now[mid & (half == 1)].all()
    assert before[last & (half == 1)].all()  # its own: no other question predicts it higher
    best_par = set(pid[u[p == 1.0]].tolist())
    for qi in range(qid):  # never another question's best paragraph
        mine = pid[u[(q == qi) & (p == 1.0)]][0]
        assert not (set(pid[u[(q == qi) & now]].tolist()) & (best_par - {mine}))
    assert (section_evidence(q, p, contested, qid, 0.0) >= section_evidence(q, p, plain, qid, 0.0)).all()
