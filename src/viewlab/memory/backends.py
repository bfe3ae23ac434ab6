"""What can be measured, once: one :class:`Backend` per source (tensor storages, CUDA allocator, process RSS), used
by ``measure`` and ``MemoryMonitor`` alike (the sources are described in :mod:`viewlab.memory`).

>>> backend = open_backend("storages", torch.device("cpu"))
>>> backend.enter_thread(); kept = torch.zeros(4, 3); backend.close()
>>> backend.since_start()
Reading(allocated=48, peak=48, requested=48, requested_peak=48, reserved=None)
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from typing import NamedTuple

import torch

from .._dispatch import enter, leave, remove_mode
from ._cuda import _CUDA_LEDGER, KINDS, LEARNER_COUNTERS, _CudaLedger, _CudaWindow
from ._tracker import _StorageTracker


def rss_bytes() -> int | None:
    """Resident set size of this process in bytes (approximate: interpreter, libraries, caches), or None if unknown.

    >>> isinstance(rss_bytes(), (int, type(None)))
    True
    """
    with contextlib.suppress(OSError, ValueError, IndexError, AttributeError), open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    try:
        import psutil  # optional

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - optional best-effort reading
        return None


class Reading(NamedTuple):
    """Bytes at one moment: allocated and its peak, the same in requested (exact) sizes, reserved (CUDA only)."""

    allocated: int
    peak: int
    requested: int
    requested_peak: int
    reserved: int | None = None


class Backend:
    """One source of memory numbers, from when it is made until :meth:`close`: :meth:`read` gives absolute bytes (the
    monitor's plot), :meth:`since_start` the change (``measure``'s); a *window* is a restartable peak (one cell)."""

    label = ""  # what is measured, e.g. "tensor storages (cpu)": m.backend, the monitor's legend
    line = "allocated"  # the monitor's name for its allocated line
    note = ""  # the caveats measure() reports in m.note
    counters_before: dict[str, int] | None = None  # CUDA: the learner's own counters before viewlab's reset
    tracker: _StorageTracker | None = None  # the dispatch mode, where operators are followed
    start = Reading(0, 0, 0, 0)  # what since_start() subtracts
    _entered: tuple[int, ...] = ()  # the threads (one per cell, in cell mode) entered and not yet left

    def read(self) -> Reading: ...
    def reset_peak(self) -> None: ...
    def begin_window(self) -> None: ...
    def window_peak(self) -> int: ...

    def enter_thread(self) -> None:
        """Follow the operators run on this thread (nothing to do where the backend follows none)."""
        if self.tracker is not None:
            self._entered += (enter(self.tracker),)
            self.tracker.idle = self.tracker.closed

    def exit_thread(self) -> None:
        """Stop following this thread, or (called from another one) the thread that entered last, whose stack keeps
        the tracker, idle, until that thread's next viewlab entry or the end of the cell (``_dispatch.leave``)."""
        if self._entered and self.tracker is not None:
            thread = threading.get_ident() if threading.get_ident() in self._entered else self._entered[-1]
            at = self._entered.index(thread)
            self._entered = self._entered[:at] + self._entered[at + 1 :]
            self.tracker.idle = self.tracker.closed or not self._entered  # counts nothing while it waits for a sweep
            leave(thread, functools.partial(remove_mode, self.tracker))

    def close(self) -> None:
        """Stop measuring (from any thread): leave every thread entered, stop following frees, close CUDA windows."""
        while self._entered:
            self.exit_thread()
        if self.tracker is not None:
            self.tracker.close()

    def since_start(self) -> Reading:
        """The change since the backend was made (peaks: the highest point above the start)."""
        now, (a0, _, r0, _, reserved0) = self.read(), self.start
        reserved = None if now.reserved is None else now.reserved - (reserved0 or 0)
        peaks = max(0, now.peak - a0), max(0, now.requested_peak - r0)
        return Reading(now.allocated - a0, peaks[0], now.requested - r0, peaks[1], reserved)


