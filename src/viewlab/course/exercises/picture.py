"""The failure picture: the failing input, the expected and the learner's result as grids of numbers.

Drawn with the toolbox's one grid primitive (:func:`viewlab.draw._cells.draw_cells`), like the layout and
broadcast pictures. Pure functions of data: :func:`failure_figure` takes the tensors and returns a matplotlib ``Figure`` (or
None when they cannot be drawn as small grids); :func:`failure_alt_text` describes it for screen readers.
Cells where the two results differ are outlined in orange and marked with ``!``.

>>> import torch
>>> fig = failure_figure((torch.zeros(2, 2),), torch.zeros(2, 2), torch.eye(2))
>>> len(fig.axes)
3
>>> failure_alt_text((torch.zeros(2, 2),), torch.zeros(2, 2), torch.eye(2))
"Grids of numbers: the failing input of shape (2, 2), the expected result of shape (2, 2) and your result of shape (2, 2); 2 cells differ and are outlined in orange with a '!' mark."
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from viewlab._format import cell_value
from viewlab.draw._cells import Cell, draw_cells

if TYPE_CHECKING:  # matplotlib is imported only when a picture is drawn
    from matplotlib.figure import Figure

__all__ = ["failure_figure", "failure_alt_text", "MAX_PICTURE_ELEMENTS"]

MAX_PICTURE_ELEMENTS = 48  # bigger tensors are not drawn: the text report says it better
_FILL, _FILL_BAD = "#DCEBF7", "#F5C08A"
_EDGE_BAD = "#D55E00"


def _first_tensor(obj: Any) -> torch.Tensor | None:
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, (tuple, list)):
        for o in obj:
            found = _first_tensor(o)
            if found is not None:
                return found
    return None


def _drawable(t: Any) -> bool:
    """A dense tensor with values to read: not nested, not sparse, not on meta."""
    return isinstance(t, torch.Tensor) and not t.is_nested and t.layout == torch.strided and t.device.type != "meta"


def _differs(expected: Any, got: Any) -> torch.Tensor | None:
    """Where ``got`` differs from ``expected`` (a bool mask), or None when shapes or dtypes differ."""
    if not (_drawable(expected) and _drawable(got)):
        return None
    if tuple(expected.shape) != tuple(got.shape) or expected.dtype != got.dtype:
        return None
    e, g = expected.detach().cpu(), got.detach().cpu()
    return ~(torch.isclose(g, e, equal_nan=True) if e.is_floating_point() else g == e)


def failure_figure(failing_input: tuple[Any, ...], expected: Any, got: Any) -> Figure | None:
    """Expected vs got (and the first input tensor) as a matplotlib Figure, or None if not drawable."""
    first_in = _first_tensor(failing_input)
    if not (isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor)):
        return None
    for t in (first_in, expected, got):
        if t is not None and (not _drawable(t) or t.numel() > MAX_PICTURE_ELEMENTS or t.is_complex()):
            return None
    panels: list[tuple[str, torch.Tensor, torch.Tensor | None]] = []
    if first_in is not None:
        panels.append((f"input {tuple(first_in.shape)}", first_in, None))
    panels.append((f"expected {tuple(expected.shape)}", expected, None))
    panels.append((f"yours {tuple(got.shape)}", got, _differs(expected, got)))
    return _panels_figure(panels)


def failure_alt_text(failing_input: tuple[Any, ...], expected: Any, got: Any) -> str:
    """A sentence describing :func:`failure_figure` for screen readers."""
    n_bad = ""
    bad = _differs(expected, got)
    if bad is not None:
        count = int(bad.sum())
        differ = "1 cell differs and is" if count == 1 else f"{count} cells differ and are"
        n_bad = f"; {differ} outlined in orange with a '!' mark"
    shp = lambda t: tuple(t.shape) if _drawable(t) else type(t).__name__  # noqa: E731
    first_in = _first_tensor(failing_input)
    lead = f"the failing input of shape {shp(first_in)}, " if first_in is not None else ""
    return (
        f"Grids of numbers: {lead}the expected result of shape {shp(expected)} "
        f"and your result of shape {shp(got)}{n_bad}."
    )


def _grid(t: torch.Tensor) -> tuple[list[list[str]], int, int]:
    """``t`` as rows of cell texts: 0-D and 1-D as one row, more dims stacked into rows of the last dim."""
    v = t.detach().cpu()
    if v.dim() == 0:
        v = v.reshape(1, 1)
    elif v.dim() == 1:
        v = v.reshape(1, -1)
    else:
        v = v.reshape(-1, v.shape[-1])
    rows, cols = v.shape
    text = [[cell_value(x, whole_floats=True) for x in row] for row in v.tolist()]
    return text, rows, cols


def _panels_figure(panels: list[tuple[str, torch.Tensor, torch.Tensor | None]]) -> Figure:
    from matplotlib.figure import Figure

    grids = [(title, *_grid(t), None if m is None else _grid(m.to(torch.int64))[0]) for title, t, m in panels]
    width = sum(max(c, 2) for _, _, _, c, _ in grids) * 0.55 + 0.8 * len(grids)
    height = max(r for _, _, r, _, _ in grids) * 0.5 + 0.9
    fig = Figure(figsize=(max(width, 3.0), height), facecolor="white")
    axes = fig.subplots(1, len(grids), gridspec_kw={"width_ratios": [max(c, 2) for _, _, _, c, _ in grids]})
    for ax, (title, text, rows, cols, bad) in zip(axes, grids):
        wrong = [[bad is not None and bad[r][c] == "1" for c in range(cols)] for r in range(rows)]
        cells = [
            [
                Cell(text[r][c] + "!", _FILL_BAD, edge=_EDGE_BAD, linewidth=2.5, bold=True)
                if wrong[r][c]
                else Cell(text[r][c], _FILL, linewidth=0.8)
                for c in range(cols)
            ]
            for r in range(rows)
        ]
        draw_cells(ax, cells, title=title)
    fig.tight_layout()
    return fig
