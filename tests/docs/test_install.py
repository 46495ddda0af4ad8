"""The pinned install (``constraints.txt``): one resolution of ``pyproject.toml``'s ranges that the README and
CI install, so that two machines read the same figures (docs/reproducibility.md, "Installing")."""

from __future__ import annotations

import re
import tomllib

from conftest import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version and not re.search(r"[<>~!,;]", version), f"constraints.txt: {line!r} is not name==version"
        key = canonicalize_name(name)
        assert key not in pins, f"constraints.txt pins {name} twice"
        pins[key] = version
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in project["dependencies"] + extras["dev"] + extras["offline"] + extras["slurm"]]


def test_every_dependency_the_readme_installs_is_pinned_within_its_range():
    """A dependency added to pyproject.toml without a pin would be resolved afresh on every machine; a pin outside
    its range would make the pinned install fail."""
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        if name == "torch":  # installed first, by its own pin (the CPU build): README command 1 and .ci/run
            continue
        assert name in pins, f"{req.name} ({req}) is not pinned in constraints.txt"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject.toml's {req}"


def test_the_readme_and_ci_install_with_the_pins():
    """CI installs as the README says, both with the pins (a green CI on other versions than a reader installs
    would not vouch for the reader's figures)."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[dev]' -c constraints.txt" in readme
    assert re.search(r"^pip install -q -e '\.\[dev\]' -c constraints\.txt$", ci, re.M)
    torch_readme = re.search(r"pip install (torch==\S+)", readme).group(1)
    assert f"pip install -q {torch_readme}" in ci
