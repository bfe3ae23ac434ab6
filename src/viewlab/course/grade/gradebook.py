"""The gradebook files: ``gradebook.csv`` (reproducible) and ``gradebook.jsonl`` (the same rows, with details).

CSV columns: ``learner,exercise,passed,reason,seconds``; ``passed`` is ``true``/``false``; ``reason`` is the
message the learner would see (empty when passed), or why the answer could not be graded. ``seconds`` is
**the limit that stopped the answer** (the wall-clock or CPU-time limit, in seconds) and empty when the answer
finished within its limits. A measured time changes from one run to the next on a shared machine (rounding does
not help: a value near a rounding edge flips), so a CSV that must come out the same when the same folder is graded
twice holds only what the grader decides; the measured CPU and wall-clock seconds of every answer are in
``gradebook.jsonl`` (``cpu_seconds``, ``wall_seconds``).

A file that could not be read gives one row with exercise ``*``.

>>> from viewlab.course.grade.grader import Row
>>> import io
>>> buf = io.StringIO()
>>> write_csv([Row("Ada", "05-batch-view", True, "")], buf)
>>> print(buf.getvalue().strip())
learner,exercise,passed,reason,seconds
Ada,05-batch-view,true,,
"""

from __future__ import annotations

import csv
import json
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from .grader import Row

__all__ = ["write_csv", "write_jsonl", "HEADER"]

HEADER = ["learner", "exercise", "passed", "reason", "seconds"]


def write_csv(rows: list[Row], out: IO[str]) -> None:
    """The CSV rows, in the order given (the grader sorts them by learner, then exercise)."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(HEADER)
    for row in rows:
        w.writerow(row.csv())


def write_jsonl(rows: list[Row], out: IO[str]) -> None:
    """One JSON object per row: the CSV's fields (``passed`` a bool, ``seconds`` a number or null) and details."""
    for row in rows:
        obj = {
            "learner": row.learner,
            "exercise": row.exercise,
            "passed": row.passed,
            "reason": row.reason,
            "seconds": row.limit_seconds,
            **row.details,
        }
        out.write(json.dumps(obj, sort_keys=True) + "\n")
