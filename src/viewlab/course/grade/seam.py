"""Where the grader meets the exercise checker: record a watched call as plain data (child side), judge that
data with the checker's own message functions (grader side).

The checker records a run with :class:`~viewlab.course.exercises.watch.Watch`, whose plain record is
:class:`~viewlab.course.exercises.recorder.Seen` (``Watch.seen``, ``Seen.to_dict``/``from_dict``), and judges it
with :mod:`~viewlab.course.exercises.messages` (``judge_before``, ``judge_after``, ``forbid_problem``,
``loop_problem``). The grader uses those, unchanged, so the words and the order are the checker's.

>>> bank_dir().endswith("bank")
True
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from viewlab.course.exercises import messages as _messages
from viewlab.course.exercises.recorder import Seen

memory_problem = _messages.memory_problem
loop_problem = _messages.loop_problem

__all__ = ["bank_dir", "record", "forbidden", "before", "after", "probe_record"]
__all__ += ["probe_forbidden", "probe_loop", "memory_problem", "loop_problem", "Seen"]


def bank_dir() -> str:
    """The folder of the exercise bank (found without importing it)."""
    spec = importlib.util.find_spec("viewlab.course.exercises.bank")
    assert spec is not None and spec.submodule_search_locations
    return os.path.realpath(list(spec.submodule_search_locations)[0])


# ----- child side ------------------------------------------------------------------------------------------
def record(watch: Any, fn: Any, got: Any, measured: Any) -> dict[str, Any]:
    """What ``watch`` saw while ``fn`` ran (``got``: its result, None when it raised), as plain data."""
    names = sorted(set(getattr(watch.recorder, "names", [])))
    return {"seen": watch.seen(fn, got, measured).to_dict(), "ops": names}


def probe_record(fn: Any, args: tuple[Any, ...], rules: Any) -> dict[str, Any]:
    """One run of the loop probe: all the watch saw, as plain data (or that it was a stub, or what it raised)."""
    from viewlab._checks import outside_entry
    from viewlab.course.exercises.watch import Watch

    watcher = Watch(rules, None, args)
    try:
        with watcher, outside_entry():
            got = fn(*args)
    except NotImplementedError:
        return {"kind": "stub"}
    except BaseException as exc:  # noqa: BLE001 - judged by the grader (a failure where the reference answers)
        text = str(exc).strip()
        return {"kind": "raised", "error": f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"}
    return {"kind": "returned", "got": got, "seen": watcher.seen(fn, got).to_dict()}


# ----- grader side -----------------------------------------------------------------------------------------
def _seen(data: dict[str, Any]) -> Seen:
    return Seen.from_dict(data["seen"])


def forbidden(rules: Any, data: dict[str, Any] | None) -> str | None:
    """``Watch.forbidden``: a forbidden family seen, else a loop in the source."""
    if data is None:
        return None
    seen = _seen(data)
    reason = _messages.forbid_problem(rules, seen)
    if reason is None and rules.no_python_loops is not None and seen.loop is not None:
        reason = _messages.static_loop_problem(*seen.loop)
    return reason


def before(rules: Any, data: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    """``Watch.before_compare``: forbidden work, a loop, a prediction that ran, the bytes limit."""
    return _messages.judge_before(rules, _seen(data), args)


def after(rules: Any, memory: str | None, data: dict[str, Any]) -> str | None:
    """``Watch.after_compare``: zero new bytes for a view, then torch does the work."""
    return _messages.judge_after(rules, memory, _seen(data))


def probe_forbidden(rules: Any, run: dict[str, Any]) -> str | None:
    """Forbidden work on a probe input (judged there too by the checker)."""
    return _messages.forbid_problem(rules, _seen(run)) if "seen" in run else None


def probe_loop(small: dict[str, Any], big: dict[str, Any], n_small: int, n_big: int) -> str | None:
    """Rule ``no_python_loops`` from the two probe runs' operator counts."""
    return loop_problem(_seen(small), _seen(big), n_small, n_big)
