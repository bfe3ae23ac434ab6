"""viewlab.MemoryMonitor's live frames (drawn on its sampling thread, sent from there or from the cell's thread at an
operator: viewlab.monitor.frames) and its modes when stop, close or the last reference happen on another thread."""

from __future__ import annotations

import gc
import signal
import threading
import time

import pytest
import torch

import viewlab
from tests.unit.monitor_support import _line_pixels, _modes, _wait_for
from viewlab import MemoryMonitor
from viewlab.monitor import _THREAD_NAME, widget
from viewlab.monitor import frames as frames_module
from viewlab.monitor.frames import FrameScheduler, _HandOff
from viewlab.monitor.widget import MIN_INTERVAL, LiveView

pytestmark = pytest.mark.colab


def _displayed(capsys, **kwargs) -> MemoryMonitor:
    """A displayed monitor outside a kernel (its widget's text goes to stdout), started on this thread."""
    mon = MemoryMonitor(device="cpu", display=True, **kwargs).start()
    capsys.readouterr()
    return mon


def _watch(mon: MemoryMonitor) -> tuple[list[str], list[str]]:
    """Record which thread draws each frame and which sends it (an observer on the real image widget)."""
    drawn, sent, draw = [], [], mon.png

    def drawing() -> bytes:
        drawn.append(threading.current_thread().name)
        return draw()

    mon.png = drawing  # the real drawing, recorded (this thread's monitor, held by the test)
    mon._view.image.observe(lambda change: sent.append(threading.current_thread().name), names="value")
    return drawn, sent


def _alarm() -> tuple:
    return (
        (signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)) if hasattr(signal, "SIGALRM") else ()
    )


class _Clock:
    """Seconds that pass only when told: ``perf_counter`` reads them, ``sleep`` adds to them (no real waiting)."""

    def __init__(self) -> None:
        self.now = 100.0  # a clock far from 0: the view's "last frame at 0.0" is long ago

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    """The frame code's clock, replaced by one the test moves: its rate limits become exact counts."""
    fake = _Clock()
    monkeypatch.setattr(widget, "time", fake)
    monkeypatch.setattr(frames_module, "time", fake)
    return fake


def test_the_view_never_sends_two_frames_within_min_interval(clock, capsys):
    """At most 4 frames a second, counted on a clock that moves only when the view waits: ten frames put back to
    back are sent exactly MIN_INTERVAL apart, and ``wait=False`` skips a frame that comes early."""
    view = LiveView(MemoryMonitor(device="cpu", display=False))
    capsys.readouterr()
    sent: list[float] = []
    view.image.observe(lambda change: sent.append(clock.now), names="value")
    for i in range(10):
        assert view.put(b"frame %d" % i)
    assert sent == [100.0 + k * MIN_INTERVAL for k in range(10)] and view.frames == 10
    clock.now += MIN_INTERVAL / 2
    assert not view.put(b"early", wait=False) and view.frames == 10 and clock.now == sent[-1] + MIN_INTERVAL / 2
    clock.now += MIN_INTERVAL / 2
    assert view.put(b"on time", wait=False) and view.frames == 11


@pytest.mark.parametrize(("draw_s", "gap"), [(0.0, MIN_INTERVAL), (0.5, 1.5)])
def test_the_sampling_thread_draws_a_frame_per_gap_and_backs_off_when_drawing_is_slow(clock, capsys, draw_s, gap):
    """Ticks every 1/8 s for 4 s on the test's clock: a frame every MIN_INTERVAL (16 of them) when drawing is free;
    when a frame takes 0.5 s to draw, the next is due 1 s after it was sent (3x the drawing time, capped at 1 s),
    so frames are 1.5 s apart: drawing never takes more than a third of the sampling thread's time."""
    mon = MemoryMonitor(device="cpu", display=False)
    view = LiveView(mon)
    capsys.readouterr()
    draw, sent = mon.png, []  # when each frame was sent (the view's own stamp)

    def drawing() -> bytes:  # the real drawing, taking draw_s on the test's clock
        clock.now += draw_s
        return draw()

    mon.png = drawing
    scheduler = FrameScheduler(view, "thread", mon)
    while clock.now < 104.0:
        clock.now += 0.125
        if scheduler.tick():
            sent.append(view.time)
    first = 100.125 + draw_s
    assert sent == [first + k * gap for k in range(len(sent))] and view.frames == len(sent)
    assert len(sent) == (16 if draw_s == 0 else 3)  # sent within the 4 s


