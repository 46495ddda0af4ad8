"""Every documented command composes: the README's train/evaluate/build commands and every inline
``key=value`` override in its prose are composed with the real Hydra config (no run), so a
documented command that does not compose fails CI."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path

import pytest
from conftest import ROOT

DOCS = [ROOT / "README.md", ROOT / "slurm" / "README.md", ROOT / "examples" / "generic" / "README.md",
        ROOT / "checkpoints" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = ("train.py", "evaluate.py", "build.py")


def _split_top(value: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets/parentheses/quotes (a Hydra sweep)."""
    out, depth, cur, quote = [], 0, "", None
    for ch in value:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append(cur)
            cur = ""
            continue
        cur += ch
    return out + [cur]


def _expand_glob(value: str) -> list[str]:
    m = re.fullmatch(r"glob\(([^,)]+)(?:,\s*exclude=\[?([^\])]*)\]?)?\)", value)
    names = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
    keep = [n for n in names if fnmatch.fnmatch(n, m.group(1).strip())]
    excl = [e.strip() for e in (m.group(2) or "").split(",") if e.strip()]
    return [n for n in keep if not any(fnmatch.fnmatch(n, e) for e in excl)]


def _variants(args: list[str]) -> list[list[str]]:
    """The override lists a (multirun) command composes: every sweep value of every key, one at a time."""
    base, sweeps = [], []
    for a in args:
        k, _, v = a.partition("=")
        if v.startswith("glob("):
            sweeps.append([f"{k}={x}" for x in _expand_glob(v)])
        elif v.startswith("range("):
            first = re.findall(r"-?\d+", v)[0]
            base.append(f"{k}={first}")
        elif len(_split_top(v)) > 1 and not v.startswith(("[", "{")):
            sweeps.append([f"{k}={x}" for x in _split_top(v)])
        else:
            base.append(a)
    out = [base]
    for alts in sweeps:  # vary one swept key at a time (the others at their first value)
        firsts = [s[0] for s in sweeps]
        for alt in alts:
            out.append(base + [alt if s is alts else f for s, f in zip(sweeps, firsts)])
    return out


