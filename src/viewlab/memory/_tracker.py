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
_UNSAFE_VIEW = torch.ops.aten._unsafe_view.default  # returns its input's storage, yet its schema says no alias
Tensor = torch.Tensor


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


def _is_input(st: Any, items: Any) -> bool:
    """Whether storage ``st`` is one of the tensors' among ``items`` (one level into lists): storages keep one Python
    object while they live, so ``is`` is identity."""
    for a in items:
        if isinstance(a, Tensor):
            if storage_of(a) is st:
                return True
        elif isinstance(a, (list, tuple)) and _is_input(st, a):
            return True
    return False


class _StorageTracker(TorchDispatchMode):
    """Counts bytes of storages created by operators while entered (see the module docstring). Its per-operator path is
    what ``measure`` adds to an empty dispatch mode (benchmarks/overhead.py): what an overload needs is looked up once,
    storages are keyed by their object's ``id``, and a free only queues its bytes, subtracted under the lock later."""

    def __init__(self, device: torch.device | None, log_ops: bool = False) -> None:
        super().__init__()
        self.device, self.log_ops, self.closed = device, log_ops, False  # device None: every device (meta has none)
        self.idle = False  # True: only pass operators on (closed, or left on a thread's stack by another thread)
        self.ops: list[OpRecord] = []
        self._lock = threading.Lock()  # readers (the monitor's thread) and the operators' thread
        self._live: dict[int, tuple[int, int, weakref.ref]] = {}  # storage id -> (bytes counted, nbytes seen, ref)
        self._gone: list[int] = []  # bytes of counted storages that died, not yet subtracted
        self._ops_seen: dict[Any, tuple[bool, str, bool]] = {}  # overload -> (mutates an argument, name, may alias)
        self._current = self.peak = self.window_peak = 0  # window_peak: restartable (the monitor's per-cell peak)
        index = -1 if device is None or device.index is None else device.index  # -1: any CUDA device
        self._want = "any" if device is None else "cpu" if device.type == "cpu" else index

    def _freed(self, key: int, _ref: object = None) -> None:
        if (entry := self._live.pop(key, None)) is not None:  # one dict operation: safe from any thread, any time
            self._gone.append(entry[0])

    def _settle(self) -> int:  # under the lock: subtract what died
        while self._gone:
            self._current -= self._gone.pop()
        return self._current

    @property
    def current(self) -> int:
        """Bytes of counted storages alive now."""
        with self._lock:
            return self._settle()

    def _ours(self, t: Tensor) -> bool:  # self._want: "any" (every device but meta), "cpu", -1 (any CUDA device), n
        w = self._want
        return not t.is_meta if w == "any" else t.is_cpu if w == "cpu" else t.is_cuda and w in (-1, t.get_device())

    def _count(self, t: Tensor, func: Any, args: tuple, kwargs: dict | None, before: dict | None, alias: bool) -> int:
        """Bytes output ``t`` newly holds. ``before``: input storages' sizes, for an operator that mutates one;
        ``alias``: the operator may return an input's storage (its schema says so), so outputs are looked up."""
        if not self._ours(t):
            return 0
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested: no storage of their own
            return 0
        key = id(st)
        if (entry := self._live.get(key)) is not None:  # ours already: only a mutating operator can grow it
            delta = 0 if before is None else st.nbytes() - entry[1]  # resize_, out= resizing
            self._live[key] = (entry[0] + delta, entry[1] + delta, entry[2])
            return delta
        if not st.resizable():  # borrowed memory (torch.from_numpy, DLPack): torch allocated nothing
            return 0
        nbytes = st.nbytes()
        if func is not _LIFT_FRESH:  # lift_fresh returns its input: a tensor torch.tensor() just made
            if before is not None and key in before:  # an input's storage, maybe resized by this operator
                delta = nbytes - before[key]
                return self._register(st, key, nbytes, delta) if delta > 0 else 0
            if alias and before is None and (_is_input(st, args) or (kwargs and _is_input(st, kwargs.values()))):
                return 0  # a view of an input: no new memory
        return self._register(st, key, nbytes, nbytes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        if self.idle:  # stopped from another thread: on this thread's stack until it is swept off
            return func(*args, **kwargs) if kwargs else func(*args)
        if (op := self._ops_seen.get(func)) is None:
            schema = func._schema  # an output with no alias annotation is new memory (add, clone), no lookup needed
            alias = func is _UNSAFE_VIEW or any(r.alias_info is not None for r in schema.returns)
            op = self._ops_seen[func] = (schema.is_mutable, str(func), alias)
        before = None  # only operators that mutate an argument (in place, out=, resize_) can grow an input's storage
        if op[0]:
            inputs = (storage_of(t) for t in tensors_in((*args, *(kwargs or {}).values())))
            before = {id(st): st.nbytes() for st in inputs if st is not None}
        out = func(*args, **kwargs) if kwargs else func(*args)
        if isinstance(out, Tensor):  # the common case: one result
            outs: Any = (out,)
            new = self._count(out, func, args, kwargs, before, op[2])
        else:  # also a tuple of lists of tensors
            outs = tensors_in(out if isinstance(out, (list, tuple)) else (out,))
            new = sum(self._count(t, func, args, kwargs, before, op[2]) for t in outs)
        if new or self._gone:
            with self._lock:
                self._current = now = self._settle() + new
                self.peak, self.window_peak = max(self.peak, now), max(self.window_peak, now)
        if self.log_ops:
            self.ops.append(OpRecord(op[1], new, tuple(tuple(t.shape) for t in outs)))
        return out

    def _register(self, st: Any, key: int, nbytes: int, counted: int) -> int:
        self._live[key] = (counted, nbytes, weakref.ref(st, functools.partial(self._freed, key)))  # hears of the free
        return counted

    def close(self) -> None:
        """Stop following frees (drop every weakref) so nothing keeps this tracker alive."""
        with self._lock:
            self.closed = self.idle = True
            self._settle()
            self._live.clear()
