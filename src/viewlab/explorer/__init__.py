"""The stride explorer: edit a view's shape, stride and offset and see which storage elements it reads.

All of it runs in the browser: the ES modules beside this file (arithmetic, the storage strip, style,
words, keyboard, the picture, the widget), joined by :mod:`.bundle` into one module with no dependency,
served by anywidget here and inlined in the book.
"""

from __future__ import annotations

import math
from typing import Any

import anywidget
import torch
import traitlets

from .._checks import entry, problem, require_int, require_tensor, type_error, value_error
from .._format import cell_value
from .bundle import bundle

__all__ = ["Explorer", "explore", "MAX_STORAGE"]
MAX_STORAGE = 1024  # storage elements drawn; a bigger one would not fit a page
_MAX_EXACT = 2**53 - 1  # the largest integer a browser holds exactly (torch's int64 holds more)


def _end(shape: list[int], stride: list[int], offset: int) -> int:
    """Storage elements a layout needs (torch's computeStorageNbytes, in elements): 0 when it has none."""
    return 0 if 0 in shape else offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))


class Explorer(anywidget.AnyWidget):
    """What :func:`explore` returns: the widget, and :meth:`tensor` for its current view in torch."""

    _esm = bundle()
    shape = traitlets.List(traitlets.Int()).tag(sync=True)
    stride = traitlets.List(traitlets.Int()).tag(sync=True)
    offset = traitlets.Int(0).tag(sync=True)
    size = traitlets.Int(0).tag(sync=True)  # storage elements
    values = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the storage's values as draw_layout writes them
    dtype = traitlets.Unicode("").tag(sync=True)  # e.g. "int64": the strides are also shown in bytes ("": unknown)
    itemsize = traitlets.Int(0).tag(sync=True)  # bytes per element of that dtype (0: unknown)
    _source: torch.Tensor | None = None

    def __repr__(self) -> str:  # the notebook's saved text for the widget: the layout (and values), no address
        text = f"shape={tuple(self.shape)}, stride={tuple(self.stride)}, offset={self.offset}, size={self.size}"
        text += f", dtype=torch.{self.dtype}" if self.dtype else ""
        return f"Explorer({text}, values={list(self.values)!r})" if self.values else f"Explorer({text})"

    @entry("Explorer.tensor")
    def tensor(self) -> torch.Tensor:
        """The current layout as a view of the tensor given to :func:`explore` (``torch.as_strided``)."""
        if self._source is None:
            raise problem(ValueError, "this explorer was made from a layout, not a tensor; use viewlab.explore(t).")
        where = f"shape={tuple(self.shape)}, stride={tuple(self.stride)}, offset={self.offset}"
        if len(self.stride) != len(self.shape) or min(self.stride, default=0) < 0:
            raise problem(ValueError, f"{where} is not a layout: give one stride >= 0 per dim.")
        if min(self.shape, default=0) < 0 or self.offset < 0:
            raise problem(ValueError, f"{where} is not a layout: sizes and the offset must be ints >= 0.")
        if max([*self.shape, *self.stride, self.offset], default=0) > _MAX_EXACT:
            raise problem(ValueError, f"{where} holds a number above {_MAX_EXACT} (2**53 - 1); edit it to fit.")
        if _end(self.shape, self.stride, self.offset) > self.size:
            raise problem(ValueError, f"{where} reads past the storage's {self.size} elements; edit it to fit.")
        return self._source.as_strided(self.shape, self.stride, self.offset)


def _ints(value: Any, arg: str) -> list[int]:
    if not isinstance(value, (list, tuple, torch.Size)) or len(value) > 6:
        raise type_error(arg, "a tuple of at most 6 ints", value, f"e.g. {arg}=(3, 4).")
    return [require_int(v, f"{arg}[{i}]", maximum=_MAX_EXACT) for i, v in enumerate(value)]


def _storage_values(t: torch.Tensor, size: int) -> list[str]:
    """The storage's elements as draw_layout's cells write them (none for a meta tensor: it has no values)."""
    if t.device.type == "meta" or t.layout != torch.strided or size == 0:
        return []
    flat = torch.as_strided(t.detach(), (size,), (1,), 0).cpu()
    return [cell_value(v) for v in flat.tolist()]


@entry("explore")
def explore(
    t: torch.Tensor | None = None, *, shape: Any = None, stride: Any = None, offset: int = 0, dtype: Any = None
) -> Explorer:
    """An explorer of ``t``'s layout (or of ``shape``/``stride``/``offset`` over the storage they need).

    In JupyterLab, VS Code and Colab it draws the storage and the view side by side, with ``t``'s values
    and ``@k`` in :func:`viewlab.draw_layout`'s palette and a legend of its marks, and lets you edit the
    layout or apply transpose, permute, slice, expand, unsqueeze, unfold, as_strided, view, reshape and
    contiguous. In a field, the Up and Down arrow keys step the number at the cursor (Shift: by 10);
    Undo, or Ctrl+Z inside the explorer, goes back one layout change. Pointing at an element, or moving
    to it with the arrow keys (the view is one Tab stop), shows its address:
    ``offset + i·stride[0] + j·stride[1] = k``. Strides and the offset count elements; with ``t``'s dtype
    (or ``dtype=`` for a layout alone) they are shown in bytes too. ``.tensor()`` gives the layout you
    reached back as a real view of ``t``. Every number must fit in 2**53 - 1, the browser's exact integers.

    >>> import torch, viewlab
    >>> x = torch.arange(12)
    >>> ex = viewlab.explore(x)
    >>> ex.shape, ex.stride = [3, 2], [4, 2]   # as if edited in the browser
    >>> torch.equal(ex.tensor(), x.view(3, 4)[:, ::2])
    True
    """
    offset = require_int(offset, "offset", maximum=_MAX_EXACT)
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise type_error("dtype", "a torch.dtype (or None)", dtype, "e.g. dtype=torch.float32.")
    if t is not None:
        t = require_tensor(t, "t")
        if shape is not None or stride is not None or offset != 0 or dtype is not None:
            raise problem(ValueError, "takes a tensor `t` or a layout (shape=, stride=, offset=, dtype=), not both.")
        shape, stride, offset, dtype = list(t.shape), list(t.stride()), t.storage_offset(), t.dtype
    shape = _ints((2, 3) if shape is None else shape, "shape")
    contiguous = [math.prod(max(n, 1) for n in shape[d + 1 :]) for d in range(len(shape))]
    stride = _ints(contiguous if stride is None else stride, "stride")
    if len(stride) != len(shape):
        raise value_error("stride", f"{len(shape)} ints, one per dim of shape {tuple(shape)}", stride)
    end = _end(shape, stride, offset)
    if end > _MAX_EXACT:
        fix = f"Keep every address at most {_MAX_EXACT} (2**53 - 1), the largest integer a browser holds exactly."
        raise problem(ValueError, f"this layout reaches storage element {end - 1}. {fix}")
    size = end if t is None else t.untyped_storage().nbytes() // t.element_size()
    if size > MAX_STORAGE:
        fix = "Pass a smaller one, e.g. torch.arange(12).view(3, 4)."
        raise problem(ValueError, f"draws at most {MAX_STORAGE} storage elements; this layout spans {size}. {fix}")
    values = [] if t is None else _storage_values(t, size)
    itemsize = 0 if dtype is None else torch.empty((), dtype=dtype, device="meta").element_size()
    name = "" if dtype is None else str(dtype).removeprefix("torch.")
    widget = Explorer(
        shape=shape, stride=stride, offset=offset, size=size, values=values, dtype=name, itemsize=itemsize
    )
    widget._source = t
    return widget
