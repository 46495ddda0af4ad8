"""The ``frontier`` node (``frontier=matched``) as :class:`FrontierSettings`: its knobs declared once,
each field's default, check and doc (:mod:`mogg.core.knobs`), and the learned budget routers it
builds (``routers``: :func:`mogg.run.budget.registry.budget_routers`).

Light on purpose (no torch, no LightGBM): Hydra's ConfigStore reads these fields when it starts
(``hydra_plugins/mogg_knobs``), so ``conf/frontier/matched.yaml`` holds no default of its own.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from omegaconf import DictConfig

from mogg.core.knobs import Check, check_knobs, count, flag, is_int, knob, number
from mogg.core.runconfig import RENAMED_KEYS
from mogg.run.budget.base import BudgetRouter
from mogg.run.budget.registry import budget_routers

log = logging.getLogger(__name__)

NODE = "frontier"
# its knobs renamed since, as a config file may still set them (the command line's: mogg.core.runconfig.renamed_keys)
RENAMED = {k.split(".", 1)[1]: v.split(".", 1)[1] for k, v in RENAMED_KEYS.items() if k.startswith(NODE + ".")}


def _caps_ok(v) -> bool:
    return not isinstance(v, (str, int, float)) and len(v) > 0 and all(c is None or is_int(c) for c in v) \
        and len(set(v)) == len(v)


def _budgets_ok(v) -> bool:
    return not isinstance(v, (str, int, float)) and len(v) > 0 and all(is_int(b) for b in v)


@dataclass
class FrontierSettings:
    """``frontier`` node: depth K (k = 1..K), token caps, reported budgets, bootstrap resamples,
    whether train.py fits the learned budget routers, the guard, and the routers themselves
    (``routers``: {kind: its node}, built into :class:`mogg.run.budget.base.BudgetRouter` kinds)."""

    depth: int = knob(8, count("must be an integer >= 1 (k = 1..depth)"),
                      "k = 1..depth from each level's own ranking (retrieved this deep; features stay at k_r)")
    caps: tuple = knob((None, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384),
                       Check(_caps_ok, "must be a list of distinct token counts >= 1 (null = uncapped), "
                                       "e.g. frontier.caps=[null,64,128]", tuple),
                       "token caps (null = the k chunks whole)")
    budgets: tuple = knob((64, 128, 256, 512),
                          Check(_budgets_ok, "must be a list of token counts >= 1, e.g. frontier.budgets=[64,128]",
                                lambda v: tuple(sorted(int(b) for b in v))),
                          "matched mean context tokens of the report's table")
    n_boot: int = knob(1000, count("must be an integer >= 1 (bootstrap resamples)"),
                       "paired bootstrap resamples for the 95% intervals")
    budget_routers: bool = knob(True, flag(), "train.py fits (and evaluate.py reads) the learned budget routers "
                                "(checkpoints/<run>/<ladder>/<kind>/); false: the fixed families only (named "
                                "frontier.actions before issue 61: the old key still works)")
    guard: bool = knob(True, flag(), "the router policy: keep the training-chosen fixed configuration unless a "
                       "router beats it on validation ...")
    guard_se: float = knob(1.0, number("must be a number >= 0 (standard errors)", 0.0),
                           "... by this many standard errors of the paired validation difference (the one-SE rule; "
                           "0 = any margin)")
    routers: dict | list | None = knob(None, None, "the learned budget routers, {kind: its node} in the report's "
                                       "order: frontier/routers=[actions,selector] (conf/frontier/routers/<kind>.yaml)")

    def __post_init__(self) -> None:
        check_knobs(self, NODE)
        if not all(isinstance(r, BudgetRouter) for r in self.routers or ()):
            self.routers = budget_routers(self.routers)
        self.routers = list(self.routers or ())
        for kind in self.routers:
            kind.check(self)


def frontier_settings(cfg: DictConfig) -> FrontierSettings | None:
    """The run's ``frontier`` node as :class:`FrontierSettings` (None: no frontier), a name it does
    not know refused in one line."""
    node = cfg.get("frontier")
    if not node:
        return None
    from omegaconf import OmegaConf

    values = OmegaConf.to_container(node, resolve=True)
    if not isinstance(values, dict):
        raise ValueError(f"frontier={values!r}: choose a frontier config (frontier=matched) or null")
    known = {f.name for f in dataclasses.fields(FrontierSettings)}
    for old, new in RENAMED.items():
        if old in values:  # set on purpose (the defaults hold only the new key): it wins
            log.warning("frontier.%s is frontier.%s since issue 61 (the old key still works for now)", old, new)
            values[new] = values.pop(old)
    extra = sorted(set(values) - known)
    if extra:
        moved = {"fit": "frontier.routers.actions.<knob>", "selector": "frontier/routers=[actions,selector]"}
        hint = f"; it moved: {moved[extra[0]]}" if extra[0] in moved else ""
        raise ValueError(f"frontier.{extra[0]} is not a frontier knob ({', '.join(sorted(known))}){hint}")
    return FrontierSettings(**values)


def register_configs() -> None:
    """Hydra's ConfigStore entries of the knobs' defaults, read from the dataclasses that declare
    them: ``knobs/frontier`` (:class:`FrontierSettings`, named by ``conf/frontier/matched.yaml``'s
    defaults list) and ``knobs/<slot>`` for each built-in budget-router kind
    (:data:`mogg.run.budget.registry.KINDS`, named by ``conf/frontier/routers/<slot>.yaml``). Untyped
    nodes: a bad value is refused by the knob's own check, in its own words, when the settings are
    built. Called by Hydra as it starts (``hydra_plugins/mogg_knobs``)."""
    from hydra.core.config_store import ConfigStore

    from mogg.core.knobs import defaults
    from mogg.run.budget.registry import KINDS, target_class

    cs = ConfigStore.instance()
    cs.store(group="knobs", name=NODE, node={k: v for k, v in defaults(FrontierSettings).items() if k != "routers"})
    for slot, target in KINDS.items():
        cs.store(group="knobs", name=slot, node=defaults(target_class(target)))