class StorageBackend(Backend):
    """Exact bytes of tensor storages returned by operators (``device=None``: on every device but meta)."""

    line = "tensor storages made since start"
    note = (
        "counts storages returned by operators run in this thread inside the block; storages made before it, storages "
        "borrowed from NumPy, kernels' internal scratch space and other threads are not counted"
    )

    def __init__(self, device: torch.device | None, log_ops: bool = False, warm: bool = False) -> None:
        if warm:  # the first operator under any TorchDispatchMode imports torch._dynamo (seconds, once per process)
            with _StorageTracker(device) as first:  # so the monitor pays that here, before its timeline starts
                torch.empty(0)
                first.close()
        self.tracker = _StorageTracker(device, log_ops)
        self.label = label_for("storages", device)

    def read(self) -> Reading:
        t = self.tracker
        return Reading(t.current, t.peak, t.current, t.peak)  # storages have exact sizes: nothing is rounded

    def reset_peak(self) -> None:
        self.tracker.peak = self.tracker.current

    def begin_window(self) -> None:
        self.tracker.window_peak = self.tracker.current

    def window_peak(self) -> int:
        return self.tracker.window_peak


class CudaBackend(Backend):
    """The caching allocator's counters, through ledger windows (one more per cell); ``log_ops``: a tracker too."""

    line = "allocated (cuda allocator)"
    note = (
        "allocated = whole allocator blocks (as torch.cuda.memory_allocated counts them), requested = exact sizes; "
        "the peak comes from torch.cuda's process-global peak counter, which measure() reset on entry: "
        "torch.cuda.max_memory_allocated() now reads the peak since then, and m.cuda_counters_before holds what it "
        "read before"
    )

    def __init__(self, device: torch.device, log_ops: bool = False, ledger: _CudaLedger | None = None) -> None:
        self.ledger = ledger if ledger is not None else _CUDA_LEDGER
        real = self.ledger is _CUDA_LEDGER
        self.device = torch.device("cuda", torch.cuda.current_device()) if real and device.index is None else device
        self.label = label_for("cuda", self.device)
        self.tracker = _StorageTracker(device, True) if log_ops else None
        stats = self.ledger.counters.stats(self.device)
        if not stats and real:  # the allocator has not been used yet
            torch.cuda.init()
            stats = self.ledger.counters.stats(self.device)
        self.counters_before = {name: stats.get(key, 0) for name, key in LEARNER_COUNTERS.items()}
        self.window: _CudaWindow = self.ledger.open(self.device)
        self._cell: _CudaWindow | None = None

    def _reading(self, stats: dict[str, int], peak: Callable[[str], int] = lambda key: 0) -> Reading:
        allocated, requested, reserved = (stats.get(f"{kind}_bytes.all.current", 0) for kind in KINDS)
        allocated_peak, requested_peak = (peak(f"{kind}_bytes.all.peak") for kind in ("allocated", "requested"))
        return Reading(allocated, allocated_peak, requested, requested_peak, reserved)

    start = property(lambda self: self._reading(self.window.start))  # type: ignore[assignment]

    def read(self) -> Reading:
        return self._reading(self.ledger.counters.stats(self.device), self.window.peak)

    def reset_peak(self) -> None:
        self.ledger.close(self.window)
        self.window = self.ledger.open(self.device)

    def begin_window(self) -> None:
        self.ledger.close(self._cell)
        self._cell = self.ledger.open(self.device)

    def window_peak(self) -> int:
        return (self._cell or self.window).peak("allocated_bytes.all.peak")

    def close(self) -> None:
        super().close()
        for window in (self.window, self._cell):
            self.ledger.close(window)
        self._cell = None


class RssBackend(Backend):
    """The process's resident memory, polled: a peak between two readings can be missed."""

    label = line = "process RSS (approximate)"
    _peak = _window = 0  # the highest reading since reset_peak() / begin_window()

    def read(self) -> Reading:
        value = rss_bytes() or 0
        self._peak, self._window = max(self._peak, value), max(self._window, value)
        return Reading(value, self._peak, value, self._peak)

    def reset_peak(self) -> None:
        self._peak = 0

    def begin_window(self) -> None:
        self._window = 0

    def window_peak(self) -> int:
        return max(self._window, self.read().allocated)


def label_for(kind: str, device: torch.device | None) -> str:
    """How a backend of ``kind`` on ``device`` is named (also before it exists: a monitor not yet started)."""
    where = "all devices" if device is None else device
    return {"rss": RssBackend.label, "cuda": f"cuda allocator ({where})"}.get(kind, f"tensor storages ({where})")


def open_backend(kind: str, device: torch.device | None, log_ops: bool = False, warm: bool = False) -> Backend:
    """Start measuring with the backend of ``kind`` (``"storages"``, ``"cuda"`` or ``"rss"``) on ``device``."""
    if kind == "rss":
        return RssBackend()
    return CudaBackend(device, log_ops) if kind == "cuda" else StorageBackend(device, log_ops, warm)  # type: ignore[arg-type]
