"""viewlab.explain_broadcast / BroadcastError / draw_broadcast, checked against PyTorch and NumPy.

Hypothesis example counts (each property test sets max_examples explicitly; CI runs them derandomized):
shape parity 400, error parity 400, strides 200, gradients 150, in-place 150, fixes 300 -> 1,600 examples.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

import viewlab
from viewlab import BroadcastError, draw_broadcast, explain_broadcast, layout, shares_storage
from viewlab.broadcast import EQUAL, NEW_DIM, STRETCHED

# --------------------------------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------------------------------
SIZES = st.integers(0, 5)  # includes 0 and 1, the two sizes with special rules


@st.composite
def compatible_shapes(draw, max_ops: int = 4, max_rank: int = 6, sizes=SIZES):
    """2..max_ops shapes that broadcast: suffixes of one shape with some sizes replaced by 1."""
    full = draw(st.lists(sizes, max_size=max_rank))
    n = draw(st.integers(2, max_ops))
    shapes = []
    for _ in range(n):
        rank = draw(st.integers(0, len(full)))
        suffix = full[len(full) - rank :]
        shapes.append(tuple(draw(st.sampled_from((s, 1))) for s in suffix))
    return shapes


any_shapes = st.lists(st.lists(st.integers(0, 4), max_size=6).map(tuple), min_size=2, max_size=4)


def _torch_shape(shapes):
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return None


def _numpy_shape(shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------------
# the result shape: always what PyTorch and NumPy say
# --------------------------------------------------------------------------------------------------
@settings(max_examples=400)
@given(compatible_shapes())
def test_shape_equals_torch_and_numpy_for_compatible_shapes(shapes):
    e = explain_broadcast(*shapes)
    assert isinstance(e.shape, torch.Size)
    assert e.shape == torch.broadcast_shapes(*shapes)
    assert tuple(e.shape) == np.broadcast_shapes(*shapes)


@settings(max_examples=400)
@given(any_shapes)
def test_raises_exactly_when_torch_and_numpy_refuse(shapes):
    expected = _torch_shape(shapes)
    assert (expected is None) == (_numpy_shape(shapes) is None)
    if expected is None:
        with pytest.raises(BroadcastError):
            explain_broadcast(*shapes)
    else:
        assert explain_broadcast(*shapes).shape == expected


@settings(max_examples=200)
@given(compatible_shapes(max_ops=3, max_rank=4, sizes=st.integers(0, 3)))
def test_rules_padding_and_stride_zero_dims_match_a_real_expand(shapes):
    e = explain_broadcast(*[torch.zeros(s) for s in shapes])
    rank = len(e.shape)
    assert len(e.steps) == rank
    for info, shape in zip(e.operands, shapes):
        assert info.padded == (1,) * (rank - len(shape)) + shape
        for d, rule in enumerate(info.rules):
            if d < rank - len(shape):
                assert rule == NEW_DIM
            else:
                assert rule == (EQUAL if info.padded[d] == e.shape[d] else STRETCHED)
                if rule == STRETCHED:
                    assert info.padded[d] == 1
        expanded = torch.zeros(shape).expand(e.shape)
        # expanded_dims is computed from the rules; layout() reads the strides PyTorch chose.
        assert info.expanded_dims == layout(expanded).broadcast_dims
        assert info.expanded_stride == expanded.stride()
    for k, step in enumerate(e.steps, start=1):
        assert step.from_right == -k and step.result_dim == rank - k and step.result == e.shape[-k]
        for shape, size, own in zip(shapes, step.sizes, step.own_dims):
            assert (size, own) == ((shape[-k], len(shape) - k) if len(shape) >= k else (None, None))


@settings(max_examples=150)
@given(compatible_shapes(max_ops=3, max_rank=4, sizes=st.integers(1, 3)))
def test_gradient_of_each_operand_is_summed_over_its_sum_dims(shapes):
    torch.manual_seed(0)
    xs = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    e = explain_broadcast(*xs)
    out = xs[0]
    for x in xs[1:]:
        out = out * x
    g = torch.randn(e.shape, dtype=torch.float64)
    out.backward(g)
    for i, (x, info) in enumerate(zip(xs, e.operands)):
        others = torch.ones((), dtype=torch.float64)
        for j, y in enumerate(xs):
            if j != i:
                others = others * y.detach()
        local = (g * others).expand(e.shape)
        by_hand = (
            local.sum(dim=info.sum_dims, keepdim=True).reshape(x.shape) if info.sum_dims else local.reshape(x.shape)
        )
        assert torch.allclose(x.grad, by_hand)
        assert torch.allclose(x.grad, local.sum_to_size(x.shape))


@settings(max_examples=150)
@given(compatible_shapes(max_ops=2, max_rank=4, sizes=st.integers(0, 3)))
def test_in_place_works_exactly_for_the_in_place_targets(shapes):
    a, b = torch.zeros(shapes[0]), torch.ones(shapes[1])
    e = explain_broadcast(a, b)
    for name, target, other in (("a", a, b), ("b", b, a)):
        try:
            target.clone().add_(other)
            ok = True
        except RuntimeError as err:
            assert "doesn't match the broadcast shape" in str(err)
            ok = False
        assert ok == (name in e.in_place_targets)


def test_memory_copy_bytes_are_what_a_real_copy_allocates_and_broadcasting_allocates_nothing():
    col = torch.arange(3, dtype=torch.float64).view(3, 1)
    row = torch.arange(4, dtype=torch.int16)
    e = explain_broadcast(col, row)
    assert e.shape == (3, 4)
    for t, info in ((col, e["a"]), (row, e["b"])):
        view = t.expand(e.shape)
        assert shares_storage(view, t) and view.untyped_storage().nbytes() == t.untyped_storage().nbytes()
        assert info.broadcast_bytes == 0
        assert info.copy_bytes == view.contiguous().untyped_storage().nbytes() == 12 * t.element_size()
        assert info.own_bytes == t.numel() * t.element_size()
    reps = e["a"].copy_bytes
    assert col.repeat(1, 4).untyped_storage().nbytes() == reps == 96
    assert e.copy_bytes == 96 + 24
    same = explain_broadcast((2, 3), (2, 3))
    assert [o.copy_bytes for o in same.operands] == [0, 0] and same.copy_bytes == 0


def test_shape_operands_count_bytes_with_the_dtype_argument():
    e = explain_broadcast((1, 5), (4, 1), dtype=torch.bfloat16)
    assert e["a"].itemsize == 2 and e["a"].copy_bytes == 40 and not e["a"].is_tensor
    assert e["a"].expanded_stride == (0, 1) and e["b"].expanded_stride == (1, 0)


# --------------------------------------------------------------------------------------------------
# text and HTML
# --------------------------------------------------------------------------------------------------
def test_text_walks_through_the_steps():
    text = str(explain_broadcast((3, 1), (4, 1, 5), names=["w", "x"]))
    assert text.splitlines()[0] == "broadcast w (3, 1), x (4, 1, 5) -> (4, 3, 5)"
    assert "   w (3, 1)     [1]   3   1" in text
    assert "dim -1: w 1, x 5 -> 5   w stretched from 1" in text
    assert "dim -2: w 3, x 1 -> 3   x stretched from 1" in text
    assert "dim -3: w -, x 4 -> 4   w new leading dim" in text
    assert "3. result: (4, 3, 5)" in text
    assert (
        "w: expanded along result dims 0, 2; w.expand(4, 3, 5) has stride (0, 1, 0); "
        "a materialised copy would take 240 bytes (float32), broadcasting takes 0" in text
    )
    assert repr(explain_broadcast((3, 1), (4, 1, 5), names=["w", "x"])) == text
    step = explain_broadcast((3, 1), (4, 1, 5), names=["w", "x"]).steps[2]
    assert str(step) == "dim -3: w -, x 4 -> 4   w new leading dim" and step.summary == "w new leading dim"


def test_equal_shapes_and_scalars_read_sensibly():
    text = str(explain_broadcast((2,), (2,)))
    assert "dim -1: a 2, b 2 -> 2   equal" in text and "a: not expanded (nothing to copy)" in text
    scalar = explain_broadcast((), torch.tensor(1.0))
    assert scalar.shape == () and "every operand is a scalar" in str(scalar)


def test_html_table_shows_rules_in_words_not_only_colour():
    page = explain_broadcast((3, 1), (4,))._repr_html_()
    assert page.count("<table>") == 2
    assert "1 &rarr; 4" in page and "stretched from 1</small>" in page
    assert "[1] &rarr; 3" in page and "new leading dim</small>" in page
    assert "<b>3</b>" in page and "<b>4</b>" in page
    assert "bytes if materialised" in page
    assert "&lt;" in explain_broadcast((2,), (2,), names=["<x>", "y"])._repr_html_()  # names are escaped


def test_operand_lookup_by_name_and_position():
    e = explain_broadcast((2, 1), (3,), names=["col", "row"])
    assert e["row"] is e[1]
    with pytest.raises(KeyError, match=r"no operand named 'x'; the names are \['col', 'row'\]"):
        e["x"]


# --------------------------------------------------------------------------------------------------
# errors: incompatible shapes
# --------------------------------------------------------------------------------------------------
def test_error_names_dimension_operands_sizes_and_fix():
    with pytest.raises(BroadcastError) as info:
        explain_broadcast(torch.zeros(4, 3), torch.zeros(4), names=["x", "mean"])
    msg = str(info.value)
    assert msg.startswith("cannot broadcast x (4, 3), mean (4,).")
    assert "dimension -1 (counted from the right): x has size 3 at its dim 1 and mean has size 4 at its dim 0." in msg
    assert "mean.unsqueeze(1) -> shape (4, 1), broadcasts to (4, 3)" in msg
    assert "keepdim=True" in msg
    assert isinstance(info.value, ValueError)
    assert info.value.conflicts == ((-1, (("x", 1, 3), ("mean", 0, 4))),)
    assert [f.code for f in info.value.fixes] == ["mean.unsqueeze(1)"]


def test_error_lists_every_conflicting_dimension_and_three_operands():
    with pytest.raises(BroadcastError) as info:
        explain_broadcast((5, 3), (4, 3), (1, 2))
    msg = str(info.value)
    assert (
        "dimension -1 (counted from the right): a has size 3 at its dim 1, b has size 3 at its dim 1 "
        "and c has size 2 at its dim 1." in msg
    )
    assert (
        "dimension -2 (counted from the right): a has size 5 at its dim 0, b has size 4 at its dim 0 "
        "and c has size 1 at its dim 0." in msg
    )
    assert [c[0] for c in info.value.conflicts] == [-1, -2]


def test_transposed_operand_gets_a_transpose_fix():
    with pytest.raises(BroadcastError) as info:
        explain_broadcast((3, 4), (4, 3), names=["q", "k"])
    codes = [f.code for f in info.value.fixes]
    assert codes == ["k.mT", "q.mT"]
    assert "Pick the one whose dims mean the same thing" in str(info.value)


def test_error_without_fix_says_so():
    with pytest.raises(BroadcastError, match="Found no single unsqueeze or permute of one operand that") as info:
        explain_broadcast((2, 3), (5,))
    assert info.value.fixes == () and ".mT" not in str(info.value)


def test_a_transpose_that_broadcasts_to_a_bigger_shape_is_named_and_true():
    # (3, 4) vs (2, 1, 3): no fix keeps b's shape, yet a.mT broadcasts (to (2, 4, 3)); the message must say so.
    with pytest.raises(BroadcastError) as info:
        explain_broadcast((3, 4), (2, 1, 3))
    msg = str(info.value)
    assert info.value.fixes == () and "Found no single" in msg and "No single" not in msg
    assert "a.mT broadcasts, to (2, 4, 3)" in msg and "b.mT broadcasts, to (2, 3, 4)" in msg
    a, b = torch.zeros(3, 4), torch.zeros(2, 1, 3)
    assert (a.mT + b).shape == (2, 4, 3) and (a + b.mT).shape == (2, 3, 4)


def test_ambiguous_fixes_are_all_offered_fewest_new_dims_first():
    with pytest.raises(BroadcastError) as info:
        explain_broadcast((3, 3, 4), (3,), names=["x", "v"])
    fixes = info.value.fixes
    assert [f.code for f in fixes] == ["v.unsqueeze(1)", "v.unsqueeze(1).unsqueeze(2)"]
    assert [f.new_shape for f in fixes] == [(3, 1), (3, 1, 1)]


@settings(max_examples=300)
@given(st.lists(st.integers(2, 6), min_size=2, max_size=5), st.data())
def test_a_dropped_dim_is_always_found_and_every_fix_really_works(target, data):
    target = tuple(target)
    rank = len(target)
    k = data.draw(st.integers(1, rank - 1), label="operand rank")
    positions = tuple(sorted(data.draw(st.sets(st.integers(0, rank - 1), min_size=k, max_size=k))))
    shape = tuple(target[p] for p in positions)
    assume(_torch_shape([shape, target]) is None)  # only shapes that really conflict
    with pytest.raises(BroadcastError) as info:
        explain_broadcast(target, shape, names=["t", "v"])
    fixes = info.value.fixes
    assert fixes, str(info.value)
    intended = tuple(target[p] if p in positions else 1 for p in range(positions[0], rank))
    assert intended in [f.new_shape for f in fixes if f.operand == "v"]
    for f in fixes:
        env = {"t": torch.empty(target, device="meta"), "v": torch.empty(shape, device="meta")}
        fixed = eval(f.code, {}, env)  # noqa: S307 - the code is the suggestion under test
        assert tuple(fixed.shape) == f.new_shape
        assert torch.broadcast_shapes(fixed.shape, env["v" if f.operand == "t" else "t"].shape) == f.result_shape
        assert f.code in str(info.value) or len(fixes) > 3


# --------------------------------------------------------------------------------------------------
# errors: bad input
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "pattern"),
    [
        (((2, 3),), {}, TypeError, r"needs at least two operands \(tensors or shapes\), got 1"),
        ((), {}, TypeError, "got 0"),
        (((2,), "2,3"), {}, TypeError, r"operand 1 \(b\) is a str; pass a torch.Tensor, a torch.Size, or a tuple"),
        (((2,), 3), {}, TypeError, r"A Python number broadcasts like a 0-dim tensor: pass \(\) or torch.tensor"),
        (((2,), np.zeros(2)), {}, TypeError, r"Pass its shape \(b.shape\) or the tensor torch.from_numpy\(b\)"),
        (((2,), [[1, 2]]), {}, TypeError, r"nested sequence, which looks like data, not a shape"),
        (((2,), (2.0,)), {}, TypeError, r"size at index 0 is 2.0 \(float\); sizes must be ints"),
        (((2,), (True,)), {}, TypeError, r"size at index 0 is True \(bool\)"),
        (((2,), (2, "3")), {}, TypeError, r"operand 1 \(b\): size at index 1 is '3' \(str\); sizes must be ints"),
        (((2,), (2,)), {"names": ["x", ""]}, TypeError, "names must be a list of non-empty strings"),
        (((2,), (3, -1)), {}, ValueError, r"operand 1 \(b\): size at index 1 is -1; sizes must be >= 0"),
        (((2,), (2,)), {"names": ["x"]}, ValueError, "got 2 operands but 1 names"),
        (((2,), (2,)), {"names": ["x", "x"]}, ValueError, "names must be different"),
        (((2,), (2,)), {"names": "xy"}, TypeError, "names must be a list of non-empty strings"),
        (((2,), (2,)), {"names": ["x", 1]}, TypeError, "names must be a list of non-empty strings"),
        (((2,), (2,)), {"dtype": "float32"}, TypeError, "dtype must be a torch.dtype"),
    ],
)
def test_bad_input_gets_a_clear_error(args, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        explain_broadcast(*args, **kwargs)


def test_tensors_keep_their_own_strides_and_autograd_is_untouched():
    leaf = torch.zeros(2, 3, requires_grad=True)
    x = leaf.t()  # (3, 2), stride (1, 3)
    e = explain_broadcast(x, (4, 1, 1))
    assert e["a"].expanded_stride == (0, 1, 3) and e["a"].expanded_dims == (0,)
    assert e["a"].is_tensor and e["a"].dtype == torch.float32
    assert leaf.grad is None and x.grad_fn is not None


def test_sparse_and_numpy_int_sizes():
    with pytest.raises(ValueError, match="dense \\(strided\\) tensors"):
        explain_broadcast(torch.eye(2).to_sparse(), (2,))
    e = explain_broadcast((np.int64(2), torch.tensor(3)), torch.Size([3]))
    assert e.shape == (2, 3)


def test_public_names():
    assert {"explain_broadcast", "BroadcastError", "BroadcastExplanation", "draw_broadcast"} <= set(viewlab.__all__)
    assert issubclass(viewlab.BroadcastError, ValueError)


# --------------------------------------------------------------------------------------------------
# draw_broadcast
# --------------------------------------------------------------------------------------------------
def _texts(ax) -> list[str]:
    """The texts inside the grid's cells (not the indices and dim names around it)."""
    right, top = ax.get_xlim()[1], ax.get_ylim()[1]
    return [t.get_text() for t in ax.texts if 0 < t.get_position()[0] < right and 0 < t.get_position()[1] < top]


