"""viewlab.MemoryMonitor: sampling, exact numbers, lifecycle, arguments and pictures (cells, a real kernel, frames
and threads: test_monitor_cells.py, test_monitor_kernel.py, test_monitor_threads.py)."""

from __future__ import annotations

import gc
import itertools
import threading
import weakref

import pytest
import torch

import viewlab
from tests.unit.monitor_support import _modes, _monitor_threads, _wait_for
from viewlab import MemoryMonitor
from viewlab.monitor import MIN_INTERVAL, fmt_bytes

pytestmark = pytest.mark.colab
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA; torch.cuda.is_available() is False")


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


def test_a_dropped_running_monitor_removes_its_dispatch_mode():
    """Re-running `mon = MemoryMonitor().start()` drops the old monitor while it runs: its mode must go."""
    mon = MemoryMonitor(device="cpu", display=False).start()
    assert len(_modes()) == 1
    thread = mon._thread
    mon = MemoryMonitor(device="cpu", display=False).start()  # the first one has no reference left
    with viewlab.measure(device="cpu"):  # dropped on another thread (its sampler's), it is swept at this entry
        pass
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
        ({"frames": "ops"}, ValueError, r"`frames` must be one of 'auto', 'thread', 'cell'; got str 'ops'"),
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


def test_measure_exit_without_enter_and_enter_twice_name_measure():
    ctx = viewlab.measure(device="cpu")
    with pytest.raises(RuntimeError, match=r"^measure\(\): __exit__ without __enter__"):
        ctx.__exit__(None, None, None)
    with ctx:
        with pytest.raises(RuntimeError, match=r"^measure\(\): this one was entered already"):
            ctx.__enter__()
    assert _modes() == []


def test_the_time_axis_starts_after_the_widgets_warm_up(capsys):
    """The widget's warm-up (ipywidgets, matplotlib's first draw: seconds in a fresh kernel) happens before t = 0;
    that first draw, of no sample, is not sent (tests/unit/test_monitor_threads.py: the first frame)."""
    mon = MemoryMonitor(device="cpu", display=True, frames="thread", interval=60).start()
    capsys.readouterr()
    try:
        assert mon._view.warmed is not None and mon._view.warmed <= mon._t0, "the warm-up came after the start"
        assert mon._view.frames == 0 and mon._view.image.value == b""
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


# ---------------------------------------------------------------- where the labels of marks and cells go


def _notebook_06_plots():
    """The two monitored runs of notebook 06, as plain records: expand vs repeat (5 marks, "del copies" where the
    dashed peak line goes on at 17 MB) and one training step ("zero_grad" at the very end of the time axis)."""
    from viewlab.monitor import CellRecord, Mark, Sample, plot

    mb = 1_000_000
    steps = [
        (0.0, 0, 0),
        (0.01, mb, mb),
        (0.81, 9 * mb, 9 * mb),
        (1.21, 17 * mb, 17 * mb),
        (1.62, mb, 17 * mb),
        (2.02, mb, 17 * mb),
    ]
    names = [(0.01, "base"), (0.41, "expand"), (0.81, "repeat"), (1.21, "contiguous"), (1.62, "del copies")]
    adam = [
        (0.0, 0, 0),
        (0.01, 130_000, 250_000),
        (0.32, 520_000, 650_000),
        (0.63, 1_600_000, 2_600_000),
        (0.93, 1_050_000, 2_600_000),
    ]
    phases = [(0.01, "forward"), (0.32, "backward"), (0.63, "optimizer step"), (0.93, "zero_grad")]
    cells = [
        CellRecord("[3] x = torch.ones(1000)", 0.0, 0.5, 4000, 8000),
        CellRecord("[4] y = x * 2", 0.5, 0.93, 4000, 4000),
    ]
    runs = [(steps, names, []), (adam, phases, []), (adam, phases, cells)]
    for samples, marks, cell_records in runs:
        samples = [Sample(*s) for s in samples]
        yield plot.figure(
            samples, [Mark(t, label, 0) for t, label in marks], cell_records, backend="tensor storages (cpu)"
        )


def test_mark_labels_are_whole_inside_the_axes_and_cross_no_line_nor_each_other():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for fig in _notebook_06_plots():
        renderer = FigureCanvasAgg(fig).get_renderer()
        ax = fig.axes[0]
        frame = ax.get_window_extent(renderer)
        boxes = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
        assert "zero_grad" in boxes or "del copies" in boxes
        highest = max(
            max(line.get_ydata())
            for line in ax.get_lines()
            if line.get_linestyle() != "None" and len(line.get_ydata()) > 1
        )
        top_of_lines = ax.transData.transform((0, highest))[1]  # the peak line is the highest line drawn
        for text, box in boxes.items():
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1, (text, box, frame)  # not cut
            assert box.y0 > top_of_lines, (text, box.y0, top_of_lines)  # above the dashed peak line
        for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
            assert not box_a.overlaps(box_b), (a, b)
        # each label starts (or, at the right edge, ends) beside its own line
        for line in ax.get_lines():
            if (
                line.get_linestyle() != "None"
                and len(line.get_xdata()) == 2
                and line.get_xdata()[0] == line.get_xdata()[1]
            ):
                x = ax.transData.transform((line.get_xdata()[0], 0))[0]
                assert any(abs(box.x0 - x) < 8 or abs(box.x1 - x) < 8 for box in boxes.values()), x