def _command_parts(line: str) -> list[list[str]]:
    """A shell line's commands (split at ``&&``, ``;``, ``||`` outside quotes: a quoted ``;`` separates
    a list option's items), each as its words."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    parts, cur = [], []
    for tok in lex:
        if tok in (";", "&&", "||", "&", ";;"):
            parts.append(cur)
            cur = []
        else:
            cur.append(tok)
    return [p for p in parts + [cur] if p]


def documented_commands() -> list[tuple[str, list[str]]]:
    cmds = []
    for doc in DOCS:
        text = doc.read_text()
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
                for toks in _command_parts(line):
                    for i, t in enumerate(toks):
                        if t.endswith(SCRIPTS) and i > 0 and toks[i - 1].startswith("python"):
                            args = [a for a in toks[i + 1:] if "=" in a and not a.startswith("-")]
                            cmds.append((f"{doc.name}: {' '.join(toks)[:120]}", args))
    return cmds


def documented_overrides() -> list[tuple[str, list[str]]]:
    """Backtick spans in prose holding key=value overrides (each span composes on its own)."""
    out = []
    for doc in DOCS:
        prose = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for span in re.findall(r"`([^`\n]+)`", prose):
            if span.startswith(("python ", "pytest", "mogg-", "pip ", "MOGG_", ".", "-")):  # "-": a CLI flag
                continue  # commands, handled above or not Hydra
            toks = span.split()
            if toks and all(re.fullmatch(r"[A-Z][A-Z0-9_]*=\S*", t) for t in toks):
                continue  # environment variables (OMP_WAIT_POLICY=PASSIVE), not Hydra overrides
            if toks and all(re.fullmatch(r"[+~]?[\w@/.\-]+=\S+", t) for t in toks):
                out.append((f"{doc.name}: `{span}`", toks))
    return out


CASES = documented_commands() + documented_overrides()


def _distinct_compositions() -> list[tuple[list[str], list[str]]]:
    """Every override list the documented commands and spans compose, once (587 lists, 374 distinct:
    a command repeated across pages, a sweep's first values), with every place that documents it."""
    places: dict[tuple[str, ...], list[str]] = {}
    for where, args in CASES:
        for ov in _variants(args):
            places.setdefault(tuple(ov), []).append(where)
    return [(list(ov), ws) for ov, ws in places.items()]


COMPOSITIONS = _distinct_compositions()


def test_the_docs_document_commands():
    assert len(documented_commands()) >= 15 and len(documented_overrides()) >= 40  # the parser finds them
    # every documented command and span is composed (through the distinct override lists)
    assert {w for _, ws in COMPOSITIONS for w in ws} == {w for w, _ in CASES}


@pytest.mark.parametrize("overrides,where", COMPOSITIONS, ids=[f"{ws[0][:70]} | {' '.join(ov)[:60]}"
                                                              for ov, ws in COMPOSITIONS])
def test_documented_command_composes(overrides, where):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        try:
            compose(config_name="config", overrides=overrides, return_hydra_config=True)
        except Exception as e:
            raise AssertionError(f"{overrides} (documented in {where}) does not compose: {e}") from e


def test_design_citations_point_at_sections_that_exist():
    """Code and configs cite the repository's own design document by section."""
    design = (ROOT / "docs" / "design.md").read_text()
    sections = set(re.findall(r"^## (\d+)\.", design, re.M))
    cited = []
    for f in [*(ROOT / "src").rglob("*.py"), *(ROOT / "conf").rglob("*.yaml")]:
        text = f.read_text()
        assert "DESIGN.md" not in text and "../shared" not in text, f"{f} cites a document outside the repository"
        for m in re.finditer(r"docs/design\.md section ([\d, and]+)", text):
            cited += [(f.name, n) for n in re.findall(r"\d+", m.group(1))]
    assert cited and all(n in sections for _, n in cited), [c for c in cited if c[1] not in sections]


# ------------------------------------------------------------------------------------------------
# Issue 36: the README names every script, config option, top-level knob and report file that
# exists, and nothing that does not (a test, so the lists cannot drift again).


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def _configuration() -> str:
    """The configuration page (issue 61: the README's table and knobs moved there, the README kept short)."""
    return (ROOT / "docs" / "configuration.md").read_text()


def _layout() -> str:
    """The layout, every script and module on its folder's line: docs/design.md section 4 (from the README, issue 61)."""
    return (ROOT / "docs" / "design.md").read_text()


def _config_rows() -> dict[str, tuple[list[str], list[str]]]:
    """The configuration table: conf folder -> (option names, knob names), backticked tokens only."""
    table = re.search(r"^\| group \| options \| knobs \|\n\|---.*?\n((?:\|.*\n)+)", _configuration(), re.M).group(1)
    rows = {}
    for line in table.splitlines():
        group, options, knobs = [c.strip() for c in line.strip("|").split("|")][:3]
        name = re.findall(r"`([^`]+)`", group)[0].split("@")[0]
        options = re.sub(r"\([^)]*\)", "", options)  # "(one file, `source` differs)" is prose
        rows[name] = (re.findall(r"`([^`=]+)`", options), re.findall(r"`([^`]+)`", knobs))
    return rows


def test_the_readme_config_table_names_every_option_and_no_other():
    rows = _config_rows()
    groups = {str(p.parent.relative_to(ROOT / "conf")) for p in (ROOT / "conf").rglob("*.yaml")} - {"."}
    groups -= {"local"}  # the site's own (git-ignored) settings
    assert set(rows) == groups, (sorted(groups - set(rows)), sorted(set(rows) - groups))
    for group, (options, _) in rows.items():
        files = sorted(p.stem for p in (ROOT / "conf" / group).glob("*.yaml"))
        missing = [f for f in files if not any(fnmatch.fnmatch(f, o) for o in options)]
        unknown = [o for o in options if not any(fnmatch.fnmatch(f, o) for f in files)]
        assert not missing and not unknown, f"{group}: not in the README {missing}; no such option {unknown}"


def _keys(obj, prefix: str = "") -> set[str]:
    """Every key as a dotted path and as a bare name, at any depth (lists too: ``sources[i].min_chars``)."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out |= {f"{prefix}{k}", str(k), *_keys(v, f"{prefix}{k}.")}
    elif isinstance(obj, list):
        for v in obj:
            out |= _keys(v, "")
    return out


def test_every_knob_the_readme_names_exists():
    import dataclasses

    import yaml
    from hydra.utils import get_class

    for group, (_, knobs) in _config_rows().items():
        if group in ("debug", "experiment", "hydra/launcher"):
            continue
        have: set[str] = set()
        for f in (ROOT / "conf" / group).glob("*.yaml"):
            node = yaml.safe_load(f.read_text()) or {}
            have |= _keys(node)
            for d in (node.get("defaults") or []) if isinstance(node, dict) else []:  # a sub-group: "scorer@scorer: cross"
                if isinstance(d, dict):
                    have |= {str(k).split("@")[-1].lstrip("/") for k in d}
            # a node's class (router: the file's root; frontier/routers: {<kind>: {_target_: ...}}): its
            # fields are its knobs (their defaults live there only, issue 61)
            for sub in ([node] + [v for v in node.values() if isinstance(v, dict)]) if isinstance(node, dict) else []:
                if "_target_" in sub and dataclasses.is_dataclass(cls := get_class(sub["_target_"])):
                    have |= {fl.name for fl in dataclasses.fields(cls)}
        if group == "frontier":
            from mogg.run.frontier_stage import FrontierSettings

            have |= {fl.name for fl in dataclasses.fields(FrontierSettings)}
        named = [k for knob in knobs for k in knob.split(" / ")]
        unknown = [k for k in named if k not in have and not k.startswith("debug=")]
        assert not unknown, f"{group}: the README names knobs no {group} config has: {unknown}"


def test_the_readme_names_every_field_of_the_router_and_frontier_settings():
    """The rows cannot fall behind the dataclasses the configs build (issue 39: 21 of 30 named):
    every router kind a conf/router file names (its ``_target_``), and the frontier's settings."""
    import dataclasses

    import yaml
    from hydra.utils import get_class

    from mogg.run.frontier_stage import FrontierSettings

    kinds = {get_class(n["_target_"]) for f in sorted((ROOT / "conf" / "router").glob("*.yaml"))
             if "_target_" in (n := yaml.safe_load(f.read_text()) or {})}
    assert len(kinds) >= 3, kinds  # the MLP, the committee, the cross router
    # the budget routers: conf/frontier/routers/<kind>.yaml holds {<kind>: {_target_: ..., knobs}}
    budget = {get_class(n["_target_"]) for f in sorted((ROOT / "conf" / "frontier" / "routers").glob("*.yaml"))
              for n in (yaml.safe_load(f.read_text()) or {}).values() if isinstance(n, dict)}  # not its defaults list
    assert len(budget) >= 2, budget  # the action router, the evidence selector
    rows = _config_rows()
    for group, cls in [*(("router", k) for k in sorted(kinds, key=str)), ("frontier", FrontierSettings),
                       *(("frontier/routers", k) for k in sorted(budget, key=str))]:
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in rows[group][1]]
        assert not missing, f"README's `{group}` row leaves out {cls.__name__} fields {missing}"


