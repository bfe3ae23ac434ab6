"""When the monitor's live frames are drawn and who sends them: one :class:`FrameScheduler` per displayed monitor.

Every live frame is drawn on the monitor's own sampling thread (a matplotlib ``Figure`` on the Agg canvas, never
pyplot: :mod:`.plot`), right after a sample, at most once per :meth:`FrameScheduler.gap`. Nothing of ours runs
between two bytecodes of the learner's code: no signal handler, no trace function. Matplotlib draws one figure at a
time across threads (``Figure.draw`` holds a class-wide lock), so a plot the learner draws meanwhile waits at most
for one frame. Two ways to send a frame:

* ``"thread"``: the sampling thread sends it too (``Image.value = png`` from that thread). JupyterLab, Notebook and
  VS Code show it while the cell runs, also while it sleeps or runs pure Python.
* ``"cell"``: for front ends that show only widget updates sent from the cell's own thread (Colab:
  googlecolab/colabtools#3373). The drawn PNG waits in :attr:`FrameScheduler.ready`; the cell's thread sends it at
  its next tensor operator (:class:`_HandOff`, a dispatch mode that costs one attribute test per operator and, when a
  frame is ready, one ``Image.value`` assignment: no drawing) or at the cell's end. A cell that runs no operator
  (``time.sleep``, pure Python) shows its frame when it ends.

>>> FrameScheduler.SOURCES
('thread', 'cell')
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from typing import TYPE_CHECKING

from torch.utils._python_dispatch import TorchDispatchMode

from .._dispatch import enter, leave, remove_mode
from .widget import MIN_INTERVAL

if TYPE_CHECKING:
    from . import MemoryMonitor
    from .widget import LiveView


class _HandOff(TorchDispatchMode):
    """``frames="cell"``: on the cell's thread, after an operator, send the frame the sampling thread drew."""

    def __init__(self, scheduler: FrameScheduler) -> None:
        super().__init__()
        self.scheduler: FrameScheduler | None = scheduler  # None once closed (left on another thread's stack)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **kwargs) if kwargs else func(*args)
        scheduler = self.scheduler
        if scheduler is not None and scheduler.ready is not None:
            scheduler.take()
        return out


class FrameScheduler:
    """Draws frames on the sampling thread (:meth:`tick`) and sends them from there (``"thread"``) or from the
    cell's thread (``"cell"``: :meth:`take`, called between two operators by the hand-off mode that
    :meth:`enter_cell` pushes, and at :meth:`exit_cell`). See the module docstring."""

    SOURCES = ("thread", "cell")

    def __init__(self, view: LiveView, source: str, monitor: MemoryMonitor) -> None:
        self.view, self.source, self.interval = view, source, monitor.interval
        # held weakly: the hand-off mode on a thread's stack must not keep a dropped monitor (and its thread) alive
        self._monitor = weakref.ref(monitor)
        self.cost = 0.0  # seconds the last frame took to draw on the sampling thread
        self.ready: bytes | None = None  # "cell": a drawn frame the cell's thread has not sent yet
        self._lock = threading.Lock()
        self._hand_off: _HandOff | None = None  # "cell": the mode on the cell's thread, and that thread's id
        self._thread: int | None = None

    def gap(self) -> float:
        """Seconds between frames: ``interval``, or 3x the last frame's drawing time (it competes for the GIL), <= 1."""
        return min(max(self.interval, MIN_INTERVAL, 3 * self.cost), 1.0)

    def tick(self) -> bool:
        """On the sampling thread, after a sample: draw a frame when one is due; send it, or leave it ready for the
        cell's thread (``"cell"``, only while a cell is followed and the previous frame was taken)."""
        if time.perf_counter() - self.view.time < self.gap():
            return False
        if self.source == "cell" and (self._hand_off is None or self.ready is not None):
            return False
        mon = self._monitor()
        if mon is None:
            return False
        start = time.perf_counter()
        png = mon.png()
        self.cost = time.perf_counter() - start
        del mon
        if self.source == "thread":
            return self.view.put(png)
        with self._lock:
            self.ready = png
        return True

    def take(self) -> bool:
        """On the cell's thread: send the frame drawn for it, if one is ready (never raises into the cell)."""
        with self._lock:
            png, self.ready = self.ready, None
        if png is None:
            return False
        try:
            return self.view.put(png, wait=False)
        except Exception as exc:  # noqa: BLE001 - a frame must never break the learner's cell
            if (mon := self._monitor()) is not None:
                mon.errors.append(f"{type(exc).__name__}: {exc}")
            return False

    def enter_cell(self) -> None:
        """``"cell"``: from now on the calling thread (the cell's) sends the frames drawn for it."""
        if self.source == "cell" and self._hand_off is None:
            self._hand_off = _HandOff(self)
            self._thread = enter(self._hand_off)

    def exit_cell(self) -> None:
        """Send what is ready (on the cell's thread) and take the hand-off mode off that thread: now, or, called
        from another thread, at that thread's next viewlab entry or the end of the cell (``_dispatch.leave``)."""
        mode, thread = self._hand_off, self._thread
        self._hand_off = self._thread = None
        if mode is None or thread is None:
            return
        if thread == threading.get_ident():
            self.take()
        mode.scheduler = None
        with self._lock:
            self.ready = None
        leave(thread, functools.partial(remove_mode, mode))
