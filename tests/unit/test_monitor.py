"""viewlab.MemoryMonitor: sampling thread, exact numbers, cell mode, no leaks, and a real kernel."""

from __future__ import annotations

import gc
import sys
import threading
import time
import weakref

import pytest
import torch

import viewlab
from viewlab import MemoryMonitor
from viewlab.monitor import _THREAD_NAME, MIN_INTERVAL, fmt_bytes

pytestmark = pytest.mark.colab
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA; torch.cuda.is_available() is False")


def _monitor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == _THREAD_NAME]


def _wait_for(condition, what: str, seconds: float = 30.0) -> None:
    """Wait for an event (never for a fixed time): return as soon as ``condition()`` holds, fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still waiting after {seconds} s for {what}"
        time.sleep(0.02)


def test_script_mode_samples_and_displays_nothing(capsys):
    mon = MemoryMonitor(device="cpu")
    assert mon.display is False, "outside a Jupyter kernel nothing is displayed"
    with mon:
        a = torch.zeros(1000)
        _wait_for(lambda: len(mon.samples) >= 2, "the sampling thread's first sample")  # the start sample + one
        b = a.repeat(3)
    assert len(mon.samples) >= 3
    assert mon.samples[-1].allocated == 16_000 and mon.samples[-1].peak == 16_000
    assert all(s.t >= 0 for s in mon.samples)
    assert [s.t for s in mon.samples] == sorted(s.t for s in mon.samples)
    assert capsys.readouterr().out == ""
    assert b.numel() == 3000


def test_peak_between_two_samples_is_not_missed():
    mon = MemoryMonitor(device="cpu", display=False, interval=60.0)  # the thread will not sample in between
    with mon:
        big = torch.zeros(250_000)  # 1,000,000 bytes
        del big
        small = torch.zeros(10)
    assert [s.allocated for s in mon.samples] == [0, 40]
    assert mon.samples[-1].peak == 1_000_000  # big was freed before small was made
    assert small.numel() == 10


def test_thread_stops_on_exit_on_exception_and_on_interrupt():
    base = len(_monitor_threads())
    with MemoryMonitor(device="cpu", display=False) as mon:
        assert len(_monitor_threads()) == base + 1
    assert len(_monitor_threads()) == base and not mon.running
    with pytest.raises(ZeroDivisionError):
        with MemoryMonitor(device="cpu", display=False):
            _ = 1 / 0
    assert len(_monitor_threads()) == base
    with pytest.raises(KeyboardInterrupt):
        with MemoryMonitor(device="cpu", display=False):
            raise KeyboardInterrupt
    assert len(_monitor_threads()) == base
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    assert _get_current_dispatch_mode() is None, "the op-tracking mode must be gone after exit"


def test_hundred_start_stop_cycles_leave_no_threads():
    before = threading.active_count()
    mon = MemoryMonitor(device="cpu", display=False)
    for _ in range(100):
        mon.start()
        mon.stop()
    for _ in range(20):
        with MemoryMonitor(device="cpu", display=False):
            pass
    assert threading.active_count() == before
    assert not _monitor_threads()


def test_a_forgotten_monitor_does_not_keep_its_thread():
    mon = MemoryMonitor(backend="rss", display=False).start()  # sampling only: no dispatch mode to pop
    thread = mon._thread
    del mon
    gc.collect()
    thread.join(timeout=30)  # it ends at its next wake-up (0.25 s); the timeout only bounds a failure
    assert not thread.is_alive()


def _modes() -> list:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return _get_current_dispatch_mode_stack()


def test_a_dropped_running_monitor_removes_its_dispatch_mode():
    """Re-running `mon = MemoryMonitor().start()` drops the old monitor while it runs: its mode must go."""
    mon = MemoryMonitor(device="cpu", display=False).start()
    assert len(_modes()) == 1
    thread = mon._thread
    mon = MemoryMonitor(device="cpu", display=False).start()  # the first one has no reference left
    assert len(_modes()) == 1, f"the dropped monitor left its mode behind: {_modes()}"
    mon.stop()
    del mon
    thread.join(timeout=30)
    assert not thread.is_alive() and _modes() == []


def test_stop_inside_a_measure_block_removes_its_own_mode_not_the_measure():
    mon = MemoryMonitor(device="cpu", display=False).start()
    with viewlab.measure(device="cpu") as m:
        mon.stop()  # the monitor's mode is below the measure's on the stack
        r = torch.ones(1, 8).repeat(4, 1)
    assert m.allocated_bytes == r.numel() * 4, "measure() must still count after the monitor stopped"
    assert _modes() == []


def test_a_failed_start_leaves_no_thread_mode_or_backend(monkeypatch):
    def broken_widget(self):
        raise RuntimeError("widget could not be built")

    monkeypatch.setattr(MemoryMonitor, "_show_widget", broken_widget)  # failure injection at the widget step
    mon = MemoryMonitor(device="cpu", display=True)
    with pytest.raises(RuntimeError, match="widget could not be built"):
        mon.start()
    assert not mon.running and mon._source is None
    assert not _monitor_threads() and _modes() == []
    monkeypatch.undo()
    mon.display = False
    assert mon.start().stop().samples, "the same monitor starts cleanly afterwards"


def test_frames_auto_picks_cell_on_colab_only(monkeypatch):
    assert MemoryMonitor(device="cpu", display=False).frames_from == "thread"
    monkeypatch.setitem(__import__("sys").modules, "google.colab", type(__import__("sys"))("google.colab"))
    assert MemoryMonitor(device="cpu", display=False).frames_from == "cell"
    assert MemoryMonitor(device="cpu", display=False, frames="thread").frames_from == "thread"


def test_monitor_holds_no_reference_to_any_tensor():
    with MemoryMonitor(device="cpu", display=False) as mon:
        t = torch.zeros(10_000)
        ref = weakref.ref(t)
        mon.mark("made t")
        _wait_for(lambda: len(mon.samples) >= 3, "a sample by the thread while t is alive")
        del t
        gc.collect()
        assert ref() is None, "a tensor must die when the learner drops it, monitor or not"
        kept = torch.ones(3)
        kept_ref = weakref.ref(kept)
    del kept
    gc.collect()
    assert kept_ref() is None
    # and nothing reachable from the monitor is a tensor
    seen, stack = set(), [mon]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type) or type(obj).__name__ == "module":
            continue
        seen.add(id(obj))
        assert not isinstance(obj, torch.Tensor)
        stack.extend(gc.get_referents(obj))


def test_marks_record_bytes_and_bad_labels_are_explained():
    with MemoryMonitor(device="cpu", display=False) as mon:
        mon.mark("start")
        x = torch.zeros(100, dtype=torch.float64)
        mon.mark("after x")
        with pytest.raises(ValueError, match="non-empty string"):
            mon.mark("  ")
        with pytest.raises(TypeError, match=r"mon.mark\(\): `label` must be a short non-empty string; got int 3"):
            mon.mark(3)  # the wrong kind of thing: a TypeError, as for MemoryMonitor(title=3)
    assert [(m.label, m.allocated) for m in mon.marks] == [("start", 0), ("after x", 800)]
    with pytest.raises(RuntimeError, match="start"):
        mon.mark("too late")
    assert x.numel() == 100


def test_reset_forgets_samples_and_restarts_the_peak():
    mon = MemoryMonitor(device="cpu", display=False).start()
    try:
        tmp = torch.zeros(1000)
        del tmp
        mon.mark("m")
        mon.reset()
        assert mon.marks == [] and len(mon.samples) == 1
        assert mon.samples[0].peak == mon.samples[0].allocated == 0
    finally:
        mon.stop()


def test_stop_and_reset_before_start_are_harmless():
    mon = MemoryMonitor(device="cpu", display=False)
    assert mon.stop() is mon and mon.reset() is mon and mon.samples == [] and not mon.running


def test_restart_continues_the_timeline():
    mon = MemoryMonitor(device="cpu", display=False)
    mon.start()
    a = torch.zeros(10)
    mon.stop()
    t_stop = mon.samples[-1].t
    mon.start()
    b = torch.zeros(10)
    mon.stop()
    assert mon.samples[-1].t >= t_stop
    assert mon.samples[-1].allocated == 80
    assert a.numel() + b.numel() == 20
    with pytest.raises(RuntimeError, match="already running"):
        mon.start()
        mon.start()
    mon.stop()


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"interval": 0.1}, ValueError, r"0.25 <= interval <= 60"),
        ({"interval": float("nan")}, ValueError, r"`interval` must be 0.25 <= interval <= 60.0 seconds; got float nan"),
        ({"interval": float("inf")}, ValueError, r"got float inf"),
        ({"interval": 1e10}, ValueError, r"at least once a minute"),
        ({"interval": "fast"}, TypeError, r"^MemoryMonitor\(\): `interval` must be seconds as a number; got str"),
        (
            {"frames": "widget"},
            ValueError,
            r"`frames` must be one of 'auto', 'thread', 'cell', 'ops'; got str 'widget'",
        ),
        ({"title": 3}, TypeError, "title"),
        ({"backend": "nvml"}, ValueError, "'storages'"),
        ({"display": "yes"}, TypeError, "None, True or False"),
        ({"device": "cpu", "backend": "cuda"}, ValueError, "needs a CUDA device"),
        ({"device": "gpu"}, ValueError, "'cpu', 'cuda'"),
    ],
)
def test_bad_arguments_are_explained(kwargs, error, words):
    with pytest.raises(error, match=words) as err:
        MemoryMonitor(**kwargs)
    assert str(err.value).startswith("MemoryMonitor(): "), "the message names the function the learner called"
    assert MIN_INTERVAL == 0.25


def test_figure_png_alt_text_and_summary():
    from matplotlib.figure import Figure

    with MemoryMonitor(device="cpu", display=False) as mon:
        x = torch.zeros(256)
        mon.mark("x")
    fig = mon.figure()
    assert isinstance(fig, Figure) and len(fig.axes) == 1, "no cells: the timeline alone"
    legend = fig.axes[0].get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert legend.get_title().get_text() == "tensor storages (cpu)"
    assert labels == ["tensor storages made since start: 1,024 B (1.0 KiB)", "peak: 1,024 B (1.0 KiB)"]
    assert mon.png().startswith(b"\x89PNG")
    assert "tensor storages (cpu)" in mon.alt_text() and "marks: x" in mon.alt_text()
    html = mon.summary_html()
    assert "1,024 B" in html and "mark: x" in html
    assert x.numel() == 256


def test_rss_backend_is_labelled_approximate():
    with MemoryMonitor(backend="rss", display=False) as mon:
        pass
    assert mon.backend == "process RSS (approximate)"
    assert mon.samples[-1].allocated > 1_000_000


def test_fmt_bytes():
    assert [fmt_bytes(v) for v in (None, 5, 2048, -2048, 5 * 2**30)] == ["n/a", "5 B", "2.0 KiB", "-2.0 KiB", "5.0 GiB"]


# ---------------------------------------------------------------- cell mode in a real IPython shell


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


# ---------------------------------------------------------------- a real kernel (ipykernel) and its messages


def _run(kc, codes: list[str], timeout: float = 120) -> list[list[dict]]:
    """Execute ``codes`` one after the other in the kernel; per cell, its messages and every comm message
    (live frames may be sent from another thread), each stamped with its arrival time."""
    all_msgs = []
    for code in codes:
        msg_id = kc.execute(code)
        msgs = []
        while True:
            msg = kc.get_iopub_msg(timeout=timeout)
            msg["_t"] = time.monotonic()
            if msg["msg_type"] == "comm_msg" or msg["parent_header"].get("msg_id") == msg_id:
                msgs.append(msg)
            if (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                break
        all_msgs.append(msgs)
    return all_msgs


@pytest.fixture(scope="module")
def kernel():
    """One real kernel (ipykernel) for every kernel test here: starting one costs seconds. Each test's code
    imports what it uses and leaves no monitor running, so the tests do not depend on their order."""
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        _run(kc, ["import matplotlib.figure, ipywidgets, threading, time, torch\nimport viewlab"])  # warm imports
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _texts(msgs: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")


def _frames(msgs: list[dict]) -> list[dict]:
    return [m for m in msgs if m["msg_type"] == "comm_msg" and m.get("buffers")]


# The busy cells below run until the frames they wait for were sent, or 30 s pass: never for a fixed time,
# so a slow machine makes them slower, not red. ``keep[0].view(-1)`` is an operator that allocates nothing:
# in cell mode the frames are sent between two operators.
_BUSY_UNTIL = (
    "deadline = time.monotonic() + 30\n"
    "while {condition} and time.monotonic() < deadline:\n"
    "    keep[0].view(-1); time.sleep(0.02)\n"
)


@pytest.mark.kernel
@pytest.mark.parametrize(("frames", "sender"), [("thread", _THREAD_NAME), ("cell", "MainThread")])
def test_in_a_kernel_frames_stream_while_busy_and_the_final_png_stays(kernel, frames, sender):
    """Both frame paths in a real kernel: frames arrive while the cell is busy, from the thread the
    mode promises (recorded by an observer on the image widget, which runs in the sending thread), never
    two within 0.25 s (measured where they are sent), and the final PNG and table are displayed."""
    loop = (
        "import threading, time, torch\nfrom viewlab import MemoryMonitor\n"
        f"mon = MemoryMonitor(device='cpu', frames={frames!r}).start()\n"
        "sent = []\n"
        "def seen(change):\n"
        "    sent.append((threading.current_thread().name, time.perf_counter()))\n"
        "mon._view.image.observe(seen, names='value')\n"
        "keep = [torch.zeros(100_000) for i in range(12)]\n"
        + _BUSY_UNTIL.format(condition="len(sent) < 4")
        + "busy = list(sent)\n"
        "mon.stop()\n"
        "gaps = [b - a for (_, a), (_, b) in zip(busy, busy[1:])]\n"
        "print('frames_from', mon.frames_from, 'senders', sorted({n for n, _ in busy}), 'errors', mon.errors)\n"
        "print('busy frames', len(busy), 'closest', min(gaps, default=None))"
    )
    (msgs,) = _run(kernel, [loop])
    assert "error" not in [m["msg_type"] for m in msgs], [m["content"] for m in msgs if m["msg_type"] == "error"]
    text = _texts(msgs)
    assert f"frames_from {frames} senders [{sender!r}] errors []" in text, text
    busy, closest = text.split("busy frames ")[1].split(" closest ")
    assert int(busy) >= 4, f"live frames sent while the cell ran: {busy}"
    assert float(closest) >= 0.24, f"frames were sent faster than 4 per second: {closest} s apart"
    sent = _frames(msgs)
    assert len(sent) >= 5, f"the first frame and the 4 sent while busy reached the front end: {len(sent)}"
    assert all(f["_t"] < msgs[-1]["_t"] for f in sent), "every frame arrives before the cell is done"
    displays = [m["content"] for m in msgs if m["msg_type"] == "display_data"]
    widget = [d for d in displays if "application/vnd.jupyter.widget-view+json" in d["data"]]
    pngs = [d for d in displays if "image/png" in d["data"]]
    htmls = [d for d in displays if "text/html" in d["data"]]
    assert widget and pngs and htmls
    assert "tensor storages (cpu)" in pngs[0]["metadata"]["image/png"]["alt"]
    assert pngs[0]["data"]["text/plain"].startswith("[figure] Memory over")
    assert widget[0]["data"]["text/plain"].startswith("[live memory monitor: tensor storages (cpu);"), widget[0]["data"]
    assert "4,800,000 B" in htmls[0]["data"]["text/html"]  # 12 x 400,000 bytes still held at stop


@pytest.mark.kernel
@pytest.mark.skipif(sys.platform != "linux", reason="the timer-signal frames are checked on Linux")
def test_in_a_kernel_a_cell_that_only_sleeps_gets_frames_and_the_signal_is_given_back(kernel):
    """frames='cell' needs no operator: a timer signal sends frames from the kernel's main thread while the cell
    only sleeps; afterwards ipykernel's SIGALRM handler and timer are as they were, and no mode is left."""
    code = (
        "import signal, time\nfrom viewlab import MemoryMonitor\n"
        "from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as modes\n"
        "found = (signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL))\n"
        "mon = MemoryMonitor(device='cpu', frames='cell').start()\n"
        "first, deadline = mon.frames, time.monotonic() + 60\n"
        "while mon.frames - first < 2 and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        "slept = mon.frames - first\n"
        "mon.stop()\n"
        "same = (signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)) == found\n"
        "print('slept frames', slept, 'given back', same, 'modes', len(modes()), 'errors', mon.errors)"
    )
    (msgs,) = _run(kernel, [code])
    assert "error" not in [m["msg_type"] for m in msgs], [m["content"] for m in msgs if m["msg_type"] == "error"]
    text = _texts(msgs)
    slept = int(text.split("slept frames ")[1].split()[0])
    assert slept >= 2 and "given back True modes 0 errors []" in text, text
    assert len(_frames(msgs)) >= 3, "the first frame and the two sent while the cell slept reached the front end"


