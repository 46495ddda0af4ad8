"""Policy names, defined once: the keys of every report table, records.jsonl and metrics.json.

``fixed:<level>`` per level, ``<router>[<rule>]`` for a router under its other decision rule;
every name that starts with ``mog_`` is driven by a router's weights (eq. 1-2).
"""

from __future__ import annotations

ROUTER = "mog_router"  # this run's cross-fitted router (out-of-fold decisions)
PRIOR = "mog_prior"  # its folds' mean training labels as constant weights
TRANSFER = "mog_transfer"  # a router trained on another question set, applied here
SOURCE_BEST_FIXED = "source_best_fixed"  # the fixed level the transferred router falls back to
ORACLE = "oracle"  # the per-question best level (hindsight ceiling)
LABELS = "labels"  # the soft labels used as weights (label-quality ceiling)
BEST_ACTION = "best_action"  # router.profiles: the eq. 1 action (profile, level) best on average (hindsight)
ACTION_ORACLE = "action_oracle"  # router.profiles: the per-question best eq. 1 action (hindsight ceiling)
VOTE_ENVELOPE = "envelope + eq. 1 votes"  # router.profiles, frontier: the fixed (profile, level, k, cap) chosen on training folds
RANDOM = "random"  # a random level per question
TOPK_ALL = "topk_all"  # top-k over all levels' hits
FIXED_PREFIX = "fixed:"
ROUTED_PREFIX = "mog_"
REFERENCES = (ORACLE, LABELS, RANDOM, BEST_ACTION, ACTION_ORACLE)  # references, not deployable methods
# matched-cost rows chosen with the test questions' own labels: ceilings, never bold (a learned
# kind's own ceiling, the sentence oracle, is named by its policy: BudgetPolicy.ceilings)
HINDSIGHT_ENVELOPE = "envelope (hindsight)"
FRONTIER_CEILINGS = (ORACLE, HINDSIGHT_ENVELOPE)


def beyond_zero(lo: float, digits: int = 3) -> bool:
    """Whether an interval's lower bound is above 0 as printed (``digits`` decimals): a cell reading
    [+0.000, +0.007] is not bold."""
    return round(float(lo), digits) > 0


def fixed(level: str) -> str:
    """The fixed-level policy of ``level``."""
    return f"{FIXED_PREFIX}{level}"


def is_fixed(name: str) -> bool:
    return name.startswith(FIXED_PREFIX)


def is_routed(name: str) -> bool:
    """Driven by a router's weights (``mog_router``, ``mog_prior``, ``mog_transfer``, their other rules)."""
    return name.startswith(ROUTED_PREFIX)


def transfer_from(source: str) -> str:
    """The router trained on one training source only (multi-source runs), e.g. ``mog_transfer@pubmedqa``."""
    return f"{TRANSFER}@{source}"


def other_rule(policy: str, rule: str) -> str:
    """``policy`` under its other decision rule, e.g. ``mog_router[fallback]``."""
    return f"{policy}[{rule}]"
