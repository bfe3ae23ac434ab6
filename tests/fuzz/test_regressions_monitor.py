"""Regressions for the fuzz review's monitor and memory groups (E3, E9, E11, E12, E18) and a failed start: each test
is the review's reproduction, and fails on the package as it was when the review was written."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading
import weakref

import pytest

import viewlab as vl
from viewlab.monitor import _THREAD_NAME, cell_monitor, load_ipython_extension, unload_ipython_extension


def _samplers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == _THREAD_NAME and t.is_alive()]


def _modes() -> list:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return _get_current_dispatch_mode_stack()


def _at_once(n: int, action) -> list[str]:
    """Run ``action`` on ``n`` threads released together; per thread "ok" or the exception's message."""
    barrier, results = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            action()
            results[i] = "ok"
        except Exception as exc:  # noqa: BLE001 - recorded, then judged by the test
            results[i] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_e9_start_from_three_threads_at_once_makes_one_sampler_and_the_others_are_told():
    for _ in range(10):  # a race: ten tries, every one must hold
        mon = vl.MemoryMonitor(device="cpu", display=False)
        results = _at_once(3, mon.start)
        assert results.count("ok") == 1, results
        assert all(
            r.startswith("RuntimeError: mon.start(): this MemoryMonitor is already running")
            for r in results
            if r != "ok"
        )
        assert len(_samplers()) == 1
        mon.close()
        assert not _samplers()


@pytest.mark.parametrize("action", ["stop", "close"])
def test_e9_stop_or_close_from_three_threads_at_once_raises_nothing(action):
    for _ in range(10):
        mon = vl.MemoryMonitor(device="cpu", display=False).start()
        assert _at_once(3, getattr(mon, action)) == ["ok"] * 3
        assert not mon.running and not _samplers()
        mon.close()
    with vl.measure(device="cpu"):  # the starts were on this thread: its next entry sweeps what was left
        pass
    assert _modes() == []


def test_e3_monitors_started_by_one_line_in_a_loop_or_a_helper_run_side_by_side(capsys):
    mons = [vl.MemoryMonitor(device="cpu", display=False).start() for _ in range(2)]
    assert [m.running for m in mons] == [True, True]

    def start(kind: str) -> vl.MemoryMonitor:
        return vl.MemoryMonitor(device="cpu", display=False, backend=kind).start()

    a, b = start("storages"), start("rss")
    assert a.running and b.running
    for m in (*mons, a, b):
        m.stop()
    assert "stopped the MemoryMonitor" not in capsys.readouterr().out
    assert _modes() == []


class _Events:
    """An IPython-like event registry whose unregister fails with something other than ValueError."""

    def __init__(self) -> None:
        self.hooks: list = []

    def register(self, name, hook) -> None:
        self.hooks.append((name, hook))

    def unregister(self, name, hook) -> None:
        raise KeyError(name)


def test_e11_unload_stops_the_cell_monitor_even_when_unregister_fails():
    shell = type("Shell", (), {})()
    shell.events = _Events()
    mon = load_ipython_extension(shell, device="cpu", display=False)
    assert mon.running
    with pytest.raises(KeyError):
        unload_ipython_extension(shell)
    assert not mon.running and cell_monitor() is None
    assert not _samplers() and _modes() == []
    unload_ipython_extension(shell)  # a second unload finds nothing to do and says nothing
    mon.pre_run_cell()  # the hooks still registered do nothing
    mon.post_run_cell()
    assert mon.cells == [] and not mon.running


def test_e12_a_monitor_alive_at_interpreter_exit_prints_nothing(tmp_path):
    script = tmp_path / "exit_with_a_monitor.py"  # run as a file, as the review did
    script.write_text(
        textwrap.dedent(
            """
            import viewlab as vl
            m = vl.MemoryMonitor(device="cpu", display=False)
            from viewlab.course import exercises as ex
            ex.check_exercise("05-flatten-any", lambda x: x.reshape(-1), max_examples=30)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_e18_nothing_is_kept_for_a_thread_that_ended():
    refs = []

    def started_and_forgotten() -> None:  # starts a monitor here, ends without stopping it
        box.append(vl.MemoryMonitor(device="cpu", display=False).start())
        refs.append(weakref.ref(box[-1]._source.tracker))

    for _ in range(3):
        box: list = []
        worker = threading.Thread(target=started_and_forgotten)
        worker.start()
        worker.join()
        box[0].close()  # closed here, after its starting thread ended
        box.clear()
    # and one stopped while its thread still runs, which then ends without entering viewlab again
    go, box = threading.Event(), []

    def waits() -> None:
        started_and_forgotten()
        go.wait(30)

    worker = threading.Thread(target=waits)
    worker.start()
    while not refs[3:]:
        worker.join(0.01)
    box[0].close()
    box.clear()
    go.set()
    worker.join()
    with vl.measure(device="cpu"):  # any later viewlab entry forgets what was left for ended threads
        pass
    gc.collect()
    assert [r() for r in refs] == [None] * 4, "closed trackers of ended threads are still referenced"


def test_a_failed_start_of_a_cell_run_again_stops_no_other_monitor_and_leaves_nothing(monkeypatch):
    """A cell run again stops the monitor its last run left, but only once its own start worked."""
    from IPython.core.interactiveshell import InteractiveShell

    from viewlab import MemoryMonitor

    shell = InteractiveShell.instance()
    try:
        shell.user_ns["MemoryMonitor"] = MemoryMonitor
        cell = "mon = MemoryMonitor(device='cpu', display=False).start()"
        assert shell.run_cell(cell, store_history=True).success
        first = shell.user_ns["mon"]

        def broken(self):
            raise RuntimeError("the backend could not be read")

        monkeypatch.setattr(MemoryMonitor, "_take_sample", broken)  # fails after the backend was opened, entered
        failed = shell.run_cell(cell, store_history=True)
        monkeypatch.undo()
        assert isinstance(failed.error_in_exec, RuntimeError) and shell.user_ns["mon"] is first
        assert first.running, "the monitor of the cell's last run was stopped by a start that failed"
        assert len(_samplers()) == 1 and _modes() == [first._source.tracker]
        first.stop()
        assert not _samplers() and _modes() == []
    finally:
        InteractiveShell.clear_instance()
