"""The source articles' helpers, rebuilt (viewlab.course.article_helpers), against what PyTorch actually does.

The claims registry (viewlab.course.claims) rests on these facts; here they are checked on many generated shape pairs.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import viewlab.course.article_helpers as sh
from viewlab import measure, shares_storage

SHAPE = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


def _real_expand_works(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        torch.zeros(a).expand(b)
    except RuntimeError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(SHAPE, SHAPE)
def test_corrected_checker_agrees_with_pytorch(a, b):
    truth = sh.torch_can_expand(a, b)
    assert truth == _real_expand_works(a, b), "the meta-device ground truth must match a real CPU tensor"
    assert sh.can_expand(a, b) == truth
    assert (sh.expand_problem(a, b) is None) == truth


@settings(max_examples=400, deadline=None)
@given(SHAPE, SHAPE)
def test_article_checker_is_wrong_exactly_when_a_has_more_dims(a, b):
    article, truth = sh.article_check_expandable(a, b), sh.torch_can_expand(a, b)
    if len(a) <= len(b):
        assert article == truth
    elif article != truth:
        assert article and not truth  # the only failure mode: a false "yes"


def test_article_checker_counterexamples_exhaustively():
    shapes = [s for n in range(4) for s in itertools.product(range(4), repeat=n)]
    pairs = list(itertools.product(shapes, shapes))
    wrong = [(a, b) for a, b in pairs if sh.article_check_expandable(a, b) != sh.torch_can_expand(a, b)]
    assert len(pairs) == 85 * 85
    assert wrong and all(len(a) > len(b) for a, b in wrong)
    assert ((1, 3), (3,)) in wrong and ((2, 3), (3,)) in wrong
    assert not [(a, b) for a, b in pairs if sh.can_expand(a, b) != sh.torch_can_expand(a, b)]


@settings(max_examples=400, deadline=None)
@given(SHAPE, SHAPE)
def test_article_broadcast_rules_match_torch(a, b):
    try:
        expected = tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        expected = None
    assert sh.article_broadcast_shape(a, b) == expected


def test_safe_expand_as_names_shapes_and_dimension():
    with pytest.raises(
        ValueError, match=r"shape \(1, 3\) to b's shape \(3,\): a has 2 dimensions but the target only 1"
    ):
        sh.safe_expand_as(torch.zeros(1, 3), torch.zeros(3))
    with pytest.raises(ValueError, match="dimension 1 of a has size 2 but the target has 4"):
        sh.safe_expand_as(torch.zeros(3, 2), torch.zeros(3, 4))
    out = sh.safe_expand_as(torch.zeros(3, 1), torch.zeros(2, 3, 4))
    assert out.shape == (2, 3, 4) and out.stride() == (0, 1, 0)
    with pytest.raises(TypeError, match="expects two tensors"):
        sh.safe_expand_as(torch.zeros(3, 1), (3, 4))


def test_bad_shapes_are_rejected_with_reasons():
    with pytest.raises(TypeError, match="must be a tensor or a shape"):
        sh.can_expand("3x1", (3, 4))
    with pytest.raises(ValueError, match="negative sizes"):
        sh.can_expand((3, -1), (3, 4))
    with pytest.raises(TypeError, match="must be a tensor or a shape"):
        sh.article_broadcast_shape((True, 2), (2,))


# ---- facts the claims' verdicts rest on, checked against this PyTorch ----------------------
def test_expand_with_minus_one_cannot_grow_a_non_singleton_dim():
    with pytest.raises(RuntimeError, match="must match the existing size"):
        torch.ones(1, 5).expand(-1, 10)
    assert torch.ones(1, 5).expand(2, -1).shape == (2, 5)


def test_repeat_of_a_1024_row_allocates_4_mib_and_expand_nothing():
    base = torch.randn(1, 1024)
    with measure(device="cpu") as m_expand:
        e = base.expand(1024, 1024)
    with measure(device="cpu") as m_repeat:
        r = base.repeat(1024, 1)
    assert m_expand.allocated_bytes == 0 and shares_storage(e, base)
    assert m_repeat.allocated_bytes == 4 * 1024 * 1024 == r.numel() * r.element_size()


def test_expand_works_on_non_contiguous_input_and_detach_shares_memory():
    x = torch.arange(6.0).view(1, 6)[:, ::2]
    assert not x.is_contiguous()
    assert shares_storage(x.expand(4, 3), x)
    assert shares_storage(x.detach(), x)


def test_mask_of_shape_b1s_cannot_expand_as_bsv():
    with pytest.raises(RuntimeError, match="must match the existing size"):
        torch.ones(2, 1, 3).expand_as(torch.zeros(2, 3, 5))


def test_single_element_write_through_expand_reaches_the_original_but_bulk_writes_raise():
    column = torch.tensor([[1.0], [2.0], [3.0]])
    wide = column.expand_as(torch.zeros(3, 5))  # each row: one stored element seen five times
    wide[2, 4] = -7.0  # one element of the view: written into the column itself
    assert column.flatten().tolist() == [1.0, 2.0, -7.0] and wide[2].tolist() == [-7.0] * 5
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        wide.mul_(2)
