"""Readers (tiny local HF model, loopback OpenAI-compatible server), cache, resumable runs, scoring."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mogg.data.records import QAItem
from mogg.readers import (
    MIRAGE_COUNTS,
    AnswerCache,
    OpenAIReader,
    ReaderError,
    accuracy_markdown,
    accuracy_table,
    answer_questions,
    cot_messages,
    parse_answer,
    prompt_hash,
    rag_messages,
)

MIRAGE = Path(__file__).resolve().parents[2].parent / "shared/data/mirage"

# --------------------------------------------------------------------------- tiny HF model


def _build_tiny(dirpath: Path, chat_template: bool, extra_words: tuple[str, ...] = ()) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<pad>", "<unk>", "<s>", "</s>", *"ABCDE", "answer", "is", "the", "yes", "no", "maybe",
             "user", "system", "assistant", ":", ".", "{", "}", '"', "<", ">", "question", "document", *extra_words]
    tk = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )
    if chat_template:
        tok.chat_template = (
            "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
            "{% if add_generation_prompt %}<assistant> {% endif %}"
        )
    # A large init spread keeps a random 1-layer model from emitting the same token everywhere.
    cfg = LlamaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=2, eos_token_id=3, pad_token_id=0, initializer_range=1.0)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(dirpath)
    tok.save_pretrained(dirpath)
    return dirpath


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_llm")
    return _build_tiny(root / "chat", True), _build_tiny(root / "plain", False)


PROMPTS = [
    [{"role": "user", "content": "question A B"}],
    [{"role": "system", "content": "system"}, {"role": "user", "content": "the answer is yes no maybe document"}],
    [{"role": "user", "content": "C"}],
]


def test_hf_reader_generates_greedy_in_order(tiny_models):
    from mogg.readers import HFReader

    reader = HFReader(str(tiny_models[0]), max_new_tokens=6, batch_size=2)
    out = reader.generate(PROMPTS)
    assert len(out) == 3 and all(isinstance(s, str) for s in out)
    assert len(set(out)) > 1, "the tiny model should not answer every prompt alike"
    assert reader.generate(PROMPTS) == out  # greedy: deterministic
    assert [reader.generate([p])[0] for p in PROMPTS] == out  # batching/sorting keeps order
    assert reader.render(PROMPTS[0]).startswith("<s><user> question A B")
    assert reader.config()["model"] == str(tiny_models[0])


def test_hf_reader_plain_rendering_without_chat_template(tiny_models):
    from mogg.readers import HFReader

    reader = HFReader(str(tiny_models[1]), max_new_tokens=4, batch_size=8)
    assert reader.render(PROMPTS[1]) == "system: system\n\nuser: the answer is yes no maybe document\n\nassistant:"
    out = reader.generate(PROMPTS)
    assert len(out) == 3 and all(isinstance(s, str) for s in out)


def test_hf_reader_through_answer_questions(tiny_models, tmp_path):
    from mogg.readers import HFReader

    items = [_item(i) for i in range(5)]
    reader = HFReader(str(tiny_models[0]), max_new_tokens=4, batch_size=2)
    recs = answer_questions(items, [["a snippet"]] * 5, reader, AnswerCache(tmp_path / "a.jsonl"),
                            batch_size=3, show_progress=False)
    assert [r["id"] for r in recs] == [i.id for i in items]
    assert all(isinstance(r["raw"], str) and r["correct"] is (r["parsed"] == "A") for r in recs)
    assert len(AnswerCache(tmp_path / "a.jsonl")) == 5


def test_hf_reader_is_lazy():
    from mogg.readers import HFReader

    reader = HFReader("/nonexistent/model")  # nothing is loaded until generate
    assert reader.config()["model"] == "/nonexistent/model"
    assert reader.generate([]) == []


# --------------------------------------------------------------------------- fake server


def expected_answer(messages: list[dict]) -> str:
    """What the fake server answers: a letter (in varying styles) derived from the prompt."""
    content = messages[-1]["content"]
    letters = [line[0] for line in content.splitlines() if len(line) > 2 and line[0].isupper() and line[1:3] == ". "]
    h = int(hashlib.sha256(content.encode()).hexdigest(), 16)
    letter = letters[h % len(letters)] if letters else "A"
    style = (h // 7) % 5
    return [f'{{"step_by_step_thinking": "...", "answer_choice": "{letter}"}}', f"Answer: ({letter})",
            letter, f"The answer is {letter}.", "I am not sure."][style]


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fail_first=()):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.fail_queue = list(fail_first)
        self.requests = 0
        self.statuses: list[int] = []
        self.answered: Counter = Counter()  # prompt sha -> successful answers
        self.auth: set = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        srv: FakeOpenAI = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.requests += 1
            srv.auth.add(self.headers.get("Authorization"))
            status = srv.fail_queue.pop(0) if srv.fail_queue else 200
            if self.path != "/v1/chat/completions":
                status = 404
            elif body.get("model") == "missing-model":
                status = 400
            srv.statuses.append(status)
            if status == 200:
                key = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
                srv.answered[key] += 1
        if status != 200:
            self._send(status, {"error": {"message": f"fake error {status} for model {body.get('model')}"}})
            return
        assert body["temperature"] == 0.0 and body["max_tokens"] > 0
        text = expected_answer(body["messages"])
        self._send(200, {"object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}]})


@pytest.fixture
def server_factory():
    servers = []

    def make(fail_first=()):
        srv = FakeOpenAI(fail_first)
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _reader(srv, **kw) -> OpenAIReader:
    kw = {"concurrency": 4, "retries": 3, "backoff": 0.01, "timeout": 10, **kw}
    return OpenAIReader(srv.url, "fake-model", **kw)


def test_openai_reader_retries_503_and_429(server_factory, monkeypatch):
    monkeypatch.setenv("MOGG_READER_API_KEY", "sk-test")
    srv = server_factory(fail_first=[503, 429])
    prompts = [[{"role": "user", "content": f"Q{i}\nA. x\nB. y\nC. z"}] for i in range(5)]
    reader = _reader(srv)
    out = reader.generate(prompts)
    assert out == [expected_answer(p) for p in prompts]
    assert srv.requests == 7 and sorted(srv.statuses)[-2:] == [429, 503]
    assert srv.auth == {"Bearer sk-test"}
    assert "sk-test" not in json.dumps(reader.config())


def test_openai_reader_4xx_raises_with_server_message(server_factory):
    srv = server_factory()
    reader = OpenAIReader(srv.url, "missing-model", retries=3, backoff=0.01)
    with pytest.raises(ReaderError, match="fake error 400 for model missing-model"):
        reader.generate([[{"role": "user", "content": "hi"}]])
    assert srv.requests == 1  # not retried


def test_openai_reader_gives_up_after_retries(server_factory):
    srv = server_factory(fail_first=[503] * 10)
    with pytest.raises(ReaderError, match="giving up after 3 attempts"):
        _reader(srv, retries=2, concurrency=1).generate([[{"role": "user", "content": "hi"}]])
    assert srv.requests == 3


def test_openai_reader_connection_error_is_retried():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    reader = OpenAIReader(f"http://127.0.0.1:{port}/v1", "m", retries=1, backoff=0.01, timeout=2)
    with pytest.raises(ReaderError, match="ConnectionError"):
        reader.generate([[{"role": "user", "content": "hi"}]])


# --------------------------------------------------------------------------- prompts


def _item(i=0, dataset="medqa", options=None, answer="A"):
    options = options or {"A": "alpha", "B": "beta", "C": "gamma", "D": "delta"}
    return QAItem(id=f"q{i}", question=f"Question number {i}?", answer=answer, options=options, dataset=dataset)


def test_prompts_and_hash():
    item = _item()
    rag = rag_messages(item, ["first snippet", "second snippet"], step_by_step=True)
    user = rag[-1]["content"]
    assert rag[0]["role"] == "system" and "Document [1] first snippet\nDocument [2] second snippet" in user
    assert "A. alpha\nB. beta\nC. gamma\nD. delta" in user and "answer_choice" in user
    assert "Document" not in cot_messages(item)[-1]["content"]
    assert "step" in cot_messages(item)[-1]["content"]
    assert prompt_hash(rag, {"m": 1}) == prompt_hash(rag_messages(item, ["first snippet", "second snippet"], True), {"m": 1})
    assert prompt_hash(rag, {"m": 1}) != prompt_hash(rag, {"m": 2})
    assert prompt_hash(rag, {"m": 1}) != prompt_hash(rag_messages(item, ["first snippet"], True), {"m": 1})


# --------------------------------------------------------------------------- cache


def test_cache_ignores_and_repairs_a_truncated_last_line(tmp_path):
    path = tmp_path / "answers.jsonl"
    cache = AnswerCache(path)
    cache.put_many([{"prompt_hash": "h1", "raw": "A"}, {"prompt_hash": "h2", "raw": "B"}])
    with open(path, "a") as fh:
        fh.write('{"prompt_hash": "h3", "ra')  # a kill mid-write
    cache = AnswerCache(path)
    assert len(cache) == 2 and cache.get("h2")["raw"] == "B" and cache.get("h3") is None
    cache.put_many([{"prompt_hash": "h3", "raw": "C"}])
    assert [json.loads(line)["prompt_hash"] for line in path.read_text().splitlines()] == ["h1", "h2", "h3"]
    assert AnswerCache(path).get("h3")["raw"] == "C"


def test_cache_refuses_a_corrupt_middle_line(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text('{"prompt_hash": "h1", "raw": "A"}\nnot json\n{"prompt_hash": "h2", "raw": "B"}\n')
    with pytest.raises(ValueError, match="answers.jsonl:2"):
        AnswerCache(path)


# --------------------------------------------------------------------------- MIRAGE runs


@pytest.fixture(scope="module")
def mirage_items():
    if not (MIRAGE / "benchmark.json").exists():
        pytest.skip(f"MIRAGE not found at {MIRAGE}")
    from mogg.data.qa import MirageBenchmark

    return MirageBenchmark(str(MIRAGE / "benchmark.json")).load()


def test_mirage_counts_are_exact(mirage_items):
    counts = Counter(item.dataset for item in mirage_items)
    assert dict(counts) == MIRAGE_COUNTS
    assert sum(counts.values()) == len(mirage_items) == 7663


def _subset(items, per_set=20):
    taken: Counter = Counter()
    out = []
    for item in items:
        if taken[item.dataset] < per_set:
            taken[item.dataset] += 1
            out.append(item)
    return out


class StopAfter:
    """Wraps a reader and raises once more than ``n`` prompts would have been asked (a kill)."""

    def __init__(self, inner, n):
        self.inner, self.n, self.asked = inner, n, 0

    def config(self):
        return self.inner.config()

    def generate(self, prompts):
        if self.asked + len(prompts) > self.n:
            raise RuntimeError("killed")
        self.asked += len(prompts)
        return self.inner.generate(prompts)


def test_killed_run_resumes_without_repeating_prompts(mirage_items, server_factory, tmp_path):
    items = _subset(mirage_items)
    assert len(items) == 100 and set(Counter(i.dataset for i in items).values()) == {20}
    snippets = [[f"Snippet about {it.question[:40]}", "Another snippet."] for it in items]

    srv = server_factory()
    cache = AnswerCache(tmp_path / "run" / "answers.jsonl")
    with pytest.raises(RuntimeError, match="killed"):
        answer_questions(items, snippets, StopAfter(_reader(srv), 50), cache, batch_size=16, show_progress=False)
    assert srv.requests == 48  # three whole batches answered and cached before the "kill"
    cache = AnswerCache(tmp_path / "run" / "answers.jsonl")  # a new process
    assert len(cache) == 48
    resumed = answer_questions(items, snippets, _reader(srv), cache, batch_size=16, show_progress=False)
    assert srv.requests == 100 and set(srv.answered.values()) == {1} and len(srv.answered) == 100

    srv2 = server_factory()
    full = answer_questions(items, snippets, _reader(srv2), AnswerCache(tmp_path / "full.jsonl"),
                            batch_size=16, show_progress=False)
    assert resumed == full

    # A third run is served entirely from the cache.
    again = answer_questions(items, snippets, _reader(srv), AnswerCache(tmp_path / "run" / "answers.jsonl"),
                             show_progress=False)
    assert again == full and srv.requests == 100

    for rec, item in zip(full, items):
        assert rec["id"] == item.id and rec["dataset"] == item.dataset and rec["answer"] == item.answer
        assert rec["parsed"] == parse_answer(rec["raw"], item.options)
        assert rec["unparsed"] == (rec["parsed"] is None)
        assert rec["correct"] == (rec["parsed"] == item.answer)
    table = accuracy_table(full)
    assert list(table["datasets"]) == list(MIRAGE_COUNTS)
    assert table["average"]["unparsed"] == sum(r["unparsed"] for r in full) > 0
    assert "| PubMedQA* | 20 |" in accuracy_markdown(table)


def test_cot_baseline_and_duplicate_prompts_asked_once(server_factory, tmp_path):
    srv = server_factory()
    items = [_item(0), _item(1), _item(0)]  # the third repeats the first prompt
    recs = answer_questions(items, None, _reader(srv), AnswerCache(tmp_path / "a.jsonl"), show_progress=False)
    assert srv.requests == 2 and len(recs) == 3 and recs[0]["raw"] == recs[2]["raw"]
    assert recs[0]["prompt_hash"] == prompt_hash(cot_messages(items[0]), _reader(srv).config())


_CHILD = """
import sys, time
from mogg.data.records import QAItem
from mogg.readers import AnswerCache, answer_questions

