"""Claims of article 000 (expand), section 3, "Performance compared": 3.1 memory, expand vs repeat,
3.2 the autograd graph: A16-A19.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(A16, A16.evidence())[0]
'true'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from viewlab._format import mib
from viewlab.memory import measure

from ._evidence import (
    best_device,
    bytes_of,
    fmt_spread,
    fmt_us,
    graph_nodes,
    no_elements,
    not_the_same_work,
    nothing_tried,
    paired_timings,
    same_result,
    timing,
    which_faster,
)
from .model import NOT_CHECKABLE, A, Claim, Facts, Verdict, claim_row


# ---- A16 -------------------------------------------------------------------------------------------------------------
def _ev_allocated_expand(*, rows: int = 1024, features: int = 1024, dtype: torch.dtype = torch.float32) -> Facts:
    dev = best_device()
    row = torch.randn(1, features, device=dev, dtype=dtype)
    held, _, out = bytes_of(lambda: row.expand(rows, features), device=dev)
    return {"device": dev, "expand_bytes": held, "elements": out.numel()}


#: How the count was taken.
_COUNTED_BY = {"cuda": "the CUDA allocator", "cpu": "tensor storages on the CPU"}


def _allocated_note(device: str, nbytes: int) -> str:
    """What memory_allocated() would count for ``nbytes`` where the count was not the CUDA allocator's own. It counts
    the blocks the caching allocator hands out, not the bytes asked for (c10/cuda/CUDACachingAllocator.cpp: a block
    of at least 512 B, a multiple of 512 B; a cached block is split only when more than 1 MiB would be left, and a
    new segment of 10 MiB or more is rounded up to 2 MiB)."""
    if device == "cuda":
        return ""
    if nbytes == 0:
        return " (memory_allocated() would count 0 B too: no block is handed out)"
    return (
        " (memory_allocated() would count the allocator's blocks instead: at least 512 B, a multiple of 512 B, and "
        "above 1 MiB sometimes up to 1 MiB more)"
    )


def _j_allocated_expand(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the expanded tensor")
    where = _COUNTED_BY[f["device"]] + _allocated_note(f["device"], f["expand_bytes"])
    if f["expand_bytes"] == 0:
        return "true", f"expand allocated 0 B, counted by {where}"
    return "false", f"expand allocated {f['expand_bytes']:,} B, counted by {where}"


A16 = claim_row(
    "A16",
    A,
    "3.1 Memory, expand vs repeat",
    "memory",
    "Measured with torch.cuda.memory_allocated(), expanding a (1, 1024) tensor to (1024, 1024) leaves allocated "
    "memory essentially unchanged.",
    _ev_allocated_expand,
    _j_allocated_expand,
    false={"expand_bytes": 4 * 2**20},
)


# ---- A17 -------------------------------------------------------------------------------------------------------------
def _ev_allocated_repeat(*, rows: int = 1024, features: int = 1024, dtype: torch.dtype = torch.float32) -> Facts:
    dev = best_device()
    row = torch.randn(1, features, device=dev, dtype=dtype)
    held, _, out = bytes_of(lambda: row.repeat(rows, 1), device=dev)
    return {
        "device": dev,
        "repeat_bytes": held,
        "shape": tuple(out.shape),
        "dtype": str(out.dtype),
        "elements": out.numel(),
    }


def _about_8_mb(nbytes: int) -> bool:
    """Is ``nbytes`` the article's "8 MB", read as MiB or as MB, within 5%?"""
    return 7.6 <= nbytes / 2**20 <= 8.4 or 7.6 <= nbytes / 1e6 <= 8.4