def _hatched(ax) -> int:
    return sum(1 for p in ax.patches if p.get_hatch())


def test_figure_shows_stored_cells_virtual_copies_and_result():
    col = torch.tensor([[1], [2], [3]])
    row = torch.tensor([10, 20, 30, 40])
    fig = draw_broadcast(col, row, names=["col", "row"])
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    a, b, r = fig.axes
    assert _hatched(a) == 9 and _hatched(b) == 8 and _hatched(r) == 0  # 12 cells minus stored ones
    assert _texts(a).count("2") == 4  # value 2 stored once, shown in its 3 virtual copies too
    assert _texts(r) == [str(int(v)) for v in (col + row).reshape(-1)]
    assert "stride after expand (1, 0)" in a.get_title() and "3 stored cells + 9 virtual-copy cells" in a.get_title()
    assert r.get_title().startswith("col + row: shape (3, 4)")
    assert any("hatched = virtual copy" in t.get_text() for t in fig.texts)


def test_figure_handles_scalars_vectors_and_other_ops():
    fig = draw_broadcast(torch.tensor(5), torch.arange(4), op="*")
    a, b, r = fig.axes
    assert _hatched(a) == 3 and _hatched(b) == 0
    assert _texts(r) == ["0", "5", "10", "15"]
    same = viewlab.show_figure(draw_broadcast(torch.ones(2, 1), torch.ones(2)), alt="x").data
    assert same == viewlab.show_figure(draw_broadcast(torch.ones(2, 1), torch.ones(2)), alt="x").data


