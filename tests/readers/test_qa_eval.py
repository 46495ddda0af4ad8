"""evaluate.py with an LLM reader on a 100-question MIRAGE subset (20 per set): the tiny local model
and the loopback HTTP reader; a run killed halfway resumes without re-asking answered prompts."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT, compose
from test_readers import FakeOpenAI, _build_tiny, _Handler

from mogg.run.app import evaluate


class SlowHandler(_Handler):
    def do_POST(self):
        time.sleep(0.05)  # slow enough that a kill lands mid-run
        super().do_POST()


def _serve():
    srv = FakeOpenAI()
    srv.RequestHandlerClass = SlowHandler
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


def _overrides(tmp_path, mirage, extra=()):
    return [
        f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'a'}", f"paths.reports={tmp_path / 'r'}",
        f"paths.answers={tmp_path / 'answers'}", f"paths.outputs={tmp_path / 'o'}", "run_name=qa",
        "questions=mirage", "questions.per_dataset=20", "corpus.sources.1.min_chars=600",
        "labels=tfidf", "labels.target=qa", "use_router=false", "reader_policies=[cot,fixed:best,labels]",
        *extra,
    ]


def _check_report(tmp_path, n_prompts_expected=None):
    md = (tmp_path / "r" / "qa" / "results.md").read_text()
    assert "QA accuracy" in md and "unparsed" in md.lower()
    for name in ("MMLU-Med", "MedQA-US", "MedMCQA", "PubMedQA*", "BioASQ-Y/N"):
        assert name in md
    recs = [json.loads(line) for line in (tmp_path / "r" / "qa" / "records.jsonl").read_text().splitlines()]
    assert len(recs) == 100
    assert {"raw", "parsed", "correct", "unparsed"} <= set(recs[0]["policies"]["cot"]["reader"])
    metrics = json.loads((tmp_path / "r" / "qa" / "metrics.json").read_text())
    acc = metrics["mog"]["accuracy"]
    assert set(acc) == {"cot", "labels"} | {p for p in acc if p.startswith("fixed:")} and len(acc) == 3
    assert all(acc[p]["datasets"][d]["n"] == 20 for p in acc for d in acc[p]["datasets"])
    return acc


def test_http_reader_killed_and_resumed(tmp_path, mirage):
    srv = _serve()
    try:
        ov = _overrides(tmp_path, mirage, ["reader=openai", f"reader.base_url={srv.url}", "reader.model=fake", "reader.retries=2"])
        proc = subprocess.Popen([sys.executable, str(ROOT / "evaluate.py"), *ov], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cache = tmp_path / "answers" / "answers.jsonl"
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            if cache.exists() and len(cache.read_text().splitlines()) >= 48:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.5)  # requests of the killed run still inside the server's delay land first
        cached = len([ln for ln in cache.read_text().splitlines() if ln.strip()])
        before = srv.requests
        assert 48 <= cached < 300

        evaluate(compose(ov))
        asked_after = srv.requests - before
        distinct = len(srv.answered)
        total_cached = len([ln for ln in cache.read_text().splitlines() if ln.strip()])
        assert total_cached == distinct  # every distinct prompt answered and cached once
        # the rerun asked exactly the prompts the killed run had not cached
        assert asked_after == distinct - cached
        # at most the batch in flight at the kill was asked twice
        assert sum(v - 1 for v in srv.answered.values()) <= 16
        acc = _check_report(tmp_path)
        assert 0 < acc["cot"]["datasets"]["medqa"]["unparsed"] < 20  # the fake server mixes styles and non-answers

        # a third run is answered entirely from the cache
        before = srv.requests
        evaluate(compose(ov))
        assert srv.requests == before
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.timeout(900)
def test_tiny_local_model_reader(tmp_path, mirage):
    model = _build_tiny(tmp_path / "tiny", chat_template=True)
    ov = _overrides(tmp_path, mirage, ["reader=hf", f"reader.name_or_path={model}", "reader.max_new_tokens=4", "reader.batch_size=16"])
    evaluate(compose(ov))
    acc = _check_report(tmp_path)
    # a random model rarely produces a parsable answer; whatever it says is counted, never guessed
    for p in acc.values():
        for d in p["datasets"].values():
            assert d["correct"] + d["unparsed"] <= d["n"]


def test_reader_labels_tiny_model_mirage_reader(tmp_path, mirage):
    """experiment=mirage_reader as documented, with the tiny local model and a local MedRAG-format
    Textbooks copy: reader labels train a router; one accuracy table (policies x sets, unparsed,
    improved/degraded vs CoT) and its plot; a train killed mid-labelling resumes without re-asking."""
    from test_medrag import _textbooks

    from mogg.data.prepare import main as prepare_main
    from mogg.run.app import train

    model = _build_tiny(tmp_path / "tiny", chat_template=True)
    _textbooks(tmp_path / "tb")
    data = tmp_path / "data"
    assert prepare_main(["--corpus", "textbooks", "--from-local", str(tmp_path / "tb"), "--data-dir", str(data), "--no-progress"]) == 0
    ov = [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'a'}", f"paths.reports={tmp_path / 'r'}",
          f"paths.checkpoints={tmp_path / 'c'}", f"paths.answers={tmp_path / 'answers'}", f"paths.outputs={tmp_path / 'o'}",
          "experiment=mirage_reader", f"corpus.sources.0.paths={data}/medrag/textbooks/chunk", "questions.per_dataset=20",
          "reader=hf", f"reader.name_or_path={model}", "reader.max_new_tokens=4", "reader.batch_size=32",
          "n_folds=3", "trainer.max_epochs=20"]
    cache = tmp_path / "answers" / "answers.jsonl"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *ov], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if cache.exists() and len(cache.read_text().splitlines()) >= 96:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = len([ln for ln in cache.read_text().splitlines() if ln.strip()])
    assert 96 <= killed < 500

    cfg = compose(ov)
    train(cfg)  # resumes: the cached prompts are not asked again
    hashes = [json.loads(ln)["prompt_hash"] for ln in cache.read_text().splitlines() if ln.strip()]
    assert len(hashes) == len(set(hashes)) <= 500  # 100 questions x 5 levels, each prompt asked once
    s = evaluate(cfg)["mog"]
    acc = s["accuracy"]
    assert {"cot", "mog_router", "mog_prior", "oracle"} <= set(acc) and sum(p.startswith("fixed:") for p in acc) == 5
    for t in acc.values():
        assert set(t["datasets"]) == {"mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq"}
    # the oracle level answers right wherever some level does
    assert acc["oracle"]["average"]["micro_accuracy"] >= max(acc[p]["average"]["micro_accuracy"] for p in acc if p.startswith("fixed:"))
    md = (tmp_path / "r" / "mirage_reader" / "results.md").read_text()
    assert "| policy | MMLU-Med (n=20) | MedQA-US (n=20)" in md and "unparsed" in md and "improved / degraded vs CoT" in md
    assert (tmp_path / "r" / "mirage_reader" / "mog_accuracy.png").stat().st_size > 0
    assert set(s["accuracy_vs_cot"]["mog_router"]) == {"improved", "degraded", "datasets"}
    header = (tmp_path / "r" / "mirage_reader" / "results.csv").read_text().splitlines()[0]
    assert "acc_medqa" in header and "improved_vs_cot" in header


@pytest.mark.slow  # ~15-20 s: the default run stays under 10 minutes on 2 cores (pytest -m slow runs it)
def test_readme_reader_commands_run_end_to_end(tmp_path, mirage):
    """The README's reader commands, as written, against a loopback OpenAI-compatible server
    (MOGG_READER_URL) and a local MedRAG-format Textbooks copy, shrunk with a few overrides."""
    from test_docs import documented_commands
    from test_medrag import _textbooks

    from mogg.data.prepare import main as prepare_main

    cmds = [(w, a) for w, a in documented_commands() if "experiment=mirage_reader" in a or "experiment=mirage_transfer" in a]
    assert [w.split("python ")[1].split()[0] for w, _ in cmds] == ["train.py", "evaluate.py", "train.py", "evaluate.py"]
    _textbooks(tmp_path / "tb")
    data = tmp_path / "data"
    assert prepare_main(["--corpus", "textbooks", "--from-local", str(tmp_path / "tb"), "--data-dir", str(data), "--no-progress"]) == 0
    shrink = [f"paths.data_dir={mirage.parent}", f"paths.artifacts={tmp_path / 'a'}", f"paths.reports={tmp_path / 'r'}",
              f"paths.checkpoints={tmp_path / 'c'}", f"paths.answers={tmp_path / 'answers'}", f"paths.outputs={tmp_path / 'o'}",
              f"corpus.sources.0.paths={data}/medrag/textbooks/chunk", "questions.per_dataset=6", "n_folds=2",
              "trainer.max_epochs=5"]
    srv = _serve()
    try:
        env = {**os.environ, "MOGG_READER_URL": srv.url}
        for where, args in cmds:
            script = where.split("python ")[1].split()[0]
            extra = ["train_questions.per_dataset=6"] if "experiment=mirage_transfer" in args else []
            p = subprocess.run([sys.executable, str(ROOT / script), *args, *shrink, *extra], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=600)
            assert p.returncode == 0, f"{where}\n{p.stderr[-3000:]}"
    finally:
        srv.shutdown()
        srv.server_close()
    md = (tmp_path / "r" / "mirage_transfer" / "results.md").read_text()
    assert "## QA accuracy of `mog` (reader)" in md and "mog_transfer" in md and "## Transfer: `mog`" in md
    assert (tmp_path / "r" / "mirage_reader" / "mog_accuracy.png").exists()
