"""The Colab badge and setup cell: derived from one URL, harmless off Colab, present in every notebook."""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import re
import subprocess
import sys
import tomllib

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.conftest import ROOT
from tests.notebooks import nbval_probe
from tools import colab_stamp

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
URL = colab_stamp.repository_url()
STAMP_COMMAND = "make stamp && make notebooks"


def _toy(title: str = "# 09 · A toy\n\n**Learning objectives.** none, it is a toy.") -> nbformat.NotebookNode:
    nb = new_notebook(
        cells=[
            new_markdown_cell(title),
            new_markdown_cell("More words before any code."),
            new_code_cell("import torch\n_ = torch.manual_seed(0)\nprint(torch.arange(3).stride())"),
            new_markdown_cell("## Next"),
            new_code_cell("print(2 + 2)"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


# --- the URL, in one place -------------------------------------------------------------------------


def test_url_comes_from_pyproject_repository():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert URL == project["urls"]["Repository"].rstrip("/")
    assert URL.startswith("https://github.com/")


@pytest.mark.parametrize("bad", ["https://gitlab.com/a/b", "github.com/a/b", "https://github.com/onlyowner"])
def test_non_github_repository_is_refused_with_the_fix(tmp_path, bad):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f'[project]\nname = "x"\n[project.urls]\nRepository = "{bad}"\n')
    with pytest.raises(ValueError, match=r"https://github.com/OWNER/REPO"):
        colab_stamp.repository_url(pyproject)


def test_missing_repository_url_says_where_to_put_it(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    with pytest.raises(ValueError, match=r"\[project.urls\] Repository"):
        colab_stamp.repository_url(pyproject)


def test_colab_url_points_at_the_notebook_in_the_repository():
    url = colab_stamp.colab_url("https://github.com/o/r", "01_x.ipynb", branch="dev")
    assert url == "https://colab.research.google.com/github/o/r/blob/dev/notebooks/01_x.ipynb"
    with pytest.raises(ValueError, match="notebook file name"):
        colab_stamp.colab_url("https://github.com/o/r", "notebooks/01_x.ipynb")


# --- stamping ---------------------------------------------------------------------------------------


def test_stamp_puts_badge_under_title_and_setup_before_first_code():
    nb = _toy()
    assert colab_stamp.stamp(nb, "09_toy.ipynb", URL)
    title = nb.cells[0].source.split("\n")
    assert title[0] == "# 09 · A toy" and title[1] == ""
    assert title[2] == colab_stamp.badge_markdown(URL, "09_toy.ipynb")
    assert "objectives" in nb.cells[0].source  # the rest of the title cell is kept
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["markdown", "markdown", "code", "code", "markdown", "code"]
    setup = nb.cells[2]
    assert setup.source == colab_stamp.setup_source(URL)
    assert setup.metadata["tags"] == colab_stamp.SETUP_TAGS
    assert colab_stamp.problems(nb, "09_toy.ipynb", URL) == []


def test_badge_is_a_text_link_that_downloads_nothing():
    badge = colab_stamp.badge_markdown(URL, "09_toy.ipynb")
    assert badge == f"[Open in Colab]({colab_stamp.colab_url(URL, '09_toy.ipynb')})"
    assert not _remote_images(badge)


def test_restamping_an_image_badge_changes_only_the_title_line():
    """An older stamp (Colab's badge image) becomes the text link; the executed setup cell keeps its output."""
    nb = _toy()
    colab_stamp.stamp(nb, "09_toy.ipynb", URL)
    setup = next(c for c in nb.cells if colab_stamp.SETUP_TAG in c.metadata.get("tags", []))
    setup.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Verified with torch 2.13.0+cpu on CPU\n")]
    setup.execution_count = 1
    old = f"[![Open In Colab]({colab_stamp.BADGE_IMAGE})]({colab_stamp.colab_url(URL, '09_toy.ipynb')})"
    nb.cells[0].source = nb.cells[0].source.replace(colab_stamp.badge_markdown(URL, "09_toy.ipynb"), old)
    assert _remote_images(nb.cells[0].source) == [colab_stamp.BADGE_IMAGE]
    before = copy.deepcopy(nb)
    assert colab_stamp.stamp(nb, "09_toy.ipynb", URL)
    assert colab_stamp.problems(nb, "09_toy.ipynb", URL) == []
    assert not _remote_images(nb.cells[0].source)
    assert nb.cells[1:] == before.cells[1:]  # the setup cell, its output and execution count untouched
    assert colab_stamp.verified_with(nb) == {"torch": "2.13.0+cpu", "device": "CPU"}


def test_stamp_is_idempotent():
    nb = _toy()
    colab_stamp.stamp(nb, "09_toy.ipynb", URL)
    again = copy.deepcopy(nb)
    assert colab_stamp.stamp(again, "09_toy.ipynb", URL) is False
    assert again == nb


def test_restamping_replaces_a_stale_url_instead_of_adding_a_second_badge():
    nb = _toy()
    colab_stamp.stamp(nb, "09_toy.ipynb", "https://github.com/old/place")
    assert colab_stamp.problems(nb, "09_toy.ipynb", URL)  # the old stamp disagrees with pyproject
    assert colab_stamp.stamp(nb, "09_toy.ipynb", URL)
    assert colab_stamp.problems(nb, "09_toy.ipynb", URL) == []
    text = nbformat.writes(nb)
    assert "old/place" not in text
    assert sum("colab-setup" in c.metadata.get("tags", []) for c in nb.cells) == 1


def test_problems_name_what_is_wrong():
    nb = _toy()
    found = colab_stamp.problems(nb, "09_toy.ipynb", URL)
    assert any("badge line" in p for p in found) and any("'colab-setup'" in p for p in found)
    colab_stamp.stamp(nb, "09_toy.ipynb", URL)
    nb.cells[2].source += "\nprint('edited by hand')"
    assert any("differs from the one generated" in p for p in colab_stamp.problems(nb, "09_toy.ipynb", URL))


def test_notebook_without_title_is_refused():
    nb = _toy(title="no title here")
    with pytest.raises(ValueError, match="'# ' title"):
        colab_stamp.stamp(nb, "09_toy.ipynb", URL)


# --- the setup cell ---------------------------------------------------------------------------------

_BLOCK_SUBPROCESS = """
import sys, types
calls = []
def hook(event, args):
    if event == "subprocess.Popen":
        calls.append(list(args[1]))
        raise RuntimeError("blocked by the test: no process may start here")
sys.addaudithook(hook)
{fake_colab}
try:
    exec(compile(SOURCE, "setup-cell", "exec"))
except RuntimeError as exc:
    print("RAISED", exc)
print("CALLS", calls)
"""


def _run_setup(fake_colab: bool) -> str:
    fake = 'sys.modules["google.colab"] = types.ModuleType("google.colab")' if fake_colab else ""
    program = f"SOURCE = {colab_stamp.setup_source(URL)!r}\n" + _BLOCK_SUBPROCESS.format(fake_colab=fake)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_setup_cell_outside_colab_installs_nothing_and_reports_versions():
    out = _run_setup(fake_colab=False)
    assert "CALLS []" in out and "RAISED" not in out
    match = colab_stamp.VERIFIED_LINE.search(out)
    assert match, out
    assert match["torch"] == torch.__version__
    assert match["device"] == ("CPU" if not torch.cuda.is_available() else match["device"])


def test_setup_cell_on_colab_pip_installs_viewlab_from_the_repository():
    # Colab itself cannot run here, so only its marker module is faked; the process start is
    # intercepted (audit hook) so that nothing is installed, and what would have run is checked.
    out = _run_setup(fake_colab=True)
    assert "RAISED blocked by the test" in out
    calls = ast.literal_eval(out.split("CALLS ", 1)[1].strip())
    assert len(calls) == 1
    assert calls[0][1:] == ["-m", "pip", "install", "--quiet", f"viewlab[course] @ git+{URL}"]


def test_nothing_is_pinned_exactly_for_colab():
    source = colab_stamp.setup_source(URL)
    assert "==" not in source
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project["dependencies"]:
        name = re.split(r"[<>=!~ \[;]", req, maxsplit=1)[0].lower()
        if name in {"torch", "numpy", "pandas"}:
            assert "==" not in req and "<" not in req, f"{req}: Colab brings its own {name}; keep a lower bound only"


@pytest.mark.kernel
def test_stamped_toy_executes_and_passes_strict_nbval(tmp_path):
    """End to end on a small notebook: stamp, execute with the project's executor, nbval strictly."""
    path = tmp_path / "09_toy.ipynb"
    nbformat.write(_toy(), path)
    with contextlib.redirect_stdout(io.StringIO()):  # in this process: a program start costs seconds
        assert colab_stamp.main(["--check", str(path)]) == 1
        assert colab_stamp.main([str(path)]) == 0
    tool = [sys.executable, str(ROOT / "tools" / "colab_stamp.py")]  # and once as the program it is
    assert subprocess.run([*tool, "--check", str(path)], capture_output=True).returncode == 0
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "execute_notebooks.py"), str(path)],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=ROOT,
    )
    nb = nbformat.read(path, as_version=4)
    assert [c.execution_count for c in nb.cells if c.cell_type == "code"] == [1, 2, 3]
    assert colab_stamp.verified_with(nb) == {
        "torch": torch.__version__,
        "device": colab_stamp.verified_with(nb)["device"],
    }
    run = nbval_probe.run(tmp_path)  # under notebooks/pytest.ini and conftest.py, as `python -m pytest notebooks`
    assert run.returncode == 0, run.stdout[-3000:]


