"""What a directory's files may hold: JSON within depth and size limits, numbers within bounds.

A router directory or a store entry is data: anyone can write one from scratch and re-seal it (the
seal and the manifest are checksums anyone can recompute), so a value read from one is checked
where it is read, by the helpers here (issue 59):

* :func:`read_json` parses a directory's JSON file only if it is at most :data:`MAX_JSON_BYTES`
  long and nests at most :data:`MAX_JSON_DEPTH` deep (a 200,000-deep array ends Python's parser in
  a ``RecursionError``); anything else is an :class:`~mogg.core.artifacts.ArtifactError` naming it.
* :func:`integer` and :func:`number` refuse a value that is not a finite number within its range
  (a ``plans: 1e9`` that would allocate gigabytes, a NaN evidence length that changes what is read).
* :data:`COMPONENT_INTS` bounds the integer arguments of the components a directory names (token
  counts, levels, depths), checked by :func:`mogg.core.trusted.check_node` before anything is built.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from mogg.core.artifact_error import ArtifactError

MAX_JSON_BYTES = 256 << 20  # the largest directory JSON written: decisions over a few 100k questions
MAX_JSON_DEPTH = 64  # the deepest written: a component config (hybrid retriever members) is ~8
MAX_TOKENS = 1 << 20  # any token count a directory carries (a chunk, a sentence, a cap, a budget)
MAX_DEPTH = 4096  # retrieval depth (chunks per level), plans, candidates per chunk
MAX_LEVELS = 64

# Integer arguments of the components a directory names, by name: (lowest, highest). A name not
# here is only checked to be a plain value; one here must be an integer in range wherever it sits.
COMPONENT_INTS: dict[str, tuple[int, int]] = {
    "unit_size": (1, MAX_TOKENS), "n_levels": (1, MAX_LEVELS), "max_sentence_tokens": (1, MAX_TOKENS),
    "max_tokens": (1, MAX_TOKENS), "max_context_tokens": (1, MAX_TOKENS), "summary_tokens": (1, MAX_TOKENS),
    "multi_sentences": (1, MAX_DEPTH), "heading_max_words": (1, MAX_DEPTH), "k": (1, MAX_DEPTH),
    "k_r": (1, MAX_DEPTH), "k_graph": (1, MAX_DEPTH), "depth": (1, MAX_DEPTH), "hops": (0, MAX_LEVELS),
    "window": (1, MAX_DEPTH), "min_sentences": (1, MAX_DEPTH), "overlap": (0, MAX_TOKENS),
    "batch_size": (1, 1 << 16), "max_length": (1, MAX_TOKENS), "leaf_tokens": (1, MAX_TOKENS),
    "max_layers": (1, MAX_LEVELS), "node_sentences": (1, MAX_DEPTH),
}

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def json_depth(data: bytes) -> int:
    """How deep ``data`` (JSON text) nests arrays and objects, found without parsing it."""
    import numpy as np

    b = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)  # brackets inside strings do not count
    step = (b == ord("[")).astype(np.int64) + (b == ord("{")) - (b == ord("]")) - (b == ord("}"))
    return int(np.cumsum(step).max()) if len(step) else 0


def read_json(path: Path, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A directory's JSON file, parsed only within ``max_bytes`` and ``max_depth``; anything else
    (missing, unreadable, too large, too deep, not JSON) raises ``ArtifactError`` naming the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ArtifactError(f"{path}: {size} bytes, more than any mogg writes ({max_bytes}); refused")
        data = path.read_bytes()
    except OSError as e:
        raise ArtifactError(f"{path}: unreadable ({e})") from None
    depth = json_depth(data)
    if depth > max_depth:
        raise ArtifactError(f"{path}: JSON nested {depth} deep, deeper than any mogg writes ({max_depth}); refused")
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise ArtifactError(f"{path}: not JSON ({e})") from None


def number(value: Any, where: str, field: str, low: float, high: float, low_open: bool = False) -> float:
    """``value`` as a finite float in [low, high] (``low_open``: > low), else ``ArtifactError``
    naming ``where`` and ``field``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        rng = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise ArtifactError(f"{where}: {field}={value!r} must be a finite number in {rng}; retrain or restore it")
    return float(value)


def integer(value: Any, where: str, field: str, low: int, high: int) -> int:
    """``value`` as an int in [low, high] (a JSON integer, not ``1e9`` or ``true``), else
    ``ArtifactError`` naming ``where`` and ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ArtifactError(f"{where}: {field}={value!r} must be an integer in [{low}, {high}]; retrain or restore it")
    return value
