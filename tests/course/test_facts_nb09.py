"""Notebook 09 (teaching pass): the rule its timing verdicts follow (sections 5 and 6)."""

from __future__ import annotations

import pytest

from viewlab.course.bench import BenchRow, firm

pytestmark = pytest.mark.nb09


def test_timing_verdict_of_the_notebook_comes_out_both_ways():
    # sections 5 and 6 conclude only where viewlab.course.bench.firm holds
    steady = BenchRow("steady", median_s=1e-3, iqr_s=1e-4, runs=10, ratio=1.0, bytes_moved=None, gb_per_s=None)
    noisy = BenchRow("noisy", median_s=1e-3, iqr_s=2e-3, runs=10, ratio=1.0, bytes_moved=None, gb_per_s=None)
    assert firm(steady) and firm(steady, steady)
    assert not firm(noisy) and not firm(steady, noisy)
    wide = BenchRow("wide", median_s=1e-3, iqr_s=5e-4, runs=10, ratio=1.0, bytes_moved=None, gb_per_s=None)
    assert not firm(wide)  # an IQR of half the median is too wide for a conclusion too
    few = BenchRow("few", median_s=1e-3, iqr_s=1e-4, runs=2, ratio=1.0, bytes_moved=None, gb_per_s=None)
    assert not firm(few) and not firm(steady, few)  # 1-2 timed blocks support no conclusion either
