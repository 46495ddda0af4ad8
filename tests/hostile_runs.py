"""Hostile cases of issue 35, through the real entry points (``train.py``, ``evaluate.py``,
``mogg-route``, ``collect``): lost or mixed runs, stale routers, knobs that did nothing, secrets
on disk, silent nonsense, and tracebacks. :func:`run_cases` is a group of ``hostile_cases.case_groups``.

The entry points run in this process (``runpy``, as ``python train.py ...`` would, ~1-3 s each on
the 12-question generic example with ``debug=tiny``), writing only under the case's temporary
folder; one artifact store is shared by all cases. A case raises :class:`LostResult` when a run's
outputs were replaced, mixed or lost, :class:`SilentWrong` when a result is wrong without a word.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERIC = ROOT / "examples" / "generic"
BASE = ["experiment=generic_example", "debug=tiny"]


class LostResult(Exception):
    """A run's outputs were replaced, mixed with another run's, or never written."""


class SilentWrong(Exception):
    """A result is wrong (or a secret is on disk) and nothing said so."""


class Leaked(Exception):
    """A secret was found in a file a run wrote."""


class Crashed(Exception):
    """A process died (a signal, e.g. SIGSEGV) instead of refusing its input."""


class CLIFailed(ValueError):
    """An entry point exited with a one-line error (status 2, or Hydra's own composition error)."""


_STORE: dict[str, Path] = {}


def _shared(name: str) -> Path:
    if name not in _STORE:
        if not _STORE:
            import atexit

            atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _STORE.values()])
        _STORE[name] = Path(tempfile.mkdtemp(prefix=f"hostile_{name}_"))
    return _STORE[name]


def cli(script: str, args: list[str], tmp: Path) -> tuple[int, str]:
    """Run ``python <script> <args>`` in this process with every output under ``tmp``: (exit status, output)."""
    paths = [f"paths.reports={tmp / 'reports'}", f"paths.checkpoints={tmp / 'ckpt'}", f"paths.outputs={tmp / 'outputs'}",
             f"paths.answers={tmp / 'answers'}", f"paths.artifacts={_shared('artifacts')}",
             f"hydra.sweep.dir={tmp / 'multirun'}", "slots=null"]
    given = {a.split("=", 1)[0] for a in args}
    paths = [p for p in paths if p.split("=", 1)[0] not in given]  # a case's own value wins
    out = io.StringIO()
    argv, env = sys.argv, dict(os.environ)
    sys.argv = [str(ROOT / script), *args, *paths]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(str(ROOT / script), run_name="__main__")
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv
        os.environ.clear()
        os.environ.update(env)
    return rc, out.getvalue()


def expect_error(script: str, args: list[str], tmp: Path) -> None:
    """Raise :class:`CLIFailed` on a one-line error, RuntimeError on a traceback; return on success
    (where an error was due: a silent result)."""
    rc, text = cli(script, args, tmp)
    if rc == 0:
        return
    if "Traceback (most recent call last)" in text or rc not in (1, 2):
        raise RuntimeError(f"exit {rc}: {text[-600:]}")
    raise CLIFailed(text.strip().splitlines()[-1] if rc == 2 else text)


def expect_ok(script: str, args: list[str], tmp: Path) -> str:
    rc, text = cli(script, args, tmp)
    if rc != 0:
        raise RuntimeError(f"exit {rc}: {text[-600:]}")
    return text


def _trained(kind: str, extra: list[str]) -> Path:
    """A checkpoint folder trained once per session (copied into each case that needs it)."""
    d = _shared(f"trained_{kind}")
    if not (d / "ckpt").exists():
        expect_ok("train.py", [*BASE, *extra], d)
    return d / "ckpt"


def _with_ckpt(tmp: Path, kind: str, extra: list[str]) -> None:
    shutil.copytree(_trained(kind, extra), tmp / "ckpt")


def _files_holding(root: Path, needles: list[str]) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            hits += [f"{p.relative_to(root)} holds {n!r}" for n in needles if n.encode() in data]
    return hits


# ------------------------------------------------------------------------------------------------
# 1. lost runs