def test_the_readme_names_every_top_level_knob():
    import yaml

    text = re.search(r"Top-level knobs:(.*?)They are validated", _configuration(), re.S).group(1)
    named = {re.split(r"[=.]", t)[0] for t in re.findall(r"`([^`]+)`", text) if "/" not in t}  # not paths
    root = yaml.safe_load((ROOT / "conf" / "config.yaml").read_text())
    knobs = set(root) - {"defaults", "hydra"}
    assert knobs <= named, f"top-level knobs the README does not name: {sorted(knobs - named)}"
    assert named - {"reports"} <= knobs, f"the README names top-level knobs that do not exist: {sorted(named - knobs)}"


def test_the_readme_layout_names_every_script_and_no_other():
    layout = re.search(r"^scripts/(.*?)\n(?=\S)", _layout(), re.M | re.S).group(1)
    named = set(re.findall(r"([\w]+\.py)", layout))
    have = {p.name for p in (ROOT / "scripts").glob("*.py")}
    assert named == have, (sorted(have - named), sorted(named - have))


def _report_names() -> list[str]:
    para = re.search(r"The report lands in(.*?)\n\n", _readme(), re.S).group(1)
    return [t for t in re.findall(r"`([^`/]+\.(?:md|csv|json|jsonl|png|npz))`", para)]


