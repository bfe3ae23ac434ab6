"""The palette and the one primitive every picture is made of: a grid of numbered unit squares.

The layout, broadcast and exercise failure pictures are all such grids, drawn by :func:`draw_cells`.

>>> from matplotlib.figure import Figure
>>> ax = Figure().subplots()
>>> draw_cells(ax, [[Cell("1", PALETTE[0], note="@0"), Cell("2", PALETTE[1], hatched=True)]], title="a row")
>>> [t.get_text() for t in ax.texts], ax.get_title()
(['1', '@0', '2'], 'a row')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib is imported lazily so `import viewlab` stays fast
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Cell", "draw_cells", "colour", "ink_on", "grid_rows", "place_axes", "fit_to_content", "REPEATS_NOTE"]
__all__ += ["PALETTE", "UNUSED", "RESULT", "INK", "INK_ON_DARK", "DARK_FILLS"]

# Colour-blind-safe palette (Okabe-Ito); every cell also carries its numbers, so colour is never the
# only cue. UNUSED greys storage the view never reads; RESULT is new memory (the broadcast result).
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
UNUSED = "#DDDDDD"
RESULT = "#CCCCCC"
# Text on a palette colour is near-black, except on the one blue too dark for it: black on #0072B2 is
# 4.0:1, under WCAG's 4.5:1, white is 5.2:1. The explorer (explorer/style.js: inkOn) uses the same rule.
INK = "#111111"
INK_ON_DARK = "#FFFFFF"
DARK_FILLS = ("#0072B2",)
_CENTRED = {"ha": "center", "va": "center"}


def ink_on(fill: str) -> str:
    """The colour of text drawn on ``fill``: white on the palette's dark blue, near-black on anything else.

    >>> ink_on(PALETTE[4]), ink_on(PALETTE[0]), ink_on("white")
    ('#FFFFFF', '#111111', '#111111')
    """
    return INK_ON_DARK if fill.upper() in DARK_FILLS else INK


def colour(k: int) -> str:
    """The palette's colour number ``k``, repeating every 7 (the numbers in the cells tell repeats apart)."""
    return PALETTE[k % len(PALETTE)]


# Said in a figure's legend whenever two of its cells share a colour: the colour is a hint, the number the fact.
REPEATS_NOTE = f"colours repeat every {len(PALETTE)}: the index, not the colour, names the element"


def grid_rows(shape: Sequence[int]) -> tuple[list[str] | None, str]:
    """How a tensor of ``shape`` is drawn as a grid (its last dim across, the others stacked as rows): the row
    labels (None for rank 0 and 1) and a line that names the dims, for a figure's title.

    >>> grid_rows((3, 4))
    (['0', '1', '2'], 'rows: dim 0, columns: dim 1')
    >>> grid_rows((1, 2, 1, 2))
    (['(0, 0, 0)', '(0, 1, 0)'], 'rows: (dim 0, dim 1, dim 2), columns: dim 3')
    >>> grid_rows((5,)), grid_rows(())
    ((None, 'one row: dim 0'), (None, 'one cell: a 0-d tensor'))
    """
    import itertools

    shape = tuple(int(n) for n in shape)
    if len(shape) < 2:
        return None, ("one row: dim 0" if shape else "one cell: a 0-d tensor")
    last = len(shape) - 1
    lead = "dim 0" if last == 1 else "(" + ", ".join(f"dim {d}" for d in range(last)) + ")"
    names = f"rows: {lead}, columns: dim {last}"
    if 0 in shape:
        return None, names
    rows = itertools.product(*map(range, shape[:-1]))
    labels = [str(r[0]) if last == 1 else str(r) for r in rows]
    return labels, names


def place_axes(fig: Figure, box: tuple[float, float, float, float]) -> Axes:
    """An axes at ``box`` = (left, bottom, width, height) in inches on ``fig``, which must not be resized
    before :func:`fit_to_content` (the one call that resizes it and keeps every axes' size in inches)."""
    width, height = fig.get_size_inches()
    left, bottom, w, h = box
    return fig.add_axes((left / width, bottom / height, w / width, h / height))


