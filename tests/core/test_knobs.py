"""Issue 61: each knob is declared once, in its dataclass field (:mod:`mogg.core.knobs`).

Before, a budget-router knob's default was written five or six times (the field, the yaml, the fit's
signature, a docstring, a back-compat ``.get``) and they drifted (``fit_action_routers`` defaulted to
``hidden=64, patience=15`` against the kind's 32 and 10; ``FrontierSettings.caps`` had 5 caps,
``matched.yaml`` 11; an old selector directory read ``lambda_rule`` as ``here`` against the knob's
``learned``). The scanner below fails where a knob's name is given a literal default anywhere but its
field: a key in the config files that set its node, a parameter default, a class attribute, a
``.get(name, literal)`` or ``getattr(obj, name, literal)`` fallback. It is shown a planted
duplicate of each form, so it cannot pass by accident. The docs' knob tables are the fields' own
text (``scripts/knob_tables.py``).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from mogg.core.knobs import accepts, check_knobs, default_of, knob_fields, knob_table
from mogg.run.budget.actions.kind import ActionRouterKind
from mogg.run.budget.selector.kind import EvidenceSelectorKind
from mogg.run.frontier_settings import FrontierSettings

SRC = ROOT / "src" / "mogg"

# each declaring class: its config files (the node their knobs would be set in: None = the file's
# root, else the slot under it) and the source folders where its knob names mean its knobs
DECLARED = {
    FrontierSettings: {"conf": {"conf/frontier/matched.yaml": None},
                       "src": ["run/frontier_settings.py", "run/frontier_stage.py", "run/budget", "evaluation/frontier.py",
                               "evaluation/frontier_guard.py", "evaluation/frontier_report.py"]},
    ActionRouterKind: {"conf": {"conf/frontier/routers/actions.yaml": "actions"},
                       "src": ["run/budget/actions", "run/budget/base.py", "run/budget/registry.py",
                               "run/budget/shared.py"]},
    EvidenceSelectorKind: {"conf": {"conf/frontier/routers/selector.yaml": "selector"},
                           "src": ["run/budget/selector", "run/budget/base.py", "run/budget/registry.py",
                                   "run/budget/shared.py"]},
}
OVERRIDE = re.compile(r"#\s*override\b")  # a deliberate override says so on its line: `key: value  # override: why`


def _literal(node: ast.AST | None) -> bool:
    """A value written out in the code: a constant, a negative number, or a tuple/list/set/dict of them."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _literal(node.operand)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or _literal(k) for k in node.keys) and all(_literal(v) for v in node.values)
    return False


def source_duplicates(path: str, text: str, names: set[str], declaring: str | None, valued: set[str] = frozenset()
                      ) -> list[str]:
    """``path:line name`` wherever ``text`` gives a knob name of ``names`` a literal default outside
    the class ``declaring`` (its own fields): a parameter default, a class attribute, a
    ``.get(name, literal)`` or ``getattr(obj, name, literal)``. A parameter defaulting to None says
    "not given" (the caller passes the knob), unless None is a value of the knob (``valued``)."""
    out = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
            out += [f"{path}:{node.lineno} {arg.arg}={ast.unparse(d)} (a parameter default)"
                    for arg, d in pairs if arg.arg in names and _literal(d)
                    and not (isinstance(d, ast.Constant) and d.value is None and arg.arg not in valued)]
        elif isinstance(node, ast.ClassDef):
            if node.name == declaring:  # its fields are the declarations (its methods are scanned)
                continue
            for st in node.body:
                target = st.target if isinstance(st, ast.AnnAssign) else \
                    (st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else None)
                if isinstance(target, ast.Name) and target.id in names and _literal(getattr(st, "value", None)):
                    out.append(f"{path}:{st.lineno} {target.id}={ast.unparse(st.value)} (a class attribute of {node.name})")
        elif isinstance(node, ast.Call):
            f, args = node.func, node.args
            key = None
            if isinstance(f, ast.Attribute) and f.attr in ("get", "setdefault", "pop") and len(args) == 2:
                key, default = args
            elif isinstance(f, ast.Name) and f.id == "getattr" and len(args) == 3:
                key, default = args[1], args[2]
            if isinstance(key, ast.Constant) and key.value in names and _literal(default):
                out.append(f"{path}:{node.lineno} {key.value}={ast.unparse(default)} (a fallback)")
    return out


