"""How a tensor sits in memory: shape, stride, offset, the bytes behind them, and who else uses them.

A strided tensor is a *window* onto a flat, 1-D block of memory (its storage). Element
``t[i0, i1, ...]`` lives at storage index ``storage_offset + i0*stride[0] + i1*stride[1] + ...``.
:func:`layout` collects those numbers, plus what they cost in bytes, into one readable object;
:func:`storage_indices` evaluates the formula for every element; :func:`shares_storage` says whether
two tensors (or a tensor and a NumPy array) use the same memory.

>>> x = torch.arange(6)
>>> layout(x.view(2, 3).t()).stride, storage_indices(x[1::2]).tolist(), shares_storage(x, x[2:])
((1, 3), [1, 3, 5], True)
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

import torch

from ._checks import entry, problem, require_allocation, require_tensor
from ._format import dtype_name

__all__ = ["Layout", "layout", "storage_indices", "shares_storage"]


@dataclass(frozen=True)
class Layout:
    """Memory layout of a strided tensor (see :func:`layout`). All byte counts are exact.

    >>> lay = layout(torch.zeros(1, 3).expand(4, 3))  # 12 logical elements, 3 in storage
    >>> isinstance(lay, Layout), lay.stride, lay.logical_bytes, lay.storage_bytes
    (True, (0, 1), 48, 12)
    """

    shape: tuple[int, ...]  #: sizes of each dimension
    stride: tuple[int, ...]  #: elements to step in storage for +1 along each dimension (0 = broadcast/expanded)
    storage_offset: int  #: storage index of element ``[0, 0, ...]``
    dtype: torch.dtype  #: as on the tensor
    device: torch.device  #: as on the tensor
    itemsize: int  #: bytes per element
    numel: int  #: number of logical elements
    logical_bytes: int  #: ``numel * itemsize``: what a contiguous copy of this tensor would occupy
    span_bytes: int  #: bytes from the first to the last storage element this view can reach
    storage_bytes: int  #: size of the whole underlying storage (shared by every view of it)
    is_contiguous: bool  #: ``t.is_contiguous()`` (row-major, no gaps, no overlap)
    is_view: bool  #: the tensor was produced by a view op from another tensor (``t._base is not None``)
    broadcast_dims: tuple[int, ...]  #: dims with stride 0 and size > 1 (one memory element read many times)

    @property
    def stride_bytes(self) -> tuple[int, ...]:
        """Strides in bytes instead of elements (what NumPy's ``.strides`` reports)."""
        return tuple(s * self.itemsize for s in self.stride)

    @property
    def overlaps(self) -> bool:
        """True when two different indices reach the same storage element (e.g. after ``expand``).

        Decided exactly from shape and stride by :func:`_overlaps` (see there for the method), not
        guessed from byte counts: sizes (3, 2), strides (3, 6), offset 2 read element 8 twice, even
        though the view spans more bytes than it holds.

        >>> x = torch.zeros(20)
        >>> layout(x.as_strided((3, 2), (3, 6), 2)).overlaps, layout(x.as_strided((3, 2), (2, 7))).overlaps
        (True, False)
        """
        return _overlaps(self.shape, self.stride)

    def _rows(self) -> list[tuple[str, str]]:
        return [
            ("shape", str(self.shape)),
            ("stride (elements)", str(self.stride)),
            ("stride (bytes)", str(self.stride_bytes)),
            ("storage offset", str(self.storage_offset)),
            ("dtype / itemsize", f"{dtype_name(self.dtype)} / {self.itemsize} B"),
            ("contiguous", str(self.is_contiguous)),
            ("is a view", str(self.is_view)),
            ("broadcast dims (stride 0)", str(self.broadcast_dims) if self.broadcast_dims else "none"),
            ("logical bytes (numel x itemsize)", f"{self.logical_bytes:,}"),
            ("bytes the view spans", f"{self.span_bytes:,}"),
            ("bytes of its storage", f"{self.storage_bytes:,}"),
        ]

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self._rows())
        return f"Layout on {self.device}\n" + "\n".join(f"  {k:<{width}}  {v}" for k, v in self._rows())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'><code>{html.escape(v)}</code></td></tr>"
            for k, v in self._rows()
        )
        return f"<table><caption>Layout on {html.escape(str(self.device))}</caption>{cells}</table>"


