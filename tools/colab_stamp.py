"""Stamp every notebook with an "Open in Colab" badge and a Colab setup cell, from one URL.

The repository URL lives in one place: ``[project.urls] Repository`` in pyproject.toml. This tool
derives from it

* the badge, a line placed right under the ``# Title`` of the notebook's first markdown cell, linking
  to ``https://colab.research.google.com/github/<owner>/<repo>/blob/<branch>/notebooks/<file>``. It is a
  text link, not Colab's badge image: a notebook opened offline (JupyterLab, VS Code) must not fetch
  anything from another host. The book draws it as its local badge image (book/_ext/viewlab_book.py);
* the setup cell, the notebook's first code cell (tagged ``colab-setup``): only on Colab (detected by
  ``google.colab`` being imported) it pip-installs ``viewlab`` from the repository -- loose bounds
  from pyproject, never an exact pin of torch/numpy/pandas -- and everywhere it prints the torch
  version and the device it sees. That printed line is the page's "verified with" stamp.

Stamping is idempotent: a second run changes nothing. ``--check`` changes nothing and exits 1
listing every notebook that disagrees (what tests/tooling/test_colab_stamp.py runs). After stamping,
re-execute the notebooks (``make notebooks``) so the setup cell has its output.

Usage:
    python tools/colab_stamp.py notebooks/*.ipynb            # stamp in place
    python tools/colab_stamp.py --check notebooks/*.ipynb    # report, change nothing

To move the course to another repository, change the URL everywhere at once with
``make stamp REPO=https://github.com/OWNER/NAME`` (tools/stamp.py, which calls this tool for the notebooks).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SETUP_TAG = "colab-setup"
SETUP_TAGS = [SETUP_TAG, "nbval-ignore-output", "hide-input"]
# Colab's badge image: only the README uses it (GitHub renders it online); notebooks get a text link.
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_ALT = "Open In Colab"
BADGE_TEXT = "Open in Colab"
DEFAULT_BRANCH = "main"
_GITHUB = re.compile(r"https://github\.com/(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+?)(?:\.git)?/?")
# The line the setup cell prints; the book and tests read the verified torch version from it.
VERIFIED_LINE = re.compile(r"^Verified with torch (?P<torch>\S+) on (?P<device>CPU|CUDA \(.+\))", re.MULTILINE)


def repository_url(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The GitHub URL in ``[project.urls] Repository``, checked and without a trailing slash."""
    project = tomllib.loads(pyproject.read_text())["project"]
    url = project.get("urls", {}).get("Repository")
    if not url:
        raise ValueError(
            f'{pyproject}: add the course\'s GitHub URL as [project.urls] Repository = "https://github.com/OWNER/REPO"'
        )
    if not _GITHUB.fullmatch(url):
        raise ValueError(
            f"{pyproject}: [project.urls] Repository = {url!r} is not a GitHub repository URL of the form "
            "https://github.com/OWNER/REPO; Colab opens notebooks only from GitHub."
        )
    return url.rstrip("/").removesuffix(".git")


def colab_url(repo_url: str, notebook: str, branch: str = DEFAULT_BRANCH) -> str:
    """Colab's address for ``notebooks/<notebook>`` on ``branch`` of the GitHub repository."""
    match = _GITHUB.fullmatch(repo_url)
    if not match:
        raise ValueError(f"colab_url(): {repo_url!r} is not https://github.com/OWNER/REPO")
    if "/" in notebook or not notebook.endswith(".ipynb"):
        raise ValueError(
            f"colab_url(): expected a notebook file name like '01_views_and_copies.ipynb', got {notebook!r}"
        )
    return (
        f"https://colab.research.google.com/github/{match['owner']}/{match['repo']}/blob/{branch}/notebooks/{notebook}"
    )


def badge_markdown(repo_url: str, notebook: str, branch: str = DEFAULT_BRANCH) -> str:
    """The badge line for one notebook: a plain link, so that opening the notebook downloads nothing."""
    return f"[{BADGE_TEXT}]({colab_url(repo_url, notebook, branch)})"


def install_spec(repo_url: str) -> str:
    """What pip installs on Colab: the package straight from the repository (its own loose bounds), with
    the course extra (hypothesis, which the exercises generate inputs with; Colab does not have it)."""
    return f"viewlab[course] @ git+{repo_url}"


def setup_source(repo_url: str) -> str:
    """Source of the setup cell. Harmless outside Colab: it installs nothing and only reports."""
    return f'''# Setup. On Google Colab this installs the course helpers (viewlab) from the course repository;
# anywhere else it installs nothing. Stamped by tools/colab_stamp.py -- edit that tool, not this cell.
import importlib
import subprocess
import sys

if "google.colab" in sys.modules:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "{install_spec(repo_url)}"], check=True)
    importlib.invalidate_caches()

import torch
import viewlab.course.versions  # binds viewlab (the toolbox) and loads the course's torch floor

device = f"CUDA ({{torch.cuda.get_device_name(0)}})" if torch.cuda.is_available() else "CPU"
print(f"Verified with torch {{torch.__version__}} on {{device}} (viewlab {{viewlab.__version__}})")
differs = viewlab.course.versions.check_torch()  # behaviours this course relies on that this torch lacks
if differs:
    print(f"Warning: the course needs torch>={{viewlab.course.versions.TORCH_FLOOR}}; here these differ:", *differs, sep="\\n- ")'''