def config_duplicates(path: str, text: str, names: set[str], slot: str | None) -> list[str]:
    """``path:line name`` wherever a config file sets a knob of ``names`` in its node (the root, or
    ``slot``) without saying on the line that it is a deliberate override."""
    node = yaml.safe_load(text) or {}
    node = node if slot is None else (node.get(slot) or {})
    lines = text.splitlines()
    out = []
    for key in sorted(set(node) & names):
        at = [i for i, line in enumerate(lines, 1) if re.match(rf"\s*{re.escape(key)}\s*:", line)]
        if not any(OVERRIDE.search(lines[i - 1]) for i in at):
            out.append(f"{path}:{at[0] if at else '?'} {key}: {node[key]!r} (a default in the config)")
    return out


def _sources(folders: list[str]) -> dict[str, str]:
    files = []
    for f in folders:
        p = SRC / f
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return {str(p.relative_to(ROOT)): p.read_text() for p in files}


def duplicates(conf: dict[str, str] | None = None, src: dict[str, str] | None = None) -> list[str]:
    """Every knob default written outside its field (``conf``/``src``: path -> text replacing the file's)."""
    out = []
    for cls, where in DECLARED.items():
        names = {f.name for f in knob_fields(cls)}
        valued = {f.name for f in knob_fields(cls) if accepts(f, None)}
        own = str(Path(inspect.getsourcefile(cls)).resolve().relative_to(ROOT))
        for path, slot in where["conf"].items():
            text = (conf or {}).get(path) or (ROOT / path).read_text()
            out += config_duplicates(path, text, names, slot)
        for path, text in _sources(where["src"]).items():
            text = (src or {}).get(path, text)
            out += source_duplicates(path, text, names, cls.__name__ if path == own else None, valued)
    return sorted(set(out))


def test_no_knob_default_is_written_outside_its_dataclass():
    assert duplicates() == []


def test_the_scanner_catches_each_planted_duplicate():
    """One of each form the drift took (a yaml default, a stale fit signature, a back-compat
    fallback, a mirror in another class), each found and named; and the scanner sees the real
    declarations (it is not blind): removing a field's declaring class from the skip finds it."""
    actions = (ROOT / "conf/frontier/routers/actions.yaml").read_text()
    planted = {"conf/frontier/routers/actions.yaml": actions + "  hidden: 64\n"}
    line = len(actions.splitlines()) + 1
    assert duplicates(conf=planted) == [f"conf/frontier/routers/actions.yaml:{line} hidden: 64 (a default in the config)"]
    # said to be deliberate on its line: allowed
    assert duplicates(conf={"conf/frontier/routers/actions.yaml": actions + "  hidden: 64  # override: wider\n"}) == []
    matched = (ROOT / "conf/frontier/matched.yaml").read_text()
    assert duplicates(conf={"conf/frontier/matched.yaml": matched + "caps: [null, 32]\n"})[0].endswith(
        "caps: [None, 32] (a default in the config)")

    fit = "src/mogg/run/budget/actions/fit.py"
    text = (ROOT / fit).read_text()
    found = duplicates(src={fit: text + "\n\ndef stale(x, *, hidden: int = 64, patience=15):\n    return x\n"})
    assert [f.split(" ", 1)[1] for f in found] == ["hidden=64 (a parameter default)", "patience=15 (a parameter default)"]
    session = "src/mogg/run/budget/selector/session.py"
    text = (ROOT / session).read_text()
    found = duplicates(src={session: text + "\n\ndef old(st, dep):\n    return st.get('context', False), "
                                            "getattr(dep, 'transfer_lambda', 'here')\n"})
    assert [f.split(" ", 1)[1] for f in found] == ["context=False (a fallback)", "transfer_lambda='here' (a fallback)"]
    guard = "src/mogg/run/budget/actions/policy.py"
    found = duplicates(src={guard: (ROOT / guard).read_text() + "\n\nclass Mirror:\n    guard_se: float = 1.0\n"})
    assert [f.split(" ", 1)[1] for f in found] == ["guard_se=1.0 (a class attribute of Mirror)"]
    # the same duplicates written as they were before issue 61 (fit.py's signature, session.py's fallback)
    old = "def fit_action_routers(xq, *, objective='utility', hidden=64, patience=15):\n    pass\n"
    assert len(source_duplicates("old.py", old, {f.name for f in knob_fields(ActionRouterKind)}, None)) == 2
    old = "context = bool(st.get('context', False))\n"
    assert len(source_duplicates("old.py", old, {f.name for f in knob_fields(EvidenceSelectorKind)}, None)) == 1


