"""The stride explorer in the book: no kernel, no network, opened from ``file://`` in Debian's chromium.

Two levels. Always: a page written here with book/_ext/viewlab_explorer.py's own inline script (the
package's explorer bundle and the model stand-in) and placeholders from its ``explorer_div``. With the built
book (``make test-book`` sets VIEWLAB_BOOK_HTML): the book's explorer page and the notebook pages. In both,
every request that is not for a ``file://`` URL is aborted and recorded, and none may be made; editing a
stride must redraw the view with the storage elements torch's ``as_strided`` reads. Screenshots go to
test-artifacts/explorer/.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import viewlab
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
pytest.importorskip("sphinx", reason="the book extra is not installed (make test-book installs it)")
import viewlab_explorer as ext  # noqa: E402 - book/_ext is not a package

CHROMIUM = shutil.which("chromium")
SITE = os.environ.get("VIEWLAB_BOOK_HTML")
ARTIFACTS = ROOT / "test-artifacts" / "explorer"
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium)")
needs_site = pytest.mark.skipif(not SITE, reason="needs the built book: `make test-book` sets VIEWLAB_BOOK_HTML")
EXPLORE_CELLS = {"01_views_and_copies.ipynb": 3, "03_expand_expand_as_repeat.ipynb": 1}  # at least


# --- the extension, without a browser --------------------------------------------------------------------


@given(st.lists(st.integers(0, 4), max_size=4), st.data())
def test_the_book_reads_back_the_layout_a_stored_explorer_output_names(shape, data):
    stride = data.draw(st.lists(st.integers(0, 5), min_size=len(shape), max_size=len(shape)))
    ex = viewlab.explore(shape=shape, stride=stride, offset=data.draw(st.integers(0, 3)))
    assert ext.layout_from_repr(repr(ex)) == {
        "shape": ex.shape,
        "stride": ex.stride,
        "offset": ex.offset,
        "size": ex.size,
    }
    assert ext.layout_from_repr("<ipywidgets.Widget object>") is None


def test_the_inline_module_is_the_packages_bundle():
    from viewlab.explorer import Explorer
    from viewlab.explorer.bundle import module_files

    shipped = ext.module_source()
    assert shipped == Explorer._esm  # what anywidget serves, byte for byte
    assert not re.search(r"^\s*import\b|\bimport\s*\(|https?://", shipped, re.MULTILINE), "it must load nothing"
    for path in module_files():  # every module is in it, its own lines after its imports
        body = path.read_text(encoding="utf-8").split('.js";\n')[-1].strip()
        assert body in shipped, path.name


def test_a_stored_output_with_values_gives_the_page_its_values():
    t = torch.arange(10, 22).view(3, 4)[:, ::2]
    layout = ext.layout_from_repr(repr(viewlab.explore(t)))
    assert layout["values"] == [str(v) for v in range(10, 22)]
    assert 'data-values="[&quot;10&quot;' in ext.explorer_div(**layout)


@pytest.mark.parametrize("name, count", EXPLORE_CELLS.items())
def test_each_explorer_cell_keeps_its_static_figure(name, count):
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "viewlab.explore(" in c.source]
    assert len(cells) >= count
    for cell in cells:  # GitHub, nbviewer and strict nbval see an image in every one of them
        assert any("image/png" in o.get("data", {}) for o in cell.outputs), cell.source[:120]


# --- in chromium ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(chromium_args):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args)
        yield browser
        browser.close()


def _open(browser, url: str):
    """The page, with every request that does not stay on file:// aborted and recorded."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    report: dict = {"foreign": [], "errors": []}

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            report["foreign"].append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: report["errors"].append(str(e)))
    page.on("console", lambda m: report["errors"].append(m.text) if m.type == "error" else None)
    page.goto(url, wait_until="load")
    return page, report


def _drawn(explorer) -> list[int]:
    """The storage element each cell of the view reads (its @k), in the view's row-major order."""
    return [int(k) for k in explorer.locator(".grid .c").evaluate_all("cs => cs.map(c => c.dataset.storage)")]


def _torch_reads(shape, stride, offset, size) -> list[int]:
    # arange storage: each value is its own storage index; out of bounds, read over a storage big enough
    needed = 0 if 0 in shape else offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    return torch.arange(max(size, needed)).as_strided(shape, stride, offset).flatten().tolist()


def _check_legend_arithmetic_and_tab_stop(explorer, layout) -> None:
    """On a built page: the legend is there, the first element's arithmetic shows on hover, one Tab stop."""
    shape, stride, offset, size = layout
    assert len(explorer.locator(".legend li").all_inner_texts()) == 6
    if 0 in shape:
        return
    explorer.locator(".grid .c").first.hover()
    start = f"[{', '.join('0' * len(shape))}]: {' + '.join([str(offset), *(f'0·{s}' for s in stride)])} = {offset}"
    assert start in explorer.locator(".arith").inner_text()
    assert explorer.locator(".grid .c[tabindex='0']").count() == 1


