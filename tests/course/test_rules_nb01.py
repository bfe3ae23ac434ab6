"""The rules notebook 01 (views and copies) states, each checked against torch over generated layouts.

Every test binds one sentence of the notebook's prose (``@pytest.mark.rule``) and checks it on tensors of
rank 0 to 4 with sizes 0, 1 and more, laid out contiguous, permuted, sliced with steps and offsets, expanded
(stride 0), channels_last or with arbitrary ``as_strided`` strides -- the edges the notebook's own examples
do not reach.
"""

from __future__ import annotations

import io
import itertools
import math
import warnings

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import is_dense, learner_tensors, numpy_cases
from viewlab import shares_storage

# The notebook's kinds of layout, each drawn from the shared learner strategy (tests/course/learner_inputs.py).
KINDS = {
    "contiguous": ("contiguous", "size_one", "zero_d", "empty"),
    "permuted": ("permuted", "transposed", "view_of_view"),
    "sliced": ("offset", "view_of_view"),
    "expanded": ("expanded",),
    "channels_last": ("channels_last",),
    "as_strided": ("as_strided", "unfold"),
    "requires_grad": ("requires_grad", "grad_view"),
}
ALL_KINDS = tuple(KINDS)


def _storage(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of ``t`` as a 1-D tensor of its dtype."""
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Each stride the product of all sizes after it, sizes taken as they are (a 0 included)."""
    return tuple(math.prod(shape[d + 1 :]) for d in range(len(shape)))


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def layouts(dims=(0, 4), side=(0, 4), kinds=ALL_KINDS, dtype=torch.float32):
    """Tensors as a learner meets them (the shared strategy), in ``dtype``; their storage holds 0, 1, 2, ..."""
    chosen = tuple(dict.fromkeys(k for name in kinds for k in KINDS[name]))
    return learner_tensors(dims=dims, side=side, kinds=chosen, dtypes=(dtype,))


def _plain(t: torch.Tensor) -> torch.Tensor:
    """``t`` without autograd: the same memory and layout (a write or ``.numpy()`` on it is a memory question)."""
    return t.detach() if t.requires_grad else t


# ----- 1. storage, shape, stride, offset --------------------------------------------------------------------------
@pytest.mark.rule(
    "01", r"The address formula, in general $\text{offset} + \sum_k i_k \cdot \text{stride}_k$, is exact."
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(0, 3), side=(0, 3)))
def test_the_address_formula_names_every_element(t):
    flat = _storage(t)
    for index in itertools.product(*map(range, t.shape)):
        address = t.storage_offset() + sum(i * s for i, s in zip(index, t.stride()))
        assert flat[address] == t[index]


@pytest.mark.rule(
    "01",
    "A tensor made from sizes is laid out **row-major**: the last dimension has stride 1, and each earlier dimension's "
    "stride is the product of all sizes after it, a size 0 counted as 1",
)
@pytest.mark.rule(
    "01", "Row-major strides: the last is 1, each earlier one the product of the sizes after it (a 0 counted as 1)."
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(st.lists(st.integers(0, 4), max_size=5).map(tuple))
def test_a_fresh_tensor_is_row_major_with_size_0_counted_as_1(shape):
    as_one = tuple(max(k, 1) for k in shape)
    for make in (torch.empty, torch.zeros, lambda s: torch.arange(math.prod(s)).reshape(s)):
        assert make(shape).stride() == _row_major(as_one)


@pytest.mark.rule("01", "A result computed from another tensor may keep its order: `x.t() * 2` has strides `(1, 4)`.")
@pytest.mark.nb01
@RULE_SETTINGS
@given(st.integers(1, 5), st.integers(1, 5), st.sampled_from((torch.float32, torch.float64, torch.int64)))
def test_a_result_computed_from_a_transpose_keeps_its_order(rows, cols, dtype):
    x = torch.arange(rows * cols).to(dtype).reshape(rows, cols)
    for result in (x.t() * 2, x.t() + x.t(), x.t().clone(), torch.zeros_like(x.t())):
        if rows > 1 and cols > 1:  # the transpose's order, dense: not row-major for its shape
            assert result.stride() == x.t().stride() and not result.is_contiguous()
        else:  # a size-1 dim leaves one order: row-major, whatever stride it writes there
            assert result.is_contiguous()
    assert torch.arange(12.0).reshape(3, 4).t().mul(2).stride() == (1, 4)  # the notebook's x


@pytest.mark.rule("01", "`permute` and `transpose` do not recompute strides, they reorder them.")
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 4)), st.data())
def test_permute_and_transpose_reorder_strides(t, data):
    perm = data.draw(st.permutations(range(t.dim())))
    assert t.permute(tuple(perm)).stride() == tuple(t.stride()[p] for p in perm)
    a, b = data.draw(st.integers(0, t.dim() - 1)), data.draw(st.integers(0, t.dim() - 1))
    swapped = list(t.stride())
    swapped[a], swapped[b] = swapped[b], swapped[a]
    assert t.transpose(a, b).stride() == tuple(swapped) and _same_storage(t.transpose(a, b), t)