def test_the_config_defaults_are_the_fields_and_overrides_still_reach_them():
    """The composed nodes hold each field's default (Hydra's ConfigStore, read from the fields),
    and a knob set on the command line without ``+`` reaches the kind."""
    from conftest import compose
    from omegaconf import OmegaConf

    from mogg.run.frontier_stage import frontier_settings

    cfg = compose(["experiment=selector", "data=pubmedqa"])
    node = OmegaConf.to_container(cfg.frontier, resolve=True)
    for cls, values in ((FrontierSettings, node), (ActionRouterKind, node["routers"]["actions"]),
                        (EvidenceSelectorKind, node["routers"]["selector"])):
        for f in knob_fields(cls):
            if f.name != "routers":
                want = default_of(cls, f.name)
                assert values[f.name] == (list(want) if isinstance(want, tuple) else want), (cls.__name__, f.name)
    fs = frontier_settings(compose(["experiment=selector", "data=pubmedqa", "frontier.routers.selector.depth=4",
                                    "frontier.routers.actions.hidden=64", "frontier.caps=[null,64]"]))
    assert fs.caps == (None, 64) and fs.routers[0].hidden == 64 and fs.routers[1].depth == 4
    assert dataclasses.asdict(fs.routers[0]) == {**dataclasses.asdict(ActionRouterKind()), "hidden": 64}


def test_the_frontier_switch_renamed_from_actions_still_works_and_says_its_new_name(caplog):
    """Issue 61: ``frontier.actions`` (the switch of every learned budget router, while "actions" is the
    action router's word) is ``frontier.budget_routers``; the old key keeps working, on the command
    line and in a config file, with a warning naming the new one."""
    import logging

    from conftest import compose
    from omegaconf import OmegaConf

    from mogg.core.runconfig import prepare_argv
    from mogg.run.frontier_stage import frontier_settings

    with caplog.at_level(logging.WARNING):
        argv = prepare_argv(["train.py", "experiment=frontier", "data=pubmedqa", "frontier.actions=false"], "train.py")
    assert argv[-1] == "frontier.budget_routers=false" and "frontier.budget_routers" in caplog.text
    assert frontier_settings(compose(argv[1:])).budget_routers is False
    cfg = compose(["experiment=frontier", "data=pubmedqa"])
    assert frontier_settings(cfg).budget_routers is True and "actions" not in cfg.frontier
    OmegaConf.set_struct(cfg, False)
    cfg.frontier.actions = False  # as an experiment file written before the rename sets it
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert frontier_settings(cfg).budget_routers is False
    assert "frontier.actions is frontier.budget_routers" in caplog.text


def test_each_knob_has_a_check_and_a_doc_and_refuses_in_one_line():
    for cls in DECLARED:
        for f in knob_fields(cls):
            assert f.metadata["doc"].strip(), f"{cls.__name__}.{f.name} has no doc"
    with pytest.raises(ValueError, match=r"^frontier\.routers\.actions\.patience=-1: out of range"):
        ActionRouterKind(patience=-1)
    with pytest.raises(ValueError, match=r"^frontier\.caps=\[\]: must be a list"):
        FrontierSettings(caps=[])

    @dataclasses.dataclass
    class Probe:  # the generic check on a class of its own
        from mogg.core.knobs import count, knob
        n: int = knob(2, count())

    p = Probe()
    check_knobs(p, "probe")
    p.n = 0
    with pytest.raises(ValueError, match=r"^probe\.n=0: must be an integer >= 1$"):
        check_knobs(p, "probe")