# Exact overlap detection -----------------------------------------------------------------------------
# Two index tuples i != j read the same element iff  sum_d (i_d - j_d) * stride_d = 0, i.e. iff some
# integer vector c != 0 with |c_d| <= size_d - 1 has  sum_d c_d * stride_d = 0  (a bounded subset-sum
# question; the offset never matters). The method, cheapest exact answer first:
#   1. sizes 0 (nothing to read) and dims of size 1 (a single index) drop out;
#   2. a stride 0 on a dim of size > 1 reads one element repeatedly: overlap;
#   3. fewer reachable addresses than elements (span < numel): overlap by the pigeonhole principle;
#   4. sort the dims by stride: if each stride is larger than the span of all smaller-stride dims
#      ("nested" strides: every contiguous, sliced, transposed, permuted, unfolded-without-overlap
#      view), the address is a mixed-radix number and no two indices collide: no overlap;
#   5. dividing every stride by their gcd changes no collision; then, with two dims left: c1*s1 = -c2*s2 has its smallest solution at |c1| = s2/g, |c2| = s1/g (g = gcd),
#      so there is overlap iff s2/g <= n1 - 1 and s1/g <= n2 - 1;
#   6. otherwise, with dims sorted by stride, let k be the last dim with c_k != 0 and c_k > 0
#      (negate c otherwise): overlap iff some c_k*s_k (1 <= c_k <= n_k - 1) is a sum the smaller dims
#      reach, sum_{d<k} c_d s_d with |c_d| <= n_d - 1. Those sums are kept as a bitset (a Python int),
#      built with O(log n) shifts per dim; exact, O(span * number of dims / 64) word operations;
#   7. if that bitset would be huge (span over 2**24), enumerate all storage indices and look for a
#      repeat (exact, O(numel log numel)).
_MAX_BITSET_SPAN = 2**24


def _multiples(bits: int, step: int, count: int) -> int:
    """The set ``bits`` with 0, step, 2*step, ..., count*step added to each member (bitsets as ints)."""
    acc, done, power = bits, 0, 1
    # binary splitting: after adding 1, 2, 4, ... more copies, every multiple 0..done is in the set
    while done < count:
        take = min(power, count - done)
        acc |= acc << (take * step)
        done += take
        power *= 2
    return acc