def test_until_two_samples_no_frame_is_sent_the_image_is_hidden_and_the_status_says_it_waits(capsys):
    """One sample draws no line (empty axes): the widget sends nothing before the second sample. With a sample a
    minute, the wait lasts until stop, whose frame (the start and the stop sample) shows the image and the line."""
    mon = MemoryMonitor(device="cpu", display=True, frames="thread", interval=60).start()
    capsys.readouterr()
    view = mon._view
    try:
        assert len(mon.samples) == 1 and mon.frames == 0 and view.image.value == b""
        assert view.image.layout.display == "none"
        assert view.status.value == "running - tensor storages (cpu) - waiting for the first samples (one every 60 s)"
        keep = torch.zeros(100_000)
    finally:
        mon.stop(show=False)
    assert len(mon.samples) == 2 and mon.frames == 1 and keep.numel() == 100_000
    assert view.image.layout.display is None and view.status.value == "stopped - tensor storages (cpu)"
    assert _line_pixels(view.image.value) > 0, "the stop frame draws the allocated line"
    mon.reset()  # stopped: no sample, nothing to draw; the image hides again rather than show empty axes
    assert mon.samples == [] and mon.frames == 1 and view.image.layout.display == "none"
    assert view.status.value == "stopped - tensor storages (cpu) - no samples"
    mon.start()  # samples are coming again: the status says so until the second one
    try:
        assert view.status.value.endswith("- waiting for the first samples (one every 60 s)") and mon.frames == 1
    finally:
        mon.stop(show=False)
    assert mon.frames == 2 and view.image.layout.display is None


@pytest.mark.parametrize("frames", ["thread", "cell"])
def test_the_first_live_frame_sent_draws_the_line_of_the_first_samples(capsys, frames):
    """The first frame the front end gets (the image's first value) is drawn from two samples or more: it shows the
    allocated line, never the empty axes of a monitor that has no sample yet; with it the image shows and the
    status line stops saying it waits."""
    mon = _displayed(capsys, frames=frames)
    sent = []  # (old value, new value, samples when sent) of each frame, recorded in the sending thread
    view = mon._view
    view.image.observe(lambda change: sent.append((change["old"], change["new"], len(mon.samples))), names="value")
    try:
        keep = torch.zeros(100_000)
        deadline = time.monotonic() + 60
        while not sent and time.monotonic() < deadline:
            keep.view(-1)  # an operator: where the cell's thread sends a ready frame (frames="cell")
            time.sleep(0.01)
        _wait_for(lambda: view.frames >= 1, "the first live frame to be counted", seconds=10)
        shown = view.image.layout.display, view.status.value  # put() shows the image right after the value
    finally:
        mon.stop(show=False)
    old, png, samples = sent[0]
    assert old == b"" and samples >= 2, "a frame was sent before the first samples"
    assert _line_pixels(png) > 0, "the first frame draws no allocated line"
    assert shown == (None, "running - tensor storages (cpu)")
    assert mon.errors == []


def test_cell_frames_are_drawn_on_the_sampling_thread_and_sent_by_the_cell_between_two_operators(capsys):
    before = _alarm()
    mon = _displayed(capsys, frames="cell")
    try:
        assert [type(m) for m in _modes()] == [type(mon._source.tracker), _HandOff]
        drawn, sent = _watch(mon)
        keep = torch.zeros(10)
        deadline = time.monotonic() + 60
        while len(sent) < 3 and time.monotonic() < deadline:
            keep.view(-1)  # an operator: where the cell's thread sends a frame that is ready
            time.sleep(0.01)
        assert _alarm() == before, "no signal handler and no interval timer are set"
        drawn, sent = list(drawn), list(sent)  # while busy (stop() draws its own last frame here)
    finally:
        mon.stop(show=False)
    assert len(sent) >= 3 and set(sent) == {"MainThread"}, (sent, mon.errors)
    assert set(drawn) == {_THREAD_NAME}, drawn
    assert _modes() == [] and mon.errors == []