def test_figure_refuses_what_it_cannot_draw_readably():
    with pytest.raises(ValueError, match=r"rank 0, 1 or 2; these operands broadcast to \(2, 2, 2\)"):
        draw_broadcast(torch.zeros(2, 1, 2), torch.zeros(2, 1))
    with pytest.raises(ValueError, match=r"shape \(10, 10\) = 100 cells"):
        draw_broadcast(torch.zeros(10, 1), torch.zeros(10))
    with pytest.raises(ValueError, match="shape \\(0,\\) = 0 cells"):
        draw_broadcast(torch.zeros(0), torch.zeros(1))
    with pytest.raises(TypeError, match="operand 1 must be a torch.Tensor, got tuple"):
        draw_broadcast(torch.zeros(2), (2,))
    with pytest.raises(ValueError, match=r"draw_broadcast\(\): `op` must be one of"):
        draw_broadcast(torch.zeros(2), torch.zeros(2), op="@")
    with pytest.raises(ValueError, match="meta tensor"):
        draw_broadcast(torch.zeros(2, device="meta"), torch.zeros(2))
    with pytest.raises(BroadcastError, match="dimension -1"):
        draw_broadcast(torch.zeros(2), torch.zeros(3))


def test_draw_broadcast_errors_name_draw_broadcast_not_its_helper_regression():
    from viewlab import draw_broadcast

    with pytest.raises(ValueError, match=r"^draw_broadcast\(\): got 2 operands but 1 names") as err:
        draw_broadcast(torch.zeros(2), torch.zeros(2), names=["a"])
    assert "explain_broadcast" not in str(err.value)
    with pytest.raises(TypeError, match=r"^draw_broadcast\(\): needs at least two operands"):
        draw_broadcast(torch.zeros(2))
    with pytest.raises(TypeError, match=r"^draw_broadcast\(\): `op` must be a str; got list"):
        draw_broadcast(torch.zeros(2), torch.zeros(2), op=["+"])  # was: unhashable type: 'list'
    with pytest.raises(TypeError, match=r"^draw_broadcast\(\): op='-' is not defined for bool"):
        draw_broadcast(torch.zeros(2, dtype=torch.bool), torch.zeros(2), op="-")
    # the same mistakes, made with explain_broadcast itself, name explain_broadcast
    with pytest.raises(ValueError, match=r"^explain_broadcast\(\): got 2 operands but 1 names"):
        explain_broadcast(torch.zeros(2), torch.zeros(2), names=["a"])