def _edit_stride_and_check(page, explorer, shape, new_stride, offset, size, shot: Path) -> None:
    before = explorer.locator(".summary").inner_text()
    stride_input = explorer.locator("input[name=stride]")
    stride_input.fill(", ".join(map(str, new_stride)))
    stride_input.press("Enter")
    expected = _torch_reads(shape, new_stride, offset, size)
    page.wait_for_function(
        "([el, want]) => JSON.stringify([...el.querySelectorAll('.grid .c')].map(c => +c.dataset.storage))"
        " === JSON.stringify(want)",
        arg=[explorer.element_handle(), expected],
        timeout=15_000,
    )
    assert _drawn(explorer) == expected
    after = explorer.locator(".summary").inner_text()
    assert after != before and f"stride ({', '.join(map(str, new_stride))}" in after
    outside = sum(i >= size for i in expected)
    assert explorer.locator(".grid .c.oob").count() == outside
    shot.parent.mkdir(parents=True, exist_ok=True)
    explorer.screenshot(path=str(shot))


@pytest.mark.browser
@needs_chromium
def test_a_file_page_with_the_inline_module_draws_and_redraws_offline(browser, tmp_path):
    layouts = [([3, 4], [4, 1], 0, 12), ([3, 4], [0, 1], 0, 4), ([2, 2], [4, 2], 4, 12)]
    body = "\n".join(ext.explorer_div(*layout) for layout in layouts)
    html = f'<!doctype html><meta charset="utf-8"><body>{body}<script type="module">{ext.module_source()}{ext.STAND_IN}</script>'
    (tmp_path / "page.html").write_text(html, encoding="utf-8")
    page, report = _open(browser, (tmp_path / "page.html").as_uri())
    explorers = page.locator("div.viewlab-explorer")
    page.wait_for_function("() => document.querySelectorAll('div.viewlab-explorer .vx').length === 3", timeout=15_000)
    for k, (shape, stride, offset, size) in enumerate(layouts):
        assert _drawn(explorers.nth(k)) == _torch_reads(shape, stride, offset, size)
    # stride 0 is overlap: each of the 4 storage elements is outlined and marked x3 under it
    assert explorers.nth(1).locator(".cells .c.over").count() == 4
    assert explorers.nth(1).locator(".cells .sc .n").all_inner_texts() == ["×3"] * 4
    # focus on a cell of the view lights up the storage element it reads
    explorers.nth(0).locator(".grid .c").nth(5).focus()
    assert explorers.nth(0).locator(".cells .c.hot").evaluate_all("cs => cs.map(c => c.dataset.index)") == ["5"]
    _edit_stride_and_check(page, explorers.nth(0), [3, 4], [1, 3], 0, 12, ARTIFACTS / "file-page-stride-edited.png")
    _edit_stride_and_check(page, explorers.nth(2), [2, 2], [4, 4], 4, 12, ARTIFACTS / "file-page-out-of-bounds.png")
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
def test_view_that_must_copy_is_said_so_and_the_layout_stays(browser, tmp_path):
    (tmp_path / "page.html").write_text(
        f'<body>{ext.explorer_div([4, 3], [1, 4], 0, 12)}<script type="module">{ext.module_source()}{ext.STAND_IN}</script>'
    )
    page, report = _open(browser, (tmp_path / "page.html").as_uri())
    explorer = page.locator("div.viewlab-explorer")
    explorer.locator(".grid .c").first.wait_for()
    t = torch.arange(12).view(3, 4).t()
    with pytest.raises(RuntimeError):
        t.view(-1)  # torch: no view exists
    assert not t.reshape(-1)._is_view()  # and reshape copies
    for op, words in (("view", "view is impossible"), ("reshape", "reshape must copy")):
        explorer.locator("select[name=op]").select_option(op)
        explorer.locator("input[name=args]").fill("-1")
        explorer.locator("button", has_text="Apply op").click()
        assert words in explorer.locator("[role=status]").inner_text()
        assert _drawn(explorer) == t.flatten().tolist()  # the layout is kept
    explorer.locator("select[name=op]").select_option("transpose")
    explorer.locator("input[name=args]").fill("0, 1")
    explorer.locator("button", has_text="Apply op").click()
    assert _drawn(explorer) == t.t().flatten().tolist()
    assert not report["foreign"] and not report["errors"], report


