"""Run by `make test-colab` inside .venv-colab (Colab's package versions, tests/tooling/colab-pins.txt).

Checks that the stack really is Colab's, that installing viewlab changed none of Colab's packages (on
Colab a changed package forces a runtime restart), and that the lowest IPython viewlab declares is the
one running here. Under `make test` (the main venv) these tests skip with that reason.
"""

from __future__ import annotations

import os
import re
import tomllib

import pytest

from tests.conftest import ROOT

VENV = os.environ.get("VIEWLAB_COLAB_VENV")
pytestmark = [
    pytest.mark.colab,
    pytest.mark.skipif(not VENV, reason="runs in `make test-colab`, on Colab's package stack"),
]


def _pins(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            found[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return found


def _freeze(name: str) -> dict[str, str]:
    return _pins((ROOT / VENV / name).read_text())


def test_every_colab_pin_is_what_is_installed():
    pins, installed = _pins((ROOT / "tests" / "tooling" / "colab-pins.txt").read_text()), _freeze("freeze-before.txt")
    wrong = {name: (version, installed.get(name)) for name, version in pins.items() if installed.get(name) != version}
    assert not wrong, f"pinned (Colab) vs installed: {wrong}"
    assert len(pins) >= 50


def test_installing_viewlab_changes_no_colab_package():
    before, after = _freeze("freeze-before.txt"), _freeze("freeze-after.txt")
    changed = {name: (before[name], after.get(name)) for name in before if after.get(name) != before[name]}
    assert not changed, f"installing viewlab changed packages Colab already has: {changed}"
    added = sorted(set(after) - set(before))
    # The course extra (the Colab setup cell installs viewlab[course]) brings hypothesis for the exercises.
    assert set(added) <= {"hypothesis", "sortedcontainers"}, f"viewlab brought more than expected: {added}"


def test_the_declared_ipython_floor_is_the_ipython_running_here():
    import ipykernel
    import IPython
    import ipywidgets

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = next(d for d in deps if d.startswith("ipython>=")).split(">=")[1]
    assert IPython.__version__ == _pins((ROOT / "tests" / "tooling" / "colab-pins.txt").read_text())["ipython"]
    assert tuple(int(p) for p in IPython.__version__.split(".")[:2]) == tuple(int(p) for p in floor.split("."))
    assert ipykernel.__version__.startswith("6.") and ipywidgets.__version__.startswith("7.")
