"""The monitor's live view (:mod:`viewlab.monitor`): an ``ipywidgets.Image`` (no ipympl: it works on Colab), three
buttons, a PNG per frame, never two within :data:`MIN_INTERVAL` s. Colab shows no widget update sent from a background
thread (googlecolab/colabtools#3373), so with ``frames="cell"`` frames are sent from the cell's own thread: by a timer
signal (:class:`_Timer`, ``SIGALRM``) between two bytecodes, also while the cell sleeps or runs pure Python, where
this is the main thread of a POSIX process; elsewhere (Windows, another thread) by this view as a dispatch mode,
between two operators -- except on the CUDA backend, which follows no operators unless ``frames="ops"`` asks for it.

>>> MIN_INTERVAL
0.25
"""

from __future__ import annotations

import functools
import signal
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from torch.utils._python_dispatch import TorchDispatchMode

from ..memory.backends import enter, leave

if TYPE_CHECKING:
    from . import MemoryMonitor

MIN_INTERVAL = 0.25  # seconds: at most 4 frames (and samples) a second
_SIG = getattr(signal, "SIGALRM", None)  # POSIX only
# Never draw a frame in the middle of these (the frame itself uses them; the monitor's own code holds its locks):
_NOT_INSIDE = ("matplotlib", "PIL", "ipywidgets", "traitlets", "comm", "ipykernel", "zmq", "viewlab.monitor",
               "viewlab.memory", "viewlab.draw")  # fmt: skip


class _Timer:
    """``frames="cell"`` on the main thread: ``setitimer(ITIMER_REAL)`` delivers ``SIGALRM``; the handler runs between
    two bytecodes (also in ``time.sleep``: Python resumes the sleep after it) and sends a frame when one is due. System
    calls are restarted, not interrupted (``siginterrupt(False)``). The handler and timer found (ipykernel sets
    neither; a test runner's timeout may) are chained to -- their alarm still fires on time -- and restored exactly."""

    owner: LiveView | None = None  # one view at a time owns the signal; the others use the dispatch mode

    @classmethod
    def start(cls, view: LiveView) -> bool:
        if _SIG is None or cls.owner is not None or threading.current_thread() is not threading.main_thread():
            return False
        cls.owner, cls.closing, cls.prev = view, False, signal.signal(_SIG, cls._tick)
        signal.siginterrupt(_SIG, False)
        delay, cls.prev_every = signal.setitimer(signal.ITIMER_REAL, 0)  # the timer found (0: none)
        cls.prev_due = time.perf_counter() + delay if delay else None
        cls._arm()
        return True

    @classmethod
    def _arm(cls, soon: float = 0.0) -> None:
        now, view = time.perf_counter(), cls.owner
        when = now + soon if soon else max(view.due, now) if view is not None else now
        when = min(when, cls.prev_due) if cls.prev_due is not None else when
        signal.setitimer(signal.ITIMER_REAL, max(when - now, 1e-3))

    @classmethod
    def _tick(cls, signum: int, frame: Any) -> None:
        now, view = time.perf_counter(), cls.owner
        if cls.closing or view is None:
            return cls.stop(view)
        chain = cls.prev_due is not None and now >= cls.prev_due  # the timer found is due: its handler runs
        if chain:
            cls.prev_due = now + cls.prev_every if cls.prev_every else None
        busy, f = False, frame  # interrupted inside what drawing uses, between the learner's code and here: 20 ms later
        while f is not None and not busy and (name := str(f.f_globals.get("__name__", ""))) != "__main__":
            busy, f = name.startswith(_NOT_INSIDE), f.f_back  # the kernel's code around the cell does not count
        try:
            if not busy and now >= view.due:
                view.from_cell()
        finally:  # a KeyboardInterrupt raised while drawing still leaves the timer running (stop() restores it)
            cls._arm(0.02 if busy else 0.0)
        if chain and callable(cls.prev):
            cls.prev(signum, frame)

    @classmethod
    def stop(cls, view: LiveView | None) -> None:
        """Give the signal back (from another thread: the next tick on the main thread does it)."""
        if cls.owner is not view or _SIG is None:
            return
        if threading.current_thread() is not threading.main_thread():
            cls.closing = True  # only the main thread may set a handler
            return signal.setitimer(signal.ITIMER_REAL, 1e-3)  # type: ignore[return-value]
        signal.setitimer(signal.ITIMER_REAL, 0)
        if signal.getsignal(_SIG) == cls._tick:  # another handler installed after ours stays
            signal.signal(_SIG, cls.prev if cls.prev is not None else signal.SIG_DFL)
        if cls.prev_due is not None:
            signal.setitimer(signal.ITIMER_REAL, max(cls.prev_due - time.perf_counter(), 1e-6), cls.prev_every)
        cls.owner = None


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
        """A mark in cell mode: its frame now, or at the next tick or operator when the last frame was just sent."""
        if self._hooked and time.perf_counter() - self.time >= MIN_INTERVAL:
            self.from_cell()
        elif self._hooked:
            self.due = self.time + MIN_INTERVAL

    def enter_hook(self) -> None:
        """Send frames from this thread from now on: the timer signal, or the dispatch mode (see the module doc)."""
        mon = self._monitor()
        self._hooked, self.due = True, self.time + self.gap()
        if mon is not None and (mon.frames_from == "ops" or not (_Timer.start(self) or mon.backend_kind == "cuda")):
            self._thread = enter(self)

    def exit_hook(self) -> None:
        """Stop sending frames from the cell's thread (also when called from another thread)."""
        _Timer.stop(self)
        thread, self._thread = self._thread, None
        if thread is not None:
            leave(self, thread)

    _hooked = False  # frames from the cell's thread at least once (frames="cell" or "ops")
    _thread: int | None = None  # the thread whose stack holds this view as a dispatch mode

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))
        if time.perf_counter() >= self.due:
            self.from_cell()
        return out
