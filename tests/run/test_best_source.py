"""mogg.run.budget.selector.best_source: each question's best candidate's whole source read first, against a loop;
where it applies and where it does not (sections of a page, one id prefix over the corpus, documents alone)."""

from __future__ import annotations

from functools import partial

import numpy as np

from mogg.ladders.sources import corpus_sources, source_keys, source_positions
from mogg.run.budget.selector.best_source import SOURCE_MAX_DOCS, Candidates, read_best_source, reads_sources
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
    return Candidates(q, u, unit_tokens[u], document_tokens(unit_doc, unit_tokens, u), pred)


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
