"""Measure the memory a block of code allocates: ``with viewlab.measure() as m: ...``.

Two backends (:mod:`.backends`), chosen from ``device`` and always named in ``m.backend``:

* **tensor storages** (the default, ``device=None``: storages on every device; ``device="cpu"`` or another device: only
  that one): every operator run inside the block passes a ``TorchDispatchMode`` (:mod:`._tracker`); each output whose
  storage is new is counted with its exact ``nbytes``, and subtracted again when its last tensor dies. So ``expand``
  counts 0 bytes, ``repeat`` counts ``numel * itemsize``, and a temporary freed inside the block shows up in the peak
  but not in what is still allocated. It sees what operators *return*: kernels' scratch buffers, storages made before
  the block and other threads are outside it. (``tracemalloc`` is no substitute: it sees only Python's own allocator,
  never torch's.)
* **cuda allocator** (``device="cuda"``, opt-in): the caching allocator's counters. *Allocated* counts whole blocks
  (multiples of 512 bytes), as ``torch.cuda.memory_allocated()`` does; ``requested_bytes`` the exact sizes, printed
  beside it where the two differ; ``reserved_bytes`` what the allocator holds from the driver. The peak is the
  allocator's own counter, so no short-lived peak is missed -- but it is **process-global**: ``measure`` resets it on
  entry (``torch.cuda.reset_peak_memory_stats``), and ``m.cuda_counters_before`` keeps what your counters read before.
  Nested windows (a ``measure`` inside another, or inside a ``MemoryMonitor``) never lose a peak: :mod:`._cuda`.

The default is device-agnostic on purpose: the same cell, run on a laptop or on a Colab GPU runtime, reports the same
exact bytes. Nothing here initialises CUDA at import time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .._checks import entry, problem, require_bool, type_error, value_error
from ._cuda import _CUDA_LEDGER, KINDS
from ._tracker import OpRecord
from .backends import Backend, Reading, open_backend, rss_bytes

__all__ = ["measure", "Measurement", "OpRecord", "resolve_device", "rss_bytes", "cuda_process_peak"]


@entry("resolve_device")
def resolve_device(device: Any = None) -> torch.device:
    """Turn ``device`` (None, a string, or a ``torch.device``) into the device :func:`measure` tracks: ``None``
    picks ``cuda`` when CUDA is available, else ``cpu``.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device is None:
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if not isinstance(device, (str, torch.device)):  # a bare number (bool included) gets a hint
        fix = "Pass a device name such as 'cuda:0' or 'cpu', not a bare number." if isinstance(device, int) else ""
        raise type_error("device", "None, a device name such as 'cpu' or 'cuda:0', or a torch.device", device, fix)
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise value_error("device", "a device PyTorch knows: None (auto), 'cpu', 'cuda' or 'cuda:0'", device) from None
    if dev.type == "meta":
        raise problem(ValueError, "device='meta': meta tensors have no memory to measure; pass 'cpu' or 'cuda'.")
    if dev.type not in ("cpu", "cuda"):
        raise problem(ValueError, f"device={device!r}: only 'cpu' and 'cuda' memory can be measured here.")
    if dev.type == "cuda" and not torch.cuda.is_available():
        no_cuda, fix = "CUDA is not available here", "Pass device='cpu' (or None) to measure tensor storages instead."
        raise problem(RuntimeError, f"device={device!r}, but {no_cuda} (torch.cuda.is_available() is False). {fix}")
    return torch.device("cpu") if dev.type == "cpu" else dev  # CPU tensors report index None; 'cpu:0' is that one


@entry("cuda_process_peak")
def cuda_process_peak(device: Any = "cuda") -> dict[str, int]:
    """Peak CUDA bytes of this process so far, as if viewlab had never reset torch's peak counters: ``allocated``
    (blocks, like ``torch.cuda.max_memory_allocated``), ``requested`` (exact sizes) and ``reserved``.

    >>> cuda_process_peak() if torch.cuda.is_available() else "needs CUDA"  # doctest: +SKIP
    """
    dev = resolve_device(device)
    if dev.type != "cuda":
        raise problem(ValueError, f"device={device!r}: pass a CUDA device such as 'cuda' or 'cuda:0'.")
    dev = torch.device("cuda", torch.cuda.current_device()) if dev.index is None else dev
    return {k: _CUDA_LEDGER.process_peak(dev, f"{k}_bytes.all.peak") for k in KINDS}