def fit_to_content(fig: Figure, pad: float = 0.12) -> Figure:
    """Crop ``fig`` to what is drawn on it plus ``pad`` inches on each side: no blank band, no clipped text.

    Axes keep their size in inches (so a cell is as big in every figure), figure texts their place.

    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(10, 10))
    >>> _ = place_axes(fig, (2, 2, 1, 1)).axis("off")
    >>> [round(float(v), 2) for v in fit_to_content(fig, pad=0.5).get_size_inches()]
    [2.0, 2.0]
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    old_w, old_h = fig.get_size_inches()
    box = fig.get_tightbbox(FigureCanvasAgg(fig).get_renderer())  # inches
    new_w, new_h = box.width + 2 * pad, box.height + 2 * pad

    def moved(x: float, y: float) -> tuple[float, float]:
        return (x * old_w - box.x0 + pad) / new_w, (y * old_h - box.y0 + pad) / new_h

    for ax in fig.axes:
        x0, y0, w, h = ax.get_position().bounds
        ax.set_position((*moved(x0, y0), w * old_w / new_w, h * old_h / new_h))
    for text in fig.texts:
        text.set_position(moved(*text.get_position()))
    fig.set_size_inches(new_w, new_h)
    return fig


@dataclass(frozen=True)
class Cell:
    """How one unit square looks: ``text`` centred (9 pt, raised when there is a ``note``) on ``colour``.

    ``note``: a small second line inside (the layout picture's ``@k``); ``above``/``below``: small labels
    just outside (a strip's index, ``x3``); ``hatched``: a virtual copy, hatched in ``colour`` on white with
    the text on a white box; ``edge``/``linewidth``: the border; ``bold``: the text in bold.
    """

    text: str
    colour: str = "white"
    note: str = ""
    above: str = ""
    below: str = ""
    hatched: bool = False
    edge: str = "black"
    linewidth: float = 1.0
    bold: bool = False


def draw_cells(
    ax: Axes,
    grid: Sequence[Sequence[Cell]],
    *,
    title: str | None = None,
    title_size: float = 9,
    row_labels: Sequence[str] | None = None,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
) -> None:
    """Draw ``grid`` (rows of :class:`Cell`, top to bottom) on ``ax``: ``grid[r][c]`` covers ``[c, c + 1]`` x
    ``[rows - 1 - r, rows - r]``. ``row_labels`` go left of the grid, ``title`` above. No frame, equal aspect;
    the limits are the grid (at least one cell) plus 0.1, unless ``xlim``/``ylim`` are given.

    >>> from matplotlib.figure import Figure
    >>> ax = Figure().subplots()
    >>> draw_cells(ax, [[Cell("T")], [Cell("F", edge="#D55E00", linewidth=2.5, bold=True)]], row_labels=["0", "1"])
    >>> [t.get_text() for t in ax.texts], [float(x) for x in ax.get_xlim()]
    (['T', 'F', '0', '1'], [-0.1, 1.1])
    """
    from matplotlib.patches import Rectangle

    rows, cols = len(grid), max((len(row) for row in grid), default=0)
    ax.set_facecolor("white")
    ax.set_aspect("equal")
    ax.axis("off")
    for r, row in enumerate(grid):
        y = rows - 1 - r
        for c, cell in enumerate(row):
            if cell.hatched:  # hatch drawn in the operand's colour, then the border on top
                ax.add_patch(Rectangle((c, y), 1, 1, facecolor="white", edgecolor=cell.colour, hatch="///", lw=0))
            fill = {"fill": False} if cell.hatched else {"facecolor": cell.colour}
            ax.add_patch(Rectangle((c, y), 1, 1, **fill, edgecolor=cell.edge, linewidth=cell.linewidth))
            box = {"facecolor": "white", "edgecolor": "none", "pad": 1.5} if cell.hatched else None
            weight, text_y = ("bold" if cell.bold else "normal"), y + (0.62 if cell.note else 0.5)
            inside = INK if cell.hatched else ink_on(cell.colour)  # hatched text sits on a white box
            ax.text(c + 0.5, text_y, cell.text, **_CENTRED, fontsize=9, bbox=box, fontweight=weight, color=inside)
            for label, dy, ink in ((cell.note, 0.25, inside), (cell.above, 1.18, INK), (cell.below, -0.25, INK)):
                if label:  # the note is inside the cell, the two labels outside it on white
                    ax.text(c + 0.5, y + dy, label, **_CENTRED, fontsize=7, color=ink)
    for r, label in enumerate(row_labels or ()):
        ax.text(-0.15, rows - 1 - r + 0.5, label, ha="right", va="center", fontsize=8)
    ax.set_xlim(*(xlim or (-0.1, max(cols, 1) + 0.1)))
    ax.set_ylim(*(ylim or (-0.1, max(rows, 1) + 0.1)))
    if title is not None:
        ax.set_title(title, fontsize=title_size)