def _sweep_keeps_every_job(tmp: Path) -> None:
    expect_ok("train.py", ["-m", *BASE, "router.objective=utility,bce", "evaluate_after=true"], tmp)
    got = sorted(p.name for p in (tmp / "reports").iterdir())
    want = ["debug_router.objective=bce", "debug_router.objective=utility"]
    if got != want:
        raise LostResult(f"the sweep's reports are {got}, not one per job {want}")
    if len({(tmp / "reports" / n / "metrics.json").read_text() for n in want}) != 2:
        raise LostResult("the two jobs' reports are identical: one job's results replaced the other's")


def _sweep_seeds_get_s_suffix(tmp: Path) -> None:
    expect_ok("train.py", ["-m", *BASE, "seed=0,1", "run_name=fixed"], tmp)
    got = sorted(p.name for p in (tmp / "ckpt").iterdir())
    if got != ["fixed_s0", "fixed_s1"]:
        raise LostResult(f"a sweep over seeds with one run_name wrote {got}, not fixed_s0 and fixed_s1")


def _sweep_repeating_a_job_is_refused(tmp: Path) -> None:
    expect_error("train.py", ["-m", *BASE, "seed=0,0"], tmp)
    if (tmp / "ckpt").exists():
        raise LostResult("the refused sweep trained something")


def _report_dir_over_other_runs(tmp: Path) -> None:
    keep = tmp / "reports" / "other_run" / "results.md"
    keep.parent.mkdir(parents=True)
    keep.write_text("another run's report")
    (tmp / "reports" / "notes.txt").write_text("a user's notes")
    _with_ckpt(tmp, "default", [])
    try:
        expect_error("evaluate.py", [*BASE, f"report_dir={tmp / 'reports'}"], tmp)
    finally:
        if not keep.is_file() or not (tmp / "reports" / "notes.txt").is_file():
            raise LostResult("evaluate.py replaced the reports folder: another run's report and a user's file are gone")


def _report_dir_of_another_run(tmp: Path) -> None:
    _with_ckpt(tmp, "default", [])
    expect_ok("evaluate.py", [*BASE, "run_name=debug"], tmp)
    other = tmp / "reports" / "debug"
    before = (other / "metrics.json").read_bytes()
    shutil.copytree(tmp / "ckpt" / "debug", tmp / "ckpt" / "second")
    try:
        expect_error("evaluate.py", [*BASE, "run_name=second", f"report_dir={other}"], tmp)
    finally:
        if (other / "metrics.json").read_bytes() != before or json.loads((other / "report.json").read_text())[
                "run_name"] != "debug":
            raise LostResult("run 'second' replaced run 'debug''s report")


def _lost_cases() -> dict[str, tuple[Callable, str, str]]:
    return {
        "README sweep: one report per job": (_sweep_keeps_every_job, "ok", ""),
        "sweep over seeds, one run_name": (_sweep_seeds_get_s_suffix, "ok", ""),
        "sweep repeating a job (seed=0,0)": (_sweep_repeating_a_job_is_refused, "error", "would both write"),
        "empty run_name": (lambda tmp: expect_error("train.py", [*BASE, "run_name="], tmp), "error", "run_name"),
        "run_name with a slash": (lambda tmp: expect_error("train.py", [*BASE, "run_name=../x"], tmp), "error", "run_name"),
        "report_dir = the reports folder": (_report_dir_over_other_runs, "error", "report_dir"),
        "report_dir = another run's report": (_report_dir_of_another_run, "error", "report_dir"),
    }


# ------------------------------------------------------------------------------------------------
# 2. stale routers: evaluation with settings other than the ones trained


def _stale(override: str) -> Callable:
    def run(tmp: Path) -> None:
        _with_ckpt(tmp, "default", [])
        expect_error("evaluate.py", [*BASE, override], tmp)
    return run


def _stale_cases() -> dict[str, tuple[Callable, str, str]]:
    out = {f"evaluate with {o}": (_stale(o), "error", o.split("=")[0]) for o in
           ("router.objective=bce", "router.hidden=8", "router=committee", "router.dropout=0.5", "seed=1")}
    out["evaluate with n_folds=3"] = (_stale("n_folds=3"), "error", "n_folds")
    out["evaluate with the trained settings"] = (_stale("router.objective=utility"), "ok", "")
    return out


# ------------------------------------------------------------------------------------------------
# 3. knobs that did nothing are gone (a clear error names them), 4. secrets, 5. silent nonsense


