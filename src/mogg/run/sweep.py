"""Every job owns its outputs: distinct run names in a sweep, and Hydra's files without secrets.

A run's checkpoints and report live under ``checkpoints/<run_name>/`` and ``reports/<run_name>/``,
so two jobs of one sweep with one run name would replace each other's results. Hydra's callback
:class:`RunFiles` (``hydra.callbacks.runfiles`` in ``conf/config.yaml``) prevents that:

* **Sweeps** (``-m``), before any job starts: every job's config is composed and its run name
  resolved; jobs that would share a name get the swept overrides that tell them apart appended,
  ``<run_name>_<key>=<value>`` in the order swept, the seed last as ``_s<seed>`` (so
  ``python train.py -m labels=metric,tfidf seed=0,1`` writes ``default_labels=metric_s0``, ...,
  and ``collect`` groups the seeds). A run name already distinct per job
  (``run_name=x_${seed}`` swept over seeds, or ``experiment=a,b`` whose files name their runs)
  is kept as it is. Names still equal after that (``seed=0,0``) refuse the sweep: one line, exit
  2, nothing run. The names reach the jobs through ``MOGG_SWEEP_RUN_NAMES`` (a JSON map from a
  job's overrides to its name), which local, joblib and submitit jobs inherit;
  :func:`job_run_name` reads it.
* **Secrets**: Hydra writes ``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml`` before
  a job runs, values and all, and ``multirun.yaml`` before a sweep. Its own writer is off
  (``hydra.output_subdir: null``); :meth:`RunFiles.on_job_start` writes the same three files with
  every secret-shaped key's value and every URL's user-info redacted
  (:func:`mogg.core.secrets.redact_config`), and the sweep's config is redacted in place
  before ``multirun.yaml`` is saved (the jobs recompose theirs from the files).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from mogg.run.appends import UnknownAppend, check_appends

log = logging.getLogger(__name__)

ENV = "MOGG_SWEEP_RUN_NAMES"
# overrides that never tell two runs' results apart (where things go, how fast they run)
_NOT_RESULTS = ("run_name", "report_dir", "paths", "threads", "slots", "slots_dir", "hydra", "evaluate_after",
                "logger")


class SweepError(ValueError):
    """A sweep whose jobs would write into the same run folders."""


def _key(override: str) -> tuple[str, str]:
    """``(key, value)`` of one override string (``+a.b=c`` -> ``("a.b", "c")``)."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def _counts(key: str) -> bool:
    return not any(key == k or key.startswith((k + ".", k + "/")) for k in _NOT_RESULTS)


def _part(key: str, value: str) -> str:
    """One name part: ``s<seed>`` for the seed, else ``<key>=<value>`` with path-safe characters."""
    value = re.sub(r"[^A-Za-z0-9._+=@-]+", "-", value.strip("'\"")).strip("-") or "none"
    return f"s{value}" if key == "seed" else f"{key}={value}"


def derive_run_names(jobs: Sequence[Sequence[str]], names: Sequence[str], swept: Sequence[str],
                     differing: dict[int, list[str]] | None = None) -> list[str]:
    """Run names for a sweep's jobs (``jobs``: each job's overrides; ``names``: each job's own
    resolved run name; ``swept``: the keys the sweep varies, in command-line order).

    Jobs sharing a name get ``_<key>=<value>`` for every swept key whose value differs among
    them (the seed last, as ``_s<seed>``); raises :class:`SweepError` if names still repeat.
    ``differing``: filled with each renamed job's differing keys.
    """
    values = [dict(_key(o) for o in job) for job in jobs]
    order = [k for k in swept if k != "seed" and _counts(k)] + (["seed"] if "seed" in swept else [])
    out = list(names)
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        groups.setdefault(n, []).append(i)
    for name, idx in groups.items():
        if len(idx) < 2:
            continue
        differ = [k for k in order if len({values[i].get(k) for i in idx}) > 1]
        for i in idx:
            out[i] = "_".join([name] + [_part(k, values[i].get(k, "")) for k in differ])
            if differing is not None:
                differing[i] = differ
    seen: dict[str, int] = {}
    for i, n in enumerate(out):
        if n in seen:
            j = seen[n]
            raise SweepError(f"jobs #{j} ({' '.join(jobs[j])}) and #{i} ({' '.join(jobs[i])}) would both write "
                             f"run {n!r} (checkpoints/{n}, reports/{n}): the sweep repeats a job, or its values differ "
                             "only in characters a folder name cannot hold; give each job its own run_name")
        seen[n] = i
    return out


def _job_id(overrides: Sequence[str]) -> str:
    return json.dumps(sorted(str(o) for o in overrides))