@pytest.mark.rule(
    "01",
    "The stride of a dimension of size 1 is never used to reach an element, so `is_contiguous()` ignores it",
)
@pytest.mark.rule("01", "*Contiguous* means exactly those strides, dims of size 1 aside; an empty tensor always is.")
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts())
def test_is_contiguous_is_row_major_strides_with_size_1_dims_ignored(t):
    by_hand = t.numel() == 0 or all(s == r for s, r, k in zip(t.stride(), _row_major(tuple(t.shape)), t.shape) if k > 1)
    assert t.is_contiguous() == by_hand


@pytest.mark.rule("01", "A tensor with no elements reaches none, so it is contiguous whatever its strides")
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 4)).filter(lambda t: t.numel() == 0))
def test_an_empty_tensor_is_contiguous_whatever_its_strides(t):
    assert t.is_contiguous()


@pytest.mark.rule(
    "01",
    "The result is a view, and the transpose of a contiguous matrix is **not contiguous** unless one of the two sizes "
    "is 0 or 1",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_the_transpose_of_a_matrix_is_contiguous_only_with_a_size_0_or_1(shape):
    x = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
    xt = x.t()
    assert xt._base is not None and _same_storage(xt, x) and xt.stride() == x.stride()[::-1]
    assert xt.is_contiguous() == (min(shape) <= 1)
    assert xt.t().is_contiguous()  # a transpose of a transpose is the contiguous matrix again


SHARES_STORAGE_ASKS_ABOUT_BLOCKS = (  # one sentence bound to two tests
    "`shares_storage(a, b)` asks whether the memory blocks of `a` and `b` overlap, not their elements: a "
    "tensor's block is its whole storage, a NumPy array's the buffer of the array that owns the memory, "
    "and `from_numpy` makes a storage of just the array's bytes"
)


@pytest.mark.rule(
    "01",
    SHARES_STORAGE_ASKS_ABOUT_BLOCKS,
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(), layouts())
def test_shares_storage_is_the_storage_pointer_except_for_empty_storages(a, b):
    assert not shares_storage(a, b)  # two storages, even when both are empty with pointer 0
    assert shares_storage(a, a[...]) and shares_storage(a, a.detach())  # one storage, empty or not
    arr = a.detach().numpy()  # numpy() needs a tensor that does not require grad; detach keeps the memory
    assert shares_storage(arr, a) == (a.numel() > 0) and shares_storage(a.detach().clone().numpy(), a) is False


@pytest.mark.rule(
    "01",
    SHARES_STORAGE_ASKS_ABOUT_BLOCKS,
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(numpy_cases(dims=(2, 3), side=(2, 4), kinds=("contiguous", "fortran", "read_only", "stepped", "broadcast")))
def test_from_numpy_rows_get_a_storage_each(case):
    import numpy as np

    arr = case.array
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a read-only array is shared with a warning
        x, row1, row2 = torch.from_numpy(arr), torch.from_numpy(arr[0]), torch.from_numpy(arr[1])
    assert row2.untyped_storage().data_ptr() == row2.data_ptr() == arr[1].ctypes.data  # its own storage, at the row
    assert shares_storage(x[0], x[1]) and shares_storage(row2, x)  # one storage; bytes inside x's block
    assert shares_storage(row1, row2) == np.may_share_memory(arr[0], arr[1])


# ----- 2. which operations return views -------------------------------------------------------------------------
def _outcome(result: torch.Tensor, source: torch.Tensor) -> str:
    if result is source:
        return "same tensor"
    return "view" if _same_storage(result, source) and source.untyped_storage().nbytes() else "copy"


def _view_works(t: torch.Tensor, shape: tuple[int, ...]) -> bool:
    try:
        t.view(shape)
    except RuntimeError:
        return False
    return True


@pytest.mark.rule(
    "01",
    '`reshape`, `reshape_as` and `flatten` "can return either a view or new tensor": a view when the strides '
    "allow, silently a copy otherwise, so you cannot rely on writes through a `reshape` result reaching the "
    "original.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(1, 4)))
def test_reshape_and_flatten_view_exactly_when_view_works(t):
    flat = (t.numel(),)
    assert _outcome(t.reshape(flat), t) == ("view" if _view_works(t, flat) else "copy")
    assert _outcome(t.reshape_as(t.new_empty(flat)), t) == ("view" if _view_works(t, flat) else "copy")
    # beyond the sentence: flatten of a 1-D tensor hands back the tensor itself (notebook 01 shows it in code)
    expected = "same tensor" if t.dim() == 1 else ("view" if _view_works(t, flat) else "copy")
    assert _outcome(t.flatten(), t) == expected


@pytest.mark.rule(
    "01",
    "they return **the same tensor** when nothing needs to change (already contiguous; already that dtype and "
    "device) and a **copy** otherwise, never a new view.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(1, 4)), st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool]))
def test_contiguous_and_to_are_the_same_tensor_or_a_copy(t, dtype):
    assert _outcome(t.contiguous(), t) == ("same tensor" if t.is_contiguous() else "copy")
    assert _outcome(t.to(dtype), t) == ("same tensor" if dtype == t.dtype else "copy")
    assert _outcome(t.to("cpu"), t) == "same tensor"


@pytest.mark.rule("01", "A copy's `_base` is never its source;")
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(1, 4)))
def test_a_copys_base_is_never_its_source(t):
    picked = [t[[0]]] if t.dim() else []
    made = [t.reshape(-1), t.flatten(), t.contiguous(), t.to(torch.float64), t.clone(), *picked]
    made.append(t.repeat_interleave(2))  # a copy whose _base is set: a view of an internal temporary
    for result in made:
        if _outcome(result, t) == "copy":
            assert result._base is None or (result._base is not t and not _same_storage(result._base, t))
    assert t.repeat_interleave(2)._base is not None  # so the rule says "never its source", not "None"


@pytest.mark.rule(
    "01",
    "The converse does not hold: `t.detach()` shares `t`'s memory and has no `_base`, so test sharing by the storage.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(1, 4)))
def test_detach_shares_memory_without_a_base(t):
    d = t.detach()
    assert d._base is None and _same_storage(d, t) and d.stride() == t.stride()


@pytest.mark.rule(
    "01",
    "**Splitting** a dimension always works: a dimension of stride `s` split into sizes `(a, b)` gets strides "
    "`(b·s, s)`.",
)
@pytest.mark.rule(
    "01", "When splitting, a part of size 1 may get any stride, and an empty tensor gets row-major strides."
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 3), side=(0, 6)), st.data())
def test_splitting_a_dimension_always_works(t, data):
    k = data.draw(st.integers(0, t.dim() - 1))
    size = t.shape[k]
    a = data.draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0] or [0]))
    b = size // a if a else data.draw(st.integers(1, 3))
    out = t.view(*t.shape[:k], a, b, *t.shape[k + 1 :])
    s = t.stride(k)
    if t.numel() > 0:  # an empty tensor gets fresh row-major strides (the sentence's exception)
        for got, want, n in zip(out.stride()[k : k + 2], (b * s, s), (a, b)):
            assert n == 1 or got == want
    else:
        assert out.stride() == _row_major(tuple(max(n, 1) for n in out.shape))


