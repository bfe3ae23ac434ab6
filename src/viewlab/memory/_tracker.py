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
    """Whether storage ``st`` is (by identity) the storage of a tensor among ``items``, one level into lists."""
    for a in items:
        if isinstance(a, Tensor):
            if storage_of(a) is st:  # storages keep one Python object while they live: `is` is identity
                return True
        elif isinstance(a, (list, tuple)) and _is_input(st, a):
            return True
    return False


class _StorageTracker(TorchDispatchMode):
    """Counts bytes of storages created by operators while entered (see the module docstring).

    Its cost per operator is what ``measure`` adds to an empty dispatch mode (benchmarks/overhead.py), so the path
    is kept short: what an operator needs (mutates an input? its name) is looked up once per overload, storages
    are keyed by their Python object's ``id`` (one object per live storage), and a free only queues its bytes
    (``_gone``): the counters change under the lock, on the next operator or reading, never inside a finaliser.
    """

    def __init__(self, device: torch.device | None, log_ops: bool = False) -> None:
        super().__init__()
        self.device, self.log_ops, self.closed = device, log_ops, False  # device None: every device (meta has none)
        self.ops: list[OpRecord] = []
        self._lock = threading.Lock()  # readers (the monitor's thread) and the operators' thread
        self._live: dict[int, tuple[int, int, weakref.ref]] = {}  # storage id -> (bytes counted, nbytes seen, ref)
        self._gone: list[int] = []  # bytes of counted storages that died, not yet subtracted
        self._ops_seen: dict[Any, tuple[bool, str]] = {}  # overload -> (mutates an argument, name)
        self._current = self.peak = self.window_peak = 0  # window_peak: restartable (the monitor's per-cell peak)
        cuda = device is not None and device.type == "cuda"
        self._want = "any" if device is None else ("cpu" if not cuda else -1 if device.index is None else device.index)

    def _freed(self, key: int, _ref: object = None) -> None:
        entry = self._live.pop(key, None)  # one dict operation: safe from any thread, at any moment
        if entry is not None:
            self._gone.append(entry[0])

    def _settle(self) -> None:  # under the lock: subtract what died
        gone = self._gone
        while gone:
            self._current -= gone.pop()

    @property
    def current(self) -> int:
        """Bytes of counted storages alive now."""
        with self._lock:
            self._settle()
            return self._current

    def _ours(self, t: Tensor) -> bool:
        want = self._want  # "any": every device but meta; "cpu"; -1: any CUDA device; n: cuda:n
        if want == "any":
            return not t.is_meta
        return t.is_cpu if want == "cpu" else t.is_cuda and want in (-1, t.get_device())

    def _count(self, t: Tensor, func: Any, args: tuple, kwargs: dict | None, before: dict | None) -> int:
        """Bytes output ``t`` newly holds. ``before``: input storages' sizes, for an operator that mutates one."""
        if not self._ours(t):
            return 0
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested: no storage of their own
            return 0
        key = id(st)
        entry = self._live.get(key)
        if entry is not None:  # ours already: only a mutating operator (resize_, out=) can grow it
            if before is None:
                return 0
            delta = st.nbytes() - entry[1]
            self._live[key] = (entry[0] + delta, entry[1] + delta, entry[2])
            return delta
        if not st.resizable():  # borrowed memory (torch.from_numpy, DLPack): torch allocated nothing
            return 0
        nbytes = st.nbytes()
        if func is not _LIFT_FRESH:  # lift_fresh returns its input: a tensor torch.tensor() just made
            if before is not None and key in before:  # an input's storage, maybe resized by this operator
                delta = nbytes - before[key]
                return self._register(st, key, nbytes, delta) if delta > 0 else 0
            if before is None and (_is_input(st, args) or (kwargs and _is_input(st, kwargs.values()))):
                return 0  # a view of an input: no new memory
        return self._register(st, key, nbytes, nbytes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        if self.closed:  # closed from another thread: on this thread's stack until it is swept off
            return func(*args, **kwargs) if kwargs else func(*args)
        op = self._ops_seen.get(func)
        if op is None:
            op = self._ops_seen[func] = (func._schema.is_mutable, str(func))
        # Only operators that mutate an argument (in-place, out=, resize_) can grow an input's storage:
        # for those, note the input sizes first. Everything else needs identities only.
        before = None
        if op[0]:
            inputs = (storage_of(t) for t in tensors_in((*args, *(kwargs or {}).values())))
            before = {id(st): st.nbytes() for st in inputs if st is not None}
        out = func(*args, **kwargs) if kwargs else func(*args)
        if isinstance(out, Tensor):  # the common case: one result
            outs: Any = (out,)
            new = self._count(out, func, args, kwargs, before)
        else:  # also a tuple of lists of tensors
            outs = tensors_in(out if isinstance(out, (list, tuple)) else (out,))
            new = sum(self._count(t, func, args, kwargs, before) for t in outs)
        if new or self._gone:
            with self._lock:
                self._settle()
                self._current = current = self._current + new
                if current > self.peak:
                    self.peak = current
                if current > self.window_peak:
                    self.window_peak = current
        if self.log_ops:
            self.ops.append(OpRecord(op[1], new, tuple(tuple(t.shape) for t in outs)))
        return out

    def _register(self, st: Any, key: int, nbytes: int, counted: int) -> int:
        ref = weakref.ref(st, functools.partial(self._freed, key))  # the cheapest way to hear of the free
        self._live[key] = (counted, nbytes, ref)
        return counted

    def close(self) -> None:
        """Stop following frees (drop every weakref) so nothing keeps this tracker alive."""
        with self._lock:
            self.closed = True
            self._settle()
            self._live.clear()
