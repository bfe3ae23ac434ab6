"""Fuzzing the public API: every input gives a correct result or a clear error, and leaves no trace.

Each public callable is one row of :data:`TARGETS`: the callable, a strategy of *good* arguments
(consistent shapes, right types) and an oracle that checks a returned result, against torch where
torch has the same operation. Every example draws a mode:

* ``good``: the good arguments unchanged; the call must return, and the oracle must accept;
* ``near``: one tensor argument bent by :data:`MUTATIONS` (moved to ``meta``, another dtype,
  transposed, expanded, offset, overlapping, zero-size, one dim more or less, sparse, quantized,
  requiring grad): a correct result or a clear error;
* ``bad`` / ``many``: one or several arguments replaced by values from :func:`bad_values` (wrong
  types, None, nested lists, numpy arrays, negative / huge / NaN / inf numbers, rank 0 and rank 7+
  tensors, odd dtypes and layouts, wrong keyword values): a correct result or a clear error.

A *clear* error is a ``TypeError`` or ``ValueError`` raised by viewlab itself (the innermost frame is
in viewlab, so torch or matplotlib never got the bad input), whose message names the function the
learner called, ``func(``. :class:`viewlab.BroadcastError` also counts: its message names the
operands and the dimension instead (the notebooks show it as is). ``RuntimeError`` counts only for
the environment (no CUDA; not inside IPython), worded the same way. Around every call the suite also checks:

* no input tensor changed: values, ``_version``, shape, stride, offset, dtype, device, requires_grad;
* nothing hangs: each call runs under a wall-clock alarm (:data:`CALL_TIMEOUT_S`);
* nothing is left behind: no new thread, no torch dispatch or function mode, and grad mode, default
  dtype and thread count as before.

The figures (inputs tried, share of clear rejections, time) are printed by the last test and written
to ``$VIEWLAB_FUZZ_REPORT`` (JSON) when that is set. Under CI the examples are derandomised (see
conftest.py). To fuzz another module, add rows to ``TARGETS``: ``Target(name, fn, good, oracle)``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

import viewlab
from viewlab import BroadcastError, bench, exercises
from viewlab import attention as att

CALL_TIMEOUT_S = 10.0
SRC = str(Path(viewlab.__file__).resolve().parent)
FIGURES: dict[str, dict[str, int]] = {}
MODE = ["good"]  # the mode of the example being run, for oracles that depend on it
STARTED = time.perf_counter()


# ----- values -----------------------------------------------------------------------------------------------
def _quantized(t: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(t.float(), 0.1, 0, torch.qint8)


def _sparse(t: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if t.is_meta:  # meta has no to_sparse kernel: an all-zero sparse tensor of that shape, built without data
            shape = tuple(t.shape) or (1,)
            return torch.sparse_coo_tensor(
                torch.zeros(len(shape), 0, dtype=torch.long), torch.zeros(0, dtype=t.dtype), shape
            )
        return t.to_sparse() if t.dim() else t.reshape(1).to_sparse()


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])


DTYPES = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.int8,
    torch.bool,
    torch.complex64,
)

# Bends of one good tensor argument: each name maps to a function of the tensor.
MUTATIONS: dict[str, Callable[[torch.Tensor], Any]] = {
    "meta": lambda t: torch.empty_like(t, device="meta"),
    "float64": lambda t: t.to(torch.float64),
    "float16": lambda t: t.to(torch.float16),
    "int64": lambda t: t.to(torch.int64) if not t.is_complex() else t.real.to(torch.int64),
    "bool": lambda t: t != 0,
    "complex": lambda t: t.to(torch.complex64),
    "transposed": lambda t: t.mT.contiguous().mT if t.dim() >= 2 else t,
    "offset": lambda t: torch.cat([t.reshape(-1)[:1], t.reshape(-1)])[1:].view(t.shape) if t.numel() else t,
    "expanded": lambda t: t[..., :1].expand(t.shape) if t.dim() and t.shape[-1] else t,
    "overlapping": lambda t: torch.zeros(64, dtype=t.dtype).as_strided((3, 2), (3, 6), 2),
    "zero-size": lambda t: t[..., :0] if t.dim() else t.reshape(-1)[:0],
    "one dim more": lambda t: t.unsqueeze(0),
    "one dim less": lambda t: t[0] if t.dim() and t.shape[0] else t.reshape(-1)[:0],
    "sparse": _sparse,
    "quantized": _quantized,
    "requires grad": lambda t: t.detach().clone().requires_grad_(True) if t.is_floating_point() else t,
    "numpy": lambda t: (
        np.zeros(tuple(t.shape))
        if t.device.type == "meta" or t.layout != torch.strided
        else (t.detach().cpu().numpy() if t.dtype != torch.bfloat16 else t.detach().float().numpy())
    ),
    "nested list": lambda t: t.tolist() if t.layout == torch.strided and t.device.type == "cpu" else [[1], [2, 3]],
}


@st.composite
def odd_tensors(draw: Any) -> torch.Tensor:
    """Tensors no function expects: any rank 0..8, odd dtypes, sizes, devices, layouts, NaN/inf values."""
    rank = draw(st.integers(0, 8))
    shape = tuple(
        draw(st.integers(0, 3 if rank <= 3 else 1)) if rank < 7 else draw(st.integers(1, 2)) for _ in range(rank)
    )
    dtype = draw(st.sampled_from(DTYPES))
    base = torch.tensor(
        draw(
            st.lists(
                st.sampled_from([0.0, 1.0, -2.0, 3.5, math.nan, math.inf, -math.inf, 1e30]),
                min_size=math.prod(shape),
                max_size=math.prod(shape),
            )
        ),
        dtype=torch.float64,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = (
            base.reshape(shape).nan_to_num(0.0).to(dtype)
            if not (dtype.is_floating_point or dtype.is_complex)
            else base.reshape(shape).to(dtype)
        )
    return _odd_layout(t, draw(st.sampled_from(["plain", "meta", "transposed", "expanded", "sparse", "quantized"])))


def _odd_layout(t: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "meta":
        return torch.empty_like(t, device="meta")
    if kind == "transposed" and t.dim() >= 2:
        return t.mT
    if kind == "expanded" and t.dim() and t.shape[-1]:
        return t[..., :1].expand(*t.shape[:-1], 3)
    if kind == "sparse" and t.dtype != torch.bfloat16:
        return _sparse(t)
    if kind == "quantized" and t.is_floating_point():
        return _quantized(t)
    return t


def bad_values() -> st.SearchStrategy[Any]:
    """Wrong types, None, nested lists, numpy, edge and huge numbers, odd tensors, wrong keyword values."""
    plain = st.sampled_from(
        [
            None,
            True,
            False,
            0,
            1,
            -1,
            2,
            3,
            7,
            2**31,
            2**63,
            -(2**63),
            10**12,
            0.0,
            -0.0,
            0.5,
            2.0,
            math.nan,
            math.inf,
            -math.inf,
            1j,
            "",
            "x",
            "cpu",
            "meta",
            "cuda",
            "cuda:7",
            "zero",
            "nan",
            "+",
            "view",
            "05-can-expand",
            b"bytes",
            (),
            [],
            [1, 2],
            [[1, 2], [3]],
            (2, 3),
            (-1, 2),
            (2.5, 1),
            ((1, 2), (3,)),
            {},
            {"a": 1},
            {"a": lambda: None},
            object(),
            print,
            lambda: None,
            lambda x: x,
            torch.float32,
            torch.qint8,
            torch.device("meta"),
            torch.Size([2, 3]),
            range(3),
        ]
    )
    numpy = st.sampled_from(
        [np.arange(3), np.zeros((2, 3), dtype=np.float32), np.float64(2.0), np.int64(3), np.array(5), np.bool_(True)]
    )
    return st.one_of(plain, numpy, odd_tensors(), st.builds(_nested))


# ----- good arguments per function -----------------------------------------------------------------------------
def _randn(gen_seed: int, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(gen_seed), dtype=dtype)


small = st.integers(1, 4)
seeds = st.integers(0, 2**16)
float_dtypes = st.sampled_from([torch.float32, torch.float64])


@st.composite
def any_strided(draw: Any) -> torch.Tensor:
    """A valid tensor for layout-style helpers: any dtype/rank, contiguous or not, sometimes meta."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    dtype = draw(st.sampled_from(DTYPES))
    t = (torch.arange(math.prod(shape)) % 7).reshape(shape).to(dtype)
    kind = draw(st.sampled_from(["plain", "transposed", "expanded", "offset", "as_strided", "meta"]))
    if kind == "transposed" and t.dim() >= 2:
        t = t.mT
    elif kind == "expanded" and t.dim() and t.shape[-1]:
        t = t[..., :1].expand(t.shape)
    elif kind == "offset" and t.numel():
        t = MUTATIONS["offset"](t)
    elif kind == "as_strided":
        dims = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 7)), min_size=1, max_size=3))
        size, stride = tuple(n for n, _ in dims), tuple(s for _, s in dims)
        off = draw(st.integers(0, 3))
        need = off + 1 + sum((n - 1) * s for n, s in dims) if all(size) else off + 1
        t = torch.arange(need).to(dtype).as_strided(size, stride, off)
    elif kind == "meta":
        t = torch.empty_like(t, device="meta")
    return t


