"""CUDA peak windows (see :mod:`viewlab.memory`): each window's reset of torch.cuda's process-global peak counter first
folds that peak into the windows open on the device and into ``process_peaks``. The counters are one small object
(``stats``, ``reset_peaks``), so tests/unit/test_cuda_windows.py needs no GPU.

>>> class Counters:  # a stand-in allocator with one peak counter
...     peak = 0
...     def stats(self, device): return {"allocated_bytes.all.peak": self.peak}
...     def reset_peaks(self, device): self.peak = 0
>>> ledger = _CudaLedger(Counters())
>>> outer = ledger.open("cuda:0"); ledger.counters.peak = 100  # a peak inside the outer window...
>>> inner = ledger.open("cuda:0")  # ...which this reset erases from the counter, not from the window
>>> outer.peak("allocated_bytes.all.peak"), ledger.counters.peak, ledger.process_peak("cuda:0")
(100, 0, 100)
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import torch

KINDS = ("allocated", "requested", "reserved")  # the allocator's three byte counters, in memory_stats keys
LEARNER_COUNTERS = {  # the learner's own torch.cuda counters (m.cuda_counters_before), by their memory_stats keys
    "memory_allocated": "allocated_bytes.all.current",
    "max_memory_allocated": "allocated_bytes.all.peak",
    "memory_reserved": "reserved_bytes.all.current",
    "max_memory_reserved": "reserved_bytes.all.peak",
}


class _CudaWindow:
    """One open measurement window on a CUDA device (a ``measure`` block, a monitor, a cell)."""

    def __init__(self, ledger: _CudaLedger, device: torch.device, start: dict[str, int]) -> None:
        self.ledger, self.device, self.start = ledger, device, start  # start: the counters when the window opened
        self.folded: dict[str, int] = {}  # peaks reached inside the window before a later reset

    def peak(self, key: str) -> int:
        """Highest value of the peak counter ``key`` since the window opened, across resets."""
        return max(self.folded.get(key, 0), self.ledger.counters.stats(self.device).get(key, 0))


class _CudaLedger:
    """Process-wide record of viewlab's open CUDA windows."""

    def __init__(self, counters: Any = None) -> None:
        real = SimpleNamespace(stats=torch.cuda.memory_stats, reset_peaks=torch.cuda.reset_peak_memory_stats)
        self.counters = counters if counters is not None else real  # the two calls the ledger makes
        self.windows: list[_CudaWindow] = []
        self.process_peaks: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def open(self, device: torch.device) -> _CudaWindow:
        with self._lock:
            stats = self.counters.stats(device)
            for key in (f"{kind}_bytes.all.peak" for kind in KINDS):
                value, slot = stats.get(key, 0), (str(device), key)
                self.process_peaks[slot] = max(self.process_peaks.get(slot, 0), value)
                for window in (w for w in self.windows if w.device == device):
                    window.folded[key] = max(window.folded.get(key, 0), value)
            self.counters.reset_peaks(device)
            self.windows.append(window := _CudaWindow(self, device, dict(self.counters.stats(device))))
            return window

    def close(self, window: _CudaWindow | None) -> None:
        with self._lock:  # None (no window open) closes nothing
            self.windows = [w for w in self.windows if w is not window]

    def process_peak(self, device: torch.device, key: str = "allocated_bytes.all.peak") -> int:
        """The process's peak of ``key`` on ``device``, counting the peaks that viewlab's resets erased."""
        with self._lock:
            return max(self.process_peaks.get((str(device), key), 0), self.counters.stats(device).get(key, 0))


_CUDA_LEDGER = _CudaLedger()
