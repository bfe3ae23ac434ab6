"""A learner's submission: the file :func:`submission` writes, and how the grader reads it.

The file is JSON: ``{"format": 1, "learner": str, "course_version": str, "answers": {exercise_id: source_text}}``.
``source_text`` is the cell the learner's answer was defined in, as it was when ``check_exercise`` last ran it
(IPython keeps every cell's source in ``linecache``; :mod:`.record` takes it there), with the lines of any other
statement than imports, definitions and assignments blanked (the ``check_exercise`` call itself, prints): the
line numbers stay those of the cell, so a grader's message says "line 3 of this cell" about the learner's line 3.
A helper defined in another cell is not included: an answer should be self-contained in its cell.

>>> text = "import torch\\ndef f(x):\\n    return x.t()\\nex.check_exercise('05-x', f)\\n"
>>> answer_text(text).splitlines()
['import torch', 'def f(x):', '    return x.t()', '']
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viewlab._checks import entry, problem, require_str

__all__ = ["submission", "answer_text", "load", "Submission", "FORMAT", "BadSubmission"]

FORMAT = 1
_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


class BadSubmission(ValueError):
    """A file that is not a submission (not JSON, a wrong format, answers that are not text)."""


def answer_text(cell: str) -> str:
    """The cell with every top-level statement other than imports, definitions and assignments blanked
    (the same number of lines, so line numbers are the cell's)."""
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        return cell  # graded as written: the grader reports the syntax error
    lines = cell.splitlines()
    for node in tree.body:
        if not isinstance(node, _KEPT):
            for n in range(node.lineno - 1, (node.end_lineno or node.lineno)):
                lines[n] = ""
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Submission:
    """One file, read: who, which course version, and each answer's source."""

    path: str
    learner: str
    course_version: str
    answers: dict[str, str]


def load(path: str | os.PathLike[str]) -> Submission:
    """Read a submission file; :class:`BadSubmission` says what is wrong with one that is not."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise BadSubmission(f"the file could not be read ({exc.strerror})") from None
    if not raw.strip():
        raise BadSubmission("the file is empty")
    if len(raw) > 5_000_000:
        raise BadSubmission(f"the file is {len(raw):,} bytes; a submission is a few kB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadSubmission(f"the file is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BadSubmission(f"the file is not a viewlab submission (format {FORMAT})")
    answers = data.get("answers")
    if not isinstance(answers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in answers.items()):
        raise BadSubmission("its answers are not a mapping of exercise ids to source text")
    learner = data.get("learner")
    learner = learner.strip() if isinstance(learner, str) and learner.strip() else p.stem
    version = data.get("course_version")
    return Submission(str(p), learner, version if isinstance(version, str) else "unknown", dict(answers))


def _course_version() -> str:
    try:
        from importlib.metadata import version

        return version("viewlab")
    except Exception:  # noqa: BLE001 - a source checkout without metadata
        return "unknown"


def _on_colab() -> bool:
    import sys

    return "google.colab" in sys.modules


@entry("submission")
def submission(path: str = "viewlab-submission.json", learner: str | None = None) -> str:
    """Write this kernel's answers (each exercise checked with ``check_exercise``) to ``path``; returns the path.

    On Colab the file is offered for download too (``google.colab.files.download``); in JupyterLab it is written
    beside the notebook (the kernel's working folder). ``learner``: your name as your teacher knows it (asked
    for when not given, where a prompt can be shown). With no answer checked yet it refuses, saying so.

    >>> from viewlab.course.grade import record
    >>> record.clear()
    >>> submission("/tmp/viewlab-doctest.json", learner="Ada")
    Traceback (most recent call last):
    ...
    ValueError: submission(): no answers to submit: check an exercise first with check_exercise(exercise_id, my_fn); its cell is what gets submitted.
    """
    from . import record

    require_str(path, "path", nonempty=True)
    require_str(learner, "learner", allow_none=True)
    answers = record.sources()
    if not answers:
        raise problem(
            ValueError,
            "no answers to submit: check an exercise first with check_exercise(exercise_id, my_fn); "
            "its cell is what gets submitted.",
        )
    if learner is None or not learner.strip():
        try:
            learner = input("Your name (as your teacher knows it): ")
        except (EOFError, OSError, RuntimeError):
            learner = ""
    if not learner.strip():
        raise problem(ValueError, "needs your name: submission(learner='Your Name').")
    data: dict[str, Any] = {
        "format": FORMAT,
        "learner": learner.strip(),
        "course_version": _course_version(),
        "answers": answers,
    }
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    print(f"wrote {len(answers)} answer(s) for {learner.strip()} to {os.path.abspath(path)}")
    if _on_colab():
        from google.colab import files  # type: ignore[import-not-found]

        files.download(path)
    return path
