"""Pictures of memory layout: the logical view on top, the 1-D storage strip below."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ._checks import entry, require_number, require_str, require_tensor
from .layout import layout, storage_indices

if TYPE_CHECKING:  # matplotlib is imported lazily so `import viewlab` stays fast
    from matplotlib.figure import Figure

__all__ = ["draw_layout", "show_figure", "PNGFigure", "render_png", "MAX_DRAWN_ELEMENTS"]

MAX_DRAWN_ELEMENTS = 64
# Colour-blind-safe palette (Okabe-Ito); every cell also carries its numbers, so colour is never
# the only cue.
_PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
_UNUSED = "#DDDDDD"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, complex):
        return f"{v.real:.2g}{v.imag:+.2g}j"
    return str(v)


@entry("draw_layout")
def draw_layout(t: Any, title: str | None = None) -> Figure:
    """Draw how ``t`` maps onto its storage and return the matplotlib ``Figure``.

    Top: the tensor as the learner indexes it (2-D grid; leading dimensions are stacked as rows and
    labelled with their index). Each cell shows its value and ``@k``, the storage index it reads.
    Bottom: the storage strip, each element with its index, value and how many view cells read it
    (``x3`` after an expand). Storage elements the view never reaches are grey. Colours follow the
    storage element (element ``k`` has the same colour in every figure), and an arrow under the strip
    marks the offset: the elements skipped before the first one the view reads.

    The figure is built without pyplot, so nothing global changes and nothing is shown until the
    notebook displays the returned figure. ``t``: a dense tensor with values (not ``meta``, not
    quantized) of at most :data:`MAX_DRAWN_ELEMENTS` elements; ``title``: a str or None.

    >>> fig = draw_layout(torch.arange(6).view(2, 3).t())
    >>> len(fig.axes)
    2
    """
    t = require_tensor(t, "t")
    require_str(title, "title", allow_none=True)
    if t.device.type == "meta":
        raise ValueError(
            "draw_layout() needs values, and a meta tensor has none. "
            "Use viewlab.layout(t) for its shape and strides, or draw a CPU tensor of the same shape."
        )
    info = layout(t)
    if info.numel > MAX_DRAWN_ELEMENTS:
        raise ValueError(
            f"draw_layout() draws at most {MAX_DRAWN_ELEMENTS} elements so the numbers stay readable; "
            f"this tensor has shape {tuple(t.shape)} = {info.numel} elements. "
            "Draw a small slice instead, e.g. t[:2, :4]."
        )
    idx = storage_indices(t).reshape(-1)
    n_storage = info.storage_bytes // info.itemsize
    # Show the part of storage the view can reach, plus a little context on each side; from element 0
    # whenever that fits, so the offset (the elements skipped before the first one read) is visible.
    hi = min(n_storage, int(idx.max()) + 3) if info.numel else min(n_storage, 4)
    lo = max(0, int(idx.min()) - 2) if info.numel else 0
    if hi <= MAX_DRAWN_ELEMENTS:
        lo = 0
    if hi - lo > MAX_DRAWN_ELEMENTS:
        raise ValueError(
            f"draw_layout(): the view reaches {hi - lo} storage elements (storage indices {lo}..{hi - 1}), "
            f"more than the {MAX_DRAWN_ELEMENTS} that fit in a readable strip. Draw a smaller example."
        )
    data = t.detach()
    flat_storage = torch.as_strided(data, (hi - lo,), (1,), lo).cpu().tolist() if hi > lo else []
    values = data.cpu().reshape(-1).tolist()
    counts: dict[int, int] = {}
    for k in idx.tolist():
        counts[k] = counts.get(k, 0) + 1

    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    grid_shape = (1, info.numel) if t.dim() <= 1 else (info.numel // max(t.shape[-1], 1), t.shape[-1])
    rows, cols = grid_shape if info.numel else (1, 0)
    width = max(cols, hi - lo, 4) * 0.62 + 1.6
    fig = Figure(figsize=(width, 1.0 + 0.55 * rows + 1.4), facecolor="white")
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [max(rows, 1), 1.2]})

    def colour(k: int) -> str:
        # By storage index, not by position in the drawing: element k has the same colour in every figure
        # of this storage. The palette repeats every 7 elements; the index printed in each cell tells them apart.
        return _PALETTE[k % len(_PALETTE)]

    for ax in (top, bottom):
        ax.set_facecolor("white")
        ax.set_aspect("equal")
        ax.axis("off")

    # Row labels name the leading indices; a zero-size tensor has no rows to label.
    leading = tuple(t.shape[:-1]) if t.dim() >= 2 and info.numel else ()
    for i in range(info.numel):
        r, c = divmod(i, cols) if cols else (0, 0)
        k = int(idx[i])
        top.add_patch(Rectangle((c, rows - 1 - r), 1, 1, facecolor=colour(k), edgecolor="black"))
        top.text(c + 0.5, rows - 1 - r + 0.62, _fmt(values[i]), ha="center", va="center", fontsize=9)
        top.text(c + 0.5, rows - 1 - r + 0.25, f"@{k}", ha="center", va="center", fontsize=7)
    if leading:
        for r in range(rows):
            label = list(torch.unravel_index(torch.tensor(r), leading)) if len(leading) > 1 else [r]
            top.text(
                -0.15,
                rows - 1 - r + 0.5,
                str(tuple(int(v) for v in label)) if len(leading) > 1 else str(r),
                ha="right",
                va="center",
                fontsize=8,
            )
    top.set_xlim(-1.2, max(cols, 1) + 0.2)
    top.set_ylim(-0.1, max(rows, 1) + 0.1)
    top.set_title(
        title or f"view: shape {tuple(t.shape)}, stride {tuple(t.stride())}, offset {t.storage_offset()}",
        fontsize=10,
    )

    for j, k in enumerate(range(lo, hi)):
        used = counts.get(k, 0)
        bottom.add_patch(Rectangle((j, 0), 1, 1, facecolor=colour(k) if used else _UNUSED, edgecolor="black"))
        bottom.text(j + 0.5, 0.5, _fmt(flat_storage[j]), ha="center", va="center", fontsize=9)
        bottom.text(j + 0.5, 1.18, str(k), ha="center", va="center", fontsize=7)
        if used > 1:
            bottom.text(j + 0.5, -0.25, f"x{used}", ha="center", va="center", fontsize=7)
    offset = t.storage_offset()
    if offset and lo <= offset < hi:  # mark where the view starts reading, and what it skips
        x0, x1 = 0 - (lo - 0), offset - lo
        bottom.annotate(
            "", xy=(x1, -0.62), xytext=(max(x0, 0), -0.62), arrowprops={"arrowstyle": "->", "color": "#444444", "lw": 1}
        )
        bottom.text((max(x0, 0) + x1) / 2, -0.85, f"offset {offset}", ha="center", va="center", fontsize=7)
    bottom.set_xlim(-0.2, max(hi - lo, 1) + 0.2)
    bottom.set_ylim(-1.05 if offset else -0.5, 1.45)
    shown = f"storage elements {lo}..{hi - 1} of {n_storage}" if hi > lo else f"storage: {n_storage} elements"
    # Two short lines: a one-line caption is wider than the strip for small tensors and gets clipped.
    bottom.set_title(f"{shown}\nindex above, value inside, xN below = read N times", fontsize=9)
    fig.tight_layout()
    return fig


class PNGFigure:
    """A rendered figure: PNG bytes plus the alt text that describes them, displayable in Jupyter.

    It displays through ``_repr_mimebundle_`` (IPython 6.1 and later), not ``IPython.display.Image``:
    IPython 7 (Colab's) has no ``alt`` argument there. The output holds the PNG, the alt text in the
    PNG's output metadata (where the book build reads it), and a readable ``text/plain`` line for
    viewers that show no images.

    >>> fig = PNGFigure(b"\\x89PNG...", alt="three elements")
    >>> fig.alt, fig._repr_mimebundle_()[0]["text/plain"]
    ('three elements', '[figure] three elements')
    """

    def __init__(self, data: bytes, alt: str) -> None:
        if not isinstance(data, bytes) or not data:
            raise TypeError(f"PNGFigure(data=...) expects the PNG file's bytes, got {type(data).__name__}.")
        if not isinstance(alt, str) or not alt.strip():
            raise ValueError("PNGFigure(alt=...) needs one sentence saying what the picture shows.")
        self.data = data
        self.alt = alt.strip()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict, dict]:
        import base64

        data = {"image/png": base64.b64encode(self.data).decode("ascii"), "text/plain": f"[figure] {self.alt}"}
        return data, {"image/png": {"alt": self.alt}}

    def __repr__(self) -> str:
        return f"PNGFigure({len(self.data):,} bytes, alt={self.alt!r})"


@entry("show_figure")
def show_figure(fig: Figure, alt: str, dpi: int = 100) -> PNGFigure:
    """Render ``fig`` to a PNG and return a ``PNGFigure`` that carries ``alt`` text.

    A plain PNG output survives in the saved notebook and in the static book (no widget state, no
    backend needed), and the alt text describes it for screen readers. Works with IPython 7 (Colab)
    and later.

    >>> img = show_figure(draw_layout(torch.arange(3)), alt="three elements, stride 1")
    >>> img.alt
    'three elements, stride 1'
    """
    from matplotlib.figure import Figure as _Figure

    if not isinstance(fig, _Figure):
        raise TypeError(f"show_figure() expects a matplotlib Figure (e.g. from draw_layout), got {type(fig).__name__}.")
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError(
            "show_figure() needs alt text: one sentence saying what the picture shows, e.g. "
            "alt='a 2x3 view reading storage elements 0 to 5'."
        )
    dpi = require_number(dpi, "dpi", minimum=20, maximum=1000)
    return PNGFigure(render_png(fig, dpi=dpi), alt)


@entry("render_png")
def render_png(fig: Figure, dpi: int = 100) -> bytes:
    """The PNG bytes of ``fig``; identical bytes for identical figures, so re-executed notebooks diff cleanly.

    >>> render_png(draw_layout(torch.arange(3)))[:4]
    b'\\x89PNG'
    """
    from matplotlib.figure import Figure as _Figure

    if not isinstance(fig, _Figure):
        raise TypeError(f"render_png() expects a matplotlib Figure (e.g. from draw_layout), got {type(fig).__name__}.")
    dpi = require_number(dpi, "dpi", minimum=20, maximum=1000)
    import io

    buffer = io.BytesIO()
    # No "Software" entry (it carries the matplotlib version): same bytes on every machine.
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="white", metadata={"Software": None})
    return buffer.getvalue()
