"""Dispatch-mode plumbing shared by every tool that watches operators (measure, the monitor, the
sentinels, the course's rule recorder): push and remove a mode (dispatch or torch-function) by identity, find
the tensors and the storages behind an operator's arguments. The learner's own line of code
(``learner_line``, ``called_from_viewlab``) is :mod:`viewlab._learner`'s.

Nothing here is started at import; a mode is active only between :func:`enter_mode` and :func:`remove_mode`.
Mode stacks are per thread: what another thread ends (a tracker stopped there, a guard's block closed there)
is *left* as an undo for the thread that entered it (:func:`leave`) and run by that thread itself at its next
viewlab entry or, in IPython, after the running cell (``post_run_cell``, on the thread that runs cells);
nothing is ever run inside that thread from outside.

>>> class Count(TorchDispatchMode):
...     n = 0
...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
...         Count.n += 1
...         return func(*args, **(kwargs or {}))
>>> mode = Count()
>>> enter_mode(mode); _ = torch.ones(2) + 1; remove_mode(mode)
True
>>> Count.n >= 2, remove_mode(mode)  # a second removal finds nothing to remove
(True, False)
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

Mode = TorchDispatchMode | TorchFunctionMode


def _kind(mode: Mode) -> tuple[type, Callable[[], list]]:
    """The mode's base class (whose enter/exit keep torch's bookkeeping) and its per-thread stack."""
    if isinstance(mode, TorchFunctionMode):
        return TorchFunctionMode, _get_current_function_mode_stack
    return TorchDispatchMode, _get_current_dispatch_mode_stack


def enter_mode(mode: Mode) -> None:
    """Push ``mode`` on this thread's dispatch-mode (or torch-function-mode) stack, with torch's own bookkeeping,
    after running the undos other threads left for this one (:func:`leave`) and forgetting those left for
    threads that have ended."""
    if _LEFT:
        sweep()
    _kind(mode)[0].__enter__(mode)


def remove_mode(mode: Mode) -> bool:
    """Take ``mode`` off this thread's mode stack wherever it sits, never "pop the top" (a torch-function
    mode's own ``__exit__`` pops whatever is on top: another guard's, after a mis-nested exit).

    Modes pushed after it (a ``measure`` inside a monitor, say) are taken off first and put back
    afterwards in the same order, each with TorchDispatchMode's own exit/enter bookkeeping, so the
    stack and torch's "a mode is active" flags stay consistent. Returns False when ``mode`` is not on
    this thread's stack (already removed, or pushed by another thread: mode stacks are per thread).
    """
    base, current = _kind(mode)
    stack = current()
    if not any(m is mode for m in stack):
        return False
    above = []
    while stack[-1] is not mode:
        above.append(stack.pop())
        base.__exit__(above[-1], None, None, None)
    base.__exit__(mode, None, None, None)
    for top in reversed(above):
        base.__enter__(top)
    return True


_LEFT: dict[int, list[Callable[[], object]]] = {}  # thread id -> undos other threads left for that thread
_LEFT_LOCK = threading.Lock()
_AFTER_CELL: list[Any] = []  # the IPython shell whose post_run_cell sweeps, while undos are left (at most one)


def enter(mode: Mode) -> int:
    """:func:`enter_mode` on this thread; returns this thread's id, what :func:`leave` needs later."""
    enter_mode(mode)
    return threading.get_ident()


def leave(thread: int, undo: Callable[[], object]) -> None:
    """Have ``thread`` (an id from :func:`enter`) run ``undo``: now, when that is this thread; otherwise at its
    next viewlab entry (:func:`enter_mode`, any public function or guard) or after the running cell (IPython's
    ``post_run_cell``) when ``thread`` runs the cells. Mode stacks are per thread and torch changes them only on
    their own thread, so this is how a mode entered on one thread and stopped on another comes off: until the
    sweep it stays on that stack, disarmed by its owner (a closed tracker only passes operators on). Nothing is
    ever run inside that thread from outside, and nothing is left for a thread that has ended: its stack is gone.

    >>> class Pass(TorchDispatchMode):
    ...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
    ...         return func(*args, **(kwargs or {}))
    >>> mode = Pass(); owner = enter(mode)
    >>> off = lambda: remove_mode(mode)
    >>> t = threading.Thread(target=leave, args=(owner, off)); t.start(); t.join()
    >>> [type(m).__name__ for m in _get_current_dispatch_mode_stack()], sweep()  # left here, then swept
    (['Pass'], 1)
    >>> _get_current_dispatch_mode_stack()
    []
    """
    if thread == threading.get_ident():
        undo()
        return
    with _LEFT_LOCK:
        alive = _forget_ended_threads()
        if thread in alive:
            _LEFT.setdefault(thread, []).append(undo)
    if thread in alive:
        _sweep_after_cell(thread)