def _j_allocated_repeat(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the repeat's result")
    if _about_8_mb(f["repeat_bytes"]):
        return "true", f"repeat to {f['shape']} {f['dtype']} allocated {mib(f['repeat_bytes'])} on {f['device']}"
    as_float64 = f["elements"] * 8  # what the same repeat takes in float64, 8 bytes an element
    source = f"; float64 would take {mib(as_float64)}, the article's 8 MB" if _about_8_mb(as_float64) else ""
    return (
        "false",
        f"repeat to {f['shape']} {f['dtype']} allocated {mib(f['repeat_bytes'])} on {f['device']}, not 8 MB{source}",
    )


A17 = claim_row(
    "A17",
    A,
    "3.1 Memory, expand vs repeat",
    "memory",
    "Measured the same way, repeat(1024, 1) of that tensor adds 8 MB.",
    _ev_allocated_repeat,
    _j_allocated_repeat,
    true={"repeat_bytes": 8 * 2**20},
)


# ---- A18 -------------------------------------------------------------------------------------------------------------
def _ev_graph(*, shape: tuple[int, ...] = (1,), size: tuple[int, ...] = (4,)) -> Facts:
    x = torch.randn(shape, requires_grad=True)
    # a dim of size 0 can only be expanded to 0: repeat it once
    times = [n // m if m else 1 for n, m in zip(size, (1,) * (len(size) - len(shape)) + tuple(shape))]
    expanded = x.expand(*size)
    return {
        "expand_nodes": graph_nodes(expanded),
        "repeat_nodes": graph_nodes(x.repeat(*times)),
        "elements": expanded.numel(),
    }


def _j_graph(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:  # nothing to copy, so no copy a graph could record
        return no_elements("the expanded tensor")
    e, r = f["expand_nodes"], f["repeat_nodes"]
    if len(r) > len(e):
        return "true", f"repeat's graph has more nodes: {r} vs {e}"
    return "false", f"both graphs have one node over the leaf: expand {e}, repeat {r}; neither records copies"


A18 = claim_row(
    "A18",
    A,
    "3.2 Autograd graph",
    "semantics",
    "Under autograd, x.expand(4) records only the single original tensor, while x.repeat(4) records every copy operation.",
    _ev_graph,
    _j_graph,
    true={"repeat_nodes": ["AccumulateGrad", "CopyBackwards", "RepeatBackward0"]},
)


# ---- A19 -------------------------------------------------------------------------------------------------------------
def _ev_backward(*, rows: int = 512, features: int = 2048) -> Facts:
    x = torch.randn(1, features, requires_grad=True)
    upstream = torch.randn(rows, features)
    facts: Facts = {}
    outputs = {"expand": x.expand(rows, features), "repeat": x.repeat(rows, 1)}
    grads = {}
    for name, y in outputs.items():
        with measure(log_ops=True) as m:
            (grads[name],) = torch.autograd.grad(y, x, upstream, retain_graph=True)
        facts[f"{name}_backward_ops"] = [op.name.split(".")[1] for op in m.ops]
        facts[f"{name}_backward_bytes"] = sum(op.bytes for op in m.ops)
    t_e, t_r, ratios = paired_timings(
        lambda: torch.autograd.grad(outputs["expand"], x, upstream, retain_graph=True),
        lambda: torch.autograd.grad(outputs["repeat"], x, upstream, retain_graph=True),
        min_run_time=0.1,  # blocks of about 20 ms (some 100 backwards): one preemption no longer fills a block
    )
    facts["expand_median_s"], facts["expand_iqr_s"] = t_e["median_s"], t_e["iqr_s"]
    facts["repeat_median_s"], facts["repeat_iqr_s"] = t_r["median_s"], t_r["iqr_s"]
    facts["repeat_over_expand_by_round"] = ratios
    # what one dispatched view costs, called from Python (an upper bound of a view inside the C++ backward): the
    # scale of the gap repeat's extra view can explain
    facts["view_op_s"] = timing(lambda: upstream.view(-1), min_run_time=0.01, rounds=1)["fastest_s"]
    facts["rows"] = rows
    facts["elements"] = upstream.numel()
    facts["same_gradient"] = same_result(grads["expand"], grads["repeat"])
    return facts


def _gap_of_the_same_work(f: Mapping[str, Any]) -> str:
    """What the measured gap between two backwards of the same work is, noise first: noise (inside the spread, or
    rounds that disagree); else the extra views' overhead (repeat slower in every round, by no more than twice what
    those views cost from Python, an upper bound of a view inside the C++ backward); else a gap the same work does
    not explain."""
    ratios = f["repeat_over_expand_by_round"]
    gap = f["repeat_median_s"] - f["expand_median_s"]
    spread = (f["expand_iqr_s"] + f["repeat_iqr_s"]) / 2
    views = f["repeat_backward_ops"].count("view") - f["expand_backward_ops"].count("view")
    overhead = views * f["view_op_s"]
    spreads = f"IQR {fmt_spread(f['expand_iqr_s'])} / {fmt_spread(f['repeat_iqr_s'])}"
    rounds = f"repeat / expand from {min(ratios)} to {max(ratios)} by round"
    if abs(gap) <= spread:
        said = f"the gap between the medians (here {fmt_us(gap)}) is inside the spread ({spreads}): noise, not a difference in work"
    elif min(ratios) <= 1 <= max(ratios):
        said = f"the gap between the medians (here {fmt_us(gap)}) is one the rounds disagree on ({rounds}): noise, not a difference in work"
    elif views > 0 and min(ratios) > 1 and 0 < gap <= 2 * overhead:
        what = "its extra view" if views == 1 else f"its {views} extra views"
        said = (
            f"repeat was slower in every round, by {fmt_us(gap)} between the medians, outside the spread ({spreads}): "
            f"about what {what} cost ({fmt_spread(f['view_op_s'])} a view, timed from Python) -- that overhead, not a "
            "second accumulation"
        )
    else:
        slower = "repeat" if gap > 0 else "expand"
        said = (
            f"the rounds agree on a gap of {fmt_us(abs(gap))}, {slower} the slower ({rounds}), outside the spread "
            f"({spreads}) and more than the views repeat adds cost ({fmt_spread(f['view_op_s'])} a view): the same "
            "operators and bytes do not explain it, and it is no second accumulation"
        )
    if min(ratios) >= 1.5:
        return said + "; expand was 1.5x faster in every round, with the same work"
    return said + "; far from the 1.5x in every round that would make expand's backward more efficient"


def _j_backward(f: Mapping[str, Any]) -> Verdict:
    e = {"median_s": f["expand_median_s"], "iqr_s": f["expand_iqr_s"]}
    r = {"median_s": f["repeat_median_s"], "iqr_s": f["repeat_iqr_s"]}
    times = (
        f"backward {fmt_us(e['median_s'])} (IQR {fmt_spread(e['iqr_s'])}) vs {fmt_us(r['median_s'])} "
        f"(IQR {fmt_spread(r['iqr_s'])})"
    )
    ops = (
        f"expand's backward runs {f['expand_backward_ops']} ({f['expand_backward_bytes']:,} B), repeat's "
        f"{f['repeat_backward_ops']} ({f['repeat_backward_bytes']:,} B)"
    )
    faster = which_faster(e, r, margin=1.5, round_ratios=f["repeat_over_expand_by_round"])
    times += f" (repeat / expand by round: {f['repeat_over_expand_by_round']})"
    same_work = f["expand_backward_bytes"] == f["repeat_backward_bytes"] and [
        n for n in f["expand_backward_ops"] if n != "view"
    ] == [n for n in f["repeat_backward_ops"] if n != "view"]
    # The work is compared before the cost: the same gradient, then the same operators and bytes. Two paths that
    # do the same work differ in speed only by noise and the host overhead of the views one adds (a view is free in
    # bytes, not in time: one dispatched op), so then the timings are shown, never judged.
    if f["rows"] == 0:
        return nothing_tried("no rows: nothing flows back")
    if f["elements"] == 0:
        return no_elements("the incoming gradient")
    if not f["same_gradient"]:
        return not_the_same_work("the two backward passes give different gradients")
    if same_work:
        return "false", (
            f"the same work: {ops}; each backward runs one reduction into the gradient, so the reason given does not "
            f"hold; {_gap_of_the_same_work(f)}; {times}"
        )
    if faster == "a":
        return "true", f"expand's backward is faster: {times}; {ops}"
    if faster == "unclear":
        return (
            NOT_CHECKABLE,
            f"the work differs and the spread exceeds the difference (the rounds disagree): {times}; {ops}",
        )
    return "false", f"expand's backward is not faster: {times}; {ops}"


A19 = claim_row(
    "A19",
    A,
    "3.2 Autograd graph",
    "speed",
    "So expand's backward pass is more efficient: it needs only one gradient accumulation.",
    _ev_backward,
    _j_backward,
    true={
        "expand_backward_ops": ["sum"],
        "repeat_backward_ops": ["view", "sum", "copy"],
        "expand_median_s": 1e-4,
        "expand_iqr_s": 1e-6,
        "repeat_median_s": 3e-4,
        "repeat_iqr_s": 1e-6,
        "repeat_over_expand_by_round": [3.0, 2.9, 3.1],
    },
    false={
        "expand_median_s": 1e-4,
        "expand_iqr_s": 1e-6,
        "repeat_median_s": 1.05e-4,
        "repeat_iqr_s": 1e-6,
        "repeat_over_expand_by_round": [1.05, 0.98, 1.02],
    },
    not_checkable_here={
        "expand_median_s": 1e-4,
        "expand_iqr_s": 8e-5,
        "repeat_median_s": 1.5e-4,
        "repeat_iqr_s": 8e-5,
        "repeat_over_expand_by_round": [0.7, 1.6, 1.0],
        "expand_backward_bytes": 0,
    },
)


CLAIMS: tuple[Claim, ...] = (
    A16,
    A17,
    A18,
    A19,
)
