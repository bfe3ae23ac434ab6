"""The stride explorer in the book, with no kernel: the same ES module as ``viewlab.explore``, inlined.

Browsers refuse module imports from ``file://`` and the book loads nothing from other hosts, so each
page that has an explorer carries the explorer's modules (src/viewlab/explorer/*.js, joined into one module
by src/viewlab/explorer/bundle.py) inline, in one ``<script type="module">``, followed by a small stand-in for anywidget's model (``get``/``set``/``on``/``off``/``save_changes``).
Every ``<div class="viewlab-explorer">`` on the page is rendered with it, its starting layout read from its
``data-`` attributes. Explorers come from two places:

1. the ``viewlab-explorer`` directive in the book's own pages (options: shape, stride, offset, size, and dtype,
   int64 unless given: torch.arange's, which the book's examples use; the strides are also shown in bytes);
2. a notebook output of ``viewlab.explore(...)``: its stored text is the layout
   (``Explorer(shape=(3, 4), stride=(4, 1), offset=0, size=12, dtype=torch.int64, values=['10', ...])``), which
   replaces the widget view (a widget view needs a kernel, and saved widget state would load its code from a CDN).
"""

from __future__ import annotations

import ast
import html
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

CLASS = "viewlab-explorer"
REPR = re.compile(
    r"^Explorer\(shape=(\([\d, ]*\)), stride=(\([\d, ]*\)), offset=(\d+), size=(\d+)"
    r"(?:, dtype=torch\.(\w+))?(?:, values=(\[.*\]))?\)$",
    re.DOTALL,
)
DEFAULT_DTYPE = "int64"  # the directive's: torch.arange makes int64, and the book's examples are aranges

# anywidget's model, as far as the explorer bundle uses it, over a plain object; change:<key> fires on set.
STAND_IN = """
for (const node of document.querySelectorAll("div.viewlab-explorer")) {
  const data = {};
  const unset = { offset: "0", size: "0", dtype: '""', itemsize: "0" };
  for (const key of ["shape", "stride", "offset", "size", "values", "dtype", "itemsize"]) {
    data[key] = JSON.parse(node.dataset[key] ?? unset[key] ?? "[]");
  }
  const handlers = new Map();
  const model = {
    get: (key) => data[key],
    set: (key, value) => { data[key] = value; for (const f of handlers.get(`change:${key}`) || []) f(); },
    on: (event, f) => handlers.set(event, [...(handlers.get(event) || []), f]),
    off: (event, f) => handlers.set(event, (handlers.get(event) || []).filter((g) => g !== f)),
    save_changes: () => {},
  };
  render({ model, el: node });
}
"""


def module_source() -> str:
    """The explorer's bundle as the package ships it to anywidget (its bundle.py loaded by path: no anywidget)."""
    spec = importlib.util.find_spec("viewlab")
    assert spec and spec.origin, "viewlab is not importable: install the course (make book does)"
    path = Path(spec.origin).parent / "explorer" / "bundle.py"
    loader_spec = importlib.util.spec_from_file_location("_viewlab_explorer_bundle", path)
    assert loader_spec and loader_spec.loader, f"cannot load {path}"
    module = importlib.util.module_from_spec(loader_spec)
    loader_spec.loader.exec_module(module)
    return module.bundle()


def itemsize_of(dtype: str) -> int:
    """Bytes per element of the torch dtype named ``dtype`` ("int64" -> 8); ValueError naming it if torch has none."""
    import torch

    kind = getattr(torch, dtype, None)
    if not isinstance(kind, torch.dtype):
        raise ValueError(f"viewlab-explorer: dtype {dtype!r} is not a torch dtype; write one like int64 or float32")
    return torch.empty((), dtype=kind, device="meta").element_size()


def explorer_div(
    shape: list[int], stride: list[int], offset: int, size: int, values: list[str] | None = None, dtype: str = ""
) -> str:
    """The placeholder the inline module renders into (``values``: the storage's values as text, if known;
    ``dtype``: the torch dtype's name, for the strides in bytes, if known)."""
    attrs: dict[str, Any] = {"shape": list(shape), "stride": list(stride), "offset": int(offset), "size": int(size)}
    if values:
        attrs["values"] = [str(v) for v in values]
    if dtype:
        attrs["dtype"], attrs["itemsize"] = dtype, itemsize_of(dtype)
    data = " ".join(f'data-{k}="{html.escape(json.dumps(v))}"' for k, v in attrs.items())
    return f'<div class="{CLASS}" {data}></div>'


def layout_from_repr(text: str) -> dict[str, Any] | None:
    """The layout in an explorer's stored text output, or None when the text is something else."""
    match = REPR.match(text.strip())
    if not match:
        return None
    shape, stride = (list(ast.literal_eval(g)) for g in match.groups()[:2])
    layout = {"shape": shape, "stride": stride, "offset": int(match[3]), "size": int(match[4])}
    if match[5]:
        layout["dtype"] = match[5]
    if match[6]:
        layout["values"] = [str(v) for v in ast.literal_eval(match[6])]
    return layout


def _ints(text: str) -> list[int]:
    return [int(p) for p in re.split(r"[\s,]+", text.strip(" ()[]")) if p]


class ExplorerDirective(SphinxDirective):
    """``{viewlab-explorer}`` with ``:shape: 3, 4`` and optionally ``:stride:``, ``:offset:``, ``:size:``, ``:dtype:``."""

    option_spec = {
        "shape": _ints,
        "stride": _ints,
        "offset": directives.nonnegative_int,
        "size": int,
        "dtype": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        shape = self.options.get("shape", [2, 3])
        stride = self.options.get("stride")
        if stride is None:  # contiguous, as torch makes them
            stride, z = [], 1
            for n in reversed(shape):
                stride.insert(0, z)
                z *= max(n, 1)
        offset = self.options.get("offset", 0)
        needed = 0 if 0 in shape else offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))
        size = self.options.get("size", needed)
        dtype = self.options.get("dtype", DEFAULT_DTYPE).strip().removeprefix("torch.")
        try:
            div = explorer_div(shape, stride, offset, size, dtype=dtype)
        except ValueError as exc:
            raise self.error(str(exc)) from None
        return [nodes.raw("", div, format="html")]


def _patch_widget_views() -> None:
    """A stored ``viewlab.explore`` output becomes an explorer; every other widget view renders as before."""
    from myst_nb.core.render import NbElementRenderer

    original = NbElementRenderer.render_widget_view
    if getattr(original, "_viewlab_explorer", False):
        return

    def render_widget_view(self: Any, data: Any) -> list[nodes.Element]:
        _, outputs = self.renderer.nb_client.code_cell_outputs(data.cell_index)
        text = outputs[data.output_index].get("data", {}).get("text/plain", "")
        layout = layout_from_repr("".join(text) if isinstance(text, list) else text)
        if layout is None:
            return original(self, data)
        return [nodes.raw("", explorer_div(**layout), format="html")]

    render_widget_view._viewlab_explorer = True  # type: ignore[attr-defined]
    NbElementRenderer.render_widget_view = render_widget_view


def _inline_the_module(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    if f'class="{CLASS}"' in context.get("body", ""):
        app.add_js_file(None, body=module_source() + STAND_IN, type="module")


def setup(app: Sphinx) -> dict[str, Any]:
    _patch_widget_views()
    app.add_directive("viewlab-explorer", ExplorerDirective)
    app.connect("html-page-context", _inline_the_module)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
