"""The explorer's look: the same palette as viewlab.draw's figures, marks in different colours, every
text and mark at least 4.5:1 (WCAG 2 contrast, computed here from the colours), one CSS rule a line.

The colours are read from src/viewlab/explorer/style.js as written; the chromium test then measures the
colours the page really draws (computed styles), so a rule that overrides the palette is caught too.
"""

from __future__ import annotations

import re
import shutil
from itertools import combinations
from pathlib import Path

import pytest

from viewlab.draw._cells import DARK_FILLS, INK, INK_ON_DARK, PALETTE, UNUSED

STYLE = Path(__file__).parents[2] / "src" / "viewlab" / "explorer" / "style.js"
CHROMIUM = shutil.which("chromium")
WHITE = "#FFFFFF"
AA = 4.5  # WCAG 2 AA for normal text; the explorer's text is 10-13 px


def _const(name: str) -> str:
    match = re.search(rf'^export const {name} = "(#[0-9A-Fa-f]{{6}})";', STYLE.read_text(encoding="utf-8"), re.M)
    assert match, f"style.js has no colour constant {name}"
    return match[1].upper()


def _list(name: str) -> list[str]:
    match = re.search(rf"^export const {name} = \[(.*?)\];", STYLE.read_text(encoding="utf-8"), re.M)
    assert match, f"style.js has no list {name}"
    return [c.upper() for c in re.findall(r'"(#[0-9A-Fa-f]{6})"', match[1])]


def _marks() -> dict[str, str]:
    block = re.search(r"^export const MARKS = \{(.*?)^\};", STYLE.read_text(encoding="utf-8"), re.M | re.S)
    assert block, "style.js has no MARKS"
    return {k: v.upper() for k, v in re.findall(r'^\s*(\w+): "(#[0-9A-Fa-f]{6})"', block[1], re.M)}


def luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#RRGGBB``."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours, from 1 to 21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_contrast_formula_gives_the_wcag_reference_values():
    assert contrast("#000000", "#FFFFFF") == pytest.approx(21)
    assert contrast("#777777", "#FFFFFF") == pytest.approx(4.48, abs=0.01)  # the classic just-fails grey
    assert contrast("#777777", "#EEEEEE") == pytest.approx(3.86, abs=0.01)  # the old unread cell (review: 3.9)


def test_the_palette_is_viewlab_draws():
    assert _list("PALETTE") == [c.upper() for c in PALETTE]
    assert _const("UNREAD") == UNUSED.upper()


def test_the_static_figure_inks_cells_as_the_explorer_does():
    assert (_const("INK"), _const("INK_ON_DARK"), _list("DARK_FILLS")) == (INK, INK_ON_DARK, list(DARK_FILLS))


def test_every_number_in_the_static_layout_figure_is_readable_on_its_cell():
    """The drawn figure itself: each text inside a filled cell against that cell's colour (7 storage elements,
    so every palette colour is drawn; a stepped view, so never-read cells are drawn too)."""
    import torch
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    from viewlab.draw import draw_layout

    fig = draw_layout(torch.arange(14.0)[::2].view(7)[1:])  # offset 2, stride 2: read and unread cells
    checked = 0
    for ax in fig.axes:
        cells = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill()]
        for text in ax.texts:
            x, y = text.get_position()
            under = [p for p in cells if p.get_x() < x < p.get_x() + 1 and p.get_y() < y < p.get_y() + 1]
            if under and text.get_bbox_patch() is None:  # hatched text sits on its own white box
                fill, ink = to_hex(under[-1].get_facecolor()).upper(), to_hex(text.get_color()).upper()
                assert contrast(ink, fill) >= AA, (text.get_text(), ink, fill, round(contrast(ink, fill), 2))
                checked += 1
    assert checked >= 6


def test_every_cell_number_is_readable_on_its_colour():
    ink, light, dark = _const("INK"), _const("INK_ON_DARK"), _list("DARK_FILLS")
    for fill in _list("PALETTE"):
        text = light if fill in dark else ink
        assert contrast(text, fill) >= AA, (text, fill, round(contrast(text, fill), 2))
    assert contrast(_const("MUTED"), _const("UNREAD")) >= AA
    for stripe in (_const("HATCH"), WHITE):  # out-of-bounds cells: dark text on both stripes
        assert contrast(ink, stripe) >= AA


