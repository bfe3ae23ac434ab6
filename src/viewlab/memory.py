"""Measure the memory a block of code allocates: ``with viewlab.measure() as m: ...``.

Two backends, chosen from ``device`` and always named in ``m.backend``:

* **tensor storages** (the default, ``device=None``: storages on every device; ``device="cpu"`` or
  another device: only that one): every PyTorch operator run inside the
  block is intercepted with a ``TorchDispatchMode``. Each output whose storage is new is counted
  with its exact ``nbytes``, and a weakref callback on that storage subtracts it again when the
  last tensor using it dies. So ``expand`` counts 0 bytes, ``repeat`` counts ``numel * itemsize``,
  and a temporary freed inside the block shows up in the peak but not in what is still allocated.
  It sees what operators *return*: scratch buffers a kernel uses internally, storages created before
  the block, and work done in other threads are outside it. (``tracemalloc`` is no substitute: it
  sees only Python's own allocator, never torch's.)
* **cuda allocator** (``device="cuda"``, opt-in): PyTorch's caching
  allocator counters from ``torch.cuda.memory_stats``. ``allocated_bytes`` and ``peak_bytes`` use the
  *requested* byte counters (exact sizes) where the running PyTorch has them, the block-rounded ones
  otherwise; ``reserved_bytes`` is what the allocator holds from the driver. The peak is read from
  the allocator's own peak counter, so no short-lived peak is missed -- but that counter is
  **process-global**, and ``measure`` resets it on entry (``torch.cuda.reset_peak_memory_stats``).

The default is device-agnostic on purpose: the same notebook cell, run on a laptop or on a Colab GPU
runtime, must report the same exact bytes for the tensors it creates. The allocator view is asked for
explicitly, where the lesson is about the allocator itself.

Nothing here initialises CUDA at import time.
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["measure", "Measurement", "OpRecord", "resolve_device", "rss_bytes"]

_STORAGE_LABEL = "tensor storages"
_LIFT_FRESH = torch.ops.aten.lift_fresh.default
_CUDA_LABEL = "cuda allocator"


@dataclass(frozen=True)
class OpRecord:
    """One operator seen inside :func:`measure` with ``log_ops=True``.

    ``bytes`` is what this operator newly allocated (new storages it returned, or growth of a
    storage it resized); views such as ``expand`` record 0. ``shapes`` are its outputs' shapes.

    >>> OpRecord("aten.repeat.default", 96, ((4, 3),))
    OpRecord(name='aten.repeat.default', bytes=96, shapes=((4, 3),))
    """

    name: str
    bytes: int
    shapes: tuple[tuple[int, ...], ...] = ()


def resolve_device(device: Any = None) -> torch.device:
    """Turn ``device`` (None, a string, or a ``torch.device``) into the device :func:`measure` tracks.

    ``None`` picks ``cuda`` when CUDA is available, else ``cpu``. Bad input raises an error that
    says what to pass instead.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device is None:
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if isinstance(device, int) and not isinstance(device, bool):
        raise TypeError(f"device={device!r}: pass a device name such as 'cuda:{device}' or 'cpu', not a bare int.")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a device PyTorch knows; pass None (auto), 'cpu', 'cuda' or 'cuda:0'."
        ) from exc
    if dev.type == "meta":
        raise ValueError("device='meta': meta tensors have no memory to measure; pass 'cpu' or 'cuda'.")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device={device!r}, but torch.cuda.is_available() is False here. "
            "Pass device='cpu' (or None) to measure tensor storages instead."
        )
    return dev


def rss_bytes() -> int | None:
    """Resident set size of this process in bytes, or None where it cannot be read (approximate:
    it includes the Python interpreter, libraries and memory the allocator keeps for reuse).

    >>> isinstance(rss_bytes(), (int, type(None)))
    True
    """
    try:
        import os

        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil  # optional

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - optional best-effort reading
        return None


def _storage_of(t: torch.Tensor) -> Any:
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, functional wrappers
        return None


