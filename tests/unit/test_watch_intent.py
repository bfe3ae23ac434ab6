"""watch_broadcasts knows intent: a stretch against each other is meant when every stretched size-1 dim was
made so on purpose in the block (None, unsqueeze, view/reshape, keepdim=True) and an accident when one came
from a model's output, a literal shape or a reduction without keepdim. The course's own idioms give 0 reports;
each classic accident gives exactly 1, at the line that does it (marked ``# <- here`` below); torch's own
errors come first."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from viewlab.attention import causal_mask, padding_mask
from viewlab.errors import BroadcastStretchError
from viewlab.sentinels import watch_broadcasts

B, H, L, N, D = 3, 2, 5, 4, 6


# ---------------------------------------------------------------------- the course's idioms: 0 reports


def padding_mask_by_hand():
    scores, lengths = torch.randn(B, H, L, L), torch.tensor([5, 3, 1])
    pad = torch.arange(L)[None, :] < lengths[:, None]  # (1, L) against (B, 1)
    return scores.masked_fill(~pad[:, None, None, :], float("-inf"))


def causal_mask_by_hand():
    i = torch.arange(L)
    return i[:, None] >= i[None, :]


def pad_and_causal():
    mask = torch.arange(L) < torch.tensor([5, 3, 1])[:, None]  # (L,) against (B, 1)
    i = torch.arange(L)
    return mask[:, None, None, :] & (i[:, None] >= i[None, :])  # (B, 1, 1, L) & (L, L)


def pad_and_causal_helpers():
    keep = padding_mask(torch.tensor([5, 3, 1]), L) & causal_mask(L)
    return torch.randn(B, H, L, L).masked_fill(~keep, float("-inf")).softmax(-1)


def bias_add():
    x, w, b = torch.randn(N, D), torch.randn(D, 3), torch.zeros(3)
    return x @ w + b


def scale_by_a_column():
    x, col = torch.randn(3, D), torch.tensor([[1.0], [2.0], [3.0]])  # (C, 1): one-sided
    return x * col


def outer_products():
    a, b = torch.arange(3.0), torch.arange(4.0)
    return a.unsqueeze(1) * b.unsqueeze(0), a.view(-1, 1) - b, a.reshape(3, 1) + b[None], a[:, None].float() * b


def pairwise_differences():
    x = torch.randn(N, D)
    return (x[:, None, :] - x[None, :, :]).norm(dim=-1)


def keepdim_against_a_row():
    x = torch.randn(N, D)
    return x.sum(1, keepdim=True) * torch.arange(3.0)[None, :], x - x.mean(dim=1, keepdim=True)


def tensors_in_every_argument_position():
    x, c = torch.randn(N, D), torch.rand(N, D) > 0.5  # a tensor third: once compared with keepdim's True
    return torch.where(c, x, torch.zeros(N, D)), torch.addcmul(x, x, x), x.sum(1, True) * torch.ones(3)[None]


def a_narrowing_slice_keeps_the_dim():
    x = torch.randn(N, D)
    return x[:, :1] - x[0]  # (N, 1) against (D,): the slice keeps dim 1 on purpose


IDIOMS = [
    padding_mask_by_hand,
    causal_mask_by_hand,
    pad_and_causal,
    pad_and_causal_helpers,
    bias_add,
    scale_by_a_column,
    outer_products,
    pairwise_differences,
    keepdim_against_a_row,
    tensors_in_every_argument_position,
    a_narrowing_slice_keeps_the_dim,
]


# ---------------------------------------------------------------------- the classic accidents: 1 report each


def model_output_minus_target():
    pred, target = torch.nn.Linear(D, 1)(torch.randn(N, D)), torch.randn(N)
    return ((pred - target) ** 2).mean()  # <- here


def loss_with_n1_output_and_n_target():
    pred, target = torch.nn.Linear(D, 1)(torch.randn(N, D)), torch.randn(N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's own size warning
        return F.mse_loss(pred, target)  # <- here


def loss_module_with_n1_output():
    pred, target = torch.randn(N, D) @ torch.randn(D, 1), torch.randn(N)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.nn.L1Loss()(pred, target)  # <- here


def keepdim_against_no_keepdim():
    x = torch.randn(N, D)
    return x.sum(1, keepdim=True) - x.sum(1)  # <- here


def centering_a_column_without_keepdim():
    scores = torch.randn(N, 1)
    return scores - scores.mean(dim=1)  # <- here


def literal_shapes():
    return torch.zeros(N, 1) - torch.zeros(N)  # <- here


def literal_shapes_of_size_zero():
    return torch.zeros(0, 1) - torch.zeros(0)  # <- here


def model_output_of_an_empty_batch():
    pred = torch.nn.Linear(D, 1)(torch.randn(0, D))  # (0, 1)
    return pred - torch.zeros(0)  # <- here


def literal_column_against_a_row():
    col, row = torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([10.0, 20.0, 30.0, 40.0])
    return col + row  # <- here


def a_transposed_column_is_not_seen_as_made():
    row = torch.arange(4.0)[None, :]  # (1, 4) on purpose, then moved by t(): no longer known as made
    return row.t() * torch.arange(3.0)  # <- here


ACCIDENTS = [
    model_output_minus_target,
    loss_with_n1_output_and_n_target,
    loss_module_with_n1_output,
    keepdim_against_no_keepdim,
    centering_a_column_without_keepdim,
    literal_shapes,
    literal_shapes_of_size_zero,
    model_output_of_an_empty_batch,
    literal_column_against_a_row,
    a_transposed_column_is_not_seen_as_made,
]


def _marked_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if "# <- here" in text)


def _reports(fn, **options) -> list[str]:
    seen: list[str] = []
    with watch_broadcasts(action=seen.append, **options):
        fn()
    return seen


def test_the_courses_idioms_give_no_report_and_each_accident_exactly_one_at_its_line():
    false_alarms = {fn.__name__: r for fn in IDIOMS if (r := _reports(fn))}
    wrong = {}
    for fn in ACCIDENTS:
        reports = _reports(fn)
        where = f"test_watch_intent.py:{_marked_line(fn)}:"
        if len(reports) != 1 or where not in reports[0]:
            wrong[fn.__name__] = reports
    summary = (
        f"{len(IDIOMS)} idioms: {len(false_alarms)} reported; {len(ACCIDENTS)} accidents: "
        f"{len(ACCIDENTS) - len(wrong)} reported once at their line"
    )
    assert not false_alarms and not wrong, f"{summary}\nfalse alarms: {false_alarms}\nmissed or twice: {wrong}"
    print(summary)


def test_the_report_says_where_the_size_1_dim_came_from():
    (model,) = _reports(model_output_minus_target)
    assert "dim 1 of operand 0 has size 1 from torch.nn.functional.linear" in model
    (reduced,) = _reports(keepdim_against_no_keepdim)
    assert "operand 1 lost a dim in Tensor.sum (a reduction without keepdim=True)" in reduced
    (empty,) = _reports(literal_shapes_of_size_zero)
    assert "(0, 1) and (0,) to (0, 0)" in empty and "dim 0 (missing -> 0)" in empty


REDUCTIONS_OVER_DIM_1 = {
    "torch.nanmean": lambda x: torch.nanmean(x, 1),
    "Tensor.nanmedian": lambda x: x.nanmedian(1).values,
    "torch.count_nonzero": lambda x: torch.count_nonzero(x, 1),
    "Tensor.mode": lambda x: x.mode(1).values,
    "Tensor.kthvalue": lambda x: x.kthvalue(1, 1).values,
    "torch.quantile": lambda x: torch.quantile(x, 0.5, dim=1),
    "torch.var_mean": lambda x: torch.var_mean(x, 1)[1],
    "Tensor.aminmax": lambda x: x.aminmax(dim=1).min,
    "torch.linalg.vector_norm": lambda x: torch.linalg.vector_norm(x, dim=1),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS_OVER_DIM_1))
def test_a_reduction_beyond_sum_and_mean_is_named_when_its_lost_dim_is_stretched(name):
    x = torch.arange(12.0).view(3, 4)
    found: list[str] = []
    with watch_broadcasts(action=found.append):
        x[:, :1] - REDUCTIONS_OVER_DIM_1[name](x)  # (3, 1) against (3,): the reduced dim lined up with the rows
    assert len(found) == 1 and "lost a dim in" in found[0] and "(a reduction without keepdim=True)" in found[0], found


def test_nested_watchers_report_once_to_the_innermost():
    outer, inner = [], []
    with watch_broadcasts(action=outer.append), watch_broadcasts(action=inner.append):
        model_output_minus_target()
        loss_with_n1_output_and_n_target()
    assert (len(outer), len(inner)) == (0, 2), (outer, inner)
    with watch_broadcasts(action=outer.append):
        with watch_broadcasts(action=inner.append):
            pass
        literal_shapes()  # the inner one has left: the outer one reports again
    assert (len(outer), len(inner)) == (1, 2)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torchs_own_error_comes_first():
    """Regressions: an in-place op whose broadcast fails was reported (and with action='raise' the report
    replaced torch's error); a loss with shapes that do not broadcast failed inside the report."""
    a = torch.zeros(3, 1)
    with pytest.raises(RuntimeError) as plain:
        a.clone().add_(torch.zeros(3))
    with pytest.raises(RuntimeError) as watched, watch_broadcasts(action="raise"):
        a.add_(torch.zeros(3))  # (3, 1) += (3,) would need (3, 3)
    assert not isinstance(watched.value, BroadcastStretchError) and str(watched.value) == str(plain.value)
    with pytest.raises(RuntimeError) as plain:
        F.mse_loss(torch.zeros(3), torch.zeros(4))
    seen: list[str] = []
    with pytest.raises(RuntimeError) as watched, watch_broadcasts(action=seen.append):
        F.mse_loss(torch.zeros(3), torch.zeros(4))
    assert str(watched.value) == str(plain.value) and seen == []


sizes = st.lists(st.sampled_from([0, 1, 1, 2, 3]), min_size=1, max_size=3).map(tuple)


@settings(max_examples=200, deadline=None)
@given(a=sizes, b=sizes, made_a=st.booleans(), made_b=st.booleans())
def test_reported_iff_a_stretched_size_1_dim_was_not_made_on_purpose(a, b, made_a, made_b):
    """Each operand is made inside the watch, its size-1 dims on purpose (``view`` of a tensor without them)
    or by a literal shape; reported exactly when some operand made by a literal shape has a size-1 dim that
    is stretched, in a broadcast where neither operand has the result's shape, leading 1s aside (sizes 0 and 1 included)."""
    try:
        result = torch.broadcast_shapes(a, b)
    except RuntimeError:
        return

    def make(shape: tuple[int, ...], on_purpose: bool) -> torch.Tensor:
        if on_purpose:
            return torch.zeros([n for n in shape if n != 1]).view(shape)
        return torch.zeros(shape)

    def literal_stretch(shape: tuple[int, ...], on_purpose: bool) -> bool:
        own = result[len(result) - len(shape) :]
        return not on_purpose and any(n == 1 and r != 1 for n, r in zip(shape, own))

    seen: list[str] = []
    with watch_broadcasts(action=seen.append):
        make(a, made_a) + make(b, made_b)

    def read_as_it_is(shape):  # the result's shape once size-1 dims are added in front: no element read twice
        return (1,) * (len(result) - len(shape)) + shape == tuple(result)

    mutual = not read_as_it_is(a) and not read_as_it_is(b)
    expected = mutual and (literal_stretch(a, made_a) or literal_stretch(b, made_b))
    assert len(seen) == expected, f"{a} ({made_a}) + {b} ({made_b}) -> {result}: {seen}"


def test_action_raise_stops_at_the_accident_and_keeps_idioms_running():
    with watch_broadcasts(action="raise"):
        for idiom in IDIOMS:
            idiom()
    with pytest.raises(BroadcastStretchError, match=r"^watch_broadcasts\(\): Tensor.sub"):
        with watch_broadcasts(action="raise"):
            literal_shapes()
