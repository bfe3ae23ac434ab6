"""Run the real notebook configuration (notebooks/pytest.ini, conftest.py, nbval_sanitize.cfg) on small notebooks.

The three files are copied beside the probe notebooks, so pytest takes them exactly as it does for
``python -m pytest notebooks``; the result is read per cell from pytest's JUnit XML.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tests.conftest import ROOT

CONFIG_FILES = ("pytest.ini", "conftest.py", "nbval_sanitize.cfg")


@dataclass
class Run:
    returncode: int
    stdout: str
    outcomes: dict[str, tuple[str, str]]  # "Cell N" -> (passed | failed | skipped, message), one notebook


def cell(source: str, text: str | None = None, tags=(), result: str | None = None) -> nbformat.NotebookNode:
    """A code cell as if executed: count 1, one stdout output ``text`` (none when None), and the cell's value
    as ``result`` (its text/plain, none when None)."""
    outputs = [] if text is None else [new_output("stream", name="stdout", text=text)]
    if result is not None:
        outputs.append(new_output("execute_result", data={"text/plain": result}, execution_count=1))
    made = new_code_cell(source, execution_count=1, outputs=outputs)
    made.metadata["tags"] = list(tags)
    return made


def write(folder: Path, name: str, cells) -> Path:
    nb = new_notebook(cells=list(cells))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / name
    nbformat.write(nb, path)
    return path


def run(folder: Path, timeout: int = 300) -> Run:
    """``python -m pytest <folder>`` under the notebooks' own configuration, run from the repository root."""
    for name in CONFIG_FILES:
        shutil.copy(ROOT / "notebooks" / name, folder / name)
    xml = folder / "result.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(folder), f"--junitxml={xml}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    outcomes = {}
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed", "error": "failed"}.get(child.tag, "skipped")
                    message = (child.get("message") or "") + "\n" + (child.text or "")
            outcomes[case.get("name")] = (outcome, message)
    return Run(proc.returncode, proc.stdout + proc.stderr, outcomes)


@functools.cache
def probe() -> Run:
    """One run over one small notebook whose cells each exercise one rule of the notebook run.

    One notebook, so one kernel start for all of them (nbval reports each cell as its own test).
    """
    folder = Path(tempfile.mkdtemp(prefix="viewlab-nbval-probe-"))
    write(folder, "probe.ipynb", PROBE_CELLS)
    try:
        return run(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


PROBE_CELLS = [
    # Cell 0: a stale stored output
    cell("print(6 * 7)", "41\n"),
    # Cell 1: an address varies and is masked, the value beside it does not and is compared
    cell("print(hex(id(object())), 42)", "0x7f1234567890 42\n"),
    # Cell 2: needs CUDA
    cell("import torch\nprint(torch.zeros(1, device='cuda'))", "tensor([0.], device='cuda:0')\n", tags=["gpu"]),
    # Cell 3: (4, 1) - (4,) stretches both operands, untagged: a false alarm or a bug, either way it fails
    cell("import torch\nd = torch.zeros(4, 1) - torch.zeros(4)\nprint(tuple(d.shape))", "(4, 4)\n"),
    # Cell 4: tagged, but only a one-sided broadcast: a stale tag
    cell("b = torch.zeros(4, 3) + torch.ones(3)\nprint(tuple(b.shape))", "(4, 3)\n", tags=["mutual-broadcast"]),
    # Cell 5: tagged and really stretching both operands
    cell(
        "o = torch.arange(3)[:, None] * torch.arange(2)\nprint(tuple(o.shape))", "(3, 2)\n", tags=["mutual-broadcast"]
    ),
    # Cell 6: untagged and one-sided: silent; also the reports of cell 5 do not leak into the next cell
    cell("print(tuple((torch.zeros(2, 3) * 2).shape))", "(2, 3)\n"),
    # Cells 7, 8: the hook's silent requests between cells leave IPython's last result as the last cell left it
    cell("held = [1, 2]\nheld", result="[1, 2]"),
    cell(
        "ip = get_ipython()\nprint(ip.last_execution_result.result is held, ip.last_execution_succeeded)", "True True\n"
    ),
]