def test_every_report_file_the_readme_names_is_written_by_the_code():
    src = "\n".join(p.read_text() for p in (ROOT / "src" / "mogg").rglob("*.py"))
    for name in _report_names():
        # per ladder (f"{name}_frontier.png") or across ladders (f"{ALL_LADDERS}_frontier.png"): the suffix
        suffix = re.sub(r"^(<ladder>|all_ladders)", "", name)
        assert suffix in src, f"no code writes {name}"
    assert len(_report_names()) >= 12


def test_every_file_of_a_real_report_is_named_in_the_readme(tmp_path):
    from conftest import compose

    from mogg.run.app import train

    cfg = compose(["experiment=generic_example", "debug=tiny", "frontier=matched", "evaluate_after=true",
                   f"paths.artifacts={tmp_path / 'a'}", f"paths.checkpoints={tmp_path / 'c'}",
                   f"paths.reports={tmp_path / 'r'}", "frontier.routers.actions.max_epochs=3"])
    train(cfg)
    written = sorted(p.name for p in (tmp_path / "r" / "debug").iterdir())
    patterns = [re.escape(n).replace(re.escape("<ladder>"), r"\w+") for n in _report_names()]
    unnamed = [f for f in written if not any(re.fullmatch(p, f) for p in patterns)]
    assert not unnamed, f"report files the README does not name: {unnamed}"


# what the docs say a default is: "`key=value` (default)", "(default: `key=value`)", "the config default is `key=value`"
_DEFAULT_CLAIMS = (r"`([\w./@]+)=([^`\s]+)`\s*\(default\)", r"\(default[:,]?\s*`([\w./@]+)=([^`\s]+)`\)",
                   r"default is `([\w./@]+)=([^`\s]+)`", r"default `([\w./@]+)=([^`\s]+)`")


def test_every_statement_about_a_default_holds_in_the_config_tree():
    """A default the README or a docs page states is the composed config's (a knob) or the root
    defaults list's choice (a group), so a changed default cannot leave a page saying the old one."""
    import yaml
    from conftest import compose
    from omegaconf import OmegaConf

    cfg = compose([])
    groups = {}
    for d in yaml.safe_load((ROOT / "conf" / "config.yaml").read_text())["defaults"]:
        if isinstance(d, dict):
            (k, v), = d.items()
            groups[k.split("@")[0].replace("optional ", "")] = v
    claims = [(doc.name, m.group(1), m.group(2)) for doc in DOCS for p in _DEFAULT_CLAIMS
              for m in re.finditer(p, doc.read_text())]
    assert len(claims) >= 4
    for where, key, value in claims:
        if key in groups:
            assert str(groups[key]) == value, f"{where}: says {key}={value} is the default; conf/config.yaml chooses {groups[key]}"
        else:
            got = OmegaConf.select(cfg, key)
            assert str(got).lower() == value.lower(), f"{where}: says {key}={value} is the default; the config has {got}"


