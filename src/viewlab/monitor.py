"""A live memory plot for notebooks: ``with viewlab.MemoryMonitor(): ...`` or ``%load_ext viewlab``.

A background thread samples a memory backend (see :mod:`viewlab.memory`) at most 4 times a second.
In a Jupyter kernel it draws each sample as a matplotlib frame (Agg, no pyplot) into a core
``ipywidgets.Image`` with start / stop / reset buttons -- no ipympl, so it also works on Colab. On
stop it displays the last frame as a plain PNG (with alt text) and an HTML summary, which stay in
the saved notebook and the static book. In a script it only samples: read ``mon.samples``.

Backends: ``"storages"`` (exact bytes of tensor storages made since start, any device; needs a
``TorchDispatchMode`` on the thread that started the monitor), ``"cuda"`` (the caching allocator's
counters: allocated, reserved, peak), ``"rss"`` (process resident memory, approximate, sampling
only). ``"auto"`` picks ``"cuda"`` when CUDA is available, else ``"storages"``.

Where live frames come from (``frames=``): ``"thread"`` -- the sampling thread draws and sends each
frame; ``"cell"`` -- the thread running the cell sends them, between two operators (a dispatch-mode
hook whose cost between frames is one clock read) and at every ``mark()``, at most 4 a second, while
the sampling thread only samples. Colab's front end does not show widget updates sent from a
background thread (googlecolab/colabtools#3373), so ``"auto"`` picks ``"cell"`` on Colab (detected by
``google.colab`` in ``sys.modules``) and ``"thread"`` elsewhere. In ``"cell"`` mode a single operator
that runs for seconds shows no new frame until it returns.

The monitor never holds a tensor: it keeps numbers only.
"""

from __future__ import annotations

import functools
import html
import math
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._dispatch import enter_mode as _enter_mode
from ._dispatch import remove_mode as _remove_mode
from .ipython import in_kernel, on_colab
from .memory import _CUDA_LEDGER, _CudaWindow, _resolve_device, _StorageTracker, rss_bytes

__all__ = ["MemoryMonitor", "Sample", "Mark", "CellRecord", "fmt_bytes", "MIN_INTERVAL"]

MIN_INTERVAL = 0.25  # seconds: at most 4 frames a second
MAX_INTERVAL = 60.0  # seconds: a monitor that samples less often than this shows nothing live
_BACKENDS = ("auto", "storages", "cuda", "rss")
_FRAME_SOURCES = ("auto", "thread", "cell")
_THREAD_NAME = "viewlab-memory-monitor"


def fmt_bytes(n: float | None) -> str:
    """Bytes in a short human form with binary units.

    >>> fmt_bytes(0), fmt_bytes(1536), fmt_bytes(3 * 2**20)
    ('0 B', '1.5 KiB', '3.0 MiB')
    """
    if n is None:
        return "n/a"
    if isinstance(n, bool) or not isinstance(n, (int, float)) or n != n:
        raise TypeError(f"fmt_bytes(n=...) expects a number of bytes or None, got {n!r}.")
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{int(n)} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return f"{sign}{n:.1f} TiB"  # pragma: no cover


def _exact(n: int | None) -> str:
    """Exact bytes first, the binary unit in parentheses where it helps: '1,048,576 B (1.0 MiB)'."""
    if n is None:
        return "n/a"
    return f"{n:,} B" if abs(n) < 1024 else f"{n:,} B ({fmt_bytes(n)})"


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
    """Bytes attributed to one notebook cell in cell mode (``%load_ext viewlab``).

    ``allocated_bytes``: change in allocated memory from the cell's start to its end (what it still
    holds); ``peak_bytes``: highest point above the cell's start while it ran.
    """

    label: str
    start: float
    end: float
    allocated_bytes: int
    peak_bytes: int


class _Source:
    """What the sampler reads: (allocated, running peak, reserved or None).

    A *window* is a restartable peak (one notebook cell): ``begin_window`` then ``window_peak``.
    """

    label = ""
    line = "allocated"

    def enter_thread(self) -> None: ...
    def exit_thread(self) -> None: ...
    def close(self) -> None: ...
    def read(self) -> tuple[int, int, int | None]:
        raise NotImplementedError

    def reset_peak(self) -> None: ...
    def begin_window(self) -> None: ...
    def window_peak(self) -> int:
        raise NotImplementedError


