"""Where the grader meets the exercise checker: record a watched call as plain data (child side), judge that
data with the checker's own message functions (grader side).

The checker records a run with :class:`~viewlab.course.exercises.watch.Watch`; where it offers the plain record
:class:`~viewlab.course.exercises.recorder.Seen` (``Watch.seen``, ``Seen.to_dict``/``from_dict``) and
:mod:`~viewlab.course.exercises.messages` (``judge_before``, ``judge_after``, ``forbid_problem``,
``loop_problem``), those are used, unchanged. Where it does not (the watch with the recorders as attributes, the
message functions in :mod:`~viewlab.course.exercises.rules`), the same fields are read from the watch and judged
with those functions. Either way the words and the order are the checker's.

>>> isinstance(NEW, bool), bank_dir().endswith("bank")
(True, True)
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

try:  # the checker's plain-data seam
    from viewlab.course.exercises import messages as _messages
    from viewlab.course.exercises.recorder import Hit, OpRecorder, Seen

    NEW = True
except ImportError:  # the checker before it: its recorders, and the message functions in rules
    from viewlab.course.exercises import rules as _messages  # type: ignore[no-redef]
    from viewlab.course.exercises.rules import Hit, OpRecorder  # type: ignore[no-redef,assignment]

    Seen = None  # type: ignore[assignment,misc]
    NEW = False

memory_problem = _messages.memory_problem
loop_problem = _messages.loop_problem

__all__ = ["NEW", "Hit", "OpRecorder", "bank_dir", "record", "forbidden", "before", "after", "probe_record"]
__all__ += ["probe_forbidden", "probe_loop", "probe_raised_counts", "memory_problem", "loop_problem", "Seen"]


def bank_dir() -> str:
    """The folder of the exercise bank (found without importing it)."""
    spec = importlib.util.find_spec("viewlab.course.exercises.bank")
    assert spec is not None and spec.submodule_search_locations
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def _hit(h: Any) -> dict[str, Any] | None:
    return None if h is None else {"family": h.family, "op": h.op, "line": h.line, "inside": h.inside}


# ----- child side ------------------------------------------------------------------------------------------
def record(watch: Any, fn: Any, got: Any, measured: Any, rules: Any) -> dict[str, Any]:
    """What ``watch`` saw while ``fn`` ran (``got``: its result, None when it raised), as plain data."""
    names = sorted(set(getattr(watch.recorder, "names", [])))
    if NEW:
        return {"seen": watch.seen(fn, got, measured).to_dict(), "ops": names}
    from viewlab.course.exercises.watch import _static

    rec = watch.recorder
    static = _static(fn) if rules.no_python_loops is not None else None
    return {
        "hits": {k: _hit(v) for k, v in rec.hits.items()},
        "more": {k: _hit(v) for k, v in watch.more.items()},
        "created": _hit(rec.created),
        "made": _hit(watch.made),
        "numpy": _hit(watch.numpy),
        "viewlab": _hit(watch.viewlab),
        "exit": _hit(watch.exits[0]) if watch.exits else None,
        "loop": list(watch.loop) if watch.loop else None,
        "static": list(static) if static else None,
        "borrowed": rec.borrowed_bytes,
        "peak": None if measured is None else int(measured.peak_bytes),
        "n_ops": rec.n_ops,
        "ops": names,
    }


def probe_record(fn: Any, args: tuple[Any, ...], rules: Any) -> dict[str, Any]:
    """One run of the loop probe: the operators run (and, with the plain-data seam, all the watch saw)."""
    from viewlab._checks import outside_entry

    watcher: Any = None
    if NEW:
        from viewlab.course.exercises.watch import Watch

        watcher = Watch(rules, None, args)
    else:
        watcher = OpRecorder()
    try:
        with watcher, outside_entry():
            got = fn(*args)
    except NotImplementedError:
        return {"kind": "stub"}
    except BaseException as exc:  # noqa: BLE001 - judged by the grader (a failure where the reference answers)
        text = str(exc).strip()
        return {"kind": "raised", "error": f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"}
    out: dict[str, Any] = {"kind": "returned", "got": got}
    if NEW:
        out["seen"] = watcher.seen(fn, got).to_dict()
    else:
        out["n_ops"], out["lifted"] = watcher.n_ops, watcher.lifted_elements
    return out


# ----- grader side -----------------------------------------------------------------------------------------
class _Seen:
    """The old recorder's findings, rebuilt (what the old ``forbid_problem`` reads)."""

    def __init__(self, hits: dict[str, Any]) -> None:
        self.hits = {k: Hit(**v) for k, v in hits.items() if v}

    def first_hit(self, family: str) -> Any:
        return self.hits.get(family)


