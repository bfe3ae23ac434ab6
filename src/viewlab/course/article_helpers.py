"""The source articles' helper logic, rebuilt in our own code -- faithfully, then corrected.

The course was prompted by two blog posts (in Chinese): "PyTorch张量扩展的隐藏技巧：用expand()高效实现
数据复制与广播" (on ``expand()``) and "PyTorch张量广播的幕后功臣：手把手教你用expand_as()实现高效数据对齐"
(on ``expand_as()``). The second one offers a shape checker meant to predict whether
``a.expand_as(b)`` will work, and a ``safe_expand_as`` built on it; it also states the broadcasting
rules in three steps. Here each is re-implemented from its description, *including its flaw*, next
to a corrected version; ``tests/test_myths.py`` compares both with what PyTorch actually does on
thousands of shape pairs, and :mod:`viewlab.course.claims` judges the articles' claims with them.

>>> article_check_expandable((1, 3), (3,))   # the article's logic says yes ...
True
>>> can_expand((1, 3), (3,))                 # ... but PyTorch refuses (more dims than the target)
False
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "article_check_expandable",
    "can_expand",
    "expand_problem",
    "safe_expand_as",
    "article_broadcast_shape",
    "torch_can_expand",
]


def _shape(obj: Any, arg: str, func: str) -> tuple[int, ...]:
    """Accept a tensor, torch.Size or a sequence of ints; return the shape as a tuple."""
    if isinstance(obj, torch.Tensor):
        return tuple(obj.shape)
    if (
        isinstance(obj, Sequence)
        and not isinstance(obj, (str, bytes))
        and all(isinstance(n, int) and not isinstance(n, bool) for n in obj)
    ):
        bad = [n for n in obj if n < 0]
        if bad:
            raise ValueError(f"{func}(): `{arg}` = {tuple(obj)} has negative sizes {bad}; sizes must be >= 0.")
        return tuple(obj)
    raise TypeError(f"{func}(): `{arg}` must be a tensor or a shape (a tuple of ints), got {obj!r}.")


def article_check_expandable(a: Any, b: Any) -> bool:
    """The article's rule, rebuilt faithfully: walk both shapes from the right, pairing dimensions
    (``zip`` stops at the shorter shape); fail only if a pair differs and ``a``'s size is not 1.

    Flaw: when ``a`` has *more* dimensions than ``b``, the extra leading ones are never looked at,
    so it answers True although ``a.expand_as(b)`` raises.

    >>> article_check_expandable((3, 1), (3, 4)), article_check_expandable((3, 2), (3, 4))
    (True, False)
    """
    sa, sb = _shape(a, "a", "article_check_expandable"), _shape(b, "b", "article_check_expandable")
    return all(size == 1 or size == target for size, target in zip(reversed(sa), reversed(sb)))


def expand_problem(a: Any, b: Any) -> str | None:
    """Why ``a`` cannot be expanded to shape ``b`` (None when it can), in PyTorch's own terms.

    ``t.expand(*target)`` works exactly when ``t`` has no more dimensions than ``target`` and, aligning
    from the right, every size of ``t`` equals the target size or is 1. New leading dimensions may
    have any size (including 0); a size-1 dimension may become any size, including 0.

    >>> print(expand_problem((2, 3), (4, 3)))
    dimension 0 of a has size 2 but the target has 4; only size-1 dimensions can be expanded
    """
    sa, sb = _shape(a, "a", "expand_problem"), _shape(b, "b", "expand_problem")
    if len(sa) > len(sb):
        return (
            f"a has {len(sa)} dimensions but the target only {len(sb)}; expand can add leading "
            "dimensions, never remove them (squeeze first)"
        )
    lead = len(sb) - len(sa)
    for i, (n_a, n_b) in enumerate(zip(sa, sb[lead:])):
        if n_a != n_b and n_a != 1:
            return f"dimension {i} of a has size {n_a} but the target has {n_b}; only size-1 dimensions can be expanded"
    return None


def can_expand(a: Any, b: Any) -> bool:
    """Corrected checker: True exactly when ``a.expand_as(b)`` (or ``a.expand(b_shape)``) works.

    >>> can_expand((3, 1), (2, 3, 4)), can_expand((1, 3), (3,)), can_expand((1,), (0,))
    (True, False, True)
    """
    return expand_problem(a, b) is None


def safe_expand_as(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a.expand_as(b)`` with an error that names both shapes and the offending dimension.

    >>> safe_expand_as(torch.zeros(3, 1), torch.zeros(3, 4)).stride()
    (1, 0)
    """
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(f"safe_expand_as() expects two tensors, got {type(a).__name__} and {type(b).__name__}.")
    problem = expand_problem(a, b)
    if problem:
        raise ValueError(f"cannot expand a of shape {tuple(a.shape)} to b's shape {tuple(b.shape)}: {problem}.")
    return a.expand_as(b)


def article_broadcast_shape(a: Any, b: Any) -> tuple[int, ...] | None:
    """The article's three broadcasting rules, applied literally: compare from the last dimension;
    sizes must be equal or one of them 1; a missing dimension counts as size 1. Returns the
    broadcast shape, or None when the rules say the shapes are incompatible.

    >>> article_broadcast_shape((3, 1), (1, 4)), article_broadcast_shape((2,), (3,))
    ((3, 4), None)
    """
    sa = _shape(a, "a", "article_broadcast_shape")
    sb = _shape(b, "b", "article_broadcast_shape")
    n = max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb  # rule 3
    out = []
    for x, y in zip(reversed(pa), reversed(pb)):  # rule 1
        if x != y and x != 1 and y != 1:  # rule 2
            return None
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def torch_can_expand(a: Sequence[int], b: Sequence[int]) -> bool:
    """Ground truth: ask PyTorch itself, on a ``meta`` tensor (no memory is allocated).

    >>> torch_can_expand((1, 3), (3,)), torch_can_expand((3, 1), (3, 4))
    (False, True)
    """
    sa, sb = _shape(a, "a", "torch_can_expand"), _shape(b, "b", "torch_can_expand")
    try:
        torch.empty(sa, device="meta").expand(sb)
    except RuntimeError:
        return False
    return True
