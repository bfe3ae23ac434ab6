"""viewlab.MemoryMonitor in an IPython shell: %load_ext viewlab (one record and line per cell), a cell run again."""

from __future__ import annotations

import pytest

import viewlab
from tests.unit.monitor_support import _modes, _monitor_threads
from viewlab import MemoryMonitor

pytestmark = pytest.mark.colab


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    ip.run_cell("%unload_ext viewlab")
    InteractiveShell.clear_instance()


def test_load_ext_attributes_bytes_to_cells(shell, capsys):
    assert shell.run_cell("%load_ext viewlab").success
    mon = viewlab.monitor.cell_monitor()
    assert mon is not None and mon.running and mon.display is False
    for code in ("import torch\nx = torch.zeros(256)", "y = x.repeat(4)\nz = (y * 2).sum()", "del y"):
        shell.run_cell(code, store_history=True)
    out = capsys.readouterr().out
    assert "+1,024 B still held, peak +1,024 B (tensor storages (cpu))" in out
    assert "+4,100 B still held, peak +8,196 B" in out  # y*2 was a temporary: peak only
    assert "-4,096 B still held" in out
    records = [(c.allocated_bytes, c.peak_bytes) for c in mon.cells]
    assert records == [(1024, 1024), (4100, 8196), (-4096, 0)]
    assert [c.label for c in mon.cells] == ["#1", "#2", "#3"]
    assert len(mon.figure().axes[0].patches) >= 3, "each cell is a shaded span on the plot"
    # between cells no tracking mode is left on the stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None
    shell.run_cell("%unload_ext viewlab")
    assert viewlab.monitor.cell_monitor() is None and not mon.running
    assert not _monitor_threads()


def test_a_failing_cell_still_closes_its_record(shell, capsys):
    shell.run_cell("%load_ext viewlab")
    result = shell.run_cell("import torch\nt = torch.zeros(8)\n1/0")
    assert not result.success
    out = capsys.readouterr().out
    assert "+32 B still held" in out


def test_load_ext_with_a_bad_shell_leaves_nothing_behind():
    from viewlab.monitor import cell_monitor, load_ipython_extension

    with pytest.raises(TypeError, match=r"`ip` must be the IPython shell \(get_ipython\(\)\); got None"):
        load_ipython_extension(None, device="cpu", display=False)

    class RefusingEvents:  # a shell whose event registry rejects the second hook
        def __init__(self):
            self.hooks = []

        def register(self, name, hook):
            if name == "post_run_cell":
                raise ValueError("unknown event")
            self.hooks.append((name, hook))

        def unregister(self, name, hook):
            self.hooks.remove((name, hook))

    shell = type("Shell", (), {})()
    shell.events = RefusingEvents()
    with pytest.raises(ValueError, match="unknown event"):
        load_ipython_extension(shell, device="cpu", display=False)
    assert shell.events.hooks == [] and cell_monitor() is None
    assert not _monitor_threads() and _modes() == []


def test_a_cell_run_again_stops_the_monitor_its_last_run_left_but_a_loop_does_not(shell, capsys):
    """The same line in a later execution is a cell run again: its old monitor stops. Monitors started by one line
    in one execution (a loop, a helper) run side by side."""
    shell.user_ns["MemoryMonitor"] = MemoryMonitor
    cell = "mons = [MemoryMonitor(device='cpu', display=False).start() for _ in range(2)]"
    assert shell.run_cell(cell, store_history=True).success
    first = shell.user_ns["mons"]
    assert [m.running for m in first] == [True, True], "one line run twice in one execution: both run"
    assert shell.run_cell(cell, store_history=True).success
    second = shell.user_ns["mons"]
    assert not any(m.running for m in first) and all(m.running for m in second)
    assert "stopped the MemoryMonitor this line started before" in capsys.readouterr().out
    for mon in second:
        mon.stop()
    assert _modes() == []


def test_a_second_start_says_what_to_do():
    mon = MemoryMonitor(device="cpu", display=False).start()
    with pytest.raises(RuntimeError, match=r"^mon.start\(\): this MemoryMonitor is already running.*mon.stop\(\)"):
        mon.start()
    mon.stop()
    assert _modes() == []


def test_a_monitor_stopped_on_another_thread_during_a_cell_is_swept_after_the_cell(shell):
    """The thread running cells keeps the stopped monitor's idle tracker until the cell ends (post_run_cell)."""
    shell.user_ns["MemoryMonitor"] = MemoryMonitor
    cell = (
        "import threading\nfrom tests.unit.monitor_support import _modes\n"
        "mon = MemoryMonitor(device='cpu', display=False).start()\n"
        "worker = threading.Thread(target=mon.stop); worker.start(); worker.join()\n"
        "during = [type(m).__name__ for m in _modes()]"
    )
    assert shell.run_cell(cell, store_history=True).success
    assert shell.user_ns["during"] == ["_StorageTracker"] and not shell.user_ns["mon"].running
    assert _modes() == [], "swept by the post_run_cell hook"
    assert shell.run_cell("x = 1").success  # the hook unregistered itself: later cells run as before
    assert _modes() == []