def test_the_readme_layout_names_every_module():
    """Every module of src/mogg is named in the README layout, on its folder's line."""
    block = re.search(r"^src/mogg/(.*?)\nslurm/", _layout(), re.M | re.S).group(1)
    named = set(re.findall(r"[A-Za-z_][\w]*", block))
    missing = sorted(f"{p.relative_to(ROOT / 'src' / 'mogg')}" for p in (ROOT / "src" / "mogg").rglob("*.py")
                     if p.stem != "__init__" and p.stem not in named)
    assert not missing, f"modules the README layout does not name: {missing}"


def test_the_run_times_have_one_source_and_no_page_restates_them(tmp_path):
    """Issue 50: the README and docs gave different times for the same commands. The documented
    commands' times are the table scripts/newcomer.py writes into docs/benchmarks.md; a time stated
    beside one of those commands elsewhere is refused (the script's own check, run here)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("newcomer", ROOT / "scripts" / "newcomer.py")
    newcomer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(newcomer)
    assert newcomer.restated_times() == []
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    assert newcomer.BEGIN in bench and newcomer.END in bench
    # the check is not blind: a restated time beside a timed command is found
    page = tmp_path / "page.md"
    page.write_text("```bash\npython train.py experiment=frontier data=pubmedqa   # ~0.5 min + 7 s\n"
                    "\n\n\npython train.py experiment=other   # 14.5 min\n```\nIt took 3 min.\n")
    found = newcomer.restated_times([("README headline", "python train.py experiment=frontier data=pubmedqa")], [page])
    assert found == ["page.md:2: python train.py experiment=frontier data=pubmedqa   # ~0.5 min + 7 s",
                     "page.md:6: python train.py experiment=other   # 14.5 min"]  # prose (line 8) is not a command's


def test_the_readme_stays_a_front_door():
    """Issue 61: the README had grown to ~2,980 words with lines up to 581 characters; details
    belong on the docs/ pages, the README stays readable in one sitting."""
    text = _readme()
    lines = text.splitlines()
    long = [(i + 1, len(ln)) for i, ln in enumerate(lines) if len(ln) >= 120]
    assert len(lines) <= 250, f"README.md has {len(lines)} lines (at most 250: move details to docs/)"
    assert len(text.split()) <= 2000, f"README.md has {len(text.split())} words (at most 2,000: move details to docs/)"
    assert not long, f"README.md lines of 120 characters or more (line, length): {long}"


def _newcomer():
    import importlib.util

    spec = importlib.util.spec_from_file_location("newcomer", ROOT / "scripts" / "newcomer.py")
    newcomer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(newcomer)
    return newcomer


def test_the_run_times_table_gives_cold_and_warm_runs_apart(tmp_path):
    """Issue 61: the table gave 0:36.3 for a frontier run with its folds cached while a profile gave
    77-99 s from nothing. Each step is timed cold (fresh artifacts and checkpoints) and warm (again),
    in two columns; docs/benchmarks.md's table has that format, and write_times writes it."""
    newcomer = _newcomer()
    rows = [("README headline", "python train.py experiment=frontier data=pubmedqa",
             {"cold": (0, 95.0, 12.0), "warm": (0, 36.3, 5.0)}),
            ("docs/x.md (first block)", "python build.py", {"warm": (1, 5.8, 1.0)})]
    table = newcomer._table(rows)
    assert table[0] == newcomer.HEADER == "| step | command | exit | cold | warm | longest silence |"
    assert table[2] == "| README headline | `python train.py experiment=frontier data=pubmedqa` | 0 | 1:35.0 | 0:36.3 | 12 s |"
    assert table[3] == "| docs/x.md (first block) | `python build.py` | 1 | - | 0:05.8 | 1 s |"
    assert newcomer._table([("s", "c", {"cold": (1, 1.0, 1.0), "warm": (0, 1.0, 1.0)})])[2].split(" | ")[2] == "cold 1, warm 0"
    # with the CPU time of the step's processes (what a busy machine's wall clock hides)
    assert newcomer._table([("s", "c", {"cold": (0, 305.0, 15.0, 98.4), "warm": (0, 19.0, 9.0, 17.0)})])[2] == \
        "| s | `c` | 0 | 5:05.0 (CPU 1:38) | 0:19.0 (CPU 0:17) | 15 s |"
    page = tmp_path / "benchmarks.md"
    page.write_text(f"before\n{newcomer.BEGIN}\nthe previous table\n{newcomer.END}\nafter\n")
    newcomer.write_times(rows, batch=False, page=page, load=(3.04, 5.5))
    text = page.read_text()
    assert "the previous table" not in text and text.startswith("before\n") and text.endswith(f"{newcomer.END}\nafter\n")
    assert "load average 3.0 at the start, 5.5 at the end" in text  # a busy machine's times say so
    assert "\n".join(table) in text and "cold: fresh artifacts and checkpoints" in text
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    inside = bench[bench.index(newcomer.BEGIN):bench.index(newcomer.END)]
    assert newcomer.HEADER in inside  # the page's table is in the script's format