class Slow:
    def config(self):
        return {"type": "slow"}
    def generate(self, prompts):
        time.sleep(0.2)
        return ["Answer: " + "ABCD"[len(p[-1]["content"]) % 4] for p in prompts]

items = [QAItem(id=f"q{i}", question=f"Question {i}?", answer="A", dataset="toy",
                options={"A": "a1", "B": "b1", "C": "c1", "D": "d1"}) for i in range(60)]
answer_questions(items, None, Slow(), AnswerCache(sys.argv[1]), batch_size=4, show_progress=False)
"""


def test_sigkill_midway_then_rerun_asks_only_the_rest(tmp_path):
    path = tmp_path / "answers.jsonl"
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(_CHILD))
    proc = subprocess.Popen([sys.executable, str(script), str(path)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().count("\n") >= 12:
                break
            assert proc.poll() is None, "child ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("child wrote no answers in time")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    done = len(AnswerCache(path))
    assert 12 <= done < 60

    asked = []

    class Counting:
        def config(self):
            return {"type": "slow"}

        def generate(self, prompts):
            asked.extend(p[-1]["content"] for p in prompts)
            return ["Answer: " + "ABCD"[len(p[-1]["content"]) % 4] for p in prompts]

    items = [QAItem(id=f"q{i}", question=f"Question {i}?", answer="A", dataset="toy",
                    options={"A": "a1", "B": "b1", "C": "c1", "D": "d1"}) for i in range(60)]
    recs = answer_questions(items, None, Counting(), AnswerCache(path), batch_size=4, show_progress=False)
    assert len(asked) == 60 - done and len(set(asked)) == len(asked)
    assert len(recs) == 60 and not any(r["unparsed"] for r in recs)


# --------------------------------------------------------------------------- scoring


def test_accuracy_table_counts_unparsed_as_wrong_and_macro_averages():
    def rec(ds, correct, unparsed=False):
        return {"dataset": ds, "correct": correct, "unparsed": unparsed}

    records = ([rec("bioasq", True)] * 3 + [rec("bioasq", False, True)]
               + [rec("mmlu", True)] + [rec("mmlu", False)] * 3 + [rec("mmlu", False, True)] * 4)
    table = accuracy_table(records)
    bio, mmlu = table["datasets"]["bioasq"], table["datasets"]["mmlu"]
    assert list(table["datasets"]) == ["mmlu", "bioasq"]  # MIRAGE order
    assert (bio["n"], bio["accuracy"], bio["unparsed"], bio["unparsed_rate"]) == (4, 0.75, 1, 0.25)
    assert (mmlu["n"], mmlu["accuracy"], mmlu["unparsed"], mmlu["unparsed_rate"]) == (8, 0.125, 4, 0.5)
    assert math.isclose(bio["se"], math.sqrt(0.75 * 0.25 / 4))
    avg = table["average"]
    assert math.isclose(avg["accuracy"], (0.75 + 0.125) / 2)  # macro, not 4/12
    assert math.isclose(avg["micro_accuracy"], 4 / 12)
    assert math.isclose(avg["se"], math.sqrt(bio["se"] ** 2 + mmlu["se"] ** 2) / 2)
    assert (avg["n"], avg["unparsed"]) == (12, 5)
    md = accuracy_markdown(table)
    assert "| MMLU-Med | 8 | 12.50 |" in md and "| BioASQ-Y/N | 4 | 75.00 |" in md and "macro" in md
