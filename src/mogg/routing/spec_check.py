"""What a router directory's ``router.json`` must hold to be used: values in range, and the fields
that give the outputs their meaning equal to those the weights were saved with.

The weights file (``router.safetensors``) carries those fields as metadata (:func:`meaning`), so an
edited ``router.json`` with a recomputed manifest (profiles reordered: actions silently
relabelled; ``max_context_tokens=-5``: every context empty) is refused on load (:func:`check_spec`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mogg.core.artifacts import ArtifactError, canonical_json, diff_fields
from mogg.routing.inputs import objectives as obj
from mogg.routing.profiles import ProfileSpace

MEANING = "mogg.meaning"  # safetensors metadata key: the spec fields the outputs' meaning depends on


def meaning(spec: dict) -> dict:
    """What the router's outputs mean and how they become a context: levels, eq. 1 profiles (the
    action order), network shape, objective, temperature, decision rule, prior, recipe, k, cap."""
    comps = spec.get("components") or {}
    keys = ("levels", "profiles", "network", "objective", "temperature", "utility_scale", "decision", "prior", "recipe")
    return {**{k: spec.get(k) for k in keys},
            "k": comps.get("k"), "max_context_tokens": comps.get("max_context_tokens")}


def check_spec(directory: Path, spec: dict, saved: str | None) -> None:
    """Refuse a router.json whose values cannot be right (an edited file with a recomputed
    manifest): the meaning fields differ from those the weights were saved with, or out of range."""
    where = directory / "router.json"
    if saved is not None:
        fields = diff_fields(json.loads(saved), json.loads(canonical_json(meaning(spec))))
        if fields:
            raise ArtifactError(f"{where}: {', '.join(fields[:5])} differ from what router.safetensors was saved with "
                                "(the file was edited after training); retrain the router or restore the file")
    net = spec["network"]
    n_out = int(net.get("n_levels", 0)) if isinstance(net, dict) else 0
    levels, profiles = spec.get("levels"), spec.get("profiles")
    if profiles:
        try:
            space = ProfileSpace(tuple(profiles), len(levels or []))
        except (TypeError, ValueError) as e:
            raise ArtifactError(f"{where}: profiles {profiles!r}: {e}; retrain the router") from None
        if space.n != n_out:
            raise ArtifactError(f"{where}: {len(profiles)} profiles x {len(levels)} levels = {space.n} actions, but the "
                                f"network has {n_out} outputs; retrain the router")
    elif levels is not None and len(levels) != n_out:
        raise ArtifactError(f"{where}: {len(levels)} levels, but the network has {n_out} outputs; retrain the router")
    d = spec.get("decision")
    ok = isinstance(d, dict) and d.get("rule") in obj.DECISIONS and isinstance(d.get("fallback_level"), int) \
        and not isinstance(d.get("fallback_level"), bool) and 0 <= d["fallback_level"] < max(n_out, 1) \
        and isinstance(d.get("margin"), (int, float)) and not np.isnan(d["margin"])  # inf: never routes
    if d is not None and not ok:
        raise ArtifactError(f"{where}: decision {d!r} must hold a rule in {obj.DECISIONS}, a fallback_level in "
                            f"0..{n_out - 1} and a margin (a number); retrain the router")
    prior = spec.get("prior")
    if prior is not None and not (isinstance(prior, list) and len(prior) == n_out
                                  and all(isinstance(v, (int, float)) and np.isfinite(v) for v in prior)):
        raise ArtifactError(f"{where}: prior must be {n_out} finite numbers; retrain the router")
    t = spec.get("temperature", 1.0)
    if not (isinstance(t, (int, float)) and t > 0 and np.isfinite(t)):
        raise ArtifactError(f"{where}: temperature {t!r} must be a finite number > 0; retrain the router")
    comps = spec.get("components") or {}
    cap, k = comps.get("max_context_tokens"), comps.get("k", 1)
    if cap is not None and not (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1):
        raise ArtifactError(f"{where}: components.max_context_tokens={cap!r} must be null or an integer >= 1")
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= 1):
        raise ArtifactError(f"{where}: components.k={k!r} must be an integer >= 1")
