"""Every exception and warning viewlab raises on purpose, in one place: what a learner can catch.

Each keeps a builtin base, so ``except ValueError`` (or ``RuntimeError``, ``UserWarning``) still
catches it. Arguments that are simply wrong raise the builtin ``TypeError``/``ValueError`` with a
message naming the function, the argument, what came and what to pass (see :mod:`viewlab._checks`).

>>> import viewlab
>>> try:
...     viewlab.explain_broadcast((4, 3), (4,))
... except ValueError as err:  # a BroadcastError is a ValueError
...     print(type(err).__name__, err.fixes[0].code)
BroadcastError b.unsqueeze(1)
"""

from __future__ import annotations

from typing import Any

__all__ = ["BroadcastError", "CopyError", "BroadcastWarning", "BroadcastStretchError"]


class BroadcastError(ValueError):
    """Shapes that cannot broadcast (from :func:`viewlab.explain_broadcast`).

    Attributes:
        conflicts: one entry per conflicting dimension, ``(dim_from_right, ((name, own_dim, size), ...))``
            listing every operand that has that dimension (``dim_from_right`` is -1 for the last dim).
        fixes: :class:`viewlab.broadcast.BroadcastFix` suggestions (possibly empty), best first.
    """

    def __init__(self, message: str, conflicts: tuple, fixes: tuple[Any, ...]):
        super().__init__(message)
        self.conflicts, self.fixes = conflicts, fixes

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and copy rebuild an exception from its args alone (here: the message); these three rebuild it
        # whole, so it crosses processes (multiprocessing, pytest-xdist) and copy.deepcopy.
        return (type(self), (str(self), self.conflicts, self.fixes), self.__dict__ or None)


class CopyError(RuntimeError):
    """Raised inside :func:`viewlab.views_only` by an operator that made new storage (a copy or an allocation).

    >>> import torch, viewlab
    >>> x = torch.arange(6.0)
    >>> try:
    ...     with viewlab.views_only():
    ...         x.view(2, 3).t().contiguous()
    ... except viewlab.CopyError:
    ...     print("a copy")
    a copy
    """


class BroadcastWarning(UserWarning):
    """Issued by :func:`viewlab.watch_broadcasts` when operands were stretched against each other.

    A warning category of its own, so it can be told apart from torch's warnings, filtered, or made an error
    (``warnings.simplefilter("error", BroadcastWarning)``):

    >>> import warnings, torch, viewlab
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     with viewlab.watch_broadcasts():
    ...         _ = torch.zeros(3, 1) - torch.zeros(3)  # (3, 1) - (3,) is (3, 3): both stretched
    >>> [issubclass(w.category, viewlab.BroadcastWarning) for w in seen]
    [True]
    """


class BroadcastStretchError(ValueError):
    """Raised by ``watch_broadcasts(action="raise")`` instead of the :class:`BroadcastWarning`.

    >>> import torch, viewlab
    >>> col, row = torch.zeros(3, 1), torch.zeros(3)
    >>> try:
    ...     with viewlab.watch_broadcasts(action="raise"):
    ...         col - row  # (3, 1) - (3,) is (3, 3): both stretched
    ... except viewlab.BroadcastStretchError:
    ...     print("stretched")
    stretched
    """
