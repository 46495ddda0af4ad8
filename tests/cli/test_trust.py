"""What a hostile but fair user tried (issue: trust what is on disk), each case a test.

Every test here failed before its fix: a half-finished retrain mixed with an older one, a data key
blind to evidence and answers, secrets written to disk, documented trainer overrides that did not
compose, gold ids absent from the corpus read as misses, knobs validated deep inside numpy, text
edge cases (sentence splitting, gzip, JSON error columns, orphaned temp directories).
"""

from __future__ import annotations

import gzip
import json
import logging
import os

import numpy as np
import pytest
from conftest import ROOT, compose

from mogg.core.artifacts import _HOST, ArtifactError, clean_stale_temps, write_artifact
from mogg.core.secrets import REDACTED, redact, scrub_argv
from mogg.core.text import split_sentences
from mogg.data.corpus import MedRAGJsonl, PlainText
from mogg.data.errors import DataError
from mogg.data.files import iter_jsonl, load_json
from mogg.routing.fitting import kfold as cf
from mogg.routing.fitting.kfold import crossfit, predict_crossfit
from mogg.routing.kinds.mlp import MLPRouter
from mogg.routing.networks.training import TrainerConfig
from mogg.run.app import evaluate, train
from mogg.selection import cap_contexts

# ------------------------------------------------------------------------------------------------
# 1. an interrupted retrain never combines with an older run


def _toy(n=60):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    u = rng.random((n, 3))
    y = np.zeros_like(u)
    y[np.arange(n), u.argmax(1)] = 0.8
    return x, y, u, [f"q{i}" for i in range(n)]


def test_interrupted_retrain_cannot_mix_with_the_old_run(tmp_path, monkeypatch):
    x, y, u, ids = _toy()
    s, tc = MLPRouter(hidden=4), TrainerConfig(max_epochs=5, patience=0)
    crossfit(x, y, u, ids, ids, 3, 0, s, tc, tmp_path, {"provenance": {"data_key": "d"}})
    old_folds = (tmp_path / "folds.json").read_text()
    predict_crossfit(x, ids, tmp_path)  # the finished run routes

    real, calls = cf.TrainedRouter.save, []

    def dies_after_fold0(*a, **kw):  # killed while the new run's folds are being written
        if calls:
            raise KeyboardInterrupt("killed")
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(cf.TrainedRouter, "save", dies_after_fold0)
    with pytest.raises(KeyboardInterrupt):
        crossfit(x, y, u, ids, ids, 3, 1, s, tc, tmp_path, {"provenance": {"data_key": "d"}})  # another seed
    with pytest.raises(FileNotFoundError, match="no finished cross-fit"):
        predict_crossfit(x, ids, tmp_path)
    # even with the old folds.json put back, the new fold 0 is refused
    (tmp_path / "folds.json").write_text(old_folds)
    with pytest.raises(ArtifactError, match="a retrain was interrupted"):
        predict_crossfit(x, ids, tmp_path)


# ------------------------------------------------------------------------------------------------
# 2./3. the data key covers evidence and answers; a changed set refuses the old router