def _site_secret(tmp: Path) -> None:
    site = tmp / "siteconf" / "local"
    site.mkdir(parents=True)
    (site / "site.yaml").write_text("# @package _global_\nreader:\n  api_key: sk-SITESECRET-31337\n"
                                    "  base_url: http://bob:URLPASS-4242@127.0.0.1:9/v1\n")
    args = [*BASE, f"hydra.searchpath=[file://{tmp / 'siteconf'}]", "reader=openai", "reader.model=m",
            "reader.retries=0", "reader.timeout=1", "use_router=false"]
    cli("evaluate.py", args, tmp)  # fails (no server): a failed run must not leave the secret either
    cli("evaluate.py", ["-m", *args, "seed=0,1"], tmp)
    shutil.rmtree(tmp / "siteconf")  # the user's own file: everything else under tmp was written by the runs
    hits = _files_holding(tmp, ["sk-SITESECRET-31337", "URLPASS-4242"])
    if hits:
        raise Leaked("; ".join(hits[:4]))


def _url_secret_on_command_line(tmp: Path) -> None:
    cli("evaluate.py", [*BASE, "reader=openai", "reader.model=m", "reader.retries=0", "reader.timeout=1",
                        "use_router=false", "reader.base_url=http://ann:CLIPASS-777@127.0.0.1:9/v1"], tmp)
    hits = _files_holding(tmp, ["CLIPASS-777"])
    if hits:
        raise Leaked("; ".join(hits[:4]))


def _generic(tmp: Path, rows: list[dict], docs: list[dict]) -> list[str]:
    q, c = tmp / "q.jsonl", tmp / "c.jsonl"
    q.write_text("".join(json.dumps(r) + "\n" for r in rows))
    c.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return [f"questions.path={q}", f"corpus.sources.0.paths={c}"]


_DOCS = [{"id": f"d{i}", "title": f"Topic {i}", "content": f"Topic {i} concerns drug class {i}. It is used for disease "
          f"{i} in adults. Side effect {i} is rare. Monitoring of marker {i} is advised."} for i in range(12)]


def _short_evidence_leak(tmp: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"What is monitored with drug class {i}?", "answer": f"marker {i}",
             "gold_evidence": [f"Monitoring of marker {i} is advised."]} for i in range(12)]
    expect_error("train.py", [*BASE, *_generic(tmp, rows, _DOCS), "corpus.allow_gold=false"], tmp)


def _corpus_holds_the_questions(tmp: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"Which disease is drug class {i} used for in adults?", "answer": f"disease {i}",
             "gold_evidence": [f"Guidelines list disease {i} among the indications after a trial of first-line care."]}
            for i in range(12)]
    docs = _DOCS + [{"id": f"leak{i}", "title": "Q&A", "content": f"{r['question']} Answer: {r['answer']}."}
                    for i, r in enumerate(rows)]
    expect_error("train.py", [*BASE, *_generic(tmp, rows, docs), "corpus.allow_gold=false"], tmp)


def _evidence_nowhere(tmp: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"What is monitored with drug class {i}?", "answer": f"marker {i}",
             "gold_evidence": [f"Clinicians check serum potassium and creatinine every {i + 2} weeks during titration."]}
            for i in range(12)]
    expect_ok("train.py", [*BASE, *_generic(tmp, rows, _DOCS), "corpus.allow_gold=false", "evaluate_after=true"], tmp)
    md = (tmp / "reports" / "debug" / "results.md").read_text()
    if "none of the 12 questions with gold evidence" not in md or " closes " in md:
        raise SilentWrong("the report states a share of the gap although no document holds any question's evidence")


def _one_text_twelve_ids(tmp: Path) -> None:
    rows = [{"id": f"q{i}", "question": "What is monitored with drug class 3?", "answer": "marker 3",
             "gold_evidence": ["Monitoring of marker 3 is advised."]} for i in range(12)]
    expect_ok("train.py", [*BASE, *_generic(tmp, rows, _DOCS), "evaluate_after=true"], tmp)
    if "11 of 12 questions repeat another question" not in (tmp / "reports" / "debug" / "results.md").read_text():
        raise SilentWrong("twelve copies of one question trained and evaluated without a word")


