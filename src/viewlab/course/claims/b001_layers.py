"""Claims of article 001 (expand_as), section 3 "A custom layer" and section 4 "Advanced tips and pitfalls"
(its performance advice and example included): B07-B12.

Each block is one claim: its evidence (runs code, returns facts), its judge (facts -> verdict and why)
and its registry row (the restatement, and facts under which the judge says something else).

>>> from viewlab.course.claims.model import judge
>>> judge(B08, B08.evidence())[0]
'true'
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from viewlab import shares_storage
from viewlab._format import mib
from viewlab.memory import measure

from ._evidence import (
    OpNames,
    bytes_of,
    error_of,
    fmt_us,
    no_elements,
    not_the_same_work,
    nothing_tried,
    paired_timings,
    same_result,
    timing,
    which_faster,
)
from .article_code import (
    ShapeBufferScale,
)
from .model import NOT_CHECKABLE, B, Claim, Facts, Verdict, claim_row


# ---- B07 -------------------------------------------------------------------------------------------------------------
def _ev_channel_attention(
    channels: int = 32, reduction: int = 16, batch: int = 2, side: int = 6, seed: int = 0
) -> Facts:
    from viewlab.course.layers import SqueezeExcitation

    torch.manual_seed(seed)
    block = SqueezeExcitation(channels, reduction=reduction)
    x = torch.randn(batch, channels, side, side)
    with torch.no_grad():
        w = block.weights(x)  # (B, C, 1, 1)
        with measure(log_ops=True) as m_e:
            out_e = block(x, use_expand_as=True)
        with measure(log_ops=True) as m_b:
            out_b = block(x, use_expand_as=False)
        by_hand = torch.stack([x[i] * w[i, :, 0, 0][:, None, None] for i in range(len(x))]) if len(x) else x
    return {
        "elements": x.numel(),
        "expand_bytes": sum(op.bytes for op in m_e.ops if "expand" in op.name),
        "every_position_weighted": torch.allclose(out_e, by_hand),
        "equal_to_broadcasting": torch.equal(out_e, out_b),
        "peak_expand_as": m_e.peak_bytes,
        "peak_broadcasting": m_b.peak_bytes,
    }


def _j_channel_attention(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("the feature map")
    if f["expand_bytes"] == 0 and f["every_position_weighted"]:
        redundant = (
            (
                f" -- and redundant: x * y broadcasts by itself, identical output, same peak ({f['peak_expand_as']:,} B"
                f" vs {f['peak_broadcasting']:,} B)"
            )
            if f["equal_to_broadcasting"]
            else ""
        )
        return "true", f"the expand_as costs 0 B and every position gets its channel's weight{redundant}"
    return "false", f"expand bytes {f['expand_bytes']:,}; every position weighted: {f['every_position_weighted']}"


B07 = claim_row(
    "B07",
    B,
    "3 A custom layer",
    "memory",
    "In its channel-attention module, expand_as() makes the channel weights reach every spatial position of the "
    "feature map without extra memory.",
    _ev_channel_attention,
    _j_channel_attention,
    false={"expand_bytes": 9216},
)


# ---- B08 -------------------------------------------------------------------------------------------------------------
def _ev_no_singleton(a_shape: tuple[int, ...] = (3, 2), b_shape: tuple[int, ...] = (3, 4)) -> Facts:
    return {"error": error_of(lambda: torch.randn(a_shape).expand_as(torch.randn(b_shape)))}


def _j_no_singleton(f: Mapping[str, Any]) -> Verdict:
    if f["error"] and f["error"].startswith("RuntimeError"):
        return "true", f["error"]
    return "false", f"expand_as gave: {f['error'] or 'no error'}"


B08 = claim_row(
    "B08",
    B,
    "4 Pitfalls",
    "semantics",
    "A (3, 2) tensor cannot be expand_as'ed to (3, 4): it has no dimension that can be expanded.",
    _ev_no_singleton,
    _j_no_singleton,
    false={"error": None},
)


# ---- B09 -------------------------------------------------------------------------------------------------------------
def _ev_write_through(column: tuple[float, ...] = (1.0, 2.0, 3.0), width: int = 4, value: float = 10.0) -> Facts:
    src = torch.tensor(column)[:, None]
    wide = src.expand_as(torch.empty(len(column), width))
    expected = torch.tensor(column)
    if wide.numel():  # an empty b has no element to write through
        wide[0, 0] = value  # one element written through the view
        expected[0] = value  # the same write on a tensor of its own: what a would hold if the write reached it
    return {
        "a_after": src.flatten().tolist(),
        "row0": wide[0].tolist() if len(wide) else [],
        "expected": expected.tolist(),
        "elements": wide.numel(),
    }


def _j_write_through(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return no_elements("b")
    if f["a_after"] == f["expected"]:
        return "true", f"a is now {f['a_after']}; the whole of b's row 0 reads it: {f['row0']}"
    return "false", f"a is {f['a_after']}"


B09 = claim_row(
    "B09",
    B,
    "4 Pitfalls",
    "semantics",
    "b = a.expand_as(torch.empty(3, 4)) shares a's memory: b[0, 0] = 10 turns a into [[10.], [2.], [3.]].",
    _ev_write_through,
    _j_write_through,
    false={"a_after": [1.0, 2.0, 3.0]},
)


# ---- B10 -------------------------------------------------------------------------------------------------------------
def _ev_gradient(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (3, 4), seed: int = 0) -> Facts:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(a_shape, generator=gen).requires_grad_()
    w = torch.randn(b_shape, generator=gen)
    (a.expand_as(w) * w).sum().backward()
    summed = w.sum_to_size(a_shape)  # the gradient of a broadcast: summed over the stretched dims
    return {
        "grad_is_row_sum": torch.allclose(a.grad, summed),
        "grad_shape": tuple(a.grad.shape),
        "shape": a_shape,
        "elements": w.numel(),
    }


def _j_gradient(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:  # an empty gradient equals any empty sum
        return no_elements("the expanded tensor")
    if f["grad_is_row_sum"] and f["grad_shape"] == tuple(f["shape"]):
        return "true", f"a.grad has a's shape {f['grad_shape']} and equals the gradient summed over the expanded dims"
    return "false", f"grad shape {f['grad_shape']}, equals the summed gradient: {f['grad_is_row_sum']}"


B10 = claim_row(
    "B10",
    B,
    "4 Pitfalls",
    "semantics",
    "expand_as() keeps the link to the original tensor's gradient: gradients from the expanded tensor flow back correctly.",
    _ev_gradient,
    _j_gradient,
    false={"grad_is_row_sum": False},
)


# ---- B11 -------------------------------------------------------------------------------------------------------------
def _cache_follows(conversion: str | None) -> bool:
    """Does an expand cached at initialisation still read the parameter after ``module.<conversion>()``?"""
    layer = nn.Linear(4, 3)
    cached = layer.bias.expand(2, 3)  # the cache the advice asks for, made at initialisation
    if conversion is not None:
        getattr(layer, conversion)()
    return shares_storage(cached, layer.bias) and cached.dtype == layer.bias.dtype


def _deepcopy_refused() -> bool:
    """Does ``copy.deepcopy`` refuse a module that keeps an expand of its parameter (an EMA copy, a checkpoint)?"""
    layer = nn.Linear(4, 3)
    layer.cached = layer.bias.expand(2, 3)  # a view with a grad_fn, not a graph leaf
    try:
        copy.deepcopy(layer)
    except RuntimeError:
        return True
    return False


def _ev_cache(
    param_shape: tuple[int, ...] = (1, 64, 1, 1),
    target: tuple[int, ...] = (8, 64, 16, 16),
    convert: str | None = None,
    beside: tuple[str, ...] = ("double", "half"),
) -> Facts:
    """``convert``: what the model goes through after the cache is made -- None (the article's case: it describes
    no conversion), ``"double"`` or ``"half"``. ``beside``: conversions tried next to it, shown in the reason only."""
    p = torch.randn(param_shape)
    held, _, out = bytes_of(lambda: p.expand(target))
    t = timing(lambda: p.expand(target), min_run_time=0.02)
    return {
        "elements": out.numel(),
        "expand_bytes": held,
        "expand_median_s": t["median_s"],
        "conversion": convert,
        "cached_follows_parameter": _cache_follows(convert),
        "stale_beside_after": [c for c in beside if not _cache_follows(c)],
        "deepcopy_refused": _deepcopy_refused(),
    }


def _j_cache(f: Mapping[str, Any]) -> Verdict:
    saved = f"0 B and {fmt_us(f['expand_median_s'])} per call"
    if not f["cached_follows_parameter"]:
        return "false", (
            f"a cached expand goes stale: after module.{f['conversion']}() it still reads the old tensor, so the "
            f"layer computes with the wrong weights -- to save what an expand costs ({saved})"
        )
    if f["elements"] == 0:  # the stale cache above needs no element; "0 B saved" does
        return no_elements("the expanded tensor")
    hazards = []
    if f["stale_beside_after"]:
        stale_after = ", ".join(f"module.{c}()" for c in f["stale_beside_after"])
        hazards.append(f"after {stale_after} the cache still reads the old tensor (stale)")
    if f["deepcopy_refused"]:
        hazards.append("copy.deepcopy(module) raises (the cached expand is not a graph leaf)")
    hazard = f"; beside the article's case, hazards the advice creates: {'; '.join(hazards)}" if hazards else ""
    if f["expand_bytes"] == 0:
        return "misleading", (
            f"the cache works as described, but caching saves at most the expand itself -- {saved} -- so nothing "
            f"is worth pre-computing{hazard}"
        )
    return "true", f"an expand allocates {f['expand_bytes']:,} B, worth caching{hazard}"


B11 = claim_row(
    "B11",
    B,
    "4 Performance advice",
    "advice",
    "Pre-compute likely expansion shapes at model initialisation, and cache the expand() result of frequent expansions.",
    _ev_cache,
    _j_cache,
    true={"expand_bytes": 4096},
    false={"cached_follows_parameter": False, "conversion": "double"},
)


# ---- B12 -------------------------------------------------------------------------------------------------------------
_COMMON = ((16, 256, 32, 32), (32, 256, 64, 64))  # the article's two "common" shapes


def _ev_shape_buffers(
    channels: int = 256, common: tuple[tuple[int, ...], ...] = _COMMON, x_shape: tuple[int, ...] = (4, 256, 16, 16)
) -> Facts:
    """``x_shape`` keeps the timed input small; it replaces the first buffer so the buffer branch is the one run."""
    held, _, model = bytes_of(lambda: ShapeBufferScale(channels, common))
    saved = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    x = torch.randn(x_shape)
    if common:
        model.buffer_0 = torch.empty(x.shape)  # make the first branch the one taken, at a small size
    with torch.no_grad():
        same = torch.equal(model(x), x * model.scale)
        ops = {}
        for name, fn in (("model", lambda: model(x)), ("plain", lambda: x * model.scale)):
            with OpNames() as seen:
                fn()
            ops[name] = seen.names
        for _ in range(5):  # each call allocates its output: the first ones also map fresh pages (see B15)
            model(x), x * model.scale
        t_model, t_plain, ratios = paired_timings(lambda: model(x), lambda: x * model.scale)
    return {
        "buffers": len(common),
        "model_ops": ops["model"],
        "plain_ops": ops["plain"],
        "buffer_bytes": held - channels * 4,
        "state_dict_bytes": saved,
        "same_output_as_broadcasting": same,
        "model_median_s": t_model["median_s"],
        "model_iqr_s": t_model["iqr_s"],
        "plain_median_s": t_plain["median_s"],
        "plain_iqr_s": t_plain["iqr_s"],
        "plain_over_model_by_round": ratios,
        "elements": x.numel(),
    }


def _j_shape_buffers(f: Mapping[str, Any]) -> Verdict:
    a = {"median_s": f["model_median_s"], "iqr_s": f["model_iqr_s"]}
    b = {"median_s": f["plain_median_s"], "iqr_s": f["plain_iqr_s"]}
    faster = which_faster(a, b, margin=1.5, round_ratios=f["plain_over_model_by_round"])
    times = (
        f"forward {fmt_us(a['median_s'])} vs plain x * scale {fmt_us(b['median_s'])}, plain / model by round "
        f"{f['plain_over_model_by_round']}"
    )
    cost = (
        f"the buffers allocate {mib(f['buffer_bytes'])} (held in full on a GPU; on a CPU pages never written may "
        f"stay unmapped) and are saved in every checkpoint ({mib(f['state_dict_bytes'])})"
    )
    # The work is compared before the cost: the same output, then the same kernels (expand is metadata only).
    if f["buffers"] == 0:
        return nothing_tried("no common shape registered: the article's model registers two")
    if f["elements"] == 0:
        return no_elements("the input x")
    if not f["same_output_as_broadcasting"]:
        return not_the_same_work("the model's output differs from plain broadcasting")
    kernels = [n for n in f["model_ops"] if n != "expand"]
    if kernels == f["plain_ops"]:
        return "false", (
            f"{cost} and buy nothing: the forward runs the kernels plain x * scale runs ({f['model_ops']} vs "
            f"{f['plain_ops']}; expand writes no data), so there is no work it could save; the times, beside: {times}"
        )
    if f["buffer_bytes"] > 0 and faster != "a":
        return (
            "false",
            f"{cost} and buy no speed ({times}); output equals plain broadcasting: {f['same_output_as_broadcasting']}",
        )
    if faster == "a":
        return "true", f"faster than plain broadcasting: {times}; {cost}"
    if faster == "unclear":
        return NOT_CHECKABLE, f"spread exceeds the difference (the rounds disagree): {times}"
    return "false", f"no faster than plain broadcasting ({times})"


B12 = claim_row(
    "B12",
    B,
    "4 Performance advice (example)",
    "memory",
    "Its 'efficient expansion' model -- buffers of the common shapes registered in __init__, the parameter "
    "expand_as'ed onto the matching one -- makes the expansion efficient.",
    _ev_shape_buffers,
    _j_shape_buffers,
    true={
        "buffer_bytes": 0,
        "model_ops": ["mul"],
        "plain_ops": ["clone", "mul"],
        "model_median_s": 1e-4,
        "model_iqr_s": 1e-6,
        "plain_median_s": 3e-4,
        "plain_iqr_s": 1e-6,
        "plain_over_model_by_round": [3.0, 3.0, 2.8],
    },
    not_checkable_here={
        "buffer_bytes": 0,
        "model_ops": ["mul"],
        "plain_ops": ["clone", "mul"],
        "model_median_s": 1e-4,
        "model_iqr_s": 9e-5,
        "plain_median_s": 1.4e-4,
        "plain_iqr_s": 9e-5,
        "plain_over_model_by_round": [0.8, 1.6, 1.1],
    },
)


# ---- B20 -------------------------------------------------------------------------------------------------------------
class _ExpandUnreduced(torch.autograd.Function):
    """A custom autograd function that expands its input and hands back the incoming gradient as it comes,
    in the expanded shape (no handling of the expansion at all)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
        return x.expand(size)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class _WrongShapeGradient(torch.autograd.Function):
    """The same, handing back a gradient of a shape the input cannot be expanded to (a transposed one)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
        return x.expand(size)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad.mT, None


def _ev_custom_gradient(*, shape: tuple[int, ...] = (3, 1), size: tuple[int, ...] = (3, 4), seed: int = 0) -> Facts:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen).requires_grad_()
    w = torch.randn(size, generator=gen)
    (_ExpandUnreduced.apply(x, size) * w).sum().backward()
    got = x.grad
    x.grad = None
    wrong = error_of(lambda: (_WrongShapeGradient.apply(x, size) * w).sum().backward())
    # what a backward receives after a .sum(): the gradient of a sum is expanded (stride 0), so it refuses writes
    y = torch.randn(size, generator=gen).requires_grad_()
    (incoming,) = torch.autograd.grad(y.sum(), y)
    return {
        "elements": w.numel(),
        "grad_shape": tuple(got.shape),
        "autograd_summed_it": got.shape == x.shape and same_result(got, w.sum_to_size(shape)),
        "wrong_shape_error": wrong,
        "incoming_stride": tuple(incoming.stride()),
        "incoming_write_error": error_of(lambda: incoming.mul_(2)),
    }


def _j_custom_gradient(f: Mapping[str, Any]) -> Verdict:
    if f["elements"] == 0:
        return nothing_tried("an empty expansion")
    if not f["autograd_summed_it"]:
        return "true", (
            f"a custom backward must reduce the gradient itself: handed back unreduced it gave shape {f['grad_shape']}"
        )
    return "misleading", (
        "the advice names nothing to do: a custom backward may hand back the gradient in the expanded shape, and "
        f"autograd sums it back to the input's shape itself (x.grad {f['grad_shape']}, equal to the summed "
        f"gradient); a gradient of a shape that cannot be summed back is refused with an error naming both "
        f"shapes ({f['wrong_shape_error']}). The care an expanded gradient does need is another one: the gradient a "
        f"backward receives after a .sum() has stride {f['incoming_stride']}, so writing into it in place is "
        + (f"refused ({f['incoming_write_error']}): clone it first" if f["incoming_write_error"] else "allowed here")
    )


B20 = claim_row(
    "B20",
    B,
    "4 Performance advice",
    "advice",
    "In custom autograd functions, handle the gradients of expanded tensors properly.",
    _ev_custom_gradient,
    _j_custom_gradient,
    true={"autograd_summed_it": False},
)

CLAIMS: tuple[Claim, ...] = (
    B20,
    B07,
    B08,
    B09,
    B10,
    B11,
    B12,
)
