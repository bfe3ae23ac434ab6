"""The Jupyter Book: configuration that cannot drift, pages that exist, figures fit for dark mode.

Static checks run in every ``pytest tests``. Checks of the built site need ``make book`` first;
``make test-book`` builds it and sets VIEWLAB_BOOK_HTML, otherwise they are skipped with a reason.
"""

from __future__ import annotations

import ast
import base64
import io
import os
import re
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

from tests.conftest import ROOT
from tools import colab_stamp

BOOK = ROOT / "book"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONFIG = yaml.safe_load((BOOK / "_config.yml").read_text())
TOC = yaml.safe_load((BOOK / "_toc.yml").read_text())
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The version is written once, as viewlab.__version__ (pyproject.toml declares it dynamic and reads it there).
# Read as setuptools reads it: the literal assigned in src/viewlab/__init__.py, without importing.
VERSION = next(
    node.value.value
    for node in ast.parse((ROOT / "src" / "viewlab" / "__init__.py").read_text(encoding="utf-8")).body
    if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
)
SITE = os.environ.get("VIEWLAB_BOOK_HTML")
needs_site = pytest.mark.skipif(
    not SITE, reason="needs the built book: `make test-book` builds it and sets VIEWLAB_BOOK_HTML"
)


def _toc_entries(node) -> list[dict]:
    """Every file/glob entry of the toc, depth first."""
    found = []
    if isinstance(node, dict):
        if "file" in node or "glob" in node:
            found.append(node)
        for value in node.values():
            found += _toc_entries(value)
    elif isinstance(node, list):
        for item in node:
            found += _toc_entries(item)
    return found


# --- configuration ----------------------------------------------------------------------------------


def test_jupyter_book_1x_is_what_pyproject_asks_for():
    book_extra = PROJECT["optional-dependencies"]["book"]
    assert any(re.fullmatch(r"jupyter-book>=1,<2", r.replace(" ", "")) for r in book_extra), (
        "pin jupyter-book>=1,<2: 2.x downloads its theme at build time and fails offline"
    )
    jupyter_book = pytest.importorskip(
        "jupyter_book", reason="the book extra is not installed (make test-book installs it)"
    )
    assert jupyter_book.__version__.startswith("1."), jupyter_book.__version__


def test_every_notebook_is_in_the_toc():
    patterns = [e.get("file") or e.get("glob") for e in _toc_entries(TOC)]
    for path in NOTEBOOKS:
        doc = f"notebooks/{path.stem}"
        assert any(re.fullmatch(p.replace("*", "[^/]*"), doc) for p in patterns), (
            f"{path.name} is not in book/_toc.yml; keep the `- glob: notebooks/*` entry under 'The course'"
        )


def test_toc_files_exist_and_no_notebook_is_copied_into_book():
    for entry in _toc_entries(TOC):
        if "file" in entry:
            stem = ROOT / entry["file"]
            assert any(stem.with_suffix(s).is_file() for s in (".md", ".ipynb", ".rst")), (
                f"toc entry {entry['file']} has no file"
            )
    assert (ROOT / f"{TOC['root']}.md").is_file()
    copies = [p for p in BOOK.rglob("*.ipynb") if "_build" not in p.relative_to(BOOK).parts]
    assert not copies, f"notebooks/ is the only source of notebooks; remove copies {copies}"


def test_book_uses_stored_outputs():
    assert CONFIG["execute"]["execute_notebooks"] == "off"


def test_repository_url_in_book_is_the_one_in_pyproject():
    assert CONFIG["repository"]["url"] == colab_stamp.repository_url(), (
        "book/_config.yml repository.url must equal [project.urls] Repository in pyproject.toml"
    )
    assert CONFIG["repository"]["branch"] == colab_stamp.DEFAULT_BRANCH
    assert CONFIG["repository"]["path_to_book"] == "", "the book's source folder is the repository root"