@pytest.mark.kernel
@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("frames", ["thread", "cell"])
def test_in_a_kernel_cuda_monitor_streams_frames(kernel, frames):
    """The CUDA allocator backend, live, in a real kernel, with both frame paths; prints the frame count."""
    loop = (
        "import time, torch\nfrom viewlab import MemoryMonitor\ntorch.zeros(1, device='cuda')\n"
        f"with MemoryMonitor(device='cuda', frames={frames!r}) as mon:\n"
        "    keep = [torch.zeros(2**20, device='cuda') for i in range(12)]\n"
        "    torch.cuda.synchronize()\n"
        + "".join("    " + line + "\n" for line in _BUSY_UNTIL.format(condition="mon.frames < 5").splitlines())
        + "print('cuda frames', mon.frames, 'from', mon.frames_from, 'errors', mon.errors, 'backend', mon.backend)"
    )
    (msgs,) = _run(kernel, [loop])
    assert "error" not in [m["msg_type"] for m in msgs], [m["content"] for m in msgs if m["msg_type"] == "error"]
    text = _texts(msgs)
    print(f"[gpu-check] frames={frames}: {text.strip()}")
    assert f"from {frames} errors [] backend cuda allocator" in text, text
    sent = _frames(msgs)
    assert len(sent) >= 5, f"live frames sent while the CUDA cell ran: {len(sent)}"


