"""Shared fixtures: the real MIRAGE copy beside the project, and composed Hydra configs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from folders import TESTS, on_path

ROOT = TESTS.parent
on_path()  # every test folder, so a test imports a helper of another folder's test (folders.py)


def main_calls(entry: str) -> set[str]:
    """Names called (by plain name) inside ``main()`` of the entry point ``entry`` (a path under ROOT)."""
    import ast

    main = next(n for n in ast.walk(ast.parse((ROOT / entry).read_text()))
                if isinstance(n, ast.FunctionDef) and n.name == "main")
    return {n.func.id for n in ast.walk(main) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


@pytest.fixture(scope="session", autouse=True)
def _own_job_slots(tmp_path_factory):
    """The entry points take a job slot (``slots=auto``: one per core); the suite's CLI runs use slot
    locks of their own, so a test never waits on mogg jobs the user runs beside it."""
    old = os.environ.get("MOGG_SLOTS_DIR")
    os.environ["MOGG_SLOTS_DIR"] = str(tmp_path_factory.mktemp("slots"))
    yield
    if old is None:
        os.environ.pop("MOGG_SLOTS_DIR", None)
    else:
        os.environ["MOGG_SLOTS_DIR"] = old


SHARED_MIRAGE = ROOT.parent / "shared" / "data" / "mirage"


def mirage_dir() -> Path:
    env = os.environ.get("MOGG_DATA_DIR")
    if env and (Path(env) / "mirage" / "benchmark.json").exists():
        return Path(env) / "mirage"
    return SHARED_MIRAGE


@pytest.fixture(scope="session")
def mirage() -> Path:
    d = mirage_dir()
    if not (d / "benchmark.json").exists():
        pytest.skip(f"MIRAGE data not found at {d} (set MOGG_DATA_DIR or run python -m mogg.data.prepare)")
    return d


def compose(overrides: list[str]):
    """Compose the project's real Hydra config with overrides (no run directory, no chdir)."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hcompose(config_name="config", overrides=overrides)


def pytest_configure(config):
    """Each xdist worker gets its share of the cores (``configure_threads``: torch, numba, BLAS,
    OpenMP waiting passively), as jobs sharing a node do: two workers at two threads each made
    OpenMP spin against each other, and three small fits took 75-96 s each on a loaded machine
    (issue 50). A test that needs more threads sets them itself; CLI subprocesses configure their
    own (the entry points call ``configure_threads``)."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not os.environ.get("PYTEST_XDIST_WORKER") or not workers or os.environ.get("MOGG_TEST_THREADS") == "all":
        return
    from mogg.core.threads import configure_threads, default_threads

    configure_threads(max(1, default_threads() // int(workers)))
