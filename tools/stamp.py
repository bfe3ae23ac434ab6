"""The course's repository URL, in one place: ``make stamp REPO=https://github.com/OWNER/NAME``.

``[project.urls] Repository`` in pyproject.toml is the one source. This program writes a new URL there
and into everything derived from it, or (``--check``) reports every place that disagrees with it:

* pyproject.toml ``[project.urls]``: Homepage and Repository (the GitHub URL), Documentation (the book
  on GitHub Pages, ``https://owner.github.io/name/``);
* book/_config.yml ``repository: url:``: Jupyter Book builds the repository button and the Binder and
  Colab launch buttons of every notebook page from it;
* CITATION.cff ``repository-code``;
* the badge block at the top of README.md (tests workflow, book, Colab, Binder), between the markers
  ``<!-- badges -->`` and ``<!-- /badges -->``, generated from the URL;
* every link to the old repository in README.md, CONTRIBUTING.md and book/*.md (and the ``cd NAME``
  after a ``git clone``);
* every notebook's Colab badge and setup cell (tools/colab_stamp.py).

Without ``--repo`` it re-stamps from the URL pyproject.toml already holds (after a change to the
setup-cell template, for instance). Stamping twice changes nothing the second time. After stamping,
re-execute the notebooks (``make notebooks``) so each setup cell has its output.

Usage:
    python tools/stamp.py --repo https://github.com/OWNER/NAME   # rewrite everything
    python tools/stamp.py                                         # re-stamp from pyproject.toml
    python tools/stamp.py --check                                 # report, change nothing (exit 1 if any)
    python tools/stamp.py --root DIR ...                          # another checkout (tests use a copy)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
if __package__:  # imported as tools.stamp (the tests)
    from . import colab_stamp
else:  # run as a program: python tools/stamp.py
    import colab_stamp

ROOT = Path(__file__).resolve().parents[1]
BADGES_START, BADGES_END = "<!-- badges -->", "<!-- /badges -->"
FIRST_NOTEBOOK = "01_views_and_copies.ipynb"
# Text files whose links to the repository follow it (CHANGELOG.md is history and stays as written).
LINKED_TEXT = ("README.md", "CONTRIBUTING.md", "book/*.md")


def owner_name(repo_url: str) -> tuple[str, str]:
    """``("OWNER", "NAME")`` of a GitHub URL; ValueError naming the expected form otherwise."""
    match = colab_stamp._GITHUB.fullmatch(repo_url)
    if not match:
        raise ValueError(f"stamp: {repo_url!r} is not a GitHub repository URL; pass REPO=https://github.com/OWNER/NAME")
    return match["owner"], match["repo"]


def pages_url(repo_url: str) -> str:
    """Where GitHub Pages serves the book of this repository (book.yml deploys it there)."""
    owner, name = owner_name(repo_url)
    return f"https://{owner.lower()}.github.io/{name}/"


def _binder(repo_url: str) -> str:
    owner, name = owner_name(repo_url)
    return f"https://mybinder.org/v2/gh/{owner}/{name}/"


def badges(repo_url: str, branch: str = colab_stamp.DEFAULT_BRANCH) -> str:
    """The README's badge block for ``repo_url``, markers included."""
    owner, name = owner_name(repo_url)
    actions = f"{repo_url}/actions/workflows"
    lines = [
        BADGES_START,
        f"[![tests]({actions}/test.yml/badge.svg)]({actions}/test.yml)",
        f"[![book]({actions}/book.yml/badge.svg)]({pages_url(repo_url)})",
        f"[![Open In Colab]({colab_stamp.BADGE_IMAGE})]({colab_stamp.colab_url(repo_url, FIRST_NOTEBOOK, branch)})",
        f"[![Binder](https://mybinder.org/badge_logo.svg)]({_binder(repo_url)}{branch}?urlpath=lab/tree/notebooks)",
        BADGES_END,
    ]
    return "\n".join(lines)


# --- one rewrite per kind of file; each returns the new text -----------------------------------------


def _sub_once(pattern: str, replacement: str, text: str, where: str) -> str:
    new, count = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    if count != 1:
        raise ValueError(f"stamp: {where} has no line matching {pattern!r}; restore it, then stamp again")
    return new


def pyproject_text(text: str, repo_url: str) -> str:
    head, sep, urls = text.partition("\n[project.urls]\n")
    if not sep:
        raise ValueError(
            'stamp: pyproject.toml has no [project.urls] table; add one with Repository = "https://github.com/OWNER/NAME"'
        )
    table, nxt, rest = urls.partition("\n[")
    for key, value in (("Homepage", repo_url), ("Repository", repo_url), ("Documentation", pages_url(repo_url))):
        line = f'{key} = "{value}"'
        if re.search(rf"^{key} = ", table, re.MULTILINE):
            table = re.sub(rf'^{key} = ".*"$', line, table, flags=re.MULTILINE)
        else:
            table = table.rstrip("\n") + f"\n{line}\n"
    return head + sep + table + nxt + rest