@pytest.mark.kernel
def test_in_a_kernel_load_ext_prints_one_line_per_cell(kernel):
    msgs = _run(
        kernel,
        [
            "%load_ext viewlab",
            "import torch\nx = torch.ones(1, 512)",
            "e = x.expand(64, 512)",
            "r = x.repeat(64, 1)",
            "%unload_ext viewlab",
        ],
    )
    text = [_texts(cell) for cell in msgs]
    assert "+2,048 B still held" in text[1]
    assert "+0 B still held, peak +0 B" in text[2]
    assert "+131,072 B still held" in text[3]
    final = [m["content"] for m in msgs[4] if m["msg_type"] == "display_data"]
    assert any("image/png" in d["data"] for d in final) and any("text/html" in d["data"] for d in final)


@pytest.mark.kernel
def test_in_a_kernel_load_ext_with_cell_frames_streams_during_a_busy_cell_and_cleans_up(kernel):
    """The per-cell monitor as Colab gets it (frames='cell'): frames arrive while a later cell is busy (it runs
    until 3 were sent, or 30 s), each cell still gets its line, and after unloading no dispatch mode is left
    on the kernel's thread."""
    load = (
        "from viewlab.monitor import load_ipython_extension, unload_ipython_extension\n"
        "mon = load_ipython_extension(get_ipython(), device='cpu', frames='cell')"
    )
    busy = (
        "import time, torch\nkeep = [torch.zeros(25_000) for i in range(10)]\nfirst = mon.frames\n"
        + _BUSY_UNTIL.format(condition="mon.frames - first < 3")
    )
    after = (
        "unload_ipython_extension(get_ipython())\n"
        "from torch.utils._python_dispatch import _get_current_dispatch_mode_stack\n"
        "print('modes left', len(_get_current_dispatch_mode_stack()), 'frames_from', mon.frames_from)"
    )
    msgs = _run(kernel, [load, busy, after])
    busy_frames = _frames(msgs[1])
    assert len(busy_frames) >= 3, f"frames sent from the cell's thread during the busy cell: {len(busy_frames)}"
    busy_text = _texts(msgs[1])
    assert "+1,000,000 B still held" in busy_text, busy_text
    text = _texts(msgs[2])
    assert "modes left 0 frames_from cell" in text, text