@st.composite
def drawable(draw: Any) -> torch.Tensor:
    t = draw(any_strided())
    return t if t.device.type != "meta" and t.numel() <= 32 else torch.arange(6).view(2, 3)


@st.composite
def qkv(draw: Any) -> dict[str, Any]:
    b, h, lq, lk, e, ev = (
        draw(st.integers(1, 3)),
        draw(st.integers(1, 3)),
        draw(small),
        draw(small),
        draw(st.integers(0, 5)),
        draw(st.integers(1, 4)),
    )
    dtype, seed = draw(float_dtypes), draw(seeds)
    out: dict[str, Any] = {
        "q": _randn(seed, b, h, lq, e, dtype=dtype),
        "k": _randn(seed + 1, b, h, lk, e, dtype=dtype),
        "v": _randn(seed + 2, b, h, lk, ev, dtype=dtype),
    }
    mask_kind = draw(st.sampled_from([None, "bool", "float", "padding"]))
    if mask_kind == "bool":
        out["mask"] = torch.rand(lq, lk, generator=torch.Generator().manual_seed(seed)) > 0.3
    elif mask_kind == "float":
        out["mask"] = torch.zeros(lq, lk, dtype=dtype).masked_fill(torch.eye(lq, lk, dtype=torch.bool), -1.0)
    elif mask_kind == "padding":
        out["mask"] = att.padding_mask(
            torch.randint(0, lk + 1, (b,), generator=torch.Generator().manual_seed(seed)), lk
        )
    if draw(st.booleans()):
        out["is_causal"] = draw(st.booleans())
    if draw(st.booleans()):
        out["scale"] = draw(st.sampled_from([0.5, 1.0, 2, 0.0]))
    if draw(st.booleans()):
        out["fully_masked"] = draw(st.sampled_from(["zero", "nan"]))
    if draw(st.booleans()):
        out["return_weights"] = draw(st.booleans())
    return out


