"""Figures as PNG outputs with alt text: the one place a matplotlib figure becomes an image.

A plain PNG output survives in the saved notebook and in the static book (no widget state, no backend
needed), and its alt text describes it for screen readers, on IPython 7 (Colab) and later.

>>> from matplotlib.figure import Figure
>>> img = show_figure(Figure(figsize=(1, 1)), alt="an empty square")
>>> img.data[:4], img.alt
(b'\\x89PNG', 'an empty square')
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any

from .._checks import entry, problem, require_number, type_error

if TYPE_CHECKING:  # matplotlib is imported lazily so `import viewlab` stays fast
    from matplotlib.figure import Figure

__all__ = ["PNGFigure", "show_figure", "render_png"]


def _require_alt(alt: Any) -> str:
    if not isinstance(alt, str) or not alt.strip():
        example = "e.g. alt='a 2x3 view reading storage elements 0 to 5'."
        raise problem(ValueError, f"needs alt text: one sentence saying what the picture shows, {example}")
    return alt.strip()


def _require_figure(fig: Any) -> None:
    from matplotlib.figure import Figure as _Figure

    if not isinstance(fig, _Figure):
        raise type_error("fig", "a matplotlib Figure (e.g. from draw_layout)", fig)


class PNGFigure:
    """A rendered figure: PNG bytes plus the alt text that describes them, displayable in Jupyter.

    Its output (``_repr_mimebundle_``: ``IPython.display.Image`` has no ``alt`` in IPython 7) holds the PNG,
    the alt text in its metadata (where the book build reads it) and a ``text/plain`` line.

    >>> PNGFigure(b"\\x89PNG...", alt="three elements")._repr_mimebundle_()[0]["text/plain"]
    '[figure] three elements'
    """

    @entry("PNGFigure")
    def __init__(self, data: bytes, alt: str) -> None:
        if not isinstance(data, bytes) or not data:
            raise type_error("data", "the PNG file's bytes", data)
        self.data = data
        self.alt = _require_alt(alt)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        data = {"image/png": base64.b64encode(self.data).decode("ascii"), "text/plain": f"[figure] {self.alt}"}
        return data, {"image/png": {"alt": self.alt}}

    def __repr__(self) -> str:
        return f"PNGFigure({len(self.data):,} bytes, alt={self.alt!r})"


@entry("show_figure")
def show_figure(fig: Figure, alt: str, dpi: int = 100) -> PNGFigure:
    """Render ``fig`` to a PNG (see :func:`render_png`) and return a ``PNGFigure`` that carries ``alt`` text.

    >>> import torch
    >>> from viewlab.draw import draw_layout
    >>> show_figure(draw_layout(torch.arange(3)), alt="three elements, stride 1").alt
    'three elements, stride 1'
    """
    _require_figure(fig)
    _require_alt(alt)
    return PNGFigure(render_png(fig, dpi=dpi), alt)


@entry("render_png")
def render_png(fig: Figure, dpi: int = 100) -> bytes:
    """The PNG bytes of ``fig`` at ``dpi`` (20 to 1000): the same for the same figure, so notebooks diff cleanly.

    >>> from matplotlib.figure import Figure
    >>> render_png(Figure(figsize=(1, 1)))[:4]
    b'\\x89PNG'
    """
    _require_figure(fig)
    dpi = require_number(dpi, "dpi", minimum=20, maximum=1000)
    buffer = io.BytesIO()
    # No "Software" entry (it carries the matplotlib version): same bytes on every machine.
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="white", metadata={"Software": None})
    return buffer.getvalue()