def _generic(tmp_path, change=None):
    src = (ROOT / "examples" / "generic" / "questions.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in src]
    if change:
        for r in rows:
            change(r)
    q = tmp_path / f"q-{change.__name__ if change else 'orig'}.jsonl"
    q.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return q


def _gov(tmp_path, q, *extra):
    return ["experiment=generic_example", f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
            f"paths.reports={tmp_path / 'r'}", f"questions.path={q}",
            f"corpus.sources.0.paths={ROOT / 'examples/generic/corpus.jsonl'}", "trainer.max_epochs=10", *extra]


def test_data_key_covers_evidence_and_answers(tmp_path):
    train(compose(_gov(tmp_path, _generic(tmp_path))))

    def evidence(r):
        r["gold_evidence"] = [e.upper() + " extra" for e in r["gold_evidence"]]

    def answers(r):
        r["answer"] = "B" if r.get("options") else r["answer"] + " (revised)"

    for change in (evidence, answers):
        with pytest.raises(ArtifactError, match="different data"):
            evaluate(compose(_gov(tmp_path, _generic(tmp_path, change))))


def test_gold_ids_absent_from_the_corpus_are_noted_not_missed(tmp_path, caplog):
    def ghost(r):
        if r["id"] == "q1":
            r["gold_doc_ids"] = ["no-such-doc"]

    with caplog.at_level(logging.WARNING):
        s = evaluate(compose(_gov(tmp_path, _generic(tmp_path, ghost), "use_router=false")))["mog"]
    assert "name gold documents the corpus does not hold" in caplog.text and "q1" in caplog.text
    assert s["policies"]["oracle"]["gold_hit"]["n"] == 11  # q1 is NaN, not a miss
    assert "does not hold" in (tmp_path / "r" / "generic_example" / "results.md").read_text()


# ------------------------------------------------------------------------------------------------
# 4. secrets


def test_scrub_argv_moves_secrets_to_the_environment():
    env = {}
    argv = scrub_argv(["evaluate.py", "reader=openai", "reader.api_key=sk-test-123", "+ladders.x.summarizer.token=t0k",
                       "reader.max_tokens=64", "reader.api_key=null"], env)
    assert argv == ["evaluate.py", "reader=openai", "reader.api_key=${oc.env:MOGG_SECRET_READER_API_KEY}",
                    "+ladders.x.summarizer.token=${oc.env:MOGG_SECRET_LADDERS_X_SUMMARIZER_TOKEN}",
                    "reader.max_tokens=64", "reader.api_key=null"]
    assert env == {"MOGG_SECRET_READER_API_KEY": "sk-test-123", "MOGG_SECRET_LADDERS_X_SUMMARIZER_TOKEN": "t0k"}
    assert redact({"reader": {"api_key": "sk", "max_tokens": 5, "hf_token": "x", "token_budget": 3},
                   "l": [{"password": "p"}], "k": None}) == {
        "reader": {"api_key": REDACTED, "max_tokens": 5, "hf_token": REDACTED, "token_budget": 3},
        "l": [{"password": REDACTED}], "k": None}


# ------------------------------------------------------------------------------------------------
# 5./7. documented overrides compose; knobs are validated with their names


def test_documented_trainer_overrides_compose():
    cfg = compose(["trainer.checkpoint_every=1", "trainer.requeue=job"])
    assert cfg.trainer.checkpoint_every == 1 and cfg.trainer.requeue == "job"
    cfg = compose(["trainer.requeue=submitit"])
    assert cfg.trainer.requeue == "submitit"


@pytest.mark.parametrize("override,message", [
    ("k=0", r"k=0: the number of snippets .* integer >= 1"),
    ("k=-1", r"k=-1: the number of snippets"),
    ("k_r=0", r"k_r=0: the number of chunks retrieved per level"),
    ("k_r=-2", r"k_r=-2: the number of chunks retrieved per level"),
    ("max_context_tokens=0", r"max_context_tokens=0"),
    ("+ladder@ladders.t=raptor,ladders.t.policies.collapsed_tree.token_budget=-5", r"collapsed tree: token_budget"),
    ("n_folds=1", r"n_folds=1: the number of cross-fitting folds"),
])
def test_knobs_are_validated_before_any_work(tmp_path, override, message):
    q = _generic(tmp_path)
    run = train if override.startswith("n_folds") else evaluate
    with pytest.raises(Exception, match=message):
        run(compose(_gov(tmp_path, q, *override.split(","), "use_router=false")))
    assert not (tmp_path / "a").exists()  # nothing was built


# ------------------------------------------------------------------------------------------------
# 9. text edge cases


@pytest.mark.parametrize("text,sentences", [
    ("Take vitamin D. The dose is 800 IU.", ["Take vitamin D.", "The dose is 800 IU."]),
    ("Give drug x. It works.", ["Give drug x.", "It works."]),
    ("As shown by J. R. Smith et al. Results were good.", ["As shown by J. R. Smith et al. Results were good."]),
    ("Use e.g. this one. But not that.", ["Use e.g. this one.", "But not that."]),
    ("Η ασθένεια είναι σπάνια. Οι ασθενείς ανάρρωσαν.", ["Η ασθένεια είναι σπάνια.", "Οι ασθενείς ανάρρωσαν."]),
    ("病人恢复了。治疗有效！是吗？", ["病人恢复了。", "治疗有效！", "是吗？"]),
    ("Über alles. Ölçüm yapıldı.", ["Über alles.", "Ölçüm yapıldı."]),
    ("Published by U.S. News annually. Next.", ["Published by U.S. News annually.", "Next."]),
    ("Within 6 h. The rest.", ["Within 6 h.", "The rest."]),
])
def test_sentence_splitting(text, sentences):
    assert split_sentences(text) == sentences


def test_a_huge_document_is_capped_in_units_and_contexts(caplog):
    from mogg.data.records import Document
    from mogg.ladders.mog import MoGLadderBuilder

    blob = " ".join(["cell"] * 150_000)  # one 150k-token "sentence" (no full stop)
    with caplog.at_level(logging.WARNING):
        lad = MoGLadderBuilder(n_levels=2, document_level=True).build([Document("big", "", blob), Document("s", "", "Short one.")])
    assert "1 sentence(s) longer than 256 tokens were cut" in caplog.text
    assert max(len(t.split()) for t in lad.units.text) <= 256
    ctx, n_cut = cap_contexts([[lad.texts(2)[0], "more"], ["short"]], 4096)
    assert n_cut == 1 and len(ctx[0]) == 1 and len(ctx[0][0].split()) == 4096 and ctx[1] == ["short"]


def test_gzip_input_is_read_not_called_bad_utf8(tmp_path):
    rows = [{"id": f"d{i}", "title": "T", "content": f"Text number {i}."} for i in range(3)]
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert [d.id for d in MedRAGJsonl(str(gz))] == ["d0", "d1", "d2"]
    assert not MedRAGJsonl(str(gz)).splits_by_bytes  # shards fall back to splitting by position
    with pytest.raises(DataError, match="gzip-compressed: a shard cannot seek"):
        list(iter_jsonl(gz, 0, 10))
    js = tmp_path / "x.json.gz"
    js.write_bytes(gzip.compress(b'{"a": 1}'))
    assert load_json(js) == {"a": 1}
    txt = tmp_path / "doc.txt"
    txt.write_bytes(gzip.compress("Plain text.".encode()))
    assert next(iter(PlainText(str(txt)))).content == "Plain text."
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\x1f\x8b" + b"garbage")
    with pytest.raises(DataError, match="corrupt gzip"):
        list(MedRAGJsonl(str(bad)))


def test_json_error_column_is_on_the_line(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"id": "a", "content": "x"}\n{"id": "b", "content": "y"\n')
    with pytest.raises(DataError, match=r"c\.jsonl:2: invalid JSON: Expecting ',' delimiter \(column 27\)"):
        list(MedRAGJsonl(str(f)))


def test_orphaned_temp_dirs_are_cleaned(tmp_path):
    dead = tmp_path / f".ladder.tmp-{_HOST}-999999-x1"
    live = tmp_path / f".ladder.tmp-{_HOST}-{os.getpid()}-x2"
    other = tmp_path / ".ladder.tmp-otherhost-1-x3"
    for d in (dead, live, other):
        d.mkdir()
    write_artifact(tmp_path / "ladder", lambda t: (t / "a.txt").write_text("a"), {"k": 1})
    assert not dead.exists() and live.exists() and other.exists()
    os.utime(other, (0, 0))  # another host's, a day old: stale
    assert clean_stale_temps(tmp_path) == 1 and not other.exists()
