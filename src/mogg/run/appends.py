"""What a run records is what the project knows: an appended ``+key=value`` that no component reads
is refused before the job writes anything (issue 59).

Hydra lets ``+ssh.passphrase=P`` or ``+note=...`` add any key to the composed config; nothing reads
it, yet it would be written verbatim into ``.hydra/``, ``train_manifest.json`` and the wandb run.
An append is kept only where something checks it: under a component node (one with ``_target_``,
whose constructor refuses a knob it does not take) or under a map the project reads key by key
(``train_sources``, ``retrievers``, ``ladders``, ``frontier``). A config-group append
(``+frontier=matched``) is a choice, not a value, and is always kept.
:class:`mogg.run.sweep.RunFiles` calls :func:`check_appends` before every job's ``.hydra/`` files.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

# top-level maps whose entries the project reads and validates itself
OPEN_MAPS = ("train_sources", "retrievers", "ladders", "frontier")


class UnknownAppend(ValueError):
    """An appended ``+key`` that no component reads."""


def _value_appends(task: Sequence[str], choices: Sequence[str]) -> list[tuple[str, str]]:
    """``(override, key)`` of every ``+key=value`` / ``++key=value`` in ``task`` that sets a value
    (not a config group)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out = []
    for text, o in zip(task, OverridesParser.create().parse_overrides(list(task))):
        if not (o.is_add() or o.is_force_add()) or o.package is not None or o.key_or_group in choices:
            continue
        out.append((text, o.key_or_group))
    return out


def read_by_a_component(base: DictConfig, key: str) -> bool:
    """Whether ``key`` (dotted) lands where something reads and checks it in ``base``, the config
    composed without the appends: under a node with ``_target_`` or one of :data:`OPEN_MAPS`."""
    parts = key.split(".")
    if parts[0] in OPEN_MAPS and parts[0] in base:
        return True
    node = base
    for part in parts[:-1]:
        if not isinstance(node, DictConfig) or part not in node:
            return False
        node = node._get_node(part)
        if isinstance(node, DictConfig) and "_target_" in node:
            return True
    return False


def unread_appends(config: DictConfig) -> list[str]:
    """The keys appended on the command line (``+key=value``) that no component reads, in order;
    ``config`` is a job's composed config with its ``hydra`` node."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    task = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task, resolve=False)]
    choices = list(OmegaConf.to_container(config.hydra.runtime.choices, resolve=False).keys())
    appends = _value_appends(task, choices)
    if not appends:
        return []
    dropped = {text for text, _ in appends}
    hydra_overrides = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)]
    saved = HydraConfig.instance().cfg
    try:  # the config as the project composes it without the appends: what the components know
        base = compose(config_name=config.hydra.job.config_name,
                       overrides=hydra_overrides + [t for t in task if t not in dropped])
    finally:
        HydraConfig.instance().cfg = saved
    return [key for _, key in appends if not read_by_a_component(base, key)]


def check_appends(config: DictConfig) -> None:
    """Refuse the job (:class:`UnknownAppend`, naming every such key, never its value) when an
    appended ``+key`` is read by no component."""
    unread = unread_appends(config)
    if unread:
        keys = ", ".join(f"+{k}" for k in unread)
        raise UnknownAppend(
            f"{keys}: no component reads {'it' if len(unread) == 1 else 'them'}, and a run records only what the "
            "project knows; remove it (a credential is never a config value: keep it in the environment and name "
            "the variable where the component reads it, e.g. reader.api_key_env=OPENAI_API_KEY; docs/reader.md)")