@pytest.mark.rule(
    "01",
    "**Merging** two neighbouring dimensions `k` and `k+1` works when they lie back to back in memory, "
    "`stride[k] == stride[k+1] * size[k+1]`.",
)
@pytest.mark.rule("01", "Merging also works when one of the two has size 1, or when the tensor is empty")
@pytest.mark.rule(
    "01",
    "`view` splits any dimension, but merges two only when they are back to back "
    "(`stride[k] == stride[k+1] * size[k+1]`), one has size 1, or the tensor is empty.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(2, 4)), st.data())
def test_merging_two_dims_works_exactly_back_to_back_or_with_a_size_1(t, data):
    k = data.draw(st.integers(0, t.dim() - 2))
    shape = (*t.shape[:k], t.shape[k] * t.shape[k + 1], *t.shape[k + 2 :])
    back_to_back = t.stride(k) == t.stride(k + 1) * t.size(k + 1)
    # the other dims stay as they are; only this merge can fail
    assert _view_works(t, shape) == (back_to_back or 1 in (t.size(k), t.size(k + 1)) or t.numel() == 0)


@pytest.mark.rule("01", "So contiguity is enough but not needed.")
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(), st.data())
def test_a_contiguous_tensor_views_as_any_shape_of_its_size(t, data):
    assume(t.is_contiguous())
    n = t.numel()
    first = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0] or [0, 3]))
    shape = (first, n // first if first else 2)
    assert _view_works(t, shape) and _view_works(t, (n,))


# ----- 3. basic vs advanced indexing ----------------------------------------------------------------------------
@st.composite
def basic_indices(draw, shape: tuple[int, ...]) -> tuple:
    index = []
    for k in shape:
        choice = draw(st.sampled_from(["int", "slice", "none", "all"] if k else ["slice", "none", "all"]))
        if choice == "int":
            index.append(draw(st.integers(-k, k - 1)))
        elif choice == "slice":
            index.append(slice(draw(st.integers(0, k)), draw(st.integers(0, k)), draw(st.integers(1, 3))))
        elif choice == "none":
            index += [None, slice(None)]
        else:
            index.append(Ellipsis if Ellipsis not in index else slice(None))
    return tuple(index)


@pytest.mark.rule("01", "Indexing with integers and slices (**basic indexing**) returns a view.")
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(1, 4)).flatmap(lambda t: st.tuples(st.just(t), basic_indices(tuple(t.shape)))))
def test_basic_indexing_returns_a_view(case):
    t, index = case
    result = t[index]
    assert result._base is not None and _same_storage(result, t)