def test_each_mark_has_its_own_colour_readable_on_the_white_box():
    marks = _marks()
    assert set(marks) == {"overlap", "outside", "offset", "pointer"}
    assert len(set(marks.values())) == len(marks), marks
    for name, colour in marks.items():
        assert contrast(colour, WHITE) >= AA, (name, colour)
    # overlap and out of bounds were both red: now far apart in hue, not only different hex codes
    hue = {name: _hue(colour) for name, colour in marks.items() if name != "pointer"}
    for a, b in combinations(hue, 2):
        gap = abs(hue[a] - hue[b]) % 360
        assert min(gap, 360 - gap) >= 40, (a, b, hue)
    for name in ("SUBTLE", "WRONG", "COPIES", "FINE"):
        assert contrast(_const(name), WHITE) >= AA, name


def _hue(colour: str) -> float:
    import colorsys

    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return colorsys.rgb_to_hls(r, g, b)[0] * 360


# The page's own colours: every text node's colour against the solid background it sits on.
MEASURE = """() => {
  const rgb = (s) => (s.match(/[\\d.]+/g) || []).slice(0, 4).map(Number);
  const solid = (node) => {
    for (let n = node; n; n = n.parentElement) {
      const cs = getComputedStyle(n);
      if (cs.backgroundImage !== "none") return null;  // hatching: checked from the palette
      const c = rgb(cs.backgroundColor);
      if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  for (const node of document.querySelectorAll(".vx *")) {
    if (![...node.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim())) continue;
    if (node.closest("select, option") || node.offsetParent === null) continue;
    const bg = solid(node);
    if (bg) out.push({text: node.textContent.trim().slice(0, 30), fg: rgb(getComputedStyle(node).color).slice(0, 3), bg});
  }
  return out;
}"""


def _hex(rgb: list[float]) -> str:
    return "#" + "".join(f"{round(v):02X}" for v in rgb)


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: `apt-get install -y chromium`)")
def test_the_drawn_page_has_one_css_rule_a_line_and_every_text_at_least_4_5_to_1(chromium_args):
    from playwright.sync_api import sync_playwright

    from tests.unit.test_explore import _js

    stand_in = (
        "const data = {shape: [3, 4], stride: [0, 1], offset: 1, size: 6, values: ['10', '20', '30', '40', '50', '60'],"
        " dtype: 'int64', itemsize: 8};"
        "const model = {get: (k) => data[k], set: (k, v) => (data[k] = v), on() {}, off() {}, save_changes() {}};"
        "render({model, el: document.getElementById('x')}); window.CSS_TEXT = CSS; window.done = true;"
    )
    html = f'<body><div id="x"></div><script type="module">{_js()}\n{stand_in}</script>'
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args)
        try:
            page = browser.new_page()
            page.route("**/*", lambda route: route.abort())
            page.set_content(html)
            page.wait_for_function("() => window.done === true", timeout=30_000)
            lines = page.evaluate("() => window.CSS_TEXT.split('\\n')")
            per_line = page.evaluate(
                "(lines) => lines.map((l) => { const s = new CSSStyleSheet(); s.replaceSync(l); return s.cssRules.length; })",
                lines,
            )
            texts = page.evaluate(MEASURE)
        finally:
            browser.close()
    assert len(lines) >= 30 and per_line == [1] * len(lines), list(zip(lines, per_line))
    assert len(texts) > 40
    # the strides in bytes, the keys' hint and the Undo button (nothing to undo yet) are measured too
    shown = [t["text"] for t in texts]
    for start in ("in bytes (int64, 8 bytes", "↑ ↓ in a field: step", "Undo"):
        assert any(text.startswith(start) for text in shown), (start, shown)
    low = [(t["text"], _hex(t["fg"]), _hex(t["bg"])) for t in texts if contrast(_hex(t["fg"]), _hex(t["bg"])) < AA]
    assert not low, low
