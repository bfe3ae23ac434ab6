import warnings

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import viewlab
from tests.course.learner_inputs import numpy_arrays
from viewlab import OP_CASES, layout, shares_storage, storage_indices


def test_contiguous_layout_numbers():
    x = torch.zeros(2, 3, 4, dtype=torch.float64)
    info = layout(x)
    assert info.shape == (2, 3, 4)
    assert info.stride == (12, 4, 1)
    assert info.stride_bytes == (96, 32, 8)
    assert info.itemsize == 8
    assert info.logical_bytes == info.span_bytes == info.storage_bytes == 24 * 8
    assert info.is_contiguous and not info.is_view and not info.overlaps
    assert info.broadcast_dims == ()


def test_expand_spans_one_row_but_is_logically_larger():
    base = torch.zeros(1, 512)
    info = layout(base.expand(8, 512))
    assert info.stride == (0, 1)
    assert info.broadcast_dims == (0,)
    assert info.logical_bytes == 8 * 512 * 4
    assert info.span_bytes == info.storage_bytes == 512 * 4
    assert info.overlaps and info.is_view and not info.is_contiguous


def test_slice_has_offset_and_spans_less_than_storage():
    x = torch.arange(10, dtype=torch.int16)
    info = layout(x[3:7:2])
    assert info.storage_offset == 3
    assert info.stride == (2,)
    assert info.span_bytes == 3 * 2  # elements 3..5 inclusive
    assert info.storage_bytes == 20


def test_empty_tensor_spans_nothing():
    assert layout(torch.zeros(0, 3)).span_bytes == 0


def test_meta_tensor_layout_needs_no_data():
    info = layout(torch.empty(4, 5, device="meta").t())
    assert info.stride == (1, 5)
    assert info.device.type == "meta"


def test_text_and_html_render_every_field():
    info = layout(torch.zeros(1, 3).expand(2, 3))
    text, page = str(info), info._repr_html_()
    for needle in ("(2, 3)", "(0, 1)", "broadcast dims", "24", "12"):
        assert needle in text and needle in page
    assert page.startswith("<table>")


def _reference_values(t: torch.Tensor) -> torch.Tensor:
    """Read each element through the stride formula from the raw storage, same dtype."""
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return flat[storage_indices(t).reshape(-1)].reshape(t.shape)


@pytest.mark.parametrize(
    "case", [c for c in OP_CASES if c.documented == "view" and c.op not in ("indices", "values")], ids=lambda c: c.op
)
def test_storage_indices_reproduce_every_official_view_op(case):
    """For each view op, reading storage at storage_indices(v) gives exactly the view's values."""
    x = case.make_input()
    result = case.apply(x)
    for view in result if isinstance(result, (tuple, list)) else [result]:
        assert viewlab.shares_storage(view, x)
        # .H/.mH/.adjoint on complex set a lazy "conjugate" bit: memory holds the unconjugated values.
        expected = view.conj() if view.is_conj() else view
        torch.testing.assert_close(_reference_values(view), expected, rtol=0, atol=0)


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(shape=shapes, data=st.data())
def test_storage_indices_match_numpy_strides(shape, data):
    """Permute and slice randomly; the stride formula must agree with NumPy's byte strides."""
    x = torch.arange(int(np.prod(shape)), dtype=torch.int32).reshape(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    steps = [data.draw(st.integers(1, 3)) for _ in shape]
    v = x.permute(*perm)[tuple(slice(None, None, s) for s in steps)]
    info = layout(v)
    assert info.stride_bytes == v.numpy().strides
    assert torch.equal(storage_indices(v), v.to(torch.int64))  # value == storage index for arange
    assert info.span_bytes <= info.storage_bytes


@pytest.mark.parametrize(
    "bad, error, words",
    [
        ([1, 2, 3], TypeError, "torch.tensor"),
        (np.zeros(3), TypeError, "torch.from_numpy"),
        ("tensor", TypeError, "got str"),
        (torch.zeros(2, 2).to_sparse(), ValueError, "to_dense"),
    ],
)
def test_bad_input_says_what_to_pass(bad, error, words):
    with pytest.raises(error, match=words):
        layout(bad)


def _reads_an_element_twice(t: torch.Tensor) -> bool:
    """The definition of overlap, checked by brute force: some storage index appears twice."""
    idx = storage_indices(t).reshape(-1)
    return idx.unique().numel() < idx.numel()


def test_overlaps_regression_as_strided_reading_element_8_twice():
    # sizes (3, 2), strides (3, 6), offset 2: [0, 1] and [2, 0] both read storage element 8, although
    # the view spans 15 elements for 6 values (the old byte-count guess said "no overlap").
    t = torch.arange(20.0).as_strided((3, 2), (3, 6), 2)
    assert storage_indices(t)[0, 1] == storage_indices(t)[2, 0] == 8
    assert layout(t).span_bytes > layout(t).logical_bytes
    assert layout(t).overlaps
    # one stride step further apart and nothing collides
    assert not layout(torch.arange(20.0).as_strided((3, 2), (3, 7), 2)).overlaps


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9)), min_size=0, max_size=5),
    st.integers(0, 3),
)
def test_overlaps_agrees_with_brute_force_enumeration(dims, offset):
    shape = tuple(n for n, _ in dims)
    stride = tuple(s for _, s in dims)
    need = offset + 1 + sum((n - 1) * s for n, s in dims) if all(shape) else 1
    t = torch.zeros(need).as_strided(shape, stride, offset)
    assert layout(t).overlaps == _reads_an_element_twice(t)