def test_binder_and_colab_launch_buttons_are_configured():
    launch = CONFIG["launch_buttons"]
    assert launch["binderhub_url"] == "https://mybinder.org"
    assert launch["colab_url"] == "https://colab.research.google.com"
    env = yaml.safe_load((ROOT / "environment.yml").read_text())  # what Binder builds
    assert "-e ." in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def test_no_cdn_for_widgets_or_math():
    sphinx = CONFIG["sphinx"]
    assert sphinx["config"]["nb_ipywidgets_js"] == {}, "widgets' JS would come from a CDN"
    assert "sphinx-mathjax-offline" in sphinx["extra_extensions"], "MathJax would come from a CDN"


def test_make_book_is_strict_and_offline():
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    line = next(row for row in text.splitlines() if "jupyter-book build" in row)
    assert " -W" in line and "--config book/_config.yml" in line and "--toc book/_toc.yml" in line
    assert "test-book:" in text and "VIEWLAB_BOOK_HTML" in text


def test_glossary_defines_the_course_words():
    text = (BOOK / "glossary.md").read_text()
    block = text.split("```{glossary}", 1)[1].split("```", 1)[0]
    terms = {line.strip() for line in block.splitlines() if line and not line.startswith(" ")}
    for word in [
        "storage",
        "stride",
        "storage offset",
        "view",
        "copy",
        "contiguous",
        "broadcast",
        "expand",
        "materialise",
    ]:
        assert word in terms, f"glossary lacks {word!r}"


def test_book_pages_link_the_repository_from_pyproject():
    url = colab_stamp.repository_url()
    for page in BOOK.glob("*.md"):
        for found in re.findall(r"https://github\.com/[\w.-]+/[\w.-]+", page.read_text()):
            assert found == url, f"{page.name} links {found}; the repository is {url} ([project.urls] Repository)"


def test_book_pages_never_read_the_source_articles():
    for page in BOOK.rglob("*.md"):
        assert "../shared" not in page.read_text() and "shared/seeds" not in page.read_text(), page


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_opaque_so_dark_mode_cannot_hide_them(path):
    from PIL import Image

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if not png:
                continue
            image = Image.open(io.BytesIO(base64.b64decode(png)))
            if image.mode in ("RGBA", "LA") or "transparency" in image.info:
                alpha_min = image.convert("RGBA").getchannel("A").getextrema()[0]
                assert alpha_min == 255, (
                    f"{path.name}: a figure has transparent pixels (alpha {alpha_min}), unreadable on a dark page; "
                    f"save it with an opaque facecolor (viewlab.show_figure does):\n{cell.source[:200]}"
                )


# --- the book's Sphinx extension (book/_ext/viewlab_book.py) ------------------------------------------


def _extension():
    pytest.importorskip("sphinx", reason="the book extra is not installed (make test-book installs it)")
    sys.path.insert(0, str(BOOK / "_ext"))
    import viewlab_book

    return viewlab_book


def test_verified_text_names_torch_and_device():
    ext = _extension()
    assert ext.verified_text({"torch_version": "2.13.0", "device": "cpu", "cuda": False}).startswith(
        "Verified with torch 2.13.0 on CPU:"
    )
    assert ext.verified_text({"torch_version": "2.13.0", "device": "NVIDIA H200", "cuda": True}).startswith(
        "Verified with torch 2.13.0 on CUDA (NVIDIA H200):"
    )


def test_duplicate_inline_scripts_are_dropped_whatever_their_empty_filename():
    ext = _extension()
    from sphinx.builders.html._assets import _JavaScript

    scripts = [
        _JavaScript("_static/a.js"),
        _JavaScript(None, body="const X = 1"),
        _JavaScript("", body="const X = 1"),
        _JavaScript("", body="const Y = 2"),
        _JavaScript("_static/a.js"),
    ]
    context = {"script_files": scripts}
    ext._drop_duplicate_scripts(None, "page", "page.html", context, None)
    assert [(js.filename or "", js.attributes.get("body")) for js in context["script_files"]] == [
        ("_static/a.js", None),
        ("", "const X = 1"),
        ("", "const Y = 2"),
    ]


