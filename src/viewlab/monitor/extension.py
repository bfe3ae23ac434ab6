"""``%load_ext viewlab``: one always-on monitor whose hooks give each cell a :class:`~viewlab.monitor.CellRecord`
and one printed line; ``%unload_ext viewlab`` shows the final plot and table.

>>> cell_monitor() is None
True
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from .._checks import entry, type_error

if TYPE_CHECKING:
    from . import MemoryMonitor

_CELL_MONITOR: MemoryMonitor | None = None


def cell_monitor() -> MemoryMonitor | None:
    """The monitor started by ``%load_ext viewlab`` (None when the extension is not loaded)."""
    return _CELL_MONITOR


def _unhook(events: Any, mon: MemoryMonitor) -> None:
    for hook in (mon.pre_run_cell, mon.post_run_cell):  # each hook is named after its IPython event
        with contextlib.suppress(ValueError):  # not registered (IPython raises ValueError)
            events.unregister(hook.__name__, hook)


@entry("load_ipython_extension")
def load_ipython_extension(ip: Any, **kwargs: Any) -> MemoryMonitor:
    """Start the cell monitor (``kwargs`` go to ``MemoryMonitor``); loading it twice returns the running one."""
    from . import MemoryMonitor

    global _CELL_MONITOR
    if _CELL_MONITOR is not None:
        return _CELL_MONITOR
    events = getattr(ip, "events", None)
    if events is None or not callable(getattr(events, "register", None)):
        raise type_error("ip", "the IPython shell (get_ipython())", ip, "In a notebook write `%load_ext viewlab`.")
    mon = MemoryMonitor(**kwargs)
    mon._cell_mode = True
    mon.start()
    try:
        for hook in (mon.pre_run_cell, mon.post_run_cell):
            events.register(hook.__name__, hook)
    except BaseException:  # leave nothing behind: no hook, no thread, no mode
        _unhook(events, mon)
        mon.close()
        raise
    _CELL_MONITOR = mon
    return mon


def unload_ipython_extension(ip: Any) -> None:
    """Stop the cell monitor and show its final plot and per-cell table."""
    global _CELL_MONITOR
    mon, _CELL_MONITOR = _CELL_MONITOR, None
    if mon is None:
        return
    _unhook(ip.events, mon)
    mon._cell_open = None  # the unload cell itself is not recorded (close() leaves the mode it entered)
    mon.stop()
    mon.close()