def test_explanation_lookup_by_bad_key_is_explained():
    e = explain_broadcast((2, 1), (3,))
    with pytest.raises(TypeError, match="position \\(int\\) or name \\(str\\)"):
        e[[0]]
    with pytest.raises(IndexError, match="there are 2 operands"):
        e[2]


def _inches(fig, artist):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    box = artist.get_window_extent(FigureCanvasAgg(fig).get_renderer())
    return box.x0 / fig.dpi, box.y0 / fig.dpi, box.x1 / fig.dpi, box.y1 / fig.dpi


def test_figure_names_the_result_dims_on_the_grids():
    keys, lengths = torch.arange(5)[None, :], torch.tensor([5, 3, 1])[:, None]
    fig = draw_broadcast(keys, lengths, names=["key position j", "length[b]"], op="<", dims=["sequence b", "key j"])
    result = [t.get_text() for t in fig.axes[-1].texts]
    assert {"sequence b", "key j", "0", "4"} <= set(result)  # rows and columns named on the mask itself
    assert [t.get_text() for t in fig.axes[0].texts].count("sequence b") == 1
    default = [t.get_text() for ax in draw_broadcast(torch.ones(2, 1), torch.ones(3)).axes for t in ax.texts]
    assert "dim 0" in default and "dim 1" in default
    with pytest.raises(
        TypeError, match=r"draw_broadcast\(\): `dims` must be a list of 2 str, one name per dim of the result"
    ):
        draw_broadcast(keys, lengths, dims=["key j"])