def _cr_only_questions(tmp: Path) -> None:
    from mogg.data.qa import GenericQA

    p = tmp / "q.jsonl"
    p.write_bytes(b"".join(json.dumps({"id": f"q{i}", "question": f"q {i}?", "answer": "a"}).encode() + b"\r"
                           for i in range(3)))
    if len(GenericQA(str(p)).load()) != 3:
        raise SilentWrong("CR-only line ends merged questions")


def _silent_cases() -> dict[str, tuple[Callable, str, str]]:
    return {
        "router.budget=nan (removed knob)": (lambda t: expect_error("train.py", [*BASE, "router.budget=nan"], t), "error", "budget"),
        "+router.cost_weight=1e12 (removed knob)": (
            lambda t: expect_error("train.py", [*BASE, "+router.cost_weight=1e12"], t), "error", "cost_weight"),
        "+router.max_tokens=1 (removed knob)": (
            lambda t: expect_error("train.py", [*BASE, "+router.max_tokens=1"], t), "error", "max_tokens"),
        "api key and URL password in a site config": (_site_secret, "ok", ""),
        "URL password on the command line": (_url_secret_on_command_line, "ok", ""),
        "gold evidence under 12 words in the corpus": (_short_evidence_leak, "error", "gold evidence"),
        "corpus holds the questions with their answers": (_corpus_holds_the_questions, "error", "with its answer"),
        "no question's evidence in any document": (_evidence_nowhere, "ok", ""),
        "twelve ids, one question": (_one_text_twelve_ids, "ok", ""),
        "CR-only line ends (generic jsonl)": (_cr_only_questions, "ok", ""),
    }


# ------------------------------------------------------------------------------------------------
# 6. tracebacks: one line naming the knob or file


def _knob_error(*overrides: str) -> Callable:
    return lambda tmp: expect_error("train.py", [*BASE, *overrides], tmp)


def _frontier_error(*overrides: str) -> Callable:
    return lambda tmp: expect_error("train.py", [*BASE, "frontier=matched", *overrides], tmp)


def _slots_dir_file(tmp: Path) -> None:
    (tmp / "afile").write_text("x")
    rc, text = cli("train.py", [*BASE, "slots=2", f"slots_dir={tmp / 'afile'}"], tmp)
    if rc == 0:
        return
    if "Traceback" in text:
        raise RuntimeError(text[-400:])
    raise CLIFailed(text.strip().splitlines()[-1])


def _route_out(out: Callable[[Path], Path]) -> Callable:
    def run(tmp: Path) -> None:
        from mogg.run.route import main

        q = tmp / "q.txt"
        q.write_text("Is aspirin an antiplatelet drug?\n")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["--checkpoint", str(tmp / "no_router"), "--questions", str(q), "--out", str(out(tmp))])
        if rc == 2 and "--out" in err.getvalue():
            raise CLIFailed(err.getvalue())
        if rc != 0:
            raise RuntimeError(f"exit {rc} without naming --out: {err.getvalue()[-300:]}")
    return run


def _reports(tmp: Path, runs: dict[str, list[str]]) -> Path:
    for run, ids in runs.items():
        d = tmp / "reports" / run
        d.mkdir(parents=True)
        (d / "records.jsonl").write_text("".join(json.dumps({"ladder": "mog", "id": i, "policies": {"mog_router": {
            "f1": 0.5}}}) + "\n" for i in ids))
        pol = {p: {"f1": {"mean": 0.5, "se": 0.01, "n": len(ids)}} for p in ("mog_router", "fixed:L0", "oracle")}
        (d / "metrics.json").write_text(json.dumps({"mog": {"policies": pol, "best_fixed": "fixed:L0",
                                                            "n_questions": len(ids)}}))
    return tmp / "reports"


def _collect(args: Callable[[Path], list[str]]) -> Callable:
    def run(tmp: Path) -> None:
        from mogg.evaluation.collect import main

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(args(tmp))
        if rc == 2:
            raise CLIFailed(err.getvalue())
        if rc != 0:
            raise RuntimeError(err.getvalue())
    return run


def _disjoint(tmp):
    r = _reports(tmp, {"a": ["1", "2", "3"], "b": ["4", "5", "6"]})
    return ["--reports", str(r), "--paired", "a", "b"]


def _mixed_n(tmp):
    r = _reports(tmp, {"x_s0": [str(i) for i in range(500)], "x_s1": [str(i) for i in range(24)]})
    return ["--reports", str(r), "--pattern", "x_*", "--out", str(tmp / "coll")]


