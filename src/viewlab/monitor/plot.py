"""The monitor's pictures and words, as pure functions of its data (samples, marks, cells, labels): nothing here
reads a running monitor, so every picture can be drawn and tested from plain records.

>>> from viewlab.monitor import Mark, Sample
>>> samples = [Sample(0.0, 0, 0), Sample(0.5, 4096, 8192)]
>>> alt_text(samples, [Mark(0.2, "after repeat", 4096)], [], backend="tensor storages (cpu)")
'Memory over 500 ms measured by tensor storages (cpu): 4.0 KiB allocated at the end, peak 8.0 KiB; marks: after repeat.'
>>> len(figure(samples, backend="tensor storages (cpu)").axes), png(samples)[:4]
(1, b'\\x89PNG')
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._format import exact_bytes, fmt_bytes
from ..draw import render_png

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from . import CellRecord, Mark, Sample

    Samples, Marks, Cells = Sequence[Sample], Sequence[Mark], Sequence[CellRecord]

__all__ = ["figure", "png", "alt_text", "summary_html"]
DPI = 80  # 10 inches wide: an 800-pixel image
LEGEND_PT = 10  # points: 11 px at 100 % zoom (at least 10 px, as every other label)


def figure(
    samples: Samples, marks: Marks = (), cells: Cells = (), *, backend: str = "", line: str = "allocated",
    peak_line: bool = True, running: bool = False, title: str | None = None,
) -> Figure:  # fmt: skip
    """The plot as a matplotlib ``Figure`` (Agg; no pyplot state is touched): allocated, peak (unless ``peak_line`` is
    False), reserved and RSS where measured, marks as labelled lines, cells as shaded spans plus a panel of one labelled
    bar per cell (a quick cell is a sliver on the timeline). ``running``: the axis of a live plot starts 1 s wide.
    The labels of marks and cells sit in rows above the highest line, none crossing another or the axes' edge."""
    from matplotlib.figure import Figure

    samples = list(samples)  # at most ~800 points to draw; the last (exact) sample is always kept
    samples = samples[:: len(samples) // 400][:-1] + samples[-1:] if len(samples) > 800 else samples
    fig = Figure(figsize=(10.0, 6.4 if cells else 4.2), dpi=DPI, facecolor="white")
    ax, bars = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 2]}) if cells else (fig.add_subplot(1, 1, 1), None)
    peak_all = max([max(s.peak, s.allocated, s.reserved or 0, s.rss or 0) for s in samples] or [1])
    scale, unit = next(((f, u) for f, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")) if peak_all >= f), (1, "B"))
    ts = [s.t for s in samples]
    for idx, cell in enumerate(cells):
        ax.axvspan(cell.start, cell.end, color="#56B4E9" if idx % 2 else "#E69F00", alpha=0.15, lw=0)
    if samples:
        steps = {"drawstyle": "steps-post"}
        measured = {key: any(getattr(s, key) is not None for s in samples) for key in ("reserved", "rss")}
        for name, key, style, shown in (
            (line, "allocated", {"color": "#0072B2", "lw": 2, **steps}, True),
            ("peak", "peak", {"color": "#D55E00", "lw": 1.5, "ls": "--", **steps}, peak_line),
            ("reserved", "reserved", {"color": "#009E73", "lw": 1.5, "ls": ":", **steps}, measured["reserved"]),
            ("process RSS (approx.)", "rss", {"color": "#999999", "lw": 1}, measured["rss"]),
        ):
            if shown:
                values = [(getattr(s, key) or 0) / scale for s in samples]
                ax.plot(ts, values, label=f"{name}: {exact_bytes(getattr(samples[-1], key))}", **style)
    for mark in marks:
        ax.axvline(mark.t, color="#CC79A7", lw=1)
    right = max(ts[-1] if ts else 0.0, 1.0 if running else 1e-3) * 1.02  # live: 1 s wide at first, later the data's
    ax.set(xlabel="seconds since start", ylabel=unit, xlim=(0, right))
    if bars is None:
        fig.subplots_adjust(left=0.09, right=0.98, top=0.76, bottom=0.16)  # fixed: tight_layout costs a frame's time
    else:
        fig.subplots_adjust(left=0.09, right=0.98, top=0.84, bottom=0.07, hspace=0.6)
    labels = [(c.start, c.label, "#444444") for c in cells] + [(m.t, m.label, "#6a3d5a") for m in marks]
    band = _place_labels(fig, ax, labels)  # the labels' band on top: lines stay under it
    highest = max(peak_all, 1) / scale if samples else 0.0
    top = highest / (1.0 - band) if samples else 1.0  # never a zero-height axis (the first frame has peak 0)
    ax.set_ylim(0, top)
    fig.suptitle(title or f"memory: {backend}", fontsize=12)
    if samples:  # above the plot, so it never hides a line or a mark
        legend = {"title_fontsize": LEGEND_PT, "frameon": False, "alignment": "left"}
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, fontsize=LEGEND_PT, title=backend, **legend)
    ax.grid(alpha=0.3)
    if bars is None:
        return fig
    xs = range(len(cells))
    bars.bar(xs, [c.peak_bytes / scale for c in cells], color="#D55E00", alpha=0.35, label="peak inside the cell")
    held = [max(c.allocated_bytes, 0) / scale for c in cells]
    bars.bar(xs, held, width=0.45, color="#0072B2", label="still held after it")
    for x, c in zip(xs, cells):
        text, at = f"+{c.allocated_bytes:,} B held\npeak +{c.peak_bytes:,} B", (x, c.peak_bytes / scale)
        bars.annotate(text, at, xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=9)
    bars.set_xticks(list(xs), [c.label for c in cells], fontsize=9)
    top = max([c.peak_bytes for c in cells] + [1]) / scale * 1.45
    bars.set(ylabel=unit, ylim=(0, top), xlim=(-0.6, len(cells) - 0.4))
    bars.set_title("per cell", fontsize=10, loc="right")
    # Above the panel, as the timeline's legend: inside it covered the first bar's label.
    bars.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, fontsize=LEGEND_PT, frameon=False)
    bars.grid(alpha=0.3, axis="y")
    return fig


