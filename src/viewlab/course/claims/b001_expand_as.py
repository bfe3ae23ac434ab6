"""Claims B01-B11 of article 001 (expand_as): broadcasting, how expand_as works, a custom layer, pitfalls.

Each block is one claim: its evidence, its judge and its registry row.

>>> from viewlab.course.claims.model import judge
>>> judge(B03, B03.evidence())
('true', 'shape (3, 4)')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from viewlab import shares_storage
from viewlab._format import fmt_us
from viewlab.memory import measure

from .. import article_helpers as ah
from ._evidence import bytes_of, error_of, small_shape_pairs, timing
from .model import B, Claim, Facts, Verdict, claim_row


# ---- B01 -------------------------------------------------------------------------------------------------------------
def _ev_broadcast_no_copy(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (1, 4)) -> Facts:
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    with measure(log_ops=True) as m:
        c = a + b
    return {
        "allocated": m.allocated_bytes,
        "result_bytes": c.numel() * c.element_size(),
        "result_shape": tuple(c.shape),
        "ops": [op.name for op in m.ops],
        "shapes": (tuple(a.shape), tuple(b.shape)),
    }


def _j_broadcast_no_copy(f: Mapping[str, Any]) -> Verdict:
    if f["allocated"] == f["result_bytes"]:
        return (
            "true",
            f"{f['shapes'][0]} + {f['shapes'][1]} allocated {f['allocated']} B = the {f['result_shape']} result only; ops: {f['ops']}",
        )
    return "false", f"allocated {f['allocated']} B for a {f['result_bytes']}-byte result: the inputs were copied"


B01 = claim_row(
    "B01",
    B,
    "1 What broadcasting is",
    "memory",
    "Broadcasting lets tensors of different shapes be combined element-wise without explicitly copying data: a "
    "memory optimisation.",
    _ev_broadcast_no_copy,
    _j_broadcast_no_copy,
    false={"allocated": 96},
)


# ---- B02 -------------------------------------------------------------------------------------------------------------
def _torch_broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def _ev_three_rules(pairs: list[tuple[tuple[int, ...], tuple[int, ...]]] | None = None) -> Facts:
    pairs = small_shape_pairs() if pairs is None else pairs
    wrong = [p for p in pairs if ah.article_broadcast_shape(*p) != _torch_broadcast(*p)]
    return {"pairs": len(pairs), "disagreements": len(wrong), "first": wrong[0] if wrong else None}


def _j_three_rules(f: Mapping[str, Any]) -> Verdict:
    if f["disagreements"] == 0:
        return (
            "true",
            f"the three rules, applied literally, agree with torch.broadcast_shapes on all {f['pairs']:,} shape pairs tried",
        )
    return "false", f"{f['disagreements']:,} of {f['pairs']:,} pairs disagree, e.g. {f['first']}"


B02 = claim_row(
    "B02",
    B,
    "1 What broadcasting is",
    "semantics",
    "Broadcasting follows three rules: compare from the last dimension; sizes are equal or one of them is 1; a "
    "missing dimension counts as 1.",
    _ev_three_rules,
    _j_three_rules,
    false={"disagreements": 3, "first": ((2,), (3,))},
)


# ---- B03 -------------------------------------------------------------------------------------------------------------
def _ev_example_shape(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (1, 4)) -> Facts:
    return {"shape": tuple((torch.randn(a_shape) + torch.randn(b_shape)).shape)}


def _j_example_shape(f: Mapping[str, Any]) -> Verdict:
    # The article says (3, 4); the judge compares what came out with that.
    return ("true", "shape (3, 4)") if f["shape"] == (3, 4) else ("false", f"shape {f['shape']}")


B03 = claim_row(
    "B03",
    B,
    "1 What broadcasting is",
    "semantics",
    "A (3, 1) tensor plus a (1, 4) tensor broadcasts to (3, 4).",
    _ev_example_shape,
    _j_example_shape,
    false={"shape": (3, 1)},
)


# ---- B04 -------------------------------------------------------------------------------------------------------------
def _ev_weights_times_features(w_shape: tuple[int, ...] = (2, 1), f_shape: tuple[int, ...] = (2, 7)) -> Facts:
    w, feats = torch.randn(w_shape), torch.randn(f_shape)
    err = error_of(lambda: w * feats)
    with measure(log_ops=True) as m:
        out = None if err else w * feats
    return {
        "error": err,
        "shape": None if out is None else tuple(out.shape),
        "rows_scaled": out is not None and torch.equal(out, torch.stack([w[i] * feats[i] for i in range(len(w))])),
        "ops_while_broadcasting": [op.name for op in m.ops],
        "expand_as_gives_the_same": out is not None and torch.equal(w.expand_as(feats) * feats, out),
    }


def _j_weights_times_features(f: Mapping[str, Any]) -> Verdict:
    if f["error"] or not f["rows_scaled"]:
        return "false", f"the product does not scale each row by its weight: {f['error'] or f['shape']}"
    if any("expand" in op for op in f["ops_while_broadcasting"]):
        return "true", f"broadcasting ran through expand: {f['ops_while_broadcasting']}"
    same = ", though w.expand_as(x) * x gives the same values" if f["expand_as_gives_the_same"] else ""
    return "false", (
        f"the broadcast product scales each row by its weight, shape {f['shape']}, but broadcasting runs no expand "
        f"or expand_as -- the kernel reads the size-1 dim with stride 0 itself (ops: {f['ops_while_broadcasting']})"
        f"{same}: expand_as is an explicit equivalent, not the mechanism behind broadcasting"
    )


B04 = claim_row(
    "B04",
    B,
    "introduction, title",
    "semantics",
    "Attention weights of shape (batch_size, 1) multiply features of shape (batch_size, sequence_length) by "
    "broadcasting, and expand_as() is the mechanism that carries out this broadcasting (the title calls it "
    "broadcasting's hero behind the scenes).",
    _ev_weights_times_features,
    _j_weights_times_features,
    true={"ops_while_broadcasting": ["aten.expand.default", "aten.mul.Tensor"]},
)


# ---- B05 -------------------------------------------------------------------------------------------------------------
def _ev_expand_as_view(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (3, 4)) -> Facts:
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    held, _, out = bytes_of(lambda: a.expand_as(b))
    return {"bytes": held, "shares": shares_storage(out, a), "shape": tuple(out.shape), "target": tuple(b.shape)}


def _j_expand_as_view(f: Mapping[str, Any]) -> Verdict:
    if f["bytes"] == 0 and f["shares"] and f["shape"] == f["target"]:
        return "true", f"0 B, shares memory with a, shape {f['shape']}"
    return "false", f"{f['bytes']:,} B, shares: {f['shares']}, shape {f['shape']}"


B05 = claim_row(
    "B05",
    B,
    "2 How expand_as works",
    "memory",
    "expand_as() is a view operation: it copies no data and returns a view with the target tensor's shape.",
    _ev_expand_as_view,
    _j_expand_as_view,
    false={"bytes": 48, "shares": False},
)


# ---- B06 -------------------------------------------------------------------------------------------------------------
def _ev_expand_equals_expand_as(a_shape: tuple[int, ...] = (3, 1), b_shape: tuple[int, ...] = (3, 4)) -> Facts:
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    e, ea = a.expand(*b_shape), a.expand_as(b)
    return {"equal": torch.equal(e, ea), "strides": (tuple(e.stride()), tuple(ea.stride()))}


def _j_expand_equals_expand_as(f: Mapping[str, Any]) -> Verdict:
    if f["equal"] and f["strides"][0] == f["strides"][1]:
        return "true", f"equal values, same strides {f['strides'][0]}: b lends only its shape"
    return "false", f"equal: {f['equal']}, strides {f['strides']}"


B06 = claim_row(
    "B06",
    B,
    "2 How expand_as works",
    "API",
    "expand_as() does what expand() does with shorter syntax: a.expand(3, 4) equals a.expand_as(b) for b of shape (3, 4).",
    _ev_expand_equals_expand_as,
    _j_expand_equals_expand_as,
    false={"equal": False},
)


# ---- B07 -------------------------------------------------------------------------------------------------------------
def _ev_channel_attention(
    channels: int = 32, reduction: int = 16, batch: int = 2, side: int = 6, seed: int = 0
) -> Facts:
    from viewlab.attention import SqueezeExcitation

    torch.manual_seed(seed)
    block = SqueezeExcitation(channels, reduction=reduction)
    x = torch.randn(batch, channels, side, side)
    with torch.no_grad():
        w = block.weights(x)  # (B, C, 1, 1)
        with measure(log_ops=True) as m_e:
            out_e = block(x, use_expand_as=True)
        with measure(log_ops=True) as m_b:
            out_b = block(x, use_expand_as=False)
        by_hand = torch.stack([x[i] * w[i, :, 0, 0][:, None, None] for i in range(len(x))])
    return {
        "expand_bytes": sum(op.bytes for op in m_e.ops if "expand" in op.name),
        "every_position_weighted": torch.allclose(out_e, by_hand),
        "equal_to_broadcasting": torch.equal(out_e, out_b),
        "peak_expand_as": m_e.peak_bytes,
        "peak_broadcasting": m_b.peak_bytes,
    }


def _j_channel_attention(f: Mapping[str, Any]) -> Verdict:
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
    wide[0, 0] = value  # one element written through the view
    expected = torch.tensor(column)
    expected[0] = value  # the same write on a tensor of its own: what a would hold if the write reached it
    return {"a_after": src.flatten().tolist(), "row0": wide[0].tolist(), "expected": expected.tolist()}


def _j_write_through(f: Mapping[str, Any]) -> Verdict:
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
    return {"grad_is_row_sum": torch.allclose(a.grad, summed), "grad_shape": tuple(a.grad.shape), "shape": a_shape}


def _j_gradient(f: Mapping[str, Any]) -> Verdict:
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
def _ev_cache(
    param_shape: tuple[int, ...] = (1, 64, 1, 1),
    target: tuple[int, ...] = (8, 64, 16, 16),
    convert: str | None = "double",
) -> Facts:
    """``convert``: what the model goes through after the cache is made (``"double"``, ``"half"`` or None:
    nothing), as a model does when it is moved or cast after ``__init__``."""
    p = torch.randn(param_shape)
    held, _, _ = bytes_of(lambda: p.expand(target))
    t = timing(lambda: p.expand(target), min_run_time=0.02)
    layer = nn.Linear(4, 3)
    cached = layer.bias.expand(2, 3)  # the cache the advice asks for, made at initialisation
    if convert is not None:
        getattr(layer, convert)()
    return {
        "expand_bytes": held,
        "expand_median_s": t["median_s"],
        "conversion": convert,
        "cached_follows_parameter": shares_storage(cached, layer.bias) and cached.dtype == layer.bias.dtype,
    }


def _j_cache(f: Mapping[str, Any]) -> Verdict:
    saved = f"0 B and {fmt_us(f['expand_median_s'])} per call"
    if not f["cached_follows_parameter"]:
        return "false", (
            f"a cached expand goes stale: after module.{f['conversion']}() it still reads the old tensor, so the "
            f"layer computes with the wrong weights -- to save what an expand costs ({saved})"
        )
    if f["expand_bytes"] == 0:
        return "misleading", f"caching saves at most the expand itself -- {saved} -- so nothing is worth pre-computing"
    return "true", f"an expand allocates {f['expand_bytes']:,} B, worth caching"


B11 = claim_row(
    "B11",
    B,
    "4 Performance advice",
    "advice",
    "Pre-compute likely expansion shapes at model initialisation, and cache the expand() result of frequent expansions.",
    _ev_cache,
    _j_cache,
    true={"expand_bytes": 4096, "cached_follows_parameter": True},
    misleading={"cached_follows_parameter": True},
)


CLAIMS: tuple[Claim, ...] = (
    B01,
    B02,
    B03,
    B04,
    B05,
    B06,
    B07,
    B08,
    B09,
    B10,
    B11,
)
