"""Exercises for notebook 05 (pitfalls and myths). Each turns one pitfall into practice.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("05")
['05-batch-view', '05-can-expand', '05-count-labels', '05-flatten-any']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab import shares_storage
from viewlab.course.article_helpers import article_check_expandable
from viewlab.course.exercises import Exercise, Rules, named_rule, register, tensors


def _batch_inputs() -> Any:
    from hypothesis import strategies as st

    # "any shape": 0-d included, and sizes 0 and 1; every layout, so a view must follow the strides it is given
    return st.tuples(tensors(dims=(0, 3), side=(0, 3)), st.integers(0, 4))


def _batch_view(sample: torch.Tensor, n: int) -> torch.Tensor:
    return sample.unsqueeze(0).expand(n, *sample.shape)


register(
    Exercise(
        id="05-batch-view",
        title="A batch of one sample, without copying",
        statement=(
            "Given a tensor `sample` of any shape S and an int n >= 0, return a tensor of shape (n, *S) whose "
            "every entry along dim 0 equals `sample`. The result must be a view of `sample` (sharing its memory: "
            "nothing copied)."
        ),
        signature="def batch_view(sample: torch.Tensor, n: int) -> torch.Tensor",
        reference=_batch_view,
        inputs=_batch_inputs,
        memory="view",
        hints=(
            "Which op stretches a size-1 dimension to any size without writing anything?",
            "That op stretches size-1 dims and can also add new dims at the front (or add the dim yourself first, then "
            "stretch it). Which size does each dim of the result ask for?",
        ),
        why=(
            "expand gives the new dim stride 0, so all n entries read the same storage: a view, 0 bytes.",
            "repeat writes n copies into new memory: right values, n times the bytes.",
        ),
        wrong=(
            (
                lambda sample, n: sample.unsqueeze(0).repeat(n, *[1] * sample.dim()),
                "rule `must_view`: the result shares no memory",
            ),
            (lambda sample, n: sample.expand(n, *sample.shape[1:]), "the result"),
            (lambda sample, n: sample.unsqueeze(0).expand(n, -1, *sample.shape[1:]), "has shape"),  # 0-d sample
            (  # reshape copies a non-contiguous sample: only such an input shows it
                # (at n = 0 the empty result shares nothing to judge; the measured clone breaks the rule)
                lambda sample, n: sample.reshape(1, -1).expand(n, -1).view(n, *sample.shape),
                "breaks rule `must_view`",
            ),
        ),
    )
)


def _count_labels(labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    counts = torch.zeros(labels.shape[0], num_classes)
    return counts.scatter_add_(1, labels, torch.ones(labels.shape))  # along dim 1: each row into its own row


def _label_inputs() -> Any:
    from hypothesis import strategies as st

    def labels(c: int, b: int, length: int) -> Any:
        # few classes, several labels a row: duplicates are the rule, not the exception; B or L may be 0
        bits = st.lists(st.integers(0, c - 1), min_size=b * length, max_size=b * length)
        return bits.map(lambda xs: (torch.tensor(xs, dtype=torch.long).view(b, length), c))

    sizes = st.tuples(st.integers(1, 4), st.sampled_from((2, 1, 3, 0)), st.sampled_from((4, 1, 5, 0, 2)))
    return sizes.flatmap(lambda p: labels(*p))


def _sized_labels(n: int) -> tuple[torch.Tensor, int]:
    # the rows, the labels and the classes all grow: a loop over any of them runs more operators when bigger
    return (torch.arange(2 * n * n) % n).view(n, 2 * n), n


def _count_budget(labels: torch.Tensor, num_classes: int) -> int:
    """The counts, one float32 weight per label, one float32 scalar (a single weight that is broadcast, e.g.
    ``torch.tensor(1.0)``) and a (B, 1) column of int64 row numbers: what one accumulating indexed write needs,
    and no (B, L, C) table (nor a (B, L) table of flattened int64 positions)."""
    b, length = labels.shape
    return 4 * (b * num_classes + b * length + 1) + 8 * b


def _count_by_unique(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # rule-breaking: unique counts
    flat = (labels + num_classes * torch.arange(labels.shape[0])[:, None]).flatten()
    values, counts = flat.unique(return_counts=True)
    out = torch.zeros(labels.shape[0] * num_classes)
    out[values] = counts.float()
    return out.view(labels.shape[0], num_classes)


def _count_by_one_hot(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # rule-breaking: a (B, L, C) table
    return torch.nn.functional.one_hot(labels, num_classes).sum(1).float()


def _count_by_compare(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # rule-breaking: a (B, L, C) table
    return (labels[:, :, None] == torch.arange(num_classes)).sum(1).float()


def _count_by_flat_positions(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # a (B, L) int64 table
    b = labels.shape[0]
    flat = (labels + num_classes * torch.arange(b)[:, None]).flatten()
    return torch.zeros(b * num_classes).index_add_(0, flat, torch.ones(flat.shape[0])).view(b, num_classes)


def _count_by_class_loop(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # rule-breaking: a loop
    counts = torch.zeros(labels.shape[0], num_classes)
    for c in range(num_classes):  # over the classes: the loop probe varies num_classes too
        counts[:, c] = (labels == c).sum(1)
    return counts


def _count_by_index_plus_one(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # P13 itself
    counts = torch.zeros(labels.shape[0], num_classes)
    counts[torch.arange(labels.shape[0])[:, None], labels] += 1
    return counts


def _count_by_loop(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # right values, a Python loop
    counts = torch.zeros(labels.shape[0], num_classes)
    for b, row in enumerate(labels):
        counts[b].index_add_(0, row, torch.ones(row.shape[0]))
    return counts


def _count_rows_together(labels: torch.Tensor, num_classes: int) -> torch.Tensor:  # the whole batch in one row
    return torch.zeros(num_classes).index_add_(0, labels.flatten(), torch.ones(labels.numel()))


register(
    Exercise(
        id="05-count-labels",
        title="Count labels per row, with duplicate indices",
        statement=(
            "Given `labels`, a 2-D int64 tensor of shape (B, L) -- a batch of B sequences of L class indices in "
            "[0, num_classes) -- and the int num_classes, return a float32 tensor of shape (B, num_classes) "
            "whose entry [b, c] is how many times c occurs in row b (B or L may be 0). Use one indexed write that "
            "accumulates, each label counted in its own row. Rules: no Python loops, no bincount (nor histc or "
            "histogram: they count for you), and new bytes may peak at B * num_classes + B * L + 1 float32 "
            "values and B int64 values (the counts, one weight per label, one scalar and a column of row "
            "numbers, measured), so no (B, L, num_classes) table: no one_hot, no broadcast compare, no unique "
            "counts, and no (B, L) table of flattened int64 positions either."
        ),
        signature="def count_labels(labels: torch.Tensor, num_classes: int) -> torch.Tensor",
        reference=_count_labels,
        inputs=_label_inputs,
        rules=Rules(forbid=("bincount",), no_python_loops=_sized_labels, max_new_bytes=_count_budget),
        examples=((torch.tensor([[0, 2, 2, 2], [3, 1, 0, 2]]), 4),),
        hints=(
            "counts[rows, labels] += 1 reads the indexed entries (a copy), adds 1 and writes back: what happens "
            "to three writes to the same entry, in a row with three equal labels?",
            "Some in-place indexed ops add every source value into its place, so duplicates add up; plain "
            "indexed assignment does not. Which of them can write along dim 1, row by row (or take a (B, 1) "
            "column of row numbers beside the labels), and what source values must it add?",
        ),
        why=(
            "scatter_add_ along dim 1 adds source[b, l] into counts[b, labels[b, l]]: every label lands in its "
            "own row, and duplicates add up.",
            "counts[rows, labels] += 1 writes the same incremented copy once per duplicate, so each entry counts "
            "at most 1; counting the flattened batch at once gives one row of counts for all B rows.",
        ),
        wrong=(
            (_count_by_index_plus_one, "values differ"),
            (_count_rows_together, "has shape"),
            (_count_by_loop, "rule `no_python_loops`"),
            (lambda labels, c: torch.bincount(labels.flatten(), minlength=c).float(), "rule `forbid bincount`"),
            (_count_by_unique, "rule `max_new_bytes`"),
            (_count_by_one_hot, "rule `max_new_bytes`"),
            (_count_by_compare, "rule `max_new_bytes`"),
            (_count_by_flat_positions, "rule `max_new_bytes`"),
        ),
    )
)


def _flatten(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1)


def _view_when_possible(args: tuple[torch.Tensor], out: torch.Tensor) -> str | None:
    x = args[0]
    if (
        x.numel()
        and shares_storage(x.view(-1) if x.is_contiguous() else x.reshape(-1), x)
        and not shares_storage(out, x)
    ):
        return (
            "x could be flattened as a view (its strides allow it), but your result is a copy; copy only when it must"
        )
    return None


def _flatten_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(0, 3), side=(0, 4)))  # "any shape": 0-d, empty and size-1 dims included


register(
    Exercise(
        id="05-flatten-any",
        title="Flatten any layout",
        statement=(
            "Return the elements of x (any shape, 0-d included; any memory layout: transposed, sliced with a step, expanded) "
            "as a 1-D tensor in row-major order. Share memory when the layout allows it; copy only when it must."
        ),
        signature="def flatten_any(x: torch.Tensor) -> torch.Tensor",
        reference=_flatten,
        inputs=_flatten_inputs,
        hints=(
            "x.view(-1) needs strides compatible with the new shape: does a transposed tensor have them?",
            "You need the op that views when the strides allow it and copies only otherwise; view is its strict "
            "half. Which op is the lenient one, and what shape do you ask it for?",
        ),
        why=(
            "reshape(-1) returns a view when the strides allow it (a contiguous x, but also x[::2] or a 1-D expand) and a copy only when they do not.",
            "view(-1) refuses a transposed x; clone-then-view copies even when no copy is needed.",
        ),
        wrong=(
            (lambda x: x.view(-1), "RuntimeError"),
            (lambda x: x.clone().view(-1), "rule `view_when_possible`"),
            (lambda x: x.reshape(-1) if x.dim() > 1 else x, "shape ()"),  # "already flat" misses 0-d x
        ),
        examples=((torch.arange(6.0).view(2, 3),),),
        extra=(named_rule("view_when_possible", _view_when_possible),),
    )
)


def _shape_pairs() -> Any:
    from hypothesis import strategies as st

    shape = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
    return st.tuples(shape, shape)


def _tries_expand(a: tuple[int, ...], b: tuple[int, ...]) -> bool:  # rule-breaking: runs what it predicts
    try:
        torch.empty(a).expand(b)
        return True
    except RuntimeError:
        return False


def _tries_a_copy(a: tuple[int, ...], b: tuple[int, ...]) -> bool:  # rule-breaking: allocates both shapes
    try:
        torch.zeros(b).copy_(torch.zeros(a))  # copy_ accepts a source that expands to the destination
        return True
    except RuntimeError:
        return False


def _can_expand(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    # expand may add leading dims but never drop them; aligned from the right, each size of a
    # must equal b's or be 1 (viewlab.course.article_helpers.can_expand explains the failing dimension).
    return len(a) <= len(b) and all(x == y or x == 1 for x, y in zip(a[::-1], b[::-1]))


register(
    Exercise(
        id="05-can-expand",
        title="Predict whether expand works",
        statement=(
            "Given two shapes a and b (tuples of ints >= 0), return True exactly when a tensor of shape a can be "
            "expanded to shape b, i.e. when torch.empty(a).expand(b) does not raise. Predict it from the sizes: "
            "do not call expand, nor build tensors to try it (what your function allocates is measured)."
        ),
        signature="def can_expand(a: tuple[int, ...], b: tuple[int, ...]) -> bool",
        reference=_can_expand,
        inputs=_shape_pairs,
        rules=Rules(forbid=("expand",), predict_without_running=True),
        examples=(((3, 3, 3), (3, 3, 3)), ((3,), (1, 3))),
        hints=(
            "Align the shapes at the right. Which sizes of a may differ from b's? What if a is longer than b?",
            "Pair the sizes up from the right; a may not have more dims than b. Which condition must every pair meet?",
        ),
        why=(
            "expand may add leading dims but never drop one, and each aligned size of a must equal b's or be 1.",
            "Only a size-1 dim can get stride 0; a size 0 or 3 cannot become another size.",
        ),
        wrong=(
            (article_check_expandable, "is True (bool), expected False"),
            (_tries_expand, "rule `forbid expand`"),
            (_tries_a_copy, "rule `predict_without_running`"),
        ),
    )
)
