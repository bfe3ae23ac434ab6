"""The broadcast picture: each operand with its virtual copies, and the result.

>>> fig = draw_broadcast(torch.tensor([[1], [2]]), torch.tensor([10, 20]))
>>> [t.get_text() for t in fig.axes[-1].texts][:4], fig.axes[-1].texts[-1].get_text()
(['11', '21', '12', '22'], 'dim 0')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from .._checks import entry, problem, require_choice, require_str, require_tensor, type_error
from .._format import cell_value
from ..broadcast import explain_broadcast
from ._cells import INK, RESULT, Cell, colour, draw_cells, fit_to_content, place_axes

if TYPE_CHECKING:  # matplotlib is imported lazily so `import viewlab` stays fast
    from matplotlib.figure import Figure

__all__ = ["draw_broadcast", "BROADCAST_OPS", "MAX_DRAWN_CELLS"]

MAX_DRAWN_CELLS = 48
_CELL, _GAP, _CHAR_IN = 0.55, 0.35, 0.075  # inches: a cell, between panels, about one 9 pt character of a title
_CAPTION = "solid = stored in memory; hatched = virtual copy: a stored value read again through stride 0 (no memory)"

# The elementwise operations the figure can show; each is PyTorch's own function.
BROADCAST_OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "+": torch.add,
    "-": torch.sub,
    "*": torch.mul,
    "/": torch.div,
    "==": torch.eq,
    "<": torch.lt,
    ">": torch.gt,
}


def _require_dims(dims: Sequence[str] | None, shape: tuple[int, ...]) -> tuple[str, ...]:
    """The result's dim names, one per dim (``dim 0``, ``dim 1`` unless given)."""
    if dims is None:
        return tuple(f"dim {d}" for d in range(len(shape)))
    if not isinstance(dims, (list, tuple)) or not all(isinstance(d, str) for d in dims) or len(dims) != len(shape):
        example = [f"dim {d}" for d in range(len(shape))]
        want = f"a list of {len(shape)} str, one name per dim of the result {shape}, e.g. {example}"
        raise type_error("dims", want, dims)
    return tuple(dims)


def _as_grid(shape: Sequence[int]) -> tuple[int, int]:
    """(rows, cols) of a shape of rank 0, 1 or 2 drawn as a 2-D grid."""
    return ((1, 1) + tuple(shape))[-2:]  # type: ignore[return-value]