@st.composite
def mhsa_args(draw: Any) -> dict[str, Any]:
    b, length, h, dh = draw(st.integers(1, 3)), draw(small), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d, seed, dtype = h * dh, draw(seeds), draw(float_dtypes)
    out = {
        "x": _randn(seed, b, length, d, dtype=dtype),
        "num_heads": h,
        "in_proj_weight": _randn(seed + 1, 3 * d, d, dtype=dtype),
        "in_proj_bias": draw(st.sampled_from([None, _randn(seed + 2, 3 * d, dtype=dtype)])),
        "out_proj_weight": _randn(seed + 3, d, d, dtype=dtype),
        "out_proj_bias": draw(st.sampled_from([None, _randn(seed + 4, d, dtype=dtype)])),
    }
    if draw(st.booleans()):
        out["lengths"] = torch.randint(1, length + 1, (b,), generator=torch.Generator().manual_seed(seed))
    if draw(st.booleans()):
        out["causal"] = draw(st.booleans())
    return out


def _fixed(**kwargs: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {k: (v if isinstance(v, st.SearchStrategy) else st.just(v)) for k, v in kwargs.items()}
    )


def _optional(**kwargs: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {}, optional={k: (v if isinstance(v, st.SearchStrategy) else st.just(v)) for k, v in kwargs.items()}
    )


