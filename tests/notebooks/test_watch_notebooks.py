"""The course's own notebooks under watch_broadcasts(): no false alarm.

Every notebook is executed with watch_broadcasts() active from its first cell to its last (in one kernel, as
a learner would run it). A cell may trigger a report only if it is tagged ``mutual-broadcast``: it stretches
operands against each other on purpose (an outer product, or a cell that shows the (N, 1) - (N,) bug). And
every cell so tagged must trigger one, so the tags cannot go stale.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TAG = "mutual-broadcast"

# Reports are keyed by how many cells had started when they came (counted by IPython's pre_run_cell event);
# one probe at the very end prints them (probes between cells would be cells too, and notebook 06 counts its
# cells).
PRELUDE = """
from viewlab.sentinels import watch_broadcasts as _vl_watch
_vl_reports, _vl_cells = [], [0]
get_ipython().events.register("pre_run_cell", lambda *info: _vl_cells.__setitem__(0, _vl_cells[0] + 1))
_vl_guard = _vl_watch(action=lambda message: _vl_reports.append((_vl_cells[0], message)))
_vl_guard.__enter__()
"""
PROBE = "import json as _vl_json\nprint('VIEWLAB_REPORTS', _vl_json.dumps(_vl_reports))"


def _reports(cell: nbformat.NotebookNode) -> list[str]:
    text = "".join(out.get("text", "") for out in cell.get("outputs", []))  # a long line may come in pieces
    for line in text.splitlines():
        if line.startswith("VIEWLAB_REPORTS "):
            return json.loads(line.split(" ", 1)[1])
    raise AssertionError(f"the probe printed nothing: {cell.get('outputs')}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_watch_broadcasts_raises_no_false_alarm_in_the_course(path):
    import torch

    nb = nbformat.read(path, as_version=4)
    run = nbformat.v4.new_notebook(metadata=nb.metadata)
    client = NotebookClient(run, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    tagged, index_of_count = set(), {}
    started = 0  # cells started after the prelude
    with client.setup_kernel():
        run.cells.append(nbformat.v4.new_code_cell(PRELUDE))
        client.execute_cell(run.cells[-1], len(run.cells) - 1)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or "colab-setup" in cell.metadata.get("tags", []):
                continue
            if "gpu" in cell.metadata.get("tags", []) and not torch.cuda.is_available():
                continue
            if TAG in cell.metadata.get("tags", []):
                tagged.add(index)
            run.cells.append(nbformat.v4.new_code_cell(cell.source, metadata=cell.metadata))
            started += 1
            index_of_count[started] = index
            client.execute_cell(run.cells[-1], len(run.cells) - 1)
        run.cells.append(nbformat.v4.new_code_cell(PROBE))
        client.execute_cell(run.cells[-1], len(run.cells) - 1)
    flagged: dict[int, list[str]] = {}
    for count, message in _reports(run.cells[-1]):
        flagged.setdefault(index_of_count[count], []).append(message)
    false_alarms = {i: r[0][:300] for i, r in flagged.items() if i not in tagged}
    assert not false_alarms, f"{path.name}: cells not tagged {TAG!r} were reported: {false_alarms}"
    stale = sorted(tagged - set(flagged))
    assert not stale, f"{path.name}: cells tagged {TAG!r} that stretch nothing against each other: {stale}"