def book_config_text(text: str, repo_url: str) -> str:
    return _sub_once(
        r"^(repository:\n(?:[ \t]+.*\n|#.*\n)*?[ \t]+url:[ \t]*)\S+", rf"\g<1>{repo_url}", text, "book/_config.yml"
    )


def citation_text(text: str, repo_url: str) -> str:
    return _sub_once(r"^repository-code:.*$", f'repository-code: "{repo_url}"', text, "CITATION.cff")


def linked_text(text: str, old_url: str, repo_url: str) -> str:
    """Links to the old repository point at the new one, and so do links to its book (GitHub Pages), its
    notebooks on Colab and its Binder; the clone's folder name follows."""
    text = re.sub(re.escape(old_url) + r"(?![\w.-])", repo_url, text)
    text = text.replace(pages_url(old_url), pages_url(repo_url))
    colab = colab_stamp.colab_url(old_url, FIRST_NOTEBOOK).removesuffix(FIRST_NOTEBOOK)
    text = text.replace(colab, colab_stamp.colab_url(repo_url, FIRST_NOTEBOOK).removesuffix(FIRST_NOTEBOOK))
    text = text.replace(_binder(old_url), _binder(repo_url))
    old_name, new_name = owner_name(old_url)[1], owner_name(repo_url)[1]
    text = re.sub(rf"(git clone {re.escape(repo_url)}\n)cd {re.escape(old_name)}\b", rf"\g<1>cd {new_name}", text)
    start, end = text.find(BADGES_START), text.find(BADGES_END)
    if start != -1 and end > start:
        text = text[:start] + badges(repo_url) + text[end + len(BADGES_END) :]
    return text


# --- the whole repository ----------------------------------------------------------------------------


def _linked_files(root: Path) -> list[Path]:
    return sorted({p for pattern in LINKED_TEXT for p in root.glob(pattern) if p.is_file()})


def _notebooks(root: Path) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def _rewrites(root: Path, old_url: str, repo_url: str) -> dict[Path, str]:
    """Every text file's stamped content (only files that exist)."""
    plan = {}
    fixed = {"pyproject.toml": pyproject_text, "book/_config.yml": book_config_text, "CITATION.cff": citation_text}
    for rel, rewrite in fixed.items():
        path = root / rel
        if path.is_file():
            plan[path] = rewrite(path.read_text(encoding="utf-8"), repo_url)
    for path in _linked_files(root):
        plan[path] = linked_text(path.read_text(encoding="utf-8"), old_url, repo_url)
    return plan


def stamp_repository(root: Path, repo_url: str | None = None) -> list[Path]:
    """Write ``repo_url`` (default: pyproject's) into every place; returns the files that changed."""
    old_url = colab_stamp.repository_url(root / "pyproject.toml")
    repo_url = (repo_url or old_url).rstrip("/").removesuffix(".git")
    owner_name(repo_url)
    changed = []
    for path, new in _rewrites(root, old_url, repo_url).items():
        if path.read_text(encoding="utf-8") != new:
            path.write_text(new, encoding="utf-8", newline="")  # keep "\n" on Windows too
            changed.append(path)
    assert colab_stamp.repository_url(root / "pyproject.toml") == repo_url
    for path in _notebooks(root):
        nb = nbformat.read(path, as_version=4)
        if colab_stamp.stamp(nb, path.name, repo_url):
            nbformat.write(nb, path)
            changed.append(path)
    return changed


def problems(root: Path, notebooks: bool = True) -> list[str]:
    """Every place under ``root`` that disagrees with pyproject's URL; empty when all agree."""
    repo_url = colab_stamp.repository_url(root / "pyproject.toml")
    found = []
    for path, expected in _rewrites(root, repo_url, repo_url).items():
        if path.read_text(encoding="utf-8") != expected:
            found.append(f"{path.relative_to(root).as_posix()}: disagrees with [project.urls] Repository = {repo_url}")
    readme = root / "README.md"
    if readme.is_file() and BADGES_START not in readme.read_text(encoding="utf-8"):
        found.append(f"README.md: no badge block ({BADGES_START} ... {BADGES_END}) at the top")
    if notebooks:
        for path in _notebooks(root):
            found += colab_stamp.problems(nbformat.read(path, as_version=4), path.name, repo_url)
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", help="the new GitHub URL, https://github.com/OWNER/NAME (default: keep pyproject's)")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 listing every place that disagrees"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to stamp (default: this one)")
    args = parser.parse_args(argv)
    try:
        if args.check:
            if args.repo:
                parser.error("--check compares with pyproject.toml's URL; leave out --repo")
            found = problems(args.root)
            for line in found:
                print(line)
            print(f"{len(found)} place(s) disagree with pyproject.toml's repository URL")
            return 1 if found else 0
        changed = stamp_repository(args.root, args.repo)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    for path in changed:
        print(f"stamped {path.relative_to(args.root).as_posix()}")
    print(f"{len(changed)} file(s) changed")
    if any(p.suffix == ".ipynb" for p in changed):
        print("now re-execute the notebooks (make notebooks) so each setup cell records the torch it ran with")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
