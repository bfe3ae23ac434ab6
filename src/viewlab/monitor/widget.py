"""The monitor's live view (:mod:`viewlab.monitor`): an ``ipywidgets.Image`` (no ipympl: it works on Colab), three
buttons and a status line, displayed once. It only shows what it is given: :meth:`LiveView.put` sends one PNG, never
two within :data:`MIN_INTERVAL` s; when frames are drawn and from which thread they are sent is decided by
:mod:`.frames`. No frame is sent before the monitor has two samples (one sample draws no line: the plot would be
empty axes): until then the image is hidden and the status line says it waits for them.

>>> MIN_INTERVAL
0.25
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import MemoryMonitor

MIN_INTERVAL = 0.25  # seconds: at most 4 frames (and samples) a second


def _click(ref: weakref.ReferenceType[MemoryMonitor], action: str, _button: Any = None) -> None:
    mon = ref()
    if mon is not None and not (action == "start" and mon.running):
        {"start": mon.start, "stop": functools.partial(mon.stop, show=False), "reset": mon.reset}[action]()


class LiveView:
    """The widget of one monitor, displayed when it is made; :meth:`put` sends a frame, :meth:`send` draws one here
    and sends it (at start, stop and reset: calls the learner made, never between two of the learner's bytecodes).

    Sending from a thread other than the cell's is what ipywidgets documents ("Updating a widget in the
    background"): the comm message is stamped with the running cell's request, which ipykernel 6 keeps for the
    whole kernel and ipykernel 7 resolves for threads the learner starts.
    """

    def __init__(self, monitor: MemoryMonitor) -> None:
        import ipywidgets as w
        from IPython.display import display

        # held weakly (the buttons too): ipywidgets keeps every widget alive; a dropped monitor must be collectable
        self._monitor = weakref.ref(monitor)
        self.frames, self.time = 0, 0.0  # frames sent, and perf_counter() when the last one was sent
        self.warmed: float | None = None  # perf_counter() when matplotlib's first (unsent) draw ended
        # the status shown; the image hidden until a first frame is put; whether samples are coming
        self._status, self._waiting, self._sampling = "", False, True
        self._lock = threading.Lock()  # not the monitor's lock: a frame never waits for a sample
        self.image = w.Image(format="png", layout=w.Layout(width="800px"))  # the PNG at 100 %: plot.DPI
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

    def show(self, status: str, live: bool = True, sampling: bool = True) -> None:
        """Show (or, when the final PNG replaces it, hide) the live image; send a frame while it is shown.
        ``sampling``: whether samples are coming (what the status line says while there are too few to draw)."""
        with self._lock:
            self._status, self._waiting, self._sampling = status, False, sampling
            self.image.layout.display = None if live else "none"
            self.status.value = status
        if live:
            self.send()

    def send(self) -> bool:
        """Draw a frame on this thread and send it (waiting out :data:`MIN_INTERVAL` since the last one). With fewer
        than two samples there is no line to draw: the image is hidden, the status line says the monitor waits for
        its first samples, and the first frame :meth:`put` later shows the image again."""
        mon = self._monitor()
        if mon is None:
            return False
        with mon._lock:
            drawable = len(mon.samples) >= 2
        if drawable:
            return self.put(mon.png())
        if self.warmed is None:  # matplotlib's first draw (seconds in a fresh kernel) here, before t = 0, unsent
            mon.png()
            self.warmed = time.perf_counter()
        with self._lock:
            self._waiting = True
            self.image.layout.display = "none"
            wait = f"waiting for the first samples (one every {mon.interval:g} s)" if self._sampling else "no samples"
            self.status.value = f"{self._status} - {wait}"
        return False

    def put(self, png: bytes, wait: bool = True) -> bool:
        """Send ``png`` as the next frame; never two within :data:`MIN_INTERVAL` s (``wait=False``: skip instead of
        sleeping). Returns whether it was sent."""
        with self._lock:
            early = MIN_INTERVAL - (time.perf_counter() - self.time)
            if early > 0:
                if not wait:
                    return False
                time.sleep(early)
            self.image.value = png
            if self._waiting:  # the first frame after the wait: show the image, drop "waiting"
                self._waiting = False
                self.image.layout.display = None
                self.status.value = self._status
            self.time, self.frames = time.perf_counter(), self.frames + 1  # counted once it shows
        return True
