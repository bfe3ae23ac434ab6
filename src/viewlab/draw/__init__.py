"""Pictures of memory, built without pyplot: layouts, broadcasting, and PNG outputs with alt text.

Each picture is a pure function of its arguments returning a ``Figure``; :func:`show_figure` makes it a PNG output,
and :func:`describe_layout` writes the alt text of a layout figure from the numbers it draws.

>>> import torch
>>> img = show_figure(draw_layout(torch.arange(3)), alt="three elements, stride 1")
>>> img.alt, len(draw_broadcast(torch.ones(2, 1), torch.ones(3)).axes)
('three elements, stride 1', 3)
"""

from .broadcast import BROADCAST_OPS, MAX_DRAWN_CELLS, draw_broadcast
from .layout import MAX_DRAWN_ELEMENTS, describe_layout, draw_layout
from .png import PNGFigure, render_png, show_figure

__all__ = ["draw_layout", "describe_layout", "draw_broadcast", "show_figure", "PNGFigure", "render_png"]
__all__ += ["MAX_DRAWN_ELEMENTS", "MAX_DRAWN_CELLS", "BROADCAST_OPS"]
