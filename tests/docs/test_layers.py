"""The package reads top-down: no module imports from a higher layer (``mogg.LAYERS``), lazy
imports included, and the module import graph has no cycles. The checker is tested on a planted
upward import so it cannot pass by accident."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest
from conftest import ROOT

import mogg

SRC = ROOT / "src"


def module_sources() -> dict[str, str]:
    out = {}
    for f in sorted((SRC / "mogg").rglob("*.py")):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f.read_text()
    return out


def imports_of(name: str, source: str, modules: set[str]) -> set[str]:
    """mogg modules imported anywhere in ``source`` (function bodies included)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("mogg"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mogg"):
            for a in node.names:  # "from mogg.x import y" may import the module mogg.x.y
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in modules else node.module)
    return {m for m in found if m != name and m != "mogg"}


def layer_of(module: str) -> int:
    for i, (_, prefixes) in enumerate(mogg.LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is in no layer of mogg.LAYERS: add it")


def violations(sources: dict[str, str]) -> list[str]:
    modules = set(sources)
    bad = []
    for name, src in sources.items():
        if name == "mogg":
            continue
        for dep in imports_of(name, src, modules):
            if layer_of(dep) > layer_of(name):
                bad.append(f"{name} ({mogg.LAYERS[layer_of(name)][0]}) imports {dep} ({mogg.LAYERS[layer_of(dep)][0]})")
    return bad


def cycles(sources: dict[str, str]) -> list[list[str]]:
    modules = set(sources)
    graph = {n: imports_of(n, s, modules) & modules for n, s in sources.items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_every_module_has_a_layer():
    for name in module_sources():
        if name != "mogg":
            layer_of(name)


def test_no_module_imports_from_a_higher_layer():
    assert violations(module_sources()) == []


def test_no_import_cycles():
    assert cycles(module_sources()) == []


def test_the_checker_catches_a_planted_upward_import_and_cycle():
    sources = module_sources()
    planted = dict(sources)
    planted["mogg.ladders.mog"] = sources["mogg.ladders.mog"] + "\n\ndef f():\n    from mogg.run.pipeline import prepare\n"
    assert violations(planted) == ["mogg.ladders.mog (ladders) imports mogg.run.pipeline (pipeline)"]
    planted = dict(sources)
    planted["mogg.core.text"] = sources["mogg.core.text"] + "\nfrom mogg.core.metrics import token_prf\n"
    assert cycles(planted) == [["mogg.core.metrics", "mogg.core.text"]]


def test_no_method_names_above_the_ladders_layer():
    """app, pipeline and evaluation never switch on a method (MoG/MoGG/RAPTOR live in their builders)."""
    import re

    # MoGG the method, not the package (mogg.x), its CLI (mogg-route) or "a mogg router"
    pat = re.compile(r"raptor|\bmogg\b(?![.\-]| router)|graph", re.IGNORECASE)
    files = [*sorted((SRC / "mogg" / "run").glob("*.py")), *sorted((SRC / "mogg" / "evaluation").glob("*.py"))]
    hits = []
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if pat.search(code.replace("mogg.", "")) and not code.strip().startswith(('"', "'")):
                hits.append(f"{f.relative_to(SRC)}:{n}: {line.strip()}")
    assert hits == []


def test_every_corpus_and_retriever_satisfies_its_protocol():
    from mogg.data.corpus import Corpus, CorpusProtocol, DocumentList, MultiCorpus
    from mogg.data.records import Document
    from mogg.retrieval import BM25Retriever, DenseRetriever, Retriever
    from mogg.retrieval.bm25_sharded import ShardedBM25

    docs = DocumentList([Document("a", "", "text")])
    for c in (Corpus([[Document("a", "", "text")]]), docs, MultiCorpus({"x": docs})):
        assert isinstance(c, CorpusProtocol), type(c)

    from fakes import SeededEncoder

    for r in (BM25Retriever(), ShardedBM25(), DenseRetriever(SeededEncoder(4, {}))):
        assert isinstance(r, Retriever), type(r)


def test_policy_names_are_defined_once():
    """Policy names live in mogg.evaluation.names; a string literal elsewhere would drift (before:
    the same literals in five files)."""
    from mogg.evaluation import names

    defined = {names.ROUTER, names.PRIOR, names.TRANSFER, names.SOURCE_BEST_FIXED, names.TOPK_ALL}
    found = []
    for f in sorted((SRC / "mogg").rglob("*.py")):
        if f.name == "names.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in defined:
                found.append(f"{f.relative_to(SRC)}:{node.lineno} {node.value!r}")
    assert not found, found


def test_every_package_exports_what_it_holds():
    """Each package under mogg/ has an __init__ whose __all__ names resolve (lazily or not)."""
    import importlib

    pkgs = sorted(p.parent for p in (ROOT / "src" / "mogg").glob("*/*.py") if p.parent.name != "__pycache__")
    assert {p.name for p in pkgs} >= {"data", "evaluation", "routing", "ladders", "retrieval", "selection"}
    for p in dict.fromkeys(pkgs):
        assert (p / "__init__.py").is_file(), f"{p} has no __init__.py"
        mod = importlib.import_module(f"mogg.{p.name}")
        assert getattr(mod, "__all__", None), f"mogg.{p.name} exports nothing"
        for name in mod.__all__:
            assert getattr(mod, name) is not None



def test_lazy_packages_load_nothing_until_a_name_is_used():
    """A lazy package imports none of its modules (nor torch) until one of its names is read."""
    code = ("import sys, mogg.routing as r; before = sorted(m for m in sys.modules if m.startswith('mogg.routing.'));"
            "assert 'torch' not in sys.modules; assert 'fit_routers' in dir(r);"
            "f = r.fit_routers; assert 'mogg.routing.networks.training' in sys.modules;"
            "print(before, f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "mogg.routing.networks.training"]
    import mogg.run

    with pytest.raises(AttributeError, match="mogg.run.*no_such_name"):
        mogg.run.no_such_name  # noqa: B018
    from mogg.core import lazy_exports

    with pytest.raises(ValueError, match="exported twice"):
        lazy_exports("mogg.run", {"app": ("train",), "pipeline": ("train",)})


def test_long_modules_say_why():
    """No module over ~350 lines without a stated reason (a "Length" paragraph in its docstring)."""
    long = []
    for f in sorted((ROOT / "src" / "mogg").rglob("*.py")):
        text = f.read_text()
        if text.count("\n") > 350:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Length (over ~350 lines):" not in doc:
                long.append(f"{f.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not long, "split these or state why they are long: " + ", ".join(long)


def test_what_the_entry_points_do_stays_small():
    """Issue 61: ``mogg.run.app`` composes the stages and holds none (209 lines before the level
    routers' cross-fit moved to ``mogg.run.crossfit_stage``)."""
    n = (SRC / "mogg" / "run" / "app.py").read_text().count("\n")
    assert n < 200, f"src/mogg/run/app.py has {n} lines: move a stage out (mogg.run.*_stage)"


def _kind_names() -> tuple[dict[str, str], re.Pattern]:
    """Each built-in budget-router kind's package by slot, and a pattern of the ways a module can
    name a kind: its package (``mogg.run.budget.<slot>``), its config node
    (``frontier.routers.<slot>``), a list of kinds (``frontier/routers=[...]``), its class or its
    title (``the action router``: a module that says it knows which kind it serves)."""
    from mogg.run.budget.registry import KINDS, target_class

    classes = [target_class(t) for t in KINDS.values()]
    titles = [c.TITLE.removeprefix("the ") for c in classes]
    slots = "|".join(map(re.escape, KINDS))
    named = re.compile(rf"\bfrontier\.routers\.({slots})\b|\bbudget\.({slots})\b|routers=\[|"
                       + "|".join(rf"\b{re.escape(x)}\b" for x in [*(c.__name__ for c in classes), *titles]),
                       re.IGNORECASE)
    return {slot: f"mogg.run.budget.{slot}" for slot in KINDS}, named


def kind_boundaries(sources: dict[str, str]) -> list[str]:
    """Issue 61: each budget-router kind (a package ``mogg.run.budget.<slot>``) stands beside the
    others, importing none of them (what they share lives in ``mogg.run.budget``), and no module
    below ``run/`` imports a kind or names one anywhere in its text (:func:`_kind_names`: its
    package, config node, class or title; docstrings and comments included)."""
    pkgs, named = _kind_names()
    modules, bad = set(sources), []
    for name, src in sorted(sources.items()):
        own = next((s for s, p in pkgs.items() if name == p or name.startswith(p + ".")), None)
        below = not (name == "mogg.run" or name.startswith("mogg.run."))
        for dep in sorted(imports_of(name, src, modules)):
            for slot, p in pkgs.items():
                if slot != own and (dep == p or dep.startswith(p + ".")) and (own is not None or below):
                    bad.append(f"{name} imports {dep} (the {slot} kind)")
        if below:
            bad += [f"{name}:{src.count(chr(10), 0, m.start()) + 1} names {m.group(0)!r}" for m in named.finditer(src)]
    return bad


def test_the_budget_kinds_stand_beside_each_other_and_no_lower_floor_names_one():
    assert kind_boundaries(module_sources()) == []


def test_the_kind_boundary_check_catches_a_planted_crossing():
    sources = module_sources()
    planted = dict(sources)
    planted["mogg.run.budget.selector.final"] += "\n\ndef f():\n    from mogg.run.budget.actions.deploy import DeployedActions\n"
    planted["mogg.run.budget.actions.kind"] += "\n\ndef g():\n    from mogg.run.budget.selector import plans\n"
    planted["mogg.routing.fitting.folds"] = '"""Folds."""\nNODE = "frontier.routers.actions"\n'
    planted["mogg.evaluation.frontier_report"] = "def g():\n    import mogg.run.budget.selector.kind\n"
    planted["mogg.evaluation.style"] = '"""Colours: the Evidence Selector orange."""\n# frontier/routers=[actions,selector]\n'
    planted["mogg.core.text"] = "# see mogg.run.budget.actions.scorer\nX = 'ActionRouterKind'\n"
    assert kind_boundaries(planted) == [
        "mogg.core.text:1 names 'budget.actions'",
        "mogg.core.text:2 names 'ActionRouterKind'",
        "mogg.evaluation.frontier_report imports mogg.run.budget.selector.kind (the selector kind)",
        "mogg.evaluation.frontier_report:2 names 'budget.selector'",
        "mogg.evaluation.style:1 names 'Evidence Selector'",
        "mogg.evaluation.style:2 names 'routers=['",
        "mogg.routing.fitting.folds:2 names 'frontier.routers.actions'",
        "mogg.run.budget.actions.kind imports mogg.run.budget.selector.plans (the selector kind)",
        "mogg.run.budget.selector.final imports mogg.run.budget.actions.deploy (the actions kind)"]


def test_every_test_sits_in_the_folder_of_its_layer():
    """Issue 61: the tests are grouped like the package, one folder per package of ``src/mogg/`` plus
    ``cli/`` and ``docs/`` (``tests/README.md``, which names each folder); no test file lies flat in
    ``tests/`` or in any other folder."""
    tests = ROOT / "tests"
    allowed = {p.name for p in (SRC / "mogg").iterdir() if (p / "__init__.py").is_file()} | {"cli", "docs"}
    misplaced = sorted(str(p.relative_to(tests)) for p in tests.rglob("test_*.py")
                       if p.parent.parent != tests or p.parent.name not in allowed)
    assert not misplaced, f"move these into a layer's folder (tests/README.md): {misplaced}"
    readme = (tests / "README.md").read_text()
    folders = {p.parent.name for p in tests.glob("*/test_*.py")}
    assert folders and not [f for f in sorted(folders) if f"`{f}/`" not in readme], "tests/README.md: name every folder"
