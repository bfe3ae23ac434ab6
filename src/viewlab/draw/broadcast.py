"""The broadcast picture: each operand with its virtual copies, and the result.

>>> fig = draw_broadcast(torch.tensor([[1], [2]]), torch.tensor([10, 20]))
>>> [t.get_text() for t in fig.axes[-1].texts]
['11', '21', '12', '22']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from .._checks import entry, problem, require_choice, require_str, require_tensor
from .._format import cell_value
from ..broadcast import explain_broadcast
from ._cells import RESULT, Cell, colour, draw_cells

if TYPE_CHECKING:  # matplotlib is imported lazily so `import viewlab` stays fast
    from matplotlib.figure import Figure

__all__ = ["draw_broadcast", "BROADCAST_OPS", "MAX_DRAWN_CELLS"]

MAX_DRAWN_CELLS = 48

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


def _as_grid(shape: Sequence[int]) -> tuple[int, int]:
    """(rows, cols) of a shape of rank 0, 1 or 2 drawn as a 2-D grid."""
    return ((1, 1) + tuple(shape))[-2:]  # type: ignore[return-value]


@entry("draw_broadcast")
def draw_broadcast(
    *tensors: torch.Tensor, names: Sequence[str] | None = None, op: str = "+", title: str | None = None
) -> Figure:
    """Draw ``tensors[0] op tensors[1] op ...`` as broadcasting computes it; return the ``Figure`` (no pyplot).

    One panel per operand at the result's shape: stored cells solid, **virtual copies** (stride 0, no
    memory) hatched, each with its value; the last panel is the result, computed by PyTorch. Results of
    rank 0, 1 or 2 with at most :data:`MAX_DRAWN_CELLS` elements (so every number stays readable).

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
    rows, cols = _as_grid(shape)
    numel = rows * cols
    if numel == 0 or numel > MAX_DRAWN_CELLS:
        text = f"draws between 1 and {MAX_DRAWN_CELLS} result cells so the numbers stay readable; the result has shape"
        raise problem(ValueError, f"{text} {shape} = {numel} cells. Draw smaller operands, e.g. x[:4].")
    result = tensors[0].detach().cpu()
    for t in tensors[1:]:
        result = BROADCAST_OPS[op](result, t.detach().cpu())

    from matplotlib.figure import Figure

    panels = len(tensors) + 1
    width = panels * (cols * 0.55 + 0.9) + 0.4
    fig = Figure(figsize=(max(width, 4.0), rows * 0.6 + 2.2), facecolor="white")
    axes = fig.subplots(1, panels)
    for k, (t, info) in enumerate(zip(tensors, expl.operands)):
        values = t.detach().cpu().expand(shape).reshape(rows, cols).tolist()
        own_rows, own_cols = _as_grid(info.padded)  # the operand's own sizes, right-aligned to the result
        # A virtual copy: a row (column) beyond the first of an operand that has one row (column) itself.
        copy = [[(own_rows == 1 and r > 0) or (own_cols == 1 and c > 0) for c in range(cols)] for r in range(rows)]
        grid = [[Cell(cell_value(v), colour(k), hatched=h) for v, h in zip(vs, hs)] for vs, hs in zip(values, copy)]
        copies = sum(map(sum, copy))
        label = f"{info.name}: shape {tuple(info.shape)}\nstride after expand {info.expanded_stride}"
        draw_cells(axes[k], grid, title=f"{label}\n{copies} virtual cop{'y' if copies == 1 else 'ies'}")
    joined = f" {op} ".join(o.name for o in expl.operands)
    grid = [[Cell(cell_value(v), RESULT) for v in row] for row in result.reshape(rows, cols).tolist()]
    draw_cells(axes[-1], grid, title=f"{joined}: shape {shape}\n(new memory, {numel} elements)")
    fig.tight_layout(rect=(0, 0.08, 1, 0.98))
    caption = title or "solid = stored in memory; hatched = virtual copy (stride 0, no memory)"
    fig.text(0.5, 0.03, caption, ha="center", va="bottom", fontsize=9)
    return fig
