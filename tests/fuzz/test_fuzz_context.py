"""Every context manager of the toolbox (views_only, watch_broadcasts, measure, MemoryMonitor) used the ways a
learner misuses one: entered twice, exited without being entered, an exception or a KeyboardInterrupt inside,
used from another thread, two threads inside one object at once, and (the monitor) stopped from another thread.

Each way must end in a correct result or a clear error (raised in viewlab, naming the function: RuntimeError
counts here, as it is the error for a wrong state), let the learner's own exception through unchanged, never
hang, and leave nothing behind: the mode stacks and grad mode of every thread involved as before, no thread
left running, and the guard's effect gone (a copy and a broadcast outside the block pass silently).
"""

from __future__ import annotations

import inspect
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tests.fuzz.harness import (
    CALL_TIMEOUT_S,
    FIGURES,
    SRC,
    _process_state,
    _thread_state,
    public,
    run_with_time_limit,
    surface,
)

views_only, watch_broadcasts, measure, MemoryMonitor = (
    public(n) for n in ("views_only", "watch_broadcasts", "measure", "MemoryMonitor")
)
BroadcastWarning = public("BroadcastWarning")
WAIT_S = 10.0  # generous: an event that does not come within this is a hang, not a slow machine


class Mine(Exception):
    """The learner's own exception, raised inside a block: it must come out unchanged."""


_BASE = torch.arange(6.0).view(2, 3)


def _body() -> torch.Tensor:
    return _BASE.t()  # a view of a tensor made outside: allowed under every guard


MAKERS: dict[str, Callable[[], Any]] = {
    "views_only": lambda: views_only(),
    "watch_broadcasts": lambda: watch_broadcasts(),
    "measure": lambda: measure(),
    "MemoryMonitor": lambda: MemoryMonitor(display=False, interval=60.0),
}


