"""Secrets kept off disk: found by a key's name and by their shape, redacted in everything a run
writes, moved off the command line into the environment.

* :func:`is_secret_key`: a key whose name contains key, token, secret, password, auth or
  credential (any case, plurals included) holds a secret when its value is text.
* :func:`scrub_text`: secrets found by their shape wherever they stand: URL user-info, bearer and
  basic credentials, query-string credentials, provider tokens (``sk-...``, ``hf_...``).
* :func:`redact` / :func:`redact_config` / :func:`redact_in_place`: a config or record with both
  kinds blanked (``<redacted>``), lists and maps included; interpolations (``${oc.env:...}``) are kept.
* :func:`scrub_argv`: a secret on the command line moves into an environment variable before
  Hydra starts (a list or map keeps its shape, each secret leaf its own variable; a sweep over a
  secret gets one variable per value, so one job per key), leaving ``${oc.env:...}`` behind.
* :func:`scrub_logs`: every log record scrubbed by shape.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig

# A key names a secret when its name (after its last dot) contains one of these, plurals and any
# case included: api_key, api_keys, hf_token, Authorization, X-Auth-Token, client_secret, passwords.
# Only text is a secret: max_tokens=64 or token_budget=3 (numbers, booleans, null) are kept.
_SECRET_KEY = re.compile(r"key|token|secret|passw|pwd|auth|credential|cookie", re.IGNORECASE)
REDACTED = "<redacted>"


def is_secret_key(name: str) -> bool:
    """Whether a config key (its last dotted part) names a secret."""
    return bool(_SECRET_KEY.search(str(name).rsplit(".", 1)[-1]))


# user-info in a URL: scheme://user:password@host (or a token alone: scheme://token@host)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/\s@]+)@")
# secrets by their shape, wherever they stand (a value under any key, a list, a log line):
# "Bearer <token>" / "Basic <credentials>", a URL query's credential (?api_key=, &token=, &sig=),
# and provider tokens (OpenAI-style sk-..., Hugging Face hf_..., GitHub ghp_/github_pat_)
_SHAPES = (
    re.compile(r"(?P<pre>\b(?:Bearer|Basic|Token)\s+)(?P<secret>[A-Za-z0-9._~+/=\-]{4,})", re.IGNORECASE),
    re.compile(r"(?P<pre>[?&;](?:[\w.\-]*(?:key|token|secret|passw|pwd|auth|credential|sig|signature)[\w.\-]*)=)"
               r"(?P<secret>[^&#\s'\"]+)", re.IGNORECASE),
    re.compile(r"(?P<pre>(?<![\w\-]))(?P<secret>(?:sk|rk|pk)-[A-Za-z0-9_\-]{6,}|hf_[A-Za-z0-9]{6,}"
               r"|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,})"),
)


def scrub_url(text: str) -> str:
    """``text`` with the user-info of every URL in it replaced by ``<redacted>``."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text) if "@" in text else text


def scrub_text(text: str) -> str:
    """``text`` with every secret found by its shape replaced by ``<redacted>``: URL user-info,
    bearer and basic credentials, query-string credentials, provider tokens (sk-..., hf_...)."""
    text = scrub_url(text)
    for shape in _SHAPES:
        text = shape.sub(lambda m: m.group("pre") + REDACTED, text)
    return text


def has_userinfo(text: str) -> bool:
    return bool(_USERINFO.search(text))


def holds_secret(text: str) -> bool:
    """Whether ``text`` holds a secret by its shape (:func:`scrub_text` would change it)."""
    return scrub_text(text) != text


