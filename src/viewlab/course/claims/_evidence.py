"""Measuring helpers the claims share: the text of an error, bytes under :func:`viewlab.memory.measure`,
timings in blocks of equal length, the two ways a timing is judged, the aten operators a call
runs (:class:`OpNames`), and the inputs and shape questions more than one claim asks.

>>> error_of(lambda: torch.zeros(2, 3).expand(4, 3))
'RuntimeError: The expanded size of the tensor (4) must match the existing size (2) at non-singleton dimension 0'
>>> row = torch.zeros(1, 4)
>>> bytes_of(lambda: row.expand(3, 4))[:2], bytes_of(lambda: row.repeat(3, 1))[:2]
((0, 0), (48, 48))
>>> stretches((1, 4), (3, 4)), stretches((3, 4), (1, 3, 4))
(True, False)
>>> which_faster({"median_s": 1e-6, "iqr_s": 0.0}, {"median_s": 3e-6, "iqr_s": 0.0}, round_ratios=[3.0, 2.9])
'a'
>>> nothing_tried("no operation named")[0], same_result(torch.ones(2), torch.ones(2) + 1e-7)
('not checkable here', True)
"""

from __future__ import annotations

import gc
import itertools
import math
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from viewlab.course.bench import torch_alone
from viewlab.memory import measure

from .model import NOT_CHECKABLE, Facts, Verdict


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


#: Timed blocks per round and candidate. One block has no spread (its interquartile range is 0 by construction), so
#: every timing here runs several blocks of equal length per round, and its spread is taken over all of them.
BLOCKS_PER_ROUND = 5


