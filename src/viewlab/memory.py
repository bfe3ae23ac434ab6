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
* **cuda allocator** (``device="cuda"``, opt-in): PyTorch's caching allocator counters from
  ``torch.cuda.memory_stats``. One definition of *allocated* throughout: what
  ``torch.cuda.memory_allocated()`` counts, i.e. whole allocator blocks (sizes rounded up to
  multiples of 512 bytes). ``requested_bytes`` is the exact size the tensors asked for, printed beside
  it where the two differ, so the rounding is visible. ``reserved_bytes`` is what the allocator holds
  from the driver. The peak is read from the allocator's own peak counter, so no short-lived peak is
  missed -- but that counter is **process-global**: ``measure`` resets it on entry
  (``torch.cuda.reset_peak_memory_stats``), so afterwards ``torch.cuda.max_memory_allocated()`` is the
  peak since that reset. ``m.cuda_counters_before`` keeps what your own counters read before
  ``measure`` touched them, and nested windows compose: before any viewlab reset, the current peak is
  folded into every viewlab window still open on that device (an outer ``measure``, a
  ``MemoryMonitor``), so an inner ``measure`` never loses an outer peak.

The default is device-agnostic on purpose: the same notebook cell, run on a laptop or on a Colab GPU
runtime, must report the same exact bytes for the tensors it creates. The allocator view is asked for
explicitly, where the lesson is about the allocator itself.

Nothing here initialises CUDA at import time.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._dispatch import enter_mode, remove_mode, storage_of

