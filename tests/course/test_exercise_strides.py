"""The two exercises that build a layout from strides (03-windows-by-strides, 07-expand-as-by-strides): the
typical wrong answers fail with a message that names what is wrong, and inputs the exercise refuses must be
refused (``Exercise.raises``), in the in-kernel check as in plain ``check``.
"""

from __future__ import annotations

import pytest
import torch

from viewlab.course import exercises as ex
from viewlab.course.exercises import FAILED, check

WINDOWS = "03-windows-by-strides"
EXPAND = "07-expand-as-by-strides"


def _failed(exercise_id, fn):
    r = ex.check_exercise(exercise_id, fn)
    assert r.status == FAILED, str(r)
    return r


def _n(x, size, step):
    return (x.shape[0] - size) // step + 1


def test_windows_copied_by_stacking_slices_break_must_view():
    r = _failed(
        WINDOWS, lambda x, size, step: torch.stack([x[i : i + size] for i in range(0, _n(x, size, step) * step, step)])
    )
    assert r.reason.startswith("breaks rule `must_view`: the result shares no memory"), r.reason


def test_windows_by_unfold_break_forbid_unfold_and_name_the_operator():
    r = _failed(WINDOWS, lambda x, size, step: x.unfold(0, size, step))
    assert r.reason.startswith("breaks rule `forbid unfold`: your function ran aten.unfold.default"), r.reason
    assert "as_strided" in r.reason


def test_windows_that_ignore_the_storage_offset_fail_on_an_input_with_one():
    r = _failed(
        WINDOWS, lambda x, size, step: x.as_strided((_n(x, size, step), size), (step * x.stride(0), x.stride(0)), 0)
    )
    assert "values differ" in r.reason
    assert "stride (1,), offset 1" in str(r).split("expected:")[0], str(r)  # the input shows the offset alone


def test_windows_that_ignore_the_stride_fail_on_an_input_with_one():
    r = _failed(WINDOWS, lambda x, size, step: x.as_strided((_n(x, size, step), size), (step, 1)))
    assert "values differ" in r.reason
    assert "stride (2,), offset 0" in str(r).split("expected:")[0], str(r)  # the input shows the stride alone


def test_windows_over_a_copy_of_x_break_must_view_even_with_the_right_strides():
    def windows(x, size, step):
        y = x.contiguous()
        return y.as_strided((_n(y, size, step), size), (step, 1))

    assert _failed(WINDOWS, windows).reason.startswith("breaks rule `must_view`")


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, other: x.expand_as(other),
        lambda x, other: x.expand(other.shape),
        lambda x, other: torch.broadcast_to(x, other.shape),
    ],
    ids=["expand_as", "expand", "broadcast_to"],
)
def test_expand_and_its_aliases_break_forbid_expand(fn):
    r = _failed(EXPAND, fn)
    assert r.reason.startswith("breaks rule `forbid expand`: your function ran aten.expand.default"), r.reason


def _as_strided_answer(error):
    def expand_as_by_strides(x, other):
        pad = other.dim() - x.dim()
        if pad < 0:
            raise error("x has more dims than other")
        sizes, strides = (1,) * pad + tuple(x.shape), (0,) * pad + tuple(x.stride())
        if any(n not in (1, w) for n, w in zip(sizes, other.shape)):
            raise error(f"{tuple(x.shape)} does not expand to {tuple(other.shape)}")
        return x.as_strided(other.shape, [s if n == w else 0 for n, s, w in zip(sizes, strides, other.shape)])

    return expand_as_by_strides


class ShapeError(ValueError):
    """A learner's own error type, derived from one the exercise allows."""


@pytest.mark.parametrize("error", [RuntimeError, ValueError, ShapeError])
def test_refusing_with_either_error_or_a_subclass_passes(error):
    assert ex.check_exercise(EXPAND, _as_strided_answer(error)).passed


def test_refusing_with_another_error_fails_and_says_which_to_raise():
    r = _failed(EXPAND, _as_strided_answer(TypeError))
    assert r.reason.startswith(
        "on these inputs your function must raise RuntimeError or ValueError, as the reference"
    ), r.reason
    assert "it raised TypeError" in r.reason
    assert "expected: raises RuntimeError or ValueError (the reference: The expanded size" in str(r)


def test_an_answer_that_never_refuses_fails_on_a_shape_that_does_not_expand():
    def stretch_anything(x, other):
        pad = other.dim() - x.dim()
        return x.as_strided(
            other.shape, [0] * pad + [s if n == w else 0 for n, s, w in zip(x.shape, x.stride(), other.shape[pad:])]
        )

    r = _failed(EXPAND, stretch_anything)
    assert r.reason.startswith("on these inputs your function must refuse (raise RuntimeError or ValueError)"), r.reason
    assert "it returned tensor shape (2, 4)" in r.reason


def test_check_refuses_what_is_not_a_tuple_of_exception_types():
    with pytest.raises(TypeError, match=r"check\(\): `raises` must be a tuple of exception types"):
        check(lambda x: x, lambda x: x, inputs=[(1,)], raises=RuntimeError)
    # and in plain check, an input the reference refuses must be refused
    r = check(lambda n: n, lambda n: [][n], inputs=[(0,)], raises=(IndexError,))
    assert r.status == FAILED and "must refuse (raise IndexError)" in r.reason
    assert check(lambda n: [1][n + 1], lambda n: [][n], inputs=[(0,)], raises=(IndexError,)).passed


# --- 01-independent-flat copies once (review 3.5b) ----------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [lambda x: x.reshape(-1).clone(), lambda x: x.flatten().clone(), lambda x: x.clone().reshape(-1)],
    ids=["reshape-clone", "flatten-clone", "clone-reshape"],
)
def test_a_flat_copy_that_copies_twice_is_refused_by_its_peak(fn):
    r = _failed("01-independent-flat", fn)
    assert r.reason.startswith("breaks rule `max_new_bytes`: while your function ran, new tensors peaked at"), r.reason
    x = r.failing_input[0]
    assert not x.is_contiguous() and f"allows {x.numel() * x.element_size():,} B" in r.reason


def test_the_review_case_peaks_at_96_bytes_twice_and_48_once():
    from viewlab import measure

    x = torch.arange(12.0).view(4, 3).t()  # a transposed 3x4 float32
    peaks = []
    for fn in (lambda x: x.reshape(-1).clone(), ex.get("01-independent-flat").reference):
        with measure(device="cpu") as m:
            fn(x)
        peaks.append(m.peak_bytes)
    assert peaks == [96, 48]
    assert ex.check_exercise(
        "01-independent-flat", lambda x: x.clone(memory_format=torch.contiguous_format).view(-1)
    ).passed


def test_the_grader_matches_a_refusal_through_the_bases_the_answers_process_reports():
    from viewlab.course.exercises.messages import Refused, refusal_problem
    from viewlab.course.grade.judge import _raised_name

    allowed = ("RuntimeError", "ValueError")
    own = {"error": "ShapeError", "bases": ["ShapeError", "ValueError", "Exception", "BaseException", "object"]}
    assert _raised_name(own, allowed) == "ValueError"
    assert refusal_problem(Refused(allowed), _raised_name(own, allowed)) is None
    other = {"error": "TypeError", "bases": ["TypeError", "Exception", "BaseException", "object"]}
    assert "it raised TypeError" in refusal_problem(Refused(allowed), _raised_name(other, allowed))