def sweep_run_names(config: DictConfig) -> dict[str, str]:
    """Job overrides (:func:`_job_id`) -> run name for the sweep of ``config`` (Hydra's master
    config of a multirun): every job composed, its run name resolved, then :func:`derive_run_names`."""
    from hydra import compose
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    task = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task, resolve=False)]
    loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(task)  # the loader expands glob()
    swept = [o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()]
    jobs = [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    if not jobs:
        return {}
    # one job is mapped too (to its own name): without an entry, job_run_name's fallback for launchers
    # that drop the environment renamed it by its overrides, and evaluate.py -m looked for a run never trained;
    # its appends are checked in the loop below, before multirun.yaml
    hydra_overrides = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)]
    saved = HydraConfig.instance().cfg
    names, reader_labels = [], []
    try:
        for job in jobs:
            cfg = compose(config_name=config.hydra.job.config_name, overrides=hydra_overrides + job,
                          return_hydra_config=True)
            HydraConfig.instance().set_config(cfg)  # ${hydra:runtime.choices.experiment} in run names
            check_appends(cfg)  # before multirun.yaml: a +key no component reads refuses the sweep
            names.append(str(OmegaConf.select(cfg, "run_name")))
            # labels=reader: the reader decided what the routers trained on, so its knobs are not evaluation-only
            reader_labels.append(OmegaConf.select(cfg, "labels.source") == "reader")
    finally:
        HydraConfig.instance().cfg = saved
    differing: dict[int, list[str]] = {}
    derived = derive_run_names(jobs, names, swept, differing)
    evaluating = str(OmegaConf.select(config, "hydra.job.name")) == "evaluate"
    out: dict[str, Any] = {}
    for i, (job, name) in enumerate(zip(jobs, derived)):
        # evaluate.py over reader knobs: every job reads the one trained run, each writes its own report
        only_eval = evaluating and not reader_labels[i] and differing.get(i) \
            and all(_evaluation_only(k) for k in differing[i])
        out[_job_id(job)] = {"report": name} if only_eval else name
    return out


# knobs that change how a trained run is evaluated, never what it trained (evaluate.py sweeps over them
# keep the run's name for its checkpoints and give each job a report folder of its own)
_EVALUATION_ONLY = ("reader", "reader_policies", "reader_batch_size", "step_by_step", "budgets", "budget_k")


def _evaluation_only(key: str) -> bool:
    return any(key == k or key.startswith((k + ".", k + "/")) for k in _EVALUATION_ONLY)


def job_run_name(cfg: DictConfig) -> str:
    """This job's run name: in a sweep the one :class:`RunFiles` derived for its overrides (set on
    ``cfg.run_name``, so ``report_dir`` and the checkpoints follow), else ``cfg.run_name``."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return cfg.run_name
    names = json.loads(os.environ.get(ENV) or "{}")
    task = [str(o) for o in HydraConfig.get().overrides.task]
    name = names.get(_job_id(task))
    if isinstance(name, dict):  # an evaluation sweep over reader knobs: the run's checkpoints, a report of its own
        default = f"{cfg.paths.reports}/{cfg.run_name}"
        if str(cfg.get("report_dir")) == default:
            OmegaConf.update(cfg, "report_dir", f"{cfg.paths.reports}/{name['report']}", force_add=True)
            log.info("report of this sweep's job: %s (the trained run: %s)", cfg.report_dir, cfg.run_name)
        return cfg.run_name
    if name is None:  # a launcher that did not pass the environment on: every result-changing override
        name = "_".join([str(cfg.run_name)] + [_part(*_key(o)) for o in task if _counts(_key(o)[0])])
    if name != cfg.run_name:
        OmegaConf.update(cfg, "run_name", name, force_add=True)
        log.info("run name in this sweep: %s", name)
    return name


def _refuse(config: DictConfig, e: Exception) -> None:
    """One line on stderr and exit status 2, as the entry points refuse a bad knob."""
    sys.stderr.write(f"{config.hydra.job.name}.py: {type(e).__name__}: {e}\n")
    raise SystemExit(2) from None


def _redacted_yaml(obj: Any, secrets: Sequence[str]) -> str:
    from mogg.core.secrets import REDACTED, redact_config

    text = OmegaConf.to_yaml(OmegaConf.create(redact_config(obj)))
    for s in secrets:  # a secret's value that also sits under another key (override_dirname, a log line)
        text = text.replace(s, REDACTED)
    return text


class RunFiles(Callback):
    """Hydra callback (``hydra.callbacks.runfiles``): distinct run names in a sweep, redacted ``.hydra/`` files."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from mogg.core.secrets import redact_in_place

        try:
            names = sweep_run_names(config)
        except SweepError as e:
            sys.stderr.write(f"sweep refused: {e}\n")
            raise SystemExit(2) from None
        except UnknownAppend as e:
            _refuse(config, e)
        os.environ[ENV] = json.dumps(names)
        redact_in_place(config)  # before the sweeper saves multirun.yaml

    def on_job_start(self, config: DictConfig, **kwargs) -> None:
        from mogg.core.secrets import remember, remember_environment, secret_values

        try:
            check_appends(config)  # before anything is written: a +key no component reads is refused
        except UnknownAppend as e:
            _refuse(config, e)
        remember_environment()  # the credentials this job can see: redacted by value in all it writes
        remember(*secret_values(config))
        out = Path(config.hydra.runtime.output_dir) / ".hydra"
        out.mkdir(parents=True, exist_ok=True)
        full = OmegaConf.to_container(config, resolve=False)
        secrets = secret_values(config)
        task = {k: v for k, v in full.items() if k != "hydra"}
        files = {"config.yaml": task, "hydra.yaml": {"hydra": full.get("hydra", {})},
                 "overrides.yaml": list(full.get("hydra", {}).get("overrides", {}).get("task", []))}
        for name, obj in files.items():
            (out / name).write_text(_redacted_yaml(obj, secrets))