__all__ = ["measure", "Measurement", "OpRecord", "resolve_device", "rss_bytes", "cuda_process_peak"]

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

    ``None`` picks ``cuda`` when CUDA is available, else ``cpu``. Bad input raises an error that says what
    to pass instead.

    >>> resolve_device("cpu")
    device(type='cpu')
    """
    return _resolve_device(device, "resolve_device")


def _resolve_device(device: Any, func: str) -> torch.device:
    """:func:`resolve_device`, with errors that name ``func``, the function the learner called."""
    if isinstance(device, bool) or (isinstance(device, int) and not isinstance(device, bool)):
        raise TypeError(
            f"{func}(device={device!r}): pass a device name such as 'cuda:0' or 'cpu', not a bare "
            f"{type(device).__name__}."
        )
    if device is None:
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"{func}(device=...) expects None, a device name such as 'cpu' or 'cuda:0', or a "
            f"torch.device; got {type(device).__name__}."
        )
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{func}(device={device!r}): not a device PyTorch knows; pass None (auto), 'cpu', 'cuda' or 'cuda:0'."
        ) from exc
    if dev.type == "meta":
        raise ValueError(f"{func}(device='meta'): meta tensors have no memory to measure; pass 'cpu' or 'cuda'.")
    if dev.type == "cpu":
        # CPU tensors report device index None; 'cpu:0' names the same single device.
        dev = torch.device("cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"{func}(device={device!r}): only 'cpu' and 'cuda' memory can be measured here.")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"{func}(device={device!r}), but CUDA is not available here (torch.cuda.is_available() is False). "
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


# ---------------------------------------------------------------------- CUDA peak windows

_PEAK_KEYS = ("allocated_bytes.all.peak", "requested_bytes.all.peak", "reserved_bytes.all.peak")


class _TorchCudaCounters:
    """The real counters: torch.cuda.memory_stats and torch.cuda.reset_peak_memory_stats."""

    def stats(self, device: torch.device) -> dict[str, int]:
        return torch.cuda.memory_stats(device)

    def reset_peaks(self, device: torch.device) -> None:
        torch.cuda.reset_peak_memory_stats(device)


class _CudaWindow:
    """One open viewlab measurement window on a CUDA device (a ``measure`` block, a monitor, a cell)."""

    def __init__(self, ledger: _CudaLedger, device: torch.device, start: dict[str, int]) -> None:
        self.ledger = ledger
        self.device = device
        self.start = start  # the counters when the window opened
        self.folded: dict[str, int] = {}  # peaks reached inside the window before a later reset

    def peak(self, key: str) -> int:
        """Highest value of the peak counter ``key`` since the window opened, across resets."""
        return max(self.folded.get(key, 0), self.ledger.counters.stats(self.device).get(key, 0))

    def close(self) -> None:
        self.ledger.close(self)


class _CudaLedger:
    """Process-wide record of viewlab's open CUDA windows.

    torch.cuda has one peak counter per device for the whole process. A window needs it reset at its
    start, which would erase the peak of every window already open. So every reset goes through
    :meth:`open`, which first folds the current peak into each open window on that device, and into
    ``process_peaks`` (the peak of the process as if viewlab had never reset anything).
    """

    def __init__(self, counters: Any = None) -> None:
        self.counters = counters if counters is not None else _TorchCudaCounters()
        self.windows: list[_CudaWindow] = []
        self.process_peaks: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def open(self, device: torch.device) -> _CudaWindow:
        with self._lock:
            stats = self.counters.stats(device)
            for key in _PEAK_KEYS:
                value = stats.get(key, 0)
                slot = (str(device), key)
                self.process_peaks[slot] = max(self.process_peaks.get(slot, 0), value)
                for window in self.windows:
                    if window.device == device:
                        window.folded[key] = max(window.folded.get(key, 0), value)
            self.counters.reset_peaks(device)
            window = _CudaWindow(self, device, dict(self.counters.stats(device)))
            self.windows.append(window)
            return window

    def close(self, window: _CudaWindow) -> None:
        with self._lock:
            self.windows = [w for w in self.windows if w is not window]

    def process_peak(self, device: torch.device, key: str = "allocated_bytes.all.peak") -> int:
        """The process's peak of ``key`` on ``device``, counting the peaks that viewlab's resets erased."""
        with self._lock:
            return max(self.process_peaks.get((str(device), key), 0), self.counters.stats(device).get(key, 0))


_CUDA_LEDGER = _CudaLedger()


def cuda_process_peak(device: Any = "cuda") -> dict[str, int]:
    """Peak CUDA bytes of this process so far, as if viewlab had never reset torch's peak counters.

    Keys: ``allocated`` (blocks, like ``torch.cuda.max_memory_allocated``), ``requested`` (exact
    sizes) and ``reserved`` (like ``torch.cuda.max_memory_reserved``). Needs CUDA.

    >>> cuda_process_peak() if torch.cuda.is_available() else "needs CUDA"  # doctest: +SKIP
    """
    dev = _resolve_device(device, "cuda_process_peak")
    if dev.type != "cuda":
        raise ValueError(f"cuda_process_peak(device={device!r}): pass a CUDA device such as 'cuda' or 'cuda:0'.")
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    names = {
        "allocated": "allocated_bytes.all.peak",
        "requested": "requested_bytes.all.peak",
        "reserved": "reserved_bytes.all.peak",
    }
    return {name: _CUDA_LEDGER.process_peak(dev, key) for name, key in names.items()}


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
                    st = storage_of(t)
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
                st = storage_of(t)
                if st is None:
                    continue
                key = st._cdata
                if key in done:
                    continue
                done.add(key)
                if not st.resizable():  # borrowed memory (torch.from_numpy, DLPack): torch allocated nothing
                    continue
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

    def enter(self) -> None:
        """Start counting operators run on this thread."""
        enter_mode(self)

    def exit(self) -> bool:
        """Stop counting on this thread: this mode leaves the stack by identity (see _dispatch.remove_mode)."""
        return remove_mode(self)

    def close(self) -> None:
        """Stop following frees (drop every weakref) so nothing keeps this tracker alive."""
        with self._lock:
            self.closed = True
            self._refs.clear()


@dataclass
class Measurement:
    """What :func:`measure` found. Read it after the ``with`` block (inside it, values are live).

    Attributes:
        backend: which backend measured, e.g. ``"tensor storages (cpu)"`` or ``"cuda allocator (cuda:0)"``.
        allocated_bytes: net bytes still held at exit (created inside and not yet freed). On CUDA: whole
            allocator blocks, as ``torch.cuda.memory_allocated()`` counts them (multiples of 512 B).
        requested_bytes: the same, in the exact sizes tensors asked for (equal to ``allocated_bytes``
            for tensor storages; smaller on CUDA where block rounding adds bytes).
        peak_bytes / requested_peak_bytes: highest point above the start reached inside the block.
        reserved_bytes: CUDA only: change in what the caching allocator holds from the driver.
        cuda_counters_before: CUDA only: your own ``torch.cuda`` counters just before ``measure`` reset
            the process-global peak (``memory_allocated``, ``max_memory_allocated``, ``memory_reserved``,
            ``max_memory_reserved``); None for tensor storages.
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
    cuda_counters_before: dict[str, int] | None = None
    _allocated: int = 0
    _peak: int = 0
    _requested: int = 0
    _requested_peak: int = 0
    _reserved: int | None = None
    _live: Any = field(default=None, repr=False)

    @property
    def allocated_bytes(self) -> int:
        return self._live.allocated() if self._live is not None else self._allocated

    @property
    def peak_bytes(self) -> int:
        return self._live.peak() if self._live is not None else self._peak

    @property
    def requested_bytes(self) -> int:
        return self._live.requested() if self._live is not None else self._requested

    @property
    def requested_peak_bytes(self) -> int:
        return self._live.requested_peak() if self._live is not None else self._requested_peak

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
        allocated, requested = self.allocated_bytes, self.requested_bytes
        peak, requested_peak = self.peak_bytes, self.requested_peak_bytes
        text = f"{self.backend}: allocated {allocated:,} B"
        if requested != allocated:
            text += f" (requested {requested:,} B)"
        text += f", peak {peak:,} B"
        if requested_peak != peak:
            text += f" (requested {requested_peak:,} B)"
        if self.reserved_bytes is not None:
            text += f", reserved {self.reserved_bytes:+,} B"
        return text

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        extra = f", requested_bytes={self.requested_bytes}" if self.requested_bytes != self.allocated_bytes else ""
        extra += f", reserved_bytes={self.reserved_bytes}" if self.reserved_bytes is not None else ""
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
            "before it, storages borrowed from NumPy, kernels' internal scratch space and other threads "
            "are not counted"
        )
        self.counters_before: dict[str, int] | None = None

    def start(self) -> None:
        self.tracker.enter()

    def stop(self) -> None:
        self.tracker.exit()
        self.tracker.close()

    def allocated(self) -> int:
        return self.tracker.current

    def peak(self) -> int:
        return self.tracker.peak

    requested, requested_peak = allocated, peak  # storages have exact sizes: nothing is rounded

    def reserved(self) -> None:
        return None


