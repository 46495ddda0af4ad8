"""What a run's config may hold: knobs checked before any work, secrets kept off disk.

* :func:`check_run_config` validates the top-level knobs once, at the start of ``train.py``,
  ``evaluate.py`` and ``build.py``, with messages that name the knob and its allowed range
  (component knobs are validated by their own constructors).
* :func:`cli_errors` turns a user-facing error (bad knob, bad file, refused artifact, a router
  that diverged) into one line on stderr and exit status 2, instead of a traceback.
* :func:`prepare_argv` readies an entry point's command line before Hydra sees it: secrets moved
  into the environment (:mod:`mogg.core.secrets`, which keeps them off disk everywhere) and every
  ``run_name`` checked before Hydra creates its output folder.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig, OmegaConf

from mogg.core.disk import disk_error
from mogg.core.preemption import sigterm_ends_job
from mogg.core.secrets import _top_level_split, holds_secret, redact_config, scrub_argv, scrub_logs, scrub_text

log = logging.getLogger(__name__)


def prepare_argv(argv: Sequence[str], script: str) -> list[str]:
    """An entry point's command line before Hydra sees it: secrets moved to the environment
    (:func:`scrub_argv`) and every ``run_name`` given checked (:func:`check_run_name`), since Hydra
    creates ``<outputs>/<run_name>/`` before the job runs (``run_name=../../x`` would write outside).
    A bad one is one line on stderr and exit status 2."""
    try:
        out = renamed_keys(retired_experiments(scrub_argv(argv)))
        for arg in out[1:]:
            key, eq, value = arg.partition("=")
            if eq and key.lstrip("+~") == "run_name":
                for part in _top_level_split(value) if "-m" in out or "--multirun" in out else [value]:
                    if "${" not in part:  # an interpolation (x_s${seed}) is checked once resolved
                        check_run_name(part.strip().strip("'\""))
    except ValueError as e:
        sys.stderr.write(f"{script}: ValueError: {scrub_text(str(e))}\n")
        raise SystemExit(2) from None
    return out


# experiment files folded into one recipe + a config choice: the old name keeps working. Issue 47: a
# recipe on a gold-evidence set (experiment=<recipe> data=<set>); issue 61: the leave-one-set-out
# recipes (experiment=<recipe> heldout_set=<set>, the set held out, the two others trained on)
_THREE, _TWO = ("pubmedqa", "medmcqa", "covidqa"), ("pubmedqa", "medmcqa")
_FOLDED = {("frontier", "data"): _THREE, ("selector", "data"): _THREE, ("objectives", "data"): _TWO,
           ("inputs", "data"): _TWO, ("methods", "data"): _TWO,
           ("loso", "heldout_set"): _THREE, ("loso_frontier", "heldout_set"): _THREE,
           ("loso_selector", "heldout_set"): _THREE}
RETIRED = {f"{recipe}_{choice}": (recipe, group, choice)
           for (recipe, group), choices in _FOLDED.items() for choice in choices}


def retired_experiments(argv: Sequence[str]) -> list[str]:
    """``experiment=selector_pubmedqa`` (a file retired by issue 47) -> ``experiment=selector
    data=pubmedqa``, and ``experiment=loso_frontier_covidqa`` (retired by issue 61) ->
    ``experiment=loso_frontier heldout_set=covidqa``, logged; a sweep of retired names of one recipe
    becomes a sweep over its group. The run name is the old one (``frontier_${data_name}``,
    ``loso_frontier_${heldout_name}``), so its outputs land where they did."""
    out = list(argv)
    for i, arg in enumerate(out):
        key, eq, value = arg.partition("=")
        if not eq or key.lstrip("+") != "experiment":
            continue
        names = [v.strip() for v in value.split(",")]
        old = [n for n in names if n in RETIRED]
        if not old:
            continue
        recipes = {RETIRED[n][:2] if n in RETIRED else (n, None) for n in names}
        if len(old) != len(names) or len(recipes) != 1:
            raise ValueError(f"experiment={value}: {', '.join(old)} is now experiment=<recipe> <group>=<set> "
                             f"({', '.join(f'{n} -> {RETIRED[n][0]} {RETIRED[n][1]}={RETIRED[n][2]}' for n in old)}); "
                             "sweep one recipe over its group, e.g. data=pubmedqa,medmcqa,covidqa")
        recipe, group = recipes.pop()
        if any(a.partition("=")[0].lstrip("+") == group for a in out):
            raise ValueError(f"experiment={value} names its {group} choice; "
                             f"drop {group}=... or write experiment={recipe}")
        out[i:i + 1] = [f"{key}={recipe}", f"{group}=" + ",".join(RETIRED[n][2] for n in names)]
        log.warning("experiment=%s is experiment=%s %s since it was folded into its recipe (same run name)",
                    value, recipe, out[i + 1])
        break
    return out


# config keys renamed since: the old key keeps working on the command line (and in a config file:
# mogg.run.frontier_settings), with a warning naming the new one
RENAMED_KEYS = {"frontier.actions": "frontier.budget_routers"}  # issue 61: "actions" is one kind's name


def renamed_keys(argv: Sequence[str]) -> list[str]:
    """``frontier.actions=false`` (a key renamed since: :data:`RENAMED_KEYS`) -> ``frontier.budget_routers=false``,
    logged, before Hydra sees it (its struct config refuses a key it does not hold)."""
    out = list(argv)
    for i, arg in enumerate(out):
        key, eq, value = arg.partition("=")
        prefix = key[: len(key) - len(key.lstrip("+~"))]
        new = RENAMED_KEYS.get(key[len(prefix):])
        if new is not None:
            out[i] = f"{prefix}{new}{eq}{value}"
            log.warning("%s is %s since issue 61 (the old key still works for now)", key[len(prefix):], new)
    return out


def container(cfg: DictConfig) -> dict:
    """The config as plain data for manifests and records: interpolations unresolved
    (``${oc.env:VAR}`` records where a value came from, never the value) and secrets redacted."""
    return redact_config(OmegaConf.to_container(cfg, resolve=False))


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
    if holds_secret(name):  # a folder name, report.json, every log line: never a credential (not echoed)
        raise ValueError("run_name: it has the shape of a credential (a key or token); name the run for what it "
                         "runs, e.g. run_name=pubmedqa_s0")


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
    if stage in ("train", "evaluate"):
        _check_sources_exclude_own(cfg)
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
        if isinstance(p, str) and holds_secret(p):  # a folder name is written everywhere: never a credential
            raise ValueError(f"paths.{key}: it holds the shape of a credential (a key, token or URL password); "
                             "name a plain folder")
        if p and os.path.exists(p) and not os.path.isdir(p):
            raise ValueError(f"paths.{key}={p!r} exists and is not a directory")


def _question_set(node) -> dict | None:
    """A question-set node as plain data whatever its ``limit`` (a capped read of a set is that set)."""
    plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else None
    return {k: v for k, v in plain.items() if k != "limit"} if plain else None


def _check_sources_exclude_own(cfg) -> None:
    """Refuse a ``train_sources`` set that is the run's own questions: ``experiment=loso data=covidqa``
    (data= replacing the held-out set, the sources left as they were) trained the "transferred"
    routers on the questions they are read on, and reported in-set rows as transfer."""
    own = _question_set(cfg.get("questions"))
    for name, node in (cfg.get("train_sources") or {}).items():
        if own is not None and isinstance(node, DictConfig) and _question_set(node.get("questions")) == own:
            raise ValueError(f"train_sources.{name} is this run's own question set: the transferred routers would be "
                             "trained on the questions they are read on. Leave it out of train_sources (a "
                             "leave-one-set-out recipe chooses the set it holds out with heldout_set=<set> or "
                             "heldout=<shape>, not with data=<set>)")


# Errors that describe the user's input, config or data, not a bug in mogg: one line, exit 2.
_USER_ERRORS = (ValueError, FileNotFoundError, FloatingPointError, KeyboardInterrupt)


def user_error(e: BaseException) -> BaseException | None:
    """The user-facing error behind ``e``, or None for a bug: mogg's own error classes, bad
    values, missing files, non-finite training, a full or read-only disk; looked up through
    Hydra's instantiation wrapper (a component's constructor refusing a knob raises inside
    ``instantiate``)."""
    seen = 0
    while e is not None and seen < 5:
        if isinstance(e, _USER_ERRORS) or type(e).__module__.startswith("mogg."):
            return e
        disk = disk_error(e)  # a full or read-only disk: the user's, named by the file the OS refused
        if disk is not None:
            return disk
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
    written above the bars, not through them). In a SLURM job, SIGTERM ends the work without a
    result (:mod:`mogg.core.preemption`)."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    scrub_logs()  # a secret's shape (a bearer token, an sk-... key) never reaches a log line
    # the first line before the slow imports and loads (torch, the ladder): a run is never silent
    logging.getLogger("mogg").info("%s: starting", script)
    try:
        # in a SLURM job, SIGTERM (requeue, preemption, cancel) stops the job without a result (mogg.core.preemption)
        with logging_redirect_tqdm(), sigterm_ends_job():
            yield
    except BaseException as e:
        cause = user_error(e)
        if cause is None or isinstance(e, SystemExit) or os.environ.get("MOGG_TRACEBACK"):
            raise
        line = scrub_text(f"{script}: {type(cause).__name__}: {cause}")  # a URL's user-info never reaches a log
        logging.getLogger("mogg").debug("%s", line)  # the job's log file
        sys.stderr.write(line + "\n")  # the user's terminal, where errors go (Hydra logs to stdout)
        raise SystemExit(130 if isinstance(e, KeyboardInterrupt) else 2) from None