# ---------------------------------------------------------------- CUDA (skipped without a GPU)


@pytest.mark.cuda
@needs_cuda
def test_cuda_monitor_has_reserved_and_never_misses_a_peak():
    with MemoryMonitor(device="cuda", display=False, interval=60.0) as mon:
        big = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
        del big
    assert mon.backend.startswith("cuda allocator")
    assert mon.samples[-1].reserved is not None and mon.samples[-1].reserved >= mon.samples[-1].allocated
    assert mon.samples[-1].peak - mon.samples[0].allocated >= 64 * 2**20


def test_rss_line_is_optional_and_labelled():
    with MemoryMonitor(device="cpu", rss=True, display=False) as mon:
        x = torch.zeros(10)
    assert all(s.rss is not None and s.rss > 0 for s in mon.samples)
    labels = [t.get_text() for t in mon.figure().axes[0].get_legend().get_texts()]
    assert any(label.startswith("process RSS (approx.)") for label in labels)
    assert x.numel() == 10


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


def test_a_plot_of_nothing_allocated_draws_without_warnings():
    """Regression: the first frame (peak 0) set a zero-height y axis; matplotlib warned into the notebook."""
    import warnings

    with MemoryMonitor(device="cpu", display=False) as mon:
        pass
    assert max(s.peak for s in mon.samples) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mon.png()