def _forget_ended_threads() -> set[int | None]:
    """Drop what was left for threads that have ended (their stacks ended with them); returns the living ones."""
    alive = {t.ident for t in threading.enumerate()}
    for gone in [ident for ident in _LEFT if ident not in alive]:
        del _LEFT[gone]
    return alive


def pending() -> bool:
    """Whether another thread left undos for this one (one dict lookup: cheap enough for every public call)."""
    return threading.get_ident() in _LEFT


def sweep() -> int:
    """Run, on this thread, the undos other threads left for it (:func:`leave`), in the order they were left;
    returns how many ran. Called by :func:`enter_mode`, at each public function's entry and after each IPython
    cell, never from outside the thread."""
    with _LEFT_LOCK:
        undos = _LEFT.pop(threading.get_ident(), [])
        _forget_ended_threads()
    for undo in undos:
        undo()
    return len(undos)


def _sweep_after_cell(thread: int) -> None:
    """In IPython, when ``thread`` runs the cells, register a ``post_run_cell`` hook that sweeps that thread after
    the running cell (and unregisters itself once nothing is left). Outside IPython: only viewlab entries sweep."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    events = getattr(shell, "events", None)
    if events is None or thread != threading.main_thread().ident:
        return
    with _LEFT_LOCK:
        if _AFTER_CELL:
            return
        _AFTER_CELL.append(events)
    try:
        events.register("post_run_cell", _after_cell)
    except Exception:  # noqa: BLE001 - a shell that refuses hooks: the next enter_mode sweeps instead
        _AFTER_CELL.clear()


def _after_cell(result: object = None) -> None:
    """IPython ``post_run_cell`` hook (see :func:`_sweep_after_cell`)."""
    sweep()
    with _LEFT_LOCK:
        if _LEFT.get(threading.get_ident()) or not _AFTER_CELL:
            return
        events = _AFTER_CELL.pop()
    try:
        events.unregister("post_run_cell", _after_cell)
    except Exception:  # noqa: BLE001,S110 - already unregistered: nothing to do
        pass


def storage_of(t: torch.Tensor) -> Any:
    """``t.untyped_storage()``, or None for tensors that have none (sparse, nested, functional wrappers).

    >>> storage_of(torch.zeros(3)).nbytes()
    12
    """
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


_PARTS = {  # the tensors that hold a sparse or jagged nested tensor's memory (it has no storage of its own)
    torch.sparse_coo: ("_indices", "_values"),
    torch.jagged: ("values", "offsets"),
    **{layout: ("crow_indices", "col_indices", "values") for layout in (torch.sparse_csr, torch.sparse_bsr)},
    **{layout: ("ccol_indices", "row_indices", "values") for layout in (torch.sparse_csc, torch.sparse_bsc)},
}


def storages_of(t: torch.Tensor) -> list[Any]:
    """The storages holding ``t``'s memory: its own, a sparse tensor's indices' and values', or a jagged nested
    tensor's values' and offsets'.

    >>> [s.nbytes() for s in storages_of(torch.eye(2).to_sparse())]  # 2x2 int64 indices, 2 float values
    [32, 8]
    """
    parts = [getattr(t, name)() for name in _PARTS[t.layout]] if t.layout in _PARTS else [t]
    return [st for st in map(storage_of, parts) if st is not None]


def tensors_in(items: Iterable[Any]) -> list[torch.Tensor]:
    """The tensors among ``items``, one level into lists and tuples (how operators take them).

    >>> len(tensors_in([torch.zeros(1), 3, (torch.ones(2), "a")]))
    2
    """
    nested = (x for a in items for x in (a if isinstance(a, (list, tuple)) else (a,)))
    return [x for x in nested if isinstance(x, torch.Tensor)]
