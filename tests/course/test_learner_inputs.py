"""The shared learner-input strategies draw every kind they name, and each kind is what its name says."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import find, given, settings

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import (
    ATTENTION_LAYOUTS,
    NUMPY_KINDS,
    TENSOR_KINDS,
    attention_cases,
    learner_cases,
    numpy_cases,
)

FIND = settings(max_examples=300, derandomize=True, deadline=None, database=None)


def _overlaps(t: torch.Tensor) -> bool:
    """Two indices read one storage element (brute force over the index space)."""
    addresses = torch.zeros(t.shape, dtype=torch.int64)
    if t.numel() == 0:
        return False
    for d, (k, s) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[d] = k
        addresses = addresses + torch.arange(k).reshape(shape) * s
    return addresses.unique().numel() < t.numel()


def _tensor_kind_holds(kind: str, t: torch.Tensor) -> bool:
    if kind == "contiguous":
        return t.is_contiguous()
    if kind == "offset":
        return t.storage_offset() > 0
    if kind == "view_of_view":
        return t._base is not None and t.dim() >= 2
    if kind in ("transposed", "permuted"):
        return t._base is not None and t.dim() >= 2
    if kind == "expanded":
        return 0 in t.stride() or all(k <= 1 for k in t.shape)
    if kind == "unfold":
        return t._base is not None and t.dim() >= 2
    if kind == "channels_last":
        return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)
    if kind == "zero_d":
        return t.dim() == 0
    if kind == "empty":
        return t.numel() == 0
    if kind == "size_one":
        return 1 in t.shape
    if kind == "requires_grad":
        return t.requires_grad and t.is_leaf
    if kind == "grad_view":
        return t.requires_grad and not t.is_leaf
    if kind == "as_strided":
        return (
            t.storage_offset() + sum((k - 1) * s for k, s in zip(t.shape, t.stride()))
            < max(t.untyped_storage().nbytes() // t.element_size(), 1)
            or t.numel() == 0
        )
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", TENSOR_KINDS)
def test_every_tensor_kind_is_drawn(kind):
    def wanted(c) -> bool:  # a kind that can hold more than one element is found holding several
        return c.kind == kind and (c.tensor.numel() > 1 or kind in ("zero_d", "empty"))

    case = find(learner_cases(), wanted, settings=FIND)
    assert case.kind == kind and _tensor_kind_holds(kind, case.tensor)


@RULE_SETTINGS
@given(learner_cases())
def test_each_tensor_is_the_kind_it_says(case):
    assert _tensor_kind_holds(case.kind, case.tensor), case


def test_overlapping_unfold_windows_and_several_dtypes_are_drawn():
    windows = find(learner_cases(kinds=("unfold",)), lambda c: _overlaps(c.tensor), settings=FIND)
    assert _overlaps(windows.tensor)
    for dtype in (torch.float16, torch.bfloat16, torch.int8, torch.bool, torch.complex64):
        assert find(learner_cases(), lambda c, d=dtype: c.tensor.dtype == d, settings=FIND).tensor.dtype == dtype


@RULE_SETTINGS
@given(learner_cases(dims=(2, 3), side=(1, 3)))
def test_bounds_are_kept(case):
    t = case.tensor
    limit = 4 if case.kind in ("unfold", "channels_last") else 3
    assert 2 <= t.dim() <= limit or case.kind == "zero_d"


def _numpy_kind_holds(case) -> bool:
    a, kind = case.array, case.kind
    if kind == "flipped":
        return case.negative_stride
    if kind == "mixed_signs":
        return any(s < 0 for s in a.strides) and any(s > 0 for s in a.strides)
    if kind == "stepped":
        return a.strides[0] > a.itemsize * int(np.prod(a.shape[1:]))
    if kind == "broadcast":
        return 0 in a.strides and not a.flags.writeable
    if kind == "fortran":
        return a.flags.f_contiguous and a.ndim >= 2
    if kind == "big_endian":
        return a.dtype.byteorder in (">", "=") and not a.dtype.isnative
    if kind == "little_endian":
        return a.dtype.str.startswith("<")
    if kind == "unaligned":
        return not a.flags.aligned
    if kind == "read_only":
        return not a.flags.writeable
    if kind == "record_field":
        return not case.strides_fit_itemsize
    if kind == "zero_d":
        return a.ndim == 0
    if kind == "empty":
        return a.size == 0
    return a.flags.c_contiguous


@pytest.mark.parametrize("kind", NUMPY_KINDS)
def test_every_numpy_kind_is_drawn(kind):
    case = find(numpy_cases(), lambda c: c.kind == kind, settings=FIND)
    assert _numpy_kind_holds(case), case


@RULE_SETTINGS
@given(numpy_cases())
def test_each_array_is_the_kind_it_says(case):
    assert _numpy_kind_holds(case), case


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS)
def test_every_attention_layout_is_drawn(layout):
    case = find(attention_cases(), lambda c: c.layout == layout, settings=FIND)
    b, h, lq, dh = case.q.shape
    assert case.k.shape == case.v.shape and case.k.shape[:2] == (b, h) and case.k.shape[3] == dh
    if layout == "contiguous":
        assert case.q.is_contiguous()
    else:  # heads split from (B, L, D): contiguous only where one head or one position makes it so
        assert case.q.transpose(1, 2).is_contiguous() or case.q.storage_offset() > 0 or layout == "fused_qkv"


@pytest.mark.parametrize(
    "what",
    [
        lambda c: c.sizes["Lq"] != c.sizes["Lk"],
        lambda c: c.sizes["H"] == 1,
        lambda c: c.sizes["Lq"] == 1,
        lambda c: c.k.storage_offset() > 0,
        lambda c: not c.q.is_contiguous(),
    ],
    ids=["Lq!=Lk", "one head", "one query", "storage offset", "non-contiguous"],
)
def test_attention_edges_are_drawn(what):
    assert what(find(attention_cases(), what, settings=FIND))
