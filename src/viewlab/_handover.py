"""What a thread leaves for another: the undo of a guard whose block ended on a thread that did not enter it.

Mode stacks are per thread, and torch changes them only on the thread they belong to. A generator suspended
inside ``with views_only():`` and closed on another thread ends its block there, but the guard's modes sit on
the stack of the thread that entered it. That thread is never interrupted: the guard disarms its modes at once
(they pass every operator on, unchanged), and leaves the undo here; the thread that owns the stack runs it
itself, at its next entry into viewlab (any public function, any guard).

Nothing runs at import and no thread is started.

>>> import threading
>>> done = []
>>> t = threading.Thread(target=lambda: leave_for(threading.main_thread().ident, lambda: done.append("undone")))
>>> t.start(); t.join()
>>> before = list(done)
>>> before, sweep(), done
([], 1, ['undone'])
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_LOCK = threading.Lock()
_LEFT: dict[int, list[Callable[[], object]]] = {}  # thread id -> undos that thread runs at its next entry


def leave_for(thread: int, undo: Callable[[], object]) -> None:
    """Have ``thread`` (an id) run ``undo`` at its next entry into viewlab (run at once when it is this thread)."""
    if thread == threading.get_ident():
        undo()
        return
    with _LOCK:
        _LEFT.setdefault(thread, []).append(undo)


def pending() -> bool:
    """Whether this thread has undos waiting (one dict lookup: cheap enough for every public call)."""
    return threading.get_ident() in _LEFT


def sweep() -> int:
    """Run, on this thread, the undos other threads left for it (in the order they were left); how many ran.

    A thread that ended leaves its entry behind only until its id is reused, when the new thread runs undos
    that find nothing of theirs on its stack and do nothing.
    """
    with _LOCK:
        undos = _LEFT.pop(threading.get_ident(), [])
    for undo in undos:
        undo()
    return len(undos)
