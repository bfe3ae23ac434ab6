"""The monitor's live view in a notebook: a core ``ipywidgets.Image`` with start / stop / reset buttons.

No ipympl: each frame is a PNG drawn with Agg and sent as the image's new value, so it also works on
Colab. Frames come from the sampling thread (``frames="thread"``) or, through :class:`_FrameHook`, from
the thread running the cell, between two operators (``frames="cell"``). Never two frames within
:data:`MIN_INTERVAL` seconds. The view and its buttons hold the monitor only weakly: ipywidgets keeps
every widget alive, and a dropped monitor must still be collectable.

>>> MIN_INTERVAL
0.25
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from torch.utils._python_dispatch import TorchDispatchMode

from .._dispatch import enter_mode, remove_mode

if TYPE_CHECKING:
    from . import MemoryMonitor

MIN_INTERVAL = 0.25  # seconds: at most 4 frames (and samples) a second


class _FrameHook(TorchDispatchMode):
    """``frames="cell"``: after each operator on the cell's thread, one clock read; when a frame is
    due, the view samples and sends it from this thread."""

    def __init__(self, view: LiveView) -> None:
        super().__init__()
        self._view = weakref.ref(view)
        self.due = 0.0  # perf_counter() time from which the next frame may be sent

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))
        if time.perf_counter() >= self.due:
            view = self._view()
            if view is not None:
                view.from_cell()
        return out


def _click(ref: weakref.ReferenceType[MemoryMonitor], action: str, _button: Any = None) -> None:
    mon = ref()
    if mon is None:
        return
    if action == "start":
        if not mon.running:
            mon.start()
    elif action == "stop":
        mon.stop(show=False)
    else:
        mon.reset()


class LiveView:
    """The widget of one monitor, displayed once; :meth:`push` sends a frame."""

    def __init__(self, monitor: MemoryMonitor) -> None:
        import ipywidgets as w
        from IPython.display import display

        self._monitor = weakref.ref(monitor)
        self.frames = 0  # live frames sent
        self.time = 0.0  # perf_counter() of the last frame sent
        self.cost = 0.0  # seconds the last frame took to draw
        self.hook: _FrameHook | None = None  # frames="cell": the mode on the cell's thread
        self._lock = threading.Lock()  # not the monitor's lock: the cell's own thread must never wait for a frame
        self.image = w.Image(format="png", layout=w.Layout(width="560px"))
        buttons = [w.Button(description=name, layout=w.Layout(width="70px")) for name in ("start", "stop", "reset")]
        for button in buttons:
            button.on_click(functools.partial(_click, weakref.ref(monitor), button.description))
        self.status = w.Label(value="live memory monitor")
        self.box = w.VBox([w.HBox([*buttons, self.status]), self.image])
        # Shown once, as the same bundle ipywidgets 7 and 8 send, but with a readable text/plain: that is
        # what GitHub, nbviewer and other viewers without the widget show instead of "VBox(children=...".
        view = {"version_major": 2, "version_minor": 0, "model_id": self.box.model_id}
        text = (
            f"[live memory monitor: {monitor.backend}; a widget that updates while cells run. "
            "Its final plot and summary table are stored below it when it stops.]"
        )
        display({"application/vnd.jupyter.widget-view+json": view, "text/plain": text}, raw=True)
        handle = getattr(self.box, "_handle_displayed", None)
        if callable(handle):
            handle()

    def show(self) -> None:
        """Show the live image again and send a first frame (this also warms up matplotlib before the thread draws)."""
        self.image.layout.display = None
        self.push()
        self.set_status("running")

    def stopped(self, final: bool) -> None:
        if final:  # the static PNG shown below replaces the live image
            self.image.layout.display = "none"
        else:
            self.push()
        self.set_status("stopped")

    def set_status(self, text: str) -> None:
        mon = self._monitor()
        if mon is not None:
            self.status.value = f"{text} - {mon.backend}"

    def push(self, wait: bool = True) -> bool:
        """Draw and send one frame; never two within 0.25 s (``wait=False``: skip instead of sleeping)."""
        mon = self._monitor()
        if mon is None or (not wait and time.perf_counter() - self.time < MIN_INTERVAL):
            return False
        start = time.perf_counter()
        png = mon.png()
        with self._lock:
            if time.perf_counter() - self.time < MIN_INTERVAL:  # never two frames within 0.25 s
                if not wait:
                    return False
                time.sleep(MIN_INTERVAL - (time.perf_counter() - self.time))
            self.image.value = png
            self.time = time.perf_counter()
            self.cost = self.time - start
            self.frames += 1
        return True

    def gap(self, interval: float) -> float:
        """Seconds from one frame to the next: at most 4 a second; on a slow machine drawing takes at most
        about a quarter of the time (it competes with the cell for the GIL), but a frame comes at least every second."""
        return min(max(interval, 3 * self.cost), 1.0)

    def from_cell(self) -> None:
        """frames="cell": sample and send a frame from the thread running the cell (never sleeps)."""
        mon = self._monitor()
        if mon is None:
            return
        try:
            if mon.running:
                mon._take_sample()
                self.push(wait=False)
        except Exception as exc:  # noqa: BLE001 - a frame must never break the learner's cell
            mon.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self.hook is not None:
                self.hook.due = time.perf_counter() + self.gap(mon.interval)

    def after_mark(self) -> None:
        """A mark in cell mode: send its frame now, or at the next operator when one was sent just before."""
        if self.hook is None:
            return
        if time.perf_counter() - self.time >= MIN_INTERVAL:
            self.from_cell()
        else:
            self.hook.due = self.time + MIN_INTERVAL

    def enter_hook(self, interval: float) -> None:
        if self.hook is None:
            self.hook = _FrameHook(self)
        self.hook.due = self.time + self.gap(interval)
        enter_mode(self.hook)

    def exit_hook(self) -> None:
        if self.hook is not None:
            remove_mode(self.hook)