def _seconds_per_call(fn: Callable[[], Any], number: int) -> float:
    """One timed block: ``number`` calls of ``fn`` on one thread, garbage collection off (as ``timeit`` does),
    CUDA waited for at both ends so GPU work is in the time."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() and torch.cuda.is_initialized() else (lambda: None)
    threads, collecting = torch.get_num_threads(), gc.isenabled()
    torch.set_num_threads(1)
    gc.disable()
    try:
        sync()
        start = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        return (time.perf_counter() - start) / number
    finally:
        torch.set_num_threads(threads)
        if collecting:
            gc.enable()


def _block_length(fn: Callable[[], Any], seconds: float) -> int:
    """Calls per block so that one block lasts about ``seconds`` (at least one call); the estimate warms up."""
    number, took = 1, 0.0
    while number <= 10**7:
        took = _seconds_per_call(fn, number) * number
        if took >= seconds / 10:
            break
        number *= 10
    return max(1, round(number * seconds / max(took, 1e-12)))


def _quartiles(times: list[float]) -> tuple[float, float]:
    """(median, interquartile range) of per-call times, in seconds."""
    t = torch.tensor(times, dtype=torch.float64)
    return float(t.quantile(0.5)), float(t.quantile(0.75) - t.quantile(0.25))


def timing(fn: Callable[[], Any], min_run_time: float = 0.05, rounds: int = 3) -> dict[str, float]:
    """Median and interquartile range (seconds per call) over every timed block of ``rounds`` rounds sharing
    ``min_run_time``, :data:`BLOCKS_PER_ROUND` blocks of equal length a round, on one thread, torch alone
    (CUDA is synchronised at both ends of a block, so GPU work is waited for). ``runs`` counts the
    blocks; ``fastest_s`` is the fastest round's median: load only ever adds time, so it is the estimate a busy
    machine inflates least."""
    blocks, medians = [], []
    for _ in range(rounds):
        with torch_alone():
            number = _block_length(fn, min_run_time / rounds / BLOCKS_PER_ROUND)
            these = [_seconds_per_call(fn, number) for _ in range(BLOCKS_PER_ROUND)]
        blocks += these
        medians.append(_quartiles(these)[0])
    med, iqr = _quartiles(blocks)
    return {"median_s": med, "iqr_s": iqr, "runs": len(blocks), "fastest_s": min(medians)}


def paired_timings(
    fa: Callable[[], Any], fb: Callable[[], Any], rounds: int = 5, min_run_time: float = 0.02
) -> tuple[dict[str, float], dict[str, float], list[float]]:
    """Time two candidates in rounds, their blocks interleaved (a b a b ..., and b a b a ... every other round),
    so neither always runs first and a burst of load hits both. Returns, for ``fa`` and for ``fb``, the median
    and interquartile range over all their blocks (:data:`BLOCKS_PER_ROUND` a round, ``min_run_time`` seconds
    a round for each), and per round the ratio of their medians (``fb`` over ``fa``): a difference is real
    only if every round agrees on it."""
    fns = {"a": fa, "b": fb}
    blocks: dict[str, list[float]] = {"a": [], "b": []}
    ratios = []
    for r in range(rounds):
        with torch_alone():
            number = {k: _block_length(f, min_run_time / BLOCKS_PER_ROUND) for k, f in fns.items()}
            these: dict[str, list[float]] = {"a": [], "b": []}
            order = ("a", "b") if r % 2 == 0 else ("b", "a")
            for _ in range(BLOCKS_PER_ROUND):
                for key in order:
                    these[key].append(_seconds_per_call(fns[key], number[key]))
        for key in ("a", "b"):
            blocks[key] += these[key]
        ratios.append(round(_quartiles(these["b"])[0] / _quartiles(these["a"])[0], 3))
    out = []
    for key in ("a", "b"):
        med, iqr = _quartiles(blocks[key])
        out.append({"median_s": med, "iqr_s": iqr, "runs": len(blocks[key])})
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


def fmt_us(seconds: float) -> str:
    """A short duration in microseconds below a millisecond, else milliseconds (tables of timings).

    >>> fmt_us(2.5e-5), fmt_us(0.0125)
    ('25.0 us', '12.50 ms')
    """
    return f"{seconds * 1e6:,.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:,.2f} ms"


def fmt_spread(seconds: float) -> str:
    """An interquartile range as :func:`fmt_us` writes it, or in nanoseconds where that would
    round a measured spread to "0.0 us" (which reads as no spread at all).

    >>> fmt_spread(2.2e-8), fmt_spread(1.5e-6)
    ('22 ns', '1.5 us')
    """
    return f"{seconds * 1e9:,.0f} ns" if 0 < seconds < 5e-8 else fmt_us(seconds)


def judge_claimed_times(facts: Mapping[str, Any], claimed: Mapping[str, float]) -> Verdict:
    """True when every measured median is within 2x of the claimed time, false when one is off by more
    than 5x beyond its spread, otherwise not checkable (spread or hardware could explain the gap)."""
    within, off, parts = [], [], []
    for name, claim_s in claimed.items():
        med, iqr = facts[f"{name}_median_s"], facts[f"{name}_iqr_s"]
        low, high = max(med - iqr, 1e-12), med + iqr  # the measured time, with its spread
        if facts.get(f"{name}_fastest_s"):  # the fastest round: load only adds time, so a cost at least this
            low = max(low, facts[f"{name}_fastest_s"] / 2)  # large, halved for what a quieter machine could do
        within.append(0.5 * claim_s <= med <= 2 * claim_s and iqr <= med)
        if low > 5 * claim_s or high < claim_s / 5:
            off.append(name)
        parts.append(f"{name}: claimed {fmt_us(claim_s)}, measured {fmt_us(med)} (IQR {fmt_spread(iqr)})")
    detail = "; ".join(parts)
    if off:
        return "false", f"{', '.join(off)} off by more than 5x even at the edges of the spread: {detail}"
    if all(within):
        return "true", f"within 2x of the claimed times: {detail}"
    return NOT_CHECKABLE, f"spread exceeds the difference, or the gap is within what other hardware explains: {detail}"


def nothing_tried(what: str) -> Verdict:
    """The verdict for empty or degenerate evidence: nothing was tried, so nothing is known either way
    (``all([])`` is True, but an empty list is no evidence)."""
    return NOT_CHECKABLE, f"nothing was measured ({what}): no evidence either way; run the evidence on some inputs"


def no_elements(what: str) -> Verdict:
    """The verdict for a result of 0 elements: with no element there is no byte to copy, share or compare, so
    "0 B", "the same storage" and "equal values" hold of any operation and say nothing about this one."""
    return nothing_tried(f"{what} has 0 elements: no byte to copy, share or compare")


def not_the_same_work(what: str) -> Verdict:
    """The verdict when two timed paths do not compute the same thing: their costs are not comparable."""
    return NOT_CHECKABLE, f"the two paths compared do not compute the same result ({what}), so their costs say nothing"


#: float32 sums of the same terms in another order differ by a few units in the last place (about 1e-7
#: relative); two ways of computing one result count as the same within this tolerance, and no wider.
SAME_RESULT_TOL = {"rtol": 1e-5, "atol": 1e-6}


def same_result(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do two ways of computing one result agree (same shape, values within :data:`SAME_RESULT_TOL`)?"""
    return a.shape == b.shape and bool(torch.allclose(a, b, **SAME_RESULT_TOL))