def test_a_cold_run_gets_a_fresh_tree_and_the_warm_run_the_same_one(tmp_path, monkeypatch):
    """A cold run works in a fresh tree: empty artifacts, checkpoints and reports, the rest of the clone
    linked in, ../shared beside it. A command naming checkpoints/... by path reads what its own cold run
    wrote there (docs/routers.md's block exited 2 when only MOGG_CHECKPOINTS moved), and the warm run
    finds the same tree; the tree is removed afterwards, the clone untouched."""
    newcomer = _newcomer()
    clone = tmp_path / "work" / "clone"
    (clone / "checkpoints").mkdir(parents=True)
    (clone / "checkpoints" / "README.md").write_text("tracked\n")
    (clone / "train.py").write_text("# entry point\n")
    (tmp_path / "work" / "shared" / "data").mkdir(parents=True)
    monkeypatch.setattr(newcomer, "ROOT", clone)
    script = ('echo "$(pwd)|$MOGG_CHECKPOINTS|$(ls checkpoints | wc -l)|$(ls -d ../shared/data)|$(cat train.py)" >> '
              + str(tmp_path / "seen") + "; mkdir -p checkpoints/pubmedqa/mog/final")
    runs = newcomer.run_step(script, dict(__import__("os").environ), ("cold", "warm"))
    assert set(runs) == {"cold", "warm"} and all(r[0] == 0 and len(r) == 4 for r in runs.values())
    cold, warm = (tmp_path / "seen").read_text().splitlines()
    where, ckpts, n, shared, entry = cold.split("|")
    assert Path(where).parent == clone / ".newcomer" and ckpts == f"{where}/checkpoints"
    assert n == "0" and shared == "../shared/data" and entry == "# entry point"  # nothing built; the clone's files
    assert warm.split("|")[:3] == [where, ckpts, "1"]  # the warm run: the same tree, what the cold one trained
    assert not Path(where).exists() and sorted(p.name for p in (clone / "checkpoints").iterdir()) == ["README.md"]


def test_the_install_runs_once_in_the_clone_and_every_cold_tree_finds_its_venv(tmp_path, monkeypatch):
    """Command 1's install is a step of its own, run in the clone; a cold tree made afterwards links the
    venv in. Made inside the first cold tree, the venv went with that tree and every later step
    failed on `. .venv/bin/activate` (a fresh-clone run: eleven steps exit 1)."""
    newcomer = _newcomer()
    steps = newcomer.plan(False)
    assert steps[0][0] == newcomer.INSTALL and steps[0][1].startswith("python3 -m venv .venv")
    assert steps[0][1].rstrip().endswith("pip install -e '.[dev]' -c constraints.txt") and "mogg-prepare" not in steps[0][1]
    assert steps[1] == ("README command 1", newcomer.plan(True)[0][1]) and steps[1][1].startswith("mogg-prepare")
    clone = tmp_path / "clone"
    clone.mkdir()
    monkeypatch.setattr(newcomer, "ROOT", clone)
    rc = newcomer.run_streamed("mkdir -p .venv/bin && echo 'export MADE=1' > .venv/bin/activate", {}, clone)[0]
    runs = newcomer.run_step(". .venv/bin/activate && test $MADE = 1", dict(__import__("os").environ), ("cold",))
    assert rc == 0 and runs["cold"][0] == 0


