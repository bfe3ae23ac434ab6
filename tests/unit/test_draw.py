import pytest
import torch
from matplotlib.figure import Figure

from viewlab import draw_layout, show_figure

pytestmark = pytest.mark.colab  # these run in the Colab-stack suite too


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_expanded_view_labels_each_storage_read_count():
    fig = draw_layout(torch.arange(4.0).view(1, 4).expand(3, 4))
    texts = _texts(fig)
    assert texts.count("x3") == 4  # each of the 4 storage elements is read by 3 view cells
    assert "@0" in texts and "@3" in texts
    assert "stride (0, 1)" in fig.axes[0].get_title()


def test_transposed_slice_shows_storage_indices_and_values():
    fig = draw_layout(torch.arange(6).view(2, 3)[:, 1:].t())
    texts = _texts(fig)
    for k in ("@1", "@4", "@2", "@5"):
        assert k in texts
    assert "offset 1" in fig.axes[0].get_title()


def test_three_d_rows_are_labelled_with_leading_index():
    texts = _texts(draw_layout(torch.arange(12).view(2, 3, 2)))
    assert "(1, 2)" in texts


def test_too_large_and_meta_tensors_are_refused_with_advice():
    with pytest.raises(ValueError, match=r"t\[:2, :4\]"):
        draw_layout(torch.zeros(10, 10))
    with pytest.raises(ValueError, match="meta tensor"):
        draw_layout(torch.zeros(2, device="meta"))
    with pytest.raises(TypeError, match="torch.Tensor"):
        draw_layout([[1, 2]])


def test_show_figure_returns_png_with_alt_text():
    img = show_figure(draw_layout(torch.arange(3)), alt="three cells")
    data, meta = img.data, img._repr_mimebundle_()[1]["image/png"]
    assert data.startswith(b"\x89PNG") and meta["alt"] == "three cells"
    again = show_figure(draw_layout(torch.arange(3)), alt="three cells").data
    assert data == again  # byte-identical: re-executed notebooks do not churn
    with pytest.raises(ValueError, match="alt text"):
        show_figure(draw_layout(torch.arange(3)), alt=" ")
    with pytest.raises(TypeError, match="matplotlib Figure"):
        show_figure("figure.png", alt="x")


def test_show_figure_output_carries_png_alt_and_readable_text_on_this_ipython():
    """What IPython itself makes of the figure (7.34 on the Colab stack, 8+ elsewhere): the PNG, the alt
    text in the PNG's metadata (where the book reads it) and a readable text/plain line."""
    import base64

    from IPython.core.formatters import DisplayFormatter

    figure = show_figure(draw_layout(torch.arange(3)), alt="three elements, stride 1")
    data, metadata = DisplayFormatter().format(figure)
    assert base64.b64decode(data["image/png"]) == figure.data and figure.data.startswith(b"\x89PNG")
    assert metadata["image/png"]["alt"] == "three elements, stride 1"
    assert data["text/plain"] == "[figure] three elements, stride 1"


@pytest.mark.parametrize("shape", [(2, 0, 3), (0, 2, 3), (2, 3, 0)])
def test_zero_size_rank_3_draws_an_empty_grid_regression(shape):
    fig = draw_layout(torch.zeros(shape))
    texts = _texts(fig)
    assert not any(t.startswith("@") for t in texts)  # no cell, so no storage index is read
    assert not any(t.startswith("(") for t in texts)  # and no row label
    assert f"shape {shape}" in fig.axes[0].get_title()


def test_draw_layout_rejects_bad_arguments_by_name():
    with pytest.raises(TypeError, match=r"draw_layout\(\): `title` must be a str or None; got int 3"):
        draw_layout(torch.zeros(2), title=3)
    with pytest.raises(TypeError, match=r"draw_layout\(\): `t` must be a tensor of plain numbers.*dequantize"):
        draw_layout(torch.quantize_per_tensor(torch.zeros(2), 0.1, 0, torch.qint8))