@pytest.mark.parametrize("cutoff", [0, 2**24])
def test_overlap_methods_agree_bitset_and_enumeration(cutoff, monkeypatch):
    import sys

    monkeypatch.setattr(sys.modules["viewlab.layout"], "_MAX_BITSET_SPAN", cutoff)
    cases = {
        ((2, 2, 2), (3, 4, 5)): False,
        ((2, 2, 2), (1, 2, 3)): True,
        ((3, 3, 2), (2, 3, 7)): True,
        ((2, 3, 2), (4, 5, 7)): False,
    }
    for (shape, stride), expected in cases.items():
        t = torch.zeros(64).as_strided(shape, stride)
        assert layout(t).overlaps is expected == _reads_an_element_twice(t)


def test_storage_indices_cost_numel_not_storage():
    big = torch.empty(10**8, device="meta")  # 400 MB of storage, not allocated
    assert storage_indices(big[5:8]).tolist() == [5, 6, 7]


# shares_storage ---------------------------------------------------------------------------------------
def test_views_share_and_copies_do_not():
    x = torch.arange(12.0).view(3, 4)
    assert shares_storage(x, x[1:, 2:])
    assert shares_storage(x[0], x[2])  # disjoint elements, same storage
    assert shares_storage(x.t(), x.view(12))
    assert not shares_storage(x, x.clone())
    assert not shares_storage(x, x.contiguous().t().contiguous())


def test_empty_storages_compare_by_identity():
    a = torch.empty(0)
    assert shares_storage(a, a.view(0, 3))
    assert not shares_storage(a, torch.empty(0))


def test_numpy_round_trips_share_memory():
    x = torch.arange(6.0)
    assert shares_storage(x, x.numpy())
    assert shares_storage(x[3:], x.numpy())
    arr = np.arange(6.0)
    assert shares_storage(torch.from_numpy(arr), arr[::2])
    assert not shares_storage(torch.tensor(arr), arr)  # torch.tensor always copies


@settings(max_examples=150, deadline=None)
@given(arr=numpy_arrays(dims=(1, 3), side=(1, 4)), picks=st.tuples(st.integers(0, 3), st.integers(0, 3)))
def test_blocks_not_elements_and_from_numpy_makes_a_storage_per_call(arr, picks):
    # Rows of one buffer: views of one array or of one tensor share its block; each from_numpy row is a
    # storage of its own spanning that row's bytes, so two of them share exactly when their bytes overlap.
    assume(arr.size > 0)
    i, j = (slice(p % arr.shape[0], p % arr.shape[0] + 1) for p in picks)  # slices: a 1-D row stays an array
    assert shares_storage(arr[i], arr[j])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a read-only array is shared with a warning
            whole, rows = torch.from_numpy(arr), (torch.from_numpy(arr[i]), torch.from_numpy(arr[j]))
    except (ValueError, TypeError, RuntimeError):  # negative strides, foreign byte order: from_numpy refuses
        return
    assert rows[0].untyped_storage().data_ptr() == rows[0].data_ptr()  # the row's own storage starts at it
    assert shares_storage(whole[i], whole[j]) and shares_storage(rows[0], whole)
    assert shares_storage(*rows) == np.may_share_memory(arr[i], arr[j])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to hold a second copy")
def test_different_devices_never_share():
    x = torch.arange(4.0)
    y = x.cuda()
    assert not shares_storage(x, y)
    assert shares_storage(y, y[1:])


def test_meta_tensors_are_rejected_with_a_reason():
    with pytest.raises(ValueError, match="meta tensor"):
        shares_storage(torch.zeros(2, device="meta"), torch.zeros(2))


def test_non_tensor_is_rejected_with_what_to_pass():
    with pytest.raises(TypeError, match=r"^shares_storage\(\): expects a torch.Tensor for `b`"):  # was: viewlab()
        shares_storage(torch.zeros(2), [0.0, 0.0])
