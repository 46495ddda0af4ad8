"""Issue 59: a secret is never a config value, and nothing a run writes or prints holds one.

* Every shape of credential the issue lists is planted the recommended way (an environment
  variable the config names: ``reader.api_key_env``) and the wrong ways (a value on the command line,
  a ``+key`` no component reads); nothing the runs wrote (``.hydra/``, manifests, router files, the
  answer cache, the wandb offline run, the report, the log) or printed holds any of them.
* The scrubber finds each shape and never changes ordinary prose: the README, docs/ and a full
  report pass through it unchanged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hostile_runs import BASE, cli
from hostile_secrets import PROSE, SHAPES

from mogg.core import secrets
from mogg.core.credentials import read_credential
from mogg.core.secrets import REDACTED, is_secret_key, remember_environment, scrub_argv, scrub_text

ROOT = Path(__file__).resolve().parents[2]
NEEDLES = [needle for _, _, needle in SHAPES.values()]


def _written_or_printed(root: Path, console: str) -> list[str]:
    hits = [f"{p.relative_to(root)}: {n}" for p in root.rglob("*") if p.is_file() for n in NEEDLES
            if n.encode() in p.read_bytes()]
    return hits + [f"console: {n}" for n in NEEDLES if n in console]


def test_every_planted_shape_stays_off_everything_the_runs_write_and_print(tmp_path, monkeypatch):
    import threading

    from test_readers import FakeOpenAI

    srv = FakeOpenAI()
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    # one key holding every shape at once (one line: an HTTP header), so each shape is planted each way
    key = " ".join(value for _, value, _ in SHAPES.values())
    reader = ["reader=openai", f"reader.base_url={srv.url}", "reader.model=m", "reader_policies=[cot]"]
    try:
        # 1. the recommended way: the key in the environment, the config names the variable
        monkeypatch.setenv("MOGG_PLANTED_READER_KEY", key)
        rc, right = cli("train.py", [*BASE, *reader, "reader.api_key_env=MOGG_PLANTED_READER_KEY", "logger=wandb",
                                     "evaluate_after=true", "run_name=right"], tmp_path)
        assert rc == 0, right[-2000:]
        monkeypatch.delenv("MOGG_PLANTED_READER_KEY")
        # 2. a wrong way: the key typed on the command line (moved into the environment before Hydra composes)
        rc, value = cli("evaluate.py", [*BASE, *reader, f"reader.api_key='{key}'", "use_router=false",
                                        "run_name=wrong", f"paths.answers={tmp_path / 'answers_wrong'}"], tmp_path)
        assert rc == 0, value[-2000:]
        # 3. the other wrong way: every shape appended as a +key no component reads, refused in one line: under
        # a credential's name or in a URL (moved off the command line, then refused at composition) or under
        # another name (a token typed into a knob that is no credential: refused before Hydra starts)
        named = [f"+{k}='{v}'" for k, v, _ in SHAPES.values() if is_secret_key(k)]
        rc, appended = cli("train.py", [*BASE, "run_name=appended", *named], tmp_path)
        assert rc == 2 and "no component reads them" in appended and "+ssh.passphrase" in appended, appended[-800:]
        for k, v, _ in SHAPES.values():
            if not is_secret_key(k):
                rc, text = cli("train.py", [*BASE, "run_name=appended", f"+{k}='{v}'"], tmp_path)
                last = text.strip().splitlines()[-1]
                assert rc == 2 and last.startswith((f"train.py: ValueError: {k}", f"train.py: UnknownAppend: +{k}")), last
                appended += text
    finally:
        srv.shutdown()
        srv.server_close()
    assert srv.auth == {f"Bearer {key}"}  # both runs reached the server with the key: it was used, not dropped
    hits = _written_or_printed(tmp_path, right + value + appended)
    assert not hits, hits[:10]
    # what was written says where the key came from, never the key
    manifest = json.loads(next((tmp_path / "ckpt" / "right").rglob("train_manifest.json")).read_text())
    assert manifest["config"]["reader"]["api_key_env"] == "MOGG_PLANTED_READER_KEY"
    hydra = next((tmp_path / "outputs" / "wrong").rglob("overrides.yaml")).read_text()
    assert "reader.api_key=${oc.env:MOGG_SECRET_READER_API_KEY}" in hydra
    assert list((tmp_path / "outputs" / "wandb").glob("offline-run-*")), "the wandb offline run was not written"
    assert (tmp_path / "answers" / "answers.jsonl").stat().st_size > 0  # the cache was written (and holds none)
    # the full report and its console copy are prose the scrubber leaves alone
    md = (tmp_path / "reports" / "right" / "results.md").read_text()
    assert scrub_text(md) == md and REDACTED not in md


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "reports").rglob("*.md")),
        *sorted((ROOT / "reports").rglob("*.json"))]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_scrubber_leaves_the_docs_and_the_reports_unchanged(path):
    text = path.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(text.splitlines(), scrub_text(text).splitlines()) if a != b]
    assert not changed, changed[:3]


@pytest.mark.parametrize("prose", PROSE)
def test_the_scrubber_leaves_prose_alone(prose):
    assert scrub_text(prose) == prose


@pytest.mark.parametrize("shape", [s for s in SHAPES if s not in ("ssh passphrase", "a key named bearer")])
def test_the_scrubber_finds_every_shape(shape):
    _, value, needle = SHAPES[shape]
    assert needle not in scrub_text(f"INFO x: connecting with {value}; done")


def test_secret_keys_by_name_and_where_a_secret_lives():
    assert all(is_secret_key(k) for k in ("passphrase", "ssh.passphrase", "bearer", "private_key", "jwt"))
    assert not any(is_secret_key(k) for k in ("api_key_env", "reader.api_key_file", "model", "budgets"))


def test_a_token_typed_into_a_knob_that_is_no_credential_is_refused_without_echoing_it():
    for arg in ("reader.model=sk-TYPEDKEY4242ab", "run_name=xoxb-123456789012-TYPED", "+note='Bearer QWERTY1234'"):
        with pytest.raises(ValueError, match="shape of a credential") as e:
            scrub_argv([arg], {})
        assert arg.split("=", 1)[1].strip("'") not in str(e.value)
    env: dict = {}  # a credential knob or a URL's password still moves into the environment
    assert scrub_argv(["reader.api_key=sk-MOVED4242ab", "reader.base_url=http://u:PW4242@h/v1"], env) == [
        "reader.api_key=${oc.env:MOGG_SECRET_READER_API_KEY}", "reader.base_url=${oc.env:MOGG_SECRET_READER_BASE_URL}"]


def test_credentials_come_from_the_environment_or_a_file_and_are_redacted_by_value(tmp_path, monkeypatch):
    monkeypatch.setattr(secrets, "_KNOWN", set())
    monkeypatch.setenv("MOGG_T_PLAIN", "plainvalue-no-shape-42")
    assert read_credential("MOGG_T_PLAIN", None, "reader") == "plainvalue-no-shape-42"
    assert scrub_text("server said: plainvalue-no-shape-42") == f"server said: {REDACTED}"
    (tmp_path / "k").write_text("filekey-no-shape-43\n")
    assert read_credential(None, str(tmp_path / "k"), "reader") == "filekey-no-shape-43"
    with pytest.raises(ValueError, match="MOGG_T_UNSET is not set"):
        read_credential("MOGG_T_UNSET", None, "reader")
    with pytest.raises(ValueError, match="name one source"):
        read_credential("MOGG_T_PLAIN", str(tmp_path / "k"), "reader")
    with pytest.raises(ValueError, match="must name an environment variable"):
        read_credential("sk-not a name", None, "reader")


def test_the_environment_credentials_are_known_but_not_directories_or_switches(monkeypatch):
    monkeypatch.setattr(secrets, "_KNOWN", set())
    remember_environment({"HF_TOKEN": "hf-env-value-4242", "PWD": "/work/wt", "SSH_AUTH_SOCK": "/tmp/ssh/agent.1",
                          "TOKENIZERS_PARALLELISM": "false", "MOGG_SECRET_X": "moved-value-4343", "HOME": "/home/u"})
    assert secrets._KNOWN == {"hf-env-value-4242", "moved-value-4343"}


def test_an_appended_key_is_kept_only_where_a_component_reads_it():
    from conftest import compose

    from mogg.run.appends import read_by_a_component

    base = compose(["experiment=generic_example", "frontier=matched"])
    for key in ("router.cost_weight", "train_sources.a.questions", "frontier.routers.selector.params.num_leaves",
                "frontier.foo", "questions.limit"):
        assert read_by_a_component(base, key), key
    for key in ("ssh.passphrase", "note", "paths.token", "shard.secret"):
        assert not read_by_a_component(base, key), key
