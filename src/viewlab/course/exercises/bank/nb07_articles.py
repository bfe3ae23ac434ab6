"""Exercises for notebook 07 (the two articles, claim by claim): fix what the claims got wrong.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("07")
['07-expand-as-by-strides', '07-faster-beyond-spread', '07-mask-tokens', '07-safe-copy']
"""

from __future__ import annotations

import math
from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors
from viewlab.course.exercises.rules import named_rule
from viewlab.layout import layout


def _any_tensor() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(0, 3), side=(0, 4)))  # "any shape": 0-d, empty and size-1 dims included


def _safe_copy(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def _writable(args: tuple[Any, ...], result: Any) -> str | None:
    """Every element of the result has memory of its own, so any in-place write works and changes one element
    (claims A08, B09: a stride-0 copy refuses add_ and one write changes many)."""
    # viewlab's exact test from shape and stride (torch's own overlap check is private and answers
    # "too hard to tell" for some layouts)
    if isinstance(result, torch.Tensor) and layout(result).overlaps:
        return (
            f"the result (shape {tuple(result.shape)}, stride {result.stride()}) has elements "
            "that share one memory location, so an in-place op on it raises and one write changes several elements; "
            "copy the values into new memory of their own"
        )
    return None


def _deepcopy(x: torch.Tensor) -> torch.Tensor:  # rule-breaking: keeps an expanded x's stride 0
    import copy

    return copy.deepcopy(x)


register(
    Exercise(
        id="07-safe-copy",
        title="A copy that is always safe to write",
        statement=(
            "Given a tensor x of any shape (0-d included) and memory layout (contiguous, transposed, sliced, expanded), return a "
            "tensor with x's values that shares no memory with x, so that writing into it can never change x "
            "(claim A09: contiguous() is not always a copy), and whose every element has memory of its own, so that "
            "any in-place write works (copy.deepcopy keeps an expanded x's stride 0: try it; claim A08 shows why a "
            "stride-0 tensor refuses add_)."
        ),
        signature="def safe_copy(x: torch.Tensor) -> torch.Tensor",
        reference=_safe_copy,
        inputs=_any_tensor,
        memory="copy",
        extra=(named_rule("writable", _writable),),
        examples=((torch.arange(3.0).view(3, 1).expand(3, 4),),),
        hints=(
            "Which method returns new memory whatever the input's layout -- and which one returns x itself "
            "when x is already contiguous?",
            "contiguous() copies only a non-contiguous x. Which method copies every time, whatever the layout?",
        ),
        why=(
            "clone() always allocates new storage and copies the values, whatever the layout.",
            "contiguous() returns x itself when x is already contiguous, so writes would reach x.",
        ),
        wrong=(
            (lambda x: x.contiguous(), "rule `must_copy`: the result shares memory with the input"),
            (lambda x: torch.cat([x]), "zero-dimensional tensor"),  # cat copies, but refuses a 0-d x
            (_deepcopy, "rule `writable`"),
        ),
    )
)


def _loss_and_mask() -> Any:
    from hypothesis import strategies as st

    sizes = st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 4))  # empty and size-1 dims included
    return sizes.flatmap(lambda s: st.tuples(tensors(shape=s), tensors(shape=s[:2], values=(0, 1))))


