"""CUDA windows compose: the arithmetic of viewlab's peak ledger, checked without a GPU.

torch.cuda has one peak counter per device for the whole process, and every viewlab window (a
``measure(device="cuda")`` block, a ``MemoryMonitor`` on CUDA, one notebook cell under
``%load_ext viewlab``) resets it when it opens. These tests drive the real ledger and the one CUDA backend
that ``measure`` and the monitor both use, over a small stand-in allocator that keeps the same counters as torch.cuda.memory_stats
(current and peak, block-rounded and requested, reserved). Only the counters are stood in for; the
real CUDA run is in the GPU checks (.ci/gpu-check), which run tests/unit/test_memory.py on a CUDA device.
"""

from __future__ import annotations

import pytest
import torch

from viewlab.memory._cuda import _CudaLedger
from viewlab.memory.backends import CudaBackend

pytestmark = pytest.mark.colab

DEV = torch.device("cuda", 0)  # a name only: nothing here touches CUDA


class StandInAllocator:
    """The counters of PyTorch's caching allocator, for arithmetic: blocks of 512 bytes, 2 MiB segments."""

    def __init__(self) -> None:
        self.c = dict.fromkeys(
            [
                "allocated_bytes.all.current",
                "requested_bytes.all.current",
                "reserved_bytes.all.current",
                "allocated_bytes.all.peak",
                "requested_bytes.all.peak",
                "reserved_bytes.all.peak",
            ],
            0,
        )
        self.resets = 0

    def _bump(self, kind: str, delta: int) -> None:
        cur = f"{kind}_bytes.all.current"
        self.c[cur] += delta
        self.c[f"{kind}_bytes.all.peak"] = max(self.c[f"{kind}_bytes.all.peak"], self.c[cur])

    def alloc(self, nbytes: int) -> int:
        block = -(-nbytes // 512) * 512
        self._bump("allocated", block)
        self._bump("requested", nbytes)
        while self.c["reserved_bytes.all.current"] < self.c["allocated_bytes.all.current"]:
            self._bump("reserved", 2 * 2**20)
        return nbytes

    def free(self, nbytes: int) -> None:
        self.c["allocated_bytes.all.current"] -= -(-nbytes // 512) * 512
        self.c["requested_bytes.all.current"] -= nbytes

    # the two calls the ledger makes
    def stats(self, device: torch.device) -> dict[str, int]:
        assert device == DEV
        return dict(self.c)

    def reset_peaks(self, device: torch.device) -> None:
        self.resets += 1
        for kind in ("allocated", "requested", "reserved"):
            self.c[f"{kind}_bytes.all.peak"] = self.c[f"{kind}_bytes.all.current"]


@pytest.fixture
def gpu():
    allocator = StandInAllocator()
    return allocator, _CudaLedger(allocator)


def _session(ledger: _CudaLedger) -> CudaBackend:
    """What ``measure(device="cuda")`` opens on entry (its numbers are ``since_start()``)."""
    return CudaBackend(DEV, ledger=ledger)


def test_an_inner_window_does_not_erase_the_outer_peak(gpu):
    alloc, ledger = gpu
    outer = _session(ledger)
    big = alloc.alloc(8 * 2**20)
    alloc.free(big)  # the outer window's peak (8 MiB) is now only in torch's peak counter
    inner = _session(ledger)  # ...which this reset would erase without the ledger
    small = alloc.alloc(1024)
    assert inner.since_start().peak == 1024
    inner.close()
    assert outer.since_start().peak == 8 * 2**20, "the outer peak survived the inner reset"
    assert outer.since_start().allocated == small
    outer.close()
    assert ledger.windows == []


def test_without_folding_the_outer_peak_would_be_lost(gpu):
    """The counter-example: torch's own counter after the inner reset no longer holds the outer peak."""
    alloc, ledger = gpu
    outer = _session(ledger)
    alloc.free(alloc.alloc(8 * 2**20))
    _session(ledger).close()
    raw_counter_peak = alloc.c["allocated_bytes.all.peak"] - outer.window.start["allocated_bytes.all.current"]
    assert raw_counter_peak == 0 and outer.since_start().peak == 8 * 2**20


def test_requested_and_block_rounded_bytes_are_both_reported(gpu):
    alloc, ledger = gpu
    session = _session(ledger)
    alloc.alloc(4)  # torch.ones(1) on CUDA: 4 bytes requested, one 512-byte block
    used = session.since_start()
    assert (used.allocated, used.requested) == (512, 4)
    assert (used.peak, used.requested_peak) == (512, 4)
    assert used.reserved == 2 * 2**20


def test_counters_before_keep_the_learners_own_peak(gpu):
    alloc, ledger = gpu
    alloc.free(alloc.alloc(3 * 2**20))  # the learner's own max_memory_allocated: 3 MiB
    session = _session(ledger)
    assert session.counters_before["max_memory_allocated"] == 3 * 2**20
    assert alloc.c["allocated_bytes.all.peak"] == 0, "measure reset the process-global counter"
    assert ledger.process_peak(DEV) == 3 * 2**20, "the process peak is still known to viewlab"


def test_monitor_cell_windows_fold_into_the_monitor_and_a_nested_measure(gpu):
    alloc, ledger = gpu
    source = CudaBackend(DEV, ledger=ledger)  # what the monitor opens at start
    source.begin_window()  # cell 1
    alloc.free(alloc.alloc(5 * 2**20))
    assert source.window_peak() == 5 * 2**20
    source.begin_window()  # cell 2 resets the counter...
    inner = _session(ledger)  # ...and so does a measure() inside it
    alloc.free(alloc.alloc(1 * 2**20))
    inner.close()
    assert source.window_peak() == 1 * 2**20  # cell 2 saw only its own 1 MiB
    assert source.read().peak == 5 * 2**20  # the monitor's running peak kept cell 1's 5 MiB
    source.close()
    assert ledger.windows == []
    assert alloc.resets == 4


def test_process_peak_counts_peaks_erased_by_resets(gpu):
    alloc, ledger = gpu
    for size in (1, 7, 2):
        session = _session(ledger)
        alloc.free(alloc.alloc(size * 2**20))
        session.close()
    assert alloc.c["allocated_bytes.all.peak"] == 2 * 2**20
    assert ledger.process_peak(DEV) == 7 * 2**20
