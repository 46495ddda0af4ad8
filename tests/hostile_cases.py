"""Hostile-input replay (issues 24, 35, 46): bad inputs and faults over every input surface, each
classified as a clear error (the expected error type, naming the file or the knob), a correct
result, a traceback (any other exception: a bug), a crash (a process killed by a signal), a silent
wrong result (no error where one is due), a lost result (a run's outputs replaced, mixed or
missing) or a leak (a secret in a file a run wrote). ``tests/cli/test_hostile_replay.py`` runs it
(each group of :func:`case_groups` on its own); ``python tests/hostile_cases.py`` prints the table and
the counts. The cases through the real entry points (sweeps, stale routers, secrets, collect, one-line
errors) are in ``tests/hostile_runs.py``;
shared router directories and secrets of every shape (issue 46) in ``tests/hostile_shared.py``; the
command lines of issue 59 (a command's own input as its output, stopword-only questions, full and
read-only disks, script flags) in ``tests/hostile_cli.py`` (``--only cli``: those alone); re-sealed
directories' values and reused stores (issue 59) in ``tests/hostile_stores.py``; the
credentials of issue 59 (every shape planted the wrong way, and where each leaked) in
``tests/hostile_secrets.py``.

Surfaces: question files (generic jsonl, SQuAD), corpus files (MedRAG jsonl), router
directories, run knobs (composed with the real Hydra config and checked as the entry points
do), the leakage guard, secrets on the command line, and mogg-route's input and ``--set``
(through the functions its ``main`` calls; the CLI itself in ``test_route_cli.py``). Kill and
concurrency faults run through the real CLI in ``test_fault_injection.py`` and
``test_concurrent_artifacts.py``.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOOD_Q = {"id": "q1", "question": "Is aspirin an antiplatelet drug?", "answer": "yes"}
GOOD_D = {"id": "d1", "title": "Aspirin", "content": "Aspirin inhibits platelet aggregation."}


@dataclass
class Case:
    surface: str
    name: str
    run: Callable[[Path], object]  # gets a fresh temporary folder
    expect: str  # "error" (a clear error naming `names`) or "ok"
    names: str = ""  # what the error message must contain ("{tmp}" = the case's folder)
    errors: tuple = (ValueError,)


def _jsonl(tmp: Path, name: str, rows: list, raw: bytes | None = None) -> Path:
    p = tmp / name
    p.write_bytes(raw if raw is not None else b"".join(
        (r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows))
    return p


def _qa_cases() -> list[Case]:
    from mogg.data.qa import GenericQA

    def load(rows=None, raw=None):
        return lambda tmp: GenericQA(str(_jsonl(tmp, "q.jsonl", rows or [], raw))).load()

    bad = {
        "empty file": load(raw=b""),
        "only blank lines": load(raw=b"\n\n  \n"),
        "not JSON": load(raw=b"{not json}\n"),
        "a JSON array line": load(rows=[[1, 2]]),
        "a JSON string line": load(rows=["question"]),
        "missing id": load(rows=[{"question": "q?", "answer": "a"}]),
        "missing question": load(rows=[{"id": "1", "answer": "a"}]),
        "missing answer": load(rows=[{"id": "1", "question": "q?"}]),
        "empty question": load(rows=[{"id": "1", "question": "", "answer": "a"}]),
        "question is a number": load(rows=[{"id": "1", "question": 5, "answer": "a"}]),
        "question is a list": load(rows=[{"id": "1", "question": ["q"], "answer": "a"}]),
        "options is a list": load(rows=[{**GOOD_Q, "options": ["a", "b"]}]),
        "option text is a number": load(rows=[{**GOOD_Q, "options": {"A": 1, "B": "no"}, "answer": "A"}]),
        "answer not an option": load(rows=[{**GOOD_Q, "options": {"A": "x", "B": "y"}, "answer": "C"}]),
        "duplicate ids": load(rows=[GOOD_Q, GOOD_Q]),
        "gold_doc_ids is a string": load(rows=[{**GOOD_Q, "gold_doc_ids": "d1"}]),
        "gold_evidence holds a number": load(rows=[{**GOOD_Q, "gold_evidence": ["x", 3]}]),
        "invalid UTF-8": load(raw=json.dumps(GOOD_Q).encode()[:-2] + b"\xff\xfe\"}\n"),
        "latin-1 text": load(raw=json.dumps(GOOD_Q).replace("aspirin", "asp\u00efrin").encode("latin-1")
                             .replace(b"\\u00ef", b"\xef") + b"\n"),
        "truncated last line": load(raw=json.dumps(GOOD_Q).encode() + b"\n" + json.dumps(GOOD_Q).encode()[:20]),
        "NUL bytes": load(raw=b"\x00\x00\x00\n"),
        "trailing comma": load(raw=b'{"id": "1", "question": "q?", "answer": "a",}\n'),
        "id is null": load(rows=[{**GOOD_Q, "id": None}]),
        "answer is null": load(rows=[{**GOOD_Q, "answer": None}]),
        "a binary blob": load(raw=bytes(range(256)) * 4),
        "missing file": lambda tmp: GenericQA(str(tmp / "nope.jsonl")).load(),
        "a directory": lambda tmp: GenericQA(str(tmp)).load(),
    }
    cases = [Case("questions", n, f, "error", "{tmp}") for n, f in bad.items()]
    cases.append(Case("questions", "negative limit", lambda tmp: GenericQA(str(tmp / "q.jsonl"), limit=-1), "error",
                      "limit"))
    ok = {
        "blank lines between rows": load(raw=json.dumps(GOOD_Q).encode() + b"\n\n"),
        "a UTF-8 BOM": load(raw=b"\xef\xbb\xbf" + json.dumps(GOOD_Q).encode() + b"\n"),
        "CRLF line ends": load(raw=json.dumps(GOOD_Q).encode() + b"\r\n"),
        "unicode question": load(rows=[{**GOOD_Q, "question": "\u963f\u53f8\u5339\u6797\u662f\u4ec0\u4e48? \U0001f48a"}]),
        "answer given as option text": load(rows=[{**GOOD_Q, "options": {"A": "yes", "B": "no"}, "answer": "yes"}]),
    }
    cases += [Case("questions", n, f, "ok") for n, f in ok.items()]
    return cases


def _squad_cases() -> list[Case]:
    from mogg.data.squad import SquadQA

    def load(obj=None, raw=None):
        def run(tmp):
            p = tmp / "c.json"
            p.write_bytes(raw if raw is not None else json.dumps(obj).encode())
            return SquadQA(str(p)).load()
        return run

    par = {"context": "Masks reduce transmission. Fever is common.", "document_id": 1,
           "qas": [{"id": 1, "question": "What reduces it?", "answers": [{"text": "Masks", "answer_start": 0}]}]}
    bad = {
        "not JSON": load(raw=b"{"),
        "no data key": load({"version": "1"}),
        "data is a dict": load({"data": {"x": 1}}),
        "paragraphs missing": load({"data": [{}]}),
        "context not a string": load({"data": [{"paragraphs": [{**par, "context": 7}]}]}),
        "answer_start a string": load({"data": [{"paragraphs": [{**par, "qas": [
            {"id": 1, "question": "q", "answers": [{"text": "Masks", "answer_start": "0"}]}]}]}]}),
        "answer not in the paper": load({"data": [{"paragraphs": [{**par, "qas": [
            {"id": 1, "question": "q", "answers": [{"text": "vaccines", "answer_start": 0}]}]}]}]}),
        "duplicate question ids": load({"data": [{"paragraphs": [{**par, "qas": par["qas"] * 2}]}]}),
        "duplicate document ids": load({"data": [{"paragraphs": [par, par]}]}),
        "invalid UTF-8": load(raw=b'{"data": "\xff"}'),
    }
    return [Case("questions (SQuAD)", n, f, "error", "{tmp}") for n, f in bad.items()] + [
        Case("questions (SQuAD)", "valid paper", load({"data": [{"paragraphs": [par]}]}), "ok")]


def _corpus_cases() -> list[Case]:
    from mogg.data.corpus import Corpus, MedRAGJsonl

    def load(rows=None, raw=None, name="c.jsonl"):
        return lambda tmp: list(Corpus([MedRAGJsonl(str(_jsonl(tmp, name, rows or [], raw)))]))

    bad = {
        "not JSON": load(raw=b"nope\n"),
        "missing id": load(rows=[{"content": "x"}]),
        "missing content": load(rows=[{"id": "1"}]),
        "empty content": load(rows=[{"id": "1", "content": ""}]),
        "content is a number": load(rows=[{"id": "1", "content": 3}]),
        "title is a list": load(rows=[{**GOOD_D, "title": ["a"]}]),
        "duplicate ids": load(rows=[GOOD_D, GOOD_D]),
        "invalid UTF-8": load(raw=b'{"id": "1", "content": "\xff\xfe"}\n'),
        "a JSON array line": load(rows=[[GOOD_D]]),
        "truncated gzip": load(raw=b"\x1f\x8b\x08\x00\x00\x00", name="c.jsonl.gz"),
        "a binary blob": load(raw=bytes(range(256)) * 4),
        "no files match": lambda tmp: list(Corpus([MedRAGJsonl(str(tmp / "none*.jsonl"))])),
    }
    return [Case("corpus", n, f, "error", "{tmp}") for n, f in bad.items()] + [
        Case("corpus", "valid rows", load(rows=[GOOD_D]), "ok"),
        Case("corpus", "blank line and BOM", load(raw=b"\xef\xbb\xbf" + json.dumps(GOOD_D).encode() + b"\n\n"), "ok")]


def _router_dir_cases() -> list[Case]:
    import numpy as np
    import torch

    from mogg.core.artifacts import ArtifactError, read_manifest, write_artifact
    from mogg.routing.router_dir import TrainedRouter

    cache: dict[str, Path] = {}

    def trained(tmp: Path) -> Path:
        if "dir" not in cache:
            sys.path.insert(0, str(ROOT / "tests"))
            from folders import on_path

            on_path()  # test_router_model is in tests/routing/
            from test_router_model import SETTINGS, TC, _spec, _toy

            from mogg.routing.fitting.kfold import train_router

            x, labels, u, qs = _toy()
            r = train_router(x, labels, u, qs, np.arange(120), np.arange(120, 140), SETTINGS, TC, 3, _spec())
            cache["dir"] = Path(tempfile.mkdtemp(prefix="hostile_router_")) / "final"
            r.save(cache["dir"])
        d = tmp / "router"
        shutil.copytree(cache["dir"], d)
        return d

    def replant(d: Path, edit: Callable[[Path], None]) -> Path:
        """Change the payload and rewrite a matching manifest (so only the content is wrong)."""
        m = read_manifest(d, verify=False)
        payload = {f: (d / f).read_bytes() for f in m["files"]}
        shutil.rmtree(d)  # written afresh: an equal config at the same key would be adopted, not replaced

        def writer(tmp: Path) -> None:
            for f, b in payload.items():
                (tmp / f).write_bytes(b)
            edit(tmp)
        return write_artifact(d, writer, m["config"])

    def case(edit: Callable[[Path], None], manifest_ok: bool = True):
        def run(tmp):
            d = trained(tmp)
            if manifest_ok:
                replant(d, edit)
            else:
                edit(d)
            return TrainedRouter.load(d)
        return run

    def set_json(name, text):
        return lambda d: (d / name).write_text(text)

    def drop_key(key):
        def edit(d):
            spec = json.loads((d / "router.json").read_text())
            spec.pop(key)
            (d / "router.json").write_text(json.dumps(spec))
        return edit

    def tensor(key, value):
        def edit(d):
            from safetensors.torch import load_file, save_file
            state = load_file(d / "router.safetensors")
            state[key] = torch.full_like(state[key], value)
            save_file(state, d / "router.safetensors")
        return edit

    def edit_spec(change: Callable[[dict], None]):
        def edit(d):
            spec = json.loads((d / "router.json").read_text())
            change(spec)
            (d / "router.json").write_text(json.dumps(spec))
        return edit

    def reorder(key):
        def change(spec):
            spec[key] = list(reversed(spec[key]))
        return change

    bad = {
        # issue 35: an edited router.json with a recomputed manifest (the content is wrong, the checksums agree)
        "levels reordered": case(edit_spec(reorder("levels"))),
        "profiles added to a level router": case(edit_spec(lambda sp: sp.update(profiles=["own", "all"]))),
        "decision.fallback_level=9": case(edit_spec(lambda sp: sp["decision"].update(fallback_level=9))),
        "components.max_context_tokens=-5": case(edit_spec(lambda sp: sp.setdefault("components", {}).update(
            max_context_tokens=-5))),
        "prior reordered": case(edit_spec(reorder("prior"))),
        "router.json not JSON": case(set_json("router.json", "{not json")),
        "router.json without network": case(drop_key("network")),
        "router.json without format": case(drop_key("format")),
        "router.json is a list": case(set_json("router.json", "[]")),
        "train_questions.json not JSON": case(set_json("train_questions.json", "nope")),
        "weights NaN": case(tensor("net.0.weight", float("nan"))),
        "weights inf": case(tensor("net.0.bias", float("inf"))),
        "zero spread": case(tensor("std", 0.0)),
        "safetensors truncated": case(lambda d: (d / "router.safetensors").write_bytes(b"\x00" * 10)),
        "file flipped (manifest stale)": case(lambda d: (d / "router.json").write_text("{}"), manifest_ok=False),
        "manifest deleted": case(lambda d: (d / "manifest.json").unlink(), manifest_ok=False),
        "manifest not JSON": case(lambda d: (d / "manifest.json").write_text("{"), manifest_ok=False),
        "not a router directory": lambda tmp: TrainedRouter.load(tmp),
    }
    return [Case("router directory", n, f, "error", "{tmp}", (ArtifactError, ValueError)) for n, f in bad.items()] + [
        Case("router directory", "intact router", case(lambda d: None), "ok")]


def _knob_cases() -> list[Case]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import compose
    from hydra.utils import instantiate

    from mogg.core.runconfig import check_run_config
    from mogg.run.frontier_stage import frontier_settings
    from mogg.run.router_store import router_settings

    def knob(override: str, stage: str = "train"):
        def run(tmp):
            cfg = compose(["experiment=generic_example", f"paths.artifacts={tmp}", override])
            check_run_config(cfg, stage)
            router_settings(cfg)
            frontier_settings(cfg)
            instantiate(cfg.questions)
            return cfg
        return run

    bad = ["k=0", "k=-1", "k=2.5", "k_r=0", "seed=-1", "n_folds=1", "budgets=[0]", "budgets=[x]", "budget_k=0",
           "max_context_tokens=0", "trainer.val_fraction=1.5", "trainer.max_epochs=0", "trainer.batch_size=0",
           "trainer.patience=-1", "router.lr=1e30", "router.lr=0", "router.dropout=1.0", "router.objective=foo",
           "router.decision=foo", "router.fit=foo", "+frontier=matched frontier.guard_se=-1", "router.budget=0", "use_router=maybe",
           "evaluate_after=2", "+frontier=matched frontier.guard=yes", "+frontier=matched frontier.depth=0", "questions.limit=-5",
           "threads=0", "shard.count=0", "reader_batch_size=0"]
    out = []
    for o in bad:
        if o.startswith("+frontier"):
            knob_ = o.split()[1]  # "frontier.depth=0"

            def run(tmp, knob_=knob_):
                cfg = compose(["experiment=generic_example", "frontier=matched", knob_])
                frontier_settings(cfg)
            out.append(Case("knobs", o, run, "error", knob_.split("=")[0]))
            continue
        key = o.split("=")[0]
        out.append(Case("knobs", o, knob(o), "error", key.split(".")[-1] if key != "questions.limit" else "limit"))
    out.append(Case("knobs", "threads=0 (configure)", lambda tmp: importlib.import_module("mogg.core.threads").configure_threads(0),
                    "error", "threads"))
    out.append(Case("knobs", "defaults", knob("seed=0"), "ok"))

    def unit(tmp):  # an evidence unit the selector does not know: refused by name before anything runs
        frontier_settings(compose(["experiment=transfer_selector_generic", "frontier.routers.selector.transfer_unit=paragraph"]))
    out.append(Case("knobs", "frontier.routers.selector.transfer_unit=paragraph", unit, "error", "transfer_unit"))
    return out


def _guard_cases() -> list[Case]:
    from mogg.core.secrets import scrub_argv
    from mogg.data.leakage import LeakageError

    def leak(tmp):
        sys.path.insert(0, str(ROOT / "tests"))
        from conftest import compose

        from mogg.run.prepare_stage import prepare_all
        q = _jsonl(tmp, "q.jsonl", [{**GOOD_Q, "gold_doc_ids": ["d1"], "gold_evidence": [GOOD_D["content"]]}])
        c = _jsonl(tmp, "c.jsonl", [GOOD_D, {"id": "d2", "content": "Unrelated text about the weather today."}])
        cfg = compose(["experiment=generic_example", f"questions.path={q}", f"corpus.sources.0.paths={c}",
                       f"paths.artifacts={tmp / 'a'}", "corpus.allow_gold=false"])
        prepare_all(cfg)

    def secret(tmp):
        env: dict = {}
        out = scrub_argv(["reader.api_key=sk-SECRET123"], env)
        if "sk-SECRET123" in " ".join(out):
            raise AssertionError("the secret stayed on the command line")
        return out

    return [Case("leakage", "corpus holds the gold document", leak, "error", "d1", (LeakageError,)),
            Case("secrets", "api key on the command line", secret, "ok")]


def _route_cases() -> list[Case]:
    """mogg-route's input and --set, through the functions its main() calls in order (the full
    CLI runs in test_route_cli.py)."""
    from omegaconf import OmegaConf

    from mogg.run.route import decode_lines, read_questions
    from mogg.run.route_paths import route_components

    def questions(raw: bytes):
        def run(tmp):
            src = str(tmp / "q.jsonl")
            qs, _ = read_questions(decode_lines(raw, src), src)
            if not qs:
                raise ValueError(f"{src}: no questions")
            return qs
        return run

    def comps(tmp):
        (tmp / "c.jsonl").write_text(json.dumps(GOOD_D) + "\n")
        return OmegaConf.create({"corpus": {"_target_": "mogg.data.corpus.Corpus", "sources": [
            {"_target_": "mogg.data.corpus.MedRAGJsonl", "paths": str(tmp / "c.jsonl")}]},
            "retriever": {"k1": 1.5, "backend": "scipy"}, "ladder": {"unit_size": 1}, "data_dir": str(tmp)})

    def override(*sets):
        return lambda tmp: route_components(comps(tmp), list(sets), tmp)

    bad = {
        "not UTF-8": (questions(b"Is aspirin good?\nAsp\xefrin?\n"), "q.jsonl:2"),
        "UTF-16 file": (questions("Is aspirin good?".encode("utf-16")), "q.jsonl:1"),
        "JSON list line": (questions(b"[1, 2]\n"), "q.jsonl:1"),
        "JSON without question": (questions(b'{"id": "a"}\n'), "q.jsonl:1"),
        "JSON id is a list": (questions(b'{"id": [1], "question": "q?"}\n'), "q.jsonl:1"),
        "JSON id is a bool": (questions(b'{"id": true, "question": "q?"}\n'), "q.jsonl:1"),
        "duplicate id": (questions(b'{"id": "a", "question": "q?"}\n{"id": "a", "question": "r?"}\n'), "q.jsonl:2"),
        "duplicate plain/JSON id": (questions(b'{"id": "2", "question": "q?"}\nplain?\n'), "q.jsonl:2"),
        "broken JSON": (questions(b'{"question": "q?"\n'), "q.jsonl:1"),
        "only blank lines": (questions(b"\n \n\r\n"), "no questions"),
        "--set without =": (override("garbage"), "expected KEY=VALUE"),
        "--set unknown key": (override("corpus.sources.0.pathz=/x"), "pathz"),
        "--set index out of range": (override("corpus.sources.3.paths=/x"), "corpus.sources.3"),
        "--set a trained knob": (override("retriever.k1=1.2"), "retriever.k1"),
        "--set ladder size": (override("ladder.unit_size=3"), "ladder.unit_size"),
        "--set empty key": (override("=x"), "expected KEY=VALUE"),
        "--set bad YAML value": (override("retriever.backend=[x"), "retriever.backend"),
        "--set to a missing file": (override("corpus.sources.0.paths=/nonexistent/c.jsonl"),
                                    "--set corpus.sources.0.paths: /nonexistent/c.jsonl does not exist"),
    }
    ok = {
        "BOM and CRLF": questions(b"\xef\xbb\xbfIs aspirin good?\r\nIs it bad?\r\n"),
        "plain and JSON lines mixed": questions(b'Is aspirin good?\n{"id": "x", "question": "q?"}\n'),
        "integer ids": questions(b'{"id": 1, "question": "q?"}\n{"id": 2, "question": "r?"}\n'),
        "--set a moved corpus": lambda tmp: (shutil.copy(tmp / "c.jsonl", tmp / "d.jsonl") if comps(tmp) else None,
                                            override(f"corpus.sources.0.paths={tmp / 'd.jsonl'}")(tmp)),
        "--set the backend": override("retriever.backend=numpy"),
    }
    return [Case("mogg-route", n, f, "error", names) for n, (f, names) in bad.items()] + [
        Case("mogg-route", n, f, "ok") for n, f in ok.items()]


def case_groups() -> dict[str, list[Case]]:
    """The cases by the module that holds them, in replay order (each group replays on its own: the
    test runs one per pytest-xdist job, so the ~2 minutes of the replay spread over the workers)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hostile_cli import cli_cases
    from hostile_runs import run_cases
    from hostile_secrets import secret_cases
    from hostile_shared import shared_cases
    from hostile_stores import store_cases

    return {"inputs": (_qa_cases() + _squad_cases() + _corpus_cases() + _router_dir_cases() + _knob_cases()
                       + _guard_cases() + _route_cases()),
            "runs": run_cases(), "shared": shared_cases(), "cli": cli_cases(), "stores": store_cases(),
            "secrets": secret_cases()}


