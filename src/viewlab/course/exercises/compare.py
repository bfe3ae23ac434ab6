"""How the checker copies inputs, describes tensors and compares a learner's result with the reference's.

:func:`fresh` copies an input with its memory layout kept (strides, offset, even stride 0), so the learner
and the reference each get their own; :func:`describe` is the one-line text of an input or a result shown
in a failure; :func:`compare` says how two results differ (type, length, shape, dtype, values), or ``None``.

>>> import torch
>>> x = torch.arange(3.0).expand(2, 3)
>>> fresh(x).stride(), fresh(x).data_ptr() != x.data_ptr()
((0, 1), True)
>>> compare(torch.zeros(2), torch.zeros(2), "the result", 0, 0) is None
True
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab._format import dtype_name

__all__ = ["fresh", "describe", "compare", "tensor_parts"]


def fresh(obj: Any) -> Any:
    """An independent copy with the *same* memory layout (strides, offset, even stride 0)."""
    if isinstance(obj, torch.Tensor) and obj.layout == torch.strided:
        storage = obj.detach().untyped_storage().clone()
        out = torch.empty(0, dtype=obj.dtype, device=obj.device).set_(
            storage, obj.storage_offset(), obj.size(), obj.stride()
        )
        return out.requires_grad_(obj.requires_grad) if obj.is_floating_point() else out
    if isinstance(obj, tuple):
        return tuple(fresh(o) for o in obj)
    if isinstance(obj, list):
        return [fresh(o) for o in obj]
    return obj


def _values_text(t: torch.Tensor) -> str:
    v = t.detach().cpu()
    if v.is_floating_point() and v.numel() and bool((v == v.round()).all()) and bool(v.abs().max() < 1e6):
        v = v.to(torch.int64)  # whole numbers print without ".0000"
    return str(v.tolist())


def describe(obj: Any) -> str:
    """One line: shape, dtype, stride, offset and values of a tensor (or ``repr`` of anything else).

    >>> describe(torch.arange(6.0).view(2, 3).t())
    'tensor shape (3, 2) float32, stride (1, 3), offset 0: [[0, 3], [1, 4], [2, 5]]'
    """
    if isinstance(obj, torch.Tensor):
        if obj.is_nested:
            return f"nested tensor of {obj.size(0)} tensors, {dtype_name(obj.dtype)}"
        if obj.layout != torch.strided:
            return f"{obj.layout} tensor shape {tuple(obj.shape)} {dtype_name(obj.dtype)}"
        if obj.device.type == "meta":
            return f"tensor shape {tuple(obj.shape)} {dtype_name(obj.dtype)} on meta (sizes only, no values)"
        grad = ", requires grad" if obj.requires_grad else ""
        return (
            f"tensor shape {tuple(obj.shape)} {dtype_name(obj.dtype)}{grad}, stride {tuple(obj.stride())}, "
            f"offset {obj.storage_offset()}: {_values_text(obj)}"
        )
    if isinstance(obj, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in obj):
        inner = "; ".join(describe(o) for o in obj)
        return f"{type(obj).__name__} of {len(obj)}: [{inner}]"
    return repr(obj)


def compare(expected: Any, got: Any, where: str, rtol: float, atol: float) -> str | None:
    """Why ``got`` differs from ``expected`` (None when they match).

    >>> compare(torch.zeros(2), torch.zeros(3), "the result", 0, 0)
    'the result has shape (3,), expected (2,)'
    """
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{where} should be a torch.Tensor, got {type(got).__name__}"
        kind = _kind_problem(expected, got, where)
        if kind is not None:
            return kind
        if tuple(got.shape) != tuple(expected.shape):
            return f"{where} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
        if got.dtype != expected.dtype:
            return f"{where} has dtype {dtype_name(got.dtype)}, expected {dtype_name(expected.dtype)}"
        if got.device != expected.device:
            return f"{where} is on {got.device}, expected {expected.device}"
        e, g = expected.detach(), got.detach()
        if e.is_floating_point() or e.is_complex():
            same = torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            same = g == e
        if not bool(same.all()):
            first = tuple(int(i) for i in (~same).nonzero()[0]) if same.dim() else ()
            n_bad = int((~same).sum())
            return (
                f"{where} has the right shape but {n_bad} of {same.numel()} values differ; "
                f"first at index {first}: expected {e[first].item()!r}, got {g[first].item()!r}"
            )
        return None
    if isinstance(expected, (tuple, list)) and not isinstance(expected, torch.Size):
        if not isinstance(got, (tuple, list)):
            return f"{where} should be a {type(expected).__name__} of {len(expected)}, got {type(got).__name__}"
        if len(got) != len(expected):
            return f"{where} has {len(got)} items, expected {len(expected)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            reason = compare(e, g, f"{where}[{i}]", rtol, atol)
            if reason:
                return reason
        return None
    if isinstance(got, torch.Tensor) and not isinstance(expected, torch.Tensor):
        return f"{where} should be {type(expected).__name__} {expected!r}, got a tensor"
    try:
        equal = bool(got == expected)
    except Exception:  # noqa: BLE001 - an uncomparable answer is a wrong answer
        equal = False
    if (
        not equal
        or type(got) is not type(expected)
        and not (isinstance(expected, (tuple, torch.Size)) and isinstance(got, (tuple, torch.Size)))
    ):
        return f"{where} is {got!r} ({type(got).__name__}), expected {expected!r} ({type(expected).__name__})"
    return None


def _kind_problem(expected: torch.Tensor, got: torch.Tensor, where: str) -> str | None:
    """A result of another kind than the reference's (nested, sparse, on meta), said before its values are read.

    >>> _kind_problem(torch.zeros(2), torch.zeros(2).to_sparse(), "the result")
    'the result is a torch.sparse_coo tensor, expected a dense (torch.strided) one: return a dense tensor (.to_dense())'
    """
    if got.is_nested != expected.is_nested:
        kinds = ("a nested tensor", "a regular tensor") if got.is_nested else ("a regular tensor", "a nested tensor")
        return f"{where} is {kinds[0]}, expected {kinds[1]}"
    if got.layout != expected.layout:
        fix = ": return a dense tensor (.to_dense())" if expected.layout == torch.strided else ""
        return f"{where} is a {got.layout} tensor, expected a {_layout_words(expected.layout)} one{fix}"
    if got.device.type == "meta" and expected.device.type != "meta":
        return (
            f"{where} is on meta (sizes only, no values), expected {expected.device}: compute it on the input's device"
        )
    return None


def _layout_words(layout: torch.layout) -> str:
    return "dense (torch.strided)" if layout == torch.strided else str(layout)


def tensor_parts(obj: Any) -> list[torch.Tensor]:
    """Every tensor in ``obj``, a tensor or nested tuples and lists of them, in order.

    >>> [t.shape for t in tensor_parts((torch.zeros(1), [torch.zeros(2), 3]))]
    [torch.Size([1]), torch.Size([2])]
    """
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [p for o in obj for p in tensor_parts(o)]
    return []