def _file_page(browser, tmp_path, layouts):
    """A file:// page with the book's inline script and one explorer per layout, drawn."""
    body = "\n".join(ext.explorer_div(*layout) for layout in layouts)
    html = f'<!doctype html><meta charset="utf-8"><body>{body}<script type="module">{ext.module_source()}{ext.STAND_IN}</script>'
    (tmp_path / "page.html").write_text(html, encoding="utf-8")
    page, report = _open(browser, (tmp_path / "page.html").as_uri())
    page.wait_for_function(
        f"() => document.querySelectorAll('div.viewlab-explorer .vx').length === {len(layouts)}", timeout=15_000
    )
    return page, page.locator("div.viewlab-explorer"), report


def _focused(page) -> dict:
    """What has the keyboard focus: its role, the storage element it reads, and its name."""
    return page.evaluate(
        "() => { const e = document.activeElement; return {role: e.getAttribute('role'),"
        " storage: e.dataset.storage ?? null, name: e.getAttribute('aria-label') || e.textContent}; }"
    )


LEGEND = ("overlap", "out of bounds", "storage offset", "never read", "point at or focus", "same colour")


@pytest.mark.browser
@needs_chromium
def test_the_legend_names_every_mark_drawn_as_the_cells_are(browser, tmp_path):
    page, explorers, report = _file_page(browser, tmp_path, [([3, 4], [4, 2], 1, 12), ([3, 4], [0, 1], 0, 4)])
    for k in range(2):
        items = explorers.nth(k).locator(".legend li").all_inner_texts()
        assert all(any(word in item for item in items) for word in LEGEND), items
        # one announcement per change: the status line is the only live region (the summary was a second)
        assert explorers.nth(k).locator("[aria-live], [role=status], [role=alert]").count() == 1
    # the samples are drawn by the same rules as the real marks: same outline, border and bar colours
    style = "(e, p) => getComputedStyle(e)[p]"
    real, sample = explorers.nth(1).locator(".cells .c.over").first, explorers.nth(1).locator(".legend .c.over")
    assert real.evaluate(style, "outlineColor") == sample.evaluate(style, "outlineColor")
    real, sample = explorers.nth(0).locator(".grid .c.oob").first, explorers.nth(0).locator(".legend .c.oob")
    assert real.evaluate(style, "borderTopColor") == sample.evaluate(style, "borderTopColor")
    assert real.evaluate(style, "borderTopStyle") == "dashed"
    over = explorers.nth(1).locator(".cells .c.over").first.evaluate(style, "outlineColor")
    outside = real.evaluate(style, "borderTopColor")
    assert over != outside  # overlap and out of bounds were both red
    real, sample = explorers.nth(0).locator(".cells .c.off"), explorers.nth(0).locator(".legend .c.off")
    assert real.evaluate(style, "borderBottomColor") == sample.evaluate(style, "borderBottomColor")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    explorers.nth(0).screenshot(path=str(ARTIFACTS / "legend-out-of-bounds.png"))
    explorers.nth(1).screenshot(path=str(ARTIFACTS / "legend-overlap.png"))
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize("shape, stride, offset, size", [([2, 3], [1, 2], 1, 8), ([2, 2, 3], [1, 6, 2], 0, 12)])
def test_pointing_at_or_focusing_a_cell_shows_its_address_arithmetic(browser, tmp_path, shape, stride, offset, size):
    page, explorers, report = _file_page(browser, tmp_path, [(shape, stride, offset, size)])
    explorer = explorers.nth(0)
    reads = torch.arange(size).as_strided(shape, stride, offset)
    cells = explorer.locator(".grid .c")
    for k, index in enumerate(torch.cartesian_prod(*[torch.arange(n) for n in shape]).view(-1, len(shape)).tolist()):
        address = reads[tuple(index)].item()
        terms = " + ".join([str(offset), *(f"{i}·{s}" for i, s in zip(index, stride))])
        want = f"[{', '.join(map(str, index))}]: {terms} = {address}"
        cells.nth(k).hover()
        assert want in explorer.locator(".arith").inner_text()
        assert "offset + i·stride[0] + j·stride[1]" in explorer.locator(".arith").inner_text()
        assert explorer.locator(".cells .c.hot").evaluate_all("cs => cs.map(c => +c.dataset.index)") == [address]
        cells.nth(k).focus()  # the keyboard path: the same text, and the cell's name says it too
        assert want in explorer.locator(".arith").inner_text() and want in _focused(page)["name"]
    explorer.screenshot(path=str(ARTIFACTS / f"arithmetic-{len(shape)}d.png"))
    # the other direction: pointing at a storage element rings every view cell that reads it
    explorer.locator(".cells .c[data-index='1']").hover()
    lit = explorer.locator(".grid .c.hot").evaluate_all("cs => cs.map(c => +c.dataset.storage)")
    assert lit == [1] * int((reads == 1).sum())
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
def test_the_view_is_one_tab_stop_and_the_arrow_keys_move_inside_it(browser, tmp_path):
    page, explorers, report = _file_page(browser, tmp_path, [([2, 2, 3], [6, 3, 1], 0, 12), ([3, 4], [4, 1], 0, 12)])
    first = explorers.nth(0)
    assert first.locator(".grid .c[tabindex='0']").count() == 1
    assert first.locator(".grid .c[tabindex='-1']").count() == 11
    first.locator("button", has_text="Apply op").focus()
    page.keyboard.press("Tab")  # into the view: its first element
    assert _focused(page)["role"] == "gridcell" and _focused(page)["name"].startswith("element [0, 0, 0]")
    moves = [
        ("ArrowRight", "[0, 0, 1]"),
        ("ArrowDown", "[0, 1, 1]"),
        ("ArrowDown", "[1, 0, 1]"),  # on into the next [i, :, :] grid
        ("End", "[1, 0, 2]"),
        ("ArrowRight", "[1, 0, 2]"),  # the edge: it stays
        ("Home", "[1, 0, 0]"),
        ("PageUp", "[0, 0, 0]"),
        ("Control+End", "[1, 1, 2]"),
        ("ArrowUp", "[1, 0, 2]"),
        ("Control+Home", "[0, 0, 0]"),
        ("PageDown", "[1, 0, 0]"),
    ]
    for key, where in moves:
        page.keyboard.press(key)
        assert _focused(page)["name"].startswith(f"element {where}"), (key, where, _focused(page))
        assert first.locator(".grid .c[tabindex='0']").count() == 1
    page.keyboard.press("Tab")  # one Tab leaves the view, for the storage strip: its second Tab stop
    assert _focused(page)["role"] != "gridcell"
    assert page.evaluate("() => document.activeElement.dataset.index") == "0"
    assert first.locator(".cells .c[tabindex='0']").count() == 1
    page.keyboard.press("ArrowRight")  # storage element 1: which elements of the view read it?
    assert page.evaluate("() => document.activeElement.dataset.index") == "1"
    assert "read by [0, 0, 1]" in first.locator(".arith").inner_text()
    assert first.locator(".grid .c.hot").evaluate_all("cs => cs.map(c => c.dataset.index)") == ["0, 0, 1"]
    page.keyboard.press("Tab")  # and the next Tab leaves the explorer: the next one's first control
    assert explorers.nth(1).locator("input[name=shape]").evaluate("e => e === document.activeElement")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Shift+Tab")  # back through the strip to where the learner left the view
    assert _focused(page)["name"].startswith("element [1, 0, 0]")
    # a redraw (a new stride) keeps the place and the single Tab stop
    first.locator("input[name=stride]").fill("1, 6, 2")
    first.locator("input[name=stride]").press("Enter")
    assert first.locator(".grid .c[tabindex='0']").count() == 1
    first.screenshot(path=str(ARTIFACTS / "keyboard-focus.png"))
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
def test_a_huge_stride_cuts_the_strip_says_so_and_still_shows_every_cell_read(browser, tmp_path):
    layouts = [
        ([3, 4], [100000, 1], 0, 12),
        ([3, 4], [4, 1], 200, 12),
        ([30, 30], [30, 1], 0, 12),
        ([3, 4], [4, 1], 0, 12),
    ]
    page, explorers, report = _file_page(browser, tmp_path, layouts)
    for k, (shape, stride, offset, size) in enumerate(layouts):
        explorer = explorers.nth(k)
        shown = set(explorer.locator(".cells .c").evaluate_all("cs => cs.map(c => +c.dataset.index)"))
        read = set(_torch_reads(shape, stride, offset, size))
        assert read <= shown, sorted(read - shown)[:5]
        assert set(range(size)) <= shown  # the storage itself is always there
        notice = explorer.locator(".trunc")
        if k == 0:
            assert len(shown) < 60 and notice.is_visible() and "The strip is cut" in notice.inner_text()
            gaps = explorer.locator(".cells .gap").all_inner_texts()
            assert gaps == [
                "… 99,981 elements not read (16 to 99996) …",
                "… 99,990 elements not read (100007 to 199996) …",
            ]
            assert explorer.locator(".cells .c.oob").count() == len(shown) - size
            explorer.screenshot(path=str(ARTIFACTS / "strip-cut-huge-stride.png"))
        elif k == 1:
            assert notice.is_visible() and len(explorer.locator(".cells .gap").all_inner_texts()) == 1
        elif k == 2:  # 888 cells read past the end, one run: all shown, nothing cut
            assert notice.count() == 0 and len(shown) == 900
        else:
            assert notice.count() == 0 and shown == set(range(12))
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
def test_on_a_phone_a_view_wider_than_its_box_says_it_scrolls(browser, tmp_path):
    page, explorers, report = _file_page(browser, tmp_path, [([2, 12], [12, 1], 0, 24), ([2, 3], [3, 1], 0, 6)])
    cue = "div.viewlab-explorer >> nth={} >> .cue"
    page.wait_for_function("() => document.querySelectorAll('.vx .cue').length === 2")
    assert page.locator(cue.format(0)).is_hidden() and page.locator(cue.format(1)).is_hidden()  # 1280 px
    page.set_viewport_size({"width": 375, "height": 800})
    page.locator(cue.format(0)).wait_for(state="visible", timeout=5_000)
    assert "scroll it sideways" in page.locator(cue.format(0)).inner_text()
    assert page.locator(cue.format(1)).is_hidden()  # a view that fits says nothing
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 375  # the page itself does not scroll
    explorers.nth(0).screenshot(path=str(ARTIFACTS / "phone-wide-view.png"))
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
def test_too_many_elements_to_draw_does_not_call_the_storage_never_read(browser, tmp_path):
    page, explorers, report = _file_page(browser, tmp_path, [([40, 40], [0, 1], 0, 40)])
    explorer = explorers.nth(0)
    assert "1,600 elements: too many to draw (at most 1024)" in explorer.inner_text()
    assert explorer.locator(".cells .c").count() == 40 and explorer.locator(".cells .c.unread").count() == 0
    assert "too many view elements to count their reads" in explorer.inner_text()
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
def test_typed_fields_say_what_is_wrong_and_a_new_shape_can_take_contiguous_strides(browser, tmp_path):
    page, explorers, report = _file_page(browser, tmp_path, [([3, 4], [4, 1], 0, 12), ([], [], 5, 12)])
    explorer, status = explorers.nth(0), explorers.nth(0).locator("[role=status]")
    for text in ("", "1e1", "0x3", "-3", "1.5"):  # the offset is one whole number: nothing else is read as one
        explorer.locator("input[name=offset]").fill(text)
        explorer.locator("input[name=offset]").press("Enter")
        assert "must be one whole number" in status.inner_text() and "err" in status.get_attribute("class")
        assert _drawn(explorer) == list(range(12))
    explorer.locator("button", has_text="Reset").click()
    # a shape with another number of dims, then Tab to the stride: a hint, not an error, and the layout stays
    explorer.locator("input[name=shape]").fill("2, 2, 3")
    explorer.locator("input[name=shape]").press("Tab")
    assert "give 3 strides, or press Contiguous strides" in status.inner_text()
    assert "err" not in status.get_attribute("class") and _drawn(explorer) == list(range(12))
    explorer.locator("input[name=shape]").fill("2, 6")
    explorer.locator("button", has_text="Contiguous strides").click()
    assert explorer.locator("input[name=stride]").input_value() == "6, 1"
    assert _drawn(explorer) == torch.arange(12).view(2, 6).flatten().tolist()
    assert "Its one element reads storage element 5, each once." in explorers.nth(1).locator(".summary").inner_text()
    assert not report["foreign"] and not report["errors"], report


