"""What a run's config may hold: knobs checked before any work, secrets kept off disk.

* :func:`check_run_config` validates the top-level knobs once, at the start of ``train.py``,
  ``evaluate.py`` and ``build.py``, with messages that name the knob and its allowed range
  (component knobs are validated by their own constructors).
* :func:`cli_errors` turns a user-facing error (bad knob, bad file, refused artifact, a router
  that diverged) into one line on stderr and exit status 2, instead of a traceback.
* Secrets (``api_key``, ``token``, ``password``, ... anywhere in the config) never reach Hydra's
  saved configs, manifests or logs: :func:`scrub_argv` moves a secret given on the command line
  into an environment variable and leaves an ``${oc.env:...}`` interpolation in its place (Hydra
  saves configs unresolved), and :func:`redact` blanks secret values in anything mogg writes.
  The recommended way is the environment variable itself (``MOGG_READER_API_KEY``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

# the whole key name (after its last dot): api_key, hf_token, secret_key, password - not max_tokens
_SECRET_KEY = re.compile(r"^(?:.*[_-])?(?:api[_-]?key|apikey|token|access[_-]?token|secret|secret[_-]?key|password|passwd|credentials?)$",
                         re.IGNORECASE)
REDACTED = "<redacted>"


def is_secret_key(name: str) -> bool:
    """Whether a config key (its last dotted part) names a secret."""
    return bool(_SECRET_KEY.match(str(name).rsplit(".", 1)[-1]))


# user-info in a URL: scheme://user:password@host (or a token alone: scheme://token@host)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^/\s@]+)@")


def scrub_url(text: str) -> str:
    """``text`` with the user-info of every URL in it replaced by ``<redacted>``."""
    return _USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text) if "@" in text else text


def has_userinfo(text: str) -> bool:
    return bool(_USERINFO.search(text))


def redact(obj: Any) -> Any:
    """A copy of a JSON-like structure with every secret's value replaced by ``<redacted>`` and
    every URL's user-info scrubbed (:func:`scrub_url`)."""
    if isinstance(obj, Mapping):
        return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    return scrub_url(obj) if isinstance(obj, str) else obj


def _is_interpolation(v: Any) -> bool:
    return isinstance(v, str) and v.strip().startswith("${") and v.strip().endswith("}")


