"""Issue 24, items 2 and 4: mogg-route's --set and its input/output, through the real CLI.

Before the fixes: `--set corpus.sources.0.path=...` (the documented recipe, docs/routers.md) raised ConfigTypeError,
`--set garbage` was ignored, `--set retriever.k1=1.2` built every index before refusing, closed
stdin gave an AttributeError, `--out` into a missing folder failed after routing, non-UTF-8 input
gave a codec error without file or line, duplicate ids passed, and a question with no indexable
word got an empty context silently."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, compose

from mogg.run.app import train
from mogg.run.route import apply_overrides, decode_lines, read_questions

GENERIC = ROOT / "examples" / "generic"


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("route")
    corpus = tmp / "orig" / "corpus.jsonl"
    corpus.parent.mkdir()
    shutil.copy(GENERIC / "corpus.jsonl", corpus)
    cfg = compose(["experiment=generic_example", f"questions.path={GENERIC / 'questions.jsonl'}",
                   f"corpus.sources.0.paths={corpus}", f"paths.artifacts={tmp / 'artifacts'}",
                   f"paths.checkpoints={tmp / 'ckpt'}", f"paths.data_dir={tmp}", "router.fit=all", "trainer.max_epochs=10"])
    train(cfg)
    return tmp, tmp / "ckpt" / "generic_example" / "mog" / "final", corpus


def _route(router_dir, artifacts, *args, stdin="Is aspirin an antiplatelet drug?\n", shell_closed=False, env=None):
    env = {**os.environ, "MOGG_DATA_DIR": "", **(env or {})}
    cmd = [sys.executable, "-m", "mogg.run.route", "--checkpoint", str(router_dir), "--artifacts", str(artifacts), *args]
    if shell_closed:  # a closed stdin, as `mogg-route ... <&-` gives
        return subprocess.run(" ".join(map(str, cmd)) + " <&-", shell=True, capture_output=True, text=True, timeout=300, env=env)
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=300, env=env)


def test_moving_a_router_to_another_machine(router, tmp_path):
    tmp, rdir, corpus = router
    moved = tmp_path / "elsewhere" / "corpus.jsonl"
    moved.parent.mkdir()
    shutil.copy(corpus, moved)
    new_dir = tmp_path / "router"
    shutil.copytree(rdir, new_dir)
    corpus.rename(corpus.with_suffix(".gone"))
    try:
        p = _route(new_dir, tmp_path / "art")
        assert p.returncode == 2 and "--set corpus.sources.0.paths=NEW_PATH" in p.stderr, p.stderr[-800:]
        p = _route(new_dir, tmp_path / "art", "--set", f"corpus.sources.0.paths={moved}")
        assert p.returncode == 0, p.stderr[-1500:]
        assert json.loads(p.stdout.splitlines()[0])["context"]
        # the same data-dir setting as train.py: files under the training machine's data folder
        # are found under this machine's MOGG_DATA_DIR
        data = tmp_path / "data"
        (data / "orig").mkdir(parents=True)
        shutil.copy(moved, data / "orig" / "corpus.jsonl")
        p = _route(new_dir, tmp_path / "art", env={"MOGG_DATA_DIR": str(data)})
        assert p.returncode == 0, p.stderr[-1500:]
        assert str(data / "orig" / "corpus.jsonl") in p.stderr
    finally:
        corpus.with_suffix(".gone").rename(corpus)


def test_a_moved_router_routes_from_any_folder_as_in_its_project(tmp_path, monkeypatch):
    """Issue 36: a router trained with relative corpus paths (``data/...``, as every shipped config)
    exited 2 from another folder even with --data-dir, and --set wrote a new ./artifacts there."""
    project = tmp_path / "project"
    (project / "data" / "generic").mkdir(parents=True)
    for f in ("corpus.jsonl", "questions.jsonl"):
        shutil.copy(GENERIC / f, project / "data" / "generic" / f)
    monkeypatch.chdir(project)
    monkeypatch.delenv("MOGG_ARTIFACTS", raising=False)
    cfg = compose(["experiment=generic_example", "questions.path=data/generic/questions.jsonl",
                   "corpus.sources.0.paths=data/generic/corpus.jsonl", "paths.data_dir=data", "paths.artifacts=artifacts",
                   "paths.checkpoints=checkpoints", "router.fit=all", "trainer.max_epochs=10"])
    train(cfg)
    qs = "\n".join(json.loads(line)["question"] for line in (GENERIC / "questions.jsonl").read_text().splitlines()) + "\n"
    here = _route(project / "checkpoints" / "generic_example" / "mog" / "final", project / "artifacts", stdin=qs)
    assert here.returncode == 0, here.stderr[-1500:]
    # another machine: the router and the data copied elsewhere, the project gone
    shutil.copytree(project / "checkpoints" / "generic_example" / "mog" / "final", tmp_path / "moved" / "router")
    shutil.copytree(project / "data", tmp_path / "moved" / "data")
    shutil.rmtree(project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    before = {p for p in tmp_path.rglob("*")}
    for env, args in (({"MOGG_DATA_DIR": str(tmp_path / "moved" / "data")}, []),
                      ({}, ["--data-dir", str(tmp_path / "moved" / "data")])):
        p = subprocess.run([sys.executable, "-m", "mogg.run.route", "--checkpoint", str(tmp_path / "moved" / "router"),
                            *args, "--out", str(elsewhere / "routed.jsonl")], input=qs, capture_output=True, text=True,
                           timeout=300, env={**os.environ, "MOGG_DATA_DIR": "", **env}, cwd=elsewhere)
        assert p.returncode == 0, p.stderr[-1500:]
        assert (elsewhere / "routed.jsonl").read_text() == here.stdout  # routed identically
    written = {p for p in tmp_path.rglob("*")} - before
    assert written and all(p == elsewhere / "routed.jsonl" or elsewhere / "artifacts" in (p, *p.parents) for p in written), \
        sorted(map(str, written))[:5]


def test_every_documented_set_line_applies_to_the_saved_components():
    from omegaconf import OmegaConf

    cfg = compose(["experiment=pubmedqa"])
    comps = OmegaConf.create({"corpus": OmegaConf.to_container(cfg.corpus, resolve=True),
                              "ladder": OmegaConf.to_container(cfg.ladders.mog, resolve=True),
                              "retriever": OmegaConf.to_container(cfg.retriever, resolve=True)})
    docs = (ROOT / "README.md").read_text() + (ROOT / "docs" / "routers.md").read_text()
    lines = re.findall(r"--set ([\w.]+=\S+)", docs)
    assert any(line.startswith("corpus.sources.0.path=") for line in lines)
    for line in lines:
        key, _, value = line.partition("=")
        value = value.rstrip("`,;)")
        value = "/data/moved.json" if "..." in value else value  # a placeholder in the docs
        out = apply_overrides(comps, [f"{key}={value}"])
        assert str(OmegaConf.select(out, key)) == value


@pytest.mark.parametrize("override, message", [
    ("garbage", "expected KEY=VALUE"),
    ("corpus.sources.0.pathz=/x", "is not in the router's saved components"),
    ("retriever.k1=1.2", "changes what the router was trained on"),
    ("ladder.unit_size=3", "changes what the router was trained on"),
])
def test_bad_set_is_refused_before_anything_is_built(router, tmp_path, override, message):
    _, rdir, _ = router
    t = time.perf_counter()
    p = _route(rdir, tmp_path / "fresh_store", "--set", override)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr[-800:]
    assert not (tmp_path / "fresh_store").exists()  # no index was built
    assert time.perf_counter() - t < 60


def test_input_errors_are_one_line_with_file_and_line(router, tmp_path):
    tmp, rdir, _ = router
    art = tmp / "artifacts"
    p = _route(rdir, art, shell_closed=True)
    assert p.returncode == 2 and "<stdin>: closed" in p.stderr and "Traceback" not in p.stderr
    bad = tmp_path / "q.txt"
    bad.write_bytes(b"Is aspirin an antiplatelet drug?\nAsp\xefrin?\n")
    p = _route(rdir, art, "--questions", bad)
    assert p.returncode == 2 and f"{bad}:2: not UTF-8" in p.stderr
    dup = tmp_path / "d.jsonl"
    dup.write_text('{"id": "a", "question": "Is aspirin good?"}\n{"id": "a", "question": "Is it bad?"}\n')
    p = _route(rdir, art, "--questions", dup)
    assert p.returncode == 2 and f"{dup}:2: duplicate id 'a' (first on line 1)" in p.stderr


def test_output_folder_created_and_empty_questions_explicit(router, tmp_path):
    tmp, rdir, _ = router
    out = tmp_path / "new" / "folder" / "routed.jsonl"
    p = _route(rdir, tmp / "artifacts", "--out", out, stdin="Is aspirin an antiplatelet drug?\n?? \U0001f48a !!\n",
               env={"MOGG_DATA_DIR": str(tmp)})  # the training corpus is read under this machine's data folder only
    assert p.returncode == 0, p.stderr[-1500:]
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert recs[0]["context"] and not recs[0].get("empty")
    assert recs[1]["empty"] is True and recs[1]["context"] == [] and "no indexable word" in recs[1]["reason"]
    assert "no indexable word" in p.stderr


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_give_questions_or_one_clear_error(data):
    try:
        questions, ids = read_questions(decode_lines(data, "q.jsonl"), "q.jsonl")
    except ValueError as e:
        assert str(e).startswith("q.jsonl:")
        return
    assert len(questions) == len(ids) == len(set(ids)) and all(q.strip() for q in questions)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40), st.dictionaries(st.sampled_from(["id", "question", "x"]),
                                                                 st.one_of(st.text(max_size=10), st.integers(), st.none()),
                                                                 max_size=3).map(json.dumps)), max_size=6))
def test_any_jsonl_lines_give_questions_or_one_clear_error(lines):
    try:
        questions, ids = read_questions(lines, "<stdin>")
    except ValueError as e:
        assert str(e).startswith("<stdin>:")
        return
    assert len(questions) == len(ids) == len(set(ids))


def test_mogg_route_help_answers_without_loading_torch():
    """Issue 50: ``mogg-route --help`` took 10.7 s on a loaded machine (torch at import); the kinds
    load after the arguments parse. Fails if route.py imports torch (or anything that does) again."""
    import subprocess
    import sys

    code = ("import sys\nfrom mogg.run.route import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'torch loaded'\nfrom mogg.run.route import RoutingSession\n"
            "assert 'torch' in sys.modules")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "--checkpoint" in r.stdout


def test_each_option_s_help_names_the_routers_that_take_it(capsys):
    """Issue 61: ``--calibrate-here``'s help said the action router only, though selector directories
    take it too. Each option's help names exactly the kinds whose ``ROUTE_FLAGS`` hold it ("budget
    router" where every budget-router kind does), so a kind gaining or losing a flag fails here."""
    from mogg.run.budget.registry import KINDS, target_class
    from mogg.run.level_router import LevelRouter
    from mogg.run.route import _FLAG, main

    with pytest.raises(SystemExit):
        main(["--help"])
    entries = re.split(r"\n  (?=-)", capsys.readouterr().out.split("options:", 1)[1])  # one an option
    helps = {e.split()[0].rstrip(","): " ".join(e.split()) for e in entries if e.strip()}
    budget = [target_class(t) for t in KINDS.values()]
    title = {c: c.TITLE.removeprefix("the ").removeprefix("a ") for c in [*budget, LevelRouter]}
    for key, flag in _FLAG.items():
        text = helps[flag]
        takers = [c for c in budget if key in c.ROUTE_FLAGS]
        named = {c for c in budget if title[c] in text}
        if takers and len(takers) == len(budget):
            assert "budget router" in text and named in (set(), set(budget)), (flag, text)
        else:
            assert named == set(takers), (flag, text)
        assert (title[LevelRouter] in text) == (key in LevelRouter.ROUTE_FLAGS), (flag, text)


