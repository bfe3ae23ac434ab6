"""A live memory plot for notebooks: ``with viewlab.MemoryMonitor(): ...`` or ``%load_ext viewlab`` (:mod:`.extension`).

A background thread samples a backend of :mod:`viewlab.memory.backends` at most 4 times a second, keeping numbers,
never a tensor. In a kernel the same thread draws live frames into a widget (:mod:`.frames`, :mod:`.widget`); on stop
the last frame is displayed as a PNG with alt text and an HTML summary (:mod:`.plot`), which stay in the saved
notebook. In a script: read ``mon.samples``.

>>> with MemoryMonitor(device="cpu", display=False) as mon:
...     a = torch.zeros(1000)
...     _ = mon.mark("a made")
...     b = a.repeat(3)
>>> mon.samples[-1].allocated, mon.samples[-1].peak, mon.backend  # 4,000 + 12,000 bytes
(16000, 16000, 'tensor storages (cpu)')
>>> [(m.label, m.allocated) for m in mon.marks]
[('a made', 4000)]
"""

from __future__ import annotations

import math
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from .._checks import entry, problem, require_bool, require_choice, require_str, type_error, value_error
from .._format import fmt_bytes
from .._learner import learner_line
from ..draw import PNGFigure
from ..ipython import in_kernel, on_colab
from ..memory import resolve_device
from ..memory.backends import Backend, label_for, open_backend, rss_bytes
from . import plot
from .extension import cell_monitor, load_ipython_extension, unload_ipython_extension  # noqa: F401 - reachable here too
from .frames import FrameScheduler
from .widget import MIN_INTERVAL, LiveView

__all__ = ["MemoryMonitor", "Sample", "Mark", "CellRecord", "fmt_bytes", "MIN_INTERVAL"]
MAX_INTERVAL = 60.0  # seconds: a monitor that samples less often than this shows nothing live
_FRAME_SOURCES = ("auto", *FrameScheduler.SOURCES)
_THREAD_NAME = "viewlab-memory-monitor"
_RUNNING: weakref.WeakSet[MemoryMonitor] = weakref.WeakSet()  # started, each with its line and execution


@dataclass(frozen=True)
class Sample:
    """One reading: seconds since start, then bytes (``reserved``/``rss`` are None when not measured)."""

    t: float
    allocated: int
    peak: int
    reserved: int | None = None
    rss: int | None = None


@dataclass(frozen=True)
class Mark:
    """A label put on the plot with :meth:`MemoryMonitor.mark` (``allocated`` read at that moment)."""

    t: float
    label: str
    allocated: int


@dataclass(frozen=True)
class CellRecord:
    """One cell under ``%load_ext viewlab``: ``allocated_bytes`` it still holds at its end, ``peak_bytes`` its peak."""

    label: str
    start: float
    end: float
    allocated_bytes: int
    peak_bytes: int


def _sampler(ref: weakref.ReferenceType[MemoryMonitor], stop: threading.Event, interval: float) -> None:
    """Thread body: a sample, then (displayed) a live frame when one is due (:mod:`.frames`). Holds only a weak
    reference between two samples, so a forgotten monitor does not keep it alive."""
    while not stop.wait(interval) and (mon := ref()) is not None:
        try:
            mon._take_sample()
            if mon._frames is not None and not stop.is_set():
                mon._frames.tick()
        except Exception as exc:  # noqa: BLE001 - never let the thread die silently
            mon.errors.append(f"{type(exc).__name__}: {exc}")
        del mon