def _title_cell(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    cell = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if cell is None or not cell.source.lstrip().startswith("# "):
        raise ValueError(f"{name}: the first markdown cell must start with a '# ' title; the badge goes right under it")
    return cell


def _with_badge(source: str, badge: str) -> str:
    lines = source.lstrip().split("\n")
    title, rest = lines[0], lines[1:]
    # Drop any earlier Colab badge line (idempotent; also replaces a stale URL) and the blank lines around it.
    rest = [line for line in rest if "colab.research.google.com" not in line]
    while rest and not rest[0].strip():
        rest.pop(0)
    return "\n".join([title, "", badge] + (["", *rest] if rest else []))


def problems(nb: nbformat.NotebookNode, name: str, repo_url: str, branch: str = DEFAULT_BRANCH) -> list[str]:
    """Every way ``nb`` (file name ``name``) disagrees with the stamp; empty when it agrees."""
    found = []
    try:
        title = _title_cell(nb, name)
    except ValueError as exc:
        return [str(exc)]
    badge = badge_markdown(repo_url, name, branch)
    badge_lines = [line for line in title.source.split("\n") if "colab.research.google.com" in line]
    if badge_lines != [badge]:
        found.append(
            f"{name}: the title cell needs exactly this badge line under the title:\n  {badge}\n  found: {badge_lines}"
        )
    setups = [i for i, c in enumerate(nb.cells) if SETUP_TAG in c.metadata.get("tags", [])]
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if len(setups) != 1:
        found.append(f"{name}: expected one cell tagged {SETUP_TAG!r}, found {len(setups)}")
    else:
        cell = nb.cells[setups[0]]
        if cell.cell_type != "code" or setups[0] != code[0]:
            found.append(f"{name}: the {SETUP_TAG!r} cell must be the first code cell")
        if cell.source != setup_source(repo_url):
            found.append(f"{name}: the setup cell differs from the one generated from {repo_url}")
        missing = [t for t in SETUP_TAGS if t not in cell.metadata.get("tags", [])]
        if missing:
            found.append(f"{name}: the setup cell lacks tags {missing}")
    return found


def stamp(nb: nbformat.NotebookNode, name: str, repo_url: str, branch: str = DEFAULT_BRANCH) -> bool:
    """Badge and setup cell into ``nb`` in place; returns True when something changed."""
    if not problems(nb, name, repo_url, branch):
        return False
    title = _title_cell(nb, name)
    title.source = _with_badge(title.source, badge_markdown(repo_url, name, branch))
    if not problems(nb, name, repo_url, branch):
        return True  # only the badge line was stale: the setup cell keeps its output (no re-execution needed)
    nb.cells = [c for c in nb.cells if SETUP_TAG not in c.metadata.get("tags", [])]
    cell = nbformat.v4.new_code_cell(setup_source(repo_url))
    cell.metadata["tags"] = list(SETUP_TAGS)
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    nb.cells.insert(first_code, cell)
    return True


def verified_with(nb: nbformat.NotebookNode) -> dict[str, str] | None:
    """``{"torch": ..., "device": ...}`` from the executed setup cell's output, or None if it has none."""
    for cell in nb.cells:
        if SETUP_TAG in cell.metadata.get("tags", []):
            text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
            match = VERIFIED_LINE.search(text)
            return match.groupdict() if match else None
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if any notebook disagrees")
    parser.add_argument(
        "--branch", default=DEFAULT_BRANCH, help=f"branch the Colab links open (default {DEFAULT_BRANCH})"
    )
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    args = parser.parse_args(argv)
    repo_url = repository_url(args.pyproject)
    bad = changed = 0
    for path in args.notebooks:
        if path.suffix != ".ipynb":
            parser.error(f"{path}: not a notebook (.ipynb)")
        nb = nbformat.read(path, as_version=4)
        if args.check:
            for line in problems(nb, path.name, repo_url, args.branch):
                print(line)
                bad += 1
        elif stamp(nb, path.name, repo_url, args.branch):
            nbformat.write(nb, path)
            changed += 1
            print(f"stamped {path}")
        else:
            print(f"unchanged {path}")
    if args.check:
        print(f"{len(args.notebooks)} notebook(s) checked, {bad} problem(s)")
    if changed:
        print("now re-execute them (make notebooks) so each setup cell records the torch version it ran with")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
