"""Time several ways of doing one thing side by side, in one run, and report ratios and bandwidth.

Timing the candidates *together*, interleaved in rounds, and reporting each as a **ratio** to a reference
cancels most of what changes between runs (the machine, the load, the clock); **achieved bandwidth** next
to a plain same-bytes copy says how close an operation gets to this machine's memory limit. Timings come
from ``torch.utils.benchmark.Timer`` (it synchronises CUDA and warms up); they vary from run to run by
nature: print them, but assert only orderings with wide margins.

>>> same_bytes_copy(torch.zeros(4))[1]  # the yardstick for 4 floats: 16 bytes read, 16 written
32
"""

from __future__ import annotations

import contextlib
import functools
import html
import inspect
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from viewlab._checks import (
    INT64_MAX,
    entry,
    problem,
    require_allocation,
    require_int,
    require_number,
    require_str,
    require_tensor,
    type_error,
    value_error,
)
from viewlab._dispatch import enter_mode, leave, pending, remove_mode, sweep

__all__ = ["BenchRow", "Comparison", "apart", "compare", "firm", "same_bytes_copy", "torch_alone"]
__all__ += ["MAX_MIN_RUN_TIME", "MAX_TOTAL_SECONDS"]


def _fmt_time(seconds: float) -> str:
    """A duration with three significant digits in s, ms, us or ns.

    >>> _fmt_time(1.5), _fmt_time(0.0025), _fmt_time(3e-9)
    ('1.5 s', '2.5 ms', '3 ns')
    """
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@dataclass(frozen=True)
class BenchRow:
    """One candidate of :func:`compare`: the median and interquartile range of its seconds per call over
    ``runs`` timed blocks, its ``ratio`` to the reference's median (1.0 for the reference itself), and the
    ``bytes_moved`` per call the caller gave (or None) with the achieved ``gb_per_s`` they make (or None).
    """

    name: str
    median_s: float
    iqr_s: float
    runs: int
    ratio: float
    bytes_moved: int | None
    gb_per_s: float | None


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare`: rows in the order given, plus the reference's name.

    >>> c = Comparison((BenchRow("a", 2e-6, 0.0, 1, 1.0, None, None), BenchRow("b", 1e-6, 0.0, 1, 0.5, 1000, 1.0)), "a")
    >>> c["b"].ratio, c.speedup("a", "b")
    (0.5, 2.0)
    """

    rows: tuple[BenchRow, ...]
    reference: str

    def __getitem__(self, name: str) -> BenchRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no candidate named {name!r}; candidates: {[r.name for r in self.rows]}")

    def speedup(self, slow: str, fast: str) -> float:
        """How many times faster ``fast`` ran than ``slow`` (median / median)."""
        return self[slow].median_s / self[fast].median_s

    def _table(self) -> list[tuple[str, ...]]:
        # a ratio or a bandwidth is a conclusion: where firm() does not hold (for the row, or for the reference
        # the ratio divides by) the number is marked, so that the table itself says it supports none
        out = [("candidate", "median", "IQR", f"x {self.reference}", "bytes moved", "GB/s")]
        ref_firm = firm(self[self.reference])
        for r in self.rows:
            shaky = _SPREAD if not firm(r) else ""
            ratio = f"{r.ratio:.3g}" + (shaky or ("" if ref_firm else _SPREAD))
            moved = "-" if r.bytes_moved is None else format(r.bytes_moved, ",")
            rate = "-" if r.gb_per_s is None else format(r.gb_per_s, ".3g") + shaky
            out.append((r.name, _fmt_time(r.median_s), _fmt_time(r.iqr_s), ratio, moved, rate))
        return out

    def _footnote(self) -> str:
        """The line that explains the mark, or "" where no number is marked."""
        marked = any(not firm(r) for r in self.rows)
        return f"{_SPREAD.strip()}: {_SPREAD_MEANS}" if marked else ""

    def __str__(self) -> str:
        table = self._table()
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        return "\n".join(lines + ([self._footnote()] if self._footnote() else []))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head, *body = self._table()
        th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
        note = f"<p>{html.escape(self._footnote())}</p>" if self._footnote() else ""
        return f"<table><tr>{th}</tr>{rows}</table>{note}"


_SPREAD = " (spread)"
_SPREAD_MEANS = "an IQR over a quarter of its median, or under 3 timed blocks (firm() is False): no conclusion"


MAX_MIN_RUN_TIME = 60.0  # seconds per timed block
MAX_TOTAL_SECONDS = 600.0  # rounds x cases x min_run_time


@entry("compare")
def compare(
    cases: Mapping[str, Callable[[], Any]],
    *,
    reference: str | None = None,
    bytes_moved: Mapping[str, int] | None = None,
    rounds: int = 3,
    min_run_time: float = 0.05,
    num_threads: int | None = None,
) -> Comparison:
    """Time every zero-argument callable in ``cases``, interleaved over ``rounds``, side by side.

    ``reference`` (default: the first case) is the denominator of every ratio. ``bytes_moved`` maps names
    to the bytes one call reads plus writes; those rows also get achieved GB/s. Each round runs
    ``blocked_autorange(min_run_time)`` once per case, in order, so slow drifts of the machine hit every
    candidate alike. ``min_run_time``: seconds, at most :data:`MAX_MIN_RUN_TIME`; ``rounds * len(cases) *
    min_run_time`` may not exceed :data:`MAX_TOTAL_SECONDS` (so a call always ends).

    >>> x = torch.ones(1000)
    >>> c = compare({"clone": x.clone, "view": lambda: x.view(10, 100)}, rounds=1, min_run_time=0.01)
    >>> [r.name for r in c.rows], c["clone"].ratio
    (['clone', 'view'], 1.0)
    """
    if not isinstance(cases, Mapping) or not cases:
        example = "E.g. compare({'expand': lambda: x.expand(8, 512), 'repeat': lambda: x.repeat(8, 1)})."
        raise value_error("cases", "a non-empty dict of {name: zero-argument callable}", cases, example)
    for name, fn in cases.items():
        if not isinstance(name, str):
            raise problem(TypeError, f"case names must be str, got {name!r}.")
        if not callable(fn):
            fix = "wrap the expression: lambda: <expression>."
            raise problem(TypeError, f"case {name!r} is a {type(fn).__name__}, not a callable; {fix}")
        try:  # the timer calls each case with no arguments: say so before timing starts
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # builtins without a signature: the timer will tell
            continue
        try:
            signature.bind()
        except TypeError:
            text = f"case {name!r} takes arguments {signature}, but each case is called with none"
            raise problem(TypeError, f"{text}; bind them first: lambda: fn(x).") from None
    reference = next(iter(cases)) if require_str(reference, "reference", allow_none=True) is None else reference
    if reference not in cases:
        raise problem(ValueError, f"reference={reference!r} is not one of the cases {list(cases)}.")
    if bytes_moved is not None and not isinstance(bytes_moved, Mapping):
        raise type_error("bytes_moved", "a dict {case name: bytes per call} or None", bytes_moved)
    bytes_moved = dict(bytes_moved or {})
    for name, nbytes in bytes_moved.items():
        if not isinstance(name, str) or name not in cases:
            raise problem(ValueError, f"bytes_moved names {name!r}, which is not one of the cases {list(cases)}.")
        bytes_moved[name] = require_int(nbytes, f"bytes_moved[{name!r}]", maximum=INT64_MAX)  # NumPy ints too
    rounds = require_int(rounds, "rounds", minimum=1)
    # a number of seconds: Python, NumPy, Fraction, Decimal or a one-element tensor; nan and inf never end
    min_run_time = require_number(min_run_time, "min_run_time", above=0, maximum=MAX_MIN_RUN_TIME)
    budget = rounds * len(cases) * min_run_time
    if budget > MAX_TOTAL_SECONDS:
        text = f"rounds={rounds} x {len(cases)} cases x min_run_time={min_run_time} s would time for at least"
        fix = "use fewer rounds or a shorter min_run_time."
        raise problem(ValueError, f"{text} {budget:,.0f} s, more than {MAX_TOTAL_SECONDS} s; {fix}")
    if num_threads is not None:
        num_threads = require_int(num_threads, "num_threads", minimum=1, maximum=max(1, 4 * (os.cpu_count() or 1)))
    threads = torch.get_num_threads() if num_threads is None else num_threads
    from torch.utils import benchmark  # imported here: it costs ~0.1 s, and `import viewlab` need not pay it

    timers = {n: benchmark.Timer("fn()", globals={"fn": fn}, num_threads=threads, label=n) for n, fn in cases.items()}
    blocks: dict[str, list[Any]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, timer in timers.items():
            blocks[name].append(timer.blocked_autorange(min_run_time=min_run_time))
    merged = {name: benchmark.Measurement.merge(ms)[0] for name, ms in blocks.items()}
    ref_median = merged[reference].median
    rows = []
    for name, m in merged.items():
        nbytes = bytes_moved.get(name)
        gb_per_s = None if nbytes is None else nbytes / m.median / 1e9
        rows.append(BenchRow(name, m.median, m.iqr, len(m.times), m.median / ref_median, nbytes, gb_per_s))
    return Comparison(tuple(rows), reference)


@entry("firm")
def firm(*rows: BenchRow) -> bool:
    """Whether the rows' timings support a conclusion: each over 3 or more timed blocks, each interquartile range
    at most a quarter of its median. The notebooks print a ratio or a trend only where this holds.

    >>> steady = BenchRow("steady", 1e-3, 1e-4, 10, 1.0, None, None)
    >>> firm(steady), firm(steady, BenchRow("noisy", 1e-3, 5e-4, 10, 1.0, None, None))
    (True, False)
    """
    for row in rows:
        if not isinstance(row, BenchRow):
            raise type_error("rows", "BenchRow rows of a Comparison", row, "Pass rows such as compare(...)['expand'].")
    return all(r.iqr_s <= r.median_s / 4 and r.runs >= 3 for r in rows)


@entry("apart")
def apart(a: BenchRow, b: BenchRow) -> bool:
    """Whether two rows' timings differ beyond their spread: both :func:`firm`, and their medians further apart
    than their two interquartile ranges added up. Then the two ranges cannot overlap, since each holds its
    median and reaches at most one IQR from it. Rows that both name a ``bytes_moved`` above 0 are compared per
    byte moved (by bandwidth, so two sizes of one copy compare); others per call. A trend ("falls", "slower")
    needs this; :func:`firm` alone lets a 1 % difference inside a 24 % spread pass.

    >>> a = BenchRow("a", 1.00e-3, 2.4e-4, 10, 1.0, None, None)
    >>> apart(a, BenchRow("b", 0.99e-3, 2.4e-4, 10, 1.0, None, None)), apart(a, BenchRow("c", 0.5e-3, 1e-4, 10, 1.0, None, None))
    (False, True)
    """
    for name, row in (("a", a), ("b", b)):
        if not isinstance(row, BenchRow):
            raise type_error(name, "a BenchRow row of a Comparison", row, "Pass rows such as compare(...)['expand'].")
    if not firm(a, b):
        return False
    per_byte = bool(a.bytes_moved) and bool(b.bytes_moved)  # None or 0: compare per call
    da, db = (a.bytes_moved, b.bytes_moved) if per_byte else (1, 1)
    return abs(a.median_s / da - b.median_s / db) > a.iqr_s / da + b.iqr_s / db


@entry("same_bytes_copy")
def same_bytes_copy(like: torch.Tensor) -> tuple[Callable[[], Any], int]:
    """A callable that copies as many bytes as ``like`` holds into a preallocated buffer, and the bytes it
    moves per call (read + write = ``2 * numel * itemsize``): the bandwidth yardstick.

    >>> fn, nbytes = same_bytes_copy(torch.zeros(4, 256)); nbytes
    8192
    """
    like = require_tensor(like, "like", quantized=True)
    nbytes = like.numel() * like.element_size()
    require_allocation(2 * nbytes, f"two buffers of {nbytes:,} bytes", like.device)
    src = torch.ones(nbytes, dtype=torch.uint8, device=like.device)
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), 2 * nbytes


class _Alone:
    """The block of :func:`torch_alone`: the Python modes on this thread's stacks are taken off at entry and put
    back at exit, each by identity; nothing else is switched off, so modes entered inside work as usual.

    Ended on another thread (a generator suspended inside the block, closed elsewhere), the modes are put back
    by the thread that entered, at its next entry into viewlab or after the cell (:func:`viewlab._dispatch.leave`):
    stacks are per thread, and the other thread's are left as they were."""

    def __init__(self) -> None:
        self._thread: int | None = None
        self._aside: list[Any] = []

    def __enter__(self) -> None:
        if self._thread is not None:
            raise problem(RuntimeError, "this block is already entered; call torch_alone() again for another.")
        if pending():
            sweep()
        stacks = (_get_current_function_mode_stack(), _get_current_dispatch_mode_stack())
        self._aside = [mode for stack in stacks for mode in stack]  # bottom to top, torch-function modes first
        for mode in reversed(self._aside):
            remove_mode(mode)
        self._thread = threading.get_ident()

    def __exit__(self, *exc: object) -> None:
        thread, aside, self._thread, self._aside = self._thread, self._aside, None, []
        if thread is None:
            raise problem(RuntimeError, "__exit__ without __enter__: use it as `with torch_alone(): ...`.")
        leave(thread, functools.partial(_put_back, aside))


def _put_back(aside: list[Any]) -> None:
    """Push the set-aside modes back beneath any entered inside the block and still on (those stay on top)."""
    above = [m for stack in (_get_current_function_mode_stack(), _get_current_dispatch_mode_stack()) for m in stack]
    for mode in reversed(above):
        remove_mode(mode)
    for mode in (*aside, *above):
        enter_mode(mode)


@entry("torch_alone")
def torch_alone() -> contextlib.AbstractContextManager[None]:
    """Time torch's own work: Python modes already on (a watcher, a tracker, a test run's per-cell watch) are set
    aside in the block and put back after; modes entered inside it (the tool being timed) work as usual.

    >>> from viewlab import views_only, watch_broadcasts
    >>> from torch.utils._python_dispatch import _get_current_dispatch_mode
    >>> with views_only(), torch_alone():
    ...     _get_current_dispatch_mode() is None
    True
    >>> seen = []
    >>> with torch_alone(), watch_broadcasts(action=seen.append):  # entered inside: it sees the calls
    ...     i = torch.arange(3)
    ...     causal = i[:, None] >= i[None, :]  # made on purpose: not reported
    ...     _ = torch.zeros(3, 1) - torch.zeros(3)  # an accident: reported
    >>> len(seen), seen[0].split(" (")[0]
    (1, 'watch_broadcasts(): Tensor.sub')
    """
    return _Alone()