# --- every committed notebook agrees ----------------------------------------------------------------

# An image whose address names a host: markdown ![alt](http...), an HTML <img src="http...">, or a CSS url(http...).
_REMOTE_IMAGE = re.compile(
    r"""!\[[^\]]*\]\(\s*<?(?P<md>(?:https?:)?//[^)\s>]+)"""
    r"""|<img\b[^>]*?\bsrc\s*=\s*["']?(?P<html>(?:https?:)?//[^"'\s>]+)"""
    r"""|url\(\s*["']?(?P<css>(?:https?:)?//[^"')\s]+)""",
    re.IGNORECASE,
)


def _remote_images(text: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _REMOTE_IMAGE.finditer(text)]


def test_the_remote_image_finder_finds_each_form():
    text = (
        "[![b](https://x.org/a.svg)](https://y.org) ![c]( //cdn.net/c.png ) <IMG alt=x src='http://h/i.png'>"
        ' <div style="background: url(https://h/bg.png)"> ![local](../book/_static/logo.svg)'
        " [a link, not an image](https://colab.research.google.com/github/o/r) ![data](data:image/png;base64,AAAA)"
    )
    assert _remote_images(text) == ["https://x.org/a.svg", "//cdn.net/c.png", "http://h/i.png", "https://h/bg.png"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_cell_loads_an_image_from_another_host(path):
    """Opening a notebook offline (JupyterLab, VS Code) must request nothing: no markdown cell and no stored
    HTML or markdown output names a remote image (the Colab badge is a text link)."""
    found = []
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        texts = [cell.source] if cell.cell_type == "markdown" else []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            texts += ["".join(data.get(mime, "")) for mime in ("text/html", "text/markdown", "image/svg+xml")]
        found += [f"cell {index}: {url}" for text in texts for url in _remote_images(text)]
    assert not found, f"{path.name} loads remote images:\n" + "\n".join(found) + f"\nFix: {STAMP_COMMAND}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_carries_the_current_badge_and_setup_cell(path):
    found = colab_stamp.problems(nbformat.read(path, as_version=4), path.name, URL)
    assert not found, "\n".join(found) + f"\nFix: {STAMP_COMMAND}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_records_the_torch_it_was_verified_with(path):
    stamp = colab_stamp.verified_with(nbformat.read(path, as_version=4))
    assert stamp, f"{path.name}: the setup cell has no 'Verified with torch ...' output. Fix: {STAMP_COMMAND}"


def test_all_notebooks_were_verified_with_the_same_torch():
    versions = {}
    for path in NOTEBOOKS:
        stamp = colab_stamp.verified_with(nbformat.read(path, as_version=4))
        if stamp:
            versions.setdefault(stamp["torch"], []).append(path.name)
    assert len(versions) <= 1, f"notebooks were executed with different torch versions {versions}; run `make notebooks`"