@pytest.mark.parametrize("dpi", ["high", -5, 0, float("nan"), float("inf")])
def test_show_figure_rejects_an_unknown_dpi_by_name(dpi):
    fig = draw_layout(torch.arange(3))
    try:
        show_figure(fig, alt="three elements", dpi=dpi)
    except (TypeError, ValueError) as err:
        assert str(err).startswith("show_figure(): `dpi` must be"), str(err)
    else:
        raise AssertionError(f"show_figure(dpi={dpi!r}) returned a picture")


def test_cells_primitive_draws_stored_and_virtual_cells_labels_and_limits():
    from viewlab.draw._cells import Cell, draw_cells

    ax = Figure().subplots()
    grid = [[Cell("1", "#E69F00", note="@0", above="0", below="x2"), Cell("1", "#E69F00", hatched=True)], []]
    draw_cells(ax, grid, title="t", title_size=10, row_labels=["a", "b"], xlim=(-1.2, 2.2))
    assert [t.get_text() for t in ax.texts] == ["1", "@0", "0", "x2", "1", "a", "b"]
    assert len(ax.patches) == 3  # one stored cell, a virtual copy drawn as hatching plus its border
    assert ax.patches[1].get_hatch() == "///" and ax.texts[4].get_bbox_patch() is not None
    assert ax.texts[0].get_position() == (0.5, 1.62)  # raised above its note; row 0 is on top of 2 rows
    assert tuple(map(float, ax.get_xlim())) == (-1.2, 2.2) and tuple(map(float, ax.get_ylim())) == (-0.1, 2.1)
    assert ax.get_title() == "t" and ax.title.get_fontsize() == 10


# The figures say only what they draw, name their dims, and have no clipped text and no blank band.
def _inches(fig: Figure, artist) -> tuple[float, float, float, float]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    box = artist.get_window_extent(FigureCanvasAgg(fig).get_renderer())
    return box.x0 / fig.dpi, box.y0 / fig.dpi, box.x1 / fig.dpi, box.y1 / fig.dpi


def _captions(fig: Figure) -> str:
    return fig.axes[1].get_title()


def test_the_xn_legend_entry_is_there_only_when_some_element_is_read_more_than_once():
    for t in (torch.arange(3), torch.arange(12.0).view(3, 4).t(), torch.arange(12)[4::2]):
        assert "xN" not in _captions(draw_layout(t)) and not any(s.startswith("x") for s in _texts(draw_layout(t)))
    expanded = draw_layout(torch.arange(4).expand(3, 4))
    assert "xN below = read N times" in _captions(expanded) and "x3" in _texts(expanded)


def test_the_legend_says_the_palette_repeats_exactly_when_two_drawn_cells_share_a_colour():
    from viewlab.draw._cells import PALETTE, REPEATS_NOTE, colour

    assert "repeat every 7" in REPEATS_NOTE and len(PALETTE) == 7
    twelve = draw_layout(torch.arange(12).view(3, 4))  # 0 and 7, 1 and 8 ... share a colour
    assert REPEATS_NOTE in _captions(twelve)
    for t in (torch.arange(7), torch.arange(20)[7:10]):  # 7 colours, or 7..9 (and grey 0..6): none shared
        assert REPEATS_NOTE not in _captions(draw_layout(t))
    # every cell that shares a colour still carries its own index: the number tells them apart
    texts = _texts(twelve)
    assert colour(3) == colour(10) and {"@3", "@10", "3", "10"} <= set(texts)


def test_the_layout_names_its_dims_rows_and_columns():
    assert (
        "rows: (dim 0, dim 1, dim 2), columns: dim 3"
        in draw_layout(torch.arange(4).view(1, 2, 1, 2)).axes[0].get_title()
    )
    assert "rows: dim 0, columns: dim 1" in draw_layout(torch.arange(6).view(2, 3)).axes[0].get_title()
    assert "one row: dim 0" in draw_layout(torch.arange(3)).axes[0].get_title()


def _every_text_inside_and_no_blank_margin(fig: Figure, margin: float = 0.3) -> None:
    width, height = fig.get_size_inches()
    texts = [t for ax in fig.axes for t in [*ax.texts, ax.title]] + list(fig.texts)
    for text in texts:
        if text.get_text():
            x0, y0, x1, y1 = _inches(fig, text)
            assert x0 >= 0 and y0 >= 0 and x1 <= width and y1 <= height, (
                text.get_text(),
                (x0, y0, x1, y1),
                (width, height),
            )
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    content = fig.get_tightbbox(FigureCanvasAgg(fig).get_renderer())
    assert width - content.width <= margin and height - content.height <= margin, (fig.get_size_inches(), content)