def _merge(*parts: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(*parts).map(lambda ds: {k: v for d in ds for k, v in d.items()})


_SE = att.SqueezeExcitation(4, reduction=2)
_SE_STATE = {k: v.clone() for k, v in _SE.state_dict().items()}
_IDS = exercises.exercise_ids()
_UNIQUE_OPS = sorted({c.op for c in viewlab.OP_CASES if sum(d.op == c.op for d in viewlab.OP_CASES) == 1})


def _broadcastable(rank: int) -> st.SearchStrategy[list[torch.Tensor]]:
    return st.lists(st.integers(1, 3), min_size=0, max_size=rank).flatmap(
        lambda base: st.lists(
            st.lists(st.booleans(), min_size=len(base), max_size=len(base)), min_size=2, max_size=3
        ).map(
            lambda keeps: [
                torch.arange(math.prod(n if k else 1 for n, k in zip(base, keep)), dtype=torch.float32).reshape(
                    tuple(n if k else 1 for n, k in zip(base, keep))
                )
                for keep in keeps
            ]
        )
    )


broadcastable = _broadcastable(3)


# ----- oracles: check a returned result ----------------------------------------------------------------------
def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    tol = {torch.float64: 1e-7, torch.float32: 1e-4}.get(b.dtype, 1e-2)
    torch.testing.assert_close(a, b, rtol=tol, atol=tol, equal_nan=True)


def _brute_overlap(t: torch.Tensor) -> bool:
    idx = viewlab.storage_indices(t).reshape(-1)
    return idx.unique().numel() < idx.numel()


def oracle_layout(kw: dict, result: Any, data: Any) -> None:
    t = kw["t"]
    assert result.shape == tuple(t.shape) and result.stride == tuple(t.stride())
    assert result.storage_offset == t.storage_offset() and result.numel == t.numel()
    assert result.logical_bytes == t.numel() * t.element_size()
    assert result.overlaps == _brute_overlap(t)
    str(result), result._repr_html_()


def oracle_storage_indices(kw: dict, result: Any, data: Any) -> None:
    t = kw["t"]
    n = t.untyped_storage().nbytes() // t.element_size()
    expected = torch.arange(max(n, 1)).as_strided(tuple(t.shape), t.stride(), t.storage_offset())
    assert torch.equal(result, expected)


def oracle_draw_layout(kw: dict, result: Any, data: Any) -> None:
    assert isinstance(result, Figure) and len(result.axes) == 2
    cells = [x.get_text() for x in result.axes[0].texts if x.get_text().startswith("@")]
    assert len(cells) == kw["t"].numel()


def oracle_draw_broadcast(kw: dict, result: Any, data: Any) -> None:
    assert isinstance(result, Figure) and len(result.axes) == len(kw["*"]) + 1


def oracle_explain(kw: dict, result: Any, data: Any) -> None:
    shapes = [tuple(o.shape) if isinstance(o, torch.Tensor) else tuple(o) for o in kw["*"]]
    assert result.shape == torch.broadcast_shapes(*shapes)
    str(result), result._repr_html_()


def oracle_shares(kw: dict, result: Any, data: Any) -> None:
    a, b = kw["a"], kw["b"]
    assert isinstance(result, bool)
    if (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.untyped_storage().nbytes()
        and b.untyped_storage().nbytes()
    ):
        assert result == (a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def oracle_observe(kw: dict, result: Any, data: Any) -> None:
    assert result in ("view", "copy", "same tensor", "mixed")


def oracle_table(kw: dict, result: Any, data: Any) -> None:
    doc = kw.get("documented")
    assert len(result.rows) == sum(1 for c in viewlab.OP_CASES if doc is None or c.documented == doc)


def oracle_padding(kw: dict, result: Any, data: Any) -> None:
    lengths = kw["lengths"].tolist()
    max_len = kw["max_len"] if kw.get("max_len") is not None else max(lengths, default=0)
    expected = torch.tensor([[j < n for j in range(max_len)] for n in lengths], dtype=torch.bool).reshape(
        len(lengths), 1, 1, max_len
    )
    assert torch.equal(result, expected)


def oracle_causal(kw: dict, result: Any, data: Any) -> None:
    q = int(kw["q_len"])
    k = q if kw.get("k_len") is None else int(kw["k_len"])
    expected = torch.ones(q, k, dtype=torch.bool).tril()
    assert tuple(result.shape) == (q, k)
    if result.device.type != "meta":
        assert torch.equal(result.cpu(), expected)


def oracle_combine(kw: dict, result: Any, data: Any) -> None:
    masks = torch.broadcast_tensors(*kw["*"])
    if result.device.type == "meta":
        assert result.shape == masks[0].shape
        return
    expected = masks[0]
    for m in masks[1:]:
        expected = torch.logical_and(expected, m)
    assert torch.equal(result, expected)


def oracle_sdpa(kw: dict, result: Any, data: Any) -> None:
    q, k, v = kw["q"], kw["k"], kw["v"]
    out = result[0] if kw.get("return_weights") else result
    assert out.device == q.device and out.dtype == q.dtype
    if q.device.type == "meta" or q.dtype not in (torch.float32, torch.float64):
        return
    mask, scale = kw.get("mask"), kw.get("scale")
    if kw.get("fully_masked") == "nan" or (kw.get("is_causal") and mask is not None):
        return  # SDPA has no NaN mode and refuses a mask together with is_causal
    batch = att._scores_shape(q, k, v)[:-2]
    # SDPA broadcasts fewer batch dims than we do, and wants masks of at least 2 dims: give it full shapes
    q, k, v = (t.detach().expand(*batch, *t.shape[-2:]) for t in (q, k, v))
    if mask is not None:
        mask = torch.broadcast_to(mask, att._scores_shape(q, k, v))
    if scale is not None and float(scale) == 0.0:
        # every score is 0: uniform weights over the keys a query may see (SDPA's math kernel returns NaN
        # here with is_causal, as it multiplies the -inf of masked scores by the scale)
        keep = torch.ones(att._scores_shape(q, k, v), dtype=torch.bool)
        if kw.get("is_causal"):
            keep = keep & att.causal_mask(q.shape[-2], k.shape[-2])
        if mask is not None and mask.dtype == torch.bool:
            keep = keep & mask
        if mask is not None and mask.dtype != torch.bool:
            return
        weights = keep.to(q.dtype) / keep.sum(-1, keepdim=True).clamp(min=1).to(q.dtype)
        _close(out.detach(), weights @ v)
        return
    expected = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=bool(kw.get("is_causal")), scale=None if scale is None else float(scale)
    )
    _close(out.detach(), expected)


def oracle_split(kw: dict, result: Any, data: Any) -> None:
    x, h = kw["x"], int(kw["num_heads"])
    b, length, d = x.shape
    assert torch.equal(result, x.reshape(b, length, h, d // h).transpose(1, 2)) if x.device.type != "meta" else True
    assert tuple(result.shape) == (b, h, length, d // h)


def oracle_merge(kw: dict, result: Any, data: Any) -> None:
    x = kw["x"]
    b, h, length, dh = x.shape
    assert tuple(result.shape) == (b, length, h * dh)
    if x.device.type != "meta":
        assert torch.equal(result, x.transpose(1, 2).reshape(b, length, h * dh))


def oracle_mhsa(kw: dict, result: Any, data: Any) -> None:
    x = kw["x"]
    b, length, d = x.shape
    h = int(kw["num_heads"])
    lengths, causal = kw.get("lengths"), kw.get("causal", False)
    key_padding = None if lengths is None else ~att.padding_mask(lengths, length)[:, 0, 0]
    attn_mask = None if not causal else ~att.causal_mask(length)
    if lengths is not None and causal:
        # torch merges the masks itself; a fully masked row is where it and we differ (NaN vs 0)
        keep = ~key_padding[:, None, :] & ~attn_mask[None]
        if not bool(keep.any(-1).all()):
            return
    bias_in = kw["in_proj_bias"] if kw["in_proj_bias"] is not None else torch.zeros(3 * d, dtype=x.dtype)
    expected, _ = F.multi_head_attention_forward(
        x.transpose(0, 1),
        x.transpose(0, 1),
        x.transpose(0, 1),
        d,
        h,
        kw["in_proj_weight"],
        bias_in,
        None,
        None,
        False,
        0.0,
        kw["out_proj_weight"],
        kw["out_proj_bias"],
        training=False,
        key_padding_mask=key_padding,
        need_weights=False,
        attn_mask=attn_mask,
    )
    if lengths is not None and not bool(lengths.min() > 0):
        return
    _close(result.detach(), expected.transpose(0, 1).detach())


def oracle_se_init(kw: dict, result: Any, data: Any) -> None:
    c = int(kw["channels"])
    assert result.fc1.in_features == c and result.fc2.out_features == c


def oracle_se(kw: dict, result: Any, data: Any) -> None:
    x = kw["x"]
    with torch.no_grad():
        w = torch.sigmoid(_SE.fc2(torch.relu(_SE.fc1(x.mean(dim=(2, 3))))))
        _close(result.detach(), x.detach() * w[:, :, None, None])


def oracle_compare(kw: dict, result: Any, data: Any) -> None:
    assert [r.name for r in result.rows] == list(kw["cases"])
    ref = kw.get("reference") or next(iter(kw["cases"]))
    assert result[ref].ratio == 1.0
    str(result), result._repr_html_()


def oracle_copy(kw: dict, result: Any, data: Any) -> None:
    fn, nbytes = result
    like = kw["like"]
    assert nbytes == 2 * like.numel() * like.element_size()
    fn()


def oracle_tensors(kw: dict, result: Any, data: Any) -> None:
    t = data.draw(result)
    dtype = kw.get("dtype", torch.float32)
    assert t.dtype == dtype
    lo, hi = kw.get("values") or (
        max(-9, exercises._exact_int_range(dtype)[0]),
        min(9, exercises._exact_int_range(dtype)[1]),
    )
    if t.numel():
        values = t.to(torch.float64) if not t.is_complex() else t.real.to(torch.float64)
        assert lo <= float(values.min()) and float(values.max()) <= hi, (lo, hi, t)
    if "shape" not in kw:
        d_lo, d_hi = kw.get("dims", (1, 3))
        assert d_lo <= t.dim() <= d_hi


def oracle_shapes(kw: dict, result: Any, data: Any) -> None:
    shape = data.draw(result)
    d_lo, d_hi = kw.get("dims", (1, 3))
    s_lo, s_hi = kw.get("side", (1, 4))
    assert d_lo <= len(shape) <= d_hi and all(s_lo <= n <= s_hi for n in shape)


def oracle_get(kw: dict, result: Any, data: Any) -> None:
    assert result.id == kw["exercise_id"]


def oracle_ids(kw: dict, result: Any, data: Any) -> None:
    assert all(i.startswith(kw.get("prefix", "")) for i in result) and result == sorted(result)


def oracle_none(kw: dict, result: Any, data: Any) -> None:
    assert result is None


def oracle_check(kw: dict, result: Any, data: Any) -> None:
    assert isinstance(result, exercises.CheckResult)
    if MODE[0] == "good":  # the learner's function is the reference (or its equal): it must pass
        assert result.status == exercises.PASSED, str(result)


def oracle_guess(kw: dict, result: Any, data: Any) -> None:
    if kw["guess"] is None:
        assert result == "no guess"
    else:
        same = kw["guess"] is kw["actual"] if isinstance(kw["guess"], bool) else kw["guess"] == kw["actual"]
        assert result == ("right" if same else "wrong")


def oracle_named_rule(kw: dict, result: Any, data: Any) -> None:
    assert result.rule == kw["label"] and result((), None) is None


def oracle_register(kw: dict, result: Any, data: Any) -> None:
    assert result is kw["exercise"]


@dataclass(frozen=True)
class Target:
    """One public callable: how to call it well (``good``: kwargs, ``"*"`` for varargs) and how to check it."""

    name: str
    fn: Callable[..., Any]
    good: st.SearchStrategy[dict[str, Any]]
    oracle: Callable[[dict, Any, Any], None]
    examples: int = 120
    quiet: bool = False  # the function prints; capture it
    tensor_args: tuple[str, ...] = field(default=())


def _call_se(x: Any = None, use_expand_as: Any = False) -> Any:
    return _SE(x, use_expand_as=use_expand_as)


_cheap = st.sampled_from([lambda: None, lambda: 1 + 1, torch.zeros(4).clone])
_compare_good = _merge(
    _fixed(cases=st.dictionaries(st.sampled_from(["a", "b", "c"]), _cheap, min_size=1, max_size=2)),
    _fixed(min_run_time=st.sampled_from([1e-4, 5e-4]), rounds=st.integers(1, 2)),
    _optional(num_threads=st.integers(1, 2)),
).map(lambda kw: {**kw, **({"bytes_moved": {next(iter(kw["cases"])): 64}} if len(kw["cases"]) == 1 else {})})

_check_good = _merge(
    _fixed(
        learner_fn=st.just(lambda x: x.t()),
        reference_fn=st.just(lambda x: x.transpose(0, 1)),
        inputs=st.sampled_from(
            [
                st.tuples(exercises.tensors(dims=(2, 2), side=(1, 3))),
                [(torch.zeros(2, 3),), (torch.arange(4.0).view(2, 2),)],
            ]
        ),
        max_examples=st.integers(1, 3),
    ),
    _optional(
        memory=st.sampled_from([None, "view"]),
        rtol=st.just(1e-5),
        atol=st.just(0.0),
        hint=st.just("a hint"),
        title=st.just("fuzz"),
        examples=st.just([(torch.ones(2, 2),)]),
        extra=st.just([lambda a, r: None]),
    ),
)

TARGETS: list[Target] = [
    Target("layout", viewlab.layout, _fixed(t=any_strided()), oracle_layout, tensor_args=("t",)),
    Target(
        "storage_indices", viewlab.storage_indices, _fixed(t=any_strided()), oracle_storage_indices, tensor_args=("t",)
    ),
    Target(
        "draw_layout",
        viewlab.draw_layout,
        _merge(_fixed(t=drawable()), _optional(title=st.just("a title"))),
        oracle_draw_layout,
        examples=40,
        tensor_args=("t",),
    ),
    Target(
        "draw_broadcast",
        viewlab.draw_broadcast,
        _merge(
            _fixed(**{"*": _broadcastable(2)}), _optional(op=st.sampled_from(["+", "*", "==", "<"]), title=st.just("t"))
        ),
        oracle_draw_broadcast,
        examples=30,
        tensor_args=("*",),
    ),
    Target(
        "explain_broadcast",
        viewlab.explain_broadcast,
        _merge(_fixed(**{"*": broadcastable}), _optional(dtype=st.sampled_from([torch.float16, torch.int64]))),
        oracle_explain,
        tensor_args=("*",),
    ),
    Target(
        "shares_storage",
        viewlab.shares_storage,
        any_strided()
        .filter(lambda t: t.device.type != "meta")
        .flatmap(
            lambda t: st.sampled_from(
                [{"a": t, "b": t[...]}, {"a": t, "b": t.clone()}, {"a": t.reshape(-1)[:1], "b": t}]
            )
        ),
        oracle_shares,
        tensor_args=("a", "b"),
    ),
    Target(
        "observe",
        viewlab.observe,
        _fixed(case=st.sampled_from(list(viewlab.OP_CASES) + _UNIQUE_OPS)),
        oracle_observe,
        examples=60,
    ),
    Target(
        "view_op_table",
        viewlab.view_op_table,
        _optional(documented=st.sampled_from([None, "view", "copy", "view or copy", "self or copy"])),
        oracle_table,
        examples=20,
    ),
    Target(
        "padding_mask",
        viewlab.padding_mask,
        st.lists(st.integers(0, 5), min_size=0, max_size=4).flatmap(
            lambda ls: _merge(
                _fixed(lengths=st.just(torch.tensor(ls, dtype=torch.int64))),
                _optional(max_len=st.integers(max(ls, default=0), 7)),
            )
        ),
        oracle_padding,
        tensor_args=("lengths",),
    ),
    Target(
        "causal_mask",
        viewlab.causal_mask,
        _merge(
            _fixed(q_len=st.integers(0, 6)), _optional(k_len=st.integers(0, 6), device=st.sampled_from(["cpu", "meta"]))
        ),
        oracle_causal,
    ),
    Target(
        "combine_masks",
        viewlab.combine_masks,
        broadcastable.map(lambda ts: {"*": [t.long() % 2 == 0 for t in ts]}),
        oracle_combine,
        tensor_args=("*",),
    ),
    Target(
        "scaled_dot_product_attention",
        viewlab.scaled_dot_product_attention,
        qkv(),
        oracle_sdpa,
        examples=150,
        tensor_args=("q", "k", "v", "mask"),
    ),
    Target(
        "split_heads",
        viewlab.split_heads,
        st.tuples(st.integers(1, 3), small, st.integers(1, 3), st.integers(0, 3)).map(
            lambda s: {
                "x": torch.arange(float(s[0] * s[1] * s[2] * s[3])).reshape(s[0], s[1], s[2] * s[3]),
                "num_heads": s[2],
            }
        ),
        oracle_split,
        tensor_args=("x",),
    ),
    Target(
        "merge_heads",
        viewlab.merge_heads,
        st.lists(st.integers(0, 3), min_size=4, max_size=4).map(
            lambda s: {"x": torch.arange(float(math.prod(s))).reshape(s)}
        ),
        oracle_merge,
        tensor_args=("x",),
    ),
    Target(
        "multi_head_self_attention",
        viewlab.multi_head_self_attention,
        mhsa_args(),
        oracle_mhsa,
        examples=120,
        tensor_args=("x", "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias", "lengths"),
    ),
    Target(
        "SqueezeExcitation",
        viewlab.SqueezeExcitation,
        st.integers(1, 20).flatmap(
            lambda c: (
                _fixed(channels=st.just(c), reduction=st.integers(1, c))
                if c < 16
                else _merge(_fixed(channels=st.just(c)), _optional(reduction=st.integers(1, c)))
            )
        ),
        oracle_se_init,
        examples=60,
    ),
    Target(
        "SqueezeExcitation.forward",
        _call_se,
        st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 3), seeds)
        .map(lambda s: {"x": _randn(s[3], s[0], 4, s[1], s[2])})
        .flatmap(lambda kw: _merge(st.just(kw), _optional(use_expand_as=st.booleans()))),
        oracle_se,
        tensor_args=("x",),
    ),
    Target("compare", bench.compare, _compare_good, oracle_compare, examples=30),
    Target(
        "same_bytes_copy",
        bench.same_bytes_copy,
        _fixed(like=any_strided().filter(lambda t: t.device.type != "meta")),
        oracle_copy,
        examples=60,
        tensor_args=("like",),
    ),
    Target(
        "tensors",
        exercises.tensors,
        _optional(
            dims=st.just((1, 2)),
            side=st.just((1, 3)),
            dtype=st.sampled_from([torch.uint8, torch.int8, torch.bool, torch.float16, torch.float64]),
            values=st.just((0, 1)),
            layouts=st.just(("contiguous", "expanded")),
            shape=st.just((2, 2)),
        ),
        oracle_tensors,
        examples=100,
    ),
    Target(
        "shapes", exercises.shapes, _optional(dims=st.just((0, 2)), side=st.just((0, 3))), oracle_shapes, examples=60
    ),
    Target("get", exercises.get, _fixed(exercise_id=st.sampled_from(_IDS)), oracle_get, examples=40),
    Target(
        "exercise_ids",
        exercises.exercise_ids,
        _optional(prefix=st.sampled_from(["", "05", "0", "x"])),
        oracle_ids,
        examples=30,
    ),
    Target("show", exercises.show, _fixed(exercise_id=st.sampled_from(_IDS)), oracle_none, examples=30, quiet=True),
    Target(
        "hint",
        exercises.hint,
        _merge(_fixed(exercise_id=st.sampled_from(_IDS)), _optional(n=st.just(1))),
        oracle_none,
        examples=30,
        quiet=True,
    ),
    Target(
        "solution", exercises.solution, _fixed(exercise_id=st.sampled_from(_IDS)), oracle_none, examples=30, quiet=True
    ),
    Target("check", exercises.check, _check_good, oracle_check, examples=40, tensor_args=("examples",)),
    Target(
        "check_exercise",
        exercises.check_exercise,
        st.sampled_from(_IDS).map(
            lambda i: {
                "exercise_id": i,  # answer: what passes where the reference measures
                "learner_fn": exercises.get(i).answer or exercises.get(i).reference,
                "max_examples": 1,
            }
        ),
        oracle_check,
        examples=25,
    ),
    Target(
        "check_guess",
        exercises.check_guess,
        _fixed(
            guess=st.one_of(st.none(), st.integers(0, 3), st.booleans()),
            actual=st.integers(0, 3),
            why=st.text(max_size=20),
        ),
        oracle_guess,
        examples=40,
        quiet=True,
    ),
    Target(
        "named_rule",
        exercises.named_rule,
        _fixed(label=st.text(min_size=1, max_size=10), rule=st.just(lambda args, out: None)),
        oracle_named_rule,
        examples=20,
    ),
    Target(
        "register",
        exercises.register,
        _fixed(exercise=st.sampled_from([exercises.get(i) for i in _IDS])),
        oracle_register,
        examples=20,
    ),
]


# ----- the harness ----------------------------------------------------------------------------------------------
def _tensors_in(obj: Any, depth: int = 0) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if depth > 3:
        return []
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors_in(o, depth + 1)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors_in(o, depth + 1)]
    return []


def _snapshot(t: torch.Tensor) -> tuple:
    if t.is_nested:
        return (t.layout, t.dtype, t.device, t.requires_grad, t._version, None)
    meta = (t.layout, tuple(t.shape), t.dtype, t.device, t.requires_grad, t._version)
    if t.layout != torch.strided:
        return meta + (None,)
    meta += (tuple(t.stride()), t.storage_offset())
    if t.device.type == "meta":
        return meta + (None,)
    data = t.detach()
    if data.is_quantized:
        data = data.int_repr()
    flat = torch.empty(data.numel(), dtype=data.dtype).copy_(data.reshape(-1).cpu())
    return meta + (flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8),)


