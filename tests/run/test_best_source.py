"""mogg.run.budget.selector.best_source: each question's best candidate's whole source read first, against a loop;
where it applies and where it does not (sections of a page, one id prefix over the corpus, documents alone)."""

from __future__ import annotations

from functools import partial

import numpy as np

from mogg.ladders.sources import corpus_sources, source_keys, source_positions, source_runs
from mogg.run.budget.selector import best_source
from mogg.run.budget.selector.best_source import (
    SOURCE_MAX_DOCS,
    ReadRows,
    close_owned,
    owns_best,
    read_best_source,
    reads_sources,
    shared_sources,
)
from mogg.run.budget.selector.plans import document_tokens
from mogg.run.budget.selector.set_shape import CLOSE_RATIO, SetShape


def _corpus(rng, shuffle: bool):
    """Sources of 1-5 documents of 1-3 units each, ids ``s<i>-<k>`` (a source of one: a bare id)."""
    ids = []
    for s in range(30):
        n = int(rng.integers(1, 6))
        ids += [f"s{s}-{k}" for k in range(n)] if n > 1 else [f"alone{s}"]
    if shuffle:
        ids = [ids[i] for i in rng.permutation(len(ids))]
    unit_doc = np.repeat(np.arange(len(ids)), rng.integers(1, 4, len(ids)))
    unit_tokens = rng.integers(3, 30, len(unit_doc)).astype(float)
    return ids, unit_doc, unit_tokens


def _candidates(rng, unit_doc, unit_tokens, n_q=25):
    rows = [(q, int(u)) for q in range(n_q) for u in np.sort(rng.choice(len(unit_doc), rng.integers(1, 8), replace=False))]
    q, u = (np.array(x) for x in zip(*rows))
    pred = rng.random(len(q))  # distinct: the ranking by value is the order
    return ReadRows(q, u, unit_tokens[u], document_tokens(unit_doc, unit_tokens, u), pred)


def test_the_best_source_is_read_first_whole_against_a_loop(monkeypatch):
    # the random questions' best sources overlap (25 questions over 30 sources): the reading itself is tested here,
    # the decision on shared sources below
    monkeypatch.setattr(best_source, "SOURCE_SHARED", 1.01)
    rng = np.random.default_rng(3)
    ran = 0
    for shuffle in (False, True):
        ids, unit_doc, unit_tokens = _corpus(rng, shuffle)
        pos = source_positions(ids)
        src = corpus_sources(ids, pos)
        c = _candidates(rng, unit_doc, unit_tokens)
        keys = source_keys(ids)
        assert reads_sources(c.pred, c.q, c.unit, unit_doc, src, None)
        ran += 1
        out = read_best_source(c, unit_doc, unit_tokens, partial(document_tokens, unit_doc, unit_tokens), src, None)
        assert out.unit[: len(c.unit)].tolist() == c.unit.tolist()  # the candidates kept, rows added after them
        for qi in range(25):
            r = np.flatnonzero(c.q == qi)
            best = r[np.argmax(c.pred[r])]
            s = keys[unit_doc[c.unit[best]]]
            docs = sorted(np.flatnonzero(keys == s), key=lambda d: pos[d])  # the source's documents in source order
            mine = [int(x) for x in np.flatnonzero(out.q == qi)]
            if not 2 <= len(docs) <= SOURCE_MAX_DOCS:
                assert len(mine) == len(r)  # nothing added
                continue
            in_src = [x for x in r[np.argsort(-c.pred[r], kind="stable")] if keys[unit_doc[c.unit[x]]] == s]
            have = set(c.unit[r].tolist())
            added = [u for d in docs for u in np.flatnonzero(unit_doc == d) if u not in have]
            assert sorted(out.unit[mine].tolist()) == sorted(c.unit[r].tolist() + added)
            ranked = sorted(mine, key=lambda x: -out.pred[x])
            head = [int(out.unit[x]) for x in ranked[: len(in_src) + len(added)]]
            assert head[: len(in_src)] == [int(c.unit[x]) for x in in_src]
            assert head[len(in_src):] == [int(u) for u in added]  # then the others, in source order
            vals = np.sort(np.r_[c.pred[r], np.full(len(added), c.pred[in_src].min())])[::-1]
            assert np.allclose(np.sort(out.pred[mine])[::-1], vals, atol=1e-6)  # the values handed out again
            new = [x for x in mine if x >= len(c.q)]
            assert np.allclose(out.tokens[new], unit_tokens[out.unit[new]])
            assert np.allclose(out.doc_tokens[new], [unit_tokens[unit_doc == unit_doc[u]].sum() for u in out.unit[new]])
    assert ran == 2


