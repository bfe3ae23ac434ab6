"""Exercise bank: one module per notebook (``nbNN_<topic>.py``), each calling
:func:`viewlab.course.exercises.register` at import time. Every module in this package is imported the
first time an exercise is looked up, so a new file is all it takes to add exercises.
See :mod:`viewlab.course.exercises` for the format.

>>> from viewlab.course.exercises import exercise_ids
>>> sorted({i[:2] for i in exercise_ids()})
['01', '02', '03', '04', '05', '06', '07', '08', '09', '10']
"""
