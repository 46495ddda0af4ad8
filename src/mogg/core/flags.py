"""Command-line flags checked before any work: argparse ``type=`` validators shared by every script
and CLI (``mogg-route``, ``mogg-prepare``, ``scripts/*.py``), and the output-is-an-input check.

A bad value is refused by argparse in one line (``prog: error: argument --jobs: ...``, exit 2)
before anything loads, trains or downloads: ``--jobs 0`` once divided by zero after a warm-up
training, ``--words nan`` failed inside ``round()`` and ``--words -5`` quietly built a shard.
"""

from __future__ import annotations

import argparse
import math
import os
import stat
from collections.abc import Iterable
from pathlib import Path

# A questions file larger than this is refused before it is read (a device such as /dev/zero, or a
# file named by mistake, would otherwise be read whole into memory): ~1M questions.
MAX_QUESTION_BYTES = 256 << 20


def _number(text: str, kind: type, what: str):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (a count: jobs, shards, rounds, queries)."""
    n = _number(text, int, "an integer")
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 1")
    return n


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (0 meaning none, as ``--retries 0`` or ``--check-rows 0``)."""
    n = _number(text, int, "an integer")
    if n < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be an integer >= 0")
    return n


def positive_float(text: str) -> float:
    """A finite number > 0 (a size, a time, a rate); ``nan``, ``inf`` and ``-5`` are refused."""
    x = _number(text, float, "a number")
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number > 0")
    return x


def nonnegative_float(text: str) -> float:
    """A finite number >= 0."""
    x = _number(text, float, "a number")
    if not (math.isfinite(x) and x >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number >= 0")
    return x


def unit_float(text: str) -> float:
    """A finite number in [0, 1] (a threshold, a fraction)."""
    x = _number(text, float, "a number")
    if not (math.isfinite(x) and 0 <= x <= 1):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a number in [0, 1]")
    return x


def _counts(text: str, low: int) -> list[int]:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        x = _number(part, float, "a number")  # "1e6" is a count too
        if not (math.isfinite(x) and x == int(x) and x >= low):
            raise argparse.ArgumentTypeError(f"{text!r}: {part!r} is not an integer >= {low}")
        out.append(int(x))
    return out


def positive_ints(text: str) -> list[int]:
    """A comma-separated list of integers >= 1 (``"100000,1e6"``; ``""``: none)."""
    return _counts(text, 1)


def nonnegative_ints(text: str) -> list[int]:
    """A comma-separated list of integers >= 0 (seeds: ``"0,1,2"``)."""
    return _counts(text, 0)


def existing_dir(text: str) -> Path:
    """A folder that exists (a checkout, a data folder)."""
    p = Path(text)
    if not p.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {'is not a folder' if p.exists() else 'does not exist'}")
    return p


def existing_path(text: str) -> str:
    """A file or folder that exists (returned as given)."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text}: does not exist")
    return text


def existing_file(text: str) -> Path:
    """A regular file that exists."""
    p = Path(text)
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {'is not a regular file' if p.exists() else 'does not exist'}")
    return p


def input_file(text: str, limit: int = MAX_QUESTION_BYTES) -> str:
    """``-`` (stdin) or a regular file of at most ``limit`` bytes: a device (``/dev/zero``), a pipe or
    a folder is refused before it is read, and so is a file too large to be a question set."""
    if text == "-":
        return text
    try:
        st = os.stat(text)
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text}: does not exist") from None
    except OSError as e:
        raise argparse.ArgumentTypeError(f"{text}: cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, a pipe or a socket)"
        raise argparse.ArgumentTypeError(f"{text}: {what}; name a jsonl or text file, or pipe the questions to '-'")
    if st.st_size > limit:
        raise argparse.ArgumentTypeError(f"{text}: {st.st_size:,} bytes, over the {limit:,} bytes a question set "
                                         "may have; split it into smaller files")
    return text


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: the same resolved path (``.``, ``..``, symlinks) or the same
    inode (a hard link); False when either does not exist yet and they resolve apart."""
    pa, pb = Path(a), Path(b)
    if pa.resolve() == pb.resolve():
        return True
    try:
        return os.path.samefile(pa, pb)
    except OSError:
        return False


def refuse_overwrite(out: str | Path, inputs: Iterable[tuple[str, str | Path]], flag: str = "--out") -> None:
    """Refuse an output path that names one of the command's inputs (``(what, path)`` pairs; a path
    that is a folder covers every file under it), before any work: raises ValueError naming both."""
    out_p = Path(out)
    target = out_p.resolve()
    for what, p in inputs:
        p = Path(p)
        inside = p.is_dir() and (target == p.resolve() or p.resolve() in target.parents)
        if inside or (p.exists() and same_file(out_p, p)):
            raise ValueError(f"{flag} {out} is {what} ({p}): writing it would replace an input; "
                             f"name another file for the output")
