"""The notebook test run is strict, sanitises only what varies, and skips gpu cells visibly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tests.conftest import ROOT


def _nbval_flags() -> list[str]:
    """The exact flags `make test-notebooks` passes (read from the Makefile, so they cannot drift)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    line = next(row for row in text.splitlines() if "--nbval" in row and "pytest" in row)
    flags = line.split("pytest", 1)[1].split("$(NOTEBOOKS)")[0].split()
    return flags


def _run(tmp_path: Path, cells) -> subprocess.CompletedProcess:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *_nbval_flags(), "-rs", "-p", "no:cacheprovider", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _cell(source: str, text: str, tags=()):
    cell = new_code_cell(source, execution_count=1, outputs=[new_output("stream", name="stdout", text=text)])
    cell.metadata["tags"] = list(tags)
    return cell


def test_makefile_runs_strict_nbval_with_the_sanitize_file():
    flags = _nbval_flags()
    assert "--nbval" in flags and "--nbval-lax" not in flags
    assert "tests/notebooks/nbval_sanitize.cfg" in flags and "tests.notebooks.nbval_hooks" in flags


def test_stale_output_fails(tmp_path):
    result = _run(tmp_path, [_cell("print(6 * 7)", "41\n")])
    assert result.returncode != 0 and "1 failed" in result.stdout, result.stdout[-2000:]


def test_addresses_are_sanitised_but_values_are_not(tmp_path):
    cells = [_cell("print(hex(id(object())), 42)", "0x7f1234567890 42\n")]
    result = _run(tmp_path, cells)
    assert result.returncode == 0, result.stdout[-2000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a CUDA machine gpu cells run instead of skipping")
def test_gpu_cells_skip_with_a_visible_reason(tmp_path):
    cells = [
        _cell("print('cpu ok')", "cpu ok\n"),
        _cell("import torch\nprint(torch.zeros(1, device='cuda'))", "tensor([0.], device='cuda:0')\n", tags=["gpu"]),
    ]
    result = _run(tmp_path, cells)
    assert result.returncode == 0, result.stdout[-2000:]
    assert re.search(r"1 passed, 1 skipped", result.stdout)
    assert "cell tagged 'gpu' needs CUDA" in result.stdout