class _StorageSource(_Source):
    def __init__(self, device: torch.device) -> None:
        # The first operator under any TorchDispatchMode imports torch._dynamo (seconds, once per
        # process). Pay that here, before the timeline starts, not inside the learner's plot.
        warm = _StorageTracker(device)
        warm.enter()
        try:
            torch.empty(0)
        finally:
            warm.exit()
            warm.close()
        self.tracker = _StorageTracker(device)
        self.label = f"tensor storages ({device})"
        self.line = "tensor storages made since start"
        self._entered = 0

    def enter_thread(self) -> None:
        self.tracker.enter()
        self._entered += 1

    def exit_thread(self) -> None:
        if self._entered:
            self._entered -= 1
            self.tracker.exit()

    def close(self) -> None:
        while self._entered:
            self.exit_thread()
        self.tracker.close()

    def read(self) -> tuple[int, int, None]:
        return self.tracker.current, self.tracker.peak, None

    def reset_peak(self) -> None:
        self.tracker.peak = self.tracker.current

    def begin_window(self) -> None:
        self.tracker.window_peak = self.tracker.current

    def window_peak(self) -> int:
        return self.tracker.window_peak


class _CudaSource(_Source):
    """The caching allocator's counters (allocated = whole blocks, as ``torch.cuda.memory_allocated``).

    The peak counter is process-global. The monitor opens a window in viewlab's CUDA ledger at start
    (and one per cell in cell mode); each window's reset first folds the current peak into every
    window still open, so a ``measure`` inside the monitor, or a cell window, never loses its peak.
    """

    def __init__(self, device: torch.device, ledger: Any = None) -> None:
        self.ledger = ledger if ledger is not None else _CUDA_LEDGER
        if device.index is None and self.ledger is _CUDA_LEDGER:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.label = f"cuda allocator ({device})"
        self.line = "allocated (cuda allocator)"
        if not self.ledger.counters.stats(device) and self.ledger is _CUDA_LEDGER:
            torch.cuda.init()
        self._window: _CudaWindow = self.ledger.open(device)
        self._cell: _CudaWindow | None = None

    def read(self) -> tuple[int, int, int]:
        s = self.ledger.counters.stats(self.device)
        return (
            s.get("allocated_bytes.all.current", 0),
            self._window.peak("allocated_bytes.all.peak"),
            s.get("reserved_bytes.all.current", 0),
        )

    def reset_peak(self) -> None:
        self._window.close()
        self._window = self.ledger.open(self.device)

    def begin_window(self) -> None:
        if self._cell is not None:
            self._cell.close()
        self._cell = self.ledger.open(self.device)

    def window_peak(self) -> int:
        window = self._cell if self._cell is not None else self._window
        return window.peak("allocated_bytes.all.peak")

    def close(self) -> None:
        self._window.close()
        if self._cell is not None:
            self._cell.close()
            self._cell = None


class _RssSource(_Source):
    label = "process RSS (approximate)"
    line = "process RSS (approximate)"

    def __init__(self) -> None:
        self._peak = 0
        self._window = 0

    def read(self) -> tuple[int, int, None]:
        value = rss_bytes() or 0
        self._peak = max(self._peak, value)  # polled: a peak between two samples can be missed
        self._window = max(self._window, value)
        return value, self._peak, None

    def reset_peak(self) -> None:
        self._peak = 0

    def begin_window(self) -> None:
        self._window = 0

    def window_peak(self) -> int:
        return max(self._window, self.read()[0])


class _FrameHook(TorchDispatchMode):
    """``frames="cell"``: after each operator on the cell's thread, one clock read; when a frame is
    due, the monitor samples and sends it from this thread. Holds the monitor only weakly."""

    def __init__(self, monitor: MemoryMonitor) -> None:
        super().__init__()
        self._monitor = weakref.ref(monitor)
        self.due = 0.0  # perf_counter() time from which the next frame may be sent

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))
        if time.perf_counter() >= self.due:
            mon = self._monitor()
            if mon is not None:
                mon._frame_from_cell()
        return out


def _sampler(ref: weakref.ReferenceType[MemoryMonitor], stop: threading.Event, interval: float) -> None:
    """Thread body. Holds only a weak reference, so a forgotten monitor does not keep it alive."""
    while not stop.wait(interval):
        mon = ref()
        if mon is None:
            return
        try:
            mon._take_sample()
            # At most 4 frames a second; on a slow machine drawing takes at most about a quarter of the
            # time (it competes with the cell for the GIL), but a frame still comes at least every second.
            if mon.frames_from == "thread" and mon._widget is not None:
                if time.perf_counter() - mon._frame_time >= mon._frame_gap():
                    mon._push_frame()
        except Exception as exc:  # noqa: BLE001 - never let the thread die silently
            mon.errors.append(f"{type(exc).__name__}: {exc}")
        del mon


