"""What only the course itself uses, kept apart from the tools a learner keeps using afterwards.

The top level of :mod:`viewlab` (layout, broadcast, memory, monitor, draw, attention, ...) is the
toolbox. This subpackage holds the course's own material:

* :mod:`viewlab.course.exercise_bank` -- the exercises of each notebook (learners reach them through
  :mod:`viewlab.exercises`);
* :mod:`viewlab.course.article_helpers` -- the source articles' shape checker, rebuilt with its flaw,
  next to a corrected one;
* :mod:`viewlab.course.claims` -- every claim of the two source articles, with the code that checks it
  and the rule that turns the evidence into a verdict (notebook 07 prints them).

Nothing here is imported by ``import viewlab``.

>>> from viewlab.course import article_helpers
>>> article_helpers.can_expand((3, 1), (3, 4))
True
"""
