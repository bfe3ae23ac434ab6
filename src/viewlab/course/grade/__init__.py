"""Grading a class: submissions from the learners' kernels, graded in fresh processes, a gradebook and a report.

* :func:`viewlab.course.submission` (:mod:`.submit`): a learner writes the answers checked in this kernel
  to ``viewlab-submission.json`` (offered for download on Colab);
* ``python -m viewlab.course.grade SUBMISSIONS... --out DIR`` (or ``viewlab-grade``): the teacher grades them
  (:mod:`.grader`: one child process per submission, :mod:`.runner`, that never holds a reference answer or an
  expected value; :mod:`.judge` decides in the grader's process) and gets ``DIR/gradebook.csv``,
  ``DIR/gradebook.jsonl`` and ``DIR/report.html`` (:mod:`.gradebook`, :mod:`.report`);
* :func:`viewlab.course.progress` (:mod:`.progress_table`): which exercises this kernel has passed, from the results
  the in-kernel checks recorded (:mod:`.record`).

Nothing is started at import; this package imports nothing heavy until used.
"""

from __future__ import annotations

__all__ = ["grade", "submission", "progress"]


def __getattr__(name: str):  # noqa: ANN202 - lazy: importing the grader needs torch and the bank
    if name == "grade":
        from .grader import grade

        return grade
    if name == "submission":
        from .submit import submission

        return submission
    if name == "progress":
        from .progress_table import progress

        return progress
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