def _secret_leaves(value: Any) -> Any:
    """Every text leaf of ``value`` (under a secret-named key) redacted; numbers, booleans, null kept."""
    if isinstance(value, Mapping):
        return {k: _secret_leaves(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_secret_leaves(v) for v in value]
    return REDACTED if isinstance(value, str) and value else value


def redact(obj: Any) -> Any:
    """A copy of a JSON-like structure with the text under every secret-named key replaced by
    ``<redacted>`` (lists and maps under it included) and every secret found by its shape scrubbed
    (:func:`scrub_text`)."""
    if isinstance(obj, Mapping):
        return {k: (_secret_leaves(v) if is_secret_key(k) else redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    return scrub_text(obj) if isinstance(obj, str) else obj


def _is_interpolation(v: Any) -> bool:
    return isinstance(v, str) and v.strip().startswith("${") and v.strip().endswith("}")


def _config_secret_leaves(value: Any) -> Any:
    """:func:`_secret_leaves` keeping interpolations (``${oc.env:MOGG_SECRET_...}`` holds no secret)."""
    if isinstance(value, Mapping):
        return {k: _config_secret_leaves(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_config_secret_leaves(v) for v in value]
    return REDACTED if isinstance(value, str) and value and not _is_interpolation(value) else value


def redact_config(obj: Any) -> Any:
    """:func:`redact` for an *unresolved* config (``OmegaConf.to_container(resolve=False)``): an
    interpolation under a secret key (``${oc.env:MOGG_SECRET_...}``) is kept, it holds no secret;
    override strings ``key=value`` with a secret key have their value redacted."""
    if isinstance(obj, Mapping):
        return {k: (_config_secret_leaves(v) if is_secret_key(k) else redact_config(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_config(v) for v in obj]
    if isinstance(obj, str):
        m = re.fullmatch(r"([+~]{0,2})([\w.\-@/]+)=(.*)", obj, re.DOTALL)
        if m and is_secret_key(m.group(2)) and _text_value(m.group(3)) and not _is_interpolation(m.group(3)):
            return f"{m.group(1)}{m.group(2)}={REDACTED}"
        return scrub_text(obj)
    return obj


def _text_value(raw: str) -> bool:
    """Whether an override's value is text (or holds text): ``64``, ``true``, ``null`` are not secrets."""
    import yaml

    try:
        v = yaml.safe_load(raw)
    except yaml.YAMLError:
        return bool(raw)
    return isinstance(v, (str, list, dict)) and bool(v)


def secret_values(cfg: DictConfig) -> list[str]:
    """The resolved values of every secret-shaped key and every URL's user-info in ``cfg`` (to
    scrub them from text that holds them under other names); unresolvable values are skipped."""
    out: set[str] = set()

    def walk(node) -> None:
        for k in (list(node.keys()) if isinstance(node, DictConfig) else range(len(node))):
            try:
                v = node[k]
            except Exception:  # an interpolation that cannot resolve here (${now:...} outside Hydra)
                continue
            if isinstance(v, (DictConfig, ListConfig)):
                walk(v)
            elif isinstance(v, str) and v:
                if is_secret_key(str(k)):
                    out.add(v)
                for m in _USERINFO.finditer(v):
                    out.add(m.group("info"))
                for shape in _SHAPES:
                    out.update(m.group("secret") for m in shape.finditer(v))
    walk(cfg)
    return sorted((s for s in out if len(s) >= 4), key=len, reverse=True)


def redact_in_place(cfg: DictConfig) -> None:
    """Blank every secret in ``cfg`` outside its ``hydra`` node (a sweep's master config, before
    Hydra saves it as ``multirun.yaml``; the jobs compose their own from the files)."""
    from omegaconf import read_write

    def walk(node, top: bool = False) -> None:
        for k in (list(node.keys()) if isinstance(node, DictConfig) else range(len(node))):
            if top and k == "hydra":
                continue
            child = node._get_node(k)
            if isinstance(child, (DictConfig, ListConfig)):
                walk(child)
                continue
            raw = child._value()
            if not isinstance(raw, str) or _is_interpolation(raw):
                continue
            new = REDACTED if raw and (is_secret_key(str(k)) or _under_secret_key(node)) else scrub_text(raw)
            if new != raw:
                with read_write(node):
                    node[k] = new
    walk(cfg, top=True)


def _under_secret_key(node) -> bool:
    """Whether a config node sits under a secret-named key (``api_keys: [a, b]``, ``headers.Authorization``)."""
    while node is not None:
        key = node._key()
        if key is not None and is_secret_key(str(key)):
            return True
        node = node._get_parent()
    return False


def _top_level_split(value: str) -> list[str]:
    """``value`` split at the commas outside brackets and quotes (Hydra's sweep values)."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in value:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    return parts + ["".join(cur)]


def _to_env(raw: str, name: str, secret: bool, env: MutableMapping[str, str]) -> str:
    """One override value with its secrets moved into environment variables ``name``, ``name_1``, ...:
    a text value becomes ``${oc.env:NAME}``; a list or map (``{Authorization: 'Bearer ...'}``) keeps
    its shape with each secret leaf (every text leaf under a secret-named key, or one shaped like a
    secret) replaced by its own ``${oc.env:...}``."""
    import yaml

    if raw[:1] not in "[{":
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]  # Hydra would have taken the quotes off
        env[name] = raw
        return f"${{oc.env:{name}}}"
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ValueError(f"{name}: a list or map holding a secret that cannot be read; set it in the environment "
                         "and refer to it as ${oc.env:VAR}") from None
    count = [0]

    def walk(v, under: bool):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {walk(x, under or is_secret_key(str(k)))}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(walk(x, under) for x in v) + "]"
        if isinstance(v, str) and v and (under or holds_secret(v)):
            var = name if count[0] == 0 else f"{name}_{count[0]}"
            count[0] += 1
            env[var] = v
            return f"${{oc.env:{var}}}"
        if isinstance(v, str):
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

    return walk(value, secret)


def scrub_argv(argv: Sequence[str], environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Command-line overrides with secrets moved into the environment.

    ``reader.api_key=sk-...`` becomes ``reader.api_key=${oc.env:MOGG_SECRET_READER_API_KEY}`` with
    the value in ``environ`` (default ``os.environ``), so the job still sees the key while Hydra's
    ``.hydra/`` files, ``multirun.yaml`` and its logs only hold the interpolation; so does any
    value holding a URL with user-info (``reader.base_url=http://user:KEY@host/v1``).
    """
    env = os.environ if environ is None else environ
    out = []
    for arg in argv:
        m = re.fullmatch(r"([+~]{0,2})([\w.\-@/]+)=(.*)", arg, re.DOTALL)
        value = m.group(3) if m else ""
        secret = m and value not in ("", "null") and not value.startswith("${") and (
            (is_secret_key(m.group(2)) and _text_value(value)) or holds_secret(value))
        if secret:
            if re.match(r"\s*(choice|range|interval|glob|shuffle|sort|tag)\(", value):
                raise ValueError(f"{m.group(2)}: a sweep function over a secret is not supported; list the values "
                                 f"({m.group(2)}=A,B: one job each) or set the variable {m.group(2)} reads in the "
                                 "environment")
            var = "MOGG_SECRET_" + re.sub(r"\W", "_", m.group(2)).upper()
            parts = _top_level_split(value)
            refs = []
            for i, part in enumerate(parts):  # a sweep (A,B): one variable per value, so one job per key
                name = var if len(parts) == 1 else f"{var}_{i}"
                refs.append(_to_env(part.strip(), name, is_secret_key(m.group(2)), env))
            arg = f"{m.group(1)}{m.group(2)}={','.join(refs)}"
        out.append(arg)
    return out


class _ScrubSecrets(logging.Filter):
    """Log records with every secret found by its shape scrubbed (:func:`scrub_text`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = scrub_text(msg)
        if clean != msg:
            record.msg, record.args = clean, ()
        return True


def scrub_logs() -> None:
    """Scrub secrets (by their shape) from every record the root logger's handlers write: the
    job's log file and the terminal."""
    for h in logging.getLogger().handlers:
        if not any(isinstance(f, _ScrubSecrets) for f in h.filters):
            h.addFilter(_ScrubSecrets())