def _same(a: tuple, b: tuple) -> bool:
    if a[:-1] != b[:-1]:
        return False
    return (a[-1] is None and b[-1] is None) or (a[-1] is not None and b[-1] is not None and torch.equal(a[-1], b[-1]))


def _environment() -> tuple:
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return (
        frozenset(t.ident for t in threading.enumerate()),
        len(_get_current_dispatch_mode_stack()),
        len(_get_current_function_mode_stack()),
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.get_num_threads(),
        "matplotlib.pyplot" in sys.modules,
    )


class Hang(Exception):
    """Raised by the alarm when one call runs longer than CALL_TIMEOUT_S."""


@contextlib.contextmanager
def _alarm(seconds: float):
    def ring(signum, frame):  # noqa: ANN001
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _raised_in_viewlab(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(SRC)


def _public_name(target: Target) -> str:
    return target.name.split(".")[0]


def is_clear(target: Target, exc: BaseException) -> bool:
    """A clear rejection: see the module docstring."""
    if not _raised_in_viewlab(exc):
        return False
    if isinstance(exc, BroadcastError):
        return True
    text = str(exc)
    names = f"{_public_name(target)}(" in text
    if isinstance(exc, (TypeError, ValueError)):
        return names
    # The environment: no CUDA here, or not inside IPython (held_by_ipython needs a running shell).
    return isinstance(exc, RuntimeError) and names and ("CUDA" in text or "GPU" in text or "IPython or Jupyter" in text)


def _bend(data: Any, kwargs: dict[str, Any], target: Target) -> tuple[dict[str, Any], str]:
    mode = data.draw(st.sampled_from(["good", "near", "near", "bad", "bad", "many"]), label="mode")
    kwargs = dict(kwargs)
    if mode == "good":
        return kwargs, mode
    tensor_names = [
        n
        for n in target.tensor_args
        if isinstance(kwargs.get(n), torch.Tensor)
        or (n == "*" and any(isinstance(t, torch.Tensor) for t in kwargs.get("*", ())))
    ]
    if mode == "near" and tensor_names:
        name = data.draw(st.sampled_from(tensor_names), label="bent argument")
        how = data.draw(st.sampled_from(sorted(MUTATIONS)), label="bend")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "*":
                i = data.draw(st.integers(0, len(kwargs["*"]) - 1))
                args = list(kwargs["*"])
                args[i] = MUTATIONS[how](args[i])
                kwargs["*"] = args
            else:
                kwargs[name] = MUTATIONS[how](kwargs[name])
        return kwargs, f"near:{how}"
    params = sorted(set(_parameters(target)) | set(kwargs))
    chosen = [data.draw(st.sampled_from(params), label="bad argument")] if params else []
    if mode == "many" and params:
        chosen = data.draw(
            st.lists(st.sampled_from(params), min_size=1, max_size=3, unique=True), label="bad arguments"
        )
    for name in chosen:
        if name == "*":
            kwargs["*"] = data.draw(st.lists(bad_values(), min_size=0, max_size=3), label="bad varargs")
        else:
            kwargs[name] = data.draw(bad_values(), label=f"bad {name}")
    return kwargs, mode


def _parameters(target: Target) -> list[str]:
    import inspect

    fn = target.fn
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    out = []
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            out.append("*")
        elif p.kind != p.VAR_KEYWORD:
            out.append(p.name)
    return out


def _call(target: Target, kwargs: dict[str, Any]) -> Any:
    args = list(kwargs.get("*", ()))
    rest = {k: v for k, v in kwargs.items() if k != "*"}
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink) if target.quiet else contextlib.nullcontext():
        return target.fn(*args, **rest)


