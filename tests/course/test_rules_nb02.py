"""The rules notebook 02 (broadcasting) states, each checked against torch over generated shapes and layouts.

Every test binds one sentence of the notebook's prose (``@pytest.mark.rule``) and checks it on shapes of
rank 0 to 4 with sizes 0, 1 and more, in several dtypes and memory layouts -- the edges the notebook's own
examples do not reach (a size-1 feature dim, a batch of one, an empty operand, a stride-0 target).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import is_dense, learner_cases, learner_tensors
from viewlab import watch_broadcasts
from viewlab.errors import BroadcastStretchError

SHAPES = st.lists(st.integers(0, 3), max_size=4).map(tuple)


def _by_the_rules(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The three rules, written out: right-align, pad with 1, equal-or-1 (None: refused)."""
    rank = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    out = []
    for sizes in zip(*padded):
        others = {k for k in sizes if k != 1}
        if len(others) > 1:
            return None
        out.append(others.pop() if others else 1)
    return tuple(out)


def _torch_shape(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return None


@st.composite
def broadcastable(draw, n: int = 2, max_rank: int = 4) -> list[tuple[int, ...]]:
    """``n`` shapes that broadcast: a result shape, then each operand keeps a suffix with some sizes set to 1."""
    result = draw(st.lists(st.integers(0, 3), max_size=max_rank).map(tuple))
    shapes = []
    for _ in range(n):
        keep = draw(st.integers(0, len(result)))
        suffix = result[len(result) - keep :]
        shapes.append(tuple(1 if draw(st.booleans()) else k for k in suffix))
    return shapes


def _stretched(own: tuple[int, ...], result: tuple[int, ...]) -> list[bool]:
    """For each result dim: is the operand stretched there (missing, or size 1 against a size that is not 1)?"""
    padded = (None,) * (len(result) - len(own)) + tuple(own)
    return [k != 1 and (o is None or o == 1) for o, k in zip(padded, result)]


# ----- 2. the three rules ---------------------------------------------------------------------------------------
@pytest.mark.rule(
    "02",
    "In every position the sizes must be **equal, or one of them must be 1**; the result takes the other size, "
    "and the size-1 operand is read again with stride 0.",
)
@pytest.mark.rule(
    "02",
    "Shapes right-align, missing leading dims count as 1, and each position must be equal or 1",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.lists(SHAPES, min_size=1, max_size=3))
def test_the_three_rules_are_torch_broadcast_shapes(shapes):
    assert _torch_shape(*shapes) == _by_the_rules(*shapes)
    result = _by_the_rules(*shapes)
    if result is not None:
        for t, own in zip(torch.broadcast_tensors(*[torch.zeros(s) for s in shapes]), shapes):
            assert all(t.stride(d) == 0 for d, hit in enumerate(_stretched(own, result)) if hit)


@pytest.mark.rule(
    "02",
    "Where a shape has **fewer dimensions**, treat the missing leading ones as size 1.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(SHAPES, SHAPES, st.integers(0, 3))
def test_missing_leading_dims_count_as_1(a, b, pad):
    assert _torch_shape(a, b) == (None if _torch_shape((1,) * pad + a, b) is None else _torch_shape(a, b))
    if len(a) + pad >= len(b) and _torch_shape(a, b) is not None:
        assert _torch_shape((1,) * pad + a, b) == (1,) * (len(a) + pad - max(len(a), len(b))) + _torch_shape(a, b)


@pytest.mark.rule(
    "02",
    "Size 0 is an ordinary size: 1 stretches to 0, but 2 and 0 conflict like any two different sizes.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.integers(0, 4), SHAPES)
def test_size_0_is_an_ordinary_size(k, rest):
    assert _torch_shape(rest + (0,), rest + (k,)) == (rest + (0,) if k in (0, 1) else None)


@pytest.mark.rule(
    "02",
    "They are views with **stride 0** along the stretched dimension: stepping along it does not move in memory, "
    "so the same stored element is read again.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(broadcastable(n=3), st.sampled_from([torch.float32, torch.int64, torch.bool]))
def test_broadcast_tensors_are_stride_0_views(shapes, dtype):
    operands = [torch.ones(s, dtype=dtype) for s in shapes]
    result = tuple(torch.broadcast_shapes(*shapes))
    for t, own in zip(torch.broadcast_tensors(*operands), operands):
        assert tuple(t.shape) == result
        assert t.untyped_storage().data_ptr() == own.untyped_storage().data_ptr()
        assert all(t.stride(d) == 0 for d, hit in enumerate(_stretched(tuple(own.shape), result)) if hit)


# ----- 3. what broadcasting costs ---------------------------------------------------------------------------------
@pytest.mark.rule(
    "02",
    "A stretched operand is a view: `expand` (what `broadcast_tensors` returns) keeps the operand's storage, "
    "same `data_ptr()` and same `nbytes()`, while `expand(...).contiguous()` allocates the full "
    "size; when nothing is stretched, `contiguous()` hands back the view as it is only if it was contiguous already.",
)
@pytest.mark.rule(
    "02",
    "Stretched operands are stride-0 views: zero bytes; materialising them costs the full result size each.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(broadcastable(n=1), st.sampled_from([torch.float32, torch.float64, torch.int8]), st.integers(0, 2))
def test_expand_keeps_the_storage_and_materialising_costs_the_full_size(case, dtype, new):
    (own,) = case
    small = torch.ones(own, dtype=dtype)
    # stretch every other size-1 dim to 3 and put `new` dims of size 2 in front (or none: nothing stretched)
    target = (2,) * new + tuple(3 if k == 1 and i % 2 == 0 else k for i, k in enumerate(own))
    view = small.expand(target)
    assert view.untyped_storage().data_ptr() == small.untyped_storage().data_ptr()
    assert view.untyped_storage().nbytes() == small.untyped_storage().nbytes()
    full = math.prod(target) * small.element_size()
    stretched = any(_stretched(own, target)) and math.prod(target) > 0
    dense = view.contiguous()
    if stretched:
        assert dense.untyped_storage().data_ptr() != small.untyped_storage().data_ptr()
        assert dense.untyped_storage().nbytes() == full
    else:
        assert dense is view or dense.untyped_storage().data_ptr() == small.untyped_storage().data_ptr()
    if not stretched and small.dim() >= 2:  # the same values laid out transposed: nothing stretched, still copied
        flipped = small.mT.contiguous().mT
        unstretched = flipped.expand(target).contiguous()
        shares = unstretched.untyped_storage().data_ptr() == flipped.untyped_storage().data_ptr()
        assert shares == flipped.expand(target).is_contiguous()
    padded = (1,) * new + own
    repeated = small.repeat(*[t if o == 1 else 1 for t, o in zip(target, padded)]) if target else small.repeat(())
    assert repeated.shape == target and repeated.untyped_storage().nbytes() == full
    assert full == 0 or repeated.untyped_storage().data_ptr() != small.untyped_storage().data_ptr()


@pytest.mark.rule("02", "Broadcasting allocates only the result")
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    broadcastable(n=2, max_rank=3),
    st.sampled_from([torch.float32, torch.int32]),
    st.sampled_from([torch.float32, torch.int64]),
)
def test_broadcasting_allocates_only_the_result(shapes, da, db):
    from viewlab import measure

    a, b = torch.ones(shapes[0], dtype=da), torch.ones(shapes[1], dtype=db)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with measure(device="cpu") as m:
            out = a + b
    assert m.peak_bytes == out.untyped_storage().nbytes() == out.numel() * out.element_size()


@pytest.mark.rule(
    "02",
    "on CPU, mixed dtypes add a cast copy of each operand not in the result's dtype, at its own size (the result's, if "
    "expanded), seen only by the profiler.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    broadcastable(n=2, max_rank=3),
    st.sampled_from([torch.float32, torch.int32]),
    st.sampled_from([torch.float32, torch.int64]),
)
def test_mixed_dtypes_cast_one_operand_at_its_own_size(shapes, da, db):
    from viewlab import measure

    a, b = torch.ones(shapes[0], dtype=da), torch.ones(shapes[1], dtype=db)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with measure(device="cpu") as m, torch.profiler.profile(profile_memory=True) as prof:
            out = a + b
    cast = sum(e.cpu_memory_usage for e in prof.key_averages() if e.key == "aten::_to_copy")
    converted = [t for t in (a, b) if t.dtype != out.dtype]  # the operand whose dtype is not the result's
    assert cast == sum(t.numel() for t in converted) * out.element_size()  # its own size, not the stretched one
    assert m.peak_bytes == out.numel() * out.element_size()  # measure sees the result only
    if converted and out.numel():  # an operand expanded to the result's shape first is cast at the result's size
        wide = converted[0].expand(out.shape)
        other = b if converted[0] is a else a
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.profiler.profile(profile_memory=True) as prof_wide:
                wide + other
        casts = [e.cpu_memory_usage for e in prof_wide.key_averages() if e.key == "aten::_to_copy"]
        assert out.numel() * out.element_size() in casts or sum(casts) >= out.numel() * out.element_size()


# ----- 4. in place -------------------------------------------------------------------------------------------------
def _in_place_works(big: torch.Tensor, small: torch.Tensor) -> bool:
    try:
        big += small
    except RuntimeError:
        return False
    return True


@pytest.mark.rule(
    "02",
    "`big += small` writes the result **into `big`'s memory**, so it works when the broadcast shape is `big`'s own "
    "shape.",
)
@pytest.mark.rule(
    "02",
    "`big` must have no stride-0 dim longer than 1 (an `expand` that stretches). PyTorch checks only that: a `big` "
    "made of overlapping `unfold` windows passes, and the shared elements are written twice, silently",
)
@pytest.mark.rule(
    "02",
    "A leaf that requires grad refuses any in-place write unless under `torch.no_grad()`, as in an optimiser step",
)
@pytest.mark.rule("02", "In-place ops never grow their target: `big += small` works, `small += big` cannot")
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    learner_cases(dims=(0, 3), side=(0, 3), dtypes=(torch.float32, torch.int64, torch.bool)),
    SHAPES,
    st.sampled_from([torch.float32, torch.int64, torch.bool]),
)
def test_in_place_works_exactly_when_the_target_holds_the_result(case, small_shape, dt_small):
    big = case.tensor
    big_shape = tuple(big.shape)
    small = torch.ones(small_shape, dtype=dt_small)
    result = _torch_shape(big_shape, small_shape)
    fits = torch.can_cast(torch.result_type(big, small), big.dtype)
    collides = big.numel() > 0 and any(s == 0 and k > 1 for s, k in zip(big.stride(), big.shape))
    tracked = big.requires_grad  # a leaf that requires grad, or a view of one
    before, stored = big.data_ptr(), _storage_values(big)
    works = _in_place_works(big, small)
    assert works == (result == big_shape and fits and not collides and not tracked), case
    assert big.data_ptr() == before and tuple(big.shape) == big_shape  # never a new or grown target
    if tracked and result == big_shape and fits and not collides:
        with torch.no_grad():  # grad mode off, as in an optimizer's step: the same write goes through
            assert _in_place_works(big, small), case
    if works and case.kind == "unfold" and big.numel() and small.numel() and small.dtype != torch.bool:
        # each storage element gains small's value once per index that reads it
        reads = torch.zeros_like(stored, dtype=torch.float64)
        index = torch.arange(stored.numel()).as_strided(big.shape, big.stride(), big.storage_offset())
        reads.index_add_(0, index.reshape(-1), torch.ones(index.numel(), dtype=torch.float64))
        if big.dtype != torch.bool:
            assert torch.equal(_storage_values(big).double(), stored.double() + reads)


def _storage_values(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t``'s whole storage as a 1-D tensor of its dtype."""
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage()).detach().clone()


# Layouts whose in-place results are plain elementwise arithmetic: no shared or overlapping elements, no autograd.
PLAIN_KINDS = (
    "contiguous",
    "offset",
    "view_of_view",
    "transposed",
    "permuted",
    "channels_last",
    "zero_d",
    "empty",
    "size_one",
)


@pytest.mark.rule(
    "02",
    "The result's dtype must cast to `big`'s without changing kind: an integer `big` refuses a float `small`, and "
    "within a kind it is cast down silently (an `int8` `big` += 300 wraps to 44).",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    learner_cases(
        dims=(0, 3),
        side=(0, 3),
        dtypes=(torch.int8, torch.uint8, torch.int32, torch.float16, torch.bfloat16, torch.float32),
        kinds=PLAIN_KINDS,
    ),
    st.integers(-1000, 1000),
)
def test_in_place_casts_down_within_a_kind_and_refuses_a_change_of_kind(case, value):
    big = case.tensor
    wide = torch.float64 if big.is_floating_point() else torch.int64  # the same kind, wider
    small = torch.full(big.shape[-1:], value, dtype=wide)  # broadcasts to big; big.dtype cannot hold it all
    assert torch.result_type(big, small) == wide and torch.can_cast(wide, big.dtype)
    expected = (big.to(wide) + small).to(big.dtype)  # computed wide, then cast down (integers wrap)
    assert _in_place_works(big, small) and torch.equal(big, expected), case  # no error, no warning asked for
    if not big.is_floating_point():
        assert not _in_place_works(big, small.to(torch.float32)), case  # int <- float changes kind: refused


@pytest.mark.rule(
    "02",
    "`small` must not be a part of `big` either (`x += x[0]` raises), but PyTorch sees that only when both are "
    "dense (no gaps between their elements): a column of a dense `x` has gaps, so `x -= x[:, :1]` goes undetected, "
    "and its result is wrong for most row lengths (3 below). Clone `small` first.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    learner_cases(dims=(1, 3), side=(1, 3), kinds=PLAIN_KINDS + ("as_strided",), dtypes=(torch.float32,)),
    st.integers(0, 2),
)
def test_in_place_refuses_a_part_of_the_target_only_when_both_are_dense(case, row):
    big = case.tensor
    assume(not any(s == 0 and k > 1 for s, k in zip(big.stride(), big.shape)))  # no stride 0: the other rule
    assume(is_dense(big) or big.numel() == len(set(_storage_indices(big))))  # as_strided: no element read twice
    i = row % big.shape[0]
    before = big.clone()
    part = big[i]  # inside big's memory, so it overlaps big whenever both have elements
    caught = is_dense(big) and is_dense(part) and part.numel() > 0
    assert _in_place_works(big, part) == (not caught), case
    fresh = before.clone()
    assert _in_place_works(fresh, fresh[i].clone()) and torch.equal(fresh, before + before[i])  # the fix


@pytest.mark.rule(
    "02",
    "dense (no gaps between their elements): a column of a dense `x` has gaps, so `x -= x[:, :1]` goes undetected, "
    "and its result is wrong for most row lengths (3 below). Clone `small` first.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.integers(1, 4), st.sampled_from([torch.float32, torch.float64, torch.int64, torch.int16]))
def test_a_column_of_a_dense_target_is_not_caught_and_the_result_is_wrong_for_most_row_lengths(rows, dtype):
    def subtract_first_column(x: torch.Tensor) -> bool:
        try:
            x -= x[:, :1]
        except RuntimeError:
            return False
        return True

    outcome = {}
    for width in range(1, 40):
        x = torch.arange(1, 1 + rows * width).reshape(rows, width).to(dtype)
        expected = x - x[:, :1]
        if rows == 1 and width > 1:  # the "column" is one element: dense, a part of x, so refused
            assert not subtract_first_column(x)
            continue
        assert subtract_first_column(x)  # 2 rows or more: a column has gaps, never refused (width 1: x itself)
        outcome[width] = torch.equal(x, expected)
    wrong = [width for width, right in outcome.items() if width > 1 and not right]  # width 1: x itself, right
    assert rows == 1 or (3 in wrong and len(wrong) > len(outcome) // 2), outcome  # wrong at 3, and at most lengths
    column_major = torch.arange(1, 1 + rows * 3).reshape(3, rows).to(dtype).t()
    assert not subtract_first_column(column_major)  # there a column is dense: refused
    fixed = torch.arange(1, 1 + rows * 3).reshape(rows, 3).to(dtype)
    expected = fixed - fixed[:, :1]
    fixed -= fixed[:, :1].clone()  # the fix
    assert torch.equal(fixed, expected)


def _storage_indices(t: torch.Tensor) -> list[int]:
    """The storage index of every element of ``t`` (offset + sum of index * stride)."""
    index = torch.arange(t.untyped_storage().nbytes() // t.element_size())
    return index.as_strided(t.shape, t.stride(), t.storage_offset()).reshape(-1).tolist()


# ----- 5. after a reduction ---------------------------------------------------------------------------------------
def _centring(x: torch.Tensor, dim: int, keepdim: bool) -> str:
    try:
        out = x - x.mean(dim=dim, keepdim=keepdim)
    except RuntimeError:
        return "raises"
    by_loop = x.clone()
    for i in range(x.shape[1 - dim]):
        line = x.select(1 - dim, i)
        by_loop.select(1 - dim, i).copy_(line - line.mean())
    right = out.shape == by_loop.shape and torch.allclose(out, by_loop, equal_nan=True)
    return "right" if right else "silently wrong"


MATRICES = st.tuples(st.integers(0, 4), st.integers(0, 4)).map(
    lambda s: torch.arange(1.0, 1.0 + s[0] * s[1]).reshape(s) ** 2
)


@pytest.mark.rule(
    "02",
    "`x.mean(dim=0)` has shape `(D,)`. Right-aligned, it meets `D`, the dimension it came from: correct, by the rule.",
)
@pytest.mark.rule(
    "02",
    "After a reduction the remaining dims right-align: dim 0 comes back right by the rule, dim 1 needs `keepdim=True`.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(MATRICES)
def test_a_reduction_over_dim_0_broadcasts_back_right(x):
    assert _centring(x, 0, keepdim=False) == "right"


@pytest.mark.rule(
    "02",
    "`x.mean(dim=1)` has shape `(N,)`. Right-aligned, it meets `D` as well: it raises when `N != D` and neither "
    "is 1; when `N == D > 1` it silently subtracts row means from columns, and when `D == 1 != N` it silently "
    "makes an `(N, N)` table.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(MATRICES)
def test_a_reduction_over_dim_1_raises_or_is_silently_wrong(x):
    n, d = x.shape
    verdict = _centring(x, 1, keepdim=False)
    if n != d and 1 not in (n, d):
        assert verdict == "raises"
    elif n == d > 1 or d == 1 != n:
        assert verdict == "silently wrong"
    else:  # N == 1, or N == D == 0 (nothing to get wrong)
        assert verdict == "right"


@pytest.mark.rule(
    "02",
    "`keepdim=True` keeps the reduced dimension as size 1, `(1, D)` or `(N, 1)`, which lines up with the "
    "dimension it came from for either dim and any `N`, `D`.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(MATRICES, st.sampled_from([0, 1]))
def test_keepdim_broadcasts_back_right_for_any_shape(x, dim):
    assert _centring(x, dim, keepdim=True) == "right"


# ----- 6. gradients -------------------------------------------------------------------------------------------------
@pytest.mark.rule(
    "02",
    "autograd sums the incoming gradient over the broadcast dimensions and returns the operand's own shape, "
    "which is `grad.sum_to_size(operand.shape)` in torch.",
)
@pytest.mark.rule("02", "A broadcast operand's gradient is summed over its broadcast dims.")
@pytest.mark.nb02
@RULE_SETTINGS
@given(broadcastable(n=2), st.sampled_from(["add", "mul"]))
def test_a_broadcast_operand_gets_the_summed_gradient(shapes, op):
    a = torch.arange(1.0, 1.0 + math.prod(shapes[0])).reshape(shapes[0]).requires_grad_(True)
    b = torch.arange(2.0, 2.0 + math.prod(shapes[1])).reshape(shapes[1]).requires_grad_(True)
    y = a + b if op == "add" else a * b
    g = torch.arange(float(y.numel())).reshape(y.shape)
    y.backward(g)
    ga = g if op == "add" else g * b.detach()
    gb = g if op == "add" else g * a.detach()
    assert a.grad.shape == a.shape and torch.equal(a.grad, ga.sum_to_size(a.shape))
    assert b.grad.shape == b.shape and torch.equal(b.grad, gb.sum_to_size(b.shape))


# ----- 7. matmul and bmm ------------------------------------------------------------------------------------------
def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(torch.matmul(torch.zeros(a), torch.zeros(b)).shape)
    except RuntimeError:
        return None


@pytest.mark.rule(
    "02",
    "`torch.matmul` treats the **last two** dimensions as matrices and broadcasts all dimensions before them by "
    "the three rules.",
)
@pytest.mark.rule("02", "The matrix dimensions never broadcast: the inner sizes must be equal.")
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    st.lists(st.integers(0, 3), max_size=2).map(tuple),
    st.lists(st.integers(0, 3), max_size=2).map(tuple),
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
)
def test_matmul_broadcasts_batch_dims_only(batch_a, batch_b, mats):
    n, k, k2, p = mats
    batch = _by_the_rules(batch_a, batch_b)
    expected = None if batch is None or k != k2 else batch + (n, p)
    assert _matmul_shape(batch_a + (n, k), batch_b + (k2, p)) == expected


@pytest.mark.rule(
    "02",
    "A 1-D operand is a vector: on the left it acts as a `(1, n)` row, on the right as an `(n, 1)` column, and "
    "that dimension is dropped from the result.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=3).map(tuple), st.integers(0, 3))
def test_a_1d_operand_is_a_row_on_the_left_and_a_column_on_the_right(n, batch, m):
    v = torch.arange(float(n))
    mat = torch.arange(float(math.prod(batch) * n * m)).reshape(*batch, n, m)
    assert torch.equal(v @ mat, (v.unsqueeze(0) @ mat).squeeze(-2))
    assert torch.equal(mat.mT @ v, (mat.mT @ v.unsqueeze(1)).squeeze(-1))
    assert (v @ v).shape == ()


@pytest.mark.rule("02", "`torch.bmm` broadcasts nothing: it takes two **3-D** tensors with **equal** batch sizes.")
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.lists(st.integers(1, 3), min_size=2, max_size=4), st.lists(st.integers(1, 3), min_size=2, max_size=4))
def test_bmm_takes_two_3d_tensors_with_equal_batches(a, b):
    b[-2] = a[-1]  # the inner sizes agree: only the batch is on trial
    try:
        torch.bmm(torch.zeros(a), torch.zeros(b))
        works = True
    except RuntimeError:
        works = False
    assert works == (len(a) == len(b) == 3 and a[0] == b[0])


def _flattens_as_a_view(t: torch.Tensor, batch: tuple[int, ...]) -> bool:
    """Is ``t`` expanded to ``batch`` and flattened to one batch dim still a view (what matmul does before bmm)?"""
    flat = t.expand(*batch, *t.shape[-2:]).reshape(math.prod(batch), *t.shape[-2:])
    return flat.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()


@pytest.mark.rule(
    "02",
    "When both operands have batch dims, it hands all batches to one `bmm`, so it flattens the broadcast batch "
    "dimensions into one with `reshape`; that is a view only when the strides allow it.",
)
@pytest.mark.rule(
    "02",
    "`matmul` broadcasts batch dims (copying when they cannot be flattened as a view); `bmm` broadcasts nothing.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    st.lists(st.integers(1, 3), max_size=2).map(tuple),
    st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple),
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
    st.booleans(),
)
def test_matmul_copies_exactly_when_the_batch_cannot_flatten_as_a_view(batch_a, batch_b, mats, swap):
    from viewlab import measure

    if swap:
        batch_a, batch_b = batch_b, batch_a
    batch = _by_the_rules(batch_a, batch_b)
    assume(batch is not None)
    n, k, p = mats
    a, b = torch.ones(*batch_a, n, k), torch.ones(*batch_b, k, p)
    with measure(device="cpu") as m:
        c = a @ b
    copies = m.peak_bytes > c.untyped_storage().nbytes()
    assert copies == (not (_flattens_as_a_view(a, batch) and _flattens_as_a_view(b, batch)))


@pytest.mark.rule(
    "02",
    "When the right operand is a plain matrix or a vector, as in `x @ W` with `x` of shape `(B, T, D)`, and `x`'s "
    "batch and row dims lie back to back (`stride[i] == stride[i+1] * size[i+1]` for each of them, as in a freshly "
    "made `x`) or `x` is empty, there is no `bmm`: `matmul` views `x` as `(B·T, D)`, runs one `mm` (or `mv`) and views the result "
    "back.",
)
@pytest.mark.rule(
    "02",
    "When they do not (a transposed `x`), `matmul` expands `W` to the batch instead (stride 0, no copy of `W`) and runs `bmm`, flattening `x`'s "
    "batch dims as above.",
)
@pytest.mark.rule(
    "02",
    "Unless `W` requires grad (a weight): then `matmul` folds anyway into one `mm`, copying `x` (`clone`) where a "
    "view cannot merge its dims.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(
    learner_tensors(dims=(3, 4), side=(1, 3), dtypes=(torch.float32, torch.float64)),
    st.integers(0, 3),
    st.booleans(),
    st.sampled_from(["no grad", "requires grad", "requires grad, no_grad()"]),
)
def test_matmul_with_a_plain_matrix_on_the_right_folds_the_batch_into_one_mm(x, out, vector, weight):
    from viewlab import measure

    d = x.shape[-1]
    right = torch.ones(d, dtype=x.dtype) if vector else torch.ones(d, out, dtype=x.dtype)
    right.requires_grad_(weight != "no grad")
    with torch.set_grad_enabled(weight != "requires grad, no_grad()"), measure(device="cpu", log_ops=True) as m:
        y = x @ right
    names = [op.name.split(".")[1] for op in m.ops]
    chained = all(x.stride(i) == x.stride(i + 1) * x.size(i + 1) for i in range(x.dim() - 2))
    merges = chained or x.numel() == 0  # nothing to lay out: an empty x always folds
    if right.requires_grad:  # a weight: folded whatever x's strides and the grad mode
        assert "bmm" not in names and ("mv" if vector else "mm") in names, names
        viewable = x.numel() == 0 or _reshape_is_a_view(x.detach(), (-1, d))
        assert ("clone" in names) == (not viewable), names  # x copied exactly when no view merges its dims
    elif merges:
        assert "bmm" not in names and ("mv" if vector else "mm") in names, names
    else:
        assert "bmm" in names, names
        x_bytes = x.numel() * x.element_size()
        assert all(op.bytes == x_bytes for op in m.ops if op.name.split(".")[1] == "clone"), names  # x, never W
    assert y.shape == (*x.shape[:-1], *(() if vector else (out,)))


def _reshape_is_a_view(t: torch.Tensor, shape: tuple[int, ...]) -> bool:
    return t.reshape(shape).data_ptr() == t.data_ptr() and t.reshape(shape)._base is not None


# ----- 8. NumPy -----------------------------------------------------------------------------------------------------
@pytest.mark.rule("02", "PyTorch took NumPy's rules, so result shapes agree")
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.lists(SHAPES, min_size=1, max_size=3))
def test_numpy_and_torch_broadcast_to_the_same_shapes(shapes):
    try:
        numpy_shape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        numpy_shape = None
    assert numpy_shape == _torch_shape(*shapes)


@pytest.mark.rule(
    "02",
    "NumPy counts strides in bytes, PyTorch in elements (both 0 along the stretched dimension; NumPy also writes 0 "
    "along a size-1 dimension, where no step is ever taken, and for an empty array)",
)
@pytest.mark.rule(
    "02",
    "`np.broadcast_to` is read-only while `expand` can be written through, a write landing on every virtual copy.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(broadcastable(n=1), st.sampled_from([torch.float32, torch.float64, torch.int16]))
def test_stretched_strides_in_numpy_and_torch(case, dtype):
    (own,) = case
    target = tuple(2 if k == 1 and i % 2 else k for i, k in enumerate(own))
    small = torch.arange(math.prod(own)).to(dtype).reshape(own)
    t = small.expand(target)
    n = np.broadcast_to(small.numpy(), target)
    for d, hit in enumerate(_stretched(own, target)):
        if hit:
            assert t.stride(d) == 0 == n.strides[d]
        elif target[d] > 1 and t.numel():
            assert n.strides[d] == t.stride(d) * t.element_size()
        elif target[d] > 1:  # an empty array: NumPy strides 0 (notebook 01)
            assert n.strides[d] == 0
        else:
            assert n.strides[d] == 0 and t.stride(d) == small.stride(d)
    assert not n.flags.writeable
    if t.numel():
        index = tuple(0 for _ in target)
        t[index] = 7
        assert torch.all(t[tuple(slice(None) if hit else 0 for hit in _stretched(own, target))] == 7)


# ----- 9. silent bugs -----------------------------------------------------------------------------------------------
@pytest.mark.rule("02", "`(N, 1) - (N,)` is an `(N, N)` table of *every* prediction minus *every* label:")
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.integers(0, 5))
def test_n_by_1_minus_n_is_every_prediction_minus_every_label(n):
    pred, target = torch.arange(float(n)).unsqueeze(1), torch.arange(float(n)) * 10
    table = pred - target
    assert table.shape == (n, n)
    assert all(table[i, j] == pred[i, 0] - target[j] for i in range(n) for j in range(n))


@pytest.mark.rule(
    "02",
    "reports an elementwise operation whose operands were stretched **against each other** (no operand has the result's "
    "shape, leading 1s aside, as with `(N, 1)` against `(N,)`) and stays silent for one-sided broadcasts such as adding a bias.",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(broadcastable(n=2))
def test_watch_broadcasts_reports_exactly_the_mutual_broadcasts(shapes):
    a, b = torch.zeros(shapes[0]), torch.zeros(shapes[1])
    result = torch.broadcast_shapes(*shapes)

    def read_as_it_is(shape):  # the result's shape once 1s are added in front: no element read twice
        return (1,) * (len(result) - len(shape)) + tuple(shape) == tuple(result)

    mutual = not read_as_it_is(shapes[0]) and not read_as_it_is(shapes[1])
    try:
        with watch_broadcasts(action="raise"):
            _ = a + b
        reported = False
    except BroadcastStretchError:
        reported = True
    assert reported == mutual


@pytest.mark.rule(
    "02",
    "That raises unless the batch size equals the number of KV heads or one of the two is 1: with equal sizes "
    "above 1 it silently mixes up sequences, with one KV head it silently makes a `(B, B, ...)` result, and only "
    "a batch of 1 is right",
)
@pytest.mark.nb02
@RULE_SETTINGS
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3))
def test_a_4d_mask_against_5d_scores(batch, kv_heads, repeats, length):
    mask, scores = (batch, 1, length, length), (batch, kv_heads, repeats, length, length)
    result = _torch_shape(mask, scores)
    if batch != kv_heads and 1 not in (batch, kv_heads):
        assert result is None
    elif batch == 1:
        assert result == scores  # one sequence: every head reads its only mask
    elif kv_heads == 1:
        assert result == (batch, batch, repeats, length, length)  # a wrong shape, silently
    else:
        assert result == scores  # the right shape, but mask b meets kv head b: sequences mixed
