"""The counting dispatch mode behind the tensor-storage backend (:mod:`viewlab.memory`): a weakref on each new storage
subtracts it when it dies; ``resize_`` or ``out=`` count their growth, memory borrowed from NumPy or DLPack 0.

>>> from viewlab._dispatch import enter_mode, remove_mode
>>> tracker = _StorageTracker(torch.device("cpu"))
>>> enter_mode(tracker); kept = torch.ones(1, 3).repeat(4, 1); remove_mode(tracker)
True
>>> tracker.current, tracker.peak  # ones (12 B) was a temporary: in the peak, not in what is held
(48, 60)
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._dispatch import storage_of, tensors_in

_LIFT_FRESH = torch.ops.aten.lift_fresh.default


@dataclass(frozen=True)
class OpRecord:
    """One operator seen inside :func:`measure` with ``log_ops=True``: ``bytes`` it newly allocated (new storages
    it returned, or growth of one it resized; views such as ``expand`` record 0) and its outputs' ``shapes``.

    >>> OpRecord("aten.repeat.default", 96, ((4, 3),))
    OpRecord(name='aten.repeat.default', bytes=96, shapes=((4, 3),))
    """

    name: str
    bytes: int
    shapes: tuple[tuple[int, ...], ...] = ()


class _StorageTracker(TorchDispatchMode):
    """Counts bytes of storages created by operators while entered (see the module docstring)."""

    def __init__(self, device: torch.device | None, log_ops: bool = False) -> None:
        super().__init__()
        self.device, self.log_ops, self.closed = device, log_ops, False  # device None: every device (meta has none)
        self.ops: list[OpRecord] = []
        self._lock = threading.RLock()  # reentrant: a GC-run finaliser may fire while we hold it
        self._counted: dict[int, int] = {}  # storage key -> bytes counted for it
        self._seen_nbytes: dict[int, int] = {}  # storage key -> nbytes when last seen
        self._refs: dict[int, weakref.ref] = {}
        self.current = self.peak = self.window_peak = 0  # window_peak: restartable (the monitor's per-cell peak)

    def _freed(self, key: int, _ref: object = None) -> None:
        with self._lock:
            self._refs.pop(key, None)
            self._seen_nbytes.pop(key, None)
            self.current -= self._counted.pop(key, 0)

    def _input_storages(self, args: tuple, kwargs: dict, sizes: bool) -> dict[int, int]:
        storages = (storage_of(t) for t in tensors_in((*args, *kwargs.values())))
        return {st._cdata: st.nbytes() if sizes else 0 for st in storages if st is not None}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        # Only operators that mutate an argument (in-place, out=, resize_) can grow an input's
        # storage; for those, note the input sizes first. Everything else needs identities only.
        before = self._input_storages(args, kwargs, True) if func._schema.is_mutable else None
        out = func(*args, **kwargs)
        if self.closed:
            return out
        outs = tensors_in(out if isinstance(out, (list, tuple)) else (out,))  # also a tuple of lists of tensors
        new_bytes, done = 0, set()
        with self._lock:
            for t in outs:
                dev, mine = t.device, self.device  # mine None: every device but meta; an index None: any index
                ours = dev.type != "meta" if mine is None else dev.type == mine.type and mine.index in (None, dev.index)
                st = storage_of(t) if ours else None
                if st is None or st._cdata in done:
                    continue
                key, nbytes = st._cdata, st.nbytes()
                done.add(key)
                if not st.resizable():  # borrowed memory (torch.from_numpy, DLPack): torch allocated nothing
                    continue
                if key in self._counted:  # ours already: count growth (resize_, out= resizing)
                    delta, self._seen_nbytes[key] = nbytes - self._seen_nbytes[key], nbytes
                    self._counted[key] += delta
                    new_bytes += delta
                    continue
                if func is not _LIFT_FRESH:
                    if before is None:
                        before = self._input_storages(args, kwargs, False)
                        if key in before:  # a view of an input: no new memory
                            continue
                    elif key in before:  # an input's storage, maybe resized by this op
                        delta = nbytes - before[key]
                        new_bytes += self._register(st, key, nbytes, delta) if delta > 0 else 0
                        continue
                new_bytes += self._register(st, key, nbytes, nbytes)
            if new_bytes:
                self.current += new_bytes
                self.peak, self.window_peak = max(self.peak, self.current), max(self.window_peak, self.current)
            if self.log_ops:
                self.ops.append(OpRecord(str(func), new_bytes, tuple(tuple(t.shape) for t in outs)))
        return out

    def _register(self, st: Any, key: int, nbytes: int, counted: int) -> int:
        self._counted[key], self._seen_nbytes[key] = counted, nbytes
        self._refs[key] = weakref.ref(st, functools.partial(self._freed, key))  # the cheapest way to hear of the free
        return counted

    def close(self) -> None:
        """Stop following frees (drop every weakref) so nothing keeps this tracker alive."""
        with self._lock:
            self.closed = True
            self._refs.clear()
