"""Artifact directories: atomic writes, manifests, config hashing and safe loading.

An artifact is a directory holding plain files (json, jsonl, npy, npz, safetensors) plus a
``manifest.json`` with the config, its hash, input fingerprints, library versions and the sha256
of every file. It is written into a temporary sibling directory and renamed into place, so a
reader never sees a half-written artifact; a directory without a valid manifest, or whose files
do not match their checksums, is refused.

Concurrent writers of one key (a sweep starting on an empty shared store) publish under an
exclusive ``flock`` on the store's folder of that kind: a writer whose config equals the
published one adopts it (publish once); a different config replaces it by an atomic directory
exchange (``renameat2(RENAME_EXCHANGE)``, so the name never disappears; a plain two-rename swap
where the file system lacks it). Readers (:func:`cached`, :func:`artifact_lock` around a load)
hold the shared lock, so they never see a swap half done.

Length (over ~350 lines): the artifact contract in one place (canonical JSON, hashes, manifests,
atomic writes, locks, build-or-load), whose parts rely on each other's invariants.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import shutil
import socket
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from mogg.core.disk import refused_writes

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_VERSIONED = ("mogg", "numpy", "scipy", "torch", "transformers", "scikit-learn", "faiss-cpu", "lightning")


from mogg.core.artifact_error import ArtifactError  # public here, as before it had a module of its own


def user_artifacts() -> Path:
    """The artifact store a command uses unless told: ``$MOGG_ARTIFACTS``, else the user's cache
    folder (``$XDG_CACHE_HOME``, else ``~/.cache``) under ``mogg/artifacts``; never a folder of
    whatever directory the command runs in."""
    if os.environ.get("MOGG_ARTIFACTS"):
        return Path(os.environ["MOGG_ARTIFACTS"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "mogg" / "artifacts"


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) used for hashing."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _finite(obj: Any) -> Any:
    """``obj`` with non-finite floats as None and numpy scalars/arrays as Python values."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy scalar or array
        return _finite(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def strict_json(obj: Any, **kwargs: Any) -> str:
    """JSON that strict parsers accept: NaN and infinities become null (a mean over no
    questions), numpy values become Python values; anything else not serialisable is an error."""
    return json.dumps(_finite(obj), allow_nan=False, **kwargs)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def config_hash(obj: Any, length: int = 16) -> str:
    """sha256 of the canonical JSON of ``obj``, truncated to ``length`` hex digits."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def sha256_file(path: Path, block: int = 1 << 20) -> str:
    """Streaming sha256 of a file (1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that shape artifact contents."""
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def diff_fields(expected: Mapping, found: Mapping) -> list[str]:
    """Dotted names of the fields whose values differ between two nested dicts."""
    a, b = _flatten(json.loads(canonical_json(expected))), _flatten(json.loads(canonical_json(found)))
    return sorted(k for k in a.keys() | b.keys() if a.get(k, "<missing>") != b.get(k, "<missing>"))


@contextmanager
def atomic_path(path: Path):
    """Yield a temporary path beside ``path`` (unique per writer) and rename it into place on
    success, so concurrent writers of one file never share a temp file or leave a torn one."""
    path = Path(path)
    with refused_writes(path):  # a full or read-only disk: one line naming path and bytes (mogg.core.disk)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        with refused_writes(path, tmp):
            yield Path(tmp)
            # mkstemp creates 0600; a published file gets the mode any new file would (the umask's),
            # so a shared group can read reports and checkpoints
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in one step, its folder made if missing (a reader never sees half)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text)


_NO_FLOCK = (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)  # a file system without folder flocks


@contextmanager
def artifact_lock(directory: Path, shared: bool = False):
    """Hold the artifact's lock (exclusive for publishing, shared for reading) for the block: a
    ``flock`` on its parent directory (no lock files in the store; publishing is one rename, so
    serialising the writers of one kind costs nothing). Released when a killed holder's
    descriptor closes."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory.parent, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in _NO_FLOCK:
                raise
            # NFS emulates flock with a POSIX lock on the server, and an exclusive one needs a descriptor
            # open for writing, which a folder cannot have (flock(2), "NFS details"; docs/cluster.md)
            raise ArtifactError(f"cannot lock the artifact store folder {directory.parent} ({e.strerror}): its file "
                                "system does not take a flock on a folder (NFS); put paths.artifacts on a local or "
                                "flock-capable file system, or mount NFS with local_lock=flock (docs/cluster.md)") from e
        yield
    finally:
        os.close(fd)  # closing releases the lock


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux renameat2); False where unsupported."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system cannot exchange
        return False
    raise OSError(err, os.strerror(err), str(a))


def _intact(directory: Path) -> bool:
    try:
        read_manifest(directory)
        return True
    except ArtifactError:
        return False


def _published_hash(directory: Path) -> str | None:
    try:
        return json.loads((directory / MANIFEST).read_text()).get("config_hash")
    except (OSError, ValueError):
        return None


def _swap_in(tmp: Path, directory: Path) -> None:
    """Put the finished directory ``tmp`` at ``directory`` (caller holds the exclusive lock)."""
    if not directory.exists():
        os.replace(tmp, directory)
    elif _exchange(tmp, directory):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old version
    else:
        old = directory.with_name(f".{directory.name}.old-{_HOST}-{os.getpid()}")
        os.replace(directory, old)
        os.replace(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_dir(final: Path):
    """Yield a fresh staging directory beside ``final``; on success it replaces ``final`` whole
    (a report is published as a unit: a killed run leaves the previous report intact, never a
    mix), on failure it is removed. Stale staging directories of killed runs are removed first."""
    final = Path(final)
    with refused_writes(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-{_HOST}-{os.getpid()}-", dir=final.parent))
    try:
        with refused_writes(final, tmp):  # before the staged files are removed: their bytes are named
            yield tmp
            publish_modes(tmp)
            with artifact_lock(final):
                _swap_in(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish_modes(root: Path) -> None:
    """Give a finished folder and everything in it the modes new files and folders get under the
    umask (mkdtemp makes 0700 folders, mkstemp and some writers, safetensors among them, 0600 files):
    a shared group reads published artifacts, routers and reports."""
    os.chmod(root, 0o777 & ~_umask())
    for p in Path(root).rglob("*"):
        if not p.is_symlink():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~_umask())


def write_artifact(
    directory: Path,
    writer: Callable[[Path], None],
    config: Mapping[str, Any],
    inputs: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write an artifact atomically.

    ``writer(tmp_dir)`` writes the payload files into a fresh temporary directory; the manifest is
    then added and the directory renamed to ``directory`` (replacing an older one there).
    """
    directory = Path(directory)
    with refused_writes(directory):
        directory.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(directory.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-{_HOST}-{os.getpid()}-", dir=directory.parent))
    try:
        with refused_writes(directory, tmp):
            return _publish(directory, tmp, writer, config, inputs, extra)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _publish(directory: Path, tmp: Path, writer: Callable[[Path], None], config: Mapping[str, Any],
             inputs: Mapping[str, Any] | None, extra: Mapping[str, Any] | None) -> Path:
    """:func:`write_artifact`'s work once its staging folder ``tmp`` exists."""
    writer(tmp)
    files = sorted(p for p in tmp.rglob("*") if p.is_file())
    manifest = {
        "config": json.loads(canonical_json(config)),
        "config_hash": config_hash(config),
        "inputs": json.loads(canonical_json(inputs or {})),
        "versions": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": {str(p.relative_to(tmp)): sha256_file(p) for p in files},
        **(dict(extra) if extra else {}),
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    publish_modes(tmp)
    with artifact_lock(directory):
        if not extra and _published_hash(directory) == manifest["config_hash"] and _intact(directory):
            shutil.rmtree(tmp, ignore_errors=True)  # another writer published this config: adopt it
            log.info("artifact %s already published by another writer: adopted", directory)
            return directory
        _swap_in(tmp, directory)
    log.info("wrote artifact %s (%d files)", directory, len(manifest["files"]))
    return directory


_HOST = re.sub(r"[^\w]", "_", socket.gethostname()) or "host"
_TEMP_RE = re.compile(r"^\..+\.(?:tmp|old)-(?P<host>\w+)-(?P<pid>\d+)(?:-\w+)?$")
STALE_AFTER_S = 24 * 3600  # a temp dir of another host is only removed when this old


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def clean_stale_temps(parent: Path) -> int:
    """Remove temp/old directories that killed writers left in ``parent``: this host's whose
    process is gone, other hosts' (a shared file system) after :data:`STALE_AFTER_S`. Returns how many."""
    n = 0
    try:
        entries = list(os.scandir(parent))
    except FileNotFoundError:
        return 0
    now = time.time()
    for e in entries:
        m = _TEMP_RE.match(e.name)
        if not m or not e.is_dir(follow_symlinks=False):
            continue
        mine = m.group("host") == _HOST
        try:
            stale = (not _alive(int(m.group("pid")))) if mine else now - e.stat().st_mtime > STALE_AFTER_S
        except OSError:
            continue
        if stale:
            shutil.rmtree(e.path, ignore_errors=True)
            log.info("removed %s left by an interrupted writer", e.path)
            n += 1
    return n


def read_manifest(directory: Path, config: Mapping[str, Any] | None = None, verify: bool = True) -> dict:
    """Load and check an artifact's manifest.

    Refuses (``ArtifactError``) a directory without manifest, a file missing or whose sha256
    differs, and - when ``config`` is given - a manifest built from another config, naming the
    differing fields.
    """
    directory = Path(directory)
    mpath = directory / MANIFEST
    if not mpath.is_file():
        raise ArtifactError(f"{directory}: no {MANIFEST}; partial or foreign artifact, delete it to rebuild")
    from mogg.core.bounded import read_json  # it imports this module

    try:
        manifest = read_json(mpath)  # within the depth and size any manifest has
    except ArtifactError as e:
        raise ArtifactError(f"corrupt manifest: {e}") from None
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{mpath}: corrupt manifest (not a JSON object)")
    if config is not None and manifest.get("config_hash") != config_hash(config):
        fields = diff_fields(config, manifest.get("config", {}))
        raise ArtifactError(f"{directory}: built from a different config; differing fields: {', '.join(fields)}")
    if verify:
        files = manifest.get("files", {})
        if not isinstance(files, dict):
            raise ArtifactError(f"{mpath}: corrupt manifest (files is not a map)")
        for name, digest in files.items():
            if Path(name).is_absolute() or ".." in Path(name).parts:
                raise ArtifactError(f"{mpath}: lists {name!r}, a file outside the artifact; refused")
            p = directory / name
            if not p.is_file():
                raise ArtifactError(f"{directory}: file {name} listed in the manifest is missing")
            if sha256_file(p) != digest:
                raise ArtifactError(f"{directory}: file {name} fails its sha256 check (corrupt or modified)")
    return manifest


def artifact_dir(root: Path, kind: str, config: Mapping[str, Any]) -> Path:
    """Content-addressed location ``root/kind/<config hash>`` for an artifact."""
    return Path(root) / kind / config_hash(config)


def cached(
    root: Path,
    kind: str,
    config: Mapping[str, Any],
    build: Callable[[], Any],
    save: Callable[[Any, Path], None],
    load: Callable[[Path], Any],
    inputs: Mapping[str, Any] | None = None,
    derived: bool = False,
) -> Any:
    """Load the artifact for ``config`` if a valid one exists, else build, write and return it.

    ``config`` must include everything that changes the result (including input fingerprints),
    so a changed config or input gives a new artifact directory. ``derived``: the artifact is a
    cache of data this run can recompute, so a damaged one (a file failing its checksum, or
    ``load`` refusing its content with ``ArtifactError``/``ValueError``) is named in a warning,
    removed and rebuilt instead of refused.
    """
    d = artifact_dir(root, kind, config)
    if (d / MANIFEST).exists() or (derived and d.exists()):
        try:
            with artifact_lock(d, shared=True):  # a writer publishing this key finishes first
                read_manifest(d, config)
                log.info("loading cached %s from %s", kind, d)
                return load(d)
        except (ArtifactError, ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
            if not derived:
                raise
            log.warning("cached %s %s is damaged (%s): removed and rebuilt", kind, d, e)
            with artifact_lock(d):
                shutil.rmtree(d, ignore_errors=True)
    obj = build()
    write_artifact(d, lambda tmp: save(obj, tmp), config, inputs)
    return obj
