"""Exercises for notebook 01 (views vs copies)."""

from __future__ import annotations

from typing import Any

import torch

from ...exercises import Exercise, register, tensors


def _images() -> Any:
    from hypothesis import strategies as st

    shape = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(2, 3))
    return st.tuples(tensors(shape=shape, layouts=("contiguous", "offset")))


register(Exercise(
    id="01-channels-first",
    title="Channels-last to channels-first, as a view",
    statement=(
        "`images` has shape (N, H, W, C) (channels last, as image libraries load them). Return the same "
        "data with shape (N, C, H, W), so that out[n, c, h, w] == images[n, h, w, c], without copying."
    ),
    signature="def channels_first(images: torch.Tensor) -> torch.Tensor",
    reference=lambda images: images.permute(0, 3, 1, 2),
    inputs=_images,
    memory="view",
    hints=(
        "Only the order of the dimensions changes, not the order of the bytes: which view op reorders dims?",
        "images.permute(0, 3, 1, 2) -- reshape/view to (N, C, H, W) keeps the shape but scrambles the values.",
    ),
    wrong=(
        (lambda images: images.reshape(images.shape[0], images.shape[3], images.shape[1], images.shape[2]),
         "values differ"),
        (lambda images: images.permute(0, 3, 1, 2).contiguous(), "shares no memory"),
    ),
))


def _vectors() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(shape=st.tuples(st.integers(2, 9)), layouts=("contiguous", "strided", "offset")))


register(Exercise(
    id="01-odd-positions",
    title="Every other element, starting at index 1",
    statement=(
        "Return the elements of the 1-D tensor `x` at positions 1, 3, 5, ... as a view of `x` (writing to "
        "the result must change `x`)."
    ),
    signature="def odd_positions(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x[1::2],
    inputs=_vectors,
    memory="view",
    hints=(
        "Basic indexing (slices) returns views; indexing with a list or tensor of positions copies.",
        "x[1::2]",
    ),
    wrong=(
        (lambda x: x[torch.arange(1, x.shape[0], 2)], "shares no memory"),
        (lambda x: x[::2], "shape"),
    ),
))


def _matrices() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(2, 2), side=(1, 4), layouts=("contiguous", "transposed", "offset")))


register(Exercise(
    id="01-independent-flat",
    title="A flat copy that is safe to edit",
    statement=(
        "Return the elements of the 2-D tensor `x` in row-major order as a 1-D tensor that NEVER shares "
        "memory with `x`, whatever its layout, so that editing the result can never change `x`."
    ),
    signature="def independent_flat(x: torch.Tensor) -> torch.Tensor",
    reference=lambda x: x.reshape(-1).clone(),
    inputs=_matrices,
    memory="copy",
    hints=(
        "reshape(-1) and flatten() are views when they can be (contiguous input) and copies otherwise.",
        "x.reshape(-1).clone() or x.flatten().clone() -- clone always allocates.",
    ),
    wrong=(
        (lambda x: x.reshape(-1), "shares memory"),
        (lambda x: x.t().reshape(-1).clone(), "values differ"),
    ),
))
