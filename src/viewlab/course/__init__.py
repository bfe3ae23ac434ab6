"""What only the course itself uses, kept apart from the tools a learner keeps using afterwards.

The top level of :mod:`viewlab` (layout, broadcast, memory, monitor, draw, attention, ...) is the
toolbox. This subpackage holds the course's own material:

* :mod:`viewlab.course.exercises` -- the auto-checked exercises: ``from viewlab.course import exercises as ex``,
  then ``ex.show(id)``, ``ex.check_exercise(id, fn)``, ``ex.hint(id, n)``, ``ex.solution(id)``, and
  ``check_guess`` for predictions; the exercises of each notebook are in its ``bank``;
* :mod:`viewlab.course.article_helpers` -- the source articles' shape checker, rebuilt with its flaw,
  next to a corrected one;
* :mod:`viewlab.course.claims` -- every claim of the two source articles, with the code that checks it
  and the rule that turns the evidence into a verdict (notebook 07 prints them);
* :mod:`viewlab.course.grade` -- running a class: :func:`submission` writes this kernel's answers to a file,
  :func:`progress` shows which exercises it has passed, ``viewlab-grade`` grades the files in fresh processes.

Nothing here is imported by ``import viewlab``: the course imports the toolbox, never the other way round.

>>> from viewlab.course import article_helpers
>>> article_helpers.can_expand((3, 1), (3, 4))
True
"""


def __getattr__(name: str):  # noqa: ANN202 - submission() and progress(), imported when first used
    if name in ("submission", "progress"):
        from . import grade

        return getattr(grade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