def _fields(explorer) -> tuple[str, str, str]:
    return tuple(explorer.locator(f"input[name={n}]").input_value() for n in ("shape", "stride", "offset"))


def _press_at(page, field, caret: int, key: str) -> None:
    """Put the caret at ``caret`` in ``field`` (a real click, then the position) and press ``key``."""
    field.click()
    field.evaluate("(e, at) => e.setSelectionRange(at, at)", caret)
    page.keyboard.press(key)


@pytest.mark.browser
@needs_chromium
def test_up_and_down_in_a_field_step_the_number_at_the_cursor_and_redraw(browser, tmp_path):
    page, explorers, report = _file_page(browser, tmp_path, [([3, 4], [4, 1], 0, 12)])
    explorer, status = explorers.nth(0), explorers.nth(0).locator("[role=status]")
    stride, shape, offset = (explorer.locator(f"input[name={n}]") for n in ("stride", "shape", "offset"))
    steps = [  # (field, caret, key, fields after, the caret after)
        (stride, 0, "ArrowDown", ("3, 4", "3, 1", "0"), 1),  # the first stride: 4 -> 3, rows now overlap
        (stride, 1, "Shift+ArrowUp", ("3, 4", "13, 1", "0"), 2),  # by 10: reads past the end
        (stride, 2, "ArrowDown", ("3, 4", "12, 1", "0"), 2),
        (stride, 5, "ArrowUp", ("3, 4", "12, 2", "0"), 5),  # the caret in the second number: that one
        (shape, 4, "ArrowDown", ("3, 3", "12, 2", "0"), 4),  # a shape keeps its strides, as as_strided
        (offset, 1, "ArrowUp", ("3, 3", "12, 2", "1"), 1),
        (offset, 1, "ArrowDown", ("3, 3", "12, 2", "0"), 1),
        (offset, 1, "ArrowDown", ("3, 3", "12, 2", "0"), 1),  # never below 0
        (stride, 5, "ArrowDown", ("3, 3", "12, 1", "0"), 5),
        (stride, 5, "ArrowDown", ("3, 3", "12, 0", "0"), 5),
        (stride, 5, "ArrowDown", ("3, 3", "12, 0", "0"), 5),  # torch has no negative strides: 0 stays 0
    ]
    for field, caret, key, after, caret_after in steps:
        _press_at(page, field, caret, key)
        assert _fields(explorer) == after, (key, after, _fields(explorer))
        assert field.evaluate("e => [e === document.activeElement, e.selectionStart]") == [True, caret_after]
        shape_now, stride_now = ([int(v) for v in text.split(", ")] for text in after[:2])
        assert _drawn(explorer) == _torch_reads(shape_now, stride_now, int(after[2]), 12), after
    assert "out of bounds" in status.inner_text()  # (3, 3), stride (12, 0) reads storage 24
    explorer.screenshot(path=str(ARTIFACTS / "stepped-stride.png"))
    # a field with no number leaves the keys alone; nothing is applied
    stride.fill("abc")
    _press_at(page, stride, 1, "ArrowUp")
    assert stride.input_value() == "abc" and _drawn(explorer) == _torch_reads([3, 3], [12, 0], 0, 12)
    assert not report["foreign"] and not report["errors"], report