# ---------------------------------------------------------------- frames from the cell's thread, threads, restarts

signal = pytest.importorskip("signal")
needs_alarm = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX signal.setitimer")


def _cell_monitor(capsys, **kwargs) -> MemoryMonitor:
    """A displayed monitor outside a kernel (its widget's text goes to stdout), frames from this thread."""
    mon = MemoryMonitor(device="cpu", display=True, **kwargs).start()
    capsys.readouterr()
    return mon


@needs_alarm
def test_cell_frames_arrive_during_sleep_and_pure_python_with_no_dispatch_mode(capsys):
    mon = _cell_monitor(capsys, frames="cell")
    try:
        assert _modes() == [mon._source.tracker], "the frames need no mode of their own: only the tracker's"
        first = mon.frames
        deadline = time.monotonic() + 60
        while mon.frames - first < 2 and time.monotonic() < deadline:
            time.sleep(0.05)  # no operator at all
        slept = mon.frames - first
        while mon.frames - first < 4 and time.monotonic() < deadline:
            sum(range(1000))  # pure Python
        assert slept >= 2 and mon.frames - first >= 4, (slept, mon.frames - first, mon.errors)
    finally:
        mon.stop(show=False)
    assert _modes() == [] and mon.errors == []


@needs_alarm
def test_the_signal_timer_chains_to_the_handler_and_timer_it_found_and_restores_them(capsys):
    calls = []

    def previous(signum, frame):
        calls.append(time.monotonic())

    old = signal.signal(signal.SIGALRM, previous)
    signal.setitimer(signal.ITIMER_REAL, 0.3, 0.3)  # someone else's repeating alarm, e.g. a test runner's
    try:
        mon = _cell_monitor(capsys, frames="cell")
        assert signal.getsignal(signal.SIGALRM) is not previous
        deadline = time.monotonic() + 60
        while (len(calls) < 3 or mon.frames < 3) and time.monotonic() < deadline:
            time.sleep(0.05)
        mon.stop(show=False)
        assert len(calls) >= 3 and mon.frames >= 3, "both the old alarm and the frames kept coming"
        assert signal.getsignal(signal.SIGALRM) is previous
        delay, every = signal.getitimer(signal.ITIMER_REAL)
        assert every == pytest.approx(0.3) and 0 < delay <= 0.3 + 1e-3, (delay, every)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@needs_alarm
