"""Issue 46: a router directory is data, not code, and no secret reaches disk by any key name.

Each test failed before its fix (the hostile replay of the same cases is ``tests/hostile_shared.py``):
a shared directory whose component is ``shutil.copyfile`` overwrote the victim file for all three
kinds, a ``kind`` naming a module imported it, an edited plan, budget or gate routed with exit 0,
and secrets of other shapes than ``api_key=`` were written in clear.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, compose
from hostile_shared import SECRETS, edit_json, planted_secrets, resign

from mogg.core.artifacts import ArtifactError
from mogg.core.secrets import REDACTED, redact, redact_config, scrub_argv, scrub_text
from mogg.core.trusted import COMPONENTS, REFUSED, check_node

GENERIC = ROOT / "examples" / "generic"
LEVEL, ACTIONS, SELECTOR = "final", "actions/final", "selector/final"


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The three deployed directories of one small run (level router, action router, selector)."""
    from mogg.run.app import train

    tmp = tmp_path_factory.mktemp("shared")
    cfg = compose(["experiment=generic_example", "debug=tiny", f"paths.artifacts={tmp / 'a'}",
                   f"paths.checkpoints={tmp / 'c'}", f"paths.reports={tmp / 'r'}",
                   f"questions.path={GENERIC / 'questions.jsonl'}", f"corpus.sources.0.paths={GENERIC / 'corpus.jsonl'}",
                   "frontier=matched", "frontier/routers=[actions,selector]", "router.fit=all"])
    train(cfg)
    return tmp


