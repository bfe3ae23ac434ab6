"""Notebook 03's general sentences, each checked against torch over generated inputs (sizes 0, 1 and more,
new leading dims, sliced, transposed and expanded tensors, channels_last, overlapping windows)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import TENSOR_KINDS, learner_tensors

pytestmark = pytest.mark.nb03

small = st.integers(0, 3)
shapes = st.lists(small, min_size=0, max_size=3).map(tuple)


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def layouts(ndim=None):
    """Tensors as a learner meets them (the shared strategy, tests/course/learner_inputs.py): offsets, views of
    views, transposes, expands, unfold windows, channels_last, 0-d, empty, size-1 dims, requires_grad, dtypes."""
    dims = (ndim, ndim) if ndim is not None else (0, 3)
    kinds = tuple(k for k in TENSOR_KINDS if not (k in ("unfold", "channels_last") and ndim is not None))
    return learner_tensors(dims=dims, side=(0, 3), kinds=kinds)


@pytest.mark.rule(
    "03",
    "`out._base` (the tensor the chain of views started from, even for a view of a view; `None` for a tensor that "
    "is no view)",
)
@pytest.mark.rule(
    "03",
    "`detach()` (notebook 01, section 5 (*What `detach()` shares*)) and `.data` share the storage but are not autograd "
    "views: `_is_view()` is False, their `_base` is `None`, and a view of them names *them*. Trust the storage pointer.",
)
@pytest.mark.rule(
    "03",
    "An inference tensor (created under `torch.inference_mode()`) has views that share its storage, yet their "
    "`_base` is `None`.",
)
@RULE_SETTINGS
@given(t=layouts(), chain=st.lists(st.integers(0, 3), max_size=4))
def test_base_names_where_the_chain_of_views_started(t, chain):
    root = t if t._base is None else t._base
    assert (t._base is None) == (not t._is_view()) and root._base is None  # None exactly for a tensor that is no view
    steps = [
        lambda v: v[..., :1] if v.dim() else v[None],
        lambda v: v.unsqueeze(0),
        lambda v: v.expand(2, *v.shape),
        lambda v: v.transpose(0, -1) if v.dim() else v.view(1),
    ]
    v = t
    for k in chain:
        v = steps[k](v)
        assert v._base is root and _shares(v, root)  # a view of a view still names where the chain started
    for fresh in (t.detach(), t.data):
        assert fresh._base is None and not fresh._is_view() and _shares(fresh, t)  # shared memory, no _base
        assert fresh.unsqueeze(0)._base is fresh  # a view of it names it, not root
    data, before = t.data, t._version
    data.zero_()  # one write through .data (a scalar fill: allowed on every layout, stride 0 too)
    assert t._version == before < data._version  # its own counter: autograd misses the write
    d = t.detach()
    d.zero_()
    assert t._version == d._version == before + 1  # detach() shares the counter
    # a view of an inference tensor has no _base either; one taken in inference mode of an ordinary tensor has
    with torch.inference_mode():
        kept = t.unsqueeze(0)._base is root  # a view of an ordinary tensor, taken in inference mode
        made = t.clone()  # an inference tensor
        view = made.unsqueeze(0)
    assert kept and made.is_inference() and view._base is None and _shares(view, made)


@pytest.mark.rule("03", "On a size-1 dim all six agree in value.")
@RULE_SETTINGS
@given(rows=small, n=small)
def test_the_six_ops_agree_on_a_size_one_dim(rows, n):
    col = torch.arange(float(rows)).reshape(rows, 1)
    want = col.expand(rows, n)
    for got in (
        col.expand_as(torch.empty(rows, n)),
        torch.broadcast_to(col, (rows, n)),
        col.repeat(1, n),
        col.tile((1, n)),
        col.repeat_interleave(n, dim=1),
    ):
        assert torch.equal(got, want)


@pytest.mark.rule(
    "03",
    "And `repeat` wants at least one count per existing dim, where `tile` pads missing counts with 1 "
    "(like NumPy's `tile`)",
)
@RULE_SETTINGS
@given(x=layouts(), counts=st.lists(small, min_size=1, max_size=4).map(tuple))
def test_repeat_needs_a_count_per_dim_and_tile_pads_with_ones(x, counts):
    padded = (1,) * max(0, x.dim() - len(counts)) + counts
    assert torch.equal(x.tile(counts), x.repeat(padded))
    if len(counts) < x.dim():
        with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims"):
            x.repeat(counts)


@pytest.mark.rule(
    "03",
    "New dims may be added **in front** only (they get stride 0 too, unless of size 1), and `-1` is not allowed "
    "there because there is no size to keep.",
)
@RULE_SETTINGS
@given(shape=shapes, new=st.lists(small, min_size=1, max_size=2).map(tuple))
def test_new_leading_dims_get_stride_zero_unless_size_one(shape, new):
    x = torch.zeros(shape)
    e = x.expand(*new, *shape)
    assert all(s == 0 for n, s in zip(new, e.stride()) if n != 1)
    assert e.stride()[len(new) :] == x.stride()  # the existing dims kept their size, so their stride
    with pytest.raises(RuntimeError):
        x.expand(-1, *shape)
    if any(s not in (1, n) for s, n in zip(shape, new[-len(shape) :])) and len(new) >= len(shape) >= 1:
        with pytest.raises(RuntimeError):  # a new dim at the end: sizes align from the right
            x.expand(*shape, *new)


@pytest.mark.rule("03", "A dim whose size is not 1 cannot be stretched")
@RULE_SETTINGS
@given(shape=st.lists(small, min_size=1, max_size=3).map(tuple), dim=st.integers(0, 2), target=small)
def test_only_size_one_dims_stretch(shape, dim, target):
    dim = dim % len(shape)
    x = torch.zeros(shape)
    want = list(shape)
    want[dim] = target
    if shape[dim] in (1, target):
        assert x.expand(want).shape == tuple(want)
    else:
        with pytest.raises(RuntimeError, match="non-singleton dimension"):
            x.expand(want)


@pytest.mark.rule(
    "03",
    "`expand_as(other)` is `expand(other.shape)`: `other`'s values, dtype, device and strides are ignored.",
)
@RULE_SETTINGS
@given(x=layouts(), extra=st.lists(small, max_size=2), dtype=st.sampled_from([torch.float64, torch.int8, torch.bool]))
def test_expand_as_is_expand_of_the_shape(x, extra, dtype):
    target = (*extra, *[s if s != 1 else 3 for s in x.shape])
    other = torch.zeros(target[::-1], dtype=dtype, device="meta")
    other = other.permute(*reversed(range(len(target)))) if len(target) >= 2 else other.reshape(target)
    a, b = x.expand_as(other), x.expand(other.shape)
    assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == x.dtype and a.device == x.device
    assert _shares(a, x) and torch.equal(a, b)


@pytest.mark.rule(
    "03",
    "`x.unfold(dim, size, step)` returns every window of `size` elements, `step` apart, as a view: a new last dim "
    "walks inside a window with the dim's own stride (1 here), and the window dim gets `step` times that stride.",
)
@RULE_SETTINGS
@given(x=layouts(), dim=st.integers(0, 2), size=small, step=st.integers(1, 3))
def test_unfold_strides(x, dim, size, step):
    assume(x.dim() >= 1)
    dim = dim % x.dim()
    assume(size <= x.shape[dim])
    w = x.unfold(dim, size, step)
    assert _shares(w, x) and w.stride()[-1] == x.stride(dim) and w.stride(dim) == step * x.stride(dim)
    for i in range(w.shape[dim]):
        assert torch.equal(w.select(dim, i), x.narrow(dim, i * step, size).movedim(dim, -1))


@pytest.mark.rule("03", "There are `(n - size) // step + 1` windows; neighbours share elements when `step < size`.")
@RULE_SETTINGS
@given(n=st.integers(0, 9), size=st.integers(0, 9), step=st.integers(1, 4))
def test_unfold_window_count_and_sharing(n, size, step):
    assume(size <= n)
    x = torch.arange(float(n))
    w = x.unfold(0, size, step)
    assert w.shape == ((n - size) // step + 1, size)
    if w.shape[0] >= 2 and size > 0:
        shared = set(w[0].tolist()) & set(w[1].tolist())
        assert bool(shared) == (step < size)


@pytest.mark.rule(
    "03",
    "`unfold` checks its arguments against the tensor; `as_strided` checks little more than that sizes, strides and "
    "offset are non-negative and that every element it can reach lies inside the **storage** (on a meta tensor, "
    "whose storage holds no data, the bounds are not checked).",
)
@RULE_SETTINGS
@given(
    stored=st.integers(0, 12),
    offset=st.integers(-1, 3),
    size=st.lists(st.integers(-1, 4), min_size=1, max_size=3),
    stride=st.lists(st.integers(-2, 4), min_size=3, max_size=3),
    meta=st.booleans(),
)
def test_as_strided_checks_only_the_signs_and_the_storage_bounds(stored, offset, size, stride, meta):
    storage = torch.arange(float(stored + 3))[3:]  # a tensor with storage offset 3: as_strided ignores it
    storage = storage.to("meta") if meta else storage
    stride = stride[: len(size)]
    negative = any(n < 0 for n in (*size, *stride, offset))
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    reachable = math.prod(size) > 0
    try:
        torch.as_strided(storage, size, stride, offset)
        ok = True
    except RuntimeError as err:
        assert negative or "out of bounds for storage" in str(err), str(err)
        ok = False
    if negative:
        assert not ok  # refused even when no element is reachable (size 0), on meta too
    elif meta:
        assert ok  # no data to check against: any reach goes through (the signs were checked above)
    else:
        assert ok == (not reachable or last < stored + 3)  # the whole storage, not the tensor's 'stored' elements


@pytest.mark.rule(
    "03",
    "Its strides and offset count storage elements, whatever the input's strides: offset 0 is storage "
    "element 0, not `part[0]`.",
)
@RULE_SETTINGS
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), start=st.integers(0, 3), data=st.data())
def test_as_strided_counts_in_storage_elements(rows, cols, start, data):
    flat = torch.arange(float(rows * cols + start))
    t = flat[start:].view(rows, cols).t()  # own strides (1, cols), storage offset start
    k = data.draw(st.integers(0, rows * cols + start))
    step = data.draw(st.integers(0, 2))
    assume(k == 0 or (k - 1) * step < flat.numel())
    got = torch.as_strided(t, (k,), (step,), 0)
    assert got.tolist() == flat[torch.arange(k) * step].tolist()  # storage elements 0, step, 2*step, ...


@pytest.mark.rule(
    "03",
    "`memory_format=torch.channels_last` keeps the **shape** and stores it NHWC, the `C` channels of one pixel side "
    "by side: strides `(H·W·C, 1, W·C, C)`.",
)
@pytest.mark.rule("03", "A size-1 dim may keep another stride: it is never used to reach an element.")
@RULE_SETTINGS
@given(img=layouts(ndim=4))
def test_channels_last_strides(img):
    n, c, h, w = img.shape
    nhwc = img.contiguous(memory_format=torch.channels_last)
    assert nhwc.shape == img.shape and torch.equal(nhwc, img)
    for size, got, want in zip(nhwc.shape, nhwc.stride(), (h * w * c, 1, w * c, c)):
        assert size <= 1 or got == want


@pytest.mark.rule(
    "03",
    "`is_contiguous()` asks about the default format only, so it says False; "
    "`is_contiguous(memory_format=torch.channels_last)` says True.",
)
@pytest.mark.rule(
    "03",
    "Where `C = 1` or `H·W = 1`, both orders coincide: `is_contiguous()` says True too, and "
    "`contiguous(memory_format=...)` returns the tensor itself, while `.to(memory_format=...)` goes by the *suggested* "
    "format (NCHW here) and copies.",
)
@pytest.mark.rule("03", "An empty `(0, 3, 4, 5)` is not channels_last: converting returns a new tensor.")
@RULE_SETTINGS
@given(img=layouts(ndim=4))
def test_channels_last_is_contiguous_in_the_default_format_only_at_the_edges(img):
    n, c, h, w = img.shape
    nhwc = img.contiguous(memory_format=torch.channels_last)
    assert nhwc.is_contiguous(memory_format=torch.channels_last)
    assert nhwc.is_contiguous() == (c == 1 or h * w == 1 or nhwc.numel() == 0)
    for batch in (n, 0) if c * h * w else ():  # an empty batch coincides only where a full one does
        fresh = torch.empty(batch, c, h, w)
        one_order = c == 1 or h * w == 1
        assert fresh.is_contiguous(memory_format=torch.channels_last) == one_order
        assert (fresh.contiguous(memory_format=torch.channels_last) is fresh) == one_order
        if one_order and fresh.numel():  # both orders hold, NCHW is the suggested one: .to copies
            moved = fresh.to(memory_format=torch.channels_last)
            assert moved is not fresh and moved.untyped_storage().data_ptr() != fresh.untyped_storage().data_ptr()


@pytest.mark.rule(
    "03",
    "`channels_last` keeps the shape, changes the strides; `contiguous(memory_format=...)` copies unless already in "
    "that format.",
)
@pytest.mark.rule("03", "Converting moves every element, so it copies.")
@RULE_SETTINGS
@given(n=st.integers(1, 3), c=st.integers(1, 3), h=st.integers(1, 3), w=st.integers(1, 3), img=layouts(ndim=4))
def test_converting_copies_unless_already_in_the_format(n, c, h, w, img):
    fresh = torch.randn(n, c, h, w)
    assert fresh.is_contiguous(memory_format=torch.channels_last) == (c == 1 or h * w == 1)
    nhwc = img.contiguous(memory_format=torch.channels_last)
    assert (nhwc is img) == img.is_contiguous(memory_format=torch.channels_last)
    if nhwc is not img and img.numel():
        assert nhwc.untyped_storage().data_ptr() != img.untyped_storage().data_ptr()
    assert nhwc.contiguous(memory_format=torch.channels_last) is nhwc


@st.composite
def reshapes(draw):
    x = draw(layouts())
    factors = [d for d in range(1, x.numel() + 1) if x.numel() % d == 0] or [0]
    first = draw(st.sampled_from(factors))
    return x, ((first, -1) if x.numel() else (0,) + tuple(x.shape[1:]) if x.dim() else (1,))


@pytest.mark.rule("03", "`view` refuses where `reshape` copies")
@RULE_SETTINGS
@given(case=reshapes())
def test_view_refuses_exactly_where_reshape_copies(case):
    x, shape = case
    assume(x.dim() > 0 or shape == (1,))
    r = x.reshape(shape)
    try:
        v = x.view(shape)
    except RuntimeError:
        v = None
    copied = not (_shares(r, x) and r._base is not None) and x.numel() > 0
    assert (v is None) == copied
    if v is not None:
        assert v.stride() == r.stride() and torch.equal(v, r)


@pytest.mark.rule(
    "03",
    "**Materialise**: `contiguous()`, `clone()`, `.to(other dtype)`, and `reshape`/`flatten` when the new shape must "
    "merge the stride-0 dim with a real one — `reshape` quietly calls `clone`.",
)
@RULE_SETTINGS
@given(rows=st.integers(2, 4), cols=st.integers(0, 4), stretched=st.sampled_from(["rows", "cols"]))
def test_what_materialises_an_expanded_view(rows, cols, stretched):
    base = torch.randn(1, cols) if stretched == "rows" else torch.randn(rows, 1)
    e = base.expand(rows, cols) if stretched == "rows" else base.expand(rows, max(cols, 2))
    empty = e.numel() == 0
    assert (e.contiguous() is e) == empty  # an empty tensor counts as contiguous: nothing to copy
    if not empty:  # (an empty tensor has no memory to share or to copy)
        assert not _shares(e.contiguous(), e) and not _shares(e.clone(), e) and not _shares(e.to(torch.float64), e)
        merged = e.shape[0] > 1 and e.shape[1] > 1  # the stride-0 dim meets a real one
        assert _shares(e.flatten(), e) == (not merged)


@pytest.mark.rule(
    "03",
    "`add_`, `mul_`, `copy_`, `fill_` with a *tensor*, and indexed assignment `e[i] = v` (the number becomes a 0-d "
    "tensor, written by `fill_(tensor)` or `copy_`: logged below) raise when the region they write is non-empty with "
    "a stride-0 dim of size > 1, even when one value is written.",
)
@RULE_SETTINGS
@given(
    size=st.lists(st.integers(0, 3), min_size=1, max_size=3),
    stride=st.lists(st.integers(0, 3), min_size=3, max_size=3),
    write=st.sampled_from(["add_", "mul_", "copy_", "fill_tensor"]),
)
def test_checked_writes_raise_exactly_on_a_stride_zero_dim(size, stride, write):
    stride = stride[: len(size)]
    buffer = torch.zeros(1 + sum((n - 1) * s for n, s in zip(size, stride) if n))
    region = torch.as_strided(buffer, size, stride)
    stretched = any(s == 0 and n > 1 for n, s in zip(size, stride)) and region.numel() > 0
    do = {
        "add_": lambda r: r.add_(1),
        "mul_": lambda r: r.mul_(2),
        "copy_": lambda r: r.copy_(torch.ones(r.shape)),
        "fill_tensor": lambda r: r.fill_(torch.tensor(7.0)),
    }[write]
    try:
        do(region)
        raised = False
    except RuntimeError as err:
        assert "single memory location" in str(err)
        raised = True
    assert raised == stretched  # any other overlap (a window shared by two rows) is not detected


@pytest.mark.rule(
    "03",
    "No other overlap inside the written region is detected: overlapping windows (`x.unfold(0, 4, 2).mul_(2)`) write "
    "each shared element once per window.",
)
@RULE_SETTINGS
@given(n=st.integers(2, 9), size=st.integers(2, 4), step=st.integers(1, 3))
def test_overlapping_windows_pass_the_check_and_corrupt(n, size, step):
    assume(size <= n)
    x = torch.ones(n)
    x.unfold(0, size, step).mul_(2)  # no error
    covered = torch.zeros(n, dtype=torch.long)
    for i in range((n - size) // step + 1):
        covered[i * step : i * step + size] += 1
    assert torch.equal(x, 2.0**covered)


@pytest.mark.rule(
    "03",
    "A second check refuses an input that partly overlaps the region written where both are dense "
    "(`x[1:].copy_(x[:-1])`); between strided views it cannot tell: `m[:, 1:].copy_(m[:, :3])` writes wrong values "
    "(clone the input).",
)
@RULE_SETTINGS
@given(n=st.integers(2, 9), shift=st.integers(0, 8), op=st.sampled_from(["copy_", "add_", "out="]))
def test_an_input_that_partly_overlaps_the_written_region_is_refused(n, shift, op):
    assume(shift < n)
    x = torch.arange(float(n))
    dst, src = x[shift:], x[: n - shift]  # shift 0: the same elements (full overlap)
    partly = 0 < shift < n - shift  # some elements shared, not all (shift >= n - shift: none shared)
    write = {
        "copy_": lambda: dst.copy_(src),
        "add_": lambda: dst.add_(src),
        "out=": lambda: torch.add(src, 1, out=dst),
    }[op]
    try:
        write()
        raised = False
    except RuntimeError as err:
        assert "some elements of the input tensor and the written-to tensor refer to a single memory location" in str(
            err
        )
        raised = True
    assert raised == partly  # full overlap (each element written from itself) and none are allowed
    if raised:
        assert x.tolist() == [float(i) for i in range(n)]  # refused before anything was written
    disjoint = torch.arange(float(2 * n))
    disjoint[n:].copy_(disjoint[:n])  # no shared element: no check to fail
    assert disjoint[n:].tolist() == disjoint[:n].tolist()
    if partly:  # the same shift along the columns of a matrix: strided views, not dense, so not checked
        m = torch.arange(float(3 * n)).view(3, n)
        dst, src = m[:, shift:], m[:, : n - shift]
        {"copy_": lambda: dst.copy_(src), "add_": lambda: dst.add_(src), "out=": lambda: torch.add(src, 1, out=dst)}[
            op
        ]()  # no error (the values depend on the kernel's order: undefined)
    m = torch.arange(12.0).view(3, 4)
    m[:, 1:].copy_(m[:, :3])  # the notebook's example: no error, and not what copying a clone gives
    assert not torch.equal(m[:, 1:], torch.arange(12.0).view(3, 4)[:, :3])


ADVANCED = {
    "e[e >= 0] = 7": lambda e: e.__setitem__(e >= 0, 7.0),
    "e[[0, 0], [1, 2]] = tensor([1., 2.])": lambda e: e.__setitem__(([0, 0], [1, 2]), torch.tensor([1.0, 2.0])),
    "index_put_": lambda e: e.index_put_((torch.tensor([0, 0]), torch.tensor([0, 3])), torch.tensor([3.0, 4.0])),
    "masked_fill_": lambda e: e.masked_fill_(e >= 0, 5.0),
    "index_fill_": lambda e: e.index_fill_(1, torch.tensor([0]), 6.0),
}


@pytest.mark.rule(
    "03",
    "**`fill_` and `zero_` with a Python number skip the check** and write the shared elements.",
)
@RULE_SETTINGS
@given(rows=st.integers(1, 4), cols=st.integers(2, 4), value=st.integers(-3, 3), zero=st.booleans())
def test_scalar_fill_and_zero_skip_the_check(rows, cols, value, zero):
    base = torch.full((rows, 1), 9.0)
    e = base.expand(rows, cols)
    e.zero_() if zero else e.fill_(value)
    assert base.flatten().tolist() == [0.0 if zero else float(value)] * rows


@pytest.mark.rule(
    "03",
    "**`tril_` and `triu_` in 2-D and 3-D skip it too, silently and wrongly**: no error, no warning, and each row of the "
    "expand is one element of `base`, so zeroing its part above the diagonal zeroes the whole row "
    "(`tensor([[1.], [2.], [3.]]).expand(3, 3).tril_()` leaves `base` `[0, 0, 3]`, checked below); from 4 dims on "
    "it depends on the strides (`e[None, None].tril_()` above raises).",
)
@RULE_SETTINGS
@given(rows=st.integers(1, 5), cols=st.integers(1, 5), upper=st.booleans(), along=st.booleans())
def test_tril_and_triu_skip_the_overlap_check_and_corrupt(rows, cols, upper, along):
    base = torch.arange(1.0, rows + 1).reshape(rows, 1) if not along else torch.arange(1.0, cols + 1)
    e = base.expand(rows, cols)
    want = e.clone().triu_() if upper else e.clone().tril_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        e.triu_() if upper else e.tril_()  # never raises, though e has a stride-0 dim
    assert not caught
    assert torch.equal(e, base.expand(rows, cols))  # still one element per row (or column): the rows alias
    assert torch.equal(e, want) == (want == want[:1] if along else want == want[:, :1]).all().item()
    if not along and not upper:
        assert base.flatten().tolist() == [0.0 if i < cols - 1 else i + 1.0 for i in range(rows)]
    three = torch.arange(1.0, rows + 1).reshape(1, rows, 1)
    e3 = three.expand(2, rows, cols)
    e3.triu_() if upper else e3.tril_()  # 3 dims: written in place, still unchecked
    four = torch.arange(1.0, rows + 1).reshape(1, 1, rows, 1)
    e4 = four.expand(2, 2, rows, cols)  # 4 dims: the kernel writes a contiguous copy, then copy_ checks it back
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single"):
        e4.triu_() if upper else e4.tril_()
    assert four.flatten().tolist() == [i + 1.0 for i in range(rows)]  # refused before anything was written
    # but a 4-D expand whose batch strides fit the packed layout is written in place, unchecked, like 2-D
    square = torch.arange(1.0, rows * cols + 1).reshape(1, 1, rows, cols)
    square.expand(2, 1, rows, cols).triu_() if upper else square.expand(2, 1, rows, cols).tril_()


@pytest.mark.rule(
    "03",
    "`fill_diagonal_` skips it as well: `e[i, i]` is row `i`'s one element of `base`, so "
    "`base.expand(n, m).fill_diagonal_(v)` (with `base` of shape `(n, 1)`) sets the first `min(n, m)` elements of "
    "`base` to `v`, with no error and no warning",
)
@RULE_SETTINGS
@given(
    n=st.integers(0, 5),
    m=st.integers(0, 5),
    v=st.sampled_from((0.0, -2.5, 7.0)),
    dtype=st.sampled_from((torch.float32, torch.float64, torch.int64)),
)
def test_fill_diagonal_skips_the_overlap_check_and_writes_whole_rows(n, m, v, dtype):
    base = torch.arange(1, n + 1, dtype=dtype).reshape(n, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        base.expand(n, m).fill_diagonal_(v)  # never raises, though the expand has a stride-0 dim
    assert not caught
    want = [torch.tensor(v, dtype=dtype).item() if i < min(n, m) else i + 1 for i in range(n)]
    assert base.flatten().tolist() == want


@pytest.mark.rule(
    "03",
    "`index_put_` (what `e[mask] = v` and `e[[i, j]] = v` run), `masked_fill_` and `index_fill_` skip it too and "
    "warn (below); other index writes check (`index_add_`, `scatter_` above). Where two "
    "indices meet one location one value wins, which one is undefined (here the last, on CPU), with no error "
    "(`e[[0, 0], [1, 2]] = tensor([1., 2.])` leaves `base[0] == 2`; with `index_put_(..., accumulate=True)` the two "
    "add up to 3).",
)
@RULE_SETTINGS
@given(rows=st.integers(1, 4), write=st.sampled_from(sorted(ADVANCED)))
def test_advanced_index_writes_go_through_with_a_warning(rows, write):
    base = torch.zeros(rows, 1)
    e = base.expand(rows, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ADVANCED[write](e)  # never raises
    assert caught
    assert base[0].item() in {7.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0} and torch.equal(e, base.expand(rows, 4))
    if write.startswith("e[[0, 0]"):
        assert base[0].item() == 2.0
    summed = torch.zeros(rows, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pair = (torch.tensor([0, 0]), torch.tensor([1, 2]))
        summed.expand(rows, 4).index_put_(pair, torch.tensor([1.0, 2.0]), accumulate=True)
    assert summed[0].item() == 3.0  # accumulate=True: both values land, added
    for checked in (  # the other index-based writes check the region: refused, like add_
        lambda t: t.index_add_(1, torch.tensor([0]), torch.ones(rows, 1)),
        lambda t: t.scatter_(1, torch.zeros(rows, 1, dtype=torch.long), 1.0),
        lambda t: t.scatter_add_(1, torch.zeros(rows, 1, dtype=torch.long), torch.ones(rows, 1)),
        lambda t: t.index_copy_(1, torch.tensor([0]), torch.ones(rows, 1)),
        lambda t: t.put_(torch.tensor([0]), torch.tensor([1.0])),
        lambda t: t.masked_scatter_(torch.ones(rows, 4, dtype=torch.bool), torch.ones(rows * 4)),
        lambda t: t.index_reduce_(1, torch.tensor([0]), torch.ones(rows, 1), "prod"),
        lambda t: t.scatter_reduce_(1, torch.zeros(rows, 1, dtype=torch.long), torch.ones(rows, 1), "sum"),
    ):
        with pytest.raises(RuntimeError, match="single memory location"):
            checked(torch.zeros(rows, 1).expand(rows, 4))


@pytest.mark.rule(
    "03",
    "On CPU, a write through a view of an expanded tensor raises when its region has a stride-0 dim longer than 1 and its "
    "operator checks for internal overlap; scalar `fill_`/`zero_`, `tril_`/`triu_` in 2-D and 3-D and `fill_diagonal_` "
    "(wrong values) and section 5's advanced-index and mask writes do not; no other overlap inside the region is "
    "detected, and an input that "
    "partly overlaps it is refused where both are dense.",
)
@RULE_SETTINGS
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), index=st.sampled_from(["e", "e[0]", "e[0, 0]", "e[:, 0]"]))
def test_summary_of_writes_into_an_expanded_tensor(rows, cols, index):
    base = torch.zeros(rows, 1)
    e = base.expand(rows, cols)
    region = {"e": e, "e[0]": e[0], "e[0, 0]": e[0, 0], "e[:, 0]": e[:, 0]}[index]
    stretched = any(s == 0 and n > 1 for n, s in zip(region.shape, region.stride()))
    for write in (lambda r: r.add_(1), lambda r: r.copy_(torch.ones(r.shape)), lambda r: r.fill_(torch.tensor(2.0))):
        try:
            write(region)
            raised = False
        except RuntimeError:
            raised = True
        assert raised == stretched
    region.tril_() if region.dim() == 2 else None  # tril_ in 2-D: never refused either
    if stretched and region.dim() == 2:  # from 4 dims on it is
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            region[None, None].tril_()
    if region.dim() == 2:
        region.fill_diagonal_(5)  # never refused either
    region.fill_(3)  # a Python number: never refused
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e.masked_fill_(torch.ones(rows, cols, dtype=torch.bool), 2.0)  # mask writes: never refused
        e.index_fill_(1, torch.tensor([0]), 1.0)
        e[e >= 0] = 4.0
    assert base[0].item() == 4.0
    if rows > 2:  # an input that partly overlaps the written region, both dense: refused
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            base[1:].copy_(base[:-1])
    if cols > 2 and rows > 1:  # both strided (not dense; one row would be dense): let through
        m = torch.arange(float(rows * cols)).view(rows, cols)
        m[:, 1:].copy_(m[:, :-1])


@pytest.mark.rule("03", "Both backward passes do the same job: **sum** the incoming gradient over the copies.")
@RULE_SETTINGS
@given(batch=small, d=small, reps=st.integers(0, 3))
def test_expand_and_repeat_have_the_same_gradient(batch, d, reps):
    p = torch.randn(1, d, requires_grad=True)
    upstream = torch.randn(batch * reps, d)
    (g_expand,) = torch.autograd.grad(p.expand(batch * reps, d), p, upstream)
    (g_repeat,) = torch.autograd.grad(p.repeat(batch * reps, 1), p, upstream)
    torch.testing.assert_close(g_expand, g_repeat)
    torch.testing.assert_close(g_expand, upstream.sum(0, keepdim=True))
