"""`make stamp REPO=...` (tools/stamp.py): one URL, written everywhere it is used, checked to agree.

Stamping is tried on a temporary copy of the files it rewrites, never on the committed ones.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

from tests.conftest import ROOT
from tools import colab_stamp, stamp

OLD = colab_stamp.repository_url()
NEW = "https://github.com/Someone-Else/tensor-course"
TOOL = [sys.executable, str(ROOT / "tools" / "stamp.py")]
COPIED = [
    "pyproject.toml",
    "CITATION.cff",
    "README.md",
    "CONTRIBUTING.md",
    "book/_config.yml",
    "book/*.md",
    "notebooks/*.ipynb",
]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The files stamp.py rewrites, copied into a temporary folder laid out like the repository."""
    for pattern in COPIED:
        for path in ROOT.glob(pattern):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return tmp_path


def _stamp(root: Path, *args: str) -> subprocess.CompletedProcess:
    """stamp.main in this process (a program start costs seconds; the program itself is tested below)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = stamp.main(["--root", str(root), *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_stamp_runs_as_a_program(checkout):
    result = subprocess.run([*TOOL, "--root", str(checkout), "--check"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "0 place(s) disagree" in result.stdout, result.stdout + result.stderr


def _everything(root: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for pattern in COPIED for p in sorted(root.glob(pattern)))


# --- the committed repository -----------------------------------------------------------------------


def test_every_place_outside_the_notebooks_agrees_with_pyproject():
    found = stamp.problems(ROOT, notebooks=False)
    assert not found, "\n".join(found) + "\nFix: make stamp"


def test_readme_starts_with_the_badges_generated_from_the_url():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    head = readme.split("\n## ", 1)[0]
    assert stamp.badges(OLD) in head, "README.md: the badge block is not the generated one; run `make stamp`"
    for badge in ("tests", "book", "Open In Colab", "Binder"):
        assert f"[![{badge}]" in head


def test_pages_url_is_the_owner_lowercased_and_the_repository_name():
    assert stamp.pages_url("https://github.com/Viewlab-Course/viewlab") == "https://viewlab-course.github.io/viewlab/"


# --- stamping a copy --------------------------------------------------------------------------------


def test_stamp_moves_every_place_to_the_new_url(checkout):
    result = _stamp(checkout, "--repo", NEW)
    assert result.returncode == 0, result.stdout + result.stderr

    project = tomllib.loads((checkout / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["urls"]["Repository"] == project["urls"]["Homepage"] == NEW
    assert project["urls"]["Documentation"] == "https://someone-else.github.io/tensor-course/"
    config = yaml.safe_load((checkout / "book" / "_config.yml").read_text(encoding="utf-8"))
    assert config["repository"]["url"] == NEW  # Jupyter Book's repository, Binder and Colab buttons come from it
    assert yaml.safe_load((checkout / "CITATION.cff").read_text(encoding="utf-8"))["repository-code"] == NEW
    assert stamp.badges(NEW) in (checkout / "README.md").read_text(encoding="utf-8")
    how_to = (checkout / "book" / "how-to-run.md").read_text(encoding="utf-8")
    assert f"git clone {NEW}\ncd tensor-course\n" in how_to
    for path in sorted((checkout / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        assert colab_stamp.problems(nb, path.name, NEW) == [], path.name
        assert f"viewlab[course] @ git+{NEW}" in nb.cells[[c.cell_type for c in nb.cells].index("code")].source

    old_owner_name = OLD.removeprefix("https://github.com/")
    assert old_owner_name not in _everything(checkout), "a place still names the old repository"
    check = _stamp(checkout, "--check")
    assert check.returncode == 0 and "0 place(s) disagree" in check.stdout, check.stdout


def test_stamping_twice_changes_nothing_the_second_time(checkout):
    assert _stamp(checkout, "--repo", NEW).returncode == 0
    before = _everything(checkout)
    again = _stamp(checkout, "--repo", NEW)
    assert again.returncode == 0 and "0 file(s) changed" in again.stdout, again.stdout
    assert _everything(checkout) == before


def test_check_names_each_place_that_disagrees(checkout):
    assert _stamp(checkout).returncode == 0  # re-stamp from pyproject: everything agrees
    assert _stamp(checkout, "--check").returncode == 0
    citation = checkout / "CITATION.cff"
    citation.write_text(
        citation.read_text(encoding="utf-8").replace(OLD, "https://github.com/stale/place"), encoding="utf-8"
    )
    nb_path = sorted((checkout / "notebooks").glob("*.ipynb"))[0]
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace(OLD.removeprefix("https://github.com/"), "stale/place")
    nbformat.write(nb, nb_path)
    check = _stamp(checkout, "--check")
    assert check.returncode == 1
    assert "CITATION.cff: disagrees" in check.stdout and f"{nb_path.name}: the title cell" in check.stdout
    assert "2 place(s) disagree" in check.stdout


@pytest.mark.parametrize("bad", ["https://gitlab.com/a/b", "github.com/a/b", "https://github.com/only-owner"])
def test_a_url_that_is_not_a_github_repository_is_refused_and_nothing_changes(checkout, bad):
    before = _everything(checkout)
    result = _stamp(checkout, "--repo", bad)
    assert result.returncode == 2 and "https://github.com/OWNER/NAME" in result.stderr, result.stderr
    assert _everything(checkout) == before


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make (elsewhere: python tools/stamp.py --repo URL)")
def test_make_stamp_passes_repo_to_the_tool():
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "stamp", f"REPO={NEW}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    assert f'tools/stamp.py --repo "{NEW}"' in dry.stdout
    plain = subprocess.run(
        ["make", "-n", "--no-print-directory", "stamp"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert "tools/stamp.py" in plain.stdout and "--repo" not in plain.stdout
