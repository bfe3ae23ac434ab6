"""Sphinx glue for the viewlab book (loaded through ``sphinx.local_extensions`` in book/_config.yml).

1. Figures keep their alt text. Notebook figures come from ``viewlab.show_figure``, which stores the
   alt text in the output's metadata (``{"image/png": {"alt": ...}}``); MyST-NB only copies width and
   height from there, so without this every <img> would get its file name as alt text. A notebook
   figure that has no alt text at all is reported as a warning, which fails the strict build.
2. No page loads an image from another host, and the notebooks load none either: the Colab badge that
   tools/colab_stamp.py puts in each notebook is a text link "Open in Colab" (so JupyterLab offline
   fetches nothing); in the book the link shows the local badge image from book/_static, and stays a
   launch link. An older stamp's image of Colab's own SVG is swapped for the same local copy.
3. Each notebook page says what it was verified with, right under its title: the torch version and
   device that tools/execute_notebooks.py stores in the notebook's metadata (``"viewlab"``) when it
   executes it. A notebook without that stamp was not executed by the executor: the build warns,
   which fails the strict build ("run make notebooks").
4. No script is included twice: sphinx-thebe 0.3 adds its inline configuration script twice, so every
   page threw "Identifier 'THEBE_JS_URL' has already been declared" (found by the browser check).
5. MathJax is served by the site (sphinx-mathjax-offline copies all of MathJax 3, 24 MB). The pages
   load only ``tex-chtml.js``, which fetches its fonts and TeX extensions from the folders next to
   it; the other ready-made bundles (SVG output, MathML input, speech) are never loaded and are
   removed from the output. The browser check proves formulas still render with no failed request.
6. No empty header band with a second search field: pydata-sphinx-theme (0.16 and later) fills its top navbar
   (``#pst-header``) with a search button whenever ``navbar_persistent`` is not set, and sphinx-book-theme
   leaves every other navbar slot empty, so each page began with a 64 px band holding only a duplicate of the
   sidebar's search. The option is set to nothing here (book/_config.yml cannot: an ``html_theme_options``
   there would replace the launch and repository buttons Jupyter Book derives), so the header renders empty
   and takes no height. The sidebar's search field and the article header's search icon (narrow screens) stay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

REMOTE_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL_BADGE = "/book/_static/colab-badge.svg"  # a leading "/" means: relative to the source folder
COLAB_NOTEBOOK = "https://colab.research.google.com/github/"
BADGE_TEXT = "Open in Colab"  # tools/colab_stamp.py's BADGE_TEXT


def _badge_image() -> nodes.image:
    return nodes.image(uri=LOCAL_BADGE, alt=BADGE_TEXT, candidates={"*": LOCAL_BADGE})


class LocalColabBadge(SphinxTransform):
    """Show the notebooks' "Open in Colab" link as the badge image shipped with the book."""

    default_priority = 100  # before Sphinx collects images (on doctree-read)

    def apply(self, **kwargs: Any) -> None:
        for ref in list(self.document.findall(nodes.reference)):
            if ref.get("refuri", "").startswith(COLAB_NOTEBOOK) and ref.astext().strip() == BADGE_TEXT:
                ref.children = []
                ref += _badge_image()
        for image in self.document.findall(nodes.image):
            if image.get("uri") == REMOTE_BADGE:
                image["uri"] = LOCAL_BADGE
                image["candidates"] = {"*": LOCAL_BADGE}


def verified_text(stamp: dict[str, Any]) -> str:
    """The sentence shown under a notebook page's title, from the executor's metadata stamp."""
    device = f"CUDA ({stamp['device']})" if stamp.get("cuda") else "CPU"
    return (
        f"Verified with torch {stamp['torch_version']} on {device}: every output on this page was produced "
        "by executing the notebook, and CI re-runs it and compares its stored outputs (timings and "
        "GPU-only cells excepted)."
    )


class VerifiedWith(SphinxTransform):
    """Insert the "Verified with torch X on DEVICE" note under the title of every notebook page."""

    default_priority = 110

    def apply(self, **kwargs: Any) -> None:
        source = Path(self.document["source"])
        if source.suffix != ".ipynb":
            return
        stamp = json.loads(source.read_text(encoding="utf-8")).get("metadata", {}).get("viewlab")
        if not stamp or "torch_version" not in stamp:
            logger.warning(
                "notebook has no execution stamp (metadata 'viewlab'); execute it with "
                "tools/execute_notebooks.py (make notebooks) before building the book",
                location=self.env.docname,
            )
            return
        section = next(iter(self.document.findall(nodes.section)), None)
        if section is None or not section.children or not isinstance(section[0], nodes.title):
            return
        note = nodes.paragraph("", "", nodes.Text(verified_text(stamp)), classes=["viewlab-verified"])
        section.insert(1, note)


def _alt_from_output(data: Any) -> str | None:
    meta = data.output_metadata or {}
    alt = (meta.get(data.mime_type) or {}).get("alt") or meta.get("alt")
    return str(alt).strip() or None if alt else None


def _patch_myst_nb_images() -> None:
    from myst_nb.core.render import NbElementRenderer

    original = NbElementRenderer.render_image
    if getattr(original, "_viewlab_alt", False):
        return

    def render_image(self: Any, data: Any) -> list[nodes.Element]:
        result = original(self, data)
        alt = _alt_from_output(data)
        for node in result:
            if isinstance(node, nodes.image) and not node.get("alt"):
                if alt:
                    node["alt"] = alt
                else:
                    self.logger.warning(
                        "figure output without alt text; display it with viewlab.show_figure(fig, alt='...')",
                        subtype="image",
                        line=data.line,
                    )
        return result

    render_image._viewlab_alt = True  # type: ignore[attr-defined]
    NbElementRenderer.render_image = render_image


def _drop_duplicate_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # An inline script has filename None or "" depending on who added it; both mean "no file".
        filename = getattr(js, "filename", js) or ""
        key = (str(filename), tuple(sorted((getattr(js, "attributes", None) or {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


# MathJax's other combined bundles: each is a complete alternative to tex-chtml.js, never loaded by it.
UNUSED_MATHJAX_BUNDLES = (
    "mml-chtml.js",
    "mml-svg.js",
    "tex-mml-chtml.js",
    "tex-mml-svg.js",
    "tex-svg.js",
    "tex-svg-full.js",
    "tex-chtml-full.js",
    "tex-chtml-full-speech.js",
    "node-main.js",
)


def _prune_mathjax(app: Sphinx, exc: Exception | None) -> None:
    mathjax = Path(app.outdir) / "_static" / "mathjax"
    if exc is not None or app.builder.format != "html" or not (mathjax / "tex-chtml.js").is_file():
        return
    if Path(app.config.mathjax_path).name != "tex-chtml.js":
        return  # someone chose another bundle: keep everything
    for name in UNUSED_MATHJAX_BUNDLES:
        (mathjax / name).unlink(missing_ok=True)


def _no_navbar_search(app: Sphinx, config: Any) -> None:
    options = dict(config.html_theme_options or {})
    options.setdefault("navbar_persistent", [])
    config.html_theme_options = options


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", _no_navbar_search)
    _patch_myst_nb_images()
    app.add_transform(LocalColabBadge)
    app.add_transform(VerifiedWith)
    app.add_css_file("viewlab.css")
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    app.connect("build-finished", _prune_mathjax, priority=900)  # after sphinx-mathjax-offline copies
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