def _mask_tokens(loss: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return loss * keep[:, :, None]


def _mask_budget(loss: torch.Tensor, keep: torch.Tensor) -> int:
    """The (B, L, V) result, one temporary the size of the mask (e.g. a bool copy of it) and one scalar (a fill
    value such as the 0.0 of torch.where)."""
    return loss.nbytes + (keep.numel() + 1) * keep.element_size()


def _mask_by_gather(loss: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:  # rule-breaking: a gathered copy
    return loss * keep[:, :, None][:, :, torch.zeros(loss.shape[-1], dtype=torch.long)]


register(
    Exercise(
        id="07-mask-tokens",
        title="Zero the loss of padding tokens",
        statement=(
            "Given a per-entry loss of shape (B, L, V) (token position, vocabulary entry) and a 0/1 float mask "
            "`keep` of shape (B, L) (1 = real token), return a new (B, L, V) loss, `loss` left unchanged, with every entry of a padding "
            "token set to 0 (every loss drawn is finite). Give the mask a size-1 dimension where it must broadcast (claim B13 puts that "
            "dimension in the wrong place). Rules: no expand and no repeat, and new bytes may peak at the result, "
            "one tensor the size of the mask and one scalar (measured), so no copied or gathered (B, L, V) mask either."
        ),
        signature="def mask_tokens(loss: torch.Tensor, keep: torch.Tensor) -> torch.Tensor",
        reference=_mask_tokens,
        inputs=_loss_and_mask,
        rules=Rules(forbid=("expand", "repeat"), max_new_bytes=_mask_budget),
        hints=(
            "The mask has one value per token: which axis of the loss must it be stretched along?",
            "Broadcasting lines shapes up from the right, so the (B, L) mask meets the loss's last two dims as it "
            "stands. What shape must the mask take instead, and which view gets it there without copying?",
        ),
        why=(
            "keep[:, :, None] has shape (B, L, 1), which lines up with (B, L, V) and is stretched over V; "
            "multiplying by it zeros a finite loss only (inf * 0 is nan), torch.where(keep[:, :, None] == 1, loss, "
            "0.0) zeros any.",
            "keep[:, None, :] is (B, 1, L): it lines L up with V, an error or, when L == V, a wrong answer.",
        ),
        wrong=(
            (lambda loss, keep: loss * keep[:, None, :], "your function raised RuntimeError"),
            (lambda loss, keep: loss * keep[:, :, None].expand_as(loss), "rule `forbid expand`"),
            (lambda loss, keep: loss * keep[:, :, None].repeat(1, 1, loss.shape[-1]), "rule `forbid repeat`"),
            (_mask_by_gather, "rule `max_new_bytes`"),
        ),
        examples=((torch.ones(1, 2, 3), torch.tensor([[1.0, 0.0]])),),
    )
)


def _timings() -> Any:
    from hypothesis import strategies as st

    # whole ticks of 2**-20 s (about a microsecond): sums and differences are exact, so an exact tie -- a gap
    # equal to the two spreads together, which names no winner -- can be drawn; a spread may be 0
    median = st.integers(0, 1000).map(lambda n: n * 2.0**-20)
    spread = st.integers(0, 300).map(lambda n: n * 2.0**-20)
    free = st.tuples(median, spread, median, spread)
    tie_a = st.tuples(median, spread, spread).map(lambda t: (t[0], t[1], t[0] + t[1] + t[2], t[2]))
    tie_b = tie_a.map(lambda t: (t[2], t[1], t[0], t[3]))
    return st.one_of(free, tie_a, tie_b)


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
            "return 'a' when a's median is the smaller by a gap larger than the two spreads added, 'b' in the "
            "mirror case, and 'unclear' otherwise: a timing judge must be able to say that the spread exceeds the "
            "difference."
        ),
        signature="def faster(median_a: float, iqr_a: float, median_b: float, iqr_b: float) -> str",
        reference=_faster,
        inputs=_timings,
        hints=(
            "Before naming a winner: is the gap between the medians bigger than the two spreads together?",
            "Work out the gap between the medians once. Which test on it says 'unclear' (does a gap exactly equal "
            "to the spreads name a winner?), and which sign of it means a is faster?",
        ),
        why=(
            "A difference smaller than the spread of the timings could be noise, so the honest answer is 'unclear'.",
            "Only a gap beyond iqr_a + iqr_b names a winner: a, when b's median is the larger.",
        ),
        wrong=(
            (lambda ma, ia, mb, ib: "a" if ma < mb else "b", "expected 'unclear'"),
            (
                lambda ma, ia, mb, ib: "a" if mb - ma >= ia + ib else "b" if ma - mb >= ia + ib else "unclear",
                "expected 'unclear'",
            ),
        ),
        examples=((1e-6, 5e-7, 1.2e-6, 5e-7),),
    )
)


def _expand_pairs() -> Any:
    from hypothesis import strategies as st

    def pair(target: tuple[int, ...], lead: int, ones: tuple[bool, ...], bad: int, layouts: tuple[str, ...]) -> Any:
        # x's shape: other's shape without `lead` leading dims, some dims made 1 (those are stretched, or kept
        # when other's is 1 too); `bad` breaks it: 1 gives x a dim neither 1 nor other's, 2 one dim too many
        shape = [1 if one else t for t, one in zip(target[lead:], ones)]
        if bad == 1:
            shape = [*shape[:-1], target[-1] + 2] if shape else [target[-1] + 2]
        elif bad == 2:
            shape = [2, *target]
        return st.tuples(tensors(shape=tuple(shape), layouts=layouts), st.just(torch.zeros(target)))

    def kind(sides: Any, bad: int, layouts: tuple[str, ...], dims: tuple[int, int] = (0, 3), ones: bool = True) -> Any:
        target = st.integers(*dims).flatmap(lambda k: st.tuples(*[sides] * k))
        return target.flatmap(
            lambda t: st.tuples(
                st.just(t),
                st.integers(0, len(t)) if ones else st.integers(0, len(t) - 2),
                st.tuples(*[st.booleans() if ones else st.just(False)] * len(t)),
            ).flatmap(lambda p: pair(p[0], p[1], p[2][: len(p[0]) - p[1]], bad, layouts))
        )

    any_side, wide = st.integers(0, 3), st.integers(2, 3)
    return st.one_of(
        kind(any_side, 0, ("contiguous", "offset")),  # 0-d, size 0, size 1 kept or stretched, new leading dims
        kind(wide, 0, ("transposed", "expanded"), dims=(2, 3), ones=False),  # x's own strides (0 too) kept
        kind(wide, 0, ("transposed", "expanded")),
        kind(any_side, 1, ("contiguous",), dims=(1, 3)),  # refused: a size neither 1 nor other's
        kind(any_side, 2, ("contiguous",)),  # refused: more dims than other
    )


