"""Secrets kept off disk: found by a key's name, by their shape and by their value, redacted in
everything a run writes and prints, moved off the command line into the environment.

* :func:`is_secret_key`: a key whose name contains key, token, secret, password, passphrase, auth,
  bearer, jwt, private or credential (any case, plurals included) holds a secret when its value is
  text (``api_key_env``/``api_key_file`` name where one lives: :mod:`mogg.core.credentials`).
* :func:`scrub_text`: the credentials this process knows (:func:`remember`,
  :func:`remember_environment`) by value, and secrets found by their shape wherever they stand: URL
  user-info, Authorization headers, query and fragment credentials, PEM private keys, provider
  tokens (``sk-``, ``sk_live_``, ``hf_``, ``xoxb-``, ``AIza``, ``AKIA``, JWTs), ``password=...``, a
  Bearer/Basic/Token credential; precise enough that prose (the docs, a report) passes unchanged.
* :func:`redact` / :func:`redact_config` / :func:`redact_in_place`: a config or record with both
  kinds blanked (``<redacted>``), lists and maps included; interpolations (``${oc.env:...}``) are kept.
* :func:`scrub_argv`: a secret on the command line moves into an environment variable before
  Hydra starts (a list or map keeps its shape, each secret leaf its own variable; a sweep over a
  secret gets one variable per value, so one job per key), leaving ``${oc.env:...}`` behind; a
  token typed into a knob that is no credential is refused.
* :func:`scrub_logs`: every log record scrubbed.

Length (over ~350 lines): one definition of what a secret is (its names, shapes and known values)
serves the three places that must agree on it (configs redacted, text scrubbed, the command line
moved); split, a shape added to one would be missing from the others, the bug of issue 59.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from omegaconf import DictConfig, ListConfig

# A key names a secret when its name (after its last dot) contains one of these, plurals and any
# case included: api_key, api_keys, hf_token, Authorization, X-Auth-Token, client_secret, passwords,
# an ssh passphrase, a private key, a bearer, a jwt. Only text is a secret: max_tokens=64 or
# token_budget=3 (numbers, booleans, null) are kept.
_SECRET_KEY = re.compile(r"key|token|secret|passw|passphrase|pwd|auth|credential|cookie|bearer|jwt|private",
                         re.IGNORECASE)
REDACTED = "<redacted>"


# where a secret lives, not the secret: api_key_env: OPENAI_API_KEY, api_key_file: ~/.openai.key
_SECRET_SOURCE = re.compile(r"_(?:env|file)$", re.IGNORECASE)


def is_secret_key(name: str) -> bool:
    """Whether a config key (its last dotted part) names a secret (``api_key_env`` and
    ``api_key_file`` name where one lives, and are recorded as they are)."""
    last = str(name).rsplit(".", 1)[-1]
    return bool(_SECRET_KEY.search(last)) and not _SECRET_SOURCE.search(last)


# user-info in a URL: scheme://user:password@host (or a token alone: scheme://token@host)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/\s@]+)@")
# a credential in a URL's query or fragment (?api_key=, &token=, &sig=, #access_token=)
_QUERY = re.compile(r"(?P<pre>[?&;#](?:[\w.\-]*(?:key|token|secret|passw|pwd|auth|credential|sig|signature)[\w.\-]*)=)"
                    r"(?P<secret>[^&#\s'\"`),]+)", re.IGNORECASE)
# secrets by their shape, wherever they stand (a value under any key, a list, a log line). Each is
# precise enough that ordinary prose never matches ("Equal token budgets", "Basic statistics"):
# tests/core/test_secrets.py runs the README, docs/ and a full report through the scrubber unchanged.
_SHAPES = (
    # the body of a PEM private key (its BEGIN/END lines are kept, so a reader sees what was there)
    re.compile(r"(?P<pre>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?P<secret>.+?)"
               r"(?=-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL),
    # an Authorization header's credentials, whatever its scheme
    re.compile(r"(?P<pre>\bAuthorization[\"']?\s*[:=]\s*[\"']?(?:(?:Bearer|Basic|Token|Digest)\s+)?)"
               r"(?P<secret>[^\s'\",;}]{4,})", re.IGNORECASE),
    _QUERY,
    # provider tokens: OpenAI-style sk-..., Hugging Face hf_..., GitHub, Slack xox?-, Stripe sk_live_,
    # Google AIza..., AWS access key ids, JSON web tokens
    re.compile(r"(?P<pre>(?<![\w\-]))(?P<secret>(?:sk|rk|pk)-(?=[\w\-]*[0-9A-Z])[A-Za-z0-9_\-]{8,}"
               r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{8,}|hf_[A-Za-z0-9]{6,}|gh[pousr]_[A-Za-z0-9]{8,}"
               r"|github_pat_[A-Za-z0-9_]{8,}|xox[abposr]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{35}"
               r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9])"
               r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*)"),
    # a password written as name=value or name: value (a DSN, a log line, a connection string)
    re.compile(r"(?P<pre>(?<![\w\-])(?:password|passwd|passphrase|pwd)\s*[=:]\s*[\"']?)(?P<secret>[^\s'\"`,;&}]+)",
               re.IGNORECASE),
)
# "Bearer <token>", "Basic <credentials>", "Token <token>" outside a header: only when what follows
# looks like a credential (:func:`_credential_like`), so "token budgets" or "Basic statistics" stay
_SCHEME = re.compile(r"(?P<pre>\b(?:[Bb]earer|Basic|Token)\s+)(?P<secret>[A-Za-z0-9._~+/=\-]{8,})")


def _credential_like(s: str) -> bool:
    """Whether a word after Bearer/Basic/Token is a credential: 8+ characters, ``=`` only as base64
    padding, a digit, a capital inside it (mixed-case base64) or padding, and not mostly words
    ("precision/recall/F1" is prose: most of it is lower-case words of 3+ letters)."""
    body = s.rstrip("=")
    if len(s) < 8 or "=" in body:
        return False
    words = sum(len(w) for w in re.split(r"[./_\-+~]", body) if len(w) >= 3 and w.isalpha() and w.islower())
    if words * 2 > len(body):
        return False
    return any(c.isdigit() for c in s) or any(c.isupper() for c in body[1:]) or body != s


# Credential values this process knows (the environment's credential variables, the values moved off
# the command line, a reader's key): redacted by value wherever they stand, whatever their shape.
_KNOWN: set[str] = set()
_NOT_SECRET_ENV = {"PWD", "OLDPWD"}  # names that match the pattern but hold a directory


def remember(*values: str | None) -> None:
    """Add credential values to those :func:`scrub_text` redacts by value (short or empty ones are
    skipped: a value of under 6 characters would rewrite ordinary words)."""
    for v in values:
        if isinstance(v, str) and len(v.strip()) >= 6:
            _KNOWN.add(v.strip())


def remember_environment(environ: Mapping[str, str] | None = None) -> None:
    """Remember every environment variable whose name names a credential (``OPENAI_API_KEY``,
    ``HF_TOKEN``, ``MOGG_SECRET_*``, ``AWS_SECRET_ACCESS_KEY``); paths, numbers and booleans are not
    credentials (``SSH_AUTH_SOCK``, ``TOKENIZERS_PARALLELISM=false``)."""
    env = os.environ if environ is None else environ
    for name, value in env.items():
        if name in _NOT_SECRET_ENV or not (name.startswith("MOGG_SECRET_") or is_secret_key(name)):
            continue
        v = value.strip()
        if len(v) >= 8 and v[0] not in "/.~" and not re.fullmatch(r"[\d.]+|true|false|none|null", v, re.IGNORECASE):
            remember(v)


# what documentation writes where a credential goes (user:KEY@host, ?api_key=..., Bearer sk-...,
# password=<yours>, ${oc.env:VAR}): not a credential, so the docs' own text passes unchanged
_PLACEHOLDER = re.compile(r"[`'\"]?(?:.*\.\.\.|.*\u2026|<[^<>]*>|\$\{[^}]*\}|\$\w+|%\w+%"
                          r"|(?:YOUR_)?(?:API_)?(?:KEY|TOKEN|SECRET|PASSWORD))[`'\"]?")


def _placeholder(s: str) -> bool:
    """Whether ``s`` is a placeholder for a credential, not one (``KEY``, ``PASSWORD``, ``...``,
    ``<token>``, ``$VAR``); a literal credential is never one of these."""
    return bool(_PLACEHOLDER.fullmatch(s))


def _userinfo(m: re.Match) -> str:
    info = m.group("info")
    if _placeholder(info.partition(":")[2] if ":" in info else info):
        return m.group(0)
    return f"{m.group('scheme')}{REDACTED}@"


def scrub_known(text: str) -> str:
    """``text`` with every credential this process knows (:func:`remember`) replaced by
    ``<redacted>``, and nothing else changed (for data such as answers and corpus text, where a
    shape could be the data's own)."""
    for known in sorted(_KNOWN, key=len, reverse=True):
        if known in text:
            text = text.replace(known, REDACTED)
    return text


def scrub_known_in(obj: Any) -> Any:
    """:func:`scrub_known` over every text of a JSON-like structure (keys and values)."""
    if not _KNOWN:
        return obj
    if isinstance(obj, Mapping):
        return {scrub_known_in(k): scrub_known_in(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub_known_in(v) for v in obj]
    return scrub_known(obj) if isinstance(obj, str) else obj


def scrub_url(text: str) -> str:
    """``text`` with the user-info of every URL in it replaced by ``<redacted>``."""
    return _USERINFO.sub(_userinfo, text) if "@" in text else text


def scrub_text(text: str) -> str:
    """``text`` with every credential this process knows (:func:`remember`) and every secret found by
    its shape replaced by ``<redacted>``: URL user-info, Authorization headers, query-string and
    fragment credentials, PEM private keys, provider tokens (sk-..., hf_..., xoxb-..., AKIA...,
    AIza..., JWTs), ``password=...`` and a Bearer/Basic/Token credential."""
    text = scrub_known(text)
    text = scrub_url(text)
    for shape in _SHAPES:
        text = shape.sub(lambda m: m.group(0) if _placeholder(m.group("secret")) else m.group("pre") + REDACTED, text)
    return _SCHEME.sub(lambda m: m.group("pre") + REDACTED if _credential_like(m.group("secret")) else m.group(0), text)


def has_userinfo(text: str) -> bool:
    return bool(_USERINFO.search(text))


def found_secrets(text: str) -> list[str]:
    """The secrets :func:`scrub_text` finds by shape in ``text`` (URL user-info included)."""
    out = [m.group("info") for m in _USERINFO.finditer(text) if _userinfo(m) != m.group(0)]
    for shape in _SHAPES:
        out += [m.group("secret") for m in shape.finditer(text) if not _placeholder(m.group("secret"))]
    return out + [m.group("secret") for m in _SCHEME.finditer(text) if _credential_like(m.group("secret"))]


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
                out.update(found_secrets(v))
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
        remember(raw)  # redacted by value wherever it turns up (a server echoing it, a log line)
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
            remember(v)
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
        plain = m and value not in ("", "null") and not value.startswith("${")
        in_url = plain and bool(_USERINFO.search(value) or _QUERY.search(value))  # user:KEY@host counts here
        secret = plain and ((is_secret_key(m.group(2)) and _text_value(value)) or in_url or holds_secret(value))
        if secret and not in_url and not is_secret_key(m.group(2)) and value.strip()[:1] not in "[{":
            # a token typed into a knob that is no credential (reader.model=sk-..., run_name=sk-...) would
            # reach the answer cache, the report, folder names: a mistake, refused without echoing it
            raise ValueError(f"{m.group(2)}: its value has the shape of a credential (a key or token); a credential "
                             "is never a config value: keep it in the environment and name the variable where the "
                             "component reads it (e.g. reader.api_key_env=OPENAI_API_KEY, docs/reader.md)")
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
