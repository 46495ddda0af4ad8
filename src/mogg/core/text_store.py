"""A folder of vectors keyed by a text's digest: each text's vector computed once, ever.

``TextVectors(root)`` holds shards ``<hash>.keys.npy`` (uint8 [n, 16]: the first 16 bytes of each
text's sha256) and ``<hash>.vecs.npy`` (float32 [n, d]), each pair written atomically (temp file +
rename; the keys file last, so a shard without keys is never read). :meth:`TextVectors.get_or_add`
returns the vectors of the given keys, computing only the missing ones, which go into a new shard;
past :data:`MAX_SHARDS` shards the folder is merged into one. Writers take the folder's lock; a
reader that meets a shard merged away under it reads the folder again.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mogg.core.artifacts import artifact_lock, atomic_path

log = logging.getLogger(__name__)

MAX_SHARDS = 16  # more: merged into one (fewer files to open on every read)


class TextVectors:
    """Vectors by 16-byte key in ``root`` (see the module doc)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.last_added = 0  # how many vectors the last get_or_add computed

    def _shards(self) -> list[str]:
        return sorted(p.name[: -len(".keys.npy")] for p in self.root.glob("*.keys.npy"))

    def _index(self) -> tuple[dict[bytes, tuple[int, int]], list[str]]:
        names = self._shards()
        index: dict[bytes, tuple[int, int]] = {}
        for s, name in enumerate(names):
            keys = np.load(self.root / f"{name}.keys.npy", allow_pickle=False)
            for r, k in enumerate(keys):
                index.setdefault(bytes(k), (s, r))
        return index, names

    def _write(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        name = hashlib.sha256(keys.tobytes()).hexdigest()[:24]
        self.root.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.root / f"{name}.vecs.npy") as tmp, open(tmp, "wb") as f:
            np.save(f, vecs)
        with atomic_path(self.root / f"{name}.keys.npy") as tmp, open(tmp, "wb") as f:  # last: the shard is whole
            np.save(f, keys)

    def get_or_add(self, keys: Sequence[bytes], compute: Callable[[list[int]], np.ndarray]) -> np.ndarray:
        """float32 [len(keys), d]: stored vectors, and ``compute(positions)`` [m, d] for the keys
        not stored yet (then stored). Keys must be unique."""
        for attempt in range(3):
            try:
                return self._get_or_add(keys, compute)
            except FileNotFoundError:  # a shard merged away while it was read: read the folder again
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _get_or_add(self, keys: Sequence[bytes], compute: Callable[[list[int]], np.ndarray]) -> np.ndarray:
        index, names = self._index() if self.root.is_dir() else ({}, [])
        missing = [i for i, k in enumerate(keys) if k not in index]
        new = compute(missing) if missing else None
        self.last_added = len(missing)
        dim = new.shape[1] if new is not None else None
        out = None
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for i, k in enumerate(keys):
            if k in index:
                s, r = index[k]
                by_shard.setdefault(s, []).append((i, r))
        for s, pairs in by_shard.items():  # read each shard once, only its rows
            vecs = np.load(self.root / f"{names[s]}.vecs.npy", mmap_mode="r", allow_pickle=False)
            if out is None:
                dim = vecs.shape[1]
                out = np.zeros((len(keys), dim), dtype=np.float32)
            rows = np.array(pairs, dtype=np.int64)
            out[rows[:, 0]] = vecs[rows[:, 1]]
        if out is None:
            out = np.zeros((len(keys), dim or 0), dtype=np.float32)
        if missing:
            new = np.asarray(new, dtype=np.float32)
            out[missing] = new
            with artifact_lock(self.root, shared=False):
                self._write(np.frombuffer(b"".join(keys[i] for i in missing), dtype=np.uint8).reshape(-1, 16), new)
                if len(self._shards()) > MAX_SHARDS:
                    self._merge()
        return out

    def _merge(self) -> None:
        """Every shard into one (the writer's lock held)."""
        index, names = self._index()
        order = sorted(index.items(), key=lambda kv: kv[1])
        keys = np.frombuffer(b"".join(k for k, _ in order), dtype=np.uint8).reshape(-1, 16)
        vecs = np.concatenate([np.load(self.root / f"{n}.vecs.npy", allow_pickle=False) for n in names])
        starts = np.cumsum([0] + [len(np.load(self.root / f"{n}.keys.npy", allow_pickle=False)) for n in names])
        vecs = vecs[[starts[s] + r for _, (s, r) in order]]
        self._write(keys, vecs)
        keep = hashlib.sha256(keys.tobytes()).hexdigest()[:24]
        for n in names:
            if n != keep:
                (self.root / f"{n}.keys.npy").unlink(missing_ok=True)
                (self.root / f"{n}.vecs.npy").unlink(missing_ok=True)
        log.info("merged %d vector shards in %s (%d vectors)", len(names), self.root, len(keys))
