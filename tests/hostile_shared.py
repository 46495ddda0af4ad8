"""Hostile cases of issue 46: a router directory someone sends is data, and no secret reaches disk.

Router directories (the level router's ``final/``, the action router's ``actions/final/``, the
evidence selector's ``selector/final/``, a source-experts router) are edited as an attacker or a
careless colleague would: a component turned into ``shutil.copyfile`` or ``builtins.open``, a kind
naming a module outside mogg (``this``, an ``evilmod.py`` shipped in the directory), a flipped plan,
a copied budget, a reordered gate, a truncated weights file; each with the manifest re-signed
(anyone can recompute sha256) and, where it matters, the seal recomputed too (anyone who reads
the code can). Every one must be refused in one line before anything is built, the planted victim
file unchanged and the planted module never imported.

Secrets are planted in every shape the issue lists (an ``Authorization`` header, a query-string
key, ``sk-``/``hf_`` tokens in lists, a plural key name, a sweep over a key) and every file the run
writes is searched. The remaining one-line errors and silent results of the issue are here too.
:func:`shared_cases` is a group of ``hostile_cases.case_groups``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hostile_runs import (
    BASE,
    CLIFailed,
    Crashed,
    Leaked,
    LostResult,
    SilentWrong,
    _files_holding,
    _shared,
    _trained,
    cli,
    expect_error,
    expect_ok,
)

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ["frontier=matched", "frontier/routers=[actions,selector]", "router.fit=all"]


# ------------------------------------------------------------------------------------------------
# shared directories and what anyone can do to them


def _dirs(tmp: Path) -> Path:
    """A copy of the three deployed directories of one run (level router, action router, selector):
    ``<tmp>/ckpt/debug/mog`` (trained once per session)."""
    shutil.copytree(_trained("deploy", DEPLOY), tmp / "ckpt")
    return tmp / "ckpt" / "debug" / "mog"


def _holder(d: Path) -> str:
    return "deploy.json" if (d / "deploy.json").is_file() else "router.json"


def resign(d: Path, reseal: bool = False) -> None:
    """Recompute the manifest's sha256 for every file it lists, as anyone can; ``reseal``: also the
    holder's seal (someone who read mogg.core.seal), so the checks behind the seal are reached."""
    from mogg.core.artifacts import sha256_file

    if reseal:
        try:
            from mogg.core.seal import seal_holder
        except ImportError:  # a checkout from before seals: nothing to recompute
            seal_holder = None
        holder = _holder(d)
        if seal_holder is not None and "seal" in json.loads((d / holder).read_text()):
            for sub in sorted((d / "members").glob("*")) if (d / "members").is_dir() else []:
                seal_holder(sub, "router.json")
            seal_holder(d, holder)
    m = json.loads((d / "manifest.json").read_text())
    m["files"] = {f: sha256_file(d / f) for f in m["files"] if (d / f).is_file()}
    (d / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def edit_json(d: Path, name: str, change: Callable[[dict], None]) -> None:
    obj = json.loads((d / name).read_text())
    change(obj)
    (d / name).write_text(json.dumps(obj, indent=1))


def route(tmp: Path, d: Path, *flags: str, questions: str = "Is aspirin an antiplatelet drug?\n",
          cwd: Path | None = None) -> str:
    """``mogg-route --checkpoint d`` in this process; a one-line refusal (exit 2) raises CLIFailed,
    success returns the output."""
    from mogg.run.route import main

    q = tmp / "q.txt"
    q.write_text(questions)
    out, err = io.StringIO(), io.StringIO()
    old, path0 = os.getcwd(), list(sys.path)
    try:
        if cwd is not None:  # `python -m mogg.run.route` from inside the directory: '' (cwd) is on sys.path
            os.chdir(cwd)
            sys.path.insert(0, "")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                # the directories were trained on the shipped example, outside the data folder: routing
                # names its corpus (mogg.run.route_corpus), unless the case names one itself
                own = [] if "--corpus" in flags else ["--corpus", str(ROOT / "examples" / "generic" / "corpus.jsonl")]
                rc = main(["--checkpoint", str(d), "--artifacts", str(_shared("artifacts")), *own, *flags, str(q)])
            except SystemExit as e:  # argparse refusing an option: its one-line error, exit 2
                rc = e.code
    finally:
        os.chdir(old)
        sys.path[:] = path0
    if rc == 2:
        lines = [x for x in err.getvalue().splitlines() if x.startswith("mogg-route: error")]
        raise CLIFailed(lines[-1] if lines else err.getvalue())
    if rc != 0:
        raise RuntimeError(f"exit {rc}: {err.getvalue()[-400:]}")
    return out.getvalue()


def _victim(tmp: Path) -> tuple[Path, Path]:
    victim, evil = tmp / "victim.txt", tmp / "evil.txt"
    victim.write_text("the user's precious file\n")
    evil.write_text("overwritten by a shared router directory\n")
    return victim, evil


def _copyfile_case(sub: str, holder: str, field: list[str], flags: tuple[str, ...], reseal: bool) -> Callable:
    """A component of a shared directory turned into ``shutil.copyfile(evil, victim)``."""
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        victim, evil = _victim(tmp)

        def change(obj):
            node = obj
            for k in field[:-1]:
                node = node[k]
            node[field[-1]] = {"_target_": "shutil.copyfile", "src": str(evil), "dst": str(victim)}
        edit_json(d, holder, change)
        resign(d, reseal)
        try:
            route(tmp, d, *flags)
        finally:
            if victim.read_text() != "the user's precious file\n":
                raise SilentWrong(f"routing with the shared directory overwrote {victim}")
    return run


def _open_case(tmp: Path) -> None:
    """The selector's encoder (built for its cosine feature) turned into ``builtins.open(victim, "w")``."""
    d = _dirs(tmp) / "selector" / "final"
    victim, _ = _victim(tmp)
    edit_json(d, "deploy.json", lambda o: o["spec"]["components"].update(
        encoder={"_target_": "builtins.open", "file": str(victim), "mode": "w"}))
    resign(d, reseal=True)
    try:
        route(tmp, d, "--budget", "128")
    finally:
        if victim.read_text() != "the user's precious file\n":
            raise SilentWrong(f"routing with the shared directory truncated {victim}")


def _kind_this(tmp: Path) -> None:
    d = _dirs(tmp) / "actions" / "final"
    edit_json(d, "deploy.json", lambda o: o.update(kind="this:Nothing"))
    resign(d, reseal=True)
    had = "this" in sys.modules
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            route(tmp, d, "--budget", "128")
    finally:
        if not had and "this" in sys.modules:
            del sys.modules["this"]
            raise SilentWrong("the module the directory named as its kind ('this') was imported")


_EVIL = "import pathlib\npathlib.Path({marker!r}).write_text('evilmod ran')\nclass Kind: pass\nclass Net: pass\n"


def _evilmod(sub: str, holder: str, change: Callable[[dict], None], flags: tuple[str, ...]) -> Callable:
    """An ``evilmod.py`` shipped inside the directory, named as its kind, routed from inside it."""
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        marker = tmp / "EVILMOD_RAN"
        (d / "evilmod.py").write_text(_EVIL.format(marker=str(marker)))
        edit_json(d, holder, change)
        resign(d, reseal=True)
        try:
            route(tmp, d, *flags, cwd=d)
        finally:
            sys.modules.pop("evilmod", None)
            if marker.exists():
                raise SilentWrong("evilmod.py, shipped in the directory, ran when it was routed")
    return run


def _edited(sub: str, change: Callable[[dict], None], flags: tuple[str, ...]) -> Callable:
    """A decision edited in deploy.json, the manifest re-signed (the seal left as it was)."""
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        edit_json(d, "deploy.json", change)
        resign(d)
        route(tmp, d, *flags)
    return run


def _flip(o: dict) -> None:
    p = o["budgets"]["128"]
    p["deploy"] = "router" if p["deploy"] == "envelope" else "envelope"


def _copy_budget(o: dict) -> None:
    o["budgets"]["100"] = dict(o["budgets"]["128"])


def _extra_file(tmp: Path) -> None:
    d = _dirs(tmp) / "actions" / "final"
    (d / "notes.py").write_text("print('not part of the router')\n")
    resign(d)
    route(tmp, d, "--budget", "128")


def _truncated(sub: str, name: str, flags: tuple[str, ...]) -> Callable:
    def run(tmp: Path) -> None:
        d = _dirs(tmp) / sub
        b = (d / name).read_bytes()
        (d / name).write_bytes(b[: len(b) // 2])
        resign(d, reseal=True)
        route(tmp, d, *flags)
    return run


def _truncated_model(tmp: Path) -> None:
    """LightGBM aborts the process on a truncated text model: loaded in a child process."""
    d = _dirs(tmp) / "selector" / "final"
    b = (d / "model.txt").read_bytes()
    (d / "model.txt").write_bytes(b[: len(b) // 2])
    resign(d, reseal=True)
    code = ("import sys\nfrom mogg.run.budget.selector.deploy import DeployedSelector\n"
            "try:\n    DeployedSelector.load(sys.argv[1])\nexcept (ValueError, RuntimeError) as e:\n"
            "    print(e, file=sys.stderr)\n    sys.exit(2)\n")
    p = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=300)
    if p.returncode < 0 or p.returncode >= 128:
        raise Crashed(f"loading a truncated model.txt killed the process (exit {p.returncode})")
    if p.returncode == 2:
        raise CLIFailed(p.stderr.strip().splitlines()[-1])
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-400:])


def _experts(tmp: Path) -> Path:
    """A small source-experts router directory (two toy sources), built once per session."""
    cache = _shared("experts") / "final"
    if not cache.exists():
        import numpy as np

        from mogg.routing.fitting.sources import Source, fit_experts, fit_sources
        from mogg.routing.kinds.mlp import MLPRouter
        from mogg.routing.networks.training import TrainerConfig

        def toy(name, seed, shift):
            rng = np.random.default_rng(seed)
            x = rng.normal(size=(60, 4))
            x[:, 0] += shift
            u = np.c_[x[:, 1] > 0, x[:, 1] <= 0].astype(float)
            return Source(name, x.astype(np.float32), u.astype(np.float32), u, [f"{name} q{i}?" for i in range(60)])

        settings, trainer = MLPRouter(transfer="experts"), TrainerConfig(max_epochs=3, patience=0, val_fraction=0.2)
        srcs = [toy("a", 0, -3.0), toy("b", 1, 3.0)]
        spec = {"levels": ["l0", "l1"]}
        members = {s.name: fit_sources([s], 0, settings, trainer, cache.parent / f"final@{s.name}", spec) for s in srcs}
        fit_experts(srcs, members, 0, settings, trainer, cache, spec)
    shutil.copytree(cache, tmp / "experts")
    return tmp / "experts"


def _refused(load: Callable, d: Path) -> None:
    """``load(d)``; mogg's refusal of a directory (ArtifactError) as a one-line error."""
    from mogg.core.artifacts import ArtifactError

    try:
        load(d)
    except ArtifactError as e:
        raise CLIFailed(str(e)) from None


def _gate_reordered(tmp: Path) -> None:
    from mogg.routing.fitting.experts import load_router

    d = _experts(tmp)
    edit_json(d, "router.json", lambda o: o["gate"].update(names=list(reversed(o["gate"]["names"]))))
    resign(d)
    _refused(load_router, d)


def _experts_truncated(tmp: Path) -> None:
    from mogg.routing.fitting.experts import load_router

    d = _experts(tmp)
    b = (d / "experts.safetensors").read_bytes()
    (d / "experts.safetensors").write_bytes(b[: len(b) // 2])
    resign(d, reseal=True)
    _refused(load_router, d)


def _selector_empty_question(tmp: Path) -> None:
    d = _dirs(tmp) / "selector" / "final"
    out = route(tmp, d, "--budget", "128", questions="\U0001f642\U0001f642\nIs aspirin an antiplatelet drug?\n")
    recs = [json.loads(x) for x in out.splitlines()]
    if len(recs) != 2 or not recs[0].get("empty") or recs[1].get("empty") or not recs[1]["context"]:
        raise SilentWrong(f"an emoji-only question did not get an empty record beside the other: {recs}")


def _directory_cases() -> dict[str, tuple[Callable, str, str]]:
    lvl, act, sel = "final", "actions/final", "selector/final"
    b = ("--budget", "128")
    out = {}
    for name, sub, holder, field, flags in (
            ("level router", lvl, "router.json", ["components", "corpus"], ()),
            ("action router", act, "deploy.json", ["spec", "components", "ladder"], b),
            ("selector", sel, "deploy.json", ["spec", "components", "retriever"], b)):
        out[f"{name}: a component is shutil.copyfile (manifest re-signed)"] = (
            _copyfile_case(sub, holder, field, flags, False), "error", holder)
        out[f"{name}: a component is shutil.copyfile (manifest and seal re-signed)"] = (
            _copyfile_case(sub, holder, field, flags, True), "error", "shutil.copyfile")
    out.update({
        "selector: its encoder is builtins.open(victim, 'w') (re-sealed)": (_open_case, "error", "builtins.open"),
        "deploy.json kind names 'this:Nothing' (re-sealed)": (_kind_this, "error", "this:Nothing"),
        "deploy.json kind names an evilmod.py shipped inside (re-sealed)": (
            _evilmod(act, "deploy.json", lambda o: o.update(kind="evilmod:Kind"), b), "error", "evilmod:Kind"),
        "router.json network kind names an evilmod.py inside (re-sealed)": (
            _evilmod(lvl, "router.json", lambda o: o["network"].update(kind="evilmod:Net"), ()), "error", "evilmod:Net"),
        "action router: a plan flipped (manifest re-signed)": (_edited(act, _flip, b), "error", "deploy.json"),
        "action router: a budget copied in (manifest re-signed)": (_edited(act, _copy_budget, ("--budget", "100")),
                                                                   "error", "deploy.json"),
        "selector: a plan flipped (manifest re-signed)": (_edited(sel, _flip, b), "error", "deploy.json"),
        "selector: lambda edited (manifest re-signed)": (
            _edited(sel, lambda o: o["budgets"]["128"].update({"lambda": 0.5}), b), "error", "deploy.json"),
        "experts: gate.names reordered (manifest re-signed)": (_gate_reordered, "error", "router.json"),
        "a file added to a directory (manifest re-signed)": (_extra_file, "error", "notes.py"),
        "truncated actions.safetensors (re-sealed)": (_truncated(act, "actions.safetensors", b), "error",
                                                      "actions.safetensors"),
        "truncated experts.safetensors (re-sealed)": (_experts_truncated, "error", "experts.safetensors"),
        "truncated selector model.txt (re-sealed)": (_truncated_model, "error", "model.txt"),
        "mogg-route --budget inf": (lambda t: route(t, _dirs(t) / act, "--budget", "inf"), "error", "budget"),
        "selector: an emoji-only question": (_selector_empty_question, "ok", ""),
    })
    return out


# ------------------------------------------------------------------------------------------------
# secrets: every shape at once, and a sweep over a key

SECRETS = {
    "header": "sk-HEADERSECRET4242",
    "nested": "hf_NESTEDSECRET4343",
    "query": "sk-QUERYSECRET4444",
    "plural_a": "sk-PLURALSECRETA45",
    "plural_b": "sk-PLURALSECRETB46",
    "bearer": "BEARERONLYTOKEN4747",
}


def planted_secrets() -> list[str]:
    """Command-line overrides holding every secret of :data:`SECRETS`."""
    s = SECRETS
    return [f"+headers={{Authorization: 'Bearer {s['header']}'}}",
            f"+proxies=[{{name: p, headers: [{{X-Token: {s['nested']}}}]}}]",
            f"+callback_url='http://127.0.0.1:9/hook?api_key={s['query']}&x=1'",
            f"+api_keys=[{s['plural_a']},{s['plural_b']}]",
            f"+note='Bearer {s['bearer']}'"]


def _all_secrets(tmp: Path) -> None:
    """Since issue 59 the run is refused (appended keys no component reads; a token typed into
    ``+note``), and the refusal writes none of them either."""
    rc, text = cli("train.py", [*BASE, *planted_secrets(), "evaluate_after=true"], tmp)
    hits = _files_holding(tmp, list(SECRETS.values())) + [f"the console holds {s!r}" for s in SECRETS.values()
                                                          if s in text]
    if hits:
        raise Leaked("; ".join(hits[:4]))
    if rc == 2:
        raise CLIFailed(text.strip().splitlines()[-1])
    if rc != 0:
        raise RuntimeError(f"exit {rc}: {text[-400:]}")


def _query_key_in_base_url(tmp: Path) -> None:
    cli("evaluate.py", [*BASE, "reader=openai", "reader.model=m", "reader.retries=0", "reader.timeout=1", "use_router=false",
                        "reader.base_url='http://127.0.0.1:9/v1?api_key=sk-BASEURLSECRET48'"], tmp)
    hits = _files_holding(tmp, ["sk-BASEURLSECRET48"])
    if hits:
        raise Leaked("; ".join(hits[:4]))


def _fake_server():
    sys.path.insert(0, str(ROOT / "tests"))
    import threading

    from folders import on_path

    on_path()  # test_readers is in tests/readers/
    from test_readers import FakeOpenAI

    srv = FakeOpenAI()
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


def _sweep_over_keys(tmp: Path) -> None:
    """``-m reader.api_key=A,B``: one job per key (each reaching the server with its own), or refused."""
    srv = _fake_server()
    try:
        # an answer cache per job: the second job asks the server too (answers are keyed by prompt, not by key)
        rc, text = cli("evaluate.py", ["-m", *BASE, "reader=openai", f"reader.base_url={srv.url}", "reader.model=m",
                                       "use_router=false", f"paths.answers={tmp}/answers/${{hydra:job.num}}",
                                       "reader.api_key=sk-SWEEPKEYA49,sk-SWEEPKEYB50"], tmp)
    finally:
        srv.shutdown()
        srv.server_close()
    hits = _files_holding(tmp, ["sk-SWEEPKEYA49", "sk-SWEEPKEYB50"])
    if hits:
        raise Leaked("; ".join(hits[:4]))
    if rc == 2:
        raise CLIFailed(text.strip().splitlines()[-1])
    if rc != 0:
        raise RuntimeError(f"exit {rc}: {text[-400:]}")
    if srv.auth != {"Bearer sk-SWEEPKEYA49", "Bearer sk-SWEEPKEYB50"}:
        raise SilentWrong(f"a sweep over two keys reached the server with {sorted(map(str, srv.auth))}")


def _secret_cases() -> dict[str, tuple[Callable, str, str]]:
    return {
        "every secret shape at once (header, nested list, query string, plural key, bearer)": (_all_secrets, "error",
                                                                                               "note"),
        "a query-string key in reader.base_url": (_query_key_in_base_url, "ok", ""),
        "-m reader.api_key=A,B (a sweep over keys)": (_sweep_over_keys, "ok", ""),
    }


# ------------------------------------------------------------------------------------------------
# one-line errors, silent results and refused legitimate runs


def _frontier_run(tmp: Path) -> Path:
    """A frontier report (generic example, debug=tiny) under ``tmp/reports/fr_s0``."""
    d = _shared("frontier_report")
    if not (d / "reports").exists():
        expect_ok("train.py", [*BASE, "frontier=matched", "run_name=fr_s0", "evaluate_after=true"], d)
    shutil.copytree(d / "reports", tmp / "reports")
    return tmp / "reports"


def _collect(extra: list[str], damage: Callable[[Path], None] | None = None) -> Callable:
    def run(tmp: Path) -> None:
        from mogg.evaluation.collect import main

        reports = _frontier_run(tmp)
        if damage:
            damage(reports / "fr_s0")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["--frontier", "--reports", str(reports), "--pattern", "fr_*", "--out", str(tmp / "coll"), *extra])
        if rc == 2:
            raise CLIFailed(err.getvalue())
        if rc != 0:
            raise RuntimeError(err.getvalue())
    return run


def _truncate_npz(run: Path) -> None:
    p = next(run.glob("*_frontier_questions.npz"))
    p.write_bytes(p.read_bytes()[:200])


def _sources(tmp: Path, n: int = 2) -> list[Path]:
    """``n`` generic question files (the example's questions split in parts)."""
    rows = (ROOT / "examples" / "generic" / "questions.jsonl").read_text().splitlines()
    out = []
    for i in range(n):
        p = tmp / f"src{i}.jsonl"
        p.write_text("\n".join(rows[i::n]) + "\n")
        out.append(p)
    return out


def _same_source_twice(tmp: Path) -> None:
    q = _sources(tmp, 1)[0]
    node = f"{{_target_: mogg.data.qa.GenericQA, path: {q}}}"
    expect_error("train.py", [*BASE, "router.fit=all", f"+train_sources.a.questions={node}",
                              f"+train_sources.b.questions={node}"], tmp)
    if (tmp / "ckpt").exists() and any((tmp / "ckpt").rglob("router.safetensors")):
        raise SilentWrong("a router was trained on one question set given twice")


def _eval_sweep_over_reader(tmp: Path) -> None:
    """A trained run evaluated under two reader models: each job finds the one trained run."""
    from hostile_runs import _with_ckpt

    _with_ckpt(tmp, "default", [])
    srv = _fake_server()
    try:
        expect_ok("evaluate.py", ["-m", *BASE, "reader=openai", f"reader.base_url={srv.url}", "reader.model=a,b",
                                  "reader.api_key=none-needed"], tmp)
    finally:
        srv.shutdown()
        srv.server_close()
    reports = sorted(p.name for p in (tmp / "reports").iterdir())
    if len(reports) != 2:
        raise LostResult(f"an evaluate sweep over two reader models left the reports {reports}")


def _run_name_escape(tmp: Path) -> None:
    outputs = tmp / "a" / "b" / "outputs"
    try:
        rc, text = cli("train.py", [*BASE, "run_name=../../x", f"paths.outputs={outputs}"], tmp)
    finally:
        if (tmp / "a" / "x").exists():
            raise SilentWrong(f"a refused run_name=../../x wrote {tmp / 'a' / 'x'} outside the outputs folder")
    if rc == 2:
        raise CLIFailed(text.strip().splitlines()[-1])
    if rc != 0:
        raise RuntimeError(text[-400:])


def _one_text_other_answers(tmp: Path) -> None:
    from hostile_runs import _DOCS, _generic

    rows = [{"id": f"q{i}", "question": "What is monitored with drug class 3?", "answer": f"marker {i}",
             "gold_evidence": [f"Monitoring of marker {i} is advised."]} for i in range(12)]
    expect_ok("train.py", [*BASE, *_generic(tmp, rows, _DOCS), "evaluate_after=true"], tmp)
    if "11 of 12 questions share their text with another question" not in (
            tmp / "reports" / "debug" / "results.md").read_text():
        raise SilentWrong("twelve ids sharing one question text (answers differ) gave no note")


def _other_cases() -> dict[str, tuple[Callable, str, str]]:
    sel = ["frontier=matched", "frontier/routers=[actions,selector]"]
    return {
        "collect --frontier over a truncated _frontier_questions.npz": (
            _collect([], _truncate_npz), "error", "_frontier_questions.npz"),
        "collect --frontier --policies nope": (_collect(["--policies", "nope"]), "error", "nope"),
        "collect --frontier --versus nope": (_collect(["--versus", "nope"]), "error", "nope"),
        "collect --frontier --kept nope": (_collect(["--kept", "nope"]), "error", "nope"),
        "frontier.routers.selector.params.num_leaves=-5": (
            lambda t: expect_error("train.py", [*BASE, *sel, "+frontier.routers.selector.params.num_leaves=-5"], t),
            "error", "num_leaves"),
        "+frontier.routers.selector.params.bogus_knob=3": (
            lambda t: expect_error("train.py", [*BASE, *sel, "+frontier.routers.selector.params.bogus_knob=3"], t),
            "error", "bogus_knob"),
        "train_sources={} on a leave-one-set-out experiment": (
            lambda t: expect_error("train.py", ["experiment=loso", "heldout_set=pubmedqa", "debug=tiny",
                                                "train_sources={}"], t),
            "error", "train_sources"),
        "one question set given twice as two sources": (_same_source_twice, "error", "train_sources"),
        "evaluate -m reader.model=a,b finds its one trained run": (_eval_sweep_over_reader, "ok", ""),
        "run_name=../../x writes nothing outside": (_run_name_escape, "error", "run_name"),
        "twelve ids sharing one question text, answers differ": (_one_text_other_answers, "ok", ""),
    }


def shared_cases() -> list:
    """Every case above as ``hostile_cases.Case`` rows."""
    from hostile_cases import Case

    out = []
    for surface, cases in (("shared router directories", _directory_cases()), ("secrets on disk", _secret_cases()),
                           ("one-line errors (46)", _other_cases())):
        out += [Case(surface, name, run, expect, names) for name, (run, expect, names) in cases.items()]
    return out
