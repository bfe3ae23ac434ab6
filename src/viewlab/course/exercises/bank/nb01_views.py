"""Exercises for notebook 01 (views vs copies).

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("01")
['01-channels-first', '01-independent-flat', '01-odd-positions']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors


def _images() -> Any:
    from hypothesis import strategies as st

    # N may be 0 (an empty batch), every size may be 1, and the layouts include non-contiguous and
    # expanded images: a view must follow the strides it is given, not assume row-major ones
    shape = st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
    return st.tuples(tensors(shape=shape))


def _assumes_row_major(images: torch.Tensor) -> torch.Tensor:  # wrong: right only for row-major strides
    n, h, w, c = images.shape
    return images.as_strided((n, c, h, w), (h * w * c, 1, w * c, c))


register(
    Exercise(
        id="01-channels-first",
        title="Channels-last to channels-first, as a view",
        statement=(
            "`images` has shape (N, H, W, C) (channels last, as image libraries load them). Return the same "
            "data with shape (N, C, H, W), so that out[n, c, h, w] == images[n, h, w, c], as a view of `images` "
            "(sharing its memory, whatever its strides: nothing copied)."
        ),
        signature="def channels_first(images: torch.Tensor) -> torch.Tensor",
        reference=lambda images: images.permute(0, 3, 1, 2),
        inputs=_images,
        memory="view",
        hints=(
            "Only the order of the dimensions changes, not the order of the bytes: which view op reorders dims?",
            "Write down, for each output position 0..3, which input dim lands there: N stays first, and C "
            "(input dim 3) comes next. Which input dims fill positions 2 and 3?",
        ),
        why=(
            "permute writes a new shape and stride recipe over the same storage, so nothing is copied.",
            "reshape or view to (N, C, H, W) keeps row-major order: the right shape with scrambled values.",
        ),
        wrong=(
            (
                lambda images: images.reshape(images.shape[0], images.shape[3], images.shape[1], images.shape[2]),
                "values differ",
            ),
            (lambda images: images.permute(0, 3, 1, 2).contiguous(), "rule `must_view`: the result shares no memory"),
            (_assumes_row_major, "values differ"),  # reached only by a non-contiguous or expanded input
        ),
    )
)


def _vectors() -> Any:
    from hypothesis import strategies as st

    # lengths 0 and 1 (the slice is then empty) drawn as often as all the rest, and stride-0 (expanded) input
    # as often as the other layouts together
    length = st.tuples(st.one_of(st.integers(0, 1), st.integers(2, 9)))
    return st.tuples(
        st.one_of(
            tensors(shape=length, layouts=("contiguous", "strided", "offset")),
            tensors(shape=st.tuples(st.integers(2, 9)), layouts=("expanded",)),
        )
    )


register(
    Exercise(
        id="01-odd-positions",
        title="Every other element, starting at index 1",
        statement=(
            "Return the elements of the 1-D tensor `x` (of any length, 0 and 1 included) at positions 1, 3, 5, ... "
            "as a view of `x` (sharing its memory, so that writing to the result changes `x`)."
        ),
        signature="def odd_positions(x: torch.Tensor) -> torch.Tensor",
        reference=lambda x: x[1::2],
        inputs=_vectors,
        memory="view",
        hints=(
            "Which kind of indexing returns a view: a slice, or a list or tensor of positions?",
            "A slice is start:stop:step; the start here is 1. Which step skips every other element?",
        ),
        why=(
            "A slice with a step is a view: the stride is multiplied by the step and the offset moves to the start.",
            "Indexing with a tensor of positions (advanced indexing) gathers the elements into new memory.",
        ),
        wrong=(
            (lambda x: x[torch.arange(x.shape[0])[1::2]], "rule `must_view`: the result shares no memory"),
            (lambda x: x[::2], "shape"),
            (lambda x: x.narrow(0, 1, x.shape[0] - 1)[::2], "narrow(): length must be non-negative"),  # length 0
            (lambda x: x.squeeze()[1::2], "IndexError"),  # length 1: squeeze leaves a 0-d tensor
            (lambda x: x.as_strided((x.shape[0] // 2,), (2,), x.storage_offset() + 1), "values differ"),  # stride 1
        ),
    )
)


def _matrices() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(2, 2), side=(0, 4)))  # empty and 1-wide matrices, every layout


def _own_bytes(x: torch.Tensor) -> int:
    """One copy of x's elements: all a flat independent copy needs."""
    return x.numel() * x.element_size()


def _independent_flat(x: torch.Tensor) -> torch.Tensor:
    return x.clone(memory_format=torch.contiguous_format).view(-1)


register(
    Exercise(
        id="01-independent-flat",
        title="A flat copy that is safe to edit",
        statement=(
            "Return the elements of the 2-D tensor `x` in row-major order as a 1-D tensor that NEVER shares "
            "memory with `x`, whatever its layout (an independent copy), so that editing the result can never "
            "change `x`. Copy once: new bytes may peak at one copy of x's elements (x.numel() * x.element_size(), "
            "measured), so a flatten that copies a non-contiguous x, followed by a copy of that copy, is refused."
        ),
        signature="def independent_flat(x: torch.Tensor) -> torch.Tensor",
        reference=_independent_flat,
        inputs=_matrices,
        rules=Rules(must_copy=True, max_new_bytes=_own_bytes),
        hints=(
            "reshape(-1) is a view when the layout allows it: what happens to x when you then write into the result?",
            "clone() keeps x's strides (a transposed x stays transposed), so flattening the clone may copy again. "
            "Which copy leaves its elements in row-major order, so that flattening it needs no second copy?",
        ),
        why=(
            "clone(memory_format=torch.contiguous_format) copies x once into row-major memory, which view(-1) "
            "flattens without copying: the result never shares memory with x.",
            "x.reshape(-1).clone() copies twice when x is not contiguous (reshape copies, then clone copies the "
            "copy), and reshape(-1) alone views a contiguous x, so writes would reach it.",
        ),
        wrong=(
            (lambda x: x.reshape(-1), "rule `must_copy`: the result shares memory"),
            (lambda x: x.t().clone(memory_format=torch.contiguous_format).view(-1), "values differ"),  # column order
            (lambda x: x.reshape(-1).clone(), "rule `max_new_bytes`"),  # two copies of a non-contiguous x
        ),
    )
)