def test_figure_counts_cells_not_copies_of_rows():
    """A (1, 5) row broadcast to (3, 5): 5 stored cells and 10 cells that read them again (it said "10 virtual
    copies", which reads as ten copies of the row)."""
    fig = draw_broadcast(torch.arange(5)[None, :], torch.tensor([5, 3, 1])[:, None], op="<")
    assert fig.axes[0].get_title().endswith("5 stored cells + 10 virtual-copy cells")
    assert fig.axes[1].get_title().endswith("3 stored cells + 12 virtual-copy cells")
    assert "virtual copies" not in fig.axes[0].get_title()


@pytest.mark.parametrize("shapes", [((3, 1), (4,)), ((1, 5), (3, 1)), ((), (4,)), ((5, 1), (1, 5))])
def test_figure_has_no_blank_band_and_no_clipped_text(shapes):
    fig = draw_broadcast(*(torch.ones(s) for s in shapes))
    width, height = fig.get_size_inches()
    for text in [t for ax in fig.axes for t in [*ax.texts, ax.title]] + list(fig.texts):
        x0, y0, x1, y1 = _inches(fig, text)
        assert x0 >= 0 and y0 >= 0 and x1 <= width and y1 <= height, text.get_text()
    caption_top = _inches(fig, fig.texts[0])[3]
    lowest = min(_inches(fig, t)[1] for ax in fig.axes for t in ax.texts)  # the lowest label above the caption
    assert 0 < lowest - caption_top < 0.3, (lowest, caption_top)  # no band between the grids and the caption
    assert height - (_inches(fig, fig.axes[0].title)[3] - _inches(fig, fig.texts[0])[1]) < 0.3
