"""``viewlab.course.progress()``: which exercises of the course this kernel has passed, as a small table.

It reads the results the in-kernel check records (:mod:`.record`); nothing is re-run.

>>> from viewlab.course.grade import record
>>> record.clear()
>>> print(progress_text().splitlines()[0])
Exercises passed in this kernel: 0 of ...
"""

from __future__ import annotations

__all__ = ["progress", "progress_text", "Progress"]

_MARK = {"passed": "passed", "failed": "failed", "not solved yet": "not solved yet"}


def _rows() -> list[tuple[str, str, str]]:
    from viewlab.course.exercises import exercise_ids, get

    from .record import statuses

    seen = statuses()
    return [(i, get(i).title, _MARK.get(seen.get(i, ""), "not checked")) for i in exercise_ids()]


def progress_text() -> str:
    """The table as plain text."""
    rows = _rows()
    done = sum(r[2] == "passed" for r in rows)
    width = max(len(r[0]) for r in rows)
    lines = [f"Exercises passed in this kernel: {done} of {len(rows)}"]
    lines += [f"  {i:<{width}}  {status:<14}  {title}" for i, title, status in rows]
    return "\n".join(lines)


class Progress:
    """The table; text in a terminal, an HTML table in Jupyter."""

    def __repr__(self) -> str:
        return progress_text()

    def _repr_html_(self) -> str:
        import html

        rows = _rows()
        done = sum(r[2] == "passed" for r in rows)
        body = "".join(
            f"<tr><td><code>{html.escape(i)}</code></td><td>{html.escape(t)}</td>"
            f"<td><strong>{'&#10003; ' if s == 'passed' else ''}{html.escape(s)}</strong></td></tr>"
            for i, t, s in rows
        )
        return (
            f"<table><caption>Exercises passed in this kernel: {done} of {len(rows)}</caption>"
            f"<tr><th>exercise</th><th>title</th><th>status</th></tr>{body}</table>"
        )


def progress() -> Progress:
    """Which exercises this kernel has passed (from the results of ``check_exercise``): a small table.

    >>> progress()  # doctest: +ELLIPSIS
    Exercises passed in this kernel: ...
    """
    return Progress()