def small_shape_pairs() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every pair of shapes with 0-3 dimensions of size 0-3 (85 x 85 pairs)."""
    shapes = [s for n in range(4) for s in itertools.product(range(4), repeat=n)]
    return list(itertools.product(shapes, shapes))


def storage_call(fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """``fn()`` and the first sentence of the first warning it gives. Torch warns about ``Tensor.storage()``
    once per process unless told to warn always: the flag is set for the call and restored after."""
    always = torch.storage._get_always_warn_typed_storage_removal()
    torch.storage._set_always_warn_typed_storage_removal(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn()
    finally:
        torch.storage._set_always_warn_typed_storage_removal(always)
    return out, (str(caught[0].message).split(".")[0] if caught else None)


class OpNames(torch.utils._python_dispatch.TorchDispatchMode):
    """Records every aten operator run inside it: ``names`` (``"expand"``, ``"bmm"``...) and, per call, the
    tensor arguments (``calls``: name -> list of argument tuples), to ask which work an operation does."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.calls: dict[str, list[tuple[Any, ...]]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        name = func.__name__.split(".")[0]
        self.names.append(name)
        self.calls.setdefault(name, []).append(args)
        return func(*args, **(kwargs or {}))


def stretches(src: tuple[int, ...], size: tuple[int, ...]) -> bool:
    """Does expanding ``src`` to ``size`` repeat some element (a size-1 or new dimension grown past 1)?"""
    padded = (1,) * (len(size) - len(src)) + tuple(src)
    return any(a == 1 and b > 1 for a, b in zip(padded, size)) and math.prod(size) > 0


def grows(src: tuple[int, ...], size: tuple[int, ...]) -> bool:
    """Does expanding ``src`` to ``size`` grow a size-1 or new dimension past 1 (even when ``size`` has 0
    elements, where :func:`stretches` says no: nothing is repeated)?"""
    padded = (1,) * (len(size) - len(src)) + tuple(src)
    return any(a == 1 and b > 1 for a, b in zip(padded, size))


