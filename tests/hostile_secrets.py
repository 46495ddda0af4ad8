"""Hostile cases of issue 59 (secrets): every shape of credential the issue lists, planted the
wrong way (an appended ``+key`` no component reads, a value typed into the wrong knob, a run
name), and the places they leaked (``.hydra/``, ``train_manifest.json``, the wandb offline run,
the answer cache, ``report.json``, a server's 401 reply on the console, ``mogg-prepare``'s retry
warnings); plus the scrubber's own cases: each shape found, ordinary prose left alone.

A case raises :class:`hostile_runs.Leaked` when a planted secret is in a file the run wrote or
on its console. :func:`secret_cases` is a group of ``hostile_cases.case_groups``;
``python tests/hostile_secrets.py`` replays these cases alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_runs import BASE, CLIFailed, Leaked, SilentWrong, _files_holding, cli

ROOT = Path(__file__).resolve().parents[1]

# One credential of every shape the issue lists (fake values; each needle is what must never be written).
PEM = "-----BEGIN RSA PRIVATE KEY-----MIIEpAIBAAKCAQEA7PEMSECRET4242-----END RSA PRIVATE KEY-----"
SHAPES = {
    "PEM private key": ("ssh.private_key", PEM, "MIIEpAIBAAKCAQEA7PEMSECRET4242"),
    "ssh passphrase": ("ssh.passphrase", "CorrectHorse4242", "CorrectHorse4242"),
    "JWT": ("session.jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtb2dnIn0.c2lnbmF0dXJlSldUNDI0Mg",
            "c2lnbmF0dXJlSldUNDI0Mg"),
    "AWS access key id": ("aws.access_key_id", "AKIAIOSFODNN7MOGG424", "AKIAIOSFODNN7MOGG424"),
    "Slack bot token": ("slack.bot", "xoxb-123456789012-MOGGSLACK4242", "MOGGSLACK4242"),
    "Stripe live key": ("stripe.live", "sk_live_MOGGSTRIPE4242abcd", "MOGGSTRIPE4242abcd"),
    "Google API key": ("google.maps", "AIzaSyMOGGGOOGLE4242abcdefghijklmnopqrs", "MOGGGOOGLE4242abcdef"),
    "password=... value": ("db.dsn", "host=db password=HunterMogg4242", "HunterMogg4242"),
    "#access_token= in a URL fragment": ("callback", "http://127.0.0.1:9/cb#access_token=FRAGTOKEN4242",
                                         "FRAGTOKEN4242"),
    "a key named bearer": ("http.bearer", "BEARERKEYMOGG4242", "BEARERKEYMOGG4242"),
}


def _no_leak(tmp: Path, needles: list[str], console: str = "") -> None:
    hits = _files_holding(tmp, needles) + [f"the console holds {n!r}" for n in needles if n in console]
    if hits:
        raise Leaked("; ".join(hits[:4]))


def _refused_or_ok(rc: int, text: str) -> None:
    """A one-line refusal (exit 2) raises CLIFailed; success returns; anything else is a traceback."""
    if rc == 2:
        raise CLIFailed(text.strip().splitlines()[-1])
    if rc != 0:
        raise RuntimeError(f"exit {rc}: {text[-600:]}")


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _appended(key: str, value: str, needle: str, extra: tuple[str, ...] = ()) -> Callable:
    """``train.py ... +<key>=<value>``: refused naming the key, and the value written nowhere."""
    def run(tmp: Path) -> None:
        rc, text = cli("train.py", [*BASE, "run_name=x", *extra, f"+{key}={_quoted(value)}"], tmp)
        _no_leak(tmp, [needle], text)
        _refused_or_ok(rc, text)
    return run


def _swept_append(tmp: Path) -> None:
    """``-m +note=A,B``: refused before the sweep writes multirun.yaml or any job runs."""
    rc, text = cli("train.py", ["-m", *BASE, "+note=SweptNote4242,SweptNote4243"], tmp)
    _no_leak(tmp, ["SweptNote424"], text)
    _refused_or_ok(rc, text)


def _env_note(tmp: Path) -> None:
    """``'+note=${oc.env:TOKEN}'``: stored resolved in train_manifest.json before issue 59."""
    os.environ["MOGG_HOSTILE_TOKEN"] = "xoxb-123456789012-ENVNOTE4242"
    try:
        rc, text = cli("train.py", [*BASE, "+note=${oc.env:MOGG_HOSTILE_TOKEN}"], tmp)
    finally:
        os.environ.pop("MOGG_HOSTILE_TOKEN", None)
    _no_leak(tmp, ["ENVNOTE4242"], text)
    _refused_or_ok(rc, text)


def _env_interpolation(tmp: Path) -> None:
    """A known knob set from the environment (``reader.model='${oc.env:...}'``): recorded unresolved."""
    os.environ["MOGG_HOSTILE_MODEL_TOKEN"] = "ENVMODELVALUE4242"
    try:
        rc, text = cli("train.py", [*BASE, "reader=openai", "reader.model=${oc.env:MOGG_HOSTILE_MODEL_TOKEN}"], tmp)
    finally:
        os.environ.pop("MOGG_HOSTILE_MODEL_TOKEN", None)
    _no_leak(tmp, ["ENVMODELVALUE4242"], text)
    _refused_or_ok(rc, text)
    manifest = next((tmp / "ckpt").rglob("train_manifest.json")).read_text()
    if "${oc.env:MOGG_HOSTILE_MODEL_TOKEN}" not in manifest:
        raise SilentWrong("train_manifest.json does not record where reader.model came from")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler) -> None:
        super().__init__(("127.0.0.1", 0), handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def _serve(handler) -> _Server:
    srv = _Server(handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv


class _EchoKey(BaseHTTPRequestHandler):
    """A server that refuses every request and echoes the key it was sent (as some gateways do)."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _echoed_key(tmp: Path) -> None:
    srv = _serve(_EchoKey)
    os.environ["MOGG_READER_API_KEY"] = "PLAINECHOKEY4242xyz"  # the documented way: in the environment
    try:
        rc, text = cli("evaluate.py", [*BASE, "reader=openai", f"reader.base_url={srv.url}", "reader.model=m",
                                       "reader.retries=0", "use_router=false"], tmp)
    finally:
        os.environ.pop("MOGG_READER_API_KEY", None)
        srv.shutdown()
        srv.server_close()
    _no_leak(tmp, ["PLAINECHOKEY4242xyz"], text)
    _refused_or_ok(rc, text)