@st.composite
def advanced_indices(draw, shape: tuple[int, ...]):
    k = shape[0]
    kinds = ["list", "tensor", "mask", "bool scalar", "python bool", "0-d int tensor", "0-d uint8 tensor"]
    kind = draw(st.sampled_from(kinds))
    if kind == "list":
        return kind, draw(st.lists(st.integers(0, k - 1), max_size=4))
    if kind == "tensor":
        return kind, torch.tensor(draw(st.lists(st.integers(0, k - 1), max_size=4)), dtype=torch.long)
    if kind == "mask":
        return kind, torch.tensor(draw(st.lists(st.booleans(), min_size=k, max_size=k)), dtype=torch.bool)
    if kind == "bool scalar":
        return kind, torch.tensor(draw(st.booleans()))
    if kind == "python bool":  # an int subclass, yet read as a mask, not as the integer 0 or 1
        return kind, draw(st.booleans())
    if kind == "0-d uint8 tensor":  # read as a mask, not as an integer
        return kind, torch.tensor(draw(st.integers(0, 1)), dtype=torch.uint8)
    if draw(st.booleans()):
        return kind, torch.tensor(draw(st.integers(0, k - 1)), dtype=draw(st.sampled_from([torch.int8, torch.int32])))
    return kind, torch.tensor(draw(st.integers(0, k - 1)))


