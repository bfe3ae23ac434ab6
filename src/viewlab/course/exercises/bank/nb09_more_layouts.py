"""Exercises for notebook 09 (more layouts): one element per row, without the (N, N) block.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("09")
['09-pick-per-row']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors


def _scores_and_labels() -> Any:
    """scores (N, C) in any layout (transposed, strided, offset, one row expanded to all N), N from 0, C from 1;
    labels (N,) of int64 in -1..C-1, laid out contiguous, strided or offset."""
    from hypothesis import strategies as st

    sizes = st.tuples(st.integers(0, 5), st.integers(1, 4))
    return sizes.flatmap(
        lambda s: st.tuples(
            tensors(shape=s),
            tensors(
                shape=(s[0],), dtype=torch.int64, values=(-1, s[1] - 1), layouts=("contiguous", "strided", "offset")
            ),
        )
    )


def _pick_per_row(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    rows = torch.arange(scores.shape[0])
    picked = scores[rows, labels]  # a -1 reads the last column, which exists; it gets its 0 below
    return picked.masked_fill(labels < 0, 0)


def _pick_budget(scores: torch.Tensor, labels: torch.Tensor) -> int:
    """A few N elements: eight int64 numbers a row, and 64 bytes for scalars."""
    return 8 * 8 * labels.shape[0] + 64


def _by_diagonal(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # right values, an (N, N) block
    return scores[:, labels.clamp(min=0)].diagonal().masked_fill(labels < 0, 0)


def _mask_then_clear_nan(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # wrong on a kept -inf
    picked = scores[torch.arange(scores.shape[0]), labels] * (labels >= 0)
    return torch.nan_to_num(picked, nan=0.0)  # also turns a kept -inf into the lowest float32


def _examples() -> tuple[tuple[Any, ...], ...]:
    n, c = 40, 50
    return (
        # notebook 09's scores, with one row to ignore
        (torch.arange(20.0).reshape(4, 5), torch.tensor([3, -1, 4, 3])),
        # big enough that an (N, N) or (N, C) intermediate does not fit in a few N elements; one row expanded
        (torch.arange(float(c)).expand(n, c), torch.arange(n) % (c + 1) - 1),
        # transposed scores
        (torch.arange(float(n * c)).reshape(c, n).t(), (torch.arange(n) * 7) % c),
        # log-probabilities: a -inf in a row to ignore, where multiplying by a 0/1 mask gives nan, not 0
        (torch.tensor([[0.0, float("-inf")], [-0.5, -1.0]]), torch.tensor([-1, 1])),
        # the -inf where a clamped -1 reads (column 0): clamping first, then multiplying, gives nan too
        (torch.tensor([[float("-inf"), 0.0], [-0.5, -1.0]]), torch.tensor([-1, 1])),
        # a -inf in a row that is kept: the answer is -inf there (nan_to_num would make it -3.4e38)
        (torch.tensor([[float("-inf"), 0.0], [-0.5, -1.0]]), torch.tensor([0, -1])),
    )


register(
    Exercise(
        id="09-pick-per-row",
        title="One score per row, some rows ignored",
        statement=(
            "Given scores of shape (N, C) in any layout (transposed, strided, offset, or one row expanded to all "
            "N rows) and int64 labels of shape (N,) with values in -1..C-1, return the (N,) tensor whose entry i "
            "is scores[i, labels[i]], and 0 where labels[i] is -1: a row to ignore, as a loss's ignore_index "
            "marks padding. Careful: -1 is also a valid index (the last column), and scores may hold -inf, as "
            "log-probabilities do, in ignored rows too. Rule: new bytes may peak at a few N elements: 64 bytes "
            "a row (eight int64 numbers) plus 64 (measured), so no intermediate of N * N or N * C elements -- "
            "building scores[:, labels] and keeping its diagonal is one."
        ),
        signature="def pick_per_row(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor",
        reference=_pick_per_row,
        inputs=_scores_and_labels,
        rules=Rules(max_new_bytes=_pick_budget),
        examples=_examples(),
        hints=(
            "Which (row, column) pairs do you need, and what does a label of -1 pick when it is used as an index?",
            "Pair a tensor of row numbers with the labels, so that each row gives one element, not a whole row "
            "of them. What does x[rows, labels] read where the label is -1, and what must then be done to those "
            "rows when their score may be -inf?",
        ),
        why=(
            "Two index tensors of shape (N,) pair up: rows[i] with labels[i], one element per row, N in all; a "
            "slice beside the labels would pick every label's column for every row, N * N elements.",
            "A -1 label indexes the last column, which always exists, so x[rows, labels] reads the ignored rows "
            "without a clamp, and masked_fill (or torch.where) then sets them to 0; multiplying by a 0/1 mask "
            "would turn a -inf score into nan. gather refuses a -1 outright, so with gather the labels are "
            "clamped first.",
        ),
        wrong=(
            (lambda scores, labels: scores[torch.arange(scores.shape[0]), labels], "1 of 4 values differ"),
            (lambda scores, labels: scores.gather(1, labels[:, None]).squeeze(1), "your function raised RuntimeError"),
            (lambda scores, labels: scores[:, labels].masked_fill(labels < 0, 0), "the result has shape (4, 4)"),
            (_by_diagonal, "rule `max_new_bytes`"),
            (lambda scores, labels: scores[torch.arange(scores.shape[0]), labels] * (labels >= 0), "got nan"),
            (
                lambda scores, labels: scores[torch.arange(scores.shape[0]), labels.clamp_min(0)] * (labels >= 0),
                "got nan",
            ),
            (_mask_then_clear_nan, "values differ"),
        ),
    )
)
