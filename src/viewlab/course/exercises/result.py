"""What a check found: :class:`CheckResult`, its status (:data:`PASSED`, :data:`FAILED`, :data:`NOT_SOLVED`),
its report, and in Jupyter the picture of a failure (:mod:`.picture`).

>>> r = CheckResult(PASSED, "05-flatten-any", "05-flatten-any: passed.")
>>> bool(r), str(r)
(True, '05-flatten-any: passed.')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import picture

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.figure import Figure

__all__ = ["CheckResult", "PASSED", "FAILED", "NOT_SOLVED"]

PASSED, FAILED, NOT_SOLVED = "passed", "failed", "not solved yet"


@dataclass
class CheckResult:
    """What :func:`check` found. ``passed`` is the bool; ``str(result)`` is the report.

    In Jupyter, a failing result also shows a picture: the input, the expected and the learner's
    result side by side (cells that differ are outlined and marked with ``!``).
    """

    status: str
    title: str
    message: str
    examples: int = 0
    failing_input: tuple[Any, ...] = ()
    expected: Any = None
    got: Any = None
    hint_text: str | None = None
    reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.message

    __repr__ = __str__

    def figure(self) -> Figure | None:
        """Expected vs got (and the first input tensor) as a matplotlib Figure, or None if not drawable."""
        if self.status != FAILED:
            return None
        return picture.failure_figure(self.failing_input, self.expected, self.got)

    def alt_text(self) -> str:
        """A sentence describing :meth:`figure` for screen readers."""
        return picture.failure_alt_text(self.failing_input, self.expected, self.got)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        print(self.message)
        fig = self.figure()
        if fig is not None:
            from viewlab import show_figure

            display(show_figure(fig, alt=self.alt_text()))
