"""The test folders, one per layer (``tests/README.md``), and the path that joins them.

Test modules, the hostile-case helpers and the scripts run from ``tests/`` import each other by plain
name (``from test_readers import FakeOpenAI``, ``from fakes import SeededEncoder``). pytest's prepend
import mode puts a test's folder on ``sys.path`` only once it collects a file there, so a file run
alone, or a subprocess, would miss a helper in another folder: :func:`on_path` puts all of them there.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FOLDERS = tuple(sorted(p for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py"))))
PATH = (str(TESTS), *map(str, FOLDERS))  # a subprocess's PYTHONPATH entries


def on_path() -> None:
    """Put ``tests/`` and every test folder on ``sys.path`` (those already there stay where they are)."""
    sys.path[:0] = [p for p in PATH if p not in sys.path]