class _StorageTracker(TorchDispatchMode):
    """Counts bytes of storages created by operators while active (see module docstring)."""

    def __init__(self, device: torch.device | None, log_ops: bool = False) -> None:
        super().__init__()
        self.device = device  # None: storages on every device (meta has none)
        self.log_ops = log_ops
        self.ops: list[OpRecord] = []
        self._lock = threading.RLock()  # reentrant: a GC-run finaliser may fire while we hold it
        self._counted: dict[int, int] = {}  # storage key -> bytes counted for it
        self._seen_nbytes: dict[int, int] = {}  # storage key -> nbytes when last seen
        self._refs: dict[int, weakref.ref] = {}
        self.current = 0
        self.peak = 0
        self.window_peak = 0  # like peak, but restartable (the monitor's per-cell peak)
        self.total_allocated = 0
        self.n_ops = 0
        self.closed = False

    def _matches(self, t: torch.Tensor) -> bool:
        dev = t.device
        if self.device is None:
            return dev.type != "meta"
        if dev.type != self.device.type:
            return False
        return self.device.index is None or dev.index == self.device.index

    def _freed(self, key: int, _ref: object = None) -> None:
        with self._lock:
            self._refs.pop(key, None)
            self._seen_nbytes.pop(key, None)
            self.current -= self._counted.pop(key, 0)

    def _input_storages(self, args: tuple, kwargs: dict, sizes: bool) -> dict[int, int]:
        found: dict[int, int] = {}
        for a in (*args, *kwargs.values()):
            items = a if isinstance(a, (list, tuple)) else (a,)
            for t in items:
                if isinstance(t, torch.Tensor):
                    st = _storage_of(t)
                    if st is not None:
                        found[st._cdata] = st.nbytes() if sizes else 0
        return found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        # Only operators that mutate an argument (in-place, out=, resize_) can grow an input's
        # storage; for those, note the input sizes first. Everything else needs identities only.
        mutable = func._schema.is_mutable
        before = self._input_storages(args, kwargs, True) if mutable else None
        out = func(*args, **kwargs)
        if self.closed:
            return out
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if any(isinstance(o, (list, tuple)) for o in outs):  # e.g. a tuple of lists of tensors
            outs = tuple(x for o in outs for x in (o if isinstance(o, (list, tuple)) else (o,)))
        new_bytes = 0
        lift = func is _LIFT_FRESH
        done: set[int] = set()
        with self._lock:
            for t in outs:
                if not isinstance(t, torch.Tensor) or not self._matches(t):
                    continue
                st = _storage_of(t)
                if st is None:
                    continue
                key = st._cdata
                if key in done:
                    continue
                done.add(key)
                nbytes = st.nbytes()
                if key in self._counted:  # ours already: count growth (resize_, out= resizing)
                    delta = nbytes - self._seen_nbytes[key]
                    self._seen_nbytes[key] = nbytes
                    if delta:
                        self._counted[key] += delta
                        new_bytes += delta
                    continue
                if not lift:
                    if before is None:
                        before = self._input_storages(args, kwargs, False)
                        if key in before:  # a view of an input: no new memory
                            continue
                    elif key in before:  # an input's storage, maybe resized by this op
                        delta = nbytes - before[key]
                        if delta <= 0:
                            continue
                        self._register(st, key, nbytes, delta)
                        new_bytes += delta
                        continue
                self._register(st, key, nbytes, nbytes)
                new_bytes += nbytes
            if new_bytes:
                self.current += new_bytes
                self.total_allocated += new_bytes
                if self.current > self.peak:
                    self.peak = self.current
                if self.current > self.window_peak:
                    self.window_peak = self.current
            self.n_ops += 1
            if self.log_ops:
                shapes = tuple(tuple(t.shape) for t in outs if isinstance(t, torch.Tensor))
                self.ops.append(OpRecord(str(func), new_bytes, shapes))
        return out

    def _register(self, st: Any, key: int, nbytes: int, counted: int) -> None:
        self._counted[key] = counted
        self._seen_nbytes[key] = nbytes
        # A plain weakref with a callback is the cheapest way to hear about the free.
        self._refs[key] = weakref.ref(st, functools.partial(self._freed, key))

    def close(self) -> None:
        """Stop following frees (drop every weakref) so nothing keeps this tracker alive."""
        with self._lock:
            self.closed = True
            self._refs.clear()


def _cuda_stats(device: torch.device) -> dict[str, int]:
    return torch.cuda.memory_stats(device)


def _cuda_keys(stats: dict[str, int]) -> tuple[str, str]:
    if "requested_bytes.all.current" in stats:
        return "requested_bytes.all.current", "requested_bytes.all.peak"
    return "allocated_bytes.all.current", "allocated_bytes.all.peak"


@dataclass
class Measurement:
    """What :func:`measure` found. Read it after the ``with`` block (inside it, values are live).

    Attributes:
        backend: which backend measured, e.g. ``"tensor storages (cpu)"`` or ``"cuda allocator (cuda:0)"``.
        allocated_bytes: net bytes still held at exit (created inside and not yet freed).
        peak_bytes: highest point above the start reached inside the block.
        reserved_bytes: CUDA only: change in what the caching allocator holds from the driver.
        ops: with ``log_ops=True``, one :class:`OpRecord` per operator, in order; else ``[]``.
        note: caveats for this backend (process-global peak reset on CUDA, scope on CPU).

    >>> with measure(device="cpu") as m:
    ...     y = torch.zeros(4, 3)
    >>> m.allocated_bytes, m.peak_bytes
    (48, 48)
    """

    backend: str
    device: torch.device | None  # None: tensor storages on every device
    note: str
    ops: list[OpRecord] = field(default_factory=list)
    _allocated: int = 0
    _peak: int = 0
    _reserved: int | None = None
    _live: Any = field(default=None, repr=False)

    @property
    def allocated_bytes(self) -> int:
        return self._live.allocated() if self._live is not None else self._allocated

    @property
    def peak_bytes(self) -> int:
        return self._live.peak() if self._live is not None else self._peak

    @property
    def reserved_bytes(self) -> int | None:
        return self._live.reserved() if self._live is not None else self._reserved

    def summary(self) -> str:
        """One line: backend, allocated, peak (and reserved on CUDA).

        >>> with measure(device="cpu") as m:
        ...     y = torch.zeros(256)
        >>> m.summary()
        'tensor storages (cpu): allocated 1,024 B, peak 1,024 B'
        """
        text = f"{self.backend}: allocated {self.allocated_bytes:,} B, peak {self.peak_bytes:,} B"
        if self.reserved_bytes is not None:
            text += f", reserved {self.reserved_bytes:+,} B"
        return text

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        extra = f", reserved_bytes={self.reserved_bytes}" if self.reserved_bytes is not None else ""
        ops = f", ops=[{len(self.ops)} records]" if self.ops else ""
        return (
            f"Measurement(backend={self.backend!r}, allocated_bytes={self.allocated_bytes}, "
            f"peak_bytes={self.peak_bytes}{extra}{ops})"
        )


