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
from ._cells import PALETTE, REPEATS_NOTE, UNUSED, Cell, colour, draw_cells, fit_to_content, grid_rows, place_axes

if TYPE_CHECKING:  # matplotlib is imported lazily so `import viewlab` stays fast
    from matplotlib.figure import Figure

__all__ = ["draw_layout", "describe_layout", "MAX_DRAWN_ELEMENTS"]

MAX_DRAWN_ELEMENTS = 64
_VIEW_CELL, _STRIP_CELL = 0.62, 0.45  # inches per cell of the view grid and of the storage strip


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
    info = _drawable(t)
    idx, lo, hi, n_storage = _strip(t, info)
    data = t.detach()
    strip = torch.as_strided(data, (hi - lo,), (1,), lo).cpu().tolist() if hi > lo else []
    reads = Counter(idx)  # how many view cells read each storage element

    from matplotlib.figure import Figure

    cols = (t.shape[-1] if t.dim() >= 2 else info.numel) if info.numel else 0
    rows = info.numel // cols if cols else 1
    n = hi - lo
    offset = t.storage_offset()
    # Fixed inches per cell, so a cell is as big in every layout figure; the figure is then cropped to what is
    # drawn (fit_to_content), never wider than its content and never with a blank band.
    view_w, view_h = (max(cols, 1) + 1.4) * _VIEW_CELL, (max(rows, 1) + 0.2) * _VIEW_CELL
    ylim = (-1.05 if offset else -0.5, 1.45)
    strip_w, strip_h = (max(n, 1) + 0.4) * _STRIP_CELL, (ylim[1] - ylim[0]) * _STRIP_CELL
    view = [Cell(cell_value(v), colour(k), note=f"@{k}") for v, k in zip(data.cpu().reshape(-1).tolist(), idx)]
    labels, dims = grid_rows(tuple(t.shape))
    grid = [view[r * cols : (r + 1) * cols] for r in range(rows)] if cols else [[]]
    heading = title or f"view: shape {tuple(t.shape)}, stride {tuple(t.stride())}, offset {offset}"

    cells = []
    for k, v in zip(range(lo, hi), strip):
        below = f"x{reads[k]}" if reads[k] > 1 else ""
        cells.append(Cell(cell_value(v), colour(k) if reads[k] else UNUSED, above=str(k), below=below))
    shown = f"storage elements {lo}..{hi - 1} of {n_storage}" if hi > lo else f"storage: {n_storage} elements"
    # The legend says only what is drawn: "xN" when some element is read more than once, the repeat of the
    # palette when two drawn cells (view or strip) share a colour.
    legend = "index above, value inside" + (", xN below = read N times" if max(reads.values(), default=0) > 1 else "")
    drawn = {k for k in idx} | {k for k in range(lo, hi) if reads[k]}
    repeats = len({colour(k) for k in drawn}) < len(drawn)
    caption = "\n".join([shown, legend] + ([REPEATS_NOTE] if repeats else []))  # short lines: never clipped
    gap = 0.15 + 0.16 * (caption.count("\n") + 1)  # room for the caption: its lines of 9 pt
    width, height = max(view_w, strip_w) + 8.0, view_h + strip_h + gap + 2.0  # room for titles; cropped below
    fig = Figure(figsize=(width, height), facecolor="white")
    # The strip is centred under the view's cells (the view's axes has room for row labels on its left).
    top = place_axes(fig, ((width - view_w) / 2, 0.5 + strip_h + gap, view_w, view_h))
    bottom = place_axes(fig, ((width - strip_w) / 2 + 0.5 * _VIEW_CELL, 0.5, strip_w, strip_h))
    draw_cells(top, grid, title=f"{heading}\n{dims}", title_size=10, row_labels=labels, xlim=(-1.2, max(cols, 1) + 0.2))
    draw_cells(bottom, [cells], title=caption, xlim=(-0.2, max(n, 1) + 0.2), ylim=ylim)
    if offset and lo <= offset < hi:  # mark where the view starts reading, and what it skips
        x0, x1 = max(-lo, 0), offset - lo
        arrow = {"arrowstyle": "->", "color": "#444444", "lw": 1}
        bottom.annotate("", xy=(x1, -0.62), xytext=(x0, -0.62), arrowprops=arrow)
        bottom.text((x0 + x1) / 2, -0.85, f"offset {offset}", ha="center", va="center", fontsize=7)
    return fit_to_content(fig)


def _drawable(t: torch.Tensor) -> Any:
    """``layout(t)``, or the ValueError saying why ``t`` cannot be drawn (no values, or too many to read)."""
    if t.device.type == "meta":
        fix = "Use viewlab.layout(t) for its shape and strides, or draw a CPU tensor of the same shape."
        raise problem(ValueError, f"needs values, and a meta tensor has none. {fix}")
    info = layout(t)
    if info.numel > MAX_DRAWN_ELEMENTS:
        text = f"draws at most {MAX_DRAWN_ELEMENTS} elements so the numbers stay readable; this tensor has shape"
        fix = "Draw a small slice instead, e.g. t[:2, :4]."
        raise problem(ValueError, f"{text} {tuple(t.shape)} = {info.numel} elements. {fix}")
    return info


