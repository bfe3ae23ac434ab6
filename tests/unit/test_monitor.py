"""viewlab.MemoryMonitor: sampling thread, exact numbers, cell mode, no leaks, and a real kernel."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest
import torch

import viewlab
from tests.conftest import ROOT
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
        ({"frames": "widget"}, ValueError, r"`frames` must be one of 'auto', 'thread', 'cell'; got str 'widget'"),
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


def test_overhead_benchmark_runs_and_writes_all_conditions(tmp_path):
    """Smoke test of benchmarks/monitor_overhead.py on a tiny loop: the file it writes, not its timings."""
    import importlib.util
    import json

    path = ROOT / "benchmarks" / "monitor_overhead.py"
    spec = importlib.util.spec_from_file_location("monitor_overhead", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "overhead.json"
    module.main(["--ops", "200", "--repeats", "1", "--device", "cpu", "--out", str(out)])
    data = json.loads(out.read_text())
    assert set(data["ratio_to_off"]) == {"off", "sampling", "per-op", "per-op+log"}
    assert data["ratio_to_off"]["off"] == 1.0 and data["ops"] == 200
    assert not _monitor_threads()


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