def _cell_run() -> object:
    """Which IPython execution runs now (its request's id in a kernel, else the execution count); None outside
    IPython. A monitor started by the same line in a *later* execution is a cell run again."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return None
    header = getattr(shell, "parent_header", None)
    msg_id = header.get("header", {}).get("msg_id") if isinstance(header, dict) else None
    return msg_id or getattr(shell, "execution_count", None)


class MemoryMonitor:
    """Sample memory in the background and (in a notebook) plot it live: ``with MemoryMonitor() as mon: ...`` or
    ``mon.start()`` ... ``mon.stop()``; ``mon.mark("label")`` annotates the plot. The widget's buttons act between
    cells (while a cell runs, the kernel reads no widget events).

    ``device``: the device to watch, as for :func:`viewlab.measure` (None: CUDA if available, else CPU); ``interval``:
    seconds between samples, at least 0.25 (at most 4 frames a second). ``backend``: ``"storages"`` (exact bytes of
    tensor storages made since start by the thread that started the monitor, on any device), ``"cuda"`` (the caching
    allocator's counters: allocated, reserved, peak), ``"rss"`` (process resident memory, approximate) or ``"auto"``
    (``"cuda"`` if available, else storages); ``rss``: also record the process RSS (approximate) as an extra line.
    ``display``: None shows the live widget only inside a Jupyter kernel, False never; ``title``: the plot's.
    ``frames``: who sends the live frames, which the sampling thread always draws (:mod:`.frames`): ``"thread"``
    (the sampling thread), ``"cell"`` (the cell's thread, at its next tensor operator or at the cell's end, as Colab
    needs) or ``"auto"`` (``"cell"`` on Colab, else ``"thread"``); ``mon.frames_from`` says which, ``mon.frames``
    counts the frames sent. ``start()``, ``stop()`` and ``close()`` may be called from several threads at once (one
    start wins, the others are told it runs); stop/close from another thread, or dropping the last reference there,
    leaves what the monitor followed on the thread that started it to be swept off that thread at its next viewlab
    entry or after the cell (until then it only passes operators on). A monitor started by the same line of a cell
    run again (a later execution of it) stops the one that run left running; in a loop, a helper function, another
    thread or a script, monitors started by one line run side by side.
    """

    @entry("MemoryMonitor")
    def __init__(
        self, device: Any = None, interval: float = MIN_INTERVAL, backend: str = "auto", rss: bool = False,
        display: bool | None = None, title: str | None = None, frames: str = "auto",
    ) -> None:  # fmt: skip
        require_choice(backend, "backend", ("auto", "storages", "cuda", "rss"))
        if not isinstance(frames, str) or frames not in _FRAME_SOURCES:
            why = "'cell' sends live frames from the cell's own thread, as Colab needs."
            raise value_error("frames", f"one of {', '.join(map(repr, _FRAME_SOURCES))}", frames, why)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise type_error("interval", "seconds as a number", interval)
        if not math.isfinite(interval) or not MIN_INTERVAL <= interval <= MAX_INTERVAL:
            why = "The monitor samples at most 4 times a second and at least once a minute."
            raise value_error("interval", f"{MIN_INTERVAL} <= interval <= {MAX_INTERVAL} seconds", interval, why)
        self.title = require_str(title, "title", allow_none=True)
        if display is not None and not isinstance(display, bool):
            raise type_error("display", "None, True or False", display)
        self.rss = require_bool(rss, "rss")
        self.device = resolve_device(device) if backend != "rss" else torch.device("cpu")
        if backend == "auto":
            backend = "cuda" if self.device.type == "cuda" else "storages"
        if backend == "cuda" and self.device.type != "cuda":
            fix = "pass device='cuda' or use backend='storages'."
            raise problem(ValueError, f"backend='cuda' needs a CUDA device, got device={str(self.device)!r}; {fix}")
        self.backend_kind, self.interval = backend, float(interval)
        self.display = in_kernel() if display is None else display
        self.frames_from = ("cell" if on_colab() else "thread") if frames == "auto" else frames
        self.samples: list[Sample] = []
        self.marks: list[Mark] = []
        self.cells: list[CellRecord] = []
        self.errors: list[str] = []  # what went wrong in the sampling thread or a frame (never raised into the cell)
        self._source: Backend | None = None
        # what is measured, e.g. "tensor storages (cpu)" (also the legend's title), and the name of its line
        self.backend, self._line = label_for(backend, self.device), "allocated"
        self._lock = threading.RLock()  # the samples and the backend (the sampling thread takes it)
        self._life = threading.RLock()  # start/stop/close from several threads: one at a time
        self._thread: threading.Thread | None = None
        self._stop_event: threading.Event | None = None
        self._t0 = self._offset = 0.0  # _offset: time already recorded before a restart
        self._view: LiveView | None = None
        self._frames: FrameScheduler | None = None  # who draws and sends live frames (displayed monitors)
        self._started_in: tuple[str | None, object] = (None, None)  # the line and IPython execution that started it
        self._cell_open: tuple[str, float, int] | None = None  # label, start, allocated at start
        self._cell_mode, self._cell_number = False, 0  # cell mode: %load_ext viewlab (ops per cell, a line per cell)

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def frames(self) -> int:
        return self._view.frames if self._view is not None else 0

    def _now(self) -> float:
        return self._offset + (time.perf_counter() - self._t0)

    def _take_sample(self) -> Sample:
        with self._lock:
            if self._source is None:
                raise RuntimeError("monitor is not running")
            r = self._source.read()
            sample = Sample(self._now(), r.allocated, r.peak, r.reserved, rss_bytes() if self.rss else None)
            self.samples.append(sample)
            if len(self.samples) > 20_000:  # keep long always-on sessions small: drop every other sample
                self.samples = self.samples[::2]
            return sample

    @entry("mon.start")
    def start(self) -> MemoryMonitor:
        """Start sampling (and, in a notebook, show the live widget). Starting twice is an error.

        >>> mon = MemoryMonitor(device="cpu", display=False).start()
        >>> mon.running, mon.stop().running
        (True, False)
        """
        with self._life:
            if self._thread is not None:
                fix = "call mon.stop() first, or write `with MemoryMonitor() as mon:` so each run stops its own."
                raise problem(RuntimeError, f"this MemoryMonitor is already running (a cell run twice?): {fix}")
            where, run = learner_line(), _cell_run()
            self._start()  # first: a start that fails stops nothing else
            self._started_in = (where, run)
            for old in [] if run is None or self._cell_mode else list(_RUNNING):
                if old is not self and old._started_in[0] == where and old._started_in[1] not in (None, run):
                    old.stop(show=False)  # the same line of a cell, a later execution: the cell was run again
                    said = f"stopped the MemoryMonitor this line started before ({old.backend})"
                    print(f"[viewlab] {said}; one runs at a time.")
            _RUNNING.add(self)
        return self

    def _start(self) -> None:
        fresh = self._source is None
        try:
            with self._lock:
                if fresh:
                    self._source = open_backend(self.backend_kind, self.device, warm=True)
                    self.backend, self._line = self._source.label, self._source.line
                if not self._cell_mode:  # in cell mode, each cell enters (pre_run_cell)
                    self._source.enter_thread()  # type: ignore[union-attr]
            if self.display:  # first: its warm-up (ipywidgets, matplotlib's first draw) is not on the time axis; a
                # fresh monitor has no sample yet, so the widget waits for two before its first frame (.widget)
                self._show_widget()
            with self._lock:
                self._t0, self._stop_event = time.perf_counter(), threading.Event()
                self._take_sample()
                args = (weakref.ref(self), self._stop_event, self.interval)
                self._thread = threading.Thread(target=_sampler, args=args, name=_THREAD_NAME, daemon=True)
                self._thread.start()
            if self._frames is not None and not self._cell_mode:
                self._frames.enter_cell()
        except BaseException:  # a failed start leaves no thread, mode or backend behind
            self._end_thread()
            if self._source is not None and not self._cell_mode:
                self._source.exit_thread()  # a no-op where it was not entered
            if fresh and self._source is not None:
                self._source.close()
                self._source = None
            raise

    def _end_thread(self) -> None:
        """Stop the sampling thread (and wait for it, unless it is this one) and stop sending frames from the cell."""
        if self._stop_event is not None:
            self._stop_event.set()
        if self._thread is not None and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self._thread = self._stop_event = None
        self._exit_hook()

    def _show_widget(self) -> None:
        if self._view is None:
            self._view = LiveView(self)
            self._frames = FrameScheduler(self._view, self.frames_from, self)
        self._view.show(f"running - {self.backend}")

    def _exit_hook(self) -> None:
        frames = getattr(self, "_frames", None)
        if frames is not None:
            frames.exit_cell()

    def stop(self, show: bool | None = None) -> MemoryMonitor:
        """Stop, take a last sample, show the final PNG and summary (in a notebook; not with ``show=False``)."""
        with self._life:
            if self._thread is None or self._stop_event is None:
                return self
            self._end_thread()
            with self._lock:
                self._take_sample()
                self._offset = self._now()
                if self._source is not None and not self._cell_mode:
                    self._source.exit_thread()
        _RUNNING.discard(self)
        final = show if show is not None else self.display
        if self._view is not None:  # the static PNG below replaces the live image
            self._view.show(f"stopped - {self.backend}", live=not final, sampling=False)
        if final:
            from IPython.display import HTML, display

            display(PNGFigure(self.png(), alt=self.alt_text()), HTML(self.summary_html()))
        return self

    def reset(self) -> MemoryMonitor:
        """Forget samples, marks and cells, and restart the peak from the current value."""
        with self._lock:
            for records in (self.samples, self.marks, self.cells):
                records.clear()
            self._cell_number, self._offset, self._t0 = 0, 0.0, time.perf_counter()
            if self._source is not None:
                self._source.reset_peak()
                if self.running:
                    self._take_sample()
        if self._view is not None:
            self._view.send()
        return self

    def close(self) -> None:
        """Stop, and release the backend (after this, start() begins a fresh measurement)."""
        with self._life:
            self.stop(show=False)
            with self._lock:
                if self._source is not None:
                    self._source.close()
                    self._source = None

    @entry("mon.mark")
    def mark(self, label: str) -> Mark:
        """Put ``label`` on the plot at this moment (and record the bytes allocated right now)."""
        if not isinstance(label, str) or not label.strip():
            error = type_error if not isinstance(label, str) else value_error
            raise error("label", "a short non-empty string", label, "For example mon.mark('after repeat').")
        if self._source is None or not self.running:
            raise problem(RuntimeError, "works while the monitor runs; call mon.start() (or use `with`) first.")
        with self._lock:
            sample = self._take_sample()  # so the plot's lines step exactly at the mark
            self.marks.append(mark := Mark(sample.t, label.strip(), sample.allocated))
        return mark

    __enter__ = start

    def __exit__(self, *exc: object) -> None:
        # Also on exceptions and KeyboardInterrupt: the final plot shows memory just before the failure (an OOM,
        # say), but a failure to draw it must never hide the original exception.
        try:
            self.stop()
        except Exception:  # noqa: BLE001
            if exc[0] is None:
                raise
        finally:
            self.close()

    def __del__(self) -> None:
        # A monitor dropped while running (re-running `mon = MemoryMonitor().start()`) must not leave its modes behind
        # (every later operator would stay slow): on the thread that started it they are removed now, from another
        # thread they are left for that thread to sweep (viewlab._dispatch.leave).
        try:
            if self.__dict__.get("_stop_event") is not None:
                self._stop_event.set()
            self._exit_hook()
            if self.__dict__.get("_source") is not None:
                self._source.close()
        except:  # noqa: E722 - never raise from a finaliser; at interpreter exit even `Exception` may be gone
            pass

    def pre_run_cell(self, info: Any = None) -> None:
        """IPython ``pre_run_cell`` hook: open a cell record (and track ops while the cell runs)."""
        if not self.running or self._cell_open is not None:
            return
        self._cell_number += 1  # #1, #2, ...: not IPython's execution count, which nbval, say, does not advance
        with self._lock:
            if self._cell_mode:
                self._source.enter_thread()  # the storage backend sees this cell's operators
                if self._frames is not None:
                    self._frames.enter_cell()
            self._source.begin_window()
            self._cell_open = (f"#{self._cell_number}", self._now(), self._source.read().allocated)
            self._take_sample()

    def post_run_cell(self, result: Any = None) -> None:
        """IPython ``post_run_cell`` hook: close the cell record and print one line about it."""
        if self._cell_open is None or self._source is None:  # none open, or the monitor closed during the cell
            self._cell_open = None
            return
        with self._lock:
            label, start, allocated0 = self._cell_open
            sample = self._take_sample() if self.running else self.samples[-1]
            held, peak = sample.allocated - allocated0, max(0, self._source.window_peak() - allocated0)
            if self._cell_mode:
                self._exit_hook()
                self._source.exit_thread()
            self.cells.append(CellRecord(label, start, sample.t, held, peak))
            self._cell_open = None
        if self._cell_mode:
            print(f"[viewlab] cell {label}: {held:+,} B still held, peak +{peak:,} B ({self.backend})")

    def _draw(self, draw: Any, styled: bool = True) -> Any:
        """``draw`` (a function of :mod:`.plot`) of a snapshot of the data, taken under the lock."""
        with self._lock:
            data = list(self.samples), list(self.marks), list(self.cells)
        if not styled:
            return draw(*data, backend=self.backend)
        style = {"line": self._line, "peak_line": self.backend_kind != "rss", "running": self.running}
        return draw(*data, backend=self.backend, title=self.title, **style)

    def figure(self) -> Any:
        """The current plot as a matplotlib ``Figure`` (:func:`.plot.figure`)."""
        return self._draw(plot.figure)

    def png(self) -> bytes:
        """The current plot as PNG bytes."""
        return self._draw(plot.png)

    def alt_text(self) -> str:
        """A sentence describing the plot for screen readers (used as the PNG's alt text)."""
        return self._draw(plot.alt_text, styled=False)

    def summary_html(self) -> str:
        """An HTML table of the result: backend, duration, final and peak bytes, marks, cells."""
        return self._draw(plot.summary_html, styled=False)
