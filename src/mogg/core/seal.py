"""A router directory's seal: its decisions bound to its weights.

A directory's manifest lists every file's sha256, but anyone can recompute those: an edited
``deploy.json`` (a plan flipped from the envelope to the router, a budget copied in) with a re-signed
manifest would load. The seal closes that gap for the file that decides routing (the *holder*:
``deploy.json``, ``router.json``). When the directory is written, the holder gets a ``seal`` field:

    {"files": {relative path: sha256, ...},   # every other file of the directory (weights, plans, gate, members)
     "digest": sha256 over the holder's own content (without its seal) and that file list}

On load, :func:`check_seal` recomputes both before anything is imported or built, and names the file
that was added, removed or changed, or the holder whose content changed. The seal is a checksum,
not a signature: it catches a directory edited after training, even with its manifest re-signed;
a directory written from scratch by someone else routes as its author chose, which is why nothing
in it can run code (:mod:`mogg.core.trusted`). Hidden files (``.DS_Store``) are outside the seal.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from mogg.core.artifacts import MANIFEST, ArtifactError, canonical_json, sha256_file

log = logging.getLogger(__name__)

SEAL = "seal"
_WARNED: set[str] = set()


def _files(directory: Path, holder: str) -> dict[str, str]:
    """sha256 of every file under ``directory`` but the manifest, the holder and hidden files."""
    out = {}
    for p in sorted(Path(directory).rglob("*")):
        rel = p.relative_to(directory)
        if p.is_file() and str(rel) not in (MANIFEST, holder) and not any(part.startswith(".") for part in rel.parts):
            out[str(rel)] = sha256_file(p)
    return out


def _digest(content: dict, files: dict[str, str]) -> str:
    body = {k: v for k, v in content.items() if k != SEAL}
    return hashlib.sha256(canonical_json({"content": body, "files": files}).encode("utf-8")).hexdigest()


def seal_holder(directory: Path, holder: str) -> None:
    """Add the seal to ``directory/holder`` (a JSON object), after every other file is written."""
    path = Path(directory) / holder
    content = json.loads(path.read_text())  # as it will be read back: the digest is over the parsed JSON
    files = _files(directory, holder)
    content[SEAL] = {"files": files, "digest": _digest(content, files)}
    path.write_text(json.dumps(content, indent=1))


def check_seal(directory: Path, holder: str, content: Any, required: bool = False) -> bool:
    """Refuse (``ArtifactError``) a directory whose files or holder content differ from its seal.
    ``content``: the holder as parsed. A holder without a seal (a directory written before seals)
    passes with a warning unless ``required``; returns whether it was sealed."""
    where = Path(directory) / holder
    if not isinstance(content, dict):
        raise ArtifactError(f"{where}: expected a JSON object, got {type(content).__name__}")
    seal = content.get(SEAL)
    if seal is None:
        if required:
            raise ArtifactError(f"{where}: no seal; the directory cannot be verified, retrain the router")
        if str(where) not in _WARNED:  # once per directory and process (the kind lookup and the load both check)
            _WARNED.add(str(where))
            log.warning("%s was written before router directories were sealed: its files are checked against its "
                        "manifest only (retrain to seal it)", where)
        return False
    if not isinstance(seal, dict) or not isinstance(seal.get("files"), dict) or not isinstance(seal.get("digest"), str):
        raise ArtifactError(f"{where}: its seal is damaged; retrain the router or restore the directory")
    now = _files(directory, holder)
    was = seal["files"]
    for name in sorted(set(now) | set(was)):
        if name not in was:
            raise ArtifactError(f"{Path(directory) / name}: a file the directory's seal does not know (added after "
                                "training); remove it or restore the directory")
        if name not in now:
            raise ArtifactError(f"{Path(directory) / name}: missing (the directory's seal lists it); restore the directory")
        if now[name] != was[name]:
            raise ArtifactError(f"{Path(directory) / name}: changed after training (it differs from the directory's "
                                "seal); retrain the router or restore the file")
    if _digest(content, was) != seal["digest"]:
        raise ArtifactError(f"{where}: edited after training (its content differs from its seal: a plan, budget, gate, "
                            "kind or component changed); retrain the router or restore the file")
    return True