def _clear(name: str, exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    in_viewlab = bool(frames) and frames[-1].filename.startswith(SRC)
    return in_viewlab and isinstance(exc, (RuntimeError, TypeError, ValueError)) and f"{name}" in str(exc)


def _nothing_on_this_thread() -> str | None:
    """None when no guard acts on this thread any more: a copy passes, a stretching broadcast is not reported."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.ones(3).clone()
            torch.zeros(4, 1) - torch.zeros(4)
    except Exception as err:  # noqa: BLE001 - what a guard left behind raises
        return f"{type(err).__name__}: {err}"
    reports = [w for w in caught if issubclass(w.category, BroadcastWarning)]
    return f"a watcher still reports: {reports[0].message}" if reports else None


def _check(name: str, outcome: dict, allowed: tuple[type[BaseException], ...] = ()) -> None:
    """One thread's record: its error (None, one of ``allowed`` exactly as raised, or clear), its state as before."""
    err = outcome["error"]
    stats = FIGURES.setdefault(f"{name} (context)", {"tried": 0, "returned": 0, "clear": 0, "unclear": 0, "good": 0})
    stats["tried"] += 1
    if err is None or isinstance(err, allowed):
        stats["returned"] += 1
    elif _clear(name, err):
        stats["clear"] += 1
    else:
        stats["unclear"] += 1
        detail = "".join(traceback.format_exception(err)[-4:])
        raise AssertionError(f"{name}: {outcome['how']} failed unclearly: {type(err).__name__}: {err}\n{detail}")
    assert outcome["after"] == outcome["before"], f"{name}: {outcome['how']} left a mode behind on its thread"
    assert outcome["left"] is None, f"{name}: {outcome['how']} left its guard acting: {outcome['left']}"


def _record(how: str, fn: Callable[[], Any]) -> dict:
    before = _thread_state()
    try:
        fn()
        error = None
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included: it is the scenario's own
        error = exc
    return {"how": how, "error": error, "before": before, "after": _thread_state(), "left": _nothing_on_this_thread()}


def _on_thread(fn: Callable[[], Any]) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


# ----- the ways -------------------------------------------------------------------------------------------------
def enter_twice(name: str) -> list[dict]:
    cm = MAKERS[name]()

    def nested() -> None:
        with cm:
            with cm:
                _body()

    return [_record("entered twice (nested)", nested)]


def exit_without_enter(name: str) -> list[dict]:
    cm = MAKERS[name]()
    return [_record("__exit__ without __enter__", lambda: cm.__exit__(None, None, None))]


def raising_inside(kind: type[BaseException]) -> Callable[[str], list[dict]]:
    def scenario(name: str) -> list[dict]:
        cm, raised = MAKERS[name](), kind("raised inside the block")

        def block() -> None:
            with cm:
                raise raised

        outcome = _record(f"{kind.__name__} inside", block)
        assert outcome["error"] is raised, f"{name}: {kind.__name__} inside came out as {outcome['error']!r}"
        return [outcome]

    return scenario


def from_another_thread(name: str) -> list[dict]:
    cm, out = MAKERS[name](), []

    def block() -> None:
        with cm:
            _body()

    worker = _on_thread(lambda: out.append(_record("used on another thread", block)))
    worker.join(WAIT_S)
    assert not worker.is_alive() and out, f"{name}: no answer from the other thread within {WAIT_S} s"
    return out


def two_threads_at_once(name: str) -> list[dict]:
    """One object, two threads inside it at once (a ``@views_only()`` function called concurrently)."""
    cm, out = MAKERS[name](), []
    first_inside, second_tried, first_left = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:  # in first, out first: while the second thread is still inside
        try:
            with cm:
                first_inside.set()
                assert second_tried.wait(WAIT_S), "the second thread never tried"
                _body()
        finally:
            first_left.set()

    def second() -> None:
        assert first_inside.wait(WAIT_S), "the first thread never got inside"
        try:
            with cm:
                second_tried.set()
                _body()
                assert first_left.wait(WAIT_S), "the first thread never left"
        finally:
            second_tried.set()

    threads = [
        _on_thread(lambda f=f, n=n: out.append(_record(n, f)))
        for f, n in ((first, "first of two"), (second, "second of two"))
    ]
    for t in threads:
        t.join(2 * WAIT_S)
    assert not any(t.is_alive() for t in threads) and len(out) == 2, f"{name}: two threads at once hung"
    return out


def stopped_from_another_thread(name: str) -> list[dict]:
    """The monitor started on one thread, stopped and closed from another: the starting thread is clean after."""
    mon, started, stopped, out = MAKERS[name](), threading.Event(), threading.Event(), []

    def starter() -> None:
        before = _thread_state()
        mon.start()
        started.set()
        stopped.wait(WAIT_S)
        # A thread's mode stack is its own: a stop from another thread is swept at this thread's next viewlab
        # entry (or, in IPython, after the cell); until then the closed mode only passes operators on. So: one operator (it must run), then one start of viewlab, then the state.
        _ = torch.ones(2) + 1
        with measure():
            pass
        out.append(
            {
                "how": "started here, stopped on another thread, then one op and one measure here",
                "error": None,
                "before": before,
                "after": _thread_state(),
                "left": _nothing_on_this_thread(),
            }
        )

    worker = _on_thread(starter)
    assert started.wait(WAIT_S), "the monitor did not start"
    out.append(_record("stop() and close() from another thread", lambda: (mon.stop(show=False), mon.close())))
    stopped.set()
    worker.join(WAIT_S)
    assert not worker.is_alive(), "the starting thread hung"
    return out


WAYS: dict[str, Callable[[str], list[dict]]] = {
    "enter twice": enter_twice,
    "exit without enter": exit_without_enter,
    "exception inside": raising_inside(Mine),
    "KeyboardInterrupt inside": raising_inside(KeyboardInterrupt),
    "from another thread": from_another_thread,
    "two threads at once": two_threads_at_once,
}
CASES = [(name, way) for name in MAKERS for way in WAYS] + [("MemoryMonitor", "stopped from another thread")]
WAYS["stopped from another thread"] = stopped_from_another_thread


@pytest.mark.parametrize(("name", "way"), [pytest.param(n, w, id=f"{n}: {w}") for n, w in CASES])
def test_context_manager(name: str, way: str) -> None:
    state = _process_state()
    here = _thread_state()
    allowed = (Mine, KeyboardInterrupt) if "inside" in way else ()
    result = run_with_time_limit(lambda: WAYS[way](name), 3 * CALL_TIMEOUT_S)
    if result.error is not None:
        raise result.error
    for outcome in result.result:
        _check(name, outcome, allowed)
    assert result.after == result.before, f"{name}: {way} left a mode behind on the thread that ran it"
    deadline = time.monotonic() + WAIT_S  # a monitor's sampling thread ends after stop(): wait for it, generously
    while _process_state() != state and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _process_state() == state and _thread_state() == here, f"{name}: {way} left a thread or setting behind"


def test_every_context_manager_of_the_surface_is_checked():
    """Read from the modules: a public class with ``__enter__``, or a guard of viewlab.sentinels (a function that
    returns a context manager when called without arguments), needs a maker in MAKERS."""
    found = set()
    for module in surface():
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if isinstance(obj, type) and hasattr(obj, "__enter__") and not issubclass(obj, BaseException):
                found.add(name)
            elif module.__name__ == "viewlab.sentinels" and inspect.isfunction(obj) and hasattr(obj(), "__enter__"):
                found.add(name)
    assert {"views_only", "watch_broadcasts", "measure", "MemoryMonitor"} <= found
    assert found <= set(MAKERS), f"add to MAKERS: {sorted(found - set(MAKERS))}"