def fuzz_one(target: Target, data: Any) -> None:
    good = data.draw(target.good, label="good arguments")
    kwargs, mode = _bend(data, good, target)
    MODE[0] = mode
    inputs = _tensors_in(kwargs)
    before = [_snapshot(t) for t in inputs]
    env = _environment()
    stats = FIGURES.setdefault(target.name, {"tried": 0, "returned": 0, "clear": 0, "unclear": 0, "good": 0})
    stats["tried"] += 1
    stats["good"] += mode == "good"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with _alarm(CALL_TIMEOUT_S):
                result = _call(target, kwargs)
    except Hang:
        stats["unclear"] += 1
        raise AssertionError(f"{target.name} hung ({mode}) on {kwargs!r}") from None
    except Exception as exc:  # noqa: BLE001 - classified below
        if mode == "good":
            stats["unclear"] += 1
            raise AssertionError(f"{target.name} rejected good input {kwargs!r}: {type(exc).__name__}: {exc}") from exc
        if not is_clear(target, exc):
            stats["unclear"] += 1
            raise AssertionError(
                f"{target.name} ({mode}) failed unclearly on {kwargs!r}: {type(exc).__name__}: {exc}"
            ) from exc
        stats["clear"] += 1
        result = None
    else:
        stats["returned"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                target.oracle(kwargs, result, data)
        except Exception as exc:
            raise AssertionError(
                f"{target.name} ({mode}) gave a wrong result on {kwargs!r}: {type(exc).__name__}: {exc}"
            ) from exc
    after = [_snapshot(t) for t in inputs]
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if not _same(a, b)]
    assert not changed, f"{target.name} ({mode}) changed input tensor(s) {changed} of {kwargs!r}"
    assert _environment() == env, f"{target.name} ({mode}) left something behind: {env} -> {_environment()}"
    if target.name == "SqueezeExcitation.forward":
        assert all(torch.equal(v, _SE_STATE[k]) for k, v in _SE.state_dict().items()), "the module's weights changed"


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_fuzz(target: Target) -> None:
    @settings(
        max_examples=target.examples,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.nested_given,
        ],
    )
    @given(data=st.data())
    def run(data: Any) -> None:
        fuzz_one(target, data)

    run()