def test_a_collect_step_runs_in_the_tree_of_the_sweep_before_it(tmp_path, monkeypatch):
    """The README's `collect --frontier` line reads the runs of the sweep line above it: in a fresh cold
    tree of its own it found none and exited 2 (a fresh-clone run). It now runs in the sweep's tree,
    cold then warm, and that tree is removed after it; a step that reads nothing gets its own."""
    newcomer = _newcomer()
    clone = tmp_path / "clone"
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "activate").write_text("")
    monkeypatch.setattr(newcomer, "ROOT", clone)
    seen = tmp_path / "seen"
    steps = [("sweep", f"mkdir -p reports/frontier_a && touch reports/frontier_a/metrics.json && pwd >> {seen}"),
             ("collect", f": python -m mogg.evaluation.collect; test -f reports/frontier_a/metrics.json && pwd >> {seen}"),
             ("other", f"test ! -e reports/frontier_a && pwd >> {seen}")]
    monkeypatch.setattr(newcomer, "plan", lambda skip_install: steps)
    monkeypatch.setattr(newcomer, "restated_times", lambda *a, **k: [])
    assert newcomer.main(["--skip-install"]) == 0
    trees = seen.read_text().splitlines()
    assert len(trees) == 6 and len(set(trees[:4])) == 1 and trees[4] == trees[5] != trees[0]
    assert list((clone / ".newcomer").glob("cold-*")) == []  # every tree removed


def _claims():
    import doc_claims

    readme, results = _readme(), (ROOT / "docs" / "results.md").read_text()
    return doc_claims, readme, results, doc_claims.table_cells(doc_claims.section(readme, "Headline"))


def test_every_headline_cell_is_a_collected_cell_and_bold_as_collect_bolds_it():
    """Issue 61: the README's cells against the five-seed tables of docs/results.md (collect's output
    as pasted there: the hours of runs are not redone here), bold by collect's own rule. Its selector
    row came from another run's table, which has no interval, and was bold there."""
    claims, readme, results, cells = _claims()
    assert len(cells) >= 45 and any(c.bold for c in cells)  # the parser finds the table
    assert claims.cell_errors(cells, claims.table_cells(results)) == []


def test_a_readme_that_bolds_or_promises_what_the_collected_tables_do_not_is_refused():
    claims, readme, results, _ = _claims()
    sources = claims.table_cells(results)
    plain = "| 0.936 ± 0.000 (208) |\n| | selector"  # PubMedQA*'s router policy at B = 256, not bold
    assert plain in readme
    bad = {"a bold cell the table does not bold": readme.replace(plain, "| **0.936 ± 0.000 (208)** |\n| | selector"),
           "a row no table holds": readme.replace("| | oracle frontier | 0.481", "| | best fixed level | 0.936 (208) | "
                                                  "0.936 (208) | 0.936 (208) |\n| | oracle frontier | 0.481"),
           "a number of another run": readme.replace("0.746 ± 0.007 (128)", "0.746 ± 0.009 (128)"),
           "a ceiling in bold": readme.replace("| | oracle frontier | 0.481 (64)", "| | oracle frontier | **0.481 (64)**")}
    for what, text in bad.items():
        assert text != readme, what
        errors = claims.cell_errors(claims.table_cells(claims.section(text, "Headline")), sources)
        assert len(errors) == (3 if what == "a row no table holds" else 1), (what, errors)