def _cuda_device(device: torch.device) -> torch.device:
    return device if device.index is not None else torch.device("cuda", torch.cuda.current_device())


def _learner_counters(stats: dict[str, int]) -> dict[str, int]:
    return {
        "memory_allocated": stats.get("allocated_bytes.all.current", 0),
        "max_memory_allocated": stats.get("allocated_bytes.all.peak", 0),
        "memory_reserved": stats.get("reserved_bytes.all.current", 0),
        "max_memory_reserved": stats.get("reserved_bytes.all.peak", 0),
    }


class _CudaSession:
    def __init__(self, device: torch.device, log_ops: bool, ledger: _CudaLedger | None = None) -> None:
        self.ledger = ledger if ledger is not None else _CUDA_LEDGER
        self.device = _cuda_device(device) if self.ledger is _CUDA_LEDGER else device
        self.label = f"{_CUDA_LABEL} ({self.device})"
        self.note = (
            "allocated = whole allocator blocks (as torch.cuda.memory_allocated counts them), requested = "
            "exact sizes; the peak comes from torch.cuda's process-global peak counter, which measure() "
            "reset on entry: torch.cuda.max_memory_allocated() now reads the peak since then, and "
            "m.cuda_counters_before holds what it read before"
        )
        self.tracker = _StorageTracker(device, True) if log_ops else None
        self.window: _CudaWindow | None = None
        self.counters_before: dict[str, int] | None = None

    def start(self) -> None:
        stats = self.ledger.counters.stats(self.device)
        if not stats and self.ledger is _CUDA_LEDGER:  # the allocator has not been used yet
            torch.cuda.init()
            stats = self.ledger.counters.stats(self.device)
        self.counters_before = _learner_counters(stats)
        self.window = self.ledger.open(self.device)
        if self.tracker is not None:
            self.tracker.enter()

    def stop(self) -> None:
        if self.tracker is not None:
            self.tracker.exit()
            self.tracker.close()
        if self.window is not None:
            self.window.close()

    def _now(self, key: str) -> int:
        return self.ledger.counters.stats(self.device).get(key, 0)

    def _since_start(self, key: str) -> int:
        assert self.window is not None
        return self._now(key) - self.window.start.get(key, 0)

    def _peak_since_start(self, key: str, current_key: str) -> int:
        assert self.window is not None
        return max(0, self.window.peak(key) - self.window.start.get(current_key, 0))

    def allocated(self) -> int:
        return self._since_start("allocated_bytes.all.current")

    def requested(self) -> int:
        return self._since_start("requested_bytes.all.current")

    def peak(self) -> int:
        return self._peak_since_start("allocated_bytes.all.peak", "allocated_bytes.all.current")

    def requested_peak(self) -> int:
        return self._peak_since_start("requested_bytes.all.peak", "requested_bytes.all.current")

    def reserved(self) -> int:
        return self._since_start("reserved_bytes.all.current")


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
        self._device = None if device is None else _resolve_device(device, "measure")
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
            cuda_counters_before=self._session.counters_before,
            _live=self._session,
        )
        return self.result

    def __exit__(self, *exc: object) -> None:
        assert self._session is not None and self.result is not None
        session, result = self._session, self.result
        result._allocated = session.allocated()
        result._peak = session.peak()
        result._requested = session.requested()
        result._requested_peak = session.requested_peak()
        result._reserved = session.reserved()
        session.stop()
        result._live = None

    def __iter__(self) -> Iterator[Any]:  # pragma: no cover - guard against `for m in measure()`
        raise TypeError("measure() is a context manager: write `with viewlab.measure() as m:`.")
