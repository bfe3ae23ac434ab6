"""Do two tensors (or a tensor and a NumPy array) use the same memory?"""

from __future__ import annotations

from typing import Any

import torch  # noqa: F401 - the docstring examples use it (doctest runs in this module's namespace)

from ._checks import require_strided_tensor

__all__ = ["shares_storage"]


def _memory_range(obj: Any, arg: str) -> tuple[str, int, int, object]:
    """(device, first byte address, one-past-last address, identity of the storage object)."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        np = None
    if np is not None and isinstance(obj, np.ndarray):
        root = obj
        while isinstance(root.base, np.ndarray):  # walk views back to the array that owns the buffer
            root = root.base
        lo, hi = np.lib.array_utils.byte_bounds(root) if hasattr(np.lib, "array_utils") else np.byte_bounds(root)
        return "cpu", lo, hi, None
    t = require_strided_tensor(obj, arg)
    if t.device.type == "meta":
        raise ValueError(
            f"shares_storage(): `{arg}` is a meta tensor, which has no memory to share. "
            "Compare tensors that hold data (create them on 'cpu' or 'cuda')."
        )
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return str(t.device), start, start + storage.nbytes(), storage._cdata


def shares_storage(a: Any, b: Any) -> bool:
    """True if ``a`` and ``b`` read and write the same underlying memory.

    Two tensors share storage when one is a view of the other (any offset), or both are views of a
    third. NumPy arrays are accepted too, so ``torch.from_numpy`` and ``Tensor.numpy()`` sharing
    can be checked: there, "same memory" means the byte ranges of the buffers overlap.

    >>> x = torch.arange(6)
    >>> shares_storage(x, x[2:].view(2, 2))
    True
    >>> shares_storage(x, x.clone())
    False
    >>> shares_storage(x, x.numpy())
    True
    """
    dev_a, lo_a, hi_a, id_a = _memory_range(a, "a")
    dev_b, lo_b, hi_b, id_b = _memory_range(b, "b")
    if dev_a != dev_b:
        return False
    if id_a is not None and id_a == id_b:  # same storage object; also right for empty storages
        return True
    # Empty buffers overlap nothing; otherwise half-open byte ranges must intersect.
    return lo_a < hi_a and lo_b < hi_b and lo_a < hi_b and lo_b < hi_a
