"""Exercises for notebook 07 (the two articles, claim by claim): fix what the claims got wrong.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("07")
['07-faster-beyond-spread', '07-mask-tokens', '07-safe-copy']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors


def _any_tensor() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(1, 3), side=(1, 4)))


def _safe_copy(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


register(
    Exercise(
        id="07-safe-copy",
        title="A copy that is always safe to write",
        statement=(
            "Given a tensor x of any shape and memory layout (contiguous, transposed, sliced, expanded), return a "
            "tensor with x's values that shares no memory with x, so that writing into it can never change x "
            "(claim A09: contiguous() is not always a copy)."
        ),
        signature="def safe_copy(x: torch.Tensor) -> torch.Tensor",
        reference=_safe_copy,
        inputs=_any_tensor,
        memory="copy",
        hints=(
            "Which method returns new memory whatever the input's layout -- and which one returns x itself "
            "when x is already contiguous?",
            "contiguous() copies only a non-contiguous x; you need the method that copies every time.",
        ),
        why=(
            "clone() always allocates new storage and copies the values, whatever the layout.",
            "contiguous() returns x itself when x is already contiguous, so writes would reach x.",
        ),
        wrong=((lambda x: x.contiguous(), "rule `must_copy`: the result shares memory with the input"),),
    )
)


def _loss_and_mask() -> Any:
    from hypothesis import strategies as st

    sizes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4))
    return sizes.flatmap(lambda s: st.tuples(tensors(shape=s), tensors(shape=s[:2], values=(0, 1))))


def _mask_tokens(loss: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return loss * keep[:, :, None]


register(
    Exercise(
        id="07-mask-tokens",
        title="Zero the loss of padding tokens",
        statement=(
            "Given a per-entry loss of shape (B, L, V) (token position, vocabulary entry) and a 0/1 float mask "
            "`keep` of shape (B, L) (1 = real token), return the (B, L, V) loss with every entry of a padding "
            "token set to 0. Give the mask a size-1 dimension where it must broadcast; no expand, no repeat "
            "(claim B13 puts that dimension in the wrong place)."
        ),
        signature="def mask_tokens(loss: torch.Tensor, keep: torch.Tensor) -> torch.Tensor",
        reference=_mask_tokens,
        inputs=_loss_and_mask,
        rules=Rules(forbid=("expand", "repeat")),
        hints=(
            "The mask has one value per token: which axis of the loss must it be stretched along?",
            "Index the mask with None in the one place that gives shape (B, L, 1); broadcasting does the rest.",
        ),
        why=(
            "keep[:, :, None] has shape (B, L, 1), which lines up with (B, L, V) and is stretched over V.",
            "keep[:, None, :] is (B, 1, L): it lines L up with V, an error or, when L == V, a wrong answer.",
        ),
        wrong=(
            (lambda loss, keep: loss * keep[:, None, :], "your function raised RuntimeError"),
            (lambda loss, keep: loss * keep[:, :, None].expand_as(loss), "rule `forbid expand`"),
            (lambda loss, keep: loss * keep[:, :, None].repeat(1, 1, loss.shape[-1]), "rule `forbid repeat`"),
        ),
        examples=((torch.ones(1, 2, 3), torch.tensor([[1.0, 0.0]])),),
    )
)


def _timings() -> Any:
    from hypothesis import strategies as st

    t = st.integers(1, 1000).map(lambda n: n * 1e-6)
    return st.tuples(t, t, t, t)


def _faster(median_a: float, iqr_a: float, median_b: float, iqr_b: float) -> str:
    gap = median_b - median_a
    if abs(gap) <= iqr_a + iqr_b:
        return "unclear"
    return "a" if gap > 0 else "b"


register(
    Exercise(
        id="07-faster-beyond-spread",
        title="Which is faster -- or can we not tell?",
        statement=(
            "Given two timings as median and interquartile range in seconds (median_a, iqr_a, median_b, iqr_b), "
            "return 'a' when a is faster by more than the two spreads together (median_b - median_a > "
            "iqr_a + iqr_b), 'b' in the mirror case, and 'unclear' otherwise: a timing judge must be able to say "
            "that the spread exceeds the difference."
        ),
        signature="def faster(median_a: float, iqr_a: float, median_b: float, iqr_b: float) -> str",
        reference=_faster,
        inputs=_timings,
        hints=(
            "Before naming a winner: is the gap between the medians bigger than the two spreads together?",
            "gap = median_b - median_a; decide 'unclear' first, then the sign of the gap picks the winner.",
        ),
        why=(
            "A difference smaller than the spread of the timings could be noise, so the honest answer is 'unclear'.",
            "Only a gap beyond iqr_a + iqr_b names a winner: a, when b's median is the larger.",
        ),
        wrong=((lambda ma, ia, mb, ib: "a" if ma < mb else "b", "expected 'unclear'"),),
        examples=((1e-6, 5e-7, 1.2e-6, 5e-7),),
    )
)