def test_a_routed_record_explains_itself():
    """Issue 50: a bare ``"action": 359``, a ``decided_by`` without its reason, no sign that an
    aspirin question got a folic-acid explanation, and a cap that cut mid-sentence."""
    from types import SimpleNamespace

    from mogg.retrieval import BM25Retriever
    from mogg.run.budget.explain import LOW_RELEVANCE, action_words, cut_at_sentence_end, decided_why, explained

    assert action_words("L2:4sent", 2, 64) == "the top 2 chunks of level L2:4sent, cut at 64 tokens"
    assert action_words("doc", 1, None) == "the top chunk of level doc, uncut"
    budgets = {"128": {"guard": {"gain": 0.0021, "se": 0.004, "n": 60}}}
    why = decided_why("envelope", {"budget": 128.0, "lambda": 0.0}, budgets, "the action router")
    assert why == ("the guard kept the fixed envelope at B = 128: its validation gain over the envelope was "
                   "+0.002 ± 0.004 (n = 60), not above one standard error")
    assert "deployed the action router" in decided_why("router", {"budget": 128, "lambda": 0.01}, budgets, "the action router")
    assert "cost weight" in decided_why("router", {"budget": None, "lambda": 0.01}, budgets, "the action router")
    whole = "Aspirin lowers preeclampsia risk. It is given from week 12 to week 36 of pregnancy."
    assert cut_at_sentence_end("Aspirin lowers preeclampsia risk. It is given from", whole) == (
        "Aspirin lowers preeclampsia risk.", True)
    assert cut_at_sentence_end(whole, whole) == (whole, False)
    assert cut_at_sentence_end("Aspirin lowers preeclampsia", whole) == ("Aspirin lowers preeclampsia", True)  # one sentence
    docs = ["Low-dose aspirin prevents preeclampsia in women at high risk.",
            "Folic acid before conception prevents neural tube defects.", "Warfarin is reversed by vitamin K."]
    index = SimpleNamespace(parts=[([BM25Retriever().fit(docs)], None)])
    recs = [{"question": "Does aspirin prevent preeclampsia?", "decided_by": "envelope", "context": [{"text": t}]}
            for t in docs[:2]] + [{"question": "Does aspirin prevent preeclampsia?", "decided_by": "envelope", "context": []}]
    explained(recs, index, {"budget": 128, "lambda": 0.0}, budgets, "the action router")
    assert recs[0]["relevance"] == 1.0 and not recs[0]["low_relevance"]
    assert recs[1]["relevance"] < LOW_RELEVANCE and recs[1]["low_relevance"]  # neither aspirin nor preeclampsia
    assert recs[2]["relevance"] == 0.0 and not recs[2]["low_relevance"]  # nothing read: nothing to flag
    assert all(r["why"].startswith("the guard kept the fixed envelope") for r in recs)
