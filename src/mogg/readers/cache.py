"""Append-only answer cache (jsonl keyed by prompt hash) that survives a killed run."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mogg.core.secrets import scrub_known_in

logger = logging.getLogger(__name__)


class AnswerCache:
    """One JSON line per answered prompt: ``{"prompt_hash": ..., "raw": ..., ...}``.

    ``put_many`` appends, flushes and fsyncs, so a kill loses at most the batch being written. A
    partial last line (the kill landed mid-write) is dropped on load and cut from the file, so the
    next append starts on a clean line. A bad line anywhere else is corruption and raises.
    When a hash appears twice the later line wins.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._data: dict[str, dict] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        blob = self.path.read_bytes()
        complete = blob.rfind(b"\n") + 1  # bytes up to and including the last newline
        if complete < len(blob):
            logger.warning(
                "%s: dropping a partial last line (%d bytes) left by an interrupted run",
                self.path, len(blob) - complete,
            )
            with open(self.path, "r+b") as fh:
                fh.truncate(complete)
                fh.flush()
                os.fsync(fh.fileno())
        for lineno, line in enumerate(blob[:complete].splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValueError(f"{self.path}:{lineno}: corrupt answer-cache line ({exc})") from exc
            if not isinstance(rec, dict) or not isinstance(rec.get("prompt_hash"), str) or "raw" not in rec:
                raise ValueError(f"{self.path}:{lineno}: expected an object with 'prompt_hash' and 'raw'")
            self._data[rec["prompt_hash"]] = rec

    def get(self, prompt_hash: str) -> dict | None:
        """The cached record for ``prompt_hash`` (with its ``raw`` output), or None."""
        return self._data.get(prompt_hash)

    def __contains__(self, prompt_hash: object) -> bool:
        return prompt_hash in self._data

    def __len__(self) -> int:
        return len(self._data)

    def put_many(self, records: list[dict]) -> None:
        """Append records (each with ``prompt_hash`` and ``raw``) durably, in one write."""
        if not records:
            return
        for rec in records:
            if not isinstance(rec.get("prompt_hash"), str) or not isinstance(rec.get("raw"), str):
                raise ValueError("cache records need a str 'prompt_hash' and a str 'raw'")
        # a credential this run knows (a server echoing the key in an answer) never reaches the cache
        records = [scrub_known_in(rec) for rec in records]
        lines = "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(lines)
            fh.flush()
            os.fsync(fh.fileno())
        for rec in records:
            self._data[rec["prompt_hash"]] = rec


@contextmanager
def exclusive(cache_path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``<cache>.lock`` (POSIX ``flock``; released if the process dies).

    Two evaluations of one run share an answer cache: the second waits while the first asks its
    reader, then finds every answer cached instead of asking the reader again.
    """
    path = Path(f"{os.fspath(cache_path)}.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no flock (Windows): concurrent runs may ask twice, results stay valid
        yield
        return
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("%s is in use by another evaluation: waiting for it", cache_path)
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