def _strip(t: torch.Tensor, info: Any) -> tuple[list[int], int, int, int]:
    """The storage index each view cell reads, and the part of storage drawn: ``lo..hi - 1`` of ``n_storage``."""
    idx = storage_indices(t).reshape(-1).tolist()
    n_storage = info.storage_bytes // info.itemsize
    # Show the part of storage the view can reach, plus a little context on each side; from element 0
    # whenever that fits, so the offset (the elements skipped before the first one read) is visible.
    hi = min(n_storage, max(idx) + 3) if idx else min(n_storage, 4)
    lo = 0 if hi <= MAX_DRAWN_ELEMENTS or not idx else max(0, min(idx) - 2)
    if hi - lo > MAX_DRAWN_ELEMENTS:
        text = f"the view reaches {hi - lo} storage elements (storage indices {lo}..{hi - 1}), more than the"
        raise problem(ValueError, f"{text} {MAX_DRAWN_ELEMENTS} that fit in a readable strip. Draw a smaller example.")
    return idx, lo, hi, n_storage


def _ranges(ks: list[int]) -> str:
    """Storage indices in words, runs of three or more as ranges: ``[0, 1, 2, 3, 5, 7]`` as ``'0 to 3, 5 and 7'``."""
    runs: list[list[int]] = []
    for k in sorted(set(ks)):
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    words: list[str] = []
    for a, b in runs:
        words += [f"{a} to {b}"] if b > a + 1 else [str(k) for k in range(a, b + 1)]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _elements(ks: list[int]) -> str:
    return ("element " if len(set(ks)) == 1 else "elements ") + _ranges(ks)


@entry("describe_layout")
def describe_layout(t: Any) -> str:
    """Alt text for :func:`draw_layout`'s figure of ``t``, made from the numbers the figure draws: the tensor's shape,
    stride, offset and dims, the storage elements each row reads, the strip's read counts, its grey (never read)
    elements, the offset arrow and the palette's repeat, each said only when it is drawn.

    >>> describe_layout(torch.arange(12).view(3, 4)[1:, ::2])  # doctest: +NORMALIZE_WHITESPACE
    'A tensor of shape (2, 2), stride (4, 2), offset 4 (rows: dim 0, columns: dim 1). Row 0 reads storage elements
    4 and 6 (values 4, 6); row 1 reads elements 8 and 10 (values 8, 10). The storage strip below shows elements 0
    to 11 of 12; the tensor reads each at most once; elements 0 to 3, 5, 7, 9 and 11 are grey, never read. An arrow
    under the strip runs from element 0 to element 4: the offset, 4 elements skipped.'
    """
    t = require_tensor(t, "t")
    info = _drawable(t)  # the same refusals as draw_layout: it describes only what can be drawn
    idx, lo, hi, n_storage = _strip(t, info)
    reads = Counter(idx)
    values = [cell_value(v) for v in t.detach().cpu().reshape(-1).tolist()]
    labels, dims = grid_rows(tuple(t.shape))
    offset = t.storage_offset()
    text = f"A tensor of shape {tuple(t.shape)}, stride {tuple(t.stride())}, offset {offset} ({dims})."
    cols = (t.shape[-1] if t.dim() >= 2 else info.numel) if info.numel else 0
    rows = info.numel // cols if cols else 0
    if 0 < rows <= 6:
        parts = []
        for r in range(rows):
            ks, vs = idx[r * cols : (r + 1) * cols], values[r * cols : (r + 1) * cols]
            where = (
                _elements(ks) if len(set(ks)) == len(ks) and ks == sorted(ks) else "elements " + ", ".join(map(str, ks))
            )
            said = f"values {', '.join(vs)}" if len(vs) > 1 else f"value {vs[0]}"
            name = f"row {labels[r]}" if labels else "the row" if cols > 1 else "the cell"
            parts.append(f"{name} reads {'storage ' if r == 0 else ''}{where} ({said})")
        text += " " + "; ".join(parts)[0].upper() + "; ".join(parts)[1:] + "."
    elif rows:
        text += f" Its {info.numel} cells read storage {_elements(idx)}."
    else:
        text += " It has no elements, so it reads no storage."
    if hi > lo:
        text += f" The storage strip below shows {_elements(list(range(lo, hi)))} of {n_storage}"
        many = sorted({n for n in reads.values() if n > 1})
        grey = [k for k in range(lo, hi) if not reads[k]]
        if many:
            text += "; " + "; ".join(
                f"{_elements([k for k in reads if reads[k] == n])} read {n} times (x{n})" for n in many
            )
            once = [k for k in reads if reads[k] == 1]
            text += f"; {_elements(once)} once" if once else ""
        elif reads:
            text += "; the tensor reads each at most once" if grey else ", each read once"
        text += f"; {_elements(grey)} {'is' if len(grey) == 1 else 'are'} grey, never read." if grey else "."
    elif info.numel == 0:
        text += f" The storage strip is empty: the storage has {n_storage} elements."
    if offset and lo <= offset < hi:
        text += f" An arrow under the strip runs from element {lo} to element {offset}: the offset, {offset} elements skipped."
    drawn = set(idx) | {k for k in range(lo, hi) if reads[k]}
    if len({colour(k) for k in drawn}) < len(drawn):
        text += f" Colours repeat every {len(PALETTE)}; each cell's number names its element."
    return text
