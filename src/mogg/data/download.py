"""Resumable, verified HTTP downloads (a ``.part`` file resumed with HTTP Range, retries with
backoff, size and sha256 checked before the file is put in place)."""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests
from tqdm import tqdm

from mogg.core.artifacts import sha256_file
from mogg.data.errors import DataError

logger = logging.getLogger(__name__)

_CHUNK = 1 << 16


@dataclass(frozen=True)
class RemoteFile:
    """One file of the MIRAGE tree: path relative to the MIRAGE root (and to the base URL)."""

    path: str
    size: int
    sha256: str | None  # None: not pinned (a source that changes, e.g. NCBI's StatPearls archive)
    mirrors: tuple[str, ...] = ()  # absolute URLs tried after the base URL


class DownloadError(RuntimeError):
    """A file could not be downloaded (network failure, HTTP error, retries exhausted)."""


class _Retry(Exception):
    """A transient failure: try again, resuming from the ``.part`` file."""


_TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError, _Retry)


def _transfer(
    session: requests.Session,
    url: str,
    part: Path,
    have: int,
    spec: RemoteFile,
    timeout: float,
    progress: bool,
) -> None:
    """One HTTP request appending to ``part`` from byte ``have``; raises _Retry when transient."""
    # identity encoding: with gzip, Range offsets would count compressed bytes, not file bytes.
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    with session.get(url, headers=headers, stream=True, timeout=timeout) as resp:
        if resp.status_code == 416:
            part.unlink(missing_ok=True)
            raise _Retry("server refused the resume range; starting over")
        if resp.status_code == 429 or resp.status_code >= 500:
            raise _Retry(f"HTTP {resp.status_code}")
        if resp.status_code not in (200, 206):
            raise DownloadError(f"{url}: HTTP {resp.status_code}")
        if resp.status_code == 206:
            start = resp.headers.get("Content-Range", "").removeprefix("bytes ").split("-")[0]
            if start != str(have):
                part.unlink(missing_ok=True)
                raise _Retry(f"unexpected Content-Range {resp.headers.get('Content-Range')!r}")
        elif have:
            logger.info("%s: server ignored the Range header; downloading from the start", url)
            have = 0
        with (
            open(part, "ab" if have else "wb") as fh,
            tqdm(
                total=spec.size,
                initial=have,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=Path(spec.path).name,
                file=sys.stderr,
                disable=not progress,
                leave=False,
            ) as bar,
        ):
            for chunk in resp.iter_content(chunk_size=_CHUNK):
                fh.write(chunk)
                bar.update(len(chunk))


def download(
    url: str,
    dest: str | os.PathLike,
    spec: RemoteFile,
    *,
    session: requests.Session | None = None,
    timeout: float = 60.0,
    retries: int = 5,
    backoff: float = 1.0,
    progress: bool = True,
) -> Path:
    """Download ``url`` to ``dest`` through ``dest.part``, resuming, retrying and verifying.

    A partial ``.part`` left by an earlier run is resumed with an HTTP Range request. Transient
    failures (connection errors, timeouts, 5xx, a short body) are retried ``retries`` times
    with exponential backoff. On a checksum mismatch the ``.part`` is removed: a resumed file
    is fetched once more from scratch, a fresh one raises :class:`DataError`.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    own_session = session is None
    session = session or requests.Session()
    failures = 0
    try:
        while True:
            have = part.stat().st_size if part.exists() else 0
            if have > spec.size:  # not a prefix of this file
                part.unlink()
                have = 0
            try:
                if have < spec.size:
                    _transfer(session, url, part, have, spec, timeout, progress)
                got = part.stat().st_size if part.exists() else 0
                if got < spec.size:
                    raise _Retry(f"connection closed after {got} of {spec.size} bytes")
            except _TRANSIENT as exc:
                failures += 1
                if failures > retries:
                    raise DownloadError(f"{url}: giving up after {failures} attempts: {exc}") from exc
                delay = backoff * 2 ** (failures - 1)
                logger.warning("%s: %s; retrying in %.1fs (%d/%d)", url, exc, delay, failures, retries)
                time.sleep(delay)
                continue
            digest = sha256_file(part)
            if got == spec.size and (spec.sha256 is None or digest == spec.sha256):
                os.replace(part, dest)
                return dest
            part.unlink()
            if have > 0 and failures < retries:
                # The earlier partial data may be what is wrong: one more clean attempt.
                failures += 1
                logger.warning("%s: checksum mismatch after resuming; downloading from scratch", url)
                continue
            raise DataError(dest, f"downloaded from {url}: sha256 {digest}, expected {spec.sha256}; removed")
    finally:
        if own_session:
            session.close()