@pytest.mark.browser
@needs_chromium
def test_undo_and_ctrl_z_go_back_one_layout_change_at_a_time(browser, tmp_path):
    page, explorers, report = _file_page(browser, tmp_path, [([3, 4], [4, 1], 0, 12), ([2, 3], [3, 1], 0, 6)])
    explorer, other = explorers.nth(0), explorers.nth(1)
    undo, status = explorer.locator("button[name=undo]"), explorer.locator("[role=status]")
    assert undo.get_attribute("aria-disabled") == "true" and undo.get_attribute("aria-keyshortcuts") == "Control+Z"
    undo.focus()  # aria-disabled, not disabled: it keeps the focus and says why nothing happens
    page.keyboard.press("Enter")
    assert "nothing to undo" in status.inner_text() and _fields(explorer) == ("3, 4", "4, 1", "0")
    layouts = [(("3, 4", "4, 1", "0"))]  # every layout reached, in order: Undo walks back through them
    explorer.locator("input[name=stride]").fill("1, 3")
    explorer.locator("input[name=stride]").press("Enter")  # typed
    layouts.append(_fields(explorer))
    _press_at(page, explorer.locator("input[name=offset]"), 1, "ArrowUp")  # stepped
    layouts.append(_fields(explorer))
    explorer.locator("select[name=op]").select_option("transpose")
    explorer.locator("input[name=args]").fill("0, 1")
    explorer.locator("button", has_text="Apply op").click()  # an operator
    layouts.append(_fields(explorer))
    explorer.locator("button", has_text="Reset").click()  # Reset is a change too
    layouts.append(_fields(explorer))
    assert layouts == [
        ("3, 4", "4, 1", "0"),
        ("3, 4", "1, 3", "0"),
        ("3, 4", "1, 3", "1"),
        ("4, 3", "3, 1", "1"),
        ("3, 4", "4, 1", "0"),
    ]
    assert undo.get_attribute("aria-disabled") == "false"
    # a typed edit not applied yet: Ctrl+Z there is the field's own undo of the typing, not a layout undo
    field = explorer.locator("input[name=stride]")
    field.click()
    page.keyboard.type("7")
    page.keyboard.press("Control+z")
    assert _fields(explorer)[0] == "3, 4" and _drawn(explorer) == list(range(12))
    field.fill("4, 1")  # as drawn again: Ctrl+Z in the field is the explorer's now
    hows = ["Control+z in a field", "the Undo button", "Control+z on a view cell", "Control+z on Undo"]
    for back, how in zip(reversed(layouts[:-1]), hows):
        if how == "the Undo button":
            undo.click()
        elif how == "Control+z on a view cell":
            explorer.locator(".grid .c[tabindex='0']").focus()
            page.keyboard.press("Control+z")
        elif how == "Control+z on Undo":
            undo.focus()
            page.keyboard.press("Control+z")
        else:
            field.focus()
            page.keyboard.press("Control+z")
        assert _fields(explorer) == back, (how, back)
        shape, stride, offset = ([int(v) for v in text.split(", ")] for text in back)
        assert _drawn(explorer) == _torch_reads(shape, stride, offset[0], 12), how
        assert "undone: back to shape" in status.inner_text(), how
    assert undo.get_attribute("aria-disabled") == "true"
    assert undo.evaluate("e => e === document.activeElement"), "Undo keeps the focus when there is nothing left"
    page.keyboard.press("Control+z")
    assert "nothing to undo" in status.inner_text() and _fields(explorer) == layouts[0]
    assert _fields(other) == ("2, 3", "3, 1", "0")  # each explorer has its own history
    explorer.screenshot(path=str(ARTIFACTS / "undo.png"))
    assert not report["foreign"] and not report["errors"], report


