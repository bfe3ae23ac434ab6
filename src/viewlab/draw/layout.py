"""The layout picture: the logical view on top, the 1-D storage strip below.

>>> fig = draw_layout(torch.arange(6).view(2, 3).t())
>>> [t.get_text() for t in fig.axes[0].texts][:4]
['0', '@0', '3', '@3']
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import torch

from .._checks import entry, problem, require_str, require_tensor
from .._format import cell_value
from ..layout import layout, storage_indices
from ._cells import UNUSED, Cell, colour, draw_cells

if TYPE_CHECKING:  # matplotlib is imported lazily so `import viewlab` stays fast
    from matplotlib.figure import Figure

__all__ = ["draw_layout", "MAX_DRAWN_ELEMENTS"]

MAX_DRAWN_ELEMENTS = 64


@entry("draw_layout")
def draw_layout(t: Any, title: str | None = None) -> Figure:
    """Draw how ``t`` maps onto its storage and return the matplotlib ``Figure`` (built without pyplot).

    Top: the tensor as indexed (leading dims stacked as labelled rows), each cell with its value and ``@k``,
    the storage index it reads. Bottom: the storage strip, each element with its index, value and read
    count (``x3`` after an expand), grey where never read; an arrow marks the offset. Element ``k`` has the
    same colour in every figure. ``t``: a dense tensor with values of at most :data:`MAX_DRAWN_ELEMENTS`.

    >>> len(draw_layout(torch.arange(6).view(2, 3).t()).axes)
    2
    """
    t = require_tensor(t, "t")
    require_str(title, "title", allow_none=True)
    if t.device.type == "meta":
        fix = "Use viewlab.layout(t) for its shape and strides, or draw a CPU tensor of the same shape."
        raise problem(ValueError, f"needs values, and a meta tensor has none. {fix}")
    info = layout(t)
    if info.numel > MAX_DRAWN_ELEMENTS:
        text = f"draws at most {MAX_DRAWN_ELEMENTS} elements so the numbers stay readable; this tensor has shape"
        fix = "Draw a small slice instead, e.g. t[:2, :4]."
        raise problem(ValueError, f"{text} {tuple(t.shape)} = {info.numel} elements. {fix}")
    idx = storage_indices(t).reshape(-1).tolist()
    n_storage = info.storage_bytes // info.itemsize
    # Show the part of storage the view can reach, plus a little context on each side; from element 0
    # whenever that fits, so the offset (the elements skipped before the first one read) is visible.
    hi = min(n_storage, max(idx) + 3) if idx else min(n_storage, 4)
    lo = 0 if hi <= MAX_DRAWN_ELEMENTS or not idx else max(0, min(idx) - 2)
    if hi - lo > MAX_DRAWN_ELEMENTS:
        text = f"the view reaches {hi - lo} storage elements (storage indices {lo}..{hi - 1}), more than the"
        raise problem(ValueError, f"{text} {MAX_DRAWN_ELEMENTS} that fit in a readable strip. Draw a smaller example.")
    data = t.detach()
    strip = torch.as_strided(data, (hi - lo,), (1,), lo).cpu().tolist() if hi > lo else []
    reads = Counter(idx)  # how many view cells read each storage element

    from matplotlib.figure import Figure

    cols = (t.shape[-1] if t.dim() >= 2 else info.numel) if info.numel else 0
    rows = info.numel // cols if cols else 1
    fig = Figure(figsize=(max(cols, hi - lo, 4) * 0.62 + 1.6, 1.0 + 0.55 * rows + 1.4), facecolor="white")
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [max(rows, 1), 1.2]})

    view = [Cell(cell_value(v), colour(k), note=f"@{k}") for v, k in zip(data.cpu().reshape(-1).tolist(), idx)]
    # Row labels name the leading indices; a zero-size tensor has no rows to label.
    leading = tuple(t.shape[:-1]) if t.dim() >= 2 and info.numel else ()
    labels = [str(r) for r in range(rows)] if len(leading) == 1 else None
    if len(leading) > 1:
        labels = [str(tuple(int(i) for i in torch.unravel_index(torch.tensor(r), leading))) for r in range(rows)]
    grid = [view[r * cols : (r + 1) * cols] for r in range(rows)] if cols else [[]]
    heading = title or f"view: shape {tuple(t.shape)}, stride {tuple(t.stride())}, offset {t.storage_offset()}"
    draw_cells(top, grid, title=heading, title_size=10, row_labels=labels, xlim=(-1.2, max(cols, 1) + 0.2))

    offset = t.storage_offset()
    cells = []
    for k, v in zip(range(lo, hi), strip):
        below = f"x{reads[k]}" if reads[k] > 1 else ""
        cells.append(Cell(cell_value(v), colour(k) if reads[k] else UNUSED, above=str(k), below=below))
    shown = f"storage elements {lo}..{hi - 1} of {n_storage}" if hi > lo else f"storage: {n_storage} elements"
    # Two short lines: a one-line caption is wider than the strip for small tensors and gets clipped.
    caption = f"{shown}\nindex above, value inside, xN below = read N times"
    ylim = (-1.05 if offset else -0.5, 1.45)
    draw_cells(bottom, [cells], title=caption, xlim=(-0.2, max(hi - lo, 1) + 0.2), ylim=ylim)
    if offset and lo <= offset < hi:  # mark where the view starts reading, and what it skips
        x0, x1 = max(-lo, 0), offset - lo
        arrow = {"arrowstyle": "->", "color": "#444444", "lw": 1}
        bottom.annotate("", xy=(x1, -0.62), xytext=(x0, -0.62), arrowprops=arrow)
        bottom.text((x0 + x1) / 2, -0.85, f"offset {offset}", ha="center", va="center", fontsize=7)
    fig.tight_layout()
    return fig
