"""Notebook 09's general sentences (dtype views, ``out=``, paired indexing), each checked against torch over the
tensors a learner meets (tests/course/learner_inputs.py: offsets, views of views, transposes, expands, unfold
windows, channels_last, 0-d, empty, size-1 dims, requires_grad, as_strided layouts, in several dtypes)."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import DTYPES, FLOAT_DTYPES, TENSOR_KINDS, learner_tensors
from viewlab import measure

# view(dtype) takes every dtype of the shared strategy, sizes 1, 2, 4 and 8 bytes among them.
targets = st.sampled_from(DTYPES)


def _own(t: torch.Tensor) -> torch.Tensor:
    """The tensor without autograd (a learner's requires_grad leaf refuses to be written in place)."""
    return t.detach() if t.requires_grad else t


def _view_or_none(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    try:
        return t.view(dtype)
    except RuntimeError:
        return None


def _view_dtype_allowed(t: torch.Tensor, dtype: torch.dtype) -> bool:
    """The conditions the notebook states, computed from shape, strides and offset alone."""
    old, new = t.element_size(), torch.empty((), dtype=dtype).element_size()
    if old == new:
        return True
    if t.dim() == 0 or t.stride(-1) != 1:
        return False
    if new < old:
        return True
    ratio = new // old
    others = all(s % ratio == 0 for s in t.stride()[:-1])
    return t.shape[-1] % ratio == 0 and t.storage_offset() % ratio == 0 and others


@pytest.mark.rule(
    "09",
    "`x.view(dtype)` reads the bytes of `x` as another dtype: no copy and no conversion. The result shares "
    "`x`'s storage and starts at the same byte, so a write through one shows in the other.",
)
@RULE_SETTINGS
@given(t=learner_tensors(), dtype=targets)
def test_a_dtype_view_shares_the_bytes_and_writes_go_through(t, dtype):
    t = _own(t)
    v = _view_or_none(t, dtype)
    assume(v is not None)
    assert v.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() and v.data_ptr() == t.data_ptr()
    assert torch.equal(v.view(t.dtype), t)  # the bytes read back as the old dtype: the same values
    v.zero_()  # zero bits through the view (a scalar fill: allowed on stride 0 and overlapping windows too)
    assert not t.any()  # zero bits are 0 (or False) in every dtype


@pytest.mark.rule(
    "09",
    "Every other dim keeps its stride in bytes; the last dim is stretched or shrunk by the ratio of the element "
    "sizes, and so is the storage offset.",
)
@RULE_SETTINGS
@given(t=learner_tensors(dims=(1, 4)), dtype=targets)
def test_a_dtype_view_scales_the_last_dim_and_keeps_byte_strides(t, dtype):
    v = _view_or_none(_own(t), dtype)
    assume(v is not None)
    old, new = t.element_size(), v.element_size()
    assert v.shape[:-1] == t.shape[:-1] and v.shape[-1] * new == t.shape[-1] * old
    assert [s * new for s in v.stride()[:-1]] == [s * old for s in t.stride()[:-1]]
    assert v.storage_offset() * new == t.storage_offset() * old


@pytest.mark.rule(
    "09",
    "A larger element needs stride 1 and a size divisible by the ratio in the last dim, and a storage offset and "
    "every other stride divisible by it; a smaller element needs stride 1 in the last dim; a 0-d tensor takes "
    "only a dtype of the same size.",
)
@RULE_SETTINGS
@given(t=learner_tensors(), dtype=targets)
def test_a_dtype_view_is_refused_exactly_where_the_notebook_says(t, dtype):
    t = _own(t)
    assert (_view_or_none(t, dtype) is not None) == _view_dtype_allowed(t, dtype), (t.shape, t.stride(), dtype)


floats = learner_tensors(dtypes=FLOAT_DTYPES)


@pytest.mark.rule(
    "09",
    "`torch.add(a, b, out=c)` writes the sum into `c`'s storage: no new tensor, and `c.data_ptr()` does not change.",
)
@RULE_SETTINGS
@given(a=floats, transposed=st.booleans())
def test_out_of_the_right_shape_is_written_in_place(a, transposed):
    a = _own(a)
    shape = tuple(a.shape)
    c = torch.empty(shape[::-1], dtype=a.dtype).permute(tuple(reversed(range(a.dim())))) if transposed else None
    c = torch.empty(shape, dtype=a.dtype) if c is None else c  # contiguous, or a transposed layout
    ptr, stride = c.data_ptr(), c.stride()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the right shape: no resize, so no warning
        torch.add(a, a, out=c)
    assert c.data_ptr() == ptr and c.stride() == stride and torch.equal(c, a + a)


@pytest.mark.rule(
    "09",
    "An `out=` of the wrong shape is resized, with a `UserWarning`, unless it has no elements; the resize keeps "
    "its memory when its storage, from its offset on, holds the result, and otherwise reallocates the same storage, "
    "bigger, at a new address, so every view of that storage, the base included, now reads the new memory.",
)
@pytest.mark.rule(
    "09",
    "The resize also gives `out=` dense strides from its offset, in the inputs' dim order (row-major here), so the "
    "result lands on whatever of that storage it reaches: a short slice such as `base[:2]` overwrites its base's "
    "next elements, and a strided `out=` its own gaps, elements that were never its own.",
)
@RULE_SETTINGS
@given(a=floats, n=st.integers(0, 70), offset=st.integers(0, 3), step=st.integers(1, 2), after=st.integers(0, 70))
def test_out_of_the_wrong_shape_is_resized_in_its_own_storage(a, n, offset, step, after):
    a = _own(a)
    base = torch.zeros(offset + step * n + after, dtype=a.dtype)  # room after c too: c is a short slice of base
    c = base[offset : offset + step * n : step]  # the out= tensor, a view of base: contiguous or strided
    assume(tuple(a.shape) != (n,))
    es, need = a.element_size(), a.numel()
    ptr, room = base.untyped_storage().data_ptr(), base.untyped_storage().nbytes()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.add(a, a, out=c)
    resized = [w for w in caught if "was resized" in str(w.message)]
    assert bool(resized) == (n > 0) and all(w.category is UserWarning for w in resized)
    assert c.shape == a.shape and torch.equal(c, a + a) and c.storage_offset() == offset
    assert c.stride() == (a + a).stride()  # dense, in the dim order a fresh result of the inputs takes
    kept = c.untyped_storage().data_ptr() == ptr
    assert kept == (room >= (offset + need) * es) or room == 0  # kept if the storage from the offset holds it
    # one storage still: base reads where c writes, however it was resized, and the bytes before c are kept
    assert base.untyped_storage().data_ptr() == c.untyped_storage().data_ptr()
    assert base.untyped_storage().nbytes() >= (offset + need) * es
    assert torch.equal(base[:offset], torch.zeros(offset, dtype=a.dtype))
    # base reads the new memory: elements offset .. offset + need - 1 of its storage hold the sum, laid out as
    # c, whether or not they were c's elements (a short slice's neighbours, a strided one's gaps) ...
    assert torch.equal(base.as_strided(c.shape, c.stride(), c.storage_offset()), a + a)
    # ... and the storage past the result is untouched
    tail = torch.empty(0, dtype=a.dtype).set_(base.untyped_storage())[offset + need : base.numel()]
    assert not tail.any()


@pytest.mark.rule(
    "09",
    "Most operators refuse an `out=` when an argument requires grad: `add`, `matmul`, `cat` and `sum` raise. Under "
    "`torch.no_grad()` (as in an optimiser's step or an evaluation loop) they run.",
)
@RULE_SETTINGS
@given(t=learner_tensors(dims=(1, 4), dtypes=FLOAT_DTYPES), no_grad=st.booleans())
def test_out_with_an_argument_that_requires_grad_is_refused_by_most_operators(t, no_grad):
    k = t.shape[-1]
    calls = {
        "add": lambda: torch.add(t, t, out=torch.empty(t.shape, dtype=t.dtype)),
        "matmul": lambda: torch.matmul(t, torch.ones(k, 2, dtype=t.dtype), out=torch.empty(0, dtype=t.dtype)),
        "cat": lambda: torch.cat([t, t], out=torch.empty(0, dtype=t.dtype)),
        "sum": lambda: torch.sum(t, -1, out=torch.empty(t.shape[:-1], dtype=t.dtype)),
    }
    refused = t.requires_grad and not no_grad
    for name, call in calls.items():
        with torch.no_grad() if no_grad else contextlib.nullcontext(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the resize of the empty out= tensors
            try:
                out = call()
            except RuntimeError as err:
                assert refused and "don't support automatic differentiation" in str(err), (name, str(err))
                continue
        assert not refused, f"{name}: ran with an argument that requires grad"
        assert not out.requires_grad


@pytest.mark.rule(
    "09",
    "A composite one such as `torch.tensordot` computes its result, then `copy_`s it into `out=`, a copy autograd "
    "records, so `out=` joins the graph and the gradient reaches the input",
)
@RULE_SETTINGS
@given(t=learner_tensors(dims=(1, 4), dtypes=FLOAT_DTYPES))
def test_tensordot_copies_into_out_and_autograd_records_the_copy(t):
    k = t.shape[-1]
    o = torch.empty((*t.shape[:-1], 2), dtype=t.dtype)
    ptr = o.data_ptr()
    with measure() as m:
        r = torch.tensordot(t, torch.ones(k, 2, dtype=t.dtype), dims=1, out=o)
    assert r is o and o.data_ptr() == ptr
    assert m.peak_bytes >= o.numel() * o.element_size()  # computed into memory of its own first, then copied
    assert (type(o.grad_fn).__name__ == "CopyBackwards") == t.requires_grad and o.requires_grad == t.requires_grad
    if t.requires_grad:
        (grad,) = torch.autograd.grad(o.sum(), t)
        assert torch.equal(grad, torch.full(t.shape, 2.0, dtype=t.dtype))  # d/dt of sum(t @ ones(k, 2))


@st.composite
def scores_and_labels(draw):
    kinds = tuple(k for k in TENSOR_KINDS if k not in ("unfold", "channels_last"))  # those add or need dims
    x = draw(learner_tensors(dims=(2, 2), side=(0, 4), kinds=kinds))
    n, classes = x.shape
    assume(classes > 0 or n == 0)
    labels = torch.tensor(draw(st.lists(st.integers(0, max(classes - 1, 0)), min_size=n, max_size=n)), dtype=torch.long)
    return _own(x), labels


@pytest.mark.rule(
    "09",
    "`x[torch.arange(N), labels]` takes one element per row, shape `(N,)`: the same as "
    "`x.gather(1, labels[:, None]).squeeze(1)`.",
)
@pytest.mark.rule("09", "`x[:, labels]` keeps every row and picks the columns for all of them: shape `(N, N)`.")
@RULE_SETTINGS
@given(case=scores_and_labels())
def test_paired_indexing_picks_one_element_per_row(case):
    x, labels = case
    n = x.shape[0]
    picked = x[torch.arange(n), labels]
    assert picked.shape == (n,) and torch.equal(picked, x.gather(1, labels[:, None]).squeeze(1))
    assert all(torch.equal(picked[i], x[i, labels[i]]) for i in range(n))  # element i is x[i, labels[i]]
    wrong = x[:, labels]
    assert wrong.shape == (n, n) and torch.equal(wrong.diagonal(), picked)
    if picked.numel():
        assert picked.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()  # a copy
