"""viewlab.explore: the Python side (inputs, the real tensor's layout, ``.tensor()``) and explorer.js's
arithmetic against real torch, evaluated in a real browser (Debian's chromium through Playwright).

The module is the package's bundle (what anywidget serves) run in a page that can reach nothing:
every request is aborted and counted. The cases come from tests/unit/explorer_cases.py, answered by torch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import viewlab
from tests.unit import explorer_cases
from viewlab.explorer import MAX_STORAGE, Explorer

CHROMIUM = shutil.which("chromium")


def _js() -> str:
    """The bundle anywidget serves (imported here, so the Python tests also run against an older package)."""
    from viewlab.explorer.bundle import bundle

    return bundle()


JS_NAMES = (
    "analyse checkLayout inferSize viewOrCopy contiguousStrides numel transpose permute slice expand unsqueeze "
    "unfold contiguous asStrided describe render"
).split()


# --- Python: inputs and the real tensor ---------------------------------------------------------------


def test_import_viewlab_loads_no_anywidget_until_explore_is_used():
    code = "import sys, viewlab; print('anywidget' in sys.modules); viewlab.explore; print('anywidget' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["False", "True"], out.stdout


def test_explore_is_the_function_even_after_its_module_is_imported():
    import viewlab.explorer  # noqa: F401 - the submodule import must not shadow the face's name

    assert callable(viewlab.explore) and viewlab.explore is viewlab.explorer.explore


@st.composite
def views(draw):
    """A real tensor with a non-trivial layout: a view of an arange reached by a few view operators."""
    t = torch.arange(draw(st.integers(0, 24)))
    if t.numel() and draw(st.booleans()):
        rows = draw(st.sampled_from([d for d in range(1, t.numel() + 1) if t.numel() % d == 0]))
        t = t.view(rows, -1)
        if draw(st.booleans()):
            t = t.t()
        if draw(st.booleans()):
            t = t[:, :: draw(st.integers(1, 3))]
    if draw(st.booleans()):
        t = t.unsqueeze(0).expand(draw(st.integers(0, 3)), *t.shape)
    return t


@given(views())
def test_explorer_starts_from_the_real_layout_and_tensor_gives_it_back(t):
    ex = viewlab.explore(t)
    assert (ex.shape, ex.stride, ex.offset) == (list(t.shape), list(t.stride()), t.storage_offset())
    assert ex.size == t.untyped_storage().nbytes() // t.element_size()
    back = ex.tensor()
    assert back.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert (back.shape, back.stride(), back.storage_offset()) == (t.shape, t.stride(), t.storage_offset())
    assert torch.equal(back, t)


@given(st.lists(st.integers(0, 4), max_size=4), st.data())
def test_an_edited_layout_is_the_as_strided_view_of_the_same_storage(shape, data):
    base = torch.arange(30)
    ex = viewlab.explore(base)
    stride = data.draw(st.lists(st.integers(0, 5), min_size=len(shape), max_size=len(shape)))
    ex.shape, ex.stride, ex.offset = shape, stride, data.draw(st.integers(0, 6))
    needed = 0 if 0 in shape else ex.offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    if needed > base.numel():
        with pytest.raises(ValueError, match=r"^Explorer\.tensor\(\): .* reads past the storage's 30 elements"):
            ex.tensor()
        with pytest.raises(RuntimeError):  # torch refuses it too: the explorer's refusal is not stricter
            base.as_strided(shape, stride, ex.offset)
    else:
        assert torch.equal(ex.tensor(), base.as_strided(shape, stride, ex.offset))


@given(st.lists(st.integers(0, 5), max_size=4))
def test_a_layout_alone_gets_torchs_contiguous_strides_and_the_storage_it_needs(shape):
    ex = viewlab.explore(shape=shape)
    reference = torch.empty(shape)
    assert ex.stride == list(reference.stride()) and ex.offset == 0
    assert ex.size == reference.untyped_storage().nbytes() // reference.element_size()


def test_the_repr_is_the_layout_and_the_storage_is_what_torch_allocates_for_it():
    ex = viewlab.explore(shape=(2, 3), stride=(1, 2), offset=1)
    assert ex.size == 1 + torch.empty_strided((2, 3), (1, 2)).untyped_storage().nbytes() // 4
    assert repr(ex) == f"Explorer(shape=(2, 3), stride=(1, 2), offset=1, size={ex.size})"


@pytest.mark.parametrize(
    "kwargs, kind, pattern",
    [
        ({"t": [1, 2]}, TypeError, r"explore\(\): expects a torch.Tensor for `t`, got list"),
        ({"shape": 3}, TypeError, r"explore\(\): `shape` must be a tuple of at most 6 ints; got int 3"),
        (
            {"shape": (2, -1)},
            ValueError,
            r"explore\(\): `shape\[1\]` must be an int in 0\.\.9007199254740991; got int -1",
        ),
        ({"shape": (2, 3), "stride": (1,)}, ValueError, r"`stride` must be 2 ints, one per dim of shape \(2, 3\)"),
        ({"shape": (2,), "stride": (-1,)}, ValueError, r"`stride\[0\]` must be an int in 0\.\.9007199254740991"),
        ({"shape": (2,), "offset": 1.5}, TypeError, r"`offset` must be an int in 0\.\.9007199254740991; got float 1.5"),
        ({"shape": (40, 40)}, ValueError, rf"draws at most {MAX_STORAGE} storage elements; this layout spans 1600"),
        ({"t": torch.zeros(3), "shape": (3,)}, ValueError, r"takes a tensor `t` or a layout .* not both"),
        ({"t": torch.zeros(3), "offset": 1}, ValueError, r"not both"),
        ({"t": torch.zeros(2000)[:4]}, ValueError, r"this layout spans 2000"),
        ({"shape": (2,), "dtype": "float32"}, TypeError, r"`dtype` must be a torch.dtype \(or None\); got str"),
        ({"t": torch.zeros(3), "dtype": torch.float32}, ValueError, r"not both"),
    ],
)
def test_bad_input_is_refused_with_what_to_pass(kwargs, kind, pattern):
    t = kwargs.pop("t", None)
    with pytest.raises(kind, match=pattern):
        viewlab.explore(t, **kwargs)


# fuzz.md E16: a layout with no elements used to keep numbers neither torch's int64 nor the page's exact
# integers (2**53 - 1) can hold, and .tensor() gave torch's overflow error for a size set from Python.
@pytest.mark.parametrize(
    "kwargs",
    [
        {"shape": (2**63, 0)},
        {"shape": (2**53, 0)},
        {"shape": (2, 0), "offset": 10**30},
        {"shape": (0, 3), "stride": (2**60, 1)},
    ],
)
def test_numbers_a_browser_cannot_hold_are_refused_even_when_the_layout_has_no_elements(kwargs):
    with pytest.raises(
        ValueError, match=r"^explore\(\): `\w+(\[\d\])?` must be an int in 0\.\.9007199254740991; got int"
    ):
        viewlab.explore(**kwargs)


def test_a_layout_whose_last_address_a_browser_cannot_hold_is_refused():
    with pytest.raises(ValueError, match=r"^explore\(\): this layout reaches storage element 9007199254740992"):
        viewlab.explore(shape=(3,), stride=(2**52,))


@pytest.mark.parametrize(
    "shape, stride, offset, words",
    [
        ([-1, 4], [4, 1], 0, "sizes and the offset must be ints >= 0"),
        ([2, 2], [1, 1], -1, "sizes and the offset must be ints >= 0"),
        ([0, 2], [2**60, 1], 0, r"holds a number above 9007199254740991"),
    ],
)
def test_tensor_refuses_a_layout_set_from_python_before_torch_sees_it(shape, stride, offset, words):
    ex = viewlab.explore(torch.arange(12.0))
    ex.shape, ex.stride, ex.offset = shape, stride, offset
    with pytest.raises(ValueError, match=rf"^Explorer\.tensor\(\): .* {words}"):
        ex.tensor()


@pytest.mark.parametrize(
    "t",
    [
        torch.arange(10, 22).view(3, 4)[:, ::2],
        torch.tensor([0.5, 1.25, -2.0]).expand(2, 3),
        torch.tensor([True, False, True]),
        torch.arange(6.0).view(2, 3).t()[1:],
    ],
)
def test_the_explorer_carries_the_storages_values_as_the_static_figure_writes_them(t):
    from viewlab._format import cell_value

    ex = viewlab.explore(t)
    storage = torch.as_strided(t, (ex.size,), (1,), 0)
    assert ex.values == [cell_value(v) for v in storage.tolist()]
    assert repr(ex).endswith(f", values={ex.values!r})")
    assert viewlab.explore(shape=(2, 3)).values == [] and "values" not in repr(viewlab.explore(shape=(2, 3)))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.float16, torch.bool, torch.complex128])
def test_the_explorer_knows_the_element_size_for_the_strides_in_bytes(dtype):
    t = torch.zeros(12, dtype=dtype).view(3, 4).t()
    ex = viewlab.explore(t)
    name = str(dtype).removeprefix("torch.")
    assert (ex.dtype, ex.itemsize) == (name, t.element_size()) and ex.get_state()["itemsize"] == t.element_size()
    assert f", size=12, dtype={dtype}, values=" in repr(ex)
    alone = viewlab.explore(shape=(2, 3), dtype=dtype)  # a layout alone: bytes only when a dtype is given
    assert (alone.dtype, alone.itemsize) == (name, t.element_size())
    assert repr(alone) == f"Explorer(shape=(2, 3), stride=(3, 1), offset=0, size=6, dtype={dtype})"
    assert (viewlab.explore(shape=(2, 3)).dtype, viewlab.explore(shape=(2, 3)).itemsize) == ("", 0)


@pytest.mark.parametrize("shape, stride", [([2, 2], [1]), ([2], [-1])])
def test_tensor_refuses_what_is_not_a_layout_before_torch_sees_it(shape, stride):
    ex = viewlab.explore(torch.arange(6))
    ex.shape, ex.stride = shape, stride
    with pytest.raises(ValueError, match=r"^Explorer\.tensor\(\): .* is not a layout: give one stride >= 0 per dim"):
        ex.tensor()


def test_tensor_needs_a_tensor():
    with pytest.raises(ValueError, match=r"^Explorer\.tensor\(\): this explorer was made from a layout"):
        viewlab.explore(shape=(2, 2)).tensor()


def test_the_widget_ships_the_module_and_syncs_the_layout():
    ex = viewlab.explore(torch.zeros(2, 3).t())
    from viewlab.explorer.bundle import module_files

    assert isinstance(ex, Explorer) and all(path.is_file() for path in module_files())
    assert "export default" in ex._esm and ex._esm == _js()
    state = ex.get_state()
    assert (state["shape"], state["stride"], state["offset"], state["size"]) == ([3, 2], [1, 3], 0, 6)


# --- explorer.js against torch, in chromium -------------------------------------------------------------

# Runs every case through the module's own functions and compares with torch's answer, in the page.
EVALUATE = """(cases) => {
  const X = window.vx, bad = [], counts = {};
  const run = (c) => {
    const L = {shape: c.shape, stride: c.stride, offset: c.offset};
    if (c.kind === "layout") {
      X.checkLayout(c.shape, c.stride, c.offset);
      const a = X.analyse(c.shape, c.stride, c.offset, c.size);
      return {in_bounds: a.inBounds, indices: a.indices, overlap: a.overlap, contiguous: a.contiguous};
    }
    if (c.kind === "view") {
      try { X.inferSize(c.new, X.numel(c.shape)); } catch (e) { return {error: true}; }
      let view = null;
      try { view = X.viewOrCopy(L, c.new, "view").stride; } catch (e) { view = null; }
      const r = X.viewOrCopy(L, c.new, "reshape");
      return {view, reshape: {kind: r.kind, stride: r.stride}};
    }
    const a = c.args;
    if (c.op === "contiguous") { const r = X.contiguous(L); return {kind: r.kind, shape: r.shape, stride: r.stride}; }
    if (c.op === "slice") return X.slice(L, a[0], a[1], a[2], a[3]);
    if (c.op === "transpose") return X.transpose(L, a[0], a[1]);
    if (c.op === "unfold") return X.unfold(L, a[0], a[1], a[2]);
    return X[c.op](L, a[0]);
  };
  const sorted = (k, x) => (x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort()) : x);
  const canon = (v) => JSON.stringify(v, sorted);
  for (const c of cases) {
    const key = c.kind === "op" ? `op:${c.op}` : c.kind;
    counts[key] = (counts[key] || 0) + 1;
    let got;
    try { got = run(c); } catch (e) { got = {error: true}; }
    const keep = Object.keys(c.expect);
    const picked = Object.fromEntries(keep.map((k) => [k, got[k]]));
    if (canon(picked) !== canon(c.expect)) bad.push({c, got});
  }
  return {n: cases.length, counts, mismatches: bad.length, first: bad.slice(0, 8).map((b) => JSON.stringify(b))};
}"""


def _evaluate(page, cases: list[dict]) -> dict:
    """:data:`EVALUATE` on ``cases`` in ``page``. The cases go over as one JSON text, parsed in the page: Playwright
    takes about a second to pass 3,250 cases as a structured argument, the text a few hundredths."""
    return page.evaluate(f"(text) => ({EVALUATE})(JSON.parse(text))", json.dumps(cases))


def _page_with_the_module(browser, requests: list[str], source: str | None = None):
    """A blank page whose one script is explorer.js as shipped (or ``source``), its exports put on window.vx."""
    page = browser.new_page()
    page.route("**/*", lambda route: (requests.append(route.request.url), route.abort()))
    exports = ", ".join(JS_NAMES)
    source = _js() if source is None else source
    html = f'<script type="module">\n{source}\nwindow.vx = {{{exports}}};\n</script>'
    page.set_content(html)
    page.wait_for_function("() => window.vx !== undefined", timeout=30_000)
    return page


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: `apt-get install -y chromium`)")
def test_the_modules_arithmetic_agrees_with_torch_in_chromium(chromium_args, capsys):
    from playwright.sync_api import sync_playwright

    cases = explorer_cases.all_cases()
    assert len(cases) >= 2000
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args)
        try:
            requests: list[str] = []
            page = _page_with_the_module(browser, requests)
            report = _evaluate(page, cases)
        finally:
            browser.close()
    with capsys.disabled():
        print(
            f"\nthe explorer bundle vs torch: {report['n']} cases, {report['mismatches']} mismatches; {report['counts']}"
        )
    assert report["n"] == len(cases)
    assert report["mismatches"] == 0, json.dumps(report["first"], indent=1)
    assert not requests, requests


# One slip each in torch's rules, as a port could make it: the cases must catch every one.
SLIPS = {
    "a size-1 dim no longer joins a chunk in computeStride": ("|| newShape[viewD] === 1)", ")"),
    "a slice forgets its start in the offset": ("offset: offset + a * stride[d]", "offset"),
    "is_contiguous checks size-1 dims too": (
        "if (shape[d] !== 1) {\n      if (stride[d] !== z)",
        "{\n      if (stride[d] !== z)",
    ),
    "expand keeps the stride of a stretched dim": ("size = target;\n      st = 0;", "size = target;"),
    "unsqueeze gives a new last dim stride 0": (
        "d >= n ? 1 : shape[d] * stride[d]",
        "d >= n ? 0 : shape[d] * stride[d]",
    ),
    "the storage needed forgets the offset": ("return offset + 1 + shape.reduce", "return 1 + shape.reduce"),
}


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: `apt-get install -y chromium`)")
def test_the_cases_catch_a_slip_in_each_rule(chromium_args):
    from playwright.sync_api import sync_playwright

    cases = explorer_cases.all_cases()
    source = _js()
    caught = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args)
        try:
            for slip, (old, new) in SLIPS.items():
                assert source.count(old) == 1, f"the slip {slip!r} no longer applies to the bundle"
                page = _page_with_the_module(browser, [], source.replace(old, new))
                caught[slip] = _evaluate(page, cases)["mismatches"]
                page.close()
        finally:
            browser.close()
    assert all(n > 0 for n in caught.values()), caught
