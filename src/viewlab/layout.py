"""How a tensor sits in memory: shape, stride, offset and the bytes behind them.

A strided tensor is a *window* onto a flat, 1-D block of memory (its storage). Element
``t[i0, i1, ...]`` lives at storage index ``storage_offset + i0*stride[0] + i1*stride[1] + ...``.
:func:`layout` collects those numbers, plus what they cost in bytes, into one readable object.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import torch

from ._checks import require_strided_tensor

__all__ = ["Layout", "layout", "storage_indices"]


@dataclass(frozen=True)
class Layout:
    """Memory layout of a strided tensor (see :func:`layout`). All byte counts are exact.

    Attributes:
        shape: sizes of each dimension.
        stride: elements to step in storage for +1 along each dimension (0 = broadcast/expanded).
        storage_offset: storage index of element ``[0, 0, ...]``.
        dtype, device: as on the tensor.
        itemsize: bytes per element.
        numel: number of logical elements.
        logical_bytes: ``numel * itemsize`` -- what a contiguous copy of this tensor would occupy.
        span_bytes: bytes from the first to the last storage element this view can reach.
        storage_bytes: size of the whole underlying storage (shared by every view of it).
        is_contiguous: ``t.is_contiguous()`` (row-major, no gaps, no overlap).
        is_view: the tensor was produced by a view op from another tensor (``t._base is not None``).
        broadcast_dims: dimensions with stride 0 and size > 1 (one memory element read many times).
    """

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: torch.dtype
    device: torch.device
    itemsize: int
    numel: int
    logical_bytes: int
    span_bytes: int
    storage_bytes: int
    is_contiguous: bool
    is_view: bool
    broadcast_dims: tuple[int, ...]

    @property
    def stride_bytes(self) -> tuple[int, ...]:
        """Strides in bytes instead of elements (what NumPy's ``.strides`` reports)."""
        return tuple(s * self.itemsize for s in self.stride)

    @property
    def overlaps(self) -> bool:
        """True when two different indices reach the same storage element (e.g. after ``expand``)."""
        return len(self.broadcast_dims) > 0 or self.span_bytes < self.logical_bytes

    def _rows(self) -> list[tuple[str, str]]:
        dtype = str(self.dtype).replace("torch.", "")
        return [
            ("shape", str(self.shape)),
            ("stride (elements)", str(self.stride)),
            ("stride (bytes)", str(self.stride_bytes)),
            ("storage offset", str(self.storage_offset)),
            ("dtype / itemsize", f"{dtype} / {self.itemsize} B"),
            ("contiguous", str(self.is_contiguous)),
            ("is a view", str(self.is_view)),
            ("broadcast dims (stride 0)", str(self.broadcast_dims) if self.broadcast_dims else "none"),
            ("logical bytes (numel x itemsize)", f"{self.logical_bytes:,}"),
            ("bytes the view spans", f"{self.span_bytes:,}"),
            ("bytes of its storage", f"{self.storage_bytes:,}"),
        ]

    def __str__(self) -> str:
        rows = self._rows()
        width = max(len(k) for k, _ in rows)
        body = "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)
        return f"Layout on {self.device}\n{body}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'><code>{html.escape(v)}</code></td></tr>"
            for k, v in self._rows()
        )
        return f"<table><caption>Layout on {html.escape(str(self.device))}</caption>{cells}</table>"


def _span_elements(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    if any(n == 0 for n in shape):
        return 0
    # PyTorch strides are never negative, so the first element is the lowest address.
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def layout(t: Any) -> Layout:
    """Describe how ``t`` maps onto its storage.

    Works for any dense tensor on any device, including ``meta`` tensors (no data is read).

    >>> x = torch.zeros(2, 3)
    >>> layout(x.t()).stride
    (1, 3)
    >>> e = torch.zeros(1, 4).expand(3, 4)
    >>> (layout(e).logical_bytes, layout(e).span_bytes, layout(e).broadcast_dims)
    (48, 16, (0,))
    """
    t = require_strided_tensor(t, "layout")
    shape = tuple(t.shape)
    stride = tuple(t.stride())
    itemsize = t.element_size()
    return Layout(
        shape=shape,
        stride=stride,
        storage_offset=t.storage_offset(),
        dtype=t.dtype,
        device=t.device,
        itemsize=itemsize,
        numel=t.numel(),
        logical_bytes=t.numel() * itemsize,
        span_bytes=_span_elements(shape, stride) * itemsize,
        storage_bytes=t.untyped_storage().nbytes(),
        is_contiguous=t.is_contiguous(),
        is_view=t._base is not None,
        broadcast_dims=tuple(d for d, (n, s) in enumerate(zip(shape, stride)) if s == 0 and n > 1),
    )


def storage_indices(t: Any) -> torch.Tensor:
    """For each element of ``t``, the index of the storage element it reads (same shape as ``t``).

    This is the stride formula evaluated for every index at once, so it is exact by construction.

    >>> storage_indices(torch.zeros(2, 3).t()).tolist()
    [[0, 3], [1, 4], [2, 5]]
    >>> storage_indices(torch.zeros(3)[1:].expand(2, 2)).tolist()
    [[1, 2], [1, 2]]
    """
    t = require_strided_tensor(t, "storage_indices")
    n_storage = t.untyped_storage().nbytes() // t.element_size()
    return torch.arange(max(n_storage, 1)).as_strided(tuple(t.shape), t.stride(), t.storage_offset())