@pytest.mark.rule(
    "01",
    "Indexing with a list of integers, a tensor of indices or a boolean mask (**advanced indexing**) returns a copy — "
    "the selected elements need not form a regular stride pattern.",
)
@pytest.mark.rule("01", "A 0-d integer tensor is the exception: `x[torch.tensor(1)]` counts as `x[1]`, a view.")
@pytest.mark.rule("01", "But a 0-d `uint8` tensor is read as a mask, as `bool` is: a copy with a new leading dim.")
@pytest.mark.rule("01", "A Python `True` is a mask too, not the integer 1.")
@pytest.mark.rule(
    "01",
    "Basic indexing views (a 0-d integer tensor index too, `uint8` aside); advanced indexing copies; `x[idx] = v` is "
    "in place, but `x[adv][...] = v` writes into a discarded copy.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 3), side=(1, 4)).flatmap(lambda t: st.tuples(st.just(t), advanced_indices(tuple(t.shape)))))
def test_advanced_indexing_copies_except_a_0d_integer_tensor(case):
    t, (kind, index) = case
    result = t[index]
    assert _same_storage(result, t) == (kind == "0-d int tensor")
    if kind in ("0-d uint8 tensor", "bool scalar", "python bool"):
        assert result.shape == (int(index), *t.shape)  # a mask of one: a leading dim of size 0 or 1


@pytest.mark.rule(
    "01",
    "A list holding a slice, `None`, `...`, a list or a tensor is read as a tuple, with a deprecation warning: "
    "`x[[0, slice(None)]]` is the view `x[0, :]`, and `x[[[0, 1], [1, 2]]]` picks two elements where NumPy picks rows.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(
    layouts(dims=(2, 3), side=(1, 4)).flatmap(
        lambda t: st.tuples(
            st.just(t),
            st.lists(
                st.one_of(
                    st.integers(0, min(t.shape) - 1),  # valid on whichever dim it lands (after a slice, None, ...)
                    st.just(slice(None)),
                    st.just(None),
                    st.just(Ellipsis),
                    st.just(0).map(torch.tensor),  # a 0-d index tensor: x[[torch.tensor(0), ...]]
                ),
                min_size=1,
                max_size=2,
            ).filter(lambda seq: any(not isinstance(i, int) for i in seq) and seq.count(Ellipsis) <= 1),
            st.lists(st.integers(0, 0), min_size=2, max_size=2),
        )
    )
)
def test_a_list_holding_a_non_integer_is_read_as_a_tuple(case):
    t, seq, rows = case
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        as_list = t[list(seq)]
    assert torch.equal(as_list, t[tuple(seq)]) and _same_storage(as_list, t)  # basic indexing: a view
    pairs = [rows, [0] * len(rows)]  # a list of two index lists: one element per pair, as t[rows, [0, 0]]
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        picked = t[pairs]
    assert torch.equal(picked, t[tuple(pairs)]) and picked.shape == (len(rows), *t.shape[2:])
    assert t.detach().numpy()[pairs].shape == (2, len(rows), *t.shape[1:])  # NumPy: the list is one index, rows


def _reads_each_element_once(t: torch.Tensor) -> bool:
    index = torch.arange(t.untyped_storage().nbytes() // t.element_size())
    reached = index.as_strided(t.shape, t.stride(), t.storage_offset()).reshape(-1)
    return reached.unique().numel() == reached.numel()


@pytest.mark.rule(
    "01",
    "PyTorch now checks *some* overlaps: this shift raises, but only because both sides are dense (no gaps between "
    "their elements).",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 3), side=(0, 4), kinds=("contiguous", "permuted", "sliced", "channels_last", "as_strided")))
def test_a_shift_into_itself_raises_exactly_when_both_sides_are_dense_and_meet(t):
    assume(_reads_each_element_once(t))  # a stride-0 or overlapping target is refused by another check
    dst, src = t[1:], t[:-1]
    d0, s0 = dst.data_ptr(), src.data_ptr()  # a dense tensor fills [data_ptr, data_ptr + nbytes)
    meet = dst.numel() > 0 and d0 < s0 + src.nbytes and s0 < d0 + dst.nbytes
    caught = is_dense(dst) and is_dense(src) and meet
    before = t.clone()
    try:
        dst.copy_(src)  # what t[1:] = t[:-1] runs
        raised = False
    except RuntimeError:
        raised = True
    assert raised == caught, (t.shape, t.stride())
    fixed = before.clone()
    fixed[1:] = fixed[:-1].clone()  # the fix: clone the source, whatever the layout
    assert torch.equal(fixed[1:], before[:-1])


@pytest.mark.rule(
    "01",
    "*Assignment* through either kind writes into the original, because `x[idx] = v` is one call, "
    '`x.__setitem__(idx, v)`, not "take a copy, then write".',
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(
    layouts(dims=(1, 3), side=(1, 4), kinds=("contiguous", "permuted", "sliced", "channels_last")).flatmap(
        lambda t: st.tuples(st.just(t), st.one_of(basic_indices(tuple(t.shape)), advanced_indices(tuple(t.shape))))
    )
)
def test_assignment_through_any_index_writes_the_original(case):
    t, index = case
    index = index[1] if isinstance(index, tuple) and len(index) == 2 and isinstance(index[0], str) else index
    where = torch.arange(t.numel()).reshape(t.shape)[index].unique()  # the positions the index selects
    y = t.clone() + 1  # all values >= 1
    y[index] = -1.0
    assert (y == -1).sum() == where.numel()
    assert torch.all(y.reshape(-1)[where] == -1)


@pytest.mark.rule(
    "01",
    "No error, no warning — the write goes into a temporary copy that is thrown away.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 3), side=(1, 4), kinds=("contiguous", "sliced")), st.data())
def test_chained_assignment_after_advanced_indexing_is_lost(t, data):
    y = t.clone()
    mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=t.shape[0], max_size=t.shape[0])))
    y[mask][...] = -1.0
    y[mask][0:] = -1.0
    y[[0]][0] = -1.0
    assert torch.equal(y, t) and y._version == 0