def test_a_blocking_system_call_is_restarted_not_interrupted_by_the_timer(capsys):
    import ctypes
    import os

    libc = ctypes.CDLL(None, use_errno=True)  # libc's read(2) itself: Python's os.read would retry on EINTR anyway
    mon = _cell_monitor(capsys, frames="cell")
    r, w = os.pipe()
    try:
        writer = threading.Thread(target=lambda: (time.sleep(1.0), os.write(w, b"x")))
        writer.start()
        buf = ctypes.create_string_buffer(1)
        got = libc.read(r, buf, 1)  # several timer signals arrive meanwhile
        writer.join()
        assert got == 1 and buf.raw == b"x", f"read(2) returned {got}, errno {ctypes.get_errno()}"
    finally:
        mon.stop(show=False)
        os.close(r)
        os.close(w)


def test_off_the_main_thread_cell_frames_fall_back_to_a_dispatch_mode(capsys):
    seen = {}

    def run():
        mon = _cell_monitor(capsys, frames="cell")
        seen["modes"] = len(_modes())  # the tracker and the frame hook
        mon.stop(show=False)
        seen["after"] = len(_modes())

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert seen == {"modes": 2, "after": 0}


def _stand_in_cuda_monitor(capsys, frames: str) -> tuple[MemoryMonitor, object]:
    """A monitor on the CUDA backend whose allocator counters are a CPU stand-in (tests/unit/test_cuda_windows.py)."""
    from tests.unit.test_cuda_windows import DEV, StandInAllocator
    from viewlab.memory._cuda import _CudaLedger
    from viewlab.memory.backends import CudaBackend

    allocator = StandInAllocator()
    mon = MemoryMonitor(device="cpu", display=True, frames=frames)
    mon.backend_kind, mon._source = "cuda", CudaBackend(DEV, ledger=_CudaLedger(allocator))
    return mon, allocator


