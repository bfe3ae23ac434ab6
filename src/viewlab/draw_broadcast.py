"""A picture of broadcasting: each operand with its virtual copies, and the result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from ._checks import entry, require_choice, require_str, require_tensor
from .broadcast import _explain
from .draw import _PALETTE, _fmt

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
_RESULT_COLOUR = "#CCCCCC"


def _as_grid(shape: Sequence[int]) -> tuple[int, int]:
    shape = tuple(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    return shape[0], shape[1]


@entry("draw_broadcast")
def draw_broadcast(
    *tensors: torch.Tensor, names: Sequence[str] | None = None, op: str = "+", title: str | None = None
) -> Figure:
    """Draw ``tensors[0] op tensors[1] op ...`` as broadcasting computes it; return the ``Figure``.

    One panel per operand, drawn at the result's shape: cells the operand really stores are solid and
    carry their value; its **virtual copies** (read again through stride 0, no memory) are hatched and
    carry the value they repeat. The last panel is the result, computed by PyTorch. Works for results of
    rank 0, 1 or 2 with at most :data:`MAX_DRAWN_CELLS` elements (so every number stays readable).

    Built without pyplot; display it with ``viewlab.show_figure(fig, alt=...)``.

    >>> fig = draw_broadcast(torch.arange(3).view(3, 1), torch.arange(4), names=["col", "row"])
    >>> [ax.get_title().split(":")[0] for ax in fig.axes]
    ['col', 'row', 'col + row']
    """
    func = "draw_broadcast"
    require_str(op, "op")
    require_choice(op, "op", tuple(sorted(BROADCAST_OPS)))
    require_str(title, "title", allow_none=True)
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"draw_broadcast() draws values, so operand {i} must be a torch.Tensor, got {type(t).__name__}. "
                "For shapes alone use viewlab.explain_broadcast."
            )
        require_tensor(t, f"tensors[{i}]")
        if t.device.type == "meta":
            raise ValueError(f"draw_broadcast(): operand {i} is a meta tensor, which has no values to draw.")
    if op in ("<", ">") and any(t.is_complex() for t in tensors):
        raise TypeError(
            f"draw_broadcast(): op={op!r} orders values, and complex numbers have no order; "
            "pass real tensors (e.g. x.real) or op='=='."
        )
    if op == "-" and any(t.dtype == torch.bool for t in tensors):
        raise TypeError(
            "draw_broadcast(): op='-' is not defined for bool tensors; pass x.int() to subtract, or op='==' to compare."
        )
    expl = _explain(tensors, names, torch.float32, func)  # validates count, names; raises BroadcastError
    shape = tuple(expl.shape)
    if len(shape) > 2:
        raise ValueError(
            f"draw_broadcast() draws results of rank 0, 1 or 2; these operands broadcast to {shape} "
            f"(rank {len(shape)}). Draw a 2-D slice, e.g. x[0] for each operand, or use explain_broadcast."
        )
    numel = 1
    for n in shape:
        numel *= n
    if numel == 0 or numel > MAX_DRAWN_CELLS:
        raise ValueError(
            f"draw_broadcast() draws between 1 and {MAX_DRAWN_CELLS} result cells so the numbers stay readable; "
            f"the result has shape {shape} = {numel} cells. Draw smaller operands, e.g. x[:4]."
        )
    result = tensors[0].detach().cpu()
    for t in tensors[1:]:
        result = BROADCAST_OPS[op](result, t.detach().cpu())

    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    rows, cols = _as_grid(shape)
    panels = len(tensors) + 1
    width = panels * (cols * 0.55 + 0.9) + 0.4
    fig = Figure(figsize=(max(width, 4.0), rows * 0.6 + 2.2), facecolor="white")
    axes = fig.subplots(1, panels)

    def draw_panel(ax, values, stored, colour, label):
        for r in range(rows):
            for c in range(cols):
                y = rows - 1 - r
                real = stored[r][c]
                if real:
                    ax.add_patch(Rectangle((c, y), 1, 1, facecolor=colour, edgecolor="black", linewidth=1))
                else:  # hatch drawn in the operand's colour, then a black border on top
                    ax.add_patch(Rectangle((c, y), 1, 1, facecolor="white", edgecolor=colour, hatch="///", linewidth=0))
                    ax.add_patch(Rectangle((c, y), 1, 1, fill=False, edgecolor="black", linewidth=1))
                ax.text(
                    c + 0.5,
                    y + 0.5,
                    _fmt(values[r][c]),
                    ha="center",
                    va="center",
                    fontsize=9,
                    bbox=None if real else {"facecolor": "white", "edgecolor": "none", "pad": 1.5},
                )
        ax.set_xlim(-0.1, cols + 0.1)
        ax.set_ylim(-0.1, rows + 0.1)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(label, fontsize=9)

    for k, (t, info) in enumerate(zip(tensors, expl.operands)):
        view = t.detach().cpu().expand(shape).reshape(rows, cols).tolist()
        padded2 = _as_grid(info.padded)  # the operand's own sizes, right-aligned to the result
        stored = [[(padded2[0] > 1 or r == 0) and (padded2[1] > 1 or c == 0) for c in range(cols)] for r in range(rows)]
        copies = rows * cols - sum(map(sum, stored))
        label = f"{info.name}: shape {tuple(info.shape)}\nstride after expand {info.expanded_stride}"
        label += f"\n{copies} virtual cop{'y' if copies == 1 else 'ies'}"
        draw_panel(axes[k], view, stored, _PALETTE[k % len(_PALETTE)], label)
    values = result.reshape(rows, cols).tolist()
    joined = f" {op} ".join(o.name for o in expl.operands)
    draw_panel(
        axes[-1],
        values,
        [[True] * cols for _ in range(rows)],
        _RESULT_COLOUR,
        f"{joined}: shape {shape}\n(new memory, {numel} elements)",
    )
    fig.tight_layout(rect=(0, 0.08, 1, 0.98))
    fig.text(
        0.5,
        0.03,
        title or "solid = stored in memory; hatched = virtual copy (stride 0, no memory)",
        ha="center",
        va="bottom",
        fontsize=9,
    )
    return fig
