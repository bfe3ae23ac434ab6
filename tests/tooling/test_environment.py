"""environment.yml (conda, Binder) must ask for what pyproject.toml asks for, with the same bounds."""

from __future__ import annotations

import re
import tomllib

import yaml

from tests.conftest import ROOT

# conda-forge names that differ from PyPI names.
CONDA_TO_PYPI = {"pytorch": "torch"}


def _split(requirement: str) -> tuple[str, str]:
    """``("name", "bound")``; an environment marker (``; sys_platform == 'linux'``) is part of the bound."""
    requirement = requirement.replace('"', "'")
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*", requirement)
    assert match, f"cannot parse requirement {requirement!r}"
    return match.group(1).lower().replace("_", "-"), match.group(2).replace(" ", "")


def _pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in ("course", "lab", "test"):
        reqs += project["optional-dependencies"][extra]
    return dict(_split(r) for r in reqs)


def _conda_requirements() -> tuple[dict[str, str], list[str]]:
    """Every requirement of environment.yml, conda's and those under ``pip:`` (PyPI-only packages) alike."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda, pip = {}, []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip += dep.get("pip", [])
            continue
        name, spec = _split(dep)
        conda[CONDA_TO_PYPI.get(name, name)] = spec
    for dep in pip:
        if not dep.startswith("-"):
            name, spec = _split(dep)
            conda[name] = spec
    return conda, pip


def test_environment_has_name_and_conda_forge():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["name"] == "viewlab-course"
    assert env["channels"] == ["conda-forge"]


def test_every_pyproject_requirement_is_in_environment_with_same_bound():
    conda, _ = _conda_requirements()
    missing = {n: s for n, s in _pyproject_requirements().items() if n not in conda}
    assert not missing, f"add these to environment.yml: {missing}"
    differ = {n: (s, conda[n]) for n, s in _pyproject_requirements().items() if conda[n] != s}
    assert not differ, f"bounds differ (pyproject, environment.yml): {differ}"


def test_python_bound_matches_requires_python():
    conda, _ = _conda_requirements()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert conda["python"] == project["requires-python"]


def test_environment_installs_the_package_itself():
    _, pip = _conda_requirements()
    assert "-e ." in pip


def test_environment_lists_nothing_pyproject_does_not():
    conda, _ = _conda_requirements()
    extra = set(conda) - set(_pyproject_requirements()) - {"python", "pip"}
    assert not extra, f"environment.yml has packages pyproject.toml lacks: {sorted(extra)}"