def test_every_public_callable_of_these_modules_is_fuzzed():
    """New public functions need a row in TARGETS (memory and monitor are fuzzed where they are maintained)."""
    covered = {t.fn for t in TARGETS} | {att.SqueezeExcitation}
    modules = ("attention", "layout", "draw_broadcast", "bench", "broadcast", "viewops", "sharing", "exercises")
    missing = []
    for mod_name in modules:
        mod = sys.modules[f"viewlab.{mod_name}"]
        for name in mod.__all__:
            obj = getattr(mod, name)
            if callable(obj) and not isinstance(obj, type) and obj not in covered:
                missing.append(f"{mod_name}.{name}")
    draw = sys.modules["viewlab.draw"]
    if draw.draw_layout not in covered:
        missing.append("draw.draw_layout")
    assert not missing, f"add these to TARGETS: {missing}"


def test_zz_fuzz_figures():
    """The figures of this run: inputs tried, rejections that were clear, time (printed; JSON if asked)."""
    if not FIGURES:
        pytest.skip("run together with test_fuzz to get its figures")
    tried = sum(s["tried"] for s in FIGURES.values())
    clear = sum(s["clear"] for s in FIGURES.values())
    unclear = sum(s["unclear"] for s in FIGURES.values())
    rejected = clear + unclear
    share = 100.0 * clear / rejected if rejected else 100.0
    seconds = time.perf_counter() - STARTED
    report = {
        "inputs_tried": tried,
        "returned": sum(s["returned"] for s in FIGURES.values()),
        "rejected": rejected,
        "clear_percent": round(share, 2),
        "seconds": round(seconds, 1),
        "per_target": FIGURES,
    }
    sys.__stdout__.write(
        f"\nfuzz: {tried} inputs, {report['returned']} results checked, {rejected} rejected, "
        f"{share:.1f} % of rejections clear, {seconds:.1f} s\n"
    )
    if os.environ.get("VIEWLAB_FUZZ_REPORT"):
        Path(os.environ["VIEWLAB_FUZZ_REPORT"]).write_text(json.dumps(report, indent=2, default=str))
    assert unclear == 0 and share == 100.0