# ----- 4. writing through a view --------------------------------------------------------------------------------
WRITES = {
    "fill_": lambda v: v.fill_(3),
    "+=": lambda v: v.__iadd__(1),
    "t[i] = v": lambda v: v.__setitem__(..., 2.0),
    "zero_": lambda v: v.zero_(),
    "mul_": lambda v: v.mul_(2),
    "copy_": lambda v: v.copy_(torch.ones(v.shape)),
}


@pytest.mark.rule(
    "01",
    "They also share one **version counter**, `t._version`: every in-place write (`fill_`, `+=`, `t[i] = v`, "
    "...) through any of them raises it for all of them, while an out-of-place op (`y * 2`) leaves it alone.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(0, 3), kinds=("contiguous", "permuted", "sliced", "channels_last")), st.data())
def test_views_share_one_version_counter(t, data):
    y = t.clone(memory_format=torch.contiguous_format)
    views = [y, y[...], y.detach(), y.view(-1), y.unsqueeze(0)]
    views += [y.transpose(0, -1)] + ([y[0]] if y.shape[0] else []) if y.dim() else []
    writer = data.draw(st.sampled_from(views))
    write = data.draw(st.sampled_from(sorted(WRITES)))
    before = y._version
    _ = [v * 2 for v in views] + [v + 1 for v in views]
    assert all(v._version == before for v in views)
    WRITES[write](writer)
    assert all(v._version == y._version > before for v in views)


@pytest.mark.rule(
    "01",
    "Writes through a view where **several indices reach the same memory element** are refused by most in-place "
    "operations when a dimension longer than 1 has stride 0, as after `expand`.",
)
@pytest.mark.rule("01", "An empty tensor passes too:")
@pytest.mark.rule(
    "01",
    "Some overlapping writes are refused, some go through silently (`unfold` windows, time shifts): clone first.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 3), side=(0, 4)))
def test_in_place_writes_are_refused_only_for_a_stride_0(t):
    t = _plain(t)  # a tensor that requires grad refuses every in-place write (autograd's rule, notebook 05)
    stride_0 = t.numel() > 0 and any(s == 0 and k > 1 for s, k in zip(t.stride(), t.shape))
    try:
        t.add_(1)
        refused = False
    except RuntimeError as err:
        assert "single memory location" in str(err)
        refused = True
    assert refused == stride_0  # overlap without a stride 0 (windows) is not detected


@pytest.mark.rule(
    "01",
    "and those that do check stride 0 only: overlapping windows such as `torch.arange(6.0).unfold(0, 4, 2)` (strides "
    "`(2, 1)`) pass, and an in-place write through them updates the shared elements twice, silently",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(st.integers(2, 8), st.integers(1, 4), st.integers(1, 3))
def test_overlapping_windows_write_shared_elements_twice(n, size, step):
    assume(size <= n)
    x = torch.zeros(n)
    windows = x.unfold(0, size, step)
    windows.add_(1)  # no error
    times = torch.zeros(n)
    for w in range(windows.shape[0]):
        times[w * step : w * step + size] += 1
    assert torch.equal(x, times)  # each element raised once per window that holds it


# Notebook 03, section 5, states this rule for expanded tensors (and binds it there); here on every overlap.
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(1, 3), side=(0, 4), kinds=("expanded", "as_strided", "sliced", "permuted")), st.integers(-5, 5))
def test_fill_with_a_number_goes_through_any_overlap(t, value):
    t.fill_(value)
    assert torch.all(t == value)


# ----- 5. detach -----------------------------------------------------------------------------------------------
@pytest.mark.rule(
    "01",
    "`t.detach()` returns a view that autograd does not track. It shares memory **and the version counter** with `t`.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(0, 3), kinds=("contiguous", "permuted", "sliced")))
def test_detach_shares_memory_and_the_version_counter(t):
    a = t.clone().requires_grad_(True)
    b = a * 1
    d = b.detach()
    assert not d.requires_grad and d.grad_fn is None and _same_storage(d, b)
    before = b._version
    d.add_(1)
    assert b._version == d._version == before + 1


@pytest.mark.rule(
    "01",
    "That counter is what autograd checks: a tensor saved for the backward pass remembers its version, and "
    "`backward()` refuses to run if the version has moved since — an in-place write through the detached view "
    "counts.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(0, 3), kinds=("contiguous", "permuted", "sliced")), st.sampled_from(["exp", "sigmoid", "tanh"]))
def test_backward_refuses_after_a_write_through_detach(t, op):
    a = t.clone().requires_grad_(True)
    b = getattr(a, op)()  # saves its output b
    b.detach().mul_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()


# ----- 6. storage and pointers ---------------------------------------------------------------------------------
@pytest.mark.rule(
    "01",
    "Note the two pointers: `t.data_ptr()` is where *this view's first element* lives, the storage's `data_ptr()` the "
    'start of the whole block, so comparing tensor pointers calls `x` and `x[1]` "different memory"',
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(), st.sampled_from([torch.float32, torch.float64, torch.int8, torch.bool]))
def test_data_ptr_is_storage_start_plus_offset_or_0_when_empty(t, dtype):
    t = t.to(dtype) if dtype != t.dtype else t
    start = t.untyped_storage().data_ptr()
    expected = start + t.storage_offset() * t.element_size() if t.numel() else 0
    assert t.data_ptr() == expected


@pytest.mark.rule(
    "01",
    "`Tensor.storage()` returns a `TypedStorage`, which PyTorch has deprecated; it warns (the first time in a process), "
    "as notebook 09, section 1 (*One storage, another dtype*) shows.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(dims=(0, 2), side=(0, 3)), st.sampled_from([torch.float32, torch.int64, torch.bool, torch.float16]))
def test_storage_warns_and_is_typed(t, dtype):
    t = t.to(dtype)
    torch.storage._warn_typed_storage_removal.__dict__["has_warned"] = False  # as in a fresh process
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        s = t.storage()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second call in the same process stays silent
        t.storage()
    assert isinstance(s, torch.TypedStorage) and s.dtype == dtype
    assert t.untyped_storage().nbytes() == s.nbytes()


# ----- 7. NumPy ------------------------------------------------------------------------------------------------
NUMPY_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64, torch.uint8, torch.bool]


def _takeable(case) -> bool:
    """Memory PyTorch can describe: no negative stride, the machine's byte order, strides in whole items."""
    return not case.negative_stride and case.native_byte_order and case.strides_fit_itemsize


@pytest.mark.rule(
    "01",
    "`t.numpy()` and `torch.from_numpy(a)` share memory; `torch.as_tensor(a)` shares when no dtype or device change is "
    "needed; `torch.tensor(a)` copies whatever array it accepts.",
)
@pytest.mark.rule(
    "01",
    "All four constructors, `torch.tensor` included, refuse an array with a negative stride, a byte order that is "
    "not the machine's, or a stride that is no multiple of the item size (one field of a structured array): PyTorch "
    "cannot describe that memory, and none of them copies instead.",
)
@pytest.mark.rule(
    "01",
    '`a.astype(a.dtype.newbyteorder("="), order="C")`, a fresh row-major copy in the machine\'s byte order, makes an '
    "array they take.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(numpy_cases(), st.sampled_from(["float32", "float64", "int64", "bool"]))
def test_numpy_bridges_share_or_copy_as_stated(case, other):
    a = case.array
    constructors = {
        "tensor": torch.tensor,
        "as_tensor": torch.as_tensor,
        "asarray": torch.asarray,
        "from_numpy": torch.from_numpy,
        "as_tensor(dtype)": lambda a: torch.as_tensor(a, dtype=getattr(torch, other)),
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = {}
        for name, make in constructors.items():
            try:
                made[name] = make(a)
            except ValueError:
                made[name] = None
    if not _takeable(case):
        assert all(t is None for t in made.values()), (case, made)
        fixed = a.astype(a.dtype.newbyteorder("="), order="C")
        assert torch.tensor(fixed).tolist() == a.tolist()  # the fix the notebook names
        return
    assert all(t is not None for t in made.values()), case
    if a.size == 0:  # no element: no address to compare
        return
    address = a.__array_interface__["data"][0]
    assert made["tensor"].data_ptr() != address
    assert made["from_numpy"].data_ptr() == address and made["as_tensor"].data_ptr() == address
    same_dtype = torch.from_numpy(a).dtype == getattr(torch, other)
    assert (made["as_tensor(dtype)"].data_ptr() == address) == same_dtype
    if not a.flags.writeable:  # shared all the same; the warning comes once per process (checked below)
        assert all("not writable" in str(w.message) for w in caught)


@pytest.mark.rule(
    "01",
    "`t.numpy()` works on the CPU only: a tensor on any other device is refused; its message says to copy with "
    "`.cpu()` first (on the CPU, `x.cpu()` is `x`).",
)
@pytest.mark.rule(
    "01",
    "It also refuses a tensor that requires grad, one with the conjugate bit set (`.conj()` of a complex tensor), and "
    "a dtype NumPy lacks, such as `bfloat16`.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(1, 3)), st.sampled_from(NUMPY_DTYPES))
def test_numpy_shares_on_the_cpu_and_refuses_grad_and_bfloat16(t, dtype):
    t = _plain(t).to(dtype)
    a = t.numpy()
    assert a.ctypes.data == t.data_ptr()
    assert torch.from_numpy(a).data_ptr() == a.ctypes.data
    with pytest.raises(RuntimeError, match="requires grad"):
        t.detach().double().clone().requires_grad_(True).numpy()
    with pytest.raises(TypeError):
        t.to(torch.bfloat16).numpy()
    with pytest.raises(TypeError, match=r"Use Tensor\.cpu\(\) to copy the tensor to host memory first"):
        torch.zeros(2, device="meta").numpy()
    assert t.cpu() is t
    tracked = t.detach().double().clone().requires_grad_(True)
    assert tracked.numpy(force=True).ctypes.data == tracked.data_ptr()  # detach alone copies nothing
    for made in (t.to(torch.complex64).conj(), t.to(torch.complex64).conj().imag):
        bit = "conjugate" if made.is_conj() else "negative"  # the imaginary part of a conj view has the neg bit
        with pytest.raises(RuntimeError, match=f"{bit} bit set"):
            made.numpy()
        forced = made.numpy(force=True)
        assert forced.ctypes.data != made.data_ptr() or made.numel() == 0  # resolving the bit copies
        assert forced.tolist() == made.resolve_conj().resolve_neg().tolist()


@pytest.mark.rule(
    "01",
    "NumPy reports strides in **bytes**, PyTorch in **elements** (an empty tensor comes out with NumPy strides 0).",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(), st.sampled_from(NUMPY_DTYPES))
def test_numpy_strides_are_torch_strides_times_itemsize(t, dtype):
    t = _plain(t)
    t = t.to(dtype) if t.dtype != dtype else t
    if t.numel():
        assert t.numpy().strides == tuple(s * t.element_size() for s in t.stride())
    else:  # the exception the sentence states
        assert t.numpy().strides == (0,) * t.dim()


@pytest.mark.rule(
    "01",
    "PyTorch strides are never negative, so every constructor refuses it (section 7), even `torch.tensor`, which "
    "copies everything else.",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(numpy_cases(kinds=("flipped", "mixed_signs")))
def test_every_constructor_refuses_a_negative_stride(case):
    for bridge in (torch.from_numpy, torch.as_tensor, torch.tensor, torch.asarray):
        with pytest.raises(ValueError, match="negative"):
            bridge(case.array)
    assert torch.from_numpy(case.array.copy()).tolist() == case.array.tolist()


# ----- 8. save ------------------------------------------------------------------------------------------------
@pytest.mark.rule(
    "01",
    "`torch.save` saves storages, so that views saved together still share memory when loaded",
)
@pytest.mark.nb01
@RULE_SETTINGS
@given(layouts(side=(1, 3), kinds=("contiguous", "permuted", "sliced", "expanded")))
def test_save_keeps_views_sharing_and_saves_the_whole_storage(t):
    base = _storage(t)
    buffer = io.BytesIO()
    torch.save((base, t), buffer)
    size = len(buffer.getvalue())
    buffer.seek(0)
    base2, t2 = torch.load(buffer)
    assert _same_storage(base2, t2) and torch.equal(t2, t) and t2.stride() == t.stride()
    alone = io.BytesIO()
    torch.save(t, alone)
    assert len(alone.getvalue()) >= t.untyped_storage().nbytes() and size < 2 * len(alone.getvalue())
