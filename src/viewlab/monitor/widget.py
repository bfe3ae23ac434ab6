"""The monitor's live view (:mod:`viewlab.monitor`): an ``ipywidgets.Image`` (no ipympl: it works on Colab), three
buttons, a PNG per frame, never two within :data:`MIN_INTERVAL` s. Colab shows no widget update sent from a background
thread (googlecolab/colabtools#3373): with ``frames="cell"`` the view is a dispatch mode on the cell's thread, sending
frames between two operators (one clock read each) and at marks, so a seconds-long operator shows none till it ends.

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


def _click(ref: weakref.ReferenceType[MemoryMonitor], action: str, _button: Any = None) -> None:
    mon = ref()
    if mon is not None and not (action == "start" and mon.running):
        {"start": mon.start, "stop": functools.partial(mon.stop, show=False), "reset": mon.reset}[action]()


class LiveView(TorchDispatchMode):
    """The widget of one monitor, displayed once; :meth:`send` sends a frame (so does the mode :meth:`enter_hook`)."""

    def __init__(self, monitor: MemoryMonitor) -> None:
        import ipywidgets as w
        from IPython.display import display

        super().__init__()
        # held weakly (the buttons too): ipywidgets keeps every widget alive; a dropped monitor must be collectable
        self._monitor = weakref.ref(monitor)
        # frames sent; perf_counter() of the last one and seconds it took to draw; (frames="cell") when the next is due
        self.frames, self.time, self.cost, self.due = 0, 0.0, 0.0, 0.0
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
        stored = "Its final plot and summary table are stored below it when it stops."
        text = f"[live memory monitor: {monitor.backend}; a widget that updates while cells run. {stored}]"
        display({"application/vnd.jupyter.widget-view+json": view, "text/plain": text}, raw=True)
        handle = getattr(self.box, "_handle_displayed", None)
        if callable(handle):
            handle()

    def show(self, status: str, live: bool = True) -> None:
        """Show (or, when the final PNG replaces it, hide) the live image; send a frame while it is shown."""
        self.image.layout.display = None if live else "none"
        if live:
            self.send()  # the first one also warms matplotlib up before the thread draws
        self.status.value = status

    def send(self, wait: bool = True) -> bool:
        """Draw and send one frame; never two within 0.25 s (``wait=False``: skip instead of sleeping)."""
        mon = self._monitor()
        if mon is None or (not wait and time.perf_counter() - self.time < MIN_INTERVAL):
            return False
        start, png = time.perf_counter(), mon.png()
        with self._lock:
            if time.perf_counter() - self.time < MIN_INTERVAL:  # never two frames within 0.25 s
                if not wait:
                    return False
                time.sleep(MIN_INTERVAL - (time.perf_counter() - self.time))
            self.image.value = png
            self.time = time.perf_counter()
            self.cost, self.frames = self.time - start, self.frames + 1
        return True

    def gap(self) -> float:
        """Seconds between frames: ``interval``, or 3x the last frame's drawing time (it competes for the GIL), <= 1."""
        mon = self._monitor()
        return min(max(mon.interval if mon is not None else MIN_INTERVAL, 3 * self.cost), 1.0)

    def from_cell(self) -> None:
        """frames="cell": sample and send a frame from the thread running the cell (never sleeps)."""
        mon = self._monitor()
        try:
            if mon is not None and mon.running:
                mon._take_sample()
                self.send(wait=False)
        except Exception as exc:  # noqa: BLE001 - a frame must never break the learner's cell
            mon.errors.append(f"{type(exc).__name__}: {exc}")  # type: ignore[union-attr]
        finally:
            self.due = time.perf_counter() + self.gap()

    def after_mark(self) -> None:
        """A mark in cell mode: its frame now, or at the next operator when the last frame was just sent."""
        if self._hooked and time.perf_counter() - self.time >= MIN_INTERVAL:
            self.from_cell()
        elif self._hooked:
            self.due = self.time + MIN_INTERVAL

    def enter_hook(self) -> None:
        self._hooked, self.due = True, self.time + self.gap()
        enter_mode(self)

    _hooked = False  # entered as a dispatch mode at least once (frames="cell")
    exit_hook = remove_mode  # off this thread's mode stack, by identity

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))
        if time.perf_counter() >= self.due:
            self.from_cell()
        return out
