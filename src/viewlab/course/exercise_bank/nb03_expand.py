"""Exercises for notebook 03 (expand, expand_as and repeat)."""

from __future__ import annotations

from typing import Any

import torch

from ...exercises import Exercise, register, tensors


def _two_vectors() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(1, 1), side=(1, 5)), tensors(dims=(1, 1), side=(1, 5)))


def _outer_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a[:, None] + b[None, :]


register(Exercise(
    id="03-outer-sum",
    title="Every pair, without a loop",
    statement=(
        "Given 1-D tensors a (N,) and b (M,), return the (N, M) tensor out with out[i, j] = a[i] + b[j]. "
        "Use broadcasting: make a a column and b a row; neither input may be repeated or copied first."
    ),
    signature="def outer_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor",
    reference=_outer_sum,
    inputs=_two_vectors,
    examples=((torch.tensor([0.0, 10.0]), torch.tensor([1.0, 2.0, 3.0])),),
    hints=(
        "a[:, None] has shape (N, 1), b[None, :] has shape (1, M); what does + broadcast them to?",
        "a[:, None] + b[None, :]  (or a.unsqueeze(1) + b)",
    ),
    wrong=(
        (lambda a, b: a[None, :] + b[:, None], "the result"),
        (lambda a, b: a.repeat(b.shape[0]) + b.repeat(a.shape[0]), "the result"),
    ),
))


def _interleave_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(1, 1), side=(1, 5)), st.integers(1, 4))


def _interleave_view(x: torch.Tensor, n: int) -> torch.Tensor:
    return x[:, None].expand(-1, n)


register(Exercise(
    id="03-interleave-view",
    title="repeat_interleave, as a view",
    statement=(
        "Given a 1-D tensor x (N,) and an int n >= 1, return an (N, n) tensor with out[i, j] = x[i] -- so that "
        "out.flatten() equals x.repeat_interleave(n) -- without copying anything: the result must be a view of x."
    ),
    signature="def interleave_view(x: torch.Tensor, n: int) -> torch.Tensor",
    reference=_interleave_view,
    inputs=_interleave_inputs,
    memory="view",
    hints=(
        "Make x a column (N, 1) first; which op stretches a size-1 dim with stride 0?",
        "x[:, None].expand(-1, n)",
    ),
    wrong=(
        (lambda x, n: x.repeat_interleave(n).view(-1, n), "shares no memory"),
        (lambda x, n: x.expand(n, -1), "the result"),
    ),
))


def _grad_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(2, 2), side=(1, 4)))


def _grad_of_expand(upstream: torch.Tensor) -> torch.Tensor:
    return upstream.sum(dim=0, keepdim=True)


register(Exercise(
    id="03-grad-of-expand",
    title="The gradient of expand, by hand",
    statement=(
        "w has shape (1, D) and y = w.expand(B, D). Given the gradient of the loss with respect to y, "
        "`upstream` (B, D), return the gradient with respect to w, shape (1, D), without calling autograd."
    ),
    signature="def grad_of_expand(upstream: torch.Tensor) -> torch.Tensor",
    reference=_grad_of_expand,
    inputs=_grad_inputs,
    hints=(
        "Every row of y is the same memory as w, so w receives the gradient of every row: combine them how?",
        "upstream.sum(dim=0, keepdim=True)",
    ),
    wrong=(
        (lambda g: g.mean(dim=0, keepdim=True), "values differ"),
        (lambda g: g.sum(dim=0), "the result"),
    ),
))