def source_layouts(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """Zeros of ``shape`` in the layouts a source comes in: ``contiguous``; ``transposed`` (made as the reversed
    shape, then permuted back; 2 or more dims); ``strided`` (every other element of the last dim; 1 or more
    dims). Where a layout has unit strides after all (size-1 dims), it is still tried: it is contiguous then."""
    out = {"contiguous": torch.zeros(shape)}
    if len(shape) >= 2:
        out["transposed"] = torch.zeros(shape[::-1]).permute(*reversed(range(len(shape))))
    if len(shape) >= 1:
        out["strided"] = torch.zeros(*shape[:-1], 2 * shape[-1])[..., ::2]
    return out


def attention_inputs(batch: int, tokens: int, width: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Seeded input (batch, tokens, width) and the two projection weights of an attention layer."""
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, tokens, width, generator=gen),
        torch.randn(3 * width, width, generator=gen) / width**0.5,
        torch.randn(width, width, generator=gen) / width**0.5,
    )


def best_device() -> str:
    """``"cuda"`` where a GPU is present, else ``"cpu"`` (memory claims are measured where the article measured)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def graph_nodes(t: torch.Tensor) -> list[str]:
    """Sorted class names of every autograd node behind ``t`` (its grad_fn and all it leads to)."""
    seen, todo, names = set(), [t.grad_fn], []
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        todo += [n for n, _ in node.next_functions]
    return sorted(names)


def expand_result(shape: tuple[int, ...], size: tuple[int, ...]) -> Facts:
    """``{"error", "shape"}`` of expanding a tensor of ``shape`` of ones to ``size``."""
    err = error_of(lambda: torch.ones(shape).expand(*size))
    return {"error": err, "shape": None if err else tuple(torch.ones(shape).expand(*size).shape)}


#: Operations tried on a contiguous tensor and on its transpose (is each always a view, or always a copy?).
VIEW_OR_COPY_OPS = {
    "reshape(-1)": lambda t: t.reshape(-1),
    "flatten()": lambda t: t.flatten(),
    "contiguous()": lambda t: t.contiguous(),
    "to(torch.float32)": lambda t: t.to(torch.float32),
    "to(torch.float64)": lambda t: t.to(torch.float64),
    "expand(2, *shape)": lambda t: t.expand(2, *t.shape),
    "clone()": lambda t: t.clone(),
}


#: Column 0 of a (3, 4) tensor, as a bool mask (for the masked writes of :data:`INPLACE_OPS`).
_COLUMN0 = torch.zeros(3, 4, dtype=torch.bool).index_fill_(1, torch.tensor([0]), True)

#: In-place operations tried on an expanded tensor (do they reach the original, refuse, or warn?).
INPLACE_OPS = {
    "add_(1)": lambda e: e.add_(1),
    "mul_(2)": lambda e: e.mul_(2),
    "copy_(ones)": lambda e: e.copy_(torch.ones(3, 4)),
    "fill_(5)": lambda e: e.fill_(5),
    "fill_(tensor(5))": lambda e: e.fill_(torch.tensor(5.0)),
    "zero_()": lambda e: e.zero_(),
    "e[0, 0] = 3": lambda e: e.__setitem__((0, 0), 3.0),
    "e[:, 0] = 3": lambda e: e.__setitem__((slice(None), 0), 3.0),
    "masked_fill_(mask, 3)": lambda e: e.masked_fill_(_COLUMN0, 3.0),
    "e[mask] = 3": lambda e: e.__setitem__(_COLUMN0, 3.0),
}


#: Blocks of clip code on (frames, features) and one (1, features) row: each names what expand is compared with
#: (``"repeat"``, or ``"broadcasting"``: the same code with no expand and no repeat), then that code, then expand's.
CLIP_BLOCKS = {
    "add to every frame": (
        "repeat",
        lambda fr, row: fr + row.repeat(len(fr), 1),
        lambda fr, row: fr + row.expand_as(fr),
    ),
    "mean over frames": (
        "repeat",
        lambda fr, row: row.repeat(len(fr), 1).mean(0),
        lambda fr, row: row.expand_as(fr).mean(0),
    ),
    "broadcasting instead": ("broadcasting", lambda fr, row: fr + row, lambda fr, row: fr + row.expand_as(fr)),
}


#: Ways to reach a tensor's storage pointer: the article's and the current one.
STORAGE_CALLS = {
    "storage": lambda t: t.storage().data_ptr(),
    "untyped_storage": lambda t: t.untyped_storage().data_ptr(),
}