@dataclass
class Measurement:
    """What :func:`measure` found. Read it after the ``with`` block (inside it, values are live).

    Attributes:
        backend: what measured, e.g. ``"tensor storages (cpu)"`` or ``"cuda allocator (cuda:0)"``; note: its caveats.
        allocated_bytes / peak_bytes: net bytes still held at exit / the highest point above the start inside the
            block. ``requested_bytes`` / ``requested_peak_bytes`` (the same in exact sizes), ``reserved_bytes`` and
            ``cuda_counters_before`` (your ``torch.cuda`` counters before the peak's reset): CUDA's, as above.
        ops: with ``log_ops=True``, one :class:`OpRecord` per operator, in order; else ``[]``.
    """

    backend: str
    device: torch.device | None  # None: tensor storages on every device
    note: str
    ops: list[OpRecord] = field(default_factory=list)
    cuda_counters_before: dict[str, int] | None = None
    _final: Reading = Reading(0, 0, 0, 0)  # since_start() at exit
    _live: Backend | None = field(default=None, repr=False)  # inside the block: the backend, read live

    def _reading(self) -> Reading:
        return self._live.since_start() if self._live is not None else self._final

    allocated_bytes = property(lambda self: self._reading().allocated)
    peak_bytes = property(lambda self: self._reading().peak)
    requested_bytes = property(lambda self: self._reading().requested)
    requested_peak_bytes = property(lambda self: self._reading().requested_peak)
    reserved_bytes = property(lambda self: self._reading().reserved)

    def summary(self) -> str:
        """One line: backend, allocated, peak (and reserved on CUDA).

        >>> with measure(device="cpu") as m:
        ...     y = torch.zeros(256)
        >>> m.summary()
        'tensor storages (cpu): allocated 1,024 B, peak 1,024 B'
        """
        r = self._reading()  # the exact (requested) size beside the block-rounded one where the two differ
        alloc = f"{r.allocated:,} B" + (f" (requested {r.requested:,} B)" if r.requested != r.allocated else "")
        peak = f"{r.peak:,} B" + (f" (requested {r.requested_peak:,} B)" if r.requested_peak != r.peak else "")
        text = f"{self.backend}: allocated {alloc}, peak {peak}"
        return text + (f", reserved {r.reserved:+,} B" if r.reserved is not None else "")

    __str__ = summary

    def __repr__(self) -> str:
        r = self._reading()
        extra = f", requested_bytes={r.requested}" if r.requested != r.allocated else ""
        extra += f", reserved_bytes={r.reserved}" if r.reserved is not None else ""
        ops = f", ops=[{len(self.ops)} records]" if self.ops else ""
        return f"Measurement(backend={self.backend!r}, allocated_bytes={r.allocated}, peak_bytes={r.peak}{extra}{ops})"


class measure:  # noqa: N801 - used like a function: ``with measure() as m``
    """Context manager: how many bytes the code inside allocates (net) and at its peak, on the backend that
    ``device`` picks (see the module docstring). ``log_ops=True`` also records one :class:`OpRecord` per operator.

    >>> x = torch.ones(1, 3)                       # 3 float32 = 12 bytes, made before the block
    >>> with measure(device="cpu", log_ops=True) as m:
    ...     e = x.expand(4, 3)                     # a view: no new memory
    ...     r = x.repeat(4, 1)                     # a copy: 4 * 3 * 4 bytes
    ...     t = (r * 2).sum()                      # r * 2 is a temporary, freed at once
    >>> m.allocated_bytes, m.peak_bytes            # r (48) + t (4) held; r * 2 only in the peak
    (52, 100)
    >>> [(op.name, op.bytes) for op in m.ops][:2]
    [('aten.expand.default', 0), ('aten.repeat.default', 48)]
    >>> m.backend
    'tensor storages (cpu)'
    """

    @entry("measure")
    def __init__(self, device: Any = None, log_ops: bool = False) -> None:
        self._log_ops = require_bool(log_ops, "log_ops")
        self._device = None if device is None else resolve_device(device)
        self._backend: Backend | None = None
        self.result: Measurement | None = None

    @entry("measure")
    def __enter__(self) -> Measurement:
        if self._backend is not None:
            raise problem(RuntimeError, "this one was entered already; create a new one for each `with` block.")
        cuda = self._device is not None and self._device.type == "cuda"
        backend = self._backend = open_backend("cuda" if cuda else "storages", self._device, self._log_ops)
        backend.enter_thread()
        ops = backend.tracker.ops if backend.tracker is not None and self._log_ops else []
        self.result = Measurement(backend.label, self._device, backend.note, ops, backend.counters_before)
        self.result._live = backend
        return self.result

    @entry("measure")
    def __exit__(self, *exc: object) -> None:
        if self.result is None or self.result._live is None:
            raise problem(RuntimeError, "__exit__ without __enter__: write `with measure() as m:` around the code.")
        self.result._final = self._backend.since_start()
        self._backend.close()
        self.result._live = None

    @entry("measure")
    def __iter__(self) -> Iterator[Any]:  # pragma: no cover - guard against `for m in measure()`
        raise problem(TypeError, "is a context manager: write `with viewlab.measure() as m:`.")
