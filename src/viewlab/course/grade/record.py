"""What this kernel's in-kernel checks found: each exercise's last status, and the cell its answer came from.

:func:`viewlab.course.exercises.check_exercise` calls :func:`note` after every check (a small hook there);
:func:`viewlab.course.progress` shows the statuses, :func:`viewlab.course.submission` writes the sources. The
source is the cell (or file) the learner's function was defined in, read from ``linecache`` (where IPython keeps
every cell), with the statements that are not imports, definitions or assignments blanked
(:func:`.submit.answer_text`).

>>> clear()
>>> def f(x):
...     return x
>>> note("05-flatten-any", f, "failed")
>>> statuses()
{'05-flatten-any': 'failed'}
"""

from __future__ import annotations

import linecache
from collections.abc import Callable
from typing import Any

__all__ = ["note", "statuses", "sources", "clear"]

_STATUS: dict[str, str] = {}
_SOURCE: dict[str, str] = {}


def _cell_of(fn: Callable[..., Any]) -> str | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    return "".join(lines) if lines else None


def note(exercise_id: str, fn: Callable[..., Any], status: str) -> None:
    """Remember the status of a check of ``exercise_id`` and the source of the cell ``fn`` comes from."""
    from .submit import answer_text

    _STATUS[exercise_id] = status
    cell = _cell_of(fn)
    if cell is not None:
        _SOURCE[exercise_id] = answer_text(cell)


def statuses() -> dict[str, str]:
    """Exercise id -> the status of its last check in this kernel."""
    return dict(_STATUS)


def sources() -> dict[str, str]:
    """Exercise id -> the answer's cell source, as it was when last checked."""
    return dict(_SOURCE)


def clear() -> None:
    """Forget every result (a fresh start; tests)."""
    _STATUS.clear()
    _SOURCE.clear()
