"""Every documented command composes: the README's train/evaluate/build commands and every inline
``key=value`` override in its prose are composed with the real Hydra config (no run), so a
documented command that does not compose fails CI."""

from __future__ import annotations

import fnmatch
import re
import shlex

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


def documented_commands() -> list[tuple[str, list[str]]]:
    cmds = []
    for doc in DOCS:
        text = doc.read_text()
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            for line in joined.splitlines():
                line = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
                for part in re.split(r"&&|;|\|\|", line):
                    toks = shlex.split(part, comments=True)
                    for i, t in enumerate(toks):
                        if t.endswith(SCRIPTS) and i > 0 and toks[i - 1].startswith("python"):
                            args = [a for a in toks[i + 1:] if "=" in a and not a.startswith("-")]
                            cmds.append((f"{doc.name}: {part.strip()[:120]}", args))
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
            if toks and all(re.fullmatch(r"[+~]?[\w@/.\-]+=\S+", t) for t in toks):
                out.append((f"{doc.name}: `{span}`", toks))
    return out


CASES = documented_commands() + documented_overrides()


def test_the_docs_document_commands():
    assert len(documented_commands()) >= 15 and len(documented_overrides()) >= 40  # the parser finds them


@pytest.mark.parametrize("where,args", CASES, ids=[c[0][:90] for c in CASES])
def test_documented_command_composes(where, args):
    from hydra import compose, initialize_config_dir

    for ov in _variants(args):
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            compose(config_name="config", overrides=ov, return_hydra_config=True)


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