def _expand_as(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    return x.expand_as(other)


def _expand_as_by_strides(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    lead = other.dim() - x.dim()
    if lead < 0:
        raise ValueError(f"x has {x.dim()} dims, more than other's {other.dim()}: it cannot expand to {other.shape}")
    strides = [0] * lead  # a new leading dim reads the same elements again
    for dim, (size, stride, want) in enumerate(zip(x.shape, x.stride(), other.shape[lead:])):
        if size != want and size != 1:
            raise ValueError(f"x's dim {dim} has size {size}: only a size-1 dim stretches, not to {want}")
        strides.append(stride if size == want else 0)
    return x.as_strided(other.shape, strides)


def _stretches_any_size(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:  # never refuses
    lead = other.dim() - x.dim()
    strides = [0] * max(lead, 0) + [s if n == w else 0 for n, s, w in zip(x.shape, x.stride(), other.shape[lead:])]
    return x.as_strided(other.shape, strides[-other.dim() :] if other.dim() else [])


def _assumes_contiguous(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:  # x's own strides ignored
    lead = other.dim() - x.dim()
    if lead < 0 or any(n not in (1, w) for n, w in zip(x.shape, other.shape[lead:])):
        raise RuntimeError(f"{tuple(x.shape)} does not expand to {tuple(other.shape)}")
    row_major = [math.prod(x.shape[d + 1 :]) for d in range(x.dim())]
    strides = [0] * lead + [s if n == w else 0 for n, s, w in zip(x.shape, row_major, other.shape[lead:])]
    return x.as_strided(other.shape, strides)


register(
    Exercise(
        id="07-expand-as-by-strides",
        title="expand_as, from its behaviour",
        statement=(
            "Describe first, in the stub's comment, which dims of x may stretch, what stride a stretched dim gets, "
            "what the result shares with x and which shapes it refuses; "
            "then write the smallest code with that behaviour. Given tensors x and other, return a view of x "
            "with other's shape (nothing copied, no new bytes) that holds what x.expand_as(other) holds: the "
            "shapes line up from the right, and x's values repeat along every dim that x lacks or has with size "
            "1. Which strides give that is yours to find (a dim of size 1 may have any stride). Where "
            "x.expand_as(other) refuses, refuse too: raise RuntimeError or ValueError. Rules: no expand (nor "
            "expand_as or broadcast_to); as_strided may set the strides."
        ),
        signature="def expand_as_by_strides(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor",
        reference=_expand_as,
        answer=_expand_as_by_strides,
        inputs=_expand_pairs,
        rules=Rules(forbid=("expand",)),
        memory="view",
        raises=(RuntimeError, ValueError),
        examples=(
            (torch.arange(6.0).view(3, 2).t(), torch.zeros(4, 2, 3)),  # transposed x, a new leading dim
            (torch.arange(3.0).view(3, 1), torch.zeros(3, 4)),  # a size-1 dim stretched
            (torch.arange(3.0), torch.zeros(2, 4)),  # refused: 3 is neither 1 nor 4
        ),
        hints=(
            "Line the two shapes up from the right: for each dim of other, which dim of x (if any) does it read, "
            "and how far must one step along it move in x's storage?",
            "A dim that x does not have, or has with size 1 while other's is bigger, repeats the same elements: "
            "what stride does that take? And which comparisons of the sizes must make you raise before building "
            "anything?",
        ),
        why=(
            "expand_as writes other's shape over x's storage: each new leading dim of size > 1, and each size-1 "
            "dim of x that other stretches, gets stride 0, so every index along it reads the same element (a dim "
            "of size 1 may have any stride: torch gives a new size-1 leading dim a non-zero one); the other dims "
            "keep x's strides. Nothing is copied.",
            "Only a size-1 dim can stretch (a stride-0 dim repeats one element), so any other mismatch, or x "
            "having more dims, is refused.",
        ),
        wrong=(
            (lambda x, other: x.expand_as(other), "rule `forbid expand`"),
            (lambda x, other: torch.broadcast_to(x, other.shape), "rule `forbid expand`"),
            (lambda x, other: _expand_as_by_strides(x, other).contiguous(), "rule `must_view`"),
            (_assumes_contiguous, "values differ"),  # only a transposed or expanded x shows it
            (_stretches_any_size, "must refuse"),
        ),
    )
)