def test_layout_figures_draw_a_cell_at_one_size_and_are_as_wide_as_what_they_draw():
    """Notebook 06 shows x.expand(4, 4) (4 storage elements) above x.repeat(4, 1) (16): the same 4x4 view at
    the same size in both, each figure cropped to its content (it was 408 px and 1152 px, mostly blank)."""
    x = torch.arange(10, 14)
    figs = [
        draw_layout(x.expand(4, 4)),
        draw_layout(x.repeat(4, 1)),
        draw_layout(torch.arange(12.0).view(3, 4)[1:, ::2]),
    ]
    sizes = []
    for fig in figs:
        _every_text_inside_and_no_blank_margin(fig)
        cell = next(p for p in fig.axes[0].patches if p.get_facecolor()[3] > 0)
        x0, y0, x1, y1 = _inches(fig, cell)
        sizes.append((round(x1 - x0, 3), round(y1 - y0, 3)))
    assert len(set(sizes)) == 1, sizes
    assert all(fig.get_size_inches()[0] * 100 <= 800 for fig in figs)  # shown unscaled in a notebook column


@pytest.mark.parametrize(
    "t",
    [
        torch.arange(10.0, 22.0).view(3, 4),
        torch.arange(10.0, 22.0).view(3, 4)[1:, ::2],  # offset 4, grey 0..3, 5, 7, 9 and 11 (none "in between")
        torch.arange(4).expand(3, 4),
        torch.arange(4).as_strided((2, 2), (1, 1)),  # element 1 read twice, element 3 never
        torch.arange(20)[9:12],
        torch.arange(4).view(1, 2, 1, 2),
        torch.zeros(2, 0, 3),
    ],
)
def test_describe_layout_says_what_the_figure_draws_and_nothing_else(t):
    """The alt text is made from the figure's numbers: the grey elements it lists are the grey cells drawn, the
    offset arrow and the xN counts are mentioned exactly when drawn, the palette's repeat when the legend says it."""
    from matplotlib.colors import to_hex

    from viewlab.draw import describe_layout
    from viewlab.draw._cells import REPEATS_NOTE, UNUSED
    from viewlab.draw.layout import _ranges

    alt, fig = describe_layout(t), draw_layout(t)
    strip, texts = fig.axes[1], _texts(fig)
    assert f"shape {tuple(t.shape)}, stride {t.stride()}, offset {t.storage_offset()}" in alt
    arrow = any(getattr(tx, "arrow_patch", None) is not None for tx in strip.texts)
    assert ("An arrow" in alt) == arrow == any(s.startswith("offset ") for s in texts)
    cells = [p for p in strip.patches if p.get_fill()]
    indices = [int(tx.get_text()) for tx in strip.texts if tx.get_position()[1] > 1]  # the index above each cell
    grey = [k for k, cell in zip(indices, cells) if to_hex(cell.get_facecolor()).upper() == UNUSED]
    assert len(indices) == len(cells) and (" grey, never read" in alt) == bool(grey)
    if grey:
        assert f"{_ranges(grey)} {'is' if len(grey) == 1 else 'are'} grey" in alt and "in between" not in alt
    drawn = {s for s in texts if s.startswith("x") and s[1:].isdigit()}
    said = {w.strip(").;,") for w in alt.split() if w.startswith("(x")}
    assert {f"(x{s[1:]}" for s in drawn} == said
    assert ("Colours repeat every 7" in alt) == (REPEATS_NOTE in strip.get_title())


def test_describe_layout_of_overlapping_windows_counts_every_element():
    from viewlab.draw import describe_layout

    alt = describe_layout(torch.arange(10.0).unfold(0, 4, 2))  # windows of 4, step 2: elements 2..7 read twice
    assert "row 1 reads elements 2 to 5 (values 2, 3, 4, 5)" in alt
    assert "elements 2 to 7 read 2 times (x2); elements 0, 1, 8 and 9 once." in alt
