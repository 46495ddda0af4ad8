"""A write the disk refuses (full, read-only, not permitted) as one line naming the path and the
bytes it needed, instead of a traceback.

The writers every entry point publishes through (:func:`mogg.core.artifacts.atomic_path`,
``staged_dir``, ``write_artifact``: artifacts, checkpoints, reports, ``mogg-route --out``) turn such
an ``OSError`` into a :class:`DiskError` naming what they were writing and how many bytes it held;
any other write refused the same way is named by the file the OS reported
(:func:`mogg.core.runconfig.user_error`). Nothing half-written is published either way: the
writers write beside the target and rename, so the old version stays whole.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# full disk or quota, read-only file system, no permission: the user's disk, not a bug in mogg
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


class DiskError(OSError):
    """A write refused by the file system, as a one-line user error (``str()`` is the whole line);
    ``filename``: the path named, ``needed``: the bytes it had written when refused (None: unknown)."""

    needed: int | None = None

    def __str__(self) -> str:
        return str(self.args[1]) if len(self.args) > 1 else super().__str__()


def folder_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (a file: its size; missing: 0); what a write had staged."""
    path = Path(path)
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    except OSError:
        return 0


def free_bytes(path: Path) -> int | None:
    """Free bytes on the file system holding ``path`` (its nearest existing folder); None if unknown."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def _named(e: OSError) -> str | None:
    name = e.filename2 if e.filename2 is not None else e.filename
    return None if name is None or isinstance(name, int) else os.fsdecode(name)


def disk_error(e: BaseException, path: str | Path | None = None, needed: int | None = None) -> DiskError | None:
    """``e`` as a :class:`DiskError` naming ``path`` (default: the file the OS named) and the bytes
    ``needed`` (what had been written when the disk refused, where known), or None when ``e`` is
    not a refused write."""
    if isinstance(e, DiskError):
        return e
    if not isinstance(e, OSError) or e.errno not in DISK_ERRNOS:
        return None
    where = str(path) if path is not None else _named(e)
    full = e.errno in (errno.ENOSPC, errno.EDQUOT)
    # a refusal named by the OS alone may be a read (no permission): only a writer's own is a write
    verb = "write" if path is not None or e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS) else "use"
    reason = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
              errno.EROFS: "the file system is read-only"}.get(e.errno, f"not permitted ({e.strerror})")
    free = free_bytes(Path(where)) if where is not None else None
    parts = ([f"needs at least {needed:,} bytes"] if needed else []) + \
        ([f"{free:,} bytes free there"] if free is not None else [])
    hint = "free space or choose another folder" if full else f"choose a folder this user can {verb}"
    detail = f" ({', '.join(parts)})" if parts else ""
    err = DiskError(e.errno, f"cannot {verb} {where or 'a file'}: {reason}{detail}; {hint}", where)
    err.needed = needed
    return err


def _under(name: str, root: Path) -> bool:
    p, r = os.path.abspath(name), os.path.abspath(root)
    return p == r or p.startswith(r.rstrip(os.sep) + os.sep)


@contextmanager
def refused_writes(path: str | Path, staged: str | Path | None = None) -> Iterator[None]:
    """A writer's boundary: an OSError of a full or read-only disk raised in the block becomes a
    :class:`DiskError` naming ``path`` (what is being written) and the bytes written into
    ``staged`` (its temporary file or folder) so far. A refused file the OS names outside ``path``
    and ``staged`` (something else the block wrote) is named as the OS named it."""
    try:
        yield
    except OSError as e:
        if isinstance(e, DiskError):
            # a writer inside this one's staging folder (a report's file): the user sees this one's
            # path and everything it had staged, not a hidden temporary name
            inner = e.__cause__ if isinstance(e.__cause__, OSError) else None
            if staged is None or inner is None or e.filename is None or not _under(e.filename, Path(staged)):
                raise
            raise disk_error(inner, path, folder_bytes(Path(staged)) + (e.needed or 0)) from inner
        if e.errno not in DISK_ERRNOS:
            raise
        name = _named(e)
        # ours: a file under what this writer writes, or a folder it creates on the way there
        ours = name is None or _under(str(path), Path(name)) or \
            any(_under(name, Path(r)) for r in (path, staged) if r is not None)
        err = disk_error(e, path, folder_bytes(Path(staged)) if staged is not None else None) if ours \
            else disk_error(e)
        raise err from e
