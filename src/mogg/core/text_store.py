"""A folder of vectors keyed by a text's digest: each text's vector computed once, ever.

``TextVectors(root)`` holds shards ``<hash>.keys.npy`` (uint8 [n, 16]: the first 16 bytes of each
text's sha256) and ``<hash>.vecs.npy`` (float32 [n, d]), each pair written atomically (temp file +
rename; the keys file last, so a shard without keys is never read). :meth:`TextVectors.get_or_add`
returns the vectors of the given keys, computing only the missing ones, which go into a new shard;
past :data:`MAX_SHARDS` shards the folder is merged into one. Writers take the folder's lock; a
reader that meets a shard merged away under it reads the folder again.

The folder is reused by every later run, so each shard carries a manifest
(``<hash>.manifest.json``: the sha256 of both files, written before the keys) and is verified before
it is read (issue 59): its name is the digest of its keys, the manifest's digests match, the vectors'
shape fits. A shard failing any check is named in a warning and removed, and its texts are encoded
again: the vectors are derived data. (The vectors' order against their keys is bound only by the
manifest, which anyone can re-sign: checking it would mean encoding stored texts again.)
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mogg.core.artifacts import artifact_lock, atomic_path, sha256_file

log = logging.getLogger(__name__)

MAX_SHARDS = 16  # more: merged into one (fewer files to open on every read)
_VERIFIED: set[tuple] = set()  # (path, size, mtime) of shards verified by this process: hashed once


class DamagedShard(Exception):
    """A shard that failed its checks (names it); the caller removes it and encodes its texts again."""


class TextVectors:
    """Vectors by 16-byte key in ``root`` (see the module doc)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.last_added = 0  # how many vectors the last get_or_add computed

    def _shards(self) -> list[str]:
        return sorted(p.name[: -len(".keys.npy")] for p in self.root.glob("*.keys.npy"))

    def _files(self, name: str) -> tuple[Path, Path, Path]:
        return (self.root / f"{name}.keys.npy", self.root / f"{name}.vecs.npy", self.root / f"{name}.manifest.json")

    def _verify(self, name: str) -> np.ndarray:
        """The shard's keys, after checking it is whole (see the module doc), else ``DamagedShard``."""
        keys_p, vecs_p, man_p = self._files(name)
        try:
            stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in (keys_p, vecs_p, man_p))
            keys = np.load(keys_p, allow_pickle=False)
            if stamp not in _VERIFIED:
                man = json.loads(man_p.read_text())
                files = man.get("files") if isinstance(man, dict) else None
                if files != {keys_p.name: sha256_file(keys_p), vecs_p.name: sha256_file(vecs_p)}:
                    raise DamagedShard(f"{name}: its files fail the sha256 in {man_p.name}")
                vecs = np.load(vecs_p, mmap_mode="r", allow_pickle=False)
                if keys.ndim != 2 or keys.shape[1] != 16 or vecs.ndim != 2 or len(vecs) != len(keys) \
                        or hashlib.sha256(keys.tobytes()).hexdigest()[:24] != name:
                    raise DamagedShard(f"{name}: its keys or vectors do not match its name and each other")
                _VERIFIED.add(stamp)
        except FileNotFoundError as e:
            if keys_p.exists() and not man_p.exists():
                raise DamagedShard(f"{name}: no {man_p.name} (written before shards were verified)") from None
            raise e  # merged away while read: the caller reads the folder again
        except (OSError, ValueError) as e:  # a truncated or foreign file
            raise DamagedShard(f"{name}: unreadable ({e})") from None
        return keys

    def _drop(self, name: str, why: str) -> None:
        """Remove a damaged shard (its texts are encoded again by the caller), saying which."""
        log.warning("text vector store %s: shard %s removed, its texts are encoded again", self.root, why)
        with artifact_lock(self.root, shared=False):
            for p in self._files(name):
                p.unlink(missing_ok=True)

    def _index(self) -> tuple[dict[bytes, tuple[int, int]], list[str]]:
        names = []
        index: dict[bytes, tuple[int, int]] = {}
        for name in self._shards():
            try:
                keys = self._verify(name)
            except DamagedShard as e:
                self._drop(name, str(e))
                continue
            s = len(names)
            names.append(name)
            for r, k in enumerate(keys):
                index.setdefault(bytes(k), (s, r))
        return index, names

    def _write(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        name = hashlib.sha256(keys.tobytes()).hexdigest()[:24]
        self.root.mkdir(parents=True, exist_ok=True)
        keys_p, vecs_p, man_p = self._files(name)
        with atomic_path(vecs_p) as tmp, open(tmp, "wb") as f:
            np.save(f, vecs)
        with atomic_path(keys_p) as tmp:  # its digest before it is published: the manifest comes first
            with open(tmp, "wb") as f:
                np.save(f, keys)
            digests = {keys_p.name: sha256_file(tmp), vecs_p.name: sha256_file(vecs_p)}
            with atomic_path(man_p) as mtmp:
                mtmp.write_text(json.dumps({"files": digests, "n": int(len(keys)), "dim": int(vecs.shape[1])}))
        # the keys file last (renamed on leaving the block): the shard is whole

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
        by_shard: dict[int, list[tuple[int, int]]] = {}
        for i, k in enumerate(keys):
            if k in index:
                s, r = index[k]
                by_shard.setdefault(s, []).append((i, r))
        new = compute(missing) if missing else None
        self.last_added = len(missing)
        dim = new.shape[1] if new is not None else None
        out = None
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
                for p in self._files(n):  # the keys first: a shard is never read without its manifest
                    p.unlink(missing_ok=True)
        log.info("merged %d vector shards in %s (%d vectors)", len(names), self.root, len(keys))