@pytest.mark.parametrize("on_main", [True, False])
def test_on_cuda_the_monitor_follows_no_operators_unless_ops_frames_are_asked_for(capsys, on_main):
    seen = {}

    def run():
        for frames in ("cell", "ops"):
            mon, allocator = _stand_in_cuda_monitor(capsys, frames)
            mon.start()
            allocator.alloc(4096)
            torch.ones(3) + 1  # an operator: only the "ops" hook is called for it
            seen[frames] = (len(_modes()), mon.samples[-1].allocated if mon.mark("m") else None)
            mon.stop(show=False)
            seen[frames + " after"] = len(_modes())

    if on_main:
        run()
    else:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
    assert seen == {"cell": (0, 4096), "cell after": 0, "ops": (1, 4096), "ops after": 0}


def test_stop_from_another_thread_cleans_up_the_starting_thread():
    for how in ("stop", "close"):
        mon = MemoryMonitor(device="cpu", display=False).start()
        assert len(_modes()) == 1
        worker = threading.Thread(target=getattr(mon, how))
        worker.start()
        worker.join()
        _wait_for(lambda: _modes() == [], f"the tracker to leave this thread after {how}() from another thread")
        assert not mon.running


def test_dropping_the_last_reference_on_another_thread_cleans_up_the_starting_thread():
    box = [MemoryMonitor(device="cpu", display=False).start()]
    assert len(_modes()) == 1
    worker = threading.Thread(target=box.clear)  # the monitor's last reference dies there
    worker.start()
    worker.join()
    _wait_for(lambda: _modes() == [], "the dropped monitor's tracker to leave the thread that started it")
    x = torch.ones(1000)
    assert x.numel() == 1000