def _bytes_page(browser, tmp_path, divs: list[str]):
    html = f'<!doctype html><meta charset="utf-8"><body>{"".join(divs)}<script type="module">{ext.module_source()}{ext.STAND_IN}</script>'
    (tmp_path / "page.html").write_text(html, encoding="utf-8")
    page, report = _open(browser, (tmp_path / "page.html").as_uri())
    page.wait_for_function(
        f"() => document.querySelectorAll('div.viewlab-explorer .vx').length === {len(divs)}", timeout=15_000
    )
    return page, page.locator("div.viewlab-explorer"), report


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.bool])
def test_the_strides_are_shown_in_bytes_beside_the_element_strides(browser, tmp_path, dtype):
    t = torch.zeros(12, dtype=dtype).view(3, 4)[:, 1::2]  # offset 1, stride (4, 2)
    layout = ext.layout_from_repr(repr(viewlab.explore(t)))
    name = str(dtype).removeprefix("torch.")
    assert layout["dtype"] == name
    page, explorers, report = _bytes_page(
        browser, tmp_path, [ext.explorer_div(**layout), ext.explorer_div([2, 3], [3, 1], 0, 6)]
    )
    explorer, size = explorers.nth(0), t.element_size()

    def want(u):
        stride = ", ".join(str(s * size) for s in u.stride())
        return f"in bytes ({name}, {size} byte{'s' * (size != 1)} an element): stride ({stride}), offset {u.storage_offset() * size}"

    assert explorer.locator(".bytes").inner_text() == want(t)
    # an edit redraws it: the byte strides are the element strides times the element size, as torch's
    explorer.locator("input[name=stride]").fill("1, 5")
    explorer.locator("input[name=stride]").press("Enter")
    assert explorer.locator(".bytes").inner_text() == want(t.as_strided((3, 2), (1, 5), 1))
    # the address of the element pointed at, in bytes too: element [1, 1] reads storage 1 + 1 + 5 = 7
    explorer.locator(".grid .c").nth(3).hover()
    words = f"[1, 1]: 1 + 1·1 + 1·5 = 7, at byte {7 * size} (7 × {size})"
    assert words in explorer.locator(".arith").inner_text()
    assert words in explorer.locator(".grid .c").nth(3).get_attribute("aria-label")
    assert explorers.nth(1).locator(".bytes").count() == 0  # a layout without a dtype: elements only
    explorer.screenshot(path=str(ARTIFACTS / f"bytes-{name}.png"))
    assert not report["foreign"] and not report["errors"], report


