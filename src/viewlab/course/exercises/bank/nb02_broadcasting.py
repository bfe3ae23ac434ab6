"""Exercises for notebook 02 (broadcasting rules): each one is a real broadcasting bug turned around.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("02")
['02-bias-grad', '02-center-rows', '02-pairwise-diff', '02-per-sample-error']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors


def _matrix_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(2, 2), side=(0, 4)))  # no rows, no columns and one of each included


def _center_rows(x: torch.Tensor) -> torch.Tensor:
    return x - x.mean(dim=1, keepdim=True)


register(
    Exercise(
        id="02-center-rows",
        title="Subtract each row's mean",
        statement=(
            "Given a float tensor x of shape (N, D), return x with each row's mean subtracted from that row, "
            "so every row of the result has mean 0. It must also be right when N == D (a square matrix) or D == 1 "
            "(one column), where the classic mistake runs without any error. Return a new tensor that shares no "
            "memory with x: x itself stays unchanged."
        ),
        signature="def center_rows(x: torch.Tensor) -> torch.Tensor",
        reference=_center_rows,
        inputs=_matrix_inputs,
        memory="copy",
        hints=(
            "The row means form a vector of shape (N,). Lined up from the right against (N, D), which dim of x "
            "does it meet?",
            "The N row means must meet the rows, so they need a shape with a size-1 dim. Which shape, and will you "
            "get it from the reduction itself or add the dim afterwards?",
        ),
        why=(
            "An (N, 1) column of means lines up with the rows of (N, D) and is stretched along D.",
            "An (N,) vector lines up with the last dim instead: per column, silent when N == D or D == 1.",
        ),
        wrong=(
            (lambda x: x - x.mean(dim=1), "values differ"),
            (lambda x: x.sub_(x.mean(dim=1, keepdim=True)), "rule `must_copy`"),
        ),
        examples=((torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]),),),
    )
)


def _pair_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(2, 2), side=(0, 4), layouts=("contiguous", "transposed", "offset")))


def _pairwise_diff(p: torch.Tensor) -> torch.Tensor:
    return p.unsqueeze(1) - p.unsqueeze(0)


def _sized_points(n: int) -> tuple[torch.Tensor]:
    return (torch.arange(2.0 * n).view(n, 2),)


def _result_bytes(p: torch.Tensor) -> int:
    """The bytes of the (N, N, D) result: all that broadcasting allocates (the stretched operands are read, not copied)."""
    return p.shape[0] * p.shape[0] * p.shape[1] * p.element_size()


def _pairwise_by_gather(p: torch.Tensor) -> torch.Tensor:  # rule-breaking: right values, gathered copies of p
    i = torch.arange(p.shape[0])
    return p[i[:, None]] - p[i[None, :]]


def _pairwise_by_loop(p: torch.Tensor) -> torch.Tensor:  # rule-breaking: right values and bytes, a Python loop
    out = p.new_empty(p.shape[0], p.shape[0], p.shape[1])
    for i in range(p.shape[0]):
        torch.sub(p[i], p, out=out[i])
    return out


register(
    Exercise(
        id="02-pairwise-diff",
        title="All pairwise differences, no loops",
        statement=(
            "Given points p of shape (N, D), return d of shape (N, N, D) with d[i, j] = p[i] - p[j], "
            "using broadcasting only: no Python loops, no repeat or tile, and no new tensor but the result "
            "(new bytes may peak at the result's own N * N * D elements, measured), so no expanded-then-copied "
            "or gathered (indexed) copy of p either."
        ),
        signature="def pairwise_diff(p: torch.Tensor) -> torch.Tensor",
        reference=_pairwise_diff,
        inputs=_pair_inputs,
        rules=Rules(forbid=("repeat", "tile"), no_python_loops=_sized_points, max_new_bytes=_result_bytes),
        hints=(
            "Where must p get a size-1 dim so that one operand varies along i and the other along j?",
            "An operand of shape (N, 1, D) varies along i only. Which shape varies along j only, and which of "
            "the two comes first in the subtraction?",
        ),
        why=(
            "(N, 1, D) minus (1, N, D) broadcasts to (N, N, D): element [i, j] is p[i] - p[j].",
            "Broadcasting reads the stretched operands with stride 0, so only the result is allocated.",
        ),
        wrong=(
            (lambda p: p.unsqueeze(0) - p.unsqueeze(1), "values differ"),
            (lambda p: p - p, "shape"),
            (_pairwise_by_loop, "rule `no_python_loops`"),
            (
                lambda p: (
                    p.repeat_interleave(p.shape[0], 0).view(p.shape[0], p.shape[0], -1)
                    - p.repeat(p.shape[0], 1).view(p.shape[0], p.shape[0], -1)
                ),
                "rule `forbid repeat`",
            ),
            (lambda p: torch.tile(p[:, None], (1, p.shape[0], 1)) - p[None, :], "rule `forbid tile`"),
            (lambda p: p[:, None].expand(-1, p.shape[0], -1).contiguous() - p[None], "rule `max_new_bytes`"),
            (_pairwise_by_gather, "rule `max_new_bytes`"),
        ),
        examples=((torch.tensor([[0.0, 1.0], [2.0, 5.0]]),),),
    )
)


def _mse_inputs() -> Any:
    from hypothesis import strategies as st

    return st.one_of(st.integers(0, 1), st.integers(2, 5)).flatmap(
        lambda n: st.tuples(tensors(shape=(n, 1)), tensors(shape=(n,)))
    )


def _per_sample_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (pred.squeeze(1) - target) ** 2


register(
    Exercise(
        id="02-per-sample-error",
        title="Squared error per sample, shapes (N, 1) and (N,)",
        statement=(
            "A model returns pred of shape (N, 1); the labels target have shape (N,). Return the squared error "
            "of each sample, shape (N,): element i is (pred[i, 0] - target[i]) ** 2."
        ),
        signature="def per_sample_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor",
        reference=_per_sample_error,
        inputs=_mse_inputs,
        hints=(
            "Before squaring: what shape does pred - target have (ask explain_broadcast(pred, target))?",
            "(N, 1) - (N,) is not (N,). Which of the two inputs would you change so that the shapes match, and "
            "with which view op?",
        ),
        why=(
            "(N, 1) - (N,) broadcasts to (N, N): every prediction minus every label.",
            "With both shapes (N,), element i is pred[i, 0] - target[i], as asked.",
        ),
        wrong=((lambda pred, target: (pred - target) ** 2, "shape"),),
        examples=((torch.tensor([[1.0], [2.0], [4.0]]), torch.tensor([1.0, 2.0, 3.0])),),
    )
)


def _grad_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(1, 3), side=(0, 4)))  # no leading dim, or 1 or 2; sizes 0 and 1 included


def _bias_grad(grad_out: torch.Tensor) -> torch.Tensor:
    return grad_out.sum_to_size(grad_out.shape[-1:])


register(
    Exercise(
        id="02-bias-grad",
        title="The gradient that reaches a broadcast bias",
        statement=(
            "y = x + bias, where bias has shape (D,) and x (and y) have shape (*, D). Given grad_out = dL/dy "
            "(same shape as y), return dL/dbias, shape (D,): what autograd computes for bias.grad. Any size may be 0, "
            "D included."
        ),
        signature="def bias_grad(grad_out: torch.Tensor) -> torch.Tensor",
        reference=_bias_grad,
        inputs=_grad_inputs,
        hints=(
            "bias is read once for every position of the leading dims: how do the gradients of all those uses combine?",
            "Each use of bias passes its gradient back, and they add. grad_out may have 0, 1 or 2 leading dims: "
            "how will you reduce over all of them, whatever their number? (Careful with none: `sum(dim=())` "
            "reduces every dim, not none.)",
        ),
        why=(
            "Broadcasting used each bias element once per leading position, and gradients of all uses add up.",
            "So dL/dbias is grad_out summed over every broadcast dim: what autograd does for bias.grad.",
        ),
        wrong=(
            (lambda g: g.sum(0), "shape"),
            (lambda g: g.sum(dim=tuple(range(g.dim() - 1))), "shape"),  # no leading dim: dim=() sums D away too
            (lambda g: g.reshape(-1, g.shape[-1]).mean(0), "values differ"),
        ),
        examples=((torch.arange(12.0).reshape(2, 3, 2),),),
    )
)
