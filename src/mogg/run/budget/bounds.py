"""The numbers a deployed budget router's ``deploy.json`` carries, each bounded where it is read.

A deployed directory is data (issue 59): a ``settings.plans`` of 1e9 would allocate gigabytes per
question, a NaN ``evidence_len`` would change what is read without a word. :func:`check_deploy`
refuses every such value in one line naming the file and the field, before the session reads any
of them; the limits are :mod:`mogg.core.bounded`'s.
"""

from __future__ import annotations

from pathlib import Path

from mogg.core.artifacts import ArtifactError
from mogg.core.bounded import MAX_DEPTH, MAX_LEVELS, MAX_TOKENS, integer, number


def _tokens_or_none(value, where: str, field: str) -> None:
    if value is not None:
        integer(value, where, field, 1, MAX_TOKENS)


def check_space(space, where: str, field: str = "space") -> None:
    """An action space's levels, depth and caps within bounds (its size is their product)."""
    if not isinstance(space, dict) or not isinstance(space.get("level_names"), list) \
            or not isinstance(space.get("caps"), list):
        raise ArtifactError(f"{where}: {field} is damaged; retrain the router")
    integer(len(space["level_names"]), where, f"{field}.level_names (count)", 1, MAX_LEVELS)
    integer(space.get("depth"), where, f"{field}.depth", 1, MAX_DEPTH)
    integer(len(space["caps"]), where, f"{field}.caps (count)", 1, MAX_LEVELS)
    for i, c in enumerate(space["caps"]):
        _tokens_or_none(c, where, f"{field}.caps.{i}")


def check_deploy(deploy: dict, directory: Path) -> None:
    """Refuse (``ArtifactError`` naming ``deploy.json`` and the field) a number out of its bounds in
    a deployed action router's or evidence selector's ``deploy.json``: retrieval depth, caps and
    token limits, the action space, and the selector's candidates, plans and evidence length."""
    where = str(Path(directory) / "deploy.json")
    spec = deploy.get("spec")
    if not isinstance(spec, dict):
        raise ArtifactError(f"{where}: spec is missing; retrain the router")
    compat, frontier = spec.get("compat"), spec.get("frontier")
    if isinstance(compat, dict) and "k_r" in compat:
        integer(compat["k_r"], where, "spec.compat.k_r", 1, MAX_DEPTH)
    if isinstance(frontier, dict):
        integer(frontier.get("depth"), where, "spec.frontier.depth", 1, MAX_DEPTH)
        _tokens_or_none(frontier.get("max_context_tokens"), where, "spec.frontier.max_context_tokens")
        for i, c in enumerate(frontier.get("caps") or []):
            _tokens_or_none(c, where, f"spec.frontier.caps.{i}")
    if "space" in deploy:
        check_space(deploy["space"], where)
    settings = deploy.get("settings")
    if settings is None:
        return  # the action router: no reading settings
    if not isinstance(settings, dict):
        raise ArtifactError(f"{where}: settings is damaged; retrain the selector")
    for k in ("depth", "per_chunk", "plans"):
        integer(settings.get(k), where, f"settings.{k}", 1, MAX_DEPTH)
    # the stopping estimate's evidence length: a NaN or inf one changes every plan's F1_hat
    number(deploy.get("evidence_len"), where, "evidence_len", 0.0, float(MAX_TOKENS), low_open=True)
    integer(deploy.get("n_features"), where, "n_features", 1, 1 << 16)