class _StorageSession:
    def __init__(self, device: torch.device | None, log_ops: bool) -> None:
        self.tracker = _StorageTracker(device, log_ops)
        self.label = f"{_STORAGE_LABEL} ({'all devices' if device is None else device})"
        self.note = (
            "counts storages returned by operators run in this thread inside the block; storages made "
            "before it, kernels' internal scratch space and other threads are not counted"
        )

    def start(self) -> None:
        self.tracker.__enter__()

    def stop(self) -> None:
        self.tracker.__exit__(None, None, None)
        self.tracker.close()

    def allocated(self) -> int:
        return self.tracker.current

    def peak(self) -> int:
        return self.tracker.peak

    def reserved(self) -> None:
        return None


class _CudaSession:
    def __init__(self, device: torch.device, log_ops: bool) -> None:
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.device = device
        self.label = f"{_CUDA_LABEL} ({device})"
        self.note = (
            "peak read from torch.cuda's peak counter, which is process-global: measure() reset it on "
            "entry (torch.cuda.reset_peak_memory_stats), so earlier peaks of this process are gone"
        )
        self.tracker = _StorageTracker(device, True) if log_ops else None
        self._start = 0
        self._start_reserved = 0
        self._cur_key = self._peak_key = ""

    def start(self) -> None:
        stats = _cuda_stats(self.device)
        if not stats:  # the allocator has not been used yet in this process
            torch.cuda.init()
            stats = _cuda_stats(self.device)
        self._cur_key, self._peak_key = _cuda_keys(stats)
        self._start = stats.get(self._cur_key, 0)
        self._start_reserved = stats.get("reserved_bytes.all.current", 0)
        torch.cuda.reset_peak_memory_stats(self.device)
        if self.tracker is not None:
            self.tracker.__enter__()

    def stop(self) -> None:
        if self.tracker is not None:
            self.tracker.__exit__(None, None, None)
            self.tracker.close()

    def allocated(self) -> int:
        return _cuda_stats(self.device).get(self._cur_key, 0) - self._start

    def peak(self) -> int:
        return max(0, _cuda_stats(self.device).get(self._peak_key, 0) - self._start)

    def reserved(self) -> int:
        return _cuda_stats(self.device).get("reserved_bytes.all.current", 0) - self._start_reserved


def _session(device: torch.device | None, log_ops: bool) -> _StorageSession | _CudaSession:
    if device is not None and device.type == "cuda":
        return _CudaSession(device, log_ops)
    return _StorageSession(device, log_ops)


class measure:  # noqa: N801 - used like a function: ``with measure() as m``
    """Context manager: how many bytes the code inside allocates (net) and at its peak.

    ``device=None`` (default) counts exact tensor-storage bytes on every device, so a cell reports the
    same numbers on a laptop and on a GPU runtime; ``device="cpu"`` counts only CPU storages;
    ``device="cuda"`` reads the CUDA caching allocator's counters (allocated, reserved, peak).
    ``log_ops=True`` also records one :class:`OpRecord` per operator in ``m.ops``.

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

    def __init__(self, device: Any = None, log_ops: bool = False) -> None:
        if not isinstance(log_ops, bool):
            raise TypeError(f"measure(log_ops=...) expects True or False, got {log_ops!r}.")
        self._device = None if device is None else resolve_device(device)
        self._log_ops = log_ops
        self._session: _StorageSession | _CudaSession | None = None
        self.result: Measurement | None = None

    def __enter__(self) -> Measurement:
        if self._session is not None:
            raise RuntimeError("this measure() is already in use; create a new one for each `with` block.")
        self._session = _session(self._device, self._log_ops)
        self._session.start()
        tracker = self._session.tracker
        self.result = Measurement(
            backend=self._session.label,
            device=self._device,
            note=self._session.note,
            ops=tracker.ops if tracker is not None and self._log_ops else [],
            _live=self._session,
        )
        return self.result

    def __exit__(self, *exc: object) -> None:
        assert self._session is not None and self.result is not None
        session, result = self._session, self.result
        result._allocated = session.allocated()
        result._peak = session.peak()
        result._reserved = session.reserved()
        session.stop()
        result._live = None

    def __iter__(self) -> Iterator[Any]:  # pragma: no cover - guard against `for m in measure()`
        raise TypeError("measure() is a context manager: write `with viewlab.measure() as m:`.")