def all_cases() -> list[Case]:
    return [c for cases in case_groups().values() for c in cases]


def replay(cases: list[Case] | None = None) -> list[dict]:
    """Run every case in a fresh temporary folder; one result row per case."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hostile_runs import Crashed, Leaked, LostResult, SilentWrong

    found = {LostResult: "lost", SilentWrong: "silent", Leaked: "leaked", Crashed: "crash"}
    rows = []
    for c in cases or all_cases():
        tmp = Path(tempfile.mkdtemp(prefix="hostile_"))
        outcome, detail = "ok", ""
        try:
            c.run(tmp)
            outcome = "correct" if c.expect == "ok" else "silent"
        except tuple(found) as e:  # the case itself found results lost or wrong, a secret on disk, a crash
            rows.append({"surface": c.surface, "case": c.name, "outcome": found[type(e)], "detail": str(e)[:200]})
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        except Exception as e:
            from mogg.core.runconfig import user_error

            err = user_error(e) if not isinstance(e, c.errors) else e
            if err is None or not isinstance(err, c.errors):
                hydra = type(e).__name__ == "ConfigCompositionException"  # Hydra's own one-line error
                if not (hydra and c.names and c.names in str(e)):
                    rows.append({"surface": c.surface, "case": c.name, "outcome": "traceback",
                                 "detail": f"{type(e).__name__}: {str(e)[:200]}"})
                    shutil.rmtree(tmp, ignore_errors=True)
                    continue
                err = e
            msg = str(err)
            named = c.names.replace("{tmp}", str(tmp)) in msg if c.names else True
            if c.expect == "error" and named:
                outcome = "clear error"
            else:
                outcome, detail = ("unclear error" if c.expect == "error" else "wrong error"), msg[:200]
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rows.append({"surface": c.surface, "case": c.name, "outcome": outcome, "detail": detail})
    return rows


if __name__ == "__main__":
    import collections
    import logging

    logging.disable(logging.WARNING)
    # --only cli: the cases of tests/hostile_cli.py alone (issue 59)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if only not in (None, "cli"):
        raise SystemExit(f"--only {only}: the one subset is 'cli'")
    if only:
        sys.path.insert(0, str(ROOT / "tests"))
        from hostile_cli import cli_cases
    res = replay(cli_cases() if only else None)
    for r in res:
        if r["outcome"] not in ("clear error", "correct"):
            print(f"{r['surface']:18} {r['case']:40} {r['outcome']:14} {r['detail']}")
    counts = collections.Counter(r["outcome"] for r in res)
    print(len(res), "cases:", dict(counts))
    print(", ".join(f"{counts.get(k, 0)} {k}" for k in ("traceback", "crash", "silent", "lost", "leaked")))
