"""``%load_ext viewlab``: one always-on monitor whose hooks give each cell a :class:`~viewlab.monitor.CellRecord`
and one printed line; ``%unload_ext viewlab`` shows the final plot and table.

>>> cell_monitor() is None
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._checks import entry, type_error

if TYPE_CHECKING:
    from . import MemoryMonitor

_CELL_MONITOR: MemoryMonitor | None = None


def cell_monitor() -> MemoryMonitor | None:
    """The monitor started by ``%load_ext viewlab`` (None when the extension is not loaded)."""
    return _CELL_MONITOR


def _unhook(events: Any, mon: MemoryMonitor) -> None:
    """Unregister both hooks; an error other than "not registered" is raised after trying both."""
    failed: BaseException | None = None
    for hook in (mon.pre_run_cell, mon.post_run_cell):  # each hook is named after its IPython event
        try:
            events.unregister(hook.__name__, hook)
        except ValueError:  # not registered (IPython raises ValueError)
            pass
        except Exception as exc:  # noqa: BLE001 - the other hook is still unregistered, then this is raised
            failed = failed or exc
    if failed is not None:
        raise failed


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
    """Stop the cell monitor and show its final plot and per-cell table. The monitor is stopped and closed even when
    the shell fails to unregister its hooks (that error is raised afterwards; the hooks then do nothing)."""
    global _CELL_MONITOR
    mon, _CELL_MONITOR = _CELL_MONITOR, None
    if mon is None:
        return
    try:
        _unhook(getattr(ip, "events", None), mon)
    finally:
        mon._cell_open = None  # the unload cell itself is not recorded (close() leaves the mode it entered)
        try:
            mon.stop()
        finally:
            mon.close()