def test_every_headline_row_is_a_row_its_commands_produce(tmp_path):
    """Issue 61: "the five-seed sweep gives the table above", but experiment=frontier writes no selector
    row. The README's headline commands, and those of the docs/results.md sections they cite, run for
    real, scaled down (doc_claims.produced_rows: one seed, debug=tiny, the shipped example), then their
    collect commands as written: every README row must be a row of what they collect. The README as it
    was, its sweep of experiment=frontier alone, is refused."""
    claims, readme, results, cells = _claims()
    own = claims.headline_commands(readme)  # the README's block alone, no section it cites
    cited = [c for c in claims.headline_commands(readme, results) if c not in own]
    assert any("experiment=selector" in c for c in cited)
    rows, skipped = claims.produced_rows(own, tmp_path)
    assert rows >= {"envelope", "router", "oracle"}
    # the README of issue 61: "the table above" from the frontier sweep and its collect, nothing cited
    before = readme.replace(claims.cited_line(readme), "")
    assert claims.headline_commands(before, results) == own
    assert {m.split(" / ")[1] for m in claims.unproduced(cells, rows)} == {"selector", "selector, other sets (deployed)"}
    more, skipped = claims.produced_rows(cited, tmp_path)
    rows |= more
    # a leave-one-set-out sweep prepares two other full sets (minutes): left out here, its rows are those
    # its collect command asks for (pytest -m slow runs it: test_the_heavy_headline_rows_are_produced)
    asked = {p for c in skipped if "collect" in c for p in claims.collect_policies(c)}
    missing = claims.unproduced(cells, rows)
    assert claims.unproduced([c for c in cells if f"{c.set} / {c.policy}" in missing], asked) == []
    assert {m.split(" / ")[1] for m in missing} <= {"selector, other sets (deployed)"}


@pytest.mark.slow
@pytest.mark.timeout(4000)
def test_the_heavy_headline_rows_are_produced(tmp_path):
    """The leave-one-set-out sweep the headline cites, run scaled down (its two training sets whole)."""
    claims, readme, results, cells = _claims()
    rows, skipped = claims.produced_rows(claims.headline_commands(readme, results), tmp_path, heavy=True)
    assert skipped == [] and claims.unproduced(cells, rows) == []


def test_the_newcomer_runs_a_pages_first_bash_block_not_its_text_blocks():
    """docs/design.md's first code block is the layout (a fence without a language): run as bash it
    failed the newcomer's path. A page's first block marked bash or sh is its commands."""
    newcomer = _newcomer()
    page = "```\nconf/    Hydra groups\n```\n\n```bash\npython train.py experiment=pubmedqa\n```\n"
    assert newcomer.first_command_block(page) == "python train.py experiment=pubmedqa\n"
    assert newcomer.first_command_block("```\nconf/  text only\n```\n") is None
    steps = dict(newcomer.plan(False))
    assert "docs/design.md (first block)" not in steps and "docs/routers.md (first block)" in steps


def test_the_newcomer_runs_the_blocks_a_page_marks_and_the_transfer_first_try_is_one():
    """Issue 58: a transfer run a newcomer can afford has its time in the run-times table. A page marks a
    block for the newcomer's path with a comment on the line before it; the table then measures it, once."""
    newcomer = _newcomer()
    page = (f"```bash\nfirst\n```\n\ntext\n{newcomer.MARK}\n```bash\nsecond\n```\n\n```bash\nunmarked\n```\n"
            f"{newcomer.MARK}\n\n```bash\nnot right after the mark\n```\n")
    assert newcomer.marked_blocks(page) == ["second\n"]
    steps = newcomer.plan(False)
    marked = [script for where, script in steps if where == "docs/routers.md (a newcomer's block)"]
    assert len(marked) == 1 and "experiment=transfer_selector_small" in marked[0]
    assert "--corpus examples/generic/corpus.jsonl" in marked[0] and "--calibrate-here" in marked[0]
    assert len({script for _, script in steps}) == len(steps)  # no block runs twice