def test_the_docs_knob_tables_are_the_fields():
    """docs/configuration.md's knob tables are generated from the fields (scripts/knob_tables.py);
    an edited default or doc without regenerating them fails here."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "knob_tables.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "docs" / "configuration.md").read_text()
    for cls, node in ((FrontierSettings, "frontier"), (ActionRouterKind, "frontier.routers.actions"),
                      (EvidenceSelectorKind, "frontier.routers.selector")):
        assert knob_table(cls, node) in text
    assert "| `frontier.routers.actions.hidden` | `32` |" in text


def splats(sources: dict[str, str]) -> list[str]:
    """Calls of a fit (``fit_*``, ``crossfit_*``) that pass ``**kwargs``, and such functions that take them."""
    found = []
    for path, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name.startswith(("fit_", "crossfit_")) and any(k.arg is None for k in node.keywords):
                    found.append(f"{path}:{node.lineno} {name}(**...)")
            elif isinstance(node, ast.FunctionDef) and node.name.startswith(("fit_", "crossfit_")) \
                    and node.args.kwarg is not None:
                found.append(f"{path}:{node.lineno} def {node.name}(**{node.args.kwarg.arg})")
    return found


def test_the_fit_reads_the_kind_not_a_keyword_splat():
    """``frontier.routers.actions.hidden`` goes config -> ActionRouterKind -> crossfit_actions /
    fit_final_actions -> fit_action_routers(kind) -> kind.hidden: no call of a fit (``fit_*``,
    ``crossfit_*``) in the kinds' packages passes ``**kwargs``, and no such function takes them
    (LightGBM's own ``fit`` takes its evaluation arguments so: not a knob). The form it had before
    is caught."""
    assert splats(_sources(["run/budget"])) == []
    before = ("def fit_action_router(xq, train, *, seed=0, **fit):\n    return fit_action_routers(xq, [train], **fit)\n")
    assert splats({"old.py": before}) == ["old.py:1 def fit_action_router(**fit)", "old.py:2 fit_action_routers(**...)"]


def test_a_knob_set_in_the_config_is_the_one_the_scorer_is_built_with(tmp_path):
    """``frontier.routers.actions.hidden=7`` on the command line -> the composed node (ConfigStore
    default overridden) -> ActionRouterKind.hidden -> crossfit_actions(kind) -> fit_action_routers
    -> ActionScorer(hidden) -> the fold's actions.json; the cross-fit's key records every knob."""
    import json

    import numpy as np
    from conftest import compose

    from mogg.routing.plans import ActionSpace
    from mogg.run.budget.actions.folds import crossfit_actions
    from mogg.run.frontier_stage import frontier_settings

    fs = frontier_settings(compose(["experiment=frontier", "data=pubmedqa", "frontier.routers.actions.hidden=7",
                                    "frontier.routers.actions.max_epochs=2"]))
    kind = fs.routers[0]
    rng = np.random.default_rng(0)
    xq, xa, y = rng.normal(size=(30, 3)), rng.normal(size=(30, 4, 2)), rng.random((30, 4))
    space = ActionSpace(["a", "b"], 1, [None, 8])
    info = crossfit_actions(xq, xa, y, space, [f"q{i}" for i in range(30)], 2, 0, kind, 0.2, tmp_path)
    net = json.loads((tmp_path / "fold0" / "actions.json").read_text())
    assert net["network"]["hidden"] == 7 and net["loss"] == "utility" and net["training"]["max_epochs"] == 2
    assert info["key"]["fit"] == dataclasses.asdict(kind) and info["key"]["fit"]["hidden"] == 7