# --- the built book ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site() -> Path:
    path = (ROOT / SITE).resolve()
    assert (path / "book" / "explorer.html").is_file(), f"no built book at {path}; run `make book`"
    return path


def _directive_layouts() -> list[tuple[list[int], list[int], int, int]]:
    """The layouts of book/explorer.md's explorers, computed as the directive does (contiguous by default)."""
    text = (ROOT / "book" / "explorer.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```\{viewlab-explorer\}\n(.*?)```", text, re.DOTALL):
        opts = dict(re.findall(r":(\w+):\s*(.*)", block))
        shape = [int(v) for v in opts["shape"].split(",")]
        stride = [int(v) for v in opts["stride"].split(",")] if "stride" in opts else list(torch.empty(shape).stride())
        offset = int(opts.get("offset", 0))
        needed = 0 if 0 in shape else offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))
        found.append((shape, stride, offset, int(opts.get("size", needed))))
    return found


@pytest.mark.browser
@needs_chromium
@needs_site
def test_the_books_explorer_page_works_from_file_with_the_network_blocked(browser, site):
    layouts = _directive_layouts()
    assert len(layouts) >= 5
    page, report = _open(browser, (site / "book" / "explorer.html").as_uri())
    explorers = page.locator("div.viewlab-explorer")
    page.wait_for_function(
        f"() => document.querySelectorAll('div.viewlab-explorer .vx').length === {len(layouts)}", timeout=15_000
    )
    for k, layout in enumerate(layouts):
        assert _drawn(explorers.nth(k)) == _torch_reads(*layout), layout
        _check_legend_arithmetic_and_tab_stop(explorers.nth(k), layout)
        # the page's examples are aranges (int64): their strides in bytes are 8 times the element strides
        shape, stride, offset, size = layout
        item = torch.arange(1).element_size()  # 8
        in_bytes = ", ".join(str(s * item) for s in stride) + ("," if len(stride) == 1 else "")
        words = f"in bytes (int64, {item} bytes an element): stride ({in_bytes}), offset {offset * item}"
        assert explorers.nth(k).locator(".bytes").inner_text() == words
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    explorers.nth(0).scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "book-explorer-page.png"))
    shape, _, offset, size = layouts[0]
    _edit_stride_and_check(page, explorers.nth(0), shape, [1, 3], offset, size, ARTIFACTS / "book-stride-edited.png")
    assert not report["foreign"], f"requests to other hosts: {report['foreign']}"
    assert not report["errors"], report["errors"]
    # dark mode: the theme's light text colours must not reach the explorer's white box
    dark = browser.new_context(color_scheme="dark", viewport={"width": 1280, "height": 900}).new_page()
    dark.goto((site / "book" / "explorer.html").as_uri())
    dark.locator("div.viewlab-explorer .vx h4").first.wait_for(timeout=15_000)
    assert dark.evaluate("document.documentElement.dataset.theme") == "dark"
    colours = dark.evaluate(
        "() => [...document.querySelectorAll('.vx h4, .vx label, .vx input, .vx .sub')].map(e => getComputedStyle(e).color)"
    )
    dim = [c for c in colours if sum(map(int, re.findall(r"\d+", c)[:3])) > 3 * 140]  # light text on white
    assert not dim, dim
    dark.locator("div.viewlab-explorer").nth(3).screenshot(path=str(ARTIFACTS / "book-overlap-dark.png"))
    dark.context.close()