def redact_config(obj: Any) -> Any:
    """:func:`redact` for an *unresolved* config (``OmegaConf.to_container(resolve=False)``): an
    interpolation under a secret key (``${oc.env:MOGG_SECRET_...}``) is kept, it holds no secret;
    override strings ``key=value`` with a secret key have their value redacted."""
    if isinstance(obj, Mapping):
        return {k: (REDACTED if is_secret_key(k) and v not in (None, "") and not _is_interpolation(v)
                    else redact_config(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_config(v) for v in obj]
    if isinstance(obj, str):
        m = re.fullmatch(r"([+~]{0,2})([\w.\-@/]+)=(.*)", obj, re.DOTALL)
        if m and is_secret_key(m.group(2)) and m.group(3) not in ("", "null") and not _is_interpolation(m.group(3)):
            return f"{m.group(1)}{m.group(2)}={REDACTED}"
        return scrub_url(obj)
    return obj


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
            new = REDACTED if is_secret_key(str(k)) and raw else scrub_url(raw)
            if new != raw:
                with read_write(node):
                    node[k] = new
    walk(cfg, top=True)


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
        secret = m and m.group(3) not in ("", "null") and not m.group(3).startswith("${") and (
            is_secret_key(m.group(2)) or has_userinfo(m.group(3)))  # a URL's user-info: http://user:KEY@host
        if secret:
            var = "MOGG_SECRET_" + re.sub(r"\W", "_", m.group(2)).upper()
            env[var] = m.group(3)
            arg = f"{m.group(1)}{m.group(2)}=${{oc.env:{var}}}"
        out.append(arg)
    return out


def container(cfg: DictConfig) -> dict:
    """The resolved config as plain data, secrets redacted (for manifests and records)."""
    return redact(OmegaConf.to_container(cfg, resolve=True))


def _int(cfg, key: str, low: int, what: str, high: int | None = None) -> None:
    v = OmegaConf.select(cfg, key)
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= low and (high is None or v <= high)
    if not ok:
        rng = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{key}={v!r}: {what} must be an integer {rng}")


# switches a typo must not flip: a non-boolean value is refused, not taken by its truthiness
_BOOLEANS = ("use_router", "evaluate_after", "step_by_step", "frontier.guard", "router.allow_overlap",
             "corpus.allow_gold", "trainer.deterministic")


_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@,-]{0,199}")


def check_run_name(name: Any) -> None:
    """A run name is one folder name (``checkpoints/<run_name>``, ``reports/<run_name>``): not empty
    (an unset shell variable would make the runs' parent folder the run's), no path separators."""
    if not isinstance(name, str) or not _RUN_NAME.fullmatch(name):
        raise ValueError(f"run_name={name!r}: a run name must be one folder name of letters, digits and . _ + = @ , - "
                         "(starting with a letter or digit, at most 200 characters), e.g. run_name=pubmedqa_s0")


def check_run_config(cfg: DictConfig, stage: str) -> None:
    """Validate the run-level knobs for ``stage`` (train | evaluate | build) before any work."""
    for key in _BOOLEANS:
        node, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(cfg, node) if node else cfg
        value = parent.get(leaf) if parent is not None else None
        if value is not None and not isinstance(value, bool):
            # OmegaConf takes `use_router=maybe` as the string "maybe", which Python reads as true
            raise ValueError(f"{key}={value!r}: must be true or false")
    check_run_name(cfg.get("run_name"))
    router_ckpt = OmegaConf.select(cfg, "router.checkpoint")
    if stage == "evaluate" and router_ckpt and cfg.get("use_router") is False:
        # the transfer row needs the router: without it the checkpoint would be silently unused
        raise ValueError(f"router.checkpoint={router_ckpt!r} with use_router=false: the checkpoint would not be "
                         "used; drop router.checkpoint or set use_router=true")
    from mogg.core.threads import check_threads

    check_threads(cfg.get("threads"))
    _int(cfg, "k", 1, "the number of snippets selected per question (k)")
    _int(cfg, "k_r", 1, "the number of chunks retrieved per level (k_r)")
    _int(cfg, "seed", 0, "the seed")
    if cfg.get("max_context_tokens") is not None:
        _int(cfg, "max_context_tokens", 1, "the cap on a context's tokens (null = none)")
    router = cfg.get("router") or {}
    if stage == "train" and router.get("fit", "crossfit") in ("crossfit", "both"):
        _int(cfg, "n_folds", 2, "the number of cross-fitting folds (n_folds)")
    budgets = cfg.get("budgets")
    if budgets is not None and not OmegaConf.is_list(budgets):
        raise ValueError(f"budgets={budgets!r}: must be a list of token budgets, e.g. budgets=[128,256] ([] = off)")
    for b in budgets or []:
        if not isinstance(b, int) or isinstance(b, bool) or b < 1:
            raise ValueError(f"budgets={list(cfg.budgets)!r}: every token budget must be an integer >= 1")
    if cfg.get("budget_k") is not None:
        _int(cfg, "budget_k", 1, "the snippets each policy ranks for the budget comparison")
    if cfg.get("reader_batch_size") is not None:
        _int(cfg, "reader_batch_size", 1, "the reader's batch size")
    if cfg.get("shard") is not None:
        _int(cfg, "shard.count", 1, "the number of shards")
        if cfg.shard.get("index") is not None:
            _int(cfg, "shard.index", 0, "the shard index", cfg.shard.count - 1)
    if cfg.get("trainer") is not None and stage == "train":
        t = cfg.trainer
        _int(cfg, "trainer.max_epochs", 1, "the most epochs per router fit")
        _int(cfg, "trainer.batch_size", 1, "the router's batch size")
        _int(cfg, "trainer.patience", 0, "early-stopping patience (0 = off)")
        _int(cfg, "trainer.checkpoint_every", 0, "epochs between checkpoints (0 = none)")
        vf = t.get("val_fraction")
        if not isinstance(vf, (int, float)) or isinstance(vf, bool) or not 0 <= vf < 1:
            raise ValueError(f"trainer.val_fraction={vf!r}: the validation share of training questions must be in [0, 1)")
    paths = cfg.get("paths") or {}
    for key in ("artifacts", "checkpoints", "reports", "answers", "outputs"):
        p = paths.get(key)
        if key != "artifacts" and key in paths and (not isinstance(p, str) or not p.strip()):
            # an unset shell variable: reports/<run> would become /<run> at the file system's root
            raise ValueError(f"paths.{key}={p!r}: must name a folder (default: {key})")
        if p and os.path.exists(p) and not os.path.isdir(p):
            raise ValueError(f"paths.{key}={p!r} exists and is not a directory")


# Errors that describe the user's input, config or data, not a bug in mogg: one line, exit 2.
_USER_ERRORS = (ValueError, FileNotFoundError, FloatingPointError, KeyboardInterrupt)


def user_error(e: BaseException) -> BaseException | None:
    """The user-facing error behind ``e``, or None for a bug: mogg's own error classes, bad
    values, missing files, non-finite training; looked up through Hydra's instantiation wrapper
    (a component's constructor refusing a knob raises inside ``instantiate``)."""
    seen = 0
    while e is not None and seen < 5:
        if isinstance(e, _USER_ERRORS) or type(e).__module__.startswith("mogg."):
            return e
        knob = _unknown_knob(e)
        if knob is not None:
            return knob
        e, seen = e.__cause__, seen + 1
    return None


def _unknown_knob(e: BaseException) -> ValueError | None:
    """A component built from a config node with a key its class does not take (``+router.foo=1``;
    Hydra wraps the constructor's TypeError): the node and the key, as a user error."""
    cause = e.__cause__
    if type(e).__name__ != "InstantiationException" or not isinstance(cause, TypeError):
        return None
    m = re.search(r"unexpected keyword argument '(\w+)'|missing \d+ required positional arguments?: (.+)$", str(cause))
    if m is None:
        return None
    full = re.search(r"full_key: (\S+)", str(e))
    node = full.group(1) if full else "a config node"
    target = re.search(r"target '([\w.]+)'", str(e))
    what = f"{node}.{m.group(1)} is not a knob of {target.group(1) if target else node}" if m.group(1) else \
        f"{node} lacks required knob(s) {m.group(2)}"
    return ValueError(f"{what}: remove it or check its spelling (conf/{node.split('.')[0]}/ lists the knobs)")


@contextmanager
def cli_errors(script: str) -> Iterator[None]:
    """Run an entry point's work; a user-facing error (mogg's own error classes, bad values,
    missing files, non-finite training) is logged as ``<script>: <Error>: <message>`` and the
    process exits with status 2. ``MOGG_TRACEBACK=1`` re-raises it with the traceback; anything
    else (a bug) keeps its traceback. Progress bars and log lines share one channel (log lines are
    written above the bars, not through them)."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    # the first line before the slow imports and loads (torch, the ladder): a run is never silent
    logging.getLogger("mogg").info("%s: starting", script)
    try:
        with logging_redirect_tqdm():
            yield
    except BaseException as e:
        cause = user_error(e)
        if cause is None or isinstance(e, SystemExit) or os.environ.get("MOGG_TRACEBACK"):
            raise
        line = scrub_url(f"{script}: {type(cause).__name__}: {cause}")  # a URL's user-info never reaches a log
        logging.getLogger("mogg").debug("%s", line)  # the job's log file
        sys.stderr.write(line + "\n")  # the user's terminal, where errors go (Hydra logs to stdout)
        raise SystemExit(130 if isinstance(e, KeyboardInterrupt) else 2) from None