def _place_labels(fig: Figure, ax: Any, labels: Sequence[tuple[float, str, str]]) -> float:
    """Write each ``(t, text, colour)`` label beside its line at ``t``, in rows at the top of ``ax``: a label goes right
    of its line, or left of it where it would cross the axes' right edge (no "zero_grad" cut to "zero_"), in the first
    row where it overlaps no label already placed. Returns the fraction of the axes' height the rows take, so the caller
    puts every line below them (no label written over the peak line). ``ax``'s x limits and place must be final."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not labels:
        return 0.1  # a little air above the highest line
    renderer = FigureCanvasAgg(fig).get_renderer()
    box = ax.get_window_extent(renderer)
    gap = 3 * fig.dpi / 72  # 3 points, in pixels
    style = {"xycoords": ax.get_xaxis_transform(), "textcoords": "offset points", "va": "top", "fontsize": 9}
    white = {"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
    ends: list[float] = []  # per row, the right end (pixels) of its last label
    row_height = 0.0
    for t, text, colour in sorted(labels, key=lambda item: item[0]):
        note = ax.annotate(text, (t, 1.0), xytext=(3, -2), color=colour, bbox=white, **style)
        extent = note.get_window_extent(renderer)
        width, row_height = extent.width, max(row_height, extent.height + 2)
        x = ax.transData.transform((t, 0))[0]
        left = x + gap if x + gap + width <= box.x1 else x - gap - width
        if left < x:
            note.set_horizontalalignment("right")
            note.xyann = (-3, -2)
        row = next((r for r, end in enumerate(ends) if end + gap < left), len(ends))
        if row == len(ends):
            ends.append(0.0)
        ends[row] = left + width
        note.xy = (t, 1.0 - row * row_height / box.height)
    return min((len(ends) * row_height + 6) / box.height, 0.6)


def png(samples: Samples, marks: Marks = (), cells: Cells = (), **labels: Any) -> bytes:
    """:func:`figure` as PNG bytes (through ``viewlab.draw.render_png``: the same bytes for the same data)."""
    return render_png(figure(samples, marks, cells, **labels), dpi=DPI)


def alt_text(samples: Samples, marks: Marks, cells: Cells, backend: str) -> str:
    """A sentence describing the plot for screen readers (the final PNG's alt text)."""
    if not samples:
        return f"Empty memory plot ({backend}): no samples yet."
    last, peak = samples[-1], fmt_bytes(max(s.peak for s in samples))
    span = f"{last.t:.1f} s" if last.t >= 1 else f"{last.t * 1e3:.0f} ms"  # a cell's plot lasts milliseconds
    text = f"Memory over {span} measured by {backend}: {fmt_bytes(last.allocated)} allocated at the end"
    text += f", peak {peak}" + (f", {fmt_bytes(last.reserved)} reserved" if last.reserved is not None else "")
    text += ("; marks: " + ", ".join(m.label for m in marks)) if marks else ""
    return text + (f"; {len(cells)} cells shaded" if cells else "") + "."


def summary_html(samples: Samples, marks: Marks, cells: Cells, backend: str) -> str:
    """An HTML table of the result (on the tensor-storage backend every number but the duration is deterministic)."""
    rows, last = [("backend", backend)], samples[-1] if samples else None
    if last is not None:
        rows += [("duration", f"{last.t:.1f} s"), ("allocated at stop", f"{last.allocated:,} B")]
        rows += [("peak", f"{max(s.peak for s in samples):,} B")]
        rows += [("reserved at stop", f"{last.reserved:,} B")] if last.reserved is not None else []
    rows += [(f"mark: {m.label}", f"{m.allocated:,} B allocated") for m in marks]
    rows += [(f"cell {c.label}", f"{c.allocated_bytes:+,} B held, peak +{c.peak_bytes:,} B") for c in cells]
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows
    )
    return f"<table class='viewlab-memory'>{body}</table>"