def test_no_source_is_read_where_the_ids_name_none_or_the_set_is_a_page(monkeypatch):
    monkeypatch.setattr(best_source, "SOURCE_SHARED", 1.01)  # as above
    rng = np.random.default_rng(4)
    ids, unit_doc, unit_tokens = _corpus(rng, False)
    c = _candidates(rng, unit_doc, unit_tokens)
    src = corpus_sources(ids, source_positions(ids))
    assert reads_sources(c.pred, c.q, c.unit, unit_doc, src, None)
    page = SetShape(np.full(25, 300.0), np.zeros(25, bool), np.full(25, 300.0), np.full(25, 300.0), block=np.full(25, 60.0))
    assert not reads_sources(c.pred, c.q, c.unit, unit_doc, src, page)  # sections of a page read their own rule
    same = read_best_source(c, unit_doc, unit_tokens, None, src, page)
    assert same is c
    # one prefix over the corpus (doc-0 ... doc-N): one "source", no sources
    flat = [f"doc-{i}" for i in range(len(ids))]
    assert not reads_sources(c.pred, c.q, c.unit, unit_doc, corpus_sources(flat, source_positions(flat)), None)
    # every document alone (whole abstracts, whole explanations)
    alone = [f"pmid{i}" for i in range(len(ids))]
    assert not reads_sources(c.pred, c.q, c.unit, unit_doc, corpus_sources(alone, source_positions(alone)), None)


class _Lookup:
    """``positions[ids]`` read from a dict: the few documents asked, as a corpus's Sources answers them."""

    def __init__(self, of: dict):
        self.of = of

    def __getitem__(self, d):
        return np.array([self.of[int(x)] for x in np.asarray(d).ravel()])


def test_shared_sources_and_owned_bests_against_loops():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(1, 40))
        lo = rng.integers(0, 50, n)
        hi = lo + rng.integers(1, 6, n)
        at = lo + (rng.random(n) * (hi - lo)).astype(np.int64)  # each question's best inside its own source
        owned = rng.random(n) < 0.6
        want = [any(owned[j] and lo[i] <= at[j] < hi[i] for j in range(n) if j != i) for i in range(n)]
        assert shared_sources(at, owned, lo, hi).tolist() == want
        # owns_best: each question's best row, and whether no other question predicts that document higher
        q = np.sort(rng.integers(0, n, 5 * n))
        doc = rng.integers(0, 12, len(q))
        pred = rng.random(len(q))
        best = np.array([np.flatnonzero(q == i)[np.argmax(pred[q == i])] for i in np.unique(q)])
        want = [pred[b] >= pred[doc == doc[b]].max() for b in best]
        owned_b = owns_best(q, doc, pred, best)
        assert owned_b.tolist() == want
        # close_owned: the other questions' owned best documents in a question's source range that it finds close
        positions = rng.permutation(12)
        blo = positions[doc[best]] - rng.integers(0, 3, len(best))
        bhi = positions[doc[best]] + 1 + rng.integers(0, 3, len(best))
        owners = {int(doc[b]): int(q[b]) for b, o in zip(best, owned_b) if o}
        want = []
        for i, b in enumerate(best):
            mine = q == q[b]
            close = {int(d) for d in doc[mine & (pred >= CLOSE_RATIO * pred[b])]}
            want.append(sum(1 for d, o in owners.items() if o != q[b] and d in close
                            and blo[i] <= positions[d] < bhi[i]))
        got = close_owned(q, doc, pred, best, owned_b, positions, blo, bhi)
        assert got.tolist() == want
        # the same documents under the ids of a corpus of ten billion: the same count, and no array sized by the ids
        # (one would need 80 GB: the cost follows the candidates, not the corpus)
        big = np.array([0, 10**10 - 1] + list(range(2, 12)))
        ids = big[doc]
        pos_of = dict(zip(big.tolist(), positions.tolist()))

        assert close_owned(q, ids, pred, best, owned_b, _Lookup(pos_of), blo, bhi).tolist() == want