class MemoryMonitor:
    """Sample memory in the background and (in a notebook) plot it live.

    Use it as ``with MemoryMonitor() as mon: ...``, or ``mon.start()`` ... ``mon.stop()``, or
    always-on per cell with ``%load_ext viewlab``. ``mon.mark("label")`` annotates the plot.

    Args:
        device: device to watch (None: CUDA if available, else CPU), as for :func:`viewlab.measure`.
        interval: seconds between samples, at least 0.25 (at most 4 frames a second).
        backend: ``"auto"``, ``"storages"``, ``"cuda"`` or ``"rss"`` (see the module docstring).
        rss: also record the process RSS (approximate) as an extra line.
        display: None shows the live widget only inside a Jupyter kernel; False never displays.
        title: title for the plot.
        frames: where live frames are sent from: ``"thread"`` (the sampling thread), ``"cell"`` (the
            thread running the cell, between operators and at each mark; needed on Colab) or
            ``"auto"`` (``"cell"`` on Colab, else ``"thread"``). ``mon.frames_from`` says which was
            picked; ``mon.frames`` counts the frames sent.

    The buttons act between cells: while a cell runs, the kernel reads no widget events (the plot
    still updates: frames are sent as ``frames`` says). In a script nothing is displayed; the
    data is in ``mon.samples``, ``mon.marks``, ``mon.cells``:

    >>> mon = MemoryMonitor(device="cpu", display=False)
    >>> with mon:
    ...     a = torch.zeros(1000)
    ...     _ = mon.mark("a made")
    ...     b = a.repeat(3)
    >>> mon.samples[-1].allocated, mon.samples[-1].peak    # 4,000 + 12,000 bytes
    (16000, 16000)
    >>> [(m.label, m.allocated) for m in mon.marks]
    [('a made', 4000)]
    >>> mon.backend
    'tensor storages (cpu)'
    """

    def __init__(
        self,
        device: Any = None,
        interval: float = MIN_INTERVAL,
        backend: str = "auto",
        rss: bool = False,
        display: bool | None = None,
        title: str | None = None,
        frames: str = "auto",
    ) -> None:
        if not isinstance(backend, str) or backend not in _BACKENDS:
            raise ValueError(f"MemoryMonitor(backend={backend!r}): choose one of {', '.join(map(repr, _BACKENDS))}.")
        if not isinstance(frames, str) or frames not in _FRAME_SOURCES:
            raise ValueError(
                f"MemoryMonitor(frames={frames!r}): choose one of {', '.join(map(repr, _FRAME_SOURCES))} "
                "('cell' sends live frames from the cell's own thread, as Colab needs)."
            )
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(f"MemoryMonitor(interval=...) expects seconds as a number, got {type(interval).__name__}.")
        if not math.isfinite(interval) or not MIN_INTERVAL <= interval <= MAX_INTERVAL:
            raise ValueError(
                f"MemoryMonitor(interval={interval!r}): the monitor samples at most 4 times a second and "
                f"at least once a minute; pass {MIN_INTERVAL} <= interval <= {MAX_INTERVAL} (seconds)."
            )
        if title is not None and not isinstance(title, str):
            raise TypeError(f"MemoryMonitor(title=...) expects a string or None, got {type(title).__name__}.")
        if display is not None and not isinstance(display, bool):
            raise TypeError(f"MemoryMonitor(display=...) expects None, True or False, got {type(display).__name__}.")
        if not isinstance(rss, bool):
            raise TypeError(f"MemoryMonitor(rss=...) expects True or False, got {type(rss).__name__}.")
        self.device = _resolve_device(device, "MemoryMonitor") if backend != "rss" else torch.device("cpu")
        if backend == "auto":
            backend = "cuda" if self.device.type == "cuda" else "storages"
        if backend == "cuda" and self.device.type != "cuda":
            raise ValueError(
                f"MemoryMonitor(backend='cuda') needs a CUDA device, got device={str(self.device)!r}; "
                "pass device='cuda' or use backend='storages'."
            )
        self.backend_kind = backend
        self.interval = float(interval)
        self.rss = bool(rss)
        self.display = in_kernel() if display is None else display
        self.title = title
        self.samples: list[Sample] = []
        self.marks: list[Mark] = []
        self.cells: list[CellRecord] = []
        self.errors: list[str] = []
        self.frames_from = ("cell" if on_colab() else "thread") if frames == "auto" else frames
        self.frames = 0  # live frames sent to the widget
        self._hook: _FrameHook | None = None  # frames="cell": the mode on the cell's thread
        self._frame_time = 0.0  # perf_counter() of the last frame sent
        self._frame_lock = threading.Lock()
        self._frame_cost = 0.0  # seconds the last frame took to draw
        self._source: _Source | None = None
        self._line = "allocated"
        self._backend_label = {"storages": f"tensor storages ({self.device})", "rss": _RssSource.label}.get(
            backend, f"cuda allocator ({self.device})"
        )
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._stop_event: threading.Event | None = None
        self._t0 = 0.0
        self._offset = 0.0  # time already recorded before a restart
        self._widget: Any = None
        self._image: Any = None
        self._status: Any = None
        self._cell_open: tuple[str, float, int] | None = None
        self._cell_mode = False  # set by %load_ext viewlab: track ops per cell, print a line per cell
        self._cell_number = 0

    # ------------------------------------------------------------------ state

    @property
    def backend(self) -> str:
        """Human name of what is measured, e.g. ``"tensor storages (cpu)"`` (also in the legend)."""
        return self._source.label if self._source is not None else self._backend_label

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _now(self) -> float:
        return self._offset + (time.perf_counter() - self._t0)

    def _read(self) -> tuple[int, int, int | None]:
        assert self._source is not None
        return self._source.read()

    def _take_sample(self) -> Sample:
        with self._lock:
            if self._source is None:
                raise RuntimeError("monitor is not running")
            allocated, peak, reserved = self._read()
            sample = Sample(self._now(), allocated, peak, reserved, rss_bytes() if self.rss else None)
            self.samples.append(sample)
            if len(self.samples) > 20_000:  # keep long always-on sessions small: drop every other sample
                self.samples = self.samples[::2]
            return sample

    # ------------------------------------------------------------------ control

    def start(self) -> MemoryMonitor:
        """Start sampling (and, in a notebook, show the live widget). Starting twice is an error.

        >>> mon = MemoryMonitor(device="cpu", display=False).start()
        >>> mon.running
        True
        >>> mon.stop().running
        False
        """
        if self._thread is not None:
            raise RuntimeError("this MemoryMonitor is already running; call mon.stop() first.")
        made_source = entered = False
        try:
            with self._lock:
                if self._source is None:
                    self._source = self._make_source()
                    made_source = True
                if not self._cell_mode:
                    self._source.enter_thread()
                    entered = True
                self._t0 = time.perf_counter()
                self._stop_event = threading.Event()
                self._take_sample()
                thread = threading.Thread(
                    target=_sampler,
                    args=(weakref.ref(self), self._stop_event, self.interval),
                    name=_THREAD_NAME,
                    daemon=True,
                )
                thread.start()
                self._thread = thread
            if self.display:
                self._show_widget()
                if self.frames_from == "cell" and not self._cell_mode:
                    self._enter_hook()
        except BaseException:
            self._undo_start(made_source, entered)  # a failed start leaves no thread, mode or backend behind
            raise
        return self

    def _undo_start(self, made_source: bool, entered: bool) -> None:
        event, thread = self._stop_event, self._thread
        if event is not None:
            event.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        self._thread = self._stop_event = None
        self._exit_hook()
        if self._source is not None:
            if entered:
                self._source.exit_thread()
            if made_source:
                self._source.close()
                self._source = None

    def stop(self, show: bool | None = None) -> MemoryMonitor:
        """Stop the thread, take a last sample, and (in a notebook) show the final PNG + summary.

        Safe to call when not running. ``show=False`` skips the final output.

        >>> MemoryMonitor(device="cpu", display=False).stop().samples
        []
        """
        thread, event = self._thread, self._stop_event
        if thread is None or event is None:
            return self
        event.set()
        if thread is not threading.current_thread():
            thread.join(timeout=10)
        self._exit_hook()
        with self._lock:
            self._take_sample()
            self._offset = self._now()
            self._thread = None
            self._stop_event = None
            if self._source is not None and not self._cell_mode:
                self._source.exit_thread()
        final = show if show is not None else self.display
        if self._widget is not None:
            if final:  # the static PNG below replaces the live image
                self._image.layout.display = "none"
            else:
                self._push_frame()
            self._set_status("stopped")
        if final:
            self._show_final()
        return self

    def reset(self) -> MemoryMonitor:
        """Forget samples, marks and cells, and restart the peak from the current value.

        >>> mon = MemoryMonitor(device="cpu", display=False)
        >>> mon.reset().samples
        []
        """
        with self._lock:
            self.samples.clear()
            self.marks.clear()
            self.cells.clear()
            self._cell_number = 0
            self._offset = 0.0
            self._t0 = time.perf_counter()
            if self._source is not None:
                self._source.reset_peak()
                if self.running:
                    self._take_sample()
        if self._widget is not None:
            self._push_frame()
        return self

    def close(self) -> None:
        """Stop, and release the backend (after this, start() begins a fresh measurement)."""
        self.stop(show=False)
        with self._lock:
            if self._source is not None:
                self._source.close()
                self._source = None

    def mark(self, label: str) -> Mark:
        """Put ``label`` on the plot at this moment (and record the bytes allocated right now).

        >>> with MemoryMonitor(device="cpu", display=False) as mon:
        ...     mon.mark("here").allocated
        0
        """
        if not isinstance(label, str) or not label.strip():
            raise ValueError("mon.mark(label) needs a short non-empty string, e.g. mon.mark('after repeat').")
        if self._source is None or not self.running:
            raise RuntimeError("mon.mark() works while the monitor runs; call mon.start() (or use `with`) first.")
        with self._lock:
            sample = self._take_sample()  # so the plot's lines step exactly at the mark
            mark = Mark(sample.t, label.strip(), sample.allocated)
            self.marks.append(mark)
        if self._hook is not None and self._widget is not None:
            if time.perf_counter() - self._frame_time >= MIN_INTERVAL:
                self._frame_from_cell()
            else:  # too soon after the last frame: the next operator boundary sends it
                self._hook.due = self._frame_time + MIN_INTERVAL
        return mark

    def __enter__(self) -> MemoryMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        # Runs on normal exit, on exceptions and on KeyboardInterrupt alike. After an error the final
        # plot is still shown (it is what memory looked like just before the failure, e.g. an OOM),
        # but a failure to draw it must never hide the original exception.
        try:
            self.stop()
        except Exception:  # noqa: BLE001
            if exc[0] is None:
                raise
        finally:
            self.close()

    def __del__(self) -> None:
        # A monitor dropped while running (re-running `mon = MemoryMonitor().start()`) must not leave its
        # dispatch modes behind, or every later operator stays slow. Mode stacks are per thread: this
        # removes them when the last reference goes on the thread that started it (the usual case).
        try:
            event = getattr(self, "_stop_event", None)
            if event is not None:
                event.set()
            self._exit_hook()
            source = getattr(self, "_source", None)
            if source is not None:
                source.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser (e.g. at interpreter exit)
            pass

    def _make_source(self) -> _Source:
        if self.backend_kind == "cuda":
            source: _Source = _CudaSource(self.device)
        elif self.backend_kind == "rss":
            source = _RssSource()
        else:
            source = _StorageSource(self.device)
        self._line = source.line
        self._backend_label = source.label
        return source

    # ------------------------------------------------------------------ cells (IPython events)

    def pre_run_cell(self, info: Any = None) -> None:
        """IPython ``pre_run_cell`` hook: open a cell record (and track ops while the cell runs)."""
        if not self.running or self._cell_open is not None:
            return
        # Cells are numbered by the monitor (#1, #2, ...), not by IPython's execution count: that count is
        # not advanced by every front end (nbval runs cells without history), so it would not be stable.
        self._cell_number += 1
        label = f"#{self._cell_number}"
        with self._lock:
            assert self._source is not None
            if self._cell_mode:
                self._source.enter_thread()  # the storage backend sees this cell's operators
                if self.frames_from == "cell" and self._widget is not None:
                    self._enter_hook()
            self._source.begin_window()
            self._cell_open = (label, self._now(), self._read()[0])
            self._take_sample()

    def post_run_cell(self, result: Any = None) -> None:
        """IPython ``post_run_cell`` hook: close the cell record and print one line about it."""
        if self._cell_open is None:
            return
        if self._source is None:  # closed during the cell
            self._cell_open = None
            return
        with self._lock:
            label, start, allocated0 = self._cell_open
            sample = self._take_sample() if self.running else self.samples[-1]
            window_peak = self._source.window_peak()
            if self._cell_mode:
                self._exit_hook()
                self._source.exit_thread()
            record = CellRecord(label, start, sample.t, sample.allocated - allocated0, max(0, window_peak - allocated0))
            self.cells.append(record)
            self._cell_open = None
        if self._cell_mode:
            print(
                f"[viewlab] cell {record.label}: {record.allocated_bytes:+,} B still held, "
                f"peak +{record.peak_bytes:,} B ({self.backend})"
            )

    # ------------------------------------------------------------------ drawing

    def figure(self) -> Any:
        """The current plot as a matplotlib ``Figure`` (Agg; no pyplot state is touched).

        >>> with MemoryMonitor(device="cpu", display=False) as mon:
        ...     x = torch.zeros(10)
        >>> len(mon.figure().axes)
        1
        """
        from matplotlib.figure import Figure

        with self._lock:
            samples = list(self.samples)
            if len(samples) > 800:  # draw at most ~800 points; the last (exact) sample is always kept
                samples = samples[:: len(samples) // 400][:-1] + samples[-1:]
            marks = list(self.marks)
            cells = list(self.cells)
        # With cells (cell mode), a second panel gives each cell a labelled bar: on the timeline a quick cell
        # is a sliver, but its bytes still deserve to be read.
        if cells:
            fig = Figure(figsize=(7.0, 4.6), dpi=80, facecolor="white")
            ax, bars = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 2]})
        else:
            fig = Figure(figsize=(7.0, 3.0), dpi=80, facecolor="white")
            ax, bars = fig.add_subplot(1, 1, 1), None
        peak_all = max([max(s.peak, s.allocated, s.reserved or 0, s.rss or 0) for s in samples] or [1])
        scale, unit = 1, "B"
        for factor, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if peak_all >= factor:
                scale, unit = factor, name
                break
        ts = [s.t for s in samples]
        source_line = self._line
        last = samples[-1] if samples else None
        for idx, cell in enumerate(cells):
            ax.axvspan(cell.start, cell.end, color="#56B4E9" if idx % 2 else "#E69F00", alpha=0.15, lw=0)
            ax.annotate(
                cell.label,
                (cell.start, 1.0),
                xycoords=ax.get_xaxis_transform(),
                xytext=(1, -2),
                textcoords="offset points",
                fontsize=7,
                va="top",
                color="#444444",
            )
        if samples:
            ax.plot(
                ts,
                [s.allocated / scale for s in samples],
                color="#0072B2",
                lw=2,
                drawstyle="steps-post",
                label=f"{source_line}: {_exact(last.allocated)}",
            )
            if self.backend_kind != "rss":
                ax.plot(
                    ts,
                    [s.peak / scale for s in samples],
                    color="#D55E00",
                    lw=1.5,
                    ls="--",
                    drawstyle="steps-post",
                    label=f"peak: {_exact(last.peak)}",
                )
            if any(s.reserved is not None for s in samples):
                ax.plot(
                    ts,
                    [(s.reserved or 0) / scale for s in samples],
                    color="#009E73",
                    lw=1.5,
                    ls=":",
                    drawstyle="steps-post",
                    label=f"reserved: {_exact(last.reserved)}",
                )
            if any(s.rss is not None for s in samples):
                ax.plot(
                    ts,
                    [(s.rss or 0) / scale for s in samples],
                    color="#999999",
                    lw=1,
                    label=f"process RSS (approx.): {_exact(last.rss)}",
                )
        for idx, mark in enumerate(marks):
            ax.axvline(mark.t, color="#CC79A7", lw=1)
            # Staggered heights and a white box, so neighbouring labels neither overlap nor vanish into a line.
            ax.annotate(
                mark.label,
                (mark.t, 0.92 - 0.17 * (idx % 4)),
                xycoords=ax.get_xaxis_transform(),
                xytext=(3, 0),
                textcoords="offset points",
                fontsize=8,
                color="#6a3d5a",
                va="top",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
            )
        ax.set_xlabel("seconds since start")
        ax.set_ylabel(unit)
        # Never a zero-height axis (the first frame, before anything is allocated, has peak 0).
        ax.set_ylim(bottom=0, top=max(peak_all, 1) / scale * 1.12 if samples else 1.0)
        end = ts[-1] if ts else 0.0
        # While live, a readable axis from the first sample on; once there is data, the data's own extent.
        ax.set_xlim(0, max(end, 1.0 if self.running else 1e-3) * 1.02)
        fig.suptitle(self.title or f"memory: {self.backend}", fontsize=10)
        if samples:  # above the plot, so it never hides a line or a mark
            ax.legend(
                loc="lower left",
                bbox_to_anchor=(0.0, 1.0),
                ncol=2,
                fontsize=7,
                title=self.backend,
                title_fontsize=7,
                frameon=False,
                alignment="left",
            )
        ax.grid(alpha=0.3)
        if bars is not None:
            labels = [c.label for c in cells]
            xs = range(len(cells))
            bars.bar(
                xs, [c.peak_bytes / scale for c in cells], color="#D55E00", alpha=0.35, label="peak inside the cell"
            )
            bars.bar(
                xs,
                [max(c.allocated_bytes, 0) / scale for c in cells],
                width=0.45,
                color="#0072B2",
                label="still held after it",
            )
            for x, c in zip(xs, cells):
                bars.annotate(
                    f"+{c.allocated_bytes:,} B held\npeak +{c.peak_bytes:,} B",
                    (x, c.peak_bytes / scale),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
            bars.set_xticks(list(xs), labels, fontsize=8)
            bars.set_ylabel(unit)
            bars.set_ylim(0, max([c.peak_bytes for c in cells] + [1]) / scale * 1.45)
            bars.set_xlim(-0.6, len(cells) - 0.4)
            bars.set_title("per cell", fontsize=9)
            bars.legend(loc="upper left", fontsize=7)
            bars.grid(alpha=0.3, axis="y")
            fig.subplots_adjust(left=0.09, right=0.98, top=0.84, bottom=0.07, hspace=0.6)
        else:
            fig.subplots_adjust(
                left=0.09, right=0.98, top=0.76, bottom=0.16
            )  # fixed: tight_layout costs a frame's time
        return fig

    def png(self) -> bytes:
        """The current plot as PNG bytes."""
        import io

        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig = self.figure()
        FigureCanvasAgg(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", facecolor="white", metadata={"Software": None})
        return buffer.getvalue()

    def alt_text(self) -> str:
        """A sentence describing the plot for screen readers (used as the PNG's alt text)."""
        if not self.samples:
            return f"Empty memory plot ({self.backend}): no samples yet."
        last = self.samples[-1]
        peak = max(s.peak for s in self.samples)
        text = (
            f"Memory over {last.t:.1f} s measured by {self.backend}: "
            f"{fmt_bytes(last.allocated)} allocated at the end, peak {fmt_bytes(peak)}"
        )
        if last.reserved is not None:
            text += f", {fmt_bytes(last.reserved)} reserved"
        if self.marks:
            text += "; marks: " + ", ".join(m.label for m in self.marks)
        if self.cells:
            text += f"; {len(self.cells)} cells shaded"
        return text + "."

    def summary_html(self) -> str:
        """An HTML table of the result: backend, duration, final and peak bytes, marks, cells.

        On the tensor-storage backend every number except the duration is deterministic.
        """
        rows = [("backend", self.backend)]
        if self.samples:
            last = self.samples[-1]
            rows += [
                ("duration", f"{last.t:.1f} s"),
                ("allocated at stop", f"{last.allocated:,} B"),
                ("peak", f"{max(s.peak for s in self.samples):,} B"),
            ]
            if last.reserved is not None:
                rows.append(("reserved at stop", f"{last.reserved:,} B"))
        rows += [(f"mark: {m.label}", f"{m.allocated:,} B allocated") for m in self.marks]
        rows += [(f"cell {c.label}", f"{c.allocated_bytes:+,} B held, peak +{c.peak_bytes:,} B") for c in self.cells]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows
        )
        return f"<table class='viewlab-memory'>{body}</table>"

    def _show_final(self) -> None:
        from IPython.display import HTML, display

        from .draw import PNGFigure

        display(PNGFigure(self.png(), alt=self.alt_text()), HTML(self.summary_html()))

    # ------------------------------------------------------------------ widget

    def _show_widget(self) -> None:
        if self._widget is None:
            import ipywidgets as w

            self._image = w.Image(format="png", layout=w.Layout(width="560px"))
            buttons = []
            for name in ("start", "stop", "reset"):
                button = w.Button(description=name, layout=w.Layout(width="70px"))
                # Weakly: ipywidgets keeps every widget alive, and a dropped monitor must be collectable.
                button.on_click(functools.partial(_click, weakref.ref(self), f"_on_{name}"))
                buttons.append(button)
            self._status = w.Label(value="live memory monitor")
            self._widget = w.VBox([w.HBox([*buttons, self._status]), self._image])
            from IPython.display import display

            # Shown once, as the same bundle ipywidgets 7 and 8 send, but with a readable text/plain: that is
            # what GitHub, nbviewer and other viewers without the widget show instead of "VBox(children=...".
            view = {"version_major": 2, "version_minor": 0, "model_id": self._widget.model_id}
            text = (
                f"[live memory monitor: {self.backend}; a widget that updates while cells run. "
                "Its final plot and summary table are stored below it when it stops.]"
            )
            display({"application/vnd.jupyter.widget-view+json": view, "text/plain": text}, raw=True)
            handle = getattr(self._widget, "_handle_displayed", None)
            if callable(handle):
                handle()
        self._image.layout.display = None
        self._push_frame()  # first frame now (this also warms up matplotlib before the thread draws)
        self._set_status("running")

    def _push_frame(self, wait: bool = True) -> bool:
        """Draw and send one frame; never two within 0.25 s (``wait=False``: skip instead of sleeping)."""
        if self._image is None:
            return False
        if not wait and time.perf_counter() - self._frame_time < MIN_INTERVAL:
            return False
        start = time.perf_counter()
        png = self.png()
        with self._frame_lock:  # not self._lock: the cell's own thread must never wait for a frame
            if time.perf_counter() - self._frame_time < MIN_INTERVAL:  # never two frames within 0.25 s
                if not wait:
                    return False
                time.sleep(MIN_INTERVAL - (time.perf_counter() - self._frame_time))
            self._image.value = png
            self._frame_time = time.perf_counter()
            self._frame_cost = self._frame_time - start
            self.frames += 1
        return True

    def _frame_gap(self) -> float:
        # At most 4 frames a second; on a slow machine drawing takes at most about a quarter of the time
        # (it competes with the cell), but a frame still comes at least every second.
        return min(max(self.interval, 3 * self._frame_cost), 1.0)

    def _frame_from_cell(self) -> None:
        """frames="cell": sample and send a frame from the thread running the cell (never sleeps)."""
        hook = self._hook
        try:
            if self.running:
                self._take_sample()
                self._push_frame(wait=False)
        except Exception as exc:  # noqa: BLE001 - a frame must never break the learner's cell
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if hook is not None:
                hook.due = time.perf_counter() + self._frame_gap()

    def _enter_hook(self) -> None:
        if self._hook is None:
            self._hook = _FrameHook(self)
        self._hook.due = self._frame_time + self._frame_gap()
        _enter_mode(self._hook)

    def _exit_hook(self) -> None:
        hook = getattr(self, "_hook", None)
        if hook is not None:
            _remove_mode(hook)

    def _set_status(self, text: str) -> None:
        if self._status is not None:
            self._status.value = f"{text} - {self.backend}"

    def _on_start(self, _button: Any = None) -> None:
        if not self.running:
            self.start()

    def _on_stop(self, _button: Any = None) -> None:
        self.stop(show=False)

    def _on_reset(self, _button: Any = None) -> None:
        self.reset()


def _click(ref: weakref.ReferenceType[MemoryMonitor], action: str, _button: Any = None) -> None:
    mon = ref()
    if mon is not None:
        getattr(mon, action)()


def _ipython() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return None
    return get_ipython()


# ---------------------------------------------------------------------- IPython extension

_CELL_MONITOR: MemoryMonitor | None = None


def cell_monitor() -> MemoryMonitor | None:
    """The monitor started by ``%load_ext viewlab`` (None when the extension is not loaded).

    >>> cell_monitor() is None
    True
    """
    return _CELL_MONITOR


def load_ipython_extension(ip: Any, **kwargs: Any) -> MemoryMonitor:
    """``%load_ext viewlab``: an always-on monitor that marks cell boundaries and attributes bytes to cells."""
    global _CELL_MONITOR
    if _CELL_MONITOR is not None:
        return _CELL_MONITOR
    events = getattr(ip, "events", None)
    if events is None or not callable(getattr(events, "register", None)):
        raise TypeError(
            f"load_ipython_extension(ip) expects the IPython shell (get_ipython()), got {type(ip).__name__}; "
            "in a notebook write `%load_ext viewlab`."
        )
    mon = MemoryMonitor(**kwargs)
    mon._cell_mode = True
    mon.start()
    registered = []
    try:
        for name, hook in (("pre_run_cell", mon.pre_run_cell), ("post_run_cell", mon.post_run_cell)):
            events.register(name, hook)
            registered.append((name, hook))
    except BaseException:  # leave nothing behind: no hook, no thread, no mode
        for name, hook in registered:
            events.unregister(name, hook)
        mon.close()
        raise
    _CELL_MONITOR = mon
    return mon


def unload_ipython_extension(ip: Any) -> None:
    """``%unload_ext viewlab``: stop the cell monitor and show its final plot and per-cell table."""
    global _CELL_MONITOR
    mon, _CELL_MONITOR = _CELL_MONITOR, None
    if mon is None:
        return None
    for name, hook in (("pre_run_cell", mon.pre_run_cell), ("post_run_cell", mon.post_run_cell)):
        try:
            ip.events.unregister(name, hook)
        except ValueError:
            pass
    if mon._cell_open is not None:  # the unload cell itself is not recorded
        mon._cell_open = None
        if mon._source is not None:
            mon._source.exit_thread()
    mon.stop()
    mon.close()
    return None
