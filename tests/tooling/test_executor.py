"""tools/execute_notebooks.py (what `make notebooks` runs) on a small real notebook."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tools.execute_notebooks import GPU_NOT_RUN, execute

# Part of the Colab-stack suite (make test-colab): the executor runs there with Colab's nbclient.
pytestmark = [pytest.mark.colab, pytest.mark.kernel]


def test_gpu_cells_keep_their_source_and_say_why_they_did_not_run(tmp_path):
    gpu = new_code_cell("import torch\nx = torch.zeros(1, device='cuda')\nprint(x)")
    gpu.metadata["tags"] = ["gpu", "nbval-ignore-output"]
    cells = [new_markdown_cell("# t"), new_code_cell("print('a'); print('b')"), gpu, new_code_cell("print(6 * 7)")]
    path = tmp_path / "probe.ipynb"
    nbformat.write(new_notebook(cells=cells), path)

    execute(path, cuda=False)

    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2, 3]
    assert code[1].source == gpu.source and code[1].metadata["tags"] == ["gpu", "nbval-ignore-output"]
    assert code[1].outputs[0].text.strip() == GPU_NOT_RUN
    assert code[0].outputs[0].text == "a\nb\n" and len(code[0].outputs) == 1  # split prints merged
    assert code[2].outputs[0].text == "42\n"
    assert nb.metadata["viewlab"]["device"] == "cpu" and not nb.metadata["viewlab"]["cuda"]
    assert all("execution" not in c.metadata for c in code)  # no timing metadata: re-runs do not churn


def test_out_dir_leaves_the_notebook_alone_and_cuda_peaks_are_read_in_its_kernel(tmp_path):
    import json

    from tools.execute_notebooks import main

    path = tmp_path / "probe.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("import viewlab\nprint(6 * 7)")]), path)
    before = path.read_text()
    peaks, out = tmp_path / "peaks.json", tmp_path / "out"
    assert main(["--out-dir", str(out), "--cuda-peaks", str(peaks), str(path)]) == 0
    assert path.read_text() == before, "--out-dir must not touch the notebook itself"
    executed = nbformat.read(out / "probe.ipynb", as_version=4)
    assert executed.cells[0].outputs[0].text == "42\n" and len(executed.cells) == 1  # the probe cell is gone
    import torch

    expected = None if not torch.cuda.is_available() else json.loads(peaks.read_text())["probe.ipynb"]
    assert json.loads(peaks.read_text()) == {"probe.ipynb": expected}


def test_a_failing_notebook_is_reported_and_the_others_still_run(tmp_path, capsys):
    from tools.execute_notebooks import main

    bad, good = tmp_path / "a_bad.ipynb", tmp_path / "b_good.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("1 / 0")]), bad)
    nbformat.write(new_notebook(cells=[new_code_cell("print('fine')")]), good)
    assert main([str(bad), str(good)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "ZeroDivisionError" in out and "executed" in out and "b_good.ipynb" in out
    assert nbformat.read(good, as_version=4).cells[0].outputs[0].text == "fine\n"


def test_a_folder_stands_for_its_notebooks_in_order(tmp_path, capsys):
    from tools.execute_notebooks import main

    for name, value in (("b_second.ipynb", 2), ("a_first.ipynb", 1)):
        nbformat.write(new_notebook(cells=[new_code_cell(f"print({value})")]), tmp_path / name)
    (tmp_path / "notes.txt").write_text("not a notebook")
    assert main([str(tmp_path)]) == 0
    executed = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("executed")]
    assert [Path(p).name for p in executed] == ["a_first.ipynb", "b_second.ipynb"]
    assert nbformat.read(tmp_path / "b_second.ipynb", as_version=4).cells[0].outputs[0].text == "2\n"