# --- citation and changelog -------------------------------------------------------------------------


def test_citation_cff_matches_pyproject():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    assert cff["version"] == VERSION
    assert cff["repository-code"] == colab_stamp.repository_url()
    assert cff["title"] and cff["authors"] and cff["message"]
    assert cff["license"] == ["MIT", "CC-BY-4.0"]


def test_changelog_has_an_entry_for_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[?{re.escape(VERSION)}\]?", text, re.MULTILINE), (
        f"CHANGELOG.md needs a '## {VERSION}' section"
    )


# --- the built site ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site() -> Path:
    path = (ROOT / SITE).resolve()
    assert (path / "index.html").is_file(), f"no built book at {path}; run `make book`"
    return path


@needs_site
def test_every_notebook_has_a_page_with_launch_links(site):
    url = colab_stamp.repository_url()
    owner_repo = url.removeprefix("https://github.com/")
    for path in NOTEBOOKS:
        page = site / "notebooks" / f"{path.stem}.html"
        assert page.is_file(), f"no page for {path.name}"
        html = page.read_text()
        assert f"https://mybinder.org/v2/gh/{owner_repo}/main?urlpath=lab/tree/notebooks/{path.name}" in html
        assert colab_stamp.colab_url(url, path.name) in html


@needs_site
def test_every_notebook_page_says_what_it_was_verified_with(site):
    for path in NOTEBOOKS:
        stamp = nbformat.read(path, as_version=4).metadata.get("viewlab")
        assert stamp, f"{path.name}: no execution stamp in its metadata; run `make notebooks`"
        html = (site / "notebooks" / f"{path.stem}.html").read_text()
        device = f"CUDA ({stamp['device']})" if stamp["cuda"] else "CPU"
        assert f"Verified with torch {stamp['torch_version']} on {device}" in html, path.name


@needs_site
def test_every_public_viewlab_name_has_a_reference_page(site):
    import viewlab

    missing = [n for n in viewlab.__all__ if not (site / "book" / "api" / f"viewlab.{n}.html").is_file()]
    assert not missing, f"no reference page for {missing}"
    # and no page for anything else: the reference lists exactly the public names
    pages = {p.name[len("viewlab.") : -len(".html")] for p in (site / "book" / "api").glob("viewlab.*.html")}
    extra = sorted(n for n in pages if "." not in n and n not in viewlab.__all__)
    assert not extra, f"reference pages for names outside viewlab.__all__: {extra}"
    for name in viewlab.__all__:
        obj = getattr(viewlab, name)
        doc = (getattr(obj, "__doc__", None) or "").strip()
        if callable(obj) and doc:
            words = re.findall(r"[A-Za-z]{5,}", doc.splitlines()[0])[:4]
            html = re.sub(r"<[^>]+>", "", (site / "book" / "api" / f"viewlab.{name}.html").read_text())
            assert all(w in html for w in words), f"viewlab.{name}: its docstring ({words}) is not on its page"


@needs_site
def test_site_loads_nothing_from_other_hosts(site):
    pattern = re.compile(
        r"""<(?:script|img|link|iframe)\b[^>]*\b(?:src|href)=["'](https?:)?//([^/"']+)""", re.IGNORECASE
    )
    offenders = {}
    for page in site.rglob("*.html"):
        for match in pattern.finditer(page.read_text(errors="replace")):
            tag = match.group(0)
            if tag.lower().startswith("<link") and 'rel="stylesheet"' not in tag and "preload" not in tag:
                continue  # canonical/alternate links are not loaded
            offenders.setdefault(match.group(2), []).append(page.relative_to(site).as_posix())
    assert not offenders, {host: pages[:3] for host, pages in offenders.items()}
