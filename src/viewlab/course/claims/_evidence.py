"""Measuring helpers the claims share: the text of an error, bytes under :func:`viewlab.memory.measure`,
timings through :func:`viewlab.bench.compare`, and the two ways a timing is judged.

>>> error_of(lambda: torch.zeros(2, 3).expand(4, 3))
'RuntimeError: The expanded size of the tensor (4) must match the existing size (2) at non-singleton dimension 0'
>>> row = torch.zeros(1, 4)
>>> bytes_of(lambda: row.expand(3, 4))[:2], bytes_of(lambda: row.repeat(3, 1))[:2]
((0, 0), (48, 48))
>>> which_faster({"median_s": 1e-6, "iqr_s": 0.0}, {"median_s": 3e-6, "iqr_s": 0.0}, round_ratios=[3.0, 2.9])
'a'
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import torch

from viewlab._format import fmt_us
from viewlab.bench import compare
from viewlab.memory import measure

from .model import NOT_CHECKABLE, Verdict


def error_of(fn: Callable[[], Any]) -> str | None:
    """``"TypeName: first sentence"`` of the exception ``fn()`` raises, or None when it runs."""
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the text of any error is the evidence
        return f"{type(err).__name__}: {str(err).split('. ')[0].rstrip('.')}"
    return None


def bytes_of(fn: Callable[[], Any], device: str = "cpu") -> tuple[int, int, Any]:
    """(bytes still held, peak bytes, result) of running ``fn`` under :func:`viewlab.measure`."""
    with measure(device=device) as m:
        out = fn()
    return m.allocated_bytes, m.peak_bytes, out


def timing(fn: Callable[[], Any], min_run_time: float = 0.05) -> dict[str, float]:
    """Median and interquartile range (seconds per call) of one timed block, on one thread
    (``torch.utils.benchmark`` underneath synchronises CUDA, so GPU work is waited for)."""
    (row,) = compare({"fn": fn}, rounds=1, min_run_time=min_run_time, num_threads=1).rows
    return {"median_s": row.median_s, "iqr_s": row.iqr_s, "runs": row.runs}


def paired_timings(
    fa: Callable[[], Any], fb: Callable[[], Any], rounds: int = 5, min_run_time: float = 0.02
) -> tuple[dict[str, float], dict[str, float], list[float]]:
    """Time two candidates in alternating rounds (so a burst of load hits both). Returns, for ``fa`` and
    for ``fb``, the median over the rounds of each round's median and interquartile range, and per
    round the ratio of their medians (``fb`` over ``fa``): a difference is real only if every round
    agrees on it. Each round is one :func:`viewlab.bench.compare` with ``fa`` as the reference."""
    medians: dict[str, list[float]] = {"a": [], "b": []}
    iqrs: dict[str, list[float]] = {"a": [], "b": []}
    runs = {"a": 0, "b": 0}
    ratios = []
    for _ in range(rounds):
        c = compare({"a": fa, "b": fb}, reference="a", rounds=1, min_run_time=min_run_time, num_threads=1)
        for key in ("a", "b"):
            medians[key].append(c[key].median_s)
            iqrs[key].append(c[key].iqr_s)
            runs[key] += c[key].runs
        ratios.append(round(c["b"].ratio, 3))
    out = []
    for key in ("a", "b"):
        med = float(torch.tensor(medians[key], dtype=torch.float64).quantile(0.5))
        iqr = float(torch.tensor(iqrs[key], dtype=torch.float64).quantile(0.5))
        out.append({"median_s": med, "iqr_s": iqr, "runs": runs[key]})
    return out[0], out[1], ratios


def which_faster(
    a: Mapping[str, float], b: Mapping[str, float], margin: float = 1.25, round_ratios: list[float] | None = None
) -> str:
    """Compare two timings with their spread: ``"a"`` or ``"b"`` (faster by ``margin``), ``"same"``
    (within 20 %) or ``"unclear"`` (the spread exceeds the difference).

    With ``round_ratios`` (b's median over a's, per alternating round, see :func:`paired_timings`), a
    difference counts only if every round shows it: rounds that disagree mean the spread exceeds the
    difference. Without them, the medians must differ by more than the interquartile ranges
    (taken as median +- IQR/2) allow.
    """
    if round_ratios:
        if min(round_ratios) >= margin:
            return "a"
        if max(round_ratios) <= 1 / margin:
            return "b"
        if all(1 / 1.2 <= r <= 1.2 for r in round_ratios):
            return "same"
        return "unclear"
    gap = b["median_s"] - a["median_s"]
    spread = (a["iqr_s"] + b["iqr_s"]) / 2
    ratio = b["median_s"] / a["median_s"]
    if abs(gap) > spread and (ratio >= margin or ratio <= 1 / margin):
        return "a" if gap > 0 else "b"
    relative_spread = a["iqr_s"] / a["median_s"] + b["iqr_s"] / b["median_s"]
    if abs(ratio - 1) <= 0.2 and relative_spread <= 0.5:
        return "same"
    return "unclear"


def judge_claimed_times(facts: Mapping[str, Any], claimed: Mapping[str, float]) -> Verdict:
    """True when every measured median is within 2x of the claimed time, false when one is off by more
    than 5x beyond its spread, otherwise not checkable (spread or hardware could explain the gap)."""
    within, off, parts = [], [], []
    for name, claim_s in claimed.items():
        med, iqr = facts[f"{name}_median_s"], facts[f"{name}_iqr_s"]
        low, high = max(med - iqr, 1e-12), med + iqr  # the measured time, with its spread
        within.append(0.5 * claim_s <= med <= 2 * claim_s and iqr <= med)
        if low > 5 * claim_s or high < claim_s / 5:
            off.append(name)
        parts.append(f"{name}: claimed {fmt_us(claim_s)}, measured {fmt_us(med)} (IQR {fmt_us(iqr)})")
    detail = "; ".join(parts)
    if off:
        return "false", f"{', '.join(off)} off by more than 5x even at the edges of the spread: {detail}"
    if all(within):
        return "true", f"within 2x of the claimed times: {detail}"
    return NOT_CHECKABLE, f"spread exceeds the difference, or the gap is within what other hardware explains: {detail}"


def small_shape_pairs() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every pair of shapes with 0-3 dimensions of size 0-3 (85 x 85 pairs)."""
    shapes = [s for n in range(4) for s in itertools.product(range(4), repeat=n)]
    return list(itertools.product(shapes, shapes))