def _h(d: dict[str, Any] | None) -> Any:
    return Hit(**d) if d else None


def _seen(data: dict[str, Any]) -> Any:
    return Seen.from_dict(data["seen"])


def forbidden(rules: Any, data: dict[str, Any] | None) -> str | None:
    """``Watch.forbidden``: a forbidden family seen, else a loop in the source (or, before, seen running)."""
    if data is None:
        return None
    if NEW:
        seen = _seen(data)
        reason = _messages.forbid_problem(rules, seen)
        if reason is None and rules.no_python_loops is not None and seen.loop is not None:
            reason = _messages.static_loop_problem(*seen.loop)
        return reason
    more = {k: Hit(**v) for k, v in data["more"].items() if v}
    reason = _messages.forbid_problem(rules, _Seen(data["hits"]), more)
    if reason is None and rules.no_python_loops is not None:
        static, loop = data.get("static"), data.get("loop")
        seen = (static[1], static[0]) if static else (tuple(loop) if loop else None)
        reason = _messages.static_loop_problem(*seen) if seen is not None else None
    return reason


def before(rules: Any, data: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    """``Watch.before_compare``: forbidden work, a loop, a prediction that ran, the bytes limit."""
    if NEW:
        return _messages.judge_before(rules, _seen(data), args)
    reason = forbidden(rules, data) or _messages.predict_problem(rules, _h(data["created"]) or _h(data["made"]))
    if reason is None and data["peak"] is not None:
        reason = _messages.bytes_problem(rules, args, data["peak"], data["borrowed"])
    return reason


def after(rules: Any, memory: str | None, data: dict[str, Any]) -> str | None:
    """``Watch.after_compare``: zero new bytes for a view, then torch does the work."""
    if NEW:
        return _messages.judge_after(rules, memory, _seen(data))
    if memory == "view" and data["peak"] is not None:
        made = _h(data["created"]) or _h(data["made"])
        reason = _messages.view_bytes_problem(data["peak"] + data["borrowed"], made)
        if reason is not None:
            return reason
    if not rules.labels():
        return None
    return _messages.outside_problem(_h(data["numpy"]), _h(data["exit"]), _h(data["viewlab"]))


def probe_forbidden(rules: Any, run: dict[str, Any]) -> str | None:
    """Forbidden work on a probe input (judged there too by the checker with the plain-data seam)."""
    return _messages.forbid_problem(rules, _seen(run)) if NEW and "seen" in run else None


def probe_loop(small: dict[str, Any], big: dict[str, Any], n_small: int, n_big: int) -> str | None:
    """Rule ``no_python_loops`` from the two probe runs' operator counts."""
    if NEW:
        return loop_problem(_seen(small), _seen(big), n_small, n_big)

    class _Count:
        def __init__(self, run: dict[str, Any]) -> None:
            self.n_ops, self.lifted_elements = run["n_ops"], run["lifted"]

    return loop_problem(_Count(small), _Count(big), n_small, n_big)


def probe_raised_counts() -> bool:
    """Whether a raise on a probe input the reference answers is a failure (it is, with the plain-data seam)."""
    return NEW