def test_sources_of_several_questions_evidence_are_not_read_whole():
    """A page of sections written a paragraph per document, each section one question's: the page names the source,
    and every question's best source holds the other questions' best documents. The whole page is read first no more
    (the long sections so written read other sections before: docs/results.md, "A page's paragraphs, each a
    document"); where each question's best source is its own, it still is."""
    n_q, per_page = 24, 8  # 6 pages of 4 sections of 2 paragraphs (documents of 2 units): 4 questions a page
    ids = [f"page{p}_{k}" for p in range(n_q // 4) for k in range(per_page)]
    unit_doc = np.repeat(np.arange(len(ids)), 2)
    unit_tokens = np.full(len(unit_doc), 10.0)
    src = corpus_sources(ids, source_positions(ids))
    rng = np.random.default_rng(6)
    best = 2 * np.arange(n_q)  # question i asks section i: its first paragraph is its best document
    q = np.repeat(np.arange(n_q), 4)
    u = np.stack([2 * best, 2 * best + 1, rng.integers(0, len(unit_doc), n_q), rng.integers(0, len(unit_doc), n_q)],
                 axis=1).ravel()
    pred = np.tile([0.9, 0.8, 0.1, 0.05], n_q) + rng.random(4 * n_q) * 1e-3
    c = ReadRows(q, u, unit_tokens[u], document_tokens(unit_doc, unit_tokens, u), pred)
    lo, hi, _ = source_runs(src, best, SOURCE_MAX_DOCS)
    owned = np.ones(n_q, dtype=bool)  # each question predicts its own best document the highest (0.9)
    assert shared_sources(src.positions[best], owned, lo, hi).all()
    assert not reads_sources(c.pred, c.q, c.unit, unit_doc, src, None)
    assert read_best_source(c, unit_doc, unit_tokens, None, src, None) is c
    # the same documents named one source per section (one question's evidence each): read whole, as before
    own = [f"sec{i // 2}_{i % 2}" for i in range(len(ids))]
    src_own = corpus_sources(own, source_positions(own))
    assert not shared_sources(src_own.positions[best], owned, *source_runs(src_own, best, SOURCE_MAX_DOCS)[:2]).any()
    assert reads_sources(c.pred, c.q, c.unit, unit_doc, src_own, None)
    assert read_best_source(c, unit_doc, unit_tokens, partial(document_tokens, unit_doc, unit_tokens), src_own,
                            None) is not c
    # a third of the questions take their best in the next question's source (its second paragraph), a document that
    # question predicts higher (a wrong best: explanation sentences of similar questions); the others' second
    # paragraph is their own. Counting every other question's best, 16
    # of 24 sources held one (67%) and no source was read; counting the owned ones, the 8 wrong questions' (33%)
    wrong = np.arange(n_q) % 3 == 0
    theirs = np.where(wrong, 2 * ((np.arange(n_q) + 1) % n_q) + 1, best)  # the next section's second paragraph
    u2 = np.stack([2 * theirs, 2 * theirs + 1, 2 * best + 2, 2 * best + 3], axis=1).ravel()
    # the wrong ones predict their best below what the next question predicts for that paragraph (0.15 < 0.2)
    p2 = np.where(np.repeat(wrong, 4), np.tile([0.15, 0.14, 0.1, 0.05], n_q), np.tile([0.6, 0.5, 0.2, 0.1], n_q))
    c2 = ReadRows(q, u2, unit_tokens[u2], document_tokens(unit_doc, unit_tokens, u2), p2)
    own_best = np.where(wrong, theirs, best)
    at2 = src_own.positions[own_best]
    lo2, hi2 = source_runs(src_own, own_best, SOURCE_MAX_DOCS)[:2]
    assert shared_sources(at2, np.ones(n_q, dtype=bool), lo2, hi2).mean() > 0.5  # every best counted
    owned2 = owns_best(q, unit_doc[u2], p2, 4 * np.arange(n_q))
    assert owned2.tolist() == (~wrong).tolist()
    assert shared_sources(at2, owned2, lo2, hi2).mean() < 0.5
    assert reads_sources(c2.pred, c2.q, c2.unit, unit_doc, src_own, None)
    # near-duplicate questions: each also finds the other's best close (its evidence is the same text), so a source
    # holding it is not another question's evidence; on the page above the same pairs were (every source shared)
    pairs = np.arange(n_q) ^ 1  # 0-1, 2-3, ...: each question's twin
    u3 = np.stack([2 * best, 2 * best + 1, 2 * best[pairs], 2 * best[pairs] + 1], axis=1).ravel()
    p3 = np.tile([0.9, 0.8, 0.5, 0.4], n_q)  # the twin's best predicted at over a quarter of the own best
    c3 = ReadRows(q, u3, unit_tokens[u3], document_tokens(unit_doc, unit_tokens, u3), p3)
    twins = [f"pair{i // 4}_{i % 4}" for i in range(len(ids))]  # a twin pair's two sections: one source
    src_twins = corpus_sources(twins, source_positions(twins))
    assert reads_sources(c3.pred, c3.q, c3.unit, unit_doc, src_twins, None)
    far = ReadRows(q, u3, c3.tokens, c3.doc_tokens, np.tile([0.9, 0.8, 0.1, 0.05], n_q))  # the twin's best not close
    assert not reads_sources(far.pred, far.q, far.unit, unit_doc, src_twins, None)


def test_source_runs_against_the_whole_corpus_and_they_read_only_the_ids_around_the_documents():
    """source_runs' [lo, hi) equal the runs of equal source keys over the whole corpus in source order, where a run
    fits in the reach; a longer one reads as longer than the reach; only the ids within the reach are read."""
    from mogg.ladders.sources import source_runs

    class Counted(list):  # doc ids that count which of them are read
        def __init__(self, xs):
            super().__init__(xs)
            self.read = set()

        def __getitem__(self, i):
            self.read.add(i)
            return super().__getitem__(i)

    rng = np.random.default_rng(9)
    ids, _, _ = _corpus(rng, True)
    ids += [f"big-{k}" for k in range(40)]  # a source longer than the reach below
    ids = Counted(ids)
    pos = source_positions(list(ids))
    src = corpus_sources(ids, pos)
    keys = source_keys(list(ids))[src.pos_doc]  # each position's source
    docs = rng.choice(len(ids), 12, replace=False)
    ids.read.clear()
    lo, hi, _ = source_runs(src, docs, 8)
    for d, a, b in zip(docs, lo, hi):
        p = pos[d]
        run = np.flatnonzero(keys == keys[p])
        if len(run) <= 8:
            assert (a, b) == (run[0], run[-1] + 1)
        else:
            assert b - a > 8
    assert ids.read <= {int(src.pos_doc[p]) for d in docs for p in range(max(pos[d] - 8, 0), min(pos[d] + 9, len(ids)))}