def _copy(deployed: Path, sub: str, tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(deployed / "c" / "debug" / "mog", tmp_path / "mog")
    return tmp_path / "mog" / sub


def _route(deployed: Path, d: Path, tmp_path: Path, *flags: str) -> tuple[int, str]:
    from mogg.run.route import main

    q = tmp_path / "q.txt"
    q.write_text("Is aspirin an antiplatelet drug?\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["--checkpoint", str(d), "--artifacts", str(deployed / "a"), *flags, str(q)])
    return rc, err.getvalue()


@pytest.mark.parametrize("sub,holder,field,flags", [
    (LEVEL, "router.json", ["components", "corpus"], ()),
    (ACTIONS, "deploy.json", ["spec", "components", "ladder"], ("--budget", "128")),
    (SELECTOR, "deploy.json", ["spec", "components", "retriever"], ("--budget", "128")),
])
@pytest.mark.parametrize("reseal", [False, True])
def test_a_copyfile_component_is_refused_before_anything_is_built(deployed, tmp_path, sub, holder, field, flags, reseal):
    d = _copy(deployed, sub, tmp_path)
    victim, evil = tmp_path / "victim.txt", tmp_path / "evil.txt"
    victim.write_text("precious")
    evil.write_text("overwritten")

    def change(obj):
        node = obj
        for k in field[:-1]:
            node = node[k]
        node[field[-1]] = {"_target_": "shutil.copyfile", "src": str(evil), "dst": str(victim)}
    edit_json(d, holder, change)
    resign(d, reseal=reseal)  # the manifest re-signed (and, knowing the scheme, the seal too)
    rc, err = _route(deployed, d, tmp_path, *flags)
    assert victim.read_text() == "precious"
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("mogg-route: error:") and "Traceback" not in err
    assert holder in lines[0]
    if reseal:  # past the seal, the allow-list names the field
        assert f"{'.'.join(field)}._target_='shutil.copyfile' is refused" in lines[0]
    else:
        assert "edited after training" in lines[0]


@pytest.mark.parametrize("kind", ["this:Nothing", "evilmod:Kind"])
def test_a_kind_outside_mogg_is_refused_without_importing_it(deployed, tmp_path, kind, monkeypatch):
    d = _copy(deployed, ACTIONS, tmp_path)
    marker = tmp_path / "RAN"
    (d / "evilmod.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\nclass Kind: pass\n")
    edit_json(d, "deploy.json", lambda o: o.update(kind=kind))
    resign(d, reseal=True)
    monkeypatch.chdir(d)  # routed from inside the directory, with the current folder on sys.path
    monkeypatch.syspath_prepend("")
    had_this = "this" in sys.modules
    rc, err = _route(deployed, d, tmp_path, "--budget", "128")
    assert rc == 2 and f"kind={kind!r} is not a known kind" in err
    assert not marker.exists() and "evilmod" not in sys.modules and ("this" in sys.modules) == had_this


def test_a_network_kind_outside_mogg_is_refused_without_importing_it(deployed, tmp_path):
    from mogg.routing.router_dir import TrainedRouter

    d = _copy(deployed, LEVEL, tmp_path)
    edit_json(d, "router.json", lambda o: o["network"].update(kind="this:Nothing"))
    resign(d, reseal=True)
    had_this = "this" in sys.modules
    with pytest.raises(ArtifactError, match=r"network.kind='this:Nothing' is not a known kind"):
        TrainedRouter.load(d)
    assert ("this" in sys.modules) == had_this


def _flip(o):
    p = o["budgets"]["128"]
    p["deploy"] = "router" if p["deploy"] == "envelope" else "envelope"


@pytest.mark.parametrize("sub,change", [
    (ACTIONS, _flip),
    (ACTIONS, lambda o: o["budgets"].update({"100": dict(o["budgets"]["128"])})),
    (SELECTOR, _flip),
    (SELECTOR, lambda o: o["budgets"]["128"].update({"lambda": 0.5})),
], ids=["action plan", "action budget", "selector plan", "selector lambda"])
def test_an_edited_plan_or_budget_is_refused(deployed, tmp_path, sub, change):
    d = _copy(deployed, sub, tmp_path)
    edit_json(d, "deploy.json", change)
    resign(d)
    rc, err = _route(deployed, d, tmp_path, "--budget", "128")
    assert rc == 2 and "deploy.json: edited after training" in err


def test_an_edited_gate_is_refused(tmp_path):
    from hostile_shared import _experts

    from mogg.routing.fitting.experts import load_router

    d = _experts(tmp_path)
    load_router(d)  # intact: loads
    edit_json(d, "router.json", lambda o: o["gate"].update(names=list(reversed(o["gate"]["names"]))))
    resign(d)
    with pytest.raises(ArtifactError, match="router.json: edited after training"):
        load_router(d)


def test_a_swapped_weights_file_or_an_added_file_is_refused(deployed, tmp_path):
    from mogg.run.budget.actions.deploy import DeployedActions

    d = _copy(deployed, ACTIONS, tmp_path)
    DeployedActions.load(d)
    (d / "extra.py").write_text("x = 1\n")
    with pytest.raises(ArtifactError, match="extra.py: a file the directory's seal does not know"):
        DeployedActions.load(d)
    (d / "extra.py").unlink()
    b = bytearray((d / "actions.safetensors").read_bytes())
    b[-1] ^= 1
    (d / "actions.safetensors").write_bytes(bytes(b))
    resign(d)
    with pytest.raises(ArtifactError, match="actions.safetensors: changed after training"):
        DeployedActions.load(d)


def test_a_directory_written_before_seals_still_routes(deployed, tmp_path, caplog):
    """Older directories (no seal) load where they pass every other check, with a warning."""
    from mogg.routing.router_dir import TrainedRouter

    d = _copy(deployed, LEVEL, tmp_path)
    edit_json(d, "router.json", lambda o: o.pop("seal"))
    resign(d)
    with caplog.at_level("WARNING"):
        TrainedRouter.load(d)
    assert "written before router directories were sealed" in caplog.text


def test_every_shipped_component_is_on_the_allow_list():
    """Each ``_target_`` the shipped corpus, ladder, retriever and encoder configs write is either on
    the allow-list (so a directory trained with it routes) or refused with a reason."""
    import yaml

    found = set()
    for group in ("corpus", "ladder", "retriever", "encoder"):
        for f in (ROOT / "conf" / group).rglob("*.yaml"):
            text = f.read_text()
            found |= {line.split("_target_:")[1].strip() for line in text.splitlines() if "_target_:" in line}
            yaml.safe_load(text)
    assert found and found <= COMPONENTS | set(REFUSED), sorted(found - COMPONENTS - set(REFUSED))
    import importlib

    for path in COMPONENTS:  # every name on the list is a real class
        module, _, name = path.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), path


@pytest.mark.parametrize("node,match", [
    ({"_target_": "shutil.copyfile", "src": "a", "dst": "b"}, "shutil.copyfile"),
    ({"_target_": "mogg.data.corpus.Corpus", "sources": [{"_target_": "builtins.open", "file": "x"}]}, "builtins.open"),
    ({"_target_": "mogg.encoders.HFEncoder", "_args_": ["x"]}, "_args_"),
    ({"_target_": "mogg.encoders.HFEncoder", "name_or_path": "${oc.env:HOME}"}, "interpolations"),
    ({"_target_": "mogg.encoders.HFEncoder", "trust_remote_code": True}, "trust_remote_code"),
    ({"_target_": "mogg.ladders.summarizers.OpenAISummarizer", "base_url": "http://x"}, "sends the corpus"),
])
def test_the_allow_list_refuses_anything_but_mogg_components_with_plain_arguments(node, match):
    with pytest.raises(ArtifactError, match=match):
        check_node(node, "d/router.json", "components.corpus")
    check_node({"_target_": "mogg.data.corpus.Corpus", "sources": [{"_target_": "mogg.data.corpus.MedRAGJsonl",
                                                                    "paths": ["a.jsonl"]}], "allow_gold": False},
               "d/router.json", "components.corpus")


def test_a_component_cannot_choose_where_this_machine_writes(tmp_path):
    from mogg.core.trusted import build

    cache = build({"_target_": "mogg.ladders.summarizers.SummaryCache", "directory": "/somewhere/else",
                   "summarizer": {"_target_": "mogg.ladders.summarizers.ExtractiveSummarizer"}},
                  "d/router.json", "components.ladder.summarizer", tmp_path)
    assert cache.directory == tmp_path / "summary_cache"


def test_secrets_are_found_by_name_and_by_shape():
    text = ("GET http://h/v1?api_key=abc123&x=1 Authorization: Bearer tok.en-1 sk-proj-ABCDEF123 hf_ABCDEFGH12 "
            "http://u:pw@h task-sk-1 max_tokens")
    clean = scrub_text(text)
    for gone in ("abc123", "tok.en-1", "sk-proj-ABCDEF123", "hf_ABCDEFGH12", "u:pw"):
        assert gone not in clean
    assert "task-sk-1" in clean and "max_tokens" in clean and "x=1" in clean
    red = redact({"headers": {"Authorization": "Bearer x"}, "api_keys": ["a", "b"], "X-Auth-Token": "t", "max_tokens": 5,
                  "client_secret": "s", "note": "Bearer QWERTY12"})
    assert red == {"headers": {"Authorization": REDACTED}, "api_keys": [REDACTED, REDACTED], "X-Auth-Token": REDACTED,
                   "max_tokens": 5, "client_secret": REDACTED, "note": f"Bearer {REDACTED}"}
    assert redact_config(["+api_keys=[a,b]", "reader.max_tokens=64", "token=${oc.env:T}"]) == [
        f"+api_keys={REDACTED}", "reader.max_tokens=64", "token=${oc.env:T}"]


def test_a_secret_on_the_command_line_keeps_its_shape_and_a_sweep_gets_one_variable_per_key():
    env: dict = {}
    argv = scrub_argv(["train.py", "-m", "+headers={Authorization: 'Bearer sk-HEAD123456'}", "+api_keys=[sk-A1234567,sk-B1234567]",
                       "reader.api_key=sk-C1234567,sk-D1234567", "max_context_tokens=4096"], env)
    assert argv[2] == "+headers={Authorization: ${oc.env:MOGG_SECRET_HEADERS}}"
    assert argv[3] == "+api_keys=[${oc.env:MOGG_SECRET_API_KEYS}, ${oc.env:MOGG_SECRET_API_KEYS_1}]"
    assert argv[4] == "reader.api_key=${oc.env:MOGG_SECRET_READER_API_KEY_0},${oc.env:MOGG_SECRET_READER_API_KEY_1}"
    assert argv[5] == "max_context_tokens=4096"
    assert sorted(env.values()) == ["Bearer sk-HEAD123456", "sk-A1234567", "sk-B1234567", "sk-C1234567", "sk-D1234567"]
    with pytest.raises(ValueError, match="sweep function over a secret"):
        scrub_argv(["train.py", "-m", "reader.api_key=choice(sk-a1234567,sk-b1234567)"], {})


def test_no_planted_secret_reaches_any_file_a_run_writes(tmp_path):
    """Every shape of the issue at once through the real CLI (train.py with evaluate_after): since
    issue 59 the run is refused in one line (a token typed into +note; appended keys no component
    reads), and nothing it wrote or printed holds any of them (a full run with every shape planted
    the right and the wrong way: tests/core/test_secrets.py)."""
    out = {k: tmp_path / k for k in ("outputs", "ckpt", "reports", "artifacts", "answers")}
    cmd = [sys.executable, str(ROOT / "train.py"), "experiment=generic_example", "debug=tiny", "evaluate_after=true",
           "router.fit=both", f"questions.path={GENERIC / 'questions.jsonl'}",
           f"corpus.sources.0.paths={GENERIC / 'corpus.jsonl'}", *planted_secrets(),
           *(f"paths.{'checkpoints' if k == 'ckpt' else k}={p}" for k, p in out.items())]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert p.returncode == 2 and "note: its value has the shape of a credential" in p.stderr, p.stderr[-2000:]
    secrets = list(SECRETS.values())
    written = [f for f in tmp_path.rglob("*") if f.is_file()]
    hits = [f"{f.relative_to(tmp_path)}: {s}" for f in written for s in secrets if s.encode() in f.read_bytes()]
    assert not hits, hits
    assert not [s for s in secrets if s in p.stdout + p.stderr]
