"""Tensors, NumPy arrays and attention inputs as a learner meets them: the inputs every rule test draws from.

A rule of the course is proven only over the inputs a learner will actually have, so these strategies do not
build their tensors from the course's own constructors alone. They make:

- :func:`learner_cases` / :func:`learner_tensors`: tensors with a storage offset, views of views, transposes,
  permutes, expands (stride 0), ``unfold`` windows (overlapping reads), ``channels_last``, 0-d, empty, size-1
  dims, ``requires_grad`` leaves and their views, arbitrary ``as_strided`` layouts, in several dtypes. The
  storage of each holds ``0, 1, 2, ...`` (cast to the dtype), so a value tells where it is stored as long as
  the dtype can hold it.
- :func:`numpy_cases` / :func:`numpy_arrays`: NumPy arrays of every stride sign (positive, negative, mixed,
  zero), both byte orders, aligned and unaligned, read-only, record fields (strides that are no multiple of
  the item size), Fortran order, 0-d and empty: the sources a learner hands to ``torch.tensor``,
  ``torch.as_tensor``, ``torch.asarray`` and ``torch.from_numpy``.
- :func:`attention_cases`: ``q, k, v`` of shape ``(B, H, L, Dh)`` as :func:`viewlab.attention.split_heads` and
  ``view(B, L, H, Dh).transpose(1, 2)`` make them (from separate or fused projections), or contiguous; with
  ``Lq != Lk``, one head and one query among them.

Each case carries its ``kind`` so a test can say which kind broke a rule, and so
``tests/course/test_learner_inputs.py`` can check that every kind is drawn and is what its name says.

>>> from hypothesis import find
>>> find(learner_tensors(), lambda t: t.storage_offset() > 0 and t.dim() == 2).storage_offset() > 0
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from viewlab.attention import split_heads

TENSOR_KINDS = (
    "contiguous",
    "offset",  # a slice that starts inside its storage (storage_offset > 0)
    "view_of_view",  # a slice of a transpose of a reshape: views stacked on views
    "transposed",
    "permuted",
    "expanded",  # stride 0 in at least one dim of size > 1 (when the shape allows it)
    "unfold",  # overlapping windows: two indices may read one element
    "channels_last",  # 4-d only
    "zero_d",
    "empty",
    "size_one",  # at least one dim of size 1, among others
    "requires_grad",  # a leaf that requires grad
    "grad_view",  # a view of a leaf that requires grad (a non-leaf)
    "as_strided",  # arbitrary strides 0..5 and an offset over a storage just big enough
)

DTYPES = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.complex64,
)
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class TensorCase:
    """One drawn tensor and the kind of layout it was made as."""

    kind: str
    tensor: torch.Tensor

    def __repr__(self) -> str:
        t = self.tensor
        return (
            f"TensorCase({self.kind}: shape={tuple(t.shape)}, stride={t.stride()}, "
            f"offset={t.storage_offset()}, dtype={t.dtype}, requires_grad={t.requires_grad})"
        )


def is_dense(t: torch.Tensor) -> bool:
    """No gaps and no overlaps: ignoring size-1 dims, the strides sorted are the row-major strides of some order.

    The layout PyTorch's internal-overlap check can reason about (the rule tests of notebooks 01 and 02 use it).

    >>> is_dense(torch.zeros(2, 3).t()), is_dense(torch.zeros(2, 3)[:, ::2]), is_dense(torch.zeros(1, 3).expand(2, 3))
    (True, False, False)
    """
    expected = 1
    for stride, size in sorted((s, k) for s, k in zip(t.stride(), t.shape) if k != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _filled(n: int, dtype: torch.dtype) -> torch.Tensor:
    """A 1-D storage of ``n`` elements holding 0, 1, 2, ... in ``dtype``."""
    return torch.arange(n).to(dtype)


def _shape(draw, dims: tuple[int, int], side: tuple[int, int]) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(*side), min_size=dims[0], max_size=dims[1])))


def _make(draw, kind: str, dims: tuple[int, int], side: tuple[int, int], dtype: torch.dtype):
    """Build one tensor of ``kind``; ``None`` when the dims/side bounds rule that kind out."""
    lo, hi = dims
    smin, smax = side
    if kind == "zero_d":
        return _filled(1, dtype).reshape(()) if lo == 0 else None
    if kind == "channels_last":
        if not lo <= 4 <= hi:
            return None
        shape = tuple(draw(st.integers(*side)) for _ in range(4))
        return _filled(math.prod(shape), dtype).reshape(shape).contiguous(memory_format=torch.channels_last)
    if kind == "empty":
        if smin > 0 or hi < 1:
            return None
        shape = list(_shape(draw, (max(lo, 1), hi), side))
        shape[draw(st.integers(0, len(shape) - 1))] = 0
        return _filled(0, dtype).reshape(shape)
    if kind == "size_one":
        if smin > 1 or smax < 1 or hi < 1:
            return None
        shape = list(_shape(draw, (max(lo, 1), hi), side))
        shape[draw(st.integers(0, len(shape) - 1))] = 1
        return _filled(math.prod(shape), dtype).reshape(shape)
    if kind in ("requires_grad", "grad_view"):
        if dtype not in FLOAT_DTYPES and not dtype.is_complex:
            dtype = torch.float32  # only floating and complex tensors can require grad
        shape = _shape(draw, (max(lo, 1) if kind == "grad_view" else lo, hi), side)
        leaf = _filled(math.prod(shape), dtype).reshape(shape).clone().requires_grad_(True)
        if kind == "requires_grad":
            return leaf
        return leaf.transpose(0, -1) if draw(st.booleans()) else leaf[..., ::2]
    if kind in ("transposed", "permuted", "view_of_view") and hi < 2:
        return None
    shape = _shape(draw, (max(lo, 2) if kind in ("transposed", "permuted", "view_of_view") else lo, hi), side)
    n = len(shape)
    if kind == "offset":
        if not shape or 0 in shape:
            return None
        start = draw(st.integers(1, 3))
        return _filled(start + math.prod(shape), dtype)[start:].reshape(shape)
    if kind == "transposed":
        a, b = draw(st.sampled_from([(i, j) for i in range(n) for j in range(i + 1, n)]))
        swapped = list(shape)
        swapped[a], swapped[b] = swapped[b], swapped[a]
        return _filled(math.prod(shape), dtype).reshape(swapped).transpose(a, b)
    if kind == "permuted":
        perm = draw(st.permutations(range(n)))
        base = [0] * n
        for i, p in enumerate(perm):
            base[p] = shape[i]
        return _filled(math.prod(shape), dtype).reshape(base).permute(tuple(perm))
    if kind == "view_of_view":
        # reshape -> transpose -> a stepped slice with a start: three views deep, offset and gaps included
        step, start = draw(st.integers(1, 2)), draw(st.integers(0, 1))
        first = [start + max(shape[0] - 1, 0) * step + 1, *shape[1:]]
        owner = _filled(math.prod(first), dtype).reshape(first[::-1]).permute(*reversed(range(n)))
        return owner[start : start + shape[0] * step : step]
    if kind == "expanded":
        if not shape:
            return None
        ones = [draw(st.booleans()) for _ in shape]
        ones[draw(st.integers(0, n - 1))] = True
        small = [1 if o else k for k, o in zip(shape, ones)]
        return _filled(math.prod(small), dtype).reshape(small).expand(shape)
    if kind == "unfold":
        if not shape:
            return None
        # windows of `size` every `step` along dim 0: shape (count, *shape[1:], size); step < size overlaps
        size = draw(st.integers(max(smin, 1), max(smax, 1)))
        step = draw(st.integers(1, size))
        length = (max(shape[0], 1) - 1) * step + size  # torch refuses a window longer than the dim
        return _filled(length * math.prod(shape[1:]), dtype).reshape([length, *shape[1:]]).unfold(0, size, step)
    if kind == "as_strided":
        strides = [draw(st.integers(0, 5)) for _ in shape]
        offset = draw(st.integers(0, 3))
        span = offset + sum((k - 1) * s for k, s in zip(shape, strides)) + 1 if all(shape) else offset
        return _filled(span, dtype).as_strided(shape, strides, offset)
    return _filled(math.prod(shape), dtype).reshape(shape)


@st.composite
def learner_cases(
    draw,
    dims: tuple[int, int] = (0, 4),
    side: tuple[int, int] = (0, 4),
    kinds: tuple[str, ...] = TENSOR_KINDS,
    dtypes: tuple[torch.dtype, ...] = DTYPES,
) -> TensorCase:
    """A :class:`TensorCase`: a tensor of a drawn kind, rank within ``dims`` (unfold adds one) and sizes within
    ``side`` (unfold windows, channels_last and kinds that need a size 0 or 1 keep to ``side`` too).

    A kind the bounds rule out is replaced by another drawn kind; ``contiguous`` always fits.
    """
    unknown = set(kinds) - set(TENSOR_KINDS)
    if unknown:
        raise ValueError(f"learner_cases: unknown kinds {sorted(unknown)}; pick from {TENSOR_KINDS}")
    dtype = draw(st.sampled_from(dtypes))
    kind = draw(st.sampled_from(kinds))
    t = _make(draw, kind, dims, side, dtype)
    if t is None:
        kind, t = "contiguous", _make(draw, "contiguous", dims, side, dtype)
    return TensorCase(kind, t)


def learner_tensors(**bounds) -> st.SearchStrategy[torch.Tensor]:
    """The tensor of :func:`learner_cases` alone (same arguments)."""
    return learner_cases(**bounds).map(lambda case: case.tensor)


# ----- NumPy arrays ----------------------------------------------------------------------------------------------
NUMPY_KINDS = (
    "contiguous",
    "flipped",  # one dim reversed: a negative stride
    "mixed_signs",  # a negative and a positive stride (e.g. BGR->RGB: img[..., ::-1])
    "stepped",  # a positive step > 1
    "broadcast",  # np.broadcast_to: a stride 0, read-only
    "fortran",  # column-major
    "big_endian",  # a byte order that is not the machine's (when the machine is little-endian)
    "little_endian",  # the other byte order, explicitly spelled
    "unaligned",  # data not at a multiple of the item size
    "read_only",
    "record_field",  # a field of a structured array: a stride no multiple of the item size
    "zero_d",
    "empty",
)
NUMPY_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "uint8", "bool", "complex64")


@dataclass(frozen=True)
class NumpyCase:
    """One drawn array, its kind, and the NumPy facts about it a rule may depend on."""

    kind: str
    array: np.ndarray

    @property
    def negative_stride(self) -> bool:
        return any(s < 0 for s in self.array.strides)

    @property
    def native_byte_order(self) -> bool:
        return self.array.dtype.isnative

    @property
    def strides_fit_itemsize(self) -> bool:
        return all(s % self.array.itemsize == 0 for s in self.array.strides)

    def __repr__(self) -> str:
        a = self.array
        return (
            f"NumpyCase({self.kind}: shape={a.shape}, strides={a.strides}, dtype={a.dtype.str}, "
            f"aligned={a.flags.aligned}, writeable={a.flags.writeable})"
        )


def _np_filled(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.arange(math.prod(shape)).astype(dtype).reshape(shape)


def _np_make(draw, kind: str, dtype: np.dtype, dims: tuple[int, int], side: tuple[int, int]):
    lo, hi = dims
    if kind == "zero_d":
        return np.array(7).astype(dtype) if lo == 0 else None
    if kind == "empty":
        if side[0] > 0 or hi < 1:
            return None
        shape = list(_shape(draw, (max(lo, 1), hi), side))
        shape[draw(st.integers(0, len(shape) - 1))] = 0
        return _np_filled(tuple(shape), dtype)
    needs = 2 if kind in ("mixed_signs", "fortran") else 1
    if hi < needs:
        return None
    shape = _shape(draw, (max(lo, needs), hi), (max(side[0], 1), max(side[1], 1)))
    n = len(shape)
    if kind == "flipped":
        axis = draw(st.integers(0, n - 1))
        return np.flip(_np_filled(shape, dtype), axis)
    if kind == "mixed_signs":
        return _np_filled(shape, dtype)[..., ::-1]
    if kind == "stepped":
        step = draw(st.integers(2, 3))
        big = _np_filled((shape[0] * step, *shape[1:]), dtype)
        return big[::step]
    if kind == "broadcast":
        return np.broadcast_to(_np_filled(shape[1:], dtype), shape)
    if kind == "fortran":
        return np.asfortranarray(_np_filled(shape, dtype))
    if kind in ("big_endian", "little_endian"):
        dtype = dtype if dtype.itemsize > 1 else np.dtype("int16")  # one byte has no byte order
        order = ">" if kind == "big_endian" else "<"
        return _np_filled(shape, dtype).astype(dtype.newbyteorder(order))
    if kind == "unaligned":
        dtype = dtype if dtype.itemsize > 1 else np.dtype("int32")  # one byte is always aligned
        count = math.prod(shape)
        raw = bytearray(count * dtype.itemsize + 1)
        a = np.frombuffer(raw, dtype=dtype, count=count, offset=1).reshape(shape)
        a[...] = _np_filled(shape, dtype)
        return a
    if kind == "read_only":
        a = _np_filled(shape, dtype)
        a.flags.writeable = False
        return a
    if kind == "record_field":
        dtype = dtype if dtype.itemsize > 1 else np.dtype("float32")
        rec = np.zeros(shape, dtype=[("x", dtype), ("pad", "u1")])  # stride itemsize + 1
        rec["x"] = _np_filled(shape, dtype)
        return rec["x"]
    return _np_filled(shape, dtype)


@st.composite
def numpy_cases(
    draw,
    dims: tuple[int, int] = (0, 3),
    side: tuple[int, int] = (0, 4),
    kinds: tuple[str, ...] = NUMPY_KINDS,
    dtypes: tuple[str, ...] = NUMPY_DTYPES,
) -> NumpyCase:
    """A :class:`NumpyCase`; a kind the bounds rule out is replaced by a contiguous array."""
    unknown = set(kinds) - set(NUMPY_KINDS)
    if unknown:
        raise ValueError(f"numpy_cases: unknown kinds {sorted(unknown)}; pick from {NUMPY_KINDS}")
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    kind = draw(st.sampled_from(kinds))
    a = _np_make(draw, kind, dtype, dims, side)
    if a is None:
        kind, a = "contiguous", _np_make(draw, "contiguous", dtype, dims, side)
    return NumpyCase(kind, a)


def numpy_arrays(**bounds) -> st.SearchStrategy[np.ndarray]:
    """The array of :func:`numpy_cases` alone (same arguments)."""
    return numpy_cases(**bounds).map(lambda case: case.array)


# ----- attention inputs ------------------------------------------------------------------------------------------
ATTENTION_LAYOUTS = (
    "split_heads",  # split_heads(x @ Wq, H): (B, H, L, Dh) over a (B, L, D) storage
    "transpose",  # x.view(B, L, H, Dh).transpose(1, 2), written out by hand
    "fused_qkv",  # one (B, L, 3D) projection, chunked into q, k, v, then split: storage offsets too
    "contiguous",  # (B, H, L, Dh) laid out as it reads, e.g. a kernel's output
    "transposed_x",  # split_heads of a (B, D, L) tensor seen as (B, L, D), e.g. conv features: last stride L
)


@dataclass(frozen=True)
class AttentionCase:
    """``q`` of shape ``(B, H, Lq, Dh)``, ``k`` and ``v`` of shape ``(B, H, Lk, Dh)``, and how they were made."""

    layout: str
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor

    @property
    def sizes(self) -> dict[str, int]:
        b, h, lq, dh = self.q.shape
        return {"B": b, "H": h, "Lq": lq, "Lk": self.k.shape[2], "Dh": dh}

    def __repr__(self) -> str:
        return f"AttentionCase({self.layout}: {self.sizes}, q stride {self.q.stride()}, dtype {self.q.dtype})"


def _heads(layout: str, x: torch.Tensor, heads: int) -> torch.Tensor:
    b, length, d = x.shape
    if layout == "transpose":
        return x.view(b, length, heads, d // heads).transpose(1, 2)
    if layout == "contiguous":
        return split_heads(x, heads).contiguous()
    if layout == "transposed_x":
        return split_heads(x.transpose(1, 2).contiguous().transpose(1, 2), heads)
    return split_heads(x, heads)


@st.composite
def attention_cases(
    draw,
    layouts: tuple[str, ...] = ATTENTION_LAYOUTS,
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float64),
    max_len: int = 5,
) -> AttentionCase:
    """Attention inputs as a model makes them. ``Lq`` and ``Lk`` are drawn apart (one query, ``Lq != Lk`` and
    ``Lq == Lk`` all occur); ``H`` may be 1; ``B`` may be 1; fused projections give q, k, v storage offsets.
    For ``fused_qkv`` one length serves q, k and v (one projection of one sequence)."""
    layout = draw(st.sampled_from(layouts))
    dtype = draw(st.sampled_from(dtypes))
    b = draw(st.integers(1, 3))
    heads = draw(st.integers(1, 3))
    dh = draw(st.integers(1, 4))
    d = heads * dh
    lq = draw(st.integers(1, max_len))
    lk = lq if layout == "fused_qkv" else draw(st.integers(1, max_len))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))

    def project(length: int, width: int) -> torch.Tensor:
        x = torch.randn(b, length, 8, generator=gen, dtype=dtype)
        w = torch.randn(8, width, generator=gen, dtype=dtype)
        return x @ w

    if layout == "fused_qkv":
        q, k, v = (split_heads(part, heads) for part in project(lq, 3 * d).chunk(3, dim=-1))
    else:
        q = _heads(layout, project(lq, d), heads)
        k = _heads(layout, project(lk, d), heads)
        v = _heads(layout, project(lk, d), heads)
    return AttentionCase(layout, q, k, v)