def _overlaps(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Exact: do two different indices of a (shape, stride) view reach one storage element? See above.

    >>> _overlaps((3, 2), (3, 6)), _overlaps((2, 2, 2), (3, 4, 5)), _overlaps((2, 2, 2), (1, 2, 3))
    (True, False, True)
    """
    if any(n == 0 for n in shape):
        return False
    dims = sorted((s, n) for n, s in zip(shape, stride) if n > 1)
    if any(s == 0 for s, _ in dims):
        return True
    numel = math.prod(n for _, n in dims)
    span = 1 + sum((n - 1) * s for s, n in dims)
    if span < numel:
        return True
    below = 0  # span of the smaller-stride dims, minus 1
    nested = True
    for s, n in dims:
        if s <= below:
            nested = False
            break
        below += (n - 1) * s
    if nested:
        return False
    g = math.gcd(*(s for s, _ in dims))  # a common factor of all strides changes no collision
    dims = [(s // g, n) for s, n in dims]
    span = 1 + sum((n - 1) * s for s, n in dims)
    if len(dims) == 2:
        (s1, n1), (s2, n2) = dims
        g = math.gcd(s1, s2)
        return s2 // g <= n1 - 1 and s1 // g <= n2 - 1
    if span <= _MAX_BITSET_SPAN:
        # sums live in [-span, span]; bit (x + span) stands for sum x
        width_mask = (1 << (2 * span + 1)) - 1
        sums = 1 << span  # only the empty sum, 0
        for s, n in dims:
            targets = _multiples(1, s, n - 1) & ~1  # c*s for c = 1..n-1
            if (sums >> span) & targets:
                return True
            # add c*s for every c in -(n-1)..(n-1): add 0..2(n-1) multiples, then subtract (n-1)*s
            sums = (_multiples(sums, s, 2 * (n - 1)) >> ((n - 1) * s)) & width_mask
        return False
    index = torch.zeros((), dtype=torch.int64)
    for s, n in dims:
        index = index[..., None] + torch.arange(n, dtype=torch.int64) * s
    flat = index.reshape(-1)
    return bool(torch.unique(flat).numel() < flat.numel())


@entry("layout")
def layout(t: Any) -> Layout:
    """Describe how ``t`` maps onto its storage: any dense tensor on any device, ``meta`` too (no data is read).

    >>> e = torch.zeros(1, 4).expand(3, 4)
    >>> layout(torch.zeros(2, 3).t()).stride, layout(e).logical_bytes, layout(e).span_bytes, layout(e).broadcast_dims
    ((1, 3), 48, 16, (0,))
    """
    t = require_tensor(t, "t", quantized=True, storage=True)
    shape, stride, size, numel = tuple(t.shape), tuple(t.stride()), t.element_size(), t.numel()
    # PyTorch strides are never negative, so the first element is the lowest address.
    span = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    where = (shape, stride, t.storage_offset(), t.dtype, t.device, size, numel, numel * size, span * size)
    flags = (t.untyped_storage().nbytes(), t.is_contiguous(), t._base is not None)
    return Layout(*where, *flags, tuple(d for d, (n, s) in enumerate(zip(shape, stride)) if s == 0 and n > 1))


@entry("storage_indices")
def storage_indices(t: Any) -> torch.Tensor:
    """For each element of ``t``, the index of the storage element it reads: an int64 CPU tensor of ``t``'s shape.

    The stride formula evaluated for every index at once, so exact by construction (no data is read: ``t``
    may be on ``meta`` or CUDA).

    >>> storage_indices(torch.zeros(2, 3).t()).tolist(), storage_indices(torch.zeros(3)[1:].expand(2, 2)).tolist()
    ([[0, 3], [1, 4], [2, 5]], [[1, 2], [1, 2]])
    """
    t = require_tensor(t, "t", quantized=True, storage=True)
    require_allocation(8 * t.numel(), f"the storage indices of a tensor of shape {tuple(t.shape)}")
    # offset + sum_d i_d * stride_d, one broadcast term per dim: costs numel int64s, never the storage.
    index = torch.full((), t.storage_offset(), dtype=torch.int64)
    for d, (n, s) in enumerate(zip(t.shape, t.stride())):
        index = index + (torch.arange(n, dtype=torch.int64) * s).view([n if i == d else 1 for i in range(t.dim())])
    return index.expand(tuple(t.shape)).contiguous()


def _memory_range(obj: Any, arg: str) -> tuple[str, int, int, object]:
    """(device, first byte address, one-past-last address, identity of the storage object)."""
    import numpy as np

    if isinstance(obj, np.ndarray):
        root = obj
        while isinstance(root.base, np.ndarray):  # walk views back to the array that owns the buffer
            root = root.base
        lo, hi = np.lib.array_utils.byte_bounds(root) if hasattr(np.lib, "array_utils") else np.byte_bounds(root)
        return "cpu", lo, hi, None
    t = require_tensor(obj, arg, quantized=True, storage=True)
    if t.device.type == "meta":
        text = f"`{arg}` is a meta tensor, which has no memory to share."
        raise problem(ValueError, f"{text} Compare tensors that hold data (create them on 'cpu' or 'cuda').")
    storage = t.untyped_storage()
    return str(t.device), storage.data_ptr(), storage.data_ptr() + storage.nbytes(), storage._cdata


@entry("shares_storage")
def shares_storage(a: Any, b: Any) -> bool:
    """True if ``a`` and ``b`` read and write the same underlying memory.

    It compares memory *blocks*, not elements: True when both use the same storage object (a view of the
    other, any offset, or both views of a third, even where their elements are disjoint), else when the byte
    ranges of their blocks overlap. A tensor's block is its whole storage; a NumPy array's is the buffer of
    the array that owns it (its ``.base`` chain). ``torch.from_numpy(arr)`` makes a storage of its own that
    spans ``arr``'s bytes only, so two rows taken through ``from_numpy`` may not share where the same rows of
    one tensor, or of one array, do. For shared *elements*, ask ``np.shares_memory``.

    >>> x = torch.arange(6)
    >>> shares_storage(x, x[2:].view(2, 2)), shares_storage(x, x.clone()), shares_storage(x, x.numpy())
    (True, False, True)
    >>> import numpy as np
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> shares_storage(torch.from_numpy(a)[0], torch.from_numpy(a)[1]), shares_storage(a[0], a[1])
    (True, True)
    >>> shares_storage(torch.from_numpy(a[0]), torch.from_numpy(a[1]))  # two storages, disjoint bytes
    False
    """
    dev_a, lo_a, hi_a, id_a = _memory_range(a, "a")
    dev_b, lo_b, hi_b, id_b = _memory_range(b, "b")
    if dev_a != dev_b:
        return False
    if id_a is not None and id_a == id_b:  # same storage object; also right for empty storages
        return True
    # Empty buffers overlap nothing; otherwise half-open byte ranges must intersect.
    return lo_a < hi_a and lo_b < hi_b and lo_a < hi_b and lo_b < hi_a