@pytest.mark.browser
@needs_chromium
@needs_site
def test_each_stored_explorer_output_is_an_explorer_on_its_notebook_page(browser, site):
    for name in EXPLORE_CELLS:
        nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        stored = [
            ext.layout_from_repr(o["data"]["text/plain"])
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if ext.layout_from_repr(o.get("data", {}).get("text/plain", "")) is not None
        ]
        page, report = _open(browser, (site / "notebooks" / name.replace(".ipynb", ".html")).as_uri())
        explorers = page.locator("div.viewlab-explorer")
        assert explorers.count() == len(stored), name  # 0 until the notebooks are executed with the explorer cells
        for k, layout in enumerate(stored):
            explorers.nth(k).locator(".vx").wait_for(timeout=15_000)
            where = (layout["shape"], layout["stride"], layout["offset"], layout["size"])
            assert _drawn(explorers.nth(k)) == _torch_reads(*where)
            _check_legend_arithmetic_and_tab_stop(explorers.nth(k), where)
            if "values" in layout:  # the values draw_layout's figure shows above it, each with its @k
                first = explorers.nth(k).locator(".grid .c").first
                k0 = _torch_reads(*where)[0]
                assert first.inner_text().split() == [layout["values"][k0], f"@{k0}"]
        explorers.first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"book-{name.replace('.ipynb', '')}.png"))
        assert not report["foreign"] and not report["errors"], (name, report)


@pytest.mark.browser
@pytest.mark.kernel
@needs_chromium
def test_an_executed_explore_output_becomes_an_explorer_in_a_sphinx_page(browser, tmp_path):
    """The notebook path end to end: a notebook executed by a real kernel stores a ``viewlab.explore`` output,
    MyST-NB with this extension builds it, and the page draws that layout from file:// with no network."""
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("myst_nb")
    src = tmp_path / "src"
    src.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Explorer"),
        nbformat.v4.new_code_cell("import torch, viewlab\nviewlab.explore(torch.arange(12).view(3, 4)[:, 1::2].t())"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    nbformat.write(nb, src / "page.ipynb")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        "extensions = ['myst_nb', 'viewlab_explorer']\nnb_execution_mode = 'off'\nnb_ipywidgets_js = {}\n"
        "exclude_patterns = ['_build']\nroot_doc = 'page'\n"
    )
    from sphinx.cmd.build import build_main

    assert build_main(["-q", "-b", "html", str(src), str(tmp_path / "html")]) == 0
    page, report = _open(browser, (tmp_path / "html" / "page.html").as_uri())
    explorer = page.locator("div.viewlab-explorer")
    explorer.locator(".grid .c").first.wait_for(timeout=15_000)
    t = torch.arange(12).view(3, 4)[:, 1::2].t()
    assert _drawn(explorer) == t.flatten().tolist()  # arange storage: each value is its storage index
    assert "offset 1" in explorer.inner_text()
    assert explorer.locator(".bytes").inner_text() == "in bytes (int64, 8 bytes an element): stride (16, 32), offset 8"
    _edit_stride_and_check(page, explorer, list(t.shape), [1, 1], 1, 12, ARTIFACTS / "sphinx-notebook-output.png")
    assert not report["foreign"] and not report["errors"], report