def test_a_monitor_started_off_the_main_thread_and_stopped_elsewhere_leaves_at_that_threads_next_start():
    go, done, seen = threading.Event(), threading.Event(), {}

    def owner():
        seen["mon"] = MemoryMonitor(device="cpu", display=False).start()
        go.wait(30)
        seen["left"] = len(_modes())  # stopped from the main thread: a closed mode that only passes operators on
        with viewlab.measure(device="cpu") as m:
            torch.zeros(10)
        seen["measured"], seen["after"] = m.peak_bytes, len(_modes())
        done.set()

    worker = threading.Thread(target=owner)
    worker.start()
    _wait_for(lambda: "mon" in seen, "the worker's monitor to start")
    seen["mon"].close()
    go.set()
    worker.join()
    assert seen["left"] == 1 and seen["measured"] == 40 and seen["after"] == 0


def test_a_second_start_says_what_to_do_and_a_rerun_cell_stops_the_monitor_it_left(capsys):
    mon = MemoryMonitor(device="cpu", display=False).start()
    with pytest.raises(RuntimeError, match=r"^mon.start\(\): this MemoryMonitor is already running.*mon.stop\(\)"):
        mon.start()
    kept = []
    for _ in range(2):  # one line run twice, its first monitor still referenced (as IPython's Out would)
        kept.append(MemoryMonitor(device="cpu", display=False).start())
    assert not kept[0].running and kept[1].running
    assert "stopped the MemoryMonitor this line started before" in capsys.readouterr().out
    assert mon.running, "a monitor started by another line keeps running"
    for m in (mon, kept[1]):
        m.stop()
    assert _modes() == []


def test_measure_exit_without_enter_and_enter_twice_name_measure():
    ctx = viewlab.measure(device="cpu")
    with pytest.raises(RuntimeError, match=r"^measure\(\): __exit__ without __enter__"):
        ctx.__exit__(None, None, None)
    with ctx:
        with pytest.raises(RuntimeError, match=r"^measure\(\): this one was entered already"):
            ctx.__enter__()
    assert _modes() == []


def test_the_time_axis_starts_after_the_widgets_warm_up(capsys):
    """The first frame (ipywidgets, matplotlib's first draw: seconds in a fresh kernel) is drawn before t = 0."""
    mon = _cell_monitor(capsys, frames="thread")
    try:
        assert mon._view.frames >= 1 and mon._view.time <= mon._t0, "the warm-up frame came after the start"
    finally:
        mon.stop(show=False)


def test_the_plot_is_800_px_wide_with_legend_text_of_at_least_10_px():
    import io

    from PIL import Image

    from viewlab.monitor import Mark, Sample, plot

    samples = [Sample(0.0, 0, 0), Sample(0.5, 4096, 8192)]
    for cells in ([], [viewlab.monitor.CellRecord("#1", 0.0, 0.5, 4096, 8192)]):
        width, _ = Image.open(io.BytesIO(plot.png(samples, [Mark(0.2, "m", 0)], cells, backend="b"))).size
        legend = plot.figure(samples, cells=cells, backend="b").axes[0].get_legend()
        sizes = [t.get_fontsize() * plot.DPI / 72 for t in [*legend.get_texts(), legend.get_title()]]
        assert width >= 800 and min(sizes) >= 10, (width, sizes)
