"""A deployed budget router's directory as every kind opens and checks it (issue 61: beside the kind,
:mod:`mogg.run.budget.base`, and its policy, not inside one kind that the other imports).

A directory (``router.fit=all`` or ``both``; an artifact written by
:meth:`mogg.run.budget.base.BudgetRouter.save_deployed` or a kind's own ``save``) holds
``deploy.json`` (the plan per calibrated budget, the spec, the knobs it was trained with),
``decisions.json`` (what the final fit decided for its training questions) and the kind's weights.
:func:`open_deployed` verifies it before any of it is read for meaning: every file against the
manifest, ``deploy.json`` against its seal, its format, its numbers within bounds
(:func:`mogg.run.budget.bounds.check_deploy`); the kind then reads its weights under the same
shared lock. :func:`check_budgets` and :func:`check_budget_value` check the budgets a directory
holds and the one a caller asks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, artifact_lock, read_manifest
from mogg.core.bounded import read_json
from mogg.core.seal import check_seal
from mogg.run.budget.bounds import check_deploy

DEPLOY, DECISIONS = "deploy.json", "decisions.json"


@contextmanager
def open_deployed(directory: Path, fmt: str, retrain: str, format_hint: str = "") -> Iterator[tuple[dict, dict]]:
    """``(deploy, decisions)`` of the deployed directory, verified (module doc), under a shared lock
    while the caller reads its weights; ``ArtifactError`` naming the file otherwise. ``fmt``: the
    ``format`` its ``deploy.json`` must say; ``retrain``: the end of each message (``retrain the
    router``), ``format_hint`` added after it where the format differs."""
    d = Path(directory)
    with artifact_lock(d, shared=True):
        read_manifest(d)  # every file against its sha256: names the corrupt one
        try:
            deploy, decisions = read_json(d / DEPLOY), read_json(d / DECISIONS)  # bounded depth and size
        except (OSError, ValueError) as e:
            raise ArtifactError(f"{d}: unreadable {DEPLOY} or {DECISIONS} ({e}); {retrain}") from None
        # before anything is read for meaning: the decisions bound to the weights
        check_seal(d, DEPLOY, deploy)
        if deploy.get("format") != fmt:
            raise ArtifactError(f"{d / DEPLOY}: format {deploy.get('format')!r} is not {fmt!r}; {retrain}{format_hint}")
        if not isinstance(deploy.get("spec"), dict):
            raise ArtifactError(f"{d / DEPLOY}: spec is missing; {retrain}")
        check_deploy(deploy, d)  # every number it carries, before any is read
        yield deploy, decisions


def check_budget_value(budget) -> float:
    """A budget given to a deployed router: a finite number of tokens > 0 (``--budget inf`` is refused)."""
    try:
        b = float(budget)
    except (TypeError, ValueError):
        raise ValueError(f"budget {budget!r} is not a number of tokens") from None
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"budget {budget!r} must be a finite number of tokens > 0")
    return b


def check_budgets(where: Path, budgets, n_actions: int) -> dict[int, dict]:
    """``deploy.json``'s budgets as {B: plan}, each plan in range, or ``ArtifactError`` naming the budget."""
    if not isinstance(budgets, dict) or not budgets:
        raise ArtifactError(f"{where}: budgets must map each calibrated budget to its plan; retrain the router")
    out = {}
    for b, p in budgets.items():
        ok = isinstance(b, str) and b.isdigit() and int(b) > 0 and str(int(b)) == b and isinstance(p, dict)
        ok = ok and p.get("deploy") in ("router", "envelope") and isinstance(p.get("envelope"), int) \
            and not isinstance(p.get("envelope"), bool) and 0 <= p["envelope"] < n_actions \
            and isinstance(p.get("lambda"), (int, float)) and np.isfinite(p["lambda"]) and p["lambda"] >= 0
        if not ok:
            raise ArtifactError(f"{where}: budget {b!r}'s plan is damaged ({p}); retrain the router")
        out[int(b)] = p
    return out