@entry("draw_broadcast")
def draw_broadcast(
    *tensors: torch.Tensor,
    names: Sequence[str] | None = None,
    op: str = "+",
    title: str | None = None,
    dims: Sequence[str] | None = None,
) -> Figure:
    """Draw ``tensors[0] op tensors[1] op ...`` as broadcasting computes it; return the ``Figure`` (no pyplot).

    One panel per operand at the result's shape: stored cells solid, **virtual copies** (stride 0, no
    memory) hatched, each with its value; the last panel is the result, computed by PyTorch. Results of
    rank 0, 1 or 2 with at most :data:`MAX_DRAWN_CELLS` elements (so every number stays readable). Under
    every panel the index along the last dim and that dim's name; left of the first the rows' indices and name.
    ``dims``: the result's dim names (e.g. ``["query i", "key j"]``), ``dim 0``, ``dim 1`` unless given;
    ``title``: the caption under the panels, instead of the one saying what solid and hatched mean.

    >>> fig = draw_broadcast(torch.arange(3).view(3, 1), torch.arange(4), names=["col", "row"])
    >>> [ax.get_title().split(":")[0] for ax in fig.axes]
    ['col', 'row', 'col + row']
    """
    require_choice(require_str(op, "op"), "op", tuple(sorted(BROADCAST_OPS)))
    require_str(title, "title", allow_none=True)
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            text = f"draws values, so operand {i} must be a torch.Tensor, got {type(t).__name__}."
            raise problem(TypeError, f"{text} For shapes alone use viewlab.explain_broadcast.")
        require_tensor(t, f"tensors[{i}]")
        if t.device.type == "meta":
            raise problem(ValueError, f"operand {i} is a meta tensor, which has no values to draw.")
    if op in ("<", ">") and any(t.is_complex() for t in tensors):
        fix = "pass real tensors (e.g. x.real) or op='=='."
        raise problem(TypeError, f"op={op!r} orders values, and complex numbers have no order; {fix}")
    if op == "-" and any(t.dtype == torch.bool for t in tensors):
        fix = "pass x.int() to subtract, or op='==' to compare."
        raise problem(TypeError, f"op='-' is not defined for bool tensors; {fix}")
    expl = explain_broadcast(*tensors, names=names)  # validates count, names; raises BroadcastError
    shape = tuple(expl.shape)
    if len(shape) > 2:
        fix = "Draw a 2-D slice, e.g. x[0] for each operand, or use explain_broadcast."
        text = f"draws results of rank 0, 1 or 2; these operands broadcast to {shape} (rank {len(shape)})."
        raise problem(ValueError, f"{text} {fix}")
    dims = _require_dims(dims, shape)
    caption = title
    rows, cols = _as_grid(shape)
    numel = rows * cols
    if numel == 0 or numel > MAX_DRAWN_CELLS:
        text = f"draws between 1 and {MAX_DRAWN_CELLS} result cells so the numbers stay readable; the result has shape"
        raise problem(ValueError, f"{text} {shape} = {numel} cells. Draw smaller operands, e.g. x[:4].")
    result = tensors[0].detach().cpu()
    for t in tensors[1:]:
        result = BROADCAST_OPS[op](result, t.detach().cpu())

    from matplotlib.figure import Figure

    # Fixed inches per cell; panels side by side, each as wide as its grid or its title; cropped at the end.
    panels = len(tensors) + 1
    names_in = [f"{o.name}: shape {tuple(o.shape)}" for o in expl.operands]
    joined = f" {op} ".join(o.name for o in expl.operands)
    titles_len = max(len(line) for line in names_in + [f"{joined}: shape {shape}", "stride after expand (0, 0)"])
    row_room = 1.1 if len(shape) == 2 else 0.1  # the first panel's row indices and the rows' dim name
    below = 1.0 if shape else 0.1  # column indices and the columns' dim name under every panel
    grid_w, grid_h = (cols + 0.2) * _CELL, (rows + 0.1 + below) * _CELL
    slot = max(grid_w, titles_len * _CHAR_IN) + _GAP
    width, height = panels * slot + 2 * row_room * _CELL + 4.0, grid_h + 4.0
    fig = Figure(figsize=(width, height), facecolor="white")
    axes, left = [], 2.0
    for k in range(panels):
        extra = row_room * _CELL if k in (0, panels - 1) else 0.0  # the rows are named on the first and the result
        axes.append(place_axes(fig, (left + (slot - _GAP - grid_w) / 2, 1.2, grid_w + extra, grid_h)))
        left += slot + extra
    for k, (t, info) in enumerate(zip(tensors, expl.operands)):
        values = t.detach().cpu().expand(shape).reshape(rows, cols).tolist()
        own_rows, own_cols = _as_grid(info.padded)  # the operand's own sizes, right-aligned to the result
        # A virtual copy: a row (column) beyond the first of an operand that has one row (column) itself.
        copy = [[(own_rows == 1 and r > 0) or (own_cols == 1 and c > 0) for c in range(cols)] for r in range(rows)]
        grid = [[Cell(cell_value(v), colour(k), hatched=h) for v, h in zip(vs, hs)] for vs, hs in zip(values, copy)]
        copies = sum(map(sum, copy))
        label = f"{names_in[k]}\nstride after expand {info.expanded_stride}"
        counted = f"{numel - copies} stored cell{'s' * (numel - copies != 1)} + {copies} virtual-copy cell{'s' * (copies != 1)}"
        _draw_panel(axes[k], grid, f"{label}\n{counted}", dims, first=k == 0, row_room=row_room, below=below)
    grid = [[Cell(cell_value(v), RESULT) for v in row] for row in result.reshape(rows, cols).tolist()]
    title = f"{joined}: shape {shape}\n(new memory, {numel} elements)"
    _draw_panel(axes[-1], grid, title, dims, first=True, row_room=row_room, below=below)
    fig.text(0.5, 1.12 / height, caption or _CAPTION, ha="center", va="top", fontsize=9)
    return fit_to_content(fig)


def _draw_panel(ax, grid, title, dims, *, first, row_room, below) -> None:  # type: ignore[no-untyped-def]
    """One panel: the grid, its title, the columns' indices and dim name below; with ``first``, the rows' too."""
    rows, cols = len(grid), len(grid[0])
    left = -(row_room + 0.1) if first else -0.1
    labels = [str(r) for r in range(rows)] if first and len(dims) == 2 else None
    draw_cells(ax, grid, title=title, row_labels=labels, xlim=(left, cols + 0.1), ylim=(-below, rows + 0.1))
    if not dims:
        return
    for c in range(cols):  # the index along the last dim under each column
        ax.text(c + 0.5, -0.25, str(c), ha="center", va="center", fontsize=7, color=INK)
    ax.text(cols / 2, -0.7, dims[-1], ha="center", va="center", fontsize=8, color=INK)
    if labels:
        ax.text(-0.75, rows / 2, dims[0], ha="center", va="center", rotation=90, fontsize=8, color=INK)