def test_a_cell_that_runs_no_operator_sends_its_cell_frame_when_it_ends(capsys):
    mon = _displayed(capsys, frames="cell")
    try:
        first = mon.frames
        _wait_for(lambda: mon._frames.ready is not None, "the sampling thread to draw a frame for the cell")
        time.sleep(0.3)  # no operator: nothing of viewlab runs on this thread
        assert mon.frames == first
    finally:
        mon.stop(show=False)
    assert mon.frames == first + 2 and mon.errors == []  # the ready frame at the cell's end, then the stop frame
    assert _modes() == []


def test_thread_frames_arrive_while_the_cell_sleeps_with_only_the_trackers_mode(capsys):
    mon = _displayed(capsys, frames="thread")
    try:
        assert _modes() == [mon._source.tracker], "the frames need no mode of their own: only the tracker's"
        drawn, sent = _watch(mon)
        _wait_for(lambda: len(sent) >= 2, "two frames sent while this thread only sleeps", seconds=60)
        drawn, sent = list(drawn), list(sent)  # while it slept (stop() draws its own last frame here)
    finally:
        mon.stop(show=False)
    assert set(drawn) == set(sent) == {_THREAD_NAME}, (drawn, sent)
    assert _modes() == [] and mon.errors == []


@pytest.mark.parametrize("frames", ["thread", "cell"])
def test_a_dropped_displayed_monitor_stops_its_thread_and_leaves_its_modes(capsys, frames):
    """Neither the widget (ipywidgets keeps every widget) nor the hand-off mode keeps a dropped monitor alive."""
    mon = _displayed(capsys, frames=frames)
    thread = mon._thread
    del mon
    gc.collect()
    with viewlab.measure(device="cpu"):  # dropped on the sampling thread, its modes are swept at this entry
        pass
    thread.join(timeout=30)
    assert not thread.is_alive() and _modes() == []


def test_off_the_main_thread_cell_frames_are_handed_to_that_thread(capsys):
    seen = {}

    def run():
        mon = _displayed(capsys, frames="cell")
        seen["modes"] = len(_modes())  # the tracker and the hand-off
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
def test_on_cuda_only_cell_frames_follow_operators(capsys, on_main):
    """The CUDA backend counts no operators; the cell frames' hand-off is then the only mode (one per operator)."""
    seen = {}

    def run():
        for frames in ("thread", "cell"):
            mon, allocator = _stand_in_cuda_monitor(capsys, frames)
            mon.start()
            allocator.alloc(4096)
            torch.ones(3) + 1
            seen[frames] = (len(_modes()), mon.mark("m").allocated)
            mon.stop(show=False)
            seen[frames + " after"] = len(_modes())

    if on_main:
        run()
    else:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
    assert seen == {"thread": (0, 4096), "thread after": 0, "cell": (1, 4096), "cell after": 0}


@pytest.mark.parametrize("how", ["stop", "close"])
def test_stop_from_another_thread_leaves_an_idle_tracker_swept_at_this_threads_next_entry(how):
    mon = MemoryMonitor(device="cpu", display=False).start()
    tracker = mon._source.tracker
    worker = threading.Thread(target=getattr(mon, how))
    worker.start()
    worker.join()
    assert not mon.running and _modes() == [tracker] and tracker.idle, "left here, passing operators on"
    with viewlab.measure(device="cpu") as m:  # this thread's next viewlab entry sweeps it
        x = torch.zeros(10)
        assert len(_modes()) == 1
    assert _modes() == [] and m.allocated_bytes == 40 and x.numel() == 10


def test_dropping_the_last_reference_on_another_thread_leaves_it_for_this_threads_next_entry():
    box = [MemoryMonitor(device="cpu", display=False).start()]
    assert len(_modes()) == 1
    worker = threading.Thread(target=box.clear)  # the monitor's last reference dies there
    worker.start()
    worker.join()
    assert len(_modes()) == 1 and _modes()[0].idle
    with viewlab.measure(device="cpu"):
        pass
    assert _modes() == []


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
