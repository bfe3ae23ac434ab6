"""The notebook run is configured once (notebooks/pytest.ini), strict, sanitises only what varies, and skips
gpu cells visibly. The rules are checked on a small probe notebook run under that very configuration."""

from __future__ import annotations

import configparser
import re
import subprocess

import pytest
import torch

from tests.conftest import ROOT
from tests.notebooks.nbval_probe import probe

pytestmark = pytest.mark.kernel

INI = ROOT / "notebooks" / "pytest.ini"
SELF = "tests/tooling/test_nbval_setup.py"


def _addopts() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(INI, encoding="utf-8")
    return parser["pytest"]["addopts"].split()


def test_the_one_config_runs_strict_nbval_with_the_sanitize_file():
    flags = _addopts()
    assert "--nbval" in flags and "--nbval-current-env" in flags and "--nbval-lax" not in flags
    assert flags[flags.index("--nbval-sanitize-with") + 1] == "nbval_sanitize.cfg"
    assert (ROOT / "notebooks" / "nbval_sanitize.cfg").is_file() and (ROOT / "notebooks" / "conftest.py").is_file()
    assert ["-p", "no:cacheprovider"] == flags[flags.index("-p") : flags.index("-p") + 2]


def test_nbval_lax_appears_nowhere_and_no_second_copy_of_the_flags():
    """Every caller says `python -m pytest notebooks`; the flags exist only in notebooks/pytest.ini."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    lax, copies = [], []
    for name in tracked:
        path = ROOT / name
        # This file names the flag to forbid it; the changelog is history.
        if name in (SELF, "CHANGELOG.md") or path.suffix in (".ipynb", ".png", ".svg") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "--nbval-lax" in text:
            lax.append(name)
        if re.search(r"--nbval-sanitize-with\s", text) and name != "notebooks/pytest.ini":
            copies.append(name)
    assert lax == [], f"--nbval-lax in {lax}: the notebook run is strict"
    assert copies == [], f"a copy of the nbval flags in {copies}: call `python -m pytest notebooks` instead"


def test_stale_output_fails():
    outcome, message = probe().outcomes["Cell 0"]
    assert outcome == "failed" and "'41\\n' == '42\\n'" in message, message


def test_addresses_are_sanitised_but_values_are_not():
    assert probe().outcomes["Cell 1"] == ("passed", "")


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a CUDA machine gpu cells run instead of skipping")
def test_gpu_cells_skip_with_a_visible_reason():
    run = probe()
    assert run.outcomes["Cell 2"][0] == "skipped"
    assert re.search(r"SKIPPED \[1\] .*probe\.ipynb.*: cell tagged 'gpu' needs CUDA", run.stdout), run.stdout[-2000:]


def test_the_probe_run_fails_as_a_whole():
    run = probe()
    assert run.returncode == 1 and len(run.outcomes) == 9, run.stdout[-3000:]
