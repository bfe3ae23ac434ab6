"""Input validation shared by the helpers: one place that turns bad input into a clear error."""

from __future__ import annotations

from typing import Any

import torch


def require_strided_tensor(obj: Any, func: str, arg: str = "t") -> torch.Tensor:
    """Return ``obj`` if it is a dense (strided) tensor, else raise an error that says what to pass.

    >>> require_strided_tensor(torch.zeros(2), "layout").shape
    torch.Size([2])
    """
    if not isinstance(obj, torch.Tensor):
        hint = ""
        if isinstance(obj, (list, tuple)):
            hint = f" Wrap it first: {func}(torch.tensor({arg}))."
        elif type(obj).__module__ == "numpy":
            hint = f" Convert it without copying: {func}(torch.from_numpy({arg}))."
        raise TypeError(
            f"{func}() expects a torch.Tensor for `{arg}`, got {type(obj).__name__}.{hint}"
        )
    if obj.layout != torch.strided:
        raise ValueError(
            f"{func}() works on dense (strided) tensors; `{arg}` has layout {obj.layout}, "
            f"which has no strides. Pass `{arg}.to_dense()` to look at its dense layout."
        )
    if getattr(obj, "is_nested", False):
        raise ValueError(
            f"{func}() does not support nested tensors; pass one of its components, "
            f"e.g. `{arg}.unbind()[0]`."
        )
    return obj