def _truncated(tmp):
    r = _reports(tmp, {"a": ["1", "2"], "b": ["1", "2"]})
    p = r / "b" / "records.jsonl"
    p.write_bytes(p.read_bytes()[:-20])
    return ["--reports", str(r), "--paired", "a", "b"]


def _corrupt_metrics(tmp):
    r = _reports(tmp, {"a_s0": ["1"]})
    (r / "a_s0" / "metrics.json").write_text('{"mog": {"policies": ')
    return ["--reports", str(r), "--pattern", "a_*", "--out", str(tmp / "coll")]


def _train_sources_hint(tmp: Path) -> None:
    """The train_sources error's suggested override must compose."""
    try:
        expect_error("train.py", [*BASE, "+train_sources.foo.weight=1", "router.fit=all"], tmp)
    except CLIFailed as e:
        hint = str(e).split("on the command line ")[1].split(" ")[0]
        sys.path.insert(0, str(ROOT / "tests"))
        from conftest import compose

        compose([*BASE, hint, "router.fit=all"])
        raise


def _weights_readable(tmp: Path) -> None:
    _with_ckpt(tmp, "default", [])
    bad = [str(p.relative_to(tmp)) for p in (tmp / "ckpt").rglob("*") if p.is_file() and not p.stat().st_mode & stat.S_IROTH]
    if bad:
        raise SilentWrong(f"router files other users cannot read: {bad[:3]}")


def _lone_surrogate(tmp: Path) -> None:
    from mogg.data.qa import GenericQA

    p = tmp / "q.jsonl"
    p.write_text(json.dumps({"id": "a", "question": "Is \ud800 bad?", "answer": "no"}, ensure_ascii=True) + "\n")
    GenericQA(str(p)).load()


def _traceback_cases() -> dict[str, tuple[Callable, str, str]]:
    out = {
        "threads=100000": (_knob_error("threads=100000"), "error", "threads"),
        "threads=auto": (lambda t: expect_ok("train.py", [*BASE, "threads=auto"], t), "ok", ""),
        "budgets=128 (not a list)": (_knob_error("budgets=128"), "error", "budgets"),
        "slots_dir naming a file": (_slots_dir_file, "error", "slots_dir"),
        "mogg-route --out naming a folder": (_route_out(lambda t: t), "error", "--out"),
        "mogg-route --out on a read-only file system": (_route_out(lambda t: Path("/proc/mogg_routed.jsonl")), "error", "--out"),
        "collect --paired over disjoint questions": (_collect(_disjoint), "error", "different questions"),
        "collect --paired A MISSING": (_collect(lambda t: ["--reports", str(_reports(t, {"a": ["1"]})), "--paired", "a",
                                                           "MISSING"]), "error", "MISSING"),
        "collect a group of 500 and 24 questions": (_collect(_mixed_n), "error", "different question sets"),
        "collect a truncated records.jsonl": (_collect(_truncated), "error", "records.jsonl:2"),
        "collect a corrupt metrics.json": (_collect(_corrupt_metrics), "error", "metrics.json"),
        "train_sources hint composes": (_train_sources_hint, "error", "train_sources.foo"),
        "router weights readable by the group": (_weights_readable, "ok", ""),
        "a lone surrogate in a question": (_lone_surrogate, "error", "lone surrogate"),
    }
    for o in ("frontier.n_boot=0", "frontier.n_boot=-1", "frontier.depth=nan", "frontier.depth=1.5", "frontier.depth=x",
              "frontier.budgets=128", "frontier.caps=64", "+frontier.foo=1", "frontier.routers.actions.lr=0", "+frontier.routers.actions.nope=1"):
        out[o] = (_frontier_error(o), "error", o.lstrip("+").split("=")[0].split(".")[-1])
    return out


def run_cases() -> list:
    """Every case above as ``hostile_cases.Case`` rows (surface, name, run, expect, names)."""
    from hostile_cases import Case

    out = []
    for surface, cases in (("runs (lost)", _lost_cases()), ("evaluate (stale routers)", _stale_cases()),
                           ("knobs, secrets, checks", _silent_cases()), ("one-line errors", _traceback_cases())):
        out += [Case(surface, name, run, expect, names) for name, (run, expect, names) in cases.items()]
    return out