def _fake_openai():
    from hostile_shared import _fake_server

    return _fake_server()


def _key_in_model(tmp: Path) -> None:
    """A key typed into ``reader.model``: redacted in .hydra/ but written into answers.jsonl before issue 59."""
    srv = _fake_openai()
    try:
        rc, text = cli("evaluate.py", [*BASE, "reader=openai", f"reader.base_url={srv.url}",
                                       "reader.model=sk-MODELKEY4242abcd", "use_router=false"], tmp)
    finally:
        srv.shutdown()
        srv.server_close()
    _no_leak(tmp, ["MODELKEY4242abcd"], text)
    _refused_or_ok(rc, text)


def _key_as_run_name(tmp: Path) -> None:
    rc, text = cli("train.py", [*BASE, "run_name=sk-RUNNAMEKEY4242", "evaluate_after=true"], tmp)
    _no_leak(tmp, ["RUNNAMEKEY4242"], text)
    _refused_or_ok(rc, text)


def _prepare_base_url(tmp: Path) -> None:
    """``mogg-prepare --base-url http://user:PW@host/...``: the password in every retry warning before issue 59."""
    p = subprocess.run([sys.executable, "-m", "mogg.data.prepare", "--dataset", "covidqa", "--data-dir", str(tmp / "d"),
                        "--base-url", "http://ann:PREPAREPW4242@127.0.0.1:9/covid", "--retries", "1", "--timeout", "2",
                        "--no-mirrors", "--no-progress"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    _no_leak(tmp, ["PREPAREPW4242"], p.stdout + p.stderr)
    if "retrying" not in p.stdout + p.stderr:
        raise SilentWrong(f"mogg-prepare printed no retry warning (the case tests nothing): {p.stderr[-300:]}")


def _scrubbed(shape: str, text: str, needle: str) -> Callable:
    def run(tmp: Path) -> None:
        from mogg.core.secrets import scrub_text

        if needle in scrub_text(text):
            raise Leaked(f"scrub_text kept the {shape}: {scrub_text(text)!r}")
    return run


PROSE = ("Equal token budgets", "mean token count", "Token budgets per policy", "Basic statistics of the corpus",
         "the bearer of the evidence", "Token counts are whitespace tokens.")


def _prose(text: str) -> Callable:
    def run(tmp: Path) -> None:
        from mogg.core.secrets import scrub_text

        if scrub_text(text) != text:
            raise SilentWrong(f"scrub_text rewrote prose: {text!r} -> {scrub_text(text)!r}")
    return run


def _cases() -> dict[str, tuple[Callable, str, str]]:
    out: dict[str, tuple[Callable, str, str]] = {}
    for shape, (key, value, needle) in SHAPES.items():
        out[f"+{key}=<{shape}> (no component reads it)"] = (_appended(key, value, needle), "error", key)
    out.update({
        "+ssh.passphrase with logger=wandb (the offline run file)": (
            _appended("ssh.passphrase", "WandbPassphrase4242", "WandbPassphrase4242", ("logger=wandb",)),
            "error", "ssh.passphrase"),
        "'+note=${oc.env:TOKEN}' (stored resolved)": (_env_note, "error", "note"),
        "-m +note=A,B (a sweep over an appended key)": (_swept_append, "error", "+note"),
        "reader.model='${oc.env:..._TOKEN}' recorded unresolved": (_env_interpolation, "ok", ""),
        "a key typed into reader.model (answer cache)": (_key_in_model, "error", "reader.model"),
        "run_name=sk-... (report.json)": (_key_as_run_name, "error", "run_name"),
        "a server echoing the key in its 401 reply": (_echoed_key, "error", "401"),
        "mogg-prepare --base-url with a password (retry warnings)": (_prepare_base_url, "ok", ""),
    })
    for shape, (_key, value, needle) in SHAPES.items():
        if shape not in ("ssh passphrase", "a key named bearer"):  # found by their key's name, not their shape
            out[f"scrub_text finds the {shape}"] = (_scrubbed(shape, f"log: {value} end", needle), "ok", "")
    out["scrub_text: Authorization: Bearer <plain>"] = (
        _scrubbed("header", "Authorization: Bearer PLAINHEADER4242", "PLAINHEADER4242"), "ok", "")
    for text in PROSE:
        out[f"scrub_text leaves {text!r}"] = (_prose(text), "ok", "")
    return out


def secret_cases() -> list:
    """Every case above as ``hostile_cases.Case`` rows."""
    from hostile_cases import Case

    return [Case("secrets (59)", name, run, expect, names) for name, (run, expect, names) in _cases().items()]


if __name__ == "__main__":
    import collections
    import logging

    from hostile_cases import replay

    logging.disable(logging.WARNING)
    res = replay(secret_cases())
    for r in res:
        print(f"{r['case']:60} {r['outcome']:14} {r['detail'][:150]}")
    counts = collections.Counter(r["outcome"] for r in res)
    print(len(res), "cases:", dict(counts))
    print(", ".join(f"{counts.get(k, 0)} {k}" for k in ("traceback", "crash", "silent", "lost", "leaked")))
