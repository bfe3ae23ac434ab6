"""Every repository path a notebook names, in its markdown or its code, exists.

A learner who reads "the tests in tests/unit/test_viewops.py" opens that file; a path that moved leaves them
with nothing. Checked: tokens that look like a file path (a name with a ``/`` and a file extension, or a path
under one of the repository's top-level folders), markdown link targets that are no URL, and the repository
path in the notebook's own Colab badge (``.../blob/main/<path>``). A path resolves against the repository
root, or against ``notebooks/`` (where a relative link in a notebook points from).
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TOP = ("src", "tests", "tools", "book", "benchmarks", "notebooks", ".ci", ".github")
EXTENSIONS = ("py", "md", "ipynb", "toml", "yml", "yaml", "js", "txt", "cfg", "json", "csv", "png", "css")

_FILE = re.compile(
    r"(?<![\w/.:-])((?:\.\./|\./)?[\w.-]+(?:/[\w.-]+)+\.(?:" + "|".join(EXTENSIONS) + r"))(?![\w/])"
    r"|(?<![\w/.:-])((?:" + "|".join(re.escape(t) for t in TOP) + r")/[\w./-]*)"
)
_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+")
_BLOB = re.compile(r"(?:github\.com|/github)/[\w.-]+/[\w.-]+/blob/[\w.-]+/([\w./-]+)")
_LINK = re.compile(r"\]\(\s*([^)\s#]+)")
_BARE_NOTEBOOK = re.compile(r"(?<![\w/.-])(\d\d_[\w-]+\.ipynb)")


def named_paths(nb) -> set[str]:
    """The repository paths a notebook names in its sources (outputs are not read: they name the executor's
    files, which the stored-output lint checks)."""
    found: set[str] = set()
    for cell in nb.cells:
        text = cell.source
        for url in _URL.findall(text):
            found.update(m.group(1) for m in _BLOB.finditer(url))
        local = _URL.sub(" ", text)
        for m in _FILE.finditer(local):
            found.add((m.group(1) or m.group(2)).rstrip("./"))
        if cell.cell_type == "markdown":
            for target in _LINK.findall(text):
                if not re.match(r"[a-z][a-z0-9+.-]*:", target):
                    found.add(target)
            found.update(_BARE_NOTEBOOK.findall(local))
    return {p for p in found if p}


def _exists(path: str) -> bool:
    return any((base / path).exists() for base in (ROOT, ROOT / "notebooks"))


CASES = [
    pytest.param(nb_path.name, path, id=f"{nb_path.name[:2]}:{path}")
    for nb_path in NOTEBOOKS
    for path in sorted(named_paths(nbformat.read(nb_path, as_version=4)))
]


@pytest.mark.parametrize(("notebook", "path"), CASES)
def test_every_path_a_notebook_names_exists(notebook, path):
    assert _exists(path), f"notebooks/{notebook} names {path!r}, which is not in the repository"


def test_the_path_finder_finds_what_a_notebook_writes():
    cell = nbformat.v4.new_markdown_cell(
        "See [the style](STYLE.md), `tests/unit/test_viewops.py::test_x`, src/viewlab/explorer/ and "
        "[Colab](https://colab.research.google.com/github/o/r/blob/main/notebooks/01_views_and_copies.ipynb); "
        "notebook 07 is 07_the_two_articles.ipynb; not https://docs.python.org/3/library/os.path.html."
    )
    code = nbformat.v4.new_code_cell("run('tools/colab_stamp.py')  # and a/b.py")
    nb = nbformat.v4.new_notebook(cells=[cell, code])
    assert named_paths(nb) == {
        "STYLE.md",
        "tests/unit/test_viewops.py",
        "src/viewlab/explorer",
        "notebooks/01_views_and_copies.ipynb",
        "07_the_two_articles.ipynb",
        "tools/colab_stamp.py",
        "a/b.py",
    }
    assert not _exists("a/b.py") and _exists("STYLE.md") and _exists("src/viewlab/explorer")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_names_its_own_path_in_its_badge(path):
    """A sanity check that the finder reads every notebook: each names at least its own Colab path."""
    assert f"notebooks/{path.name}" in named_paths(nbformat.read(path, as_version=4))
