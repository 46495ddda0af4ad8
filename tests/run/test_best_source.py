"""mogg.run.budget.selector.best_source: each question's best candidate's whole source read first, against a loop;
where it applies and where it does not (sections of a page, one id prefix over the corpus, documents alone)."""

from __future__ import annotations

from functools import partial

import numpy as np

from mogg.ladders.sources import corpus_sources, source_keys, source_positions
from mogg.run.budget.selector.best_source import SOURCE_MAX_DOCS, ReadRows, read_best_source, reads_sources
from mogg.run.budget.selector.plans import document_tokens
from mogg.run.budget.selector.set_shape import SetShape


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


def test_the_best_source_is_read_first_whole_against_a_loop():
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


def test_no_source_is_read_where_the_ids_name_none_or_the_set_is_a_page():
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
