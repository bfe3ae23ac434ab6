"""Exercise bank: one module per notebook (``nbNN_<topic>.py``), each calling
:func:`viewlab.exercises.register` at import time. Every module in this package is imported the
first time an exercise is looked up, so a new file is all it takes to add exercises.
See :mod:`viewlab.exercises` for the format.
"""
