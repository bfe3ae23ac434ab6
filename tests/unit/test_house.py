"""The house rules of the package, checked on its source: the toolbox knows nothing of the course, no
module grows past one concern's size, and the face a learner sees stays small.

Sizes are counted the way ``ruff format --line-length 100`` writes the code (on a copy in a temporary folder),
so folding docstrings, statements or comments onto fewer lines gains nothing: the formatter unfolds them
again before anything is counted. Style sheets are held to one CSS rule a line for the same reason.

These read files, format a copy and import modules; they run in a few seconds.
"""

from __future__ import annotations

import ast
import doctest
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import viewlab
from tests.conftest import ROOT

SRC = Path(viewlab.__file__).resolve().parent
FORMAT_WIDTH = 100  # sizes are measured as `ruff format --line-length 100` writes the code
MAX_MODULE_LINES = 600  # a module past this is split by concern
# The toolbox (every .py under src/viewlab outside course/), in formatted lines. The design aimed at 4,500 lines
# as written (about 5,250 formatted). Four features were then added to the toolbox on purpose: the stride
# explorer, per-thread guards that tell meant broadcasts from accidents, the walk of what IPython holds, and the
# monitor's frames while a cell runs. With them it measured 5,921 formatted lines at 3525a53. This ceiling is
# set once, openly above that, and is not moved to follow the code: a feature that needs more lines takes
# something out of the toolbox (into course/, or out of the package), or changes the design first.
MAX_TOOLBOX_LINES = 6_500
MAX_FACE = 25  # names in viewlab.__all__ (the design's number)
# A class that only a face function makes is shown by that function's example (``with measure() as m:`` reads
# a Measurement's fields); every other name of the face is used by a notebook or has an example of its own.
SHOWN_BY = {"Measurement": "measure"}


def _formatted_sizes() -> dict[str, int]:
    """Lines of every .py file of src/viewlab as ruff formats it at FORMAT_WIDTH (a copy; nothing is changed)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "viewlab"
        shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        cmd = [sys.executable, "-m", "ruff", "format", "--isolated", f"--line-length={FORMAT_WIDTH}", "-q", str(copy)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"ruff format failed on a copy of src/viewlab: {done.stderr}"
        return {
            p.relative_to(copy).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in copy.rglob("*.py")
        }


@pytest.fixture(scope="module")
def formatted() -> dict[str, int]:
    return _formatted_sizes()


def _toolbox_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "course" not in p.relative_to(SRC).parts)


def _imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules a file imports, relative imports resolved against its package."""
    package = ".".join(("viewlab", *path.relative_to(SRC).with_suffix("").parts))
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_imported_modules_resolves_relative_imports():
    # layout.py: `from ._checks import entry, ...`; a module inside a subpackage climbs one level per dot
    assert {"viewlab._checks", "viewlab._checks.entry"} <= _imported_modules(SRC / "layout.py")
    assert "viewlab._checks" in _imported_modules(SRC / "draw" / "layout.py")  # from .._checks import ...


def test_no_toolbox_file_imports_the_course():
    offenders = {
        str(p.relative_to(SRC)): sorted(m for m in _imported_modules(p) if m.startswith("viewlab.course"))
        for p in _toolbox_files()
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"the toolbox must not import viewlab.course: {offenders}"


def test_import_viewlab_loads_no_course_module_and_no_hypothesis():
    code = (
        "import sys, viewlab\n"
        "print(sorted(m for m in sys.modules if m.startswith('viewlab.course') or m.split('.')[0] == 'hypothesis'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_formatting_unfolds_what_was_folded(tmp_path):
    """The measure cannot be met by squeezing: a folded body comes back as ruff writes it."""
    (tmp_path / "viewlab").mkdir()
    (tmp_path / "viewlab" / "m.py").write_text("def f(a, b): return [a, b]  # folded\nx = 1; y = 2\n")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", f"--line-length={FORMAT_WIDTH}", "-q", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "viewlab" / "m.py").read_text().splitlines() == [
        "def f(a, b):",
        "    return [a, b]  # folded",
        "",
        "",
        "x = 1",
        "y = 2",
    ]


def test_no_source_file_is_over_the_size_of_one_concern(formatted):
    sizes = dict(formatted)
    # JavaScript is not reformatted here: it is counted as written, and held to one CSS rule a line below
    sizes.update(
        {p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.js")}
    )
    too_big = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_big, (
        f"split these by concern (more than {MAX_MODULE_LINES} lines as ruff format --line-length "
        f"{FORMAT_WIDTH} writes them): {too_big}"
    )


def test_the_toolbox_stays_within_its_stated_size(formatted):
    total = sum(n for name, n in formatted.items() if not name.startswith("course/"))
    assert total <= MAX_TOOLBOX_LINES, (
        f"src/viewlab outside course/ has {total:,} formatted lines (at most {MAX_TOOLBOX_LINES:,}; the design's "
        "aim was 4,500 as written): take something out of the toolbox rather than raise the number"
    )


# ----- style sheets: one CSS rule a line ------------------------------------------------------------------------
def string_literals(js: str) -> list[str]:
    """The text of every string literal of a JavaScript module ('...', "..." and `...`), in order of their
    ends; each ``${...}`` of a template is replaced by ``X`` and the strings inside it are listed too.

    Comments are skipped, and a quote inside another string or a comment does not start one.

    >>> string_literals("const a = `x${f('y')}z`; // `not one`\\nconst b = '`' + `w`;")
    ['y', 'xXz', '`', 'w']
    """
    found: list[str] = []

    def quoted(i: int, quote: str) -> int:  # js[i] is just past the opening quote
        text = []
        while i < len(js) and js[i] != quote:
            if js[i] == "\\":
                text.append(js[i : i + 2])
                i += 2
            elif quote == "`" and js.startswith("${", i):
                text.append("X")
                i = code(i + 2, inside_hole=True)
            else:
                text.append(js[i])
                i += 1
        found.append("".join(text))
        return i + 1

    def code(i: int, inside_hole: bool = False) -> int:
        depth = 0
        while i < len(js):
            c = js[i]
            if js.startswith("//", i):
                end = js.find("\n", i)
                i = len(js) if end < 0 else end
            elif js.startswith("/*", i):
                end = js.find("*/", i)
                i = len(js) if end < 0 else end + 2
            elif c in "'\"`":
                i = quoted(i + 1, c)
            elif c == "}" and inside_hole and depth == 0:
                return i + 1
            else:
                depth += (c == "{") - (c == "}")
                i += 1
        return i

    code(0)
    return found


def css_rule_problems(text: str, javascript: bool) -> tuple[int, list[str]]:
    """(rules found, lines that break "one CSS rule a line") in a .css file or in a .js module's string literals.

    A line must hold at most one rule, and a rule must open and close on its line.

    >>> css_rule_problems(".a{color:red}\\n.b{margin:0}\\n", javascript=False)
    (2, [])
    >>> css_rule_problems("const CSS = `.a{x:1}.b{y:${c}}\\n.c{z:1;\\n w:2}`;", javascript=True)[1]
    ['.a{x:1}.b{y:X}', '.c{z:1;', ' w:2}']
    """
    pieces = string_literals(text) if javascript else [text]
    rules, bad = 0, []
    for piece in pieces:
        if "{" not in piece and "}" not in piece:
            continue  # a template literal that holds no style rule
        for line in piece.splitlines():
            opened, closed = line.count("{"), line.count("}")
            rules += closed
            if opened > 1 or closed > 1 or opened != closed:
                bad.append(line)
    return rules, bad


def test_style_sheets_hold_one_css_rule_a_line():
    sheets = sorted([*SRC.rglob("*.css"), *SRC.rglob("*.js")])
    found, offenders = 0, {}
    for path in sheets:
        rules, bad = css_rule_problems(path.read_text(encoding="utf-8"), javascript=path.suffix == ".js")
        found += rules
        if bad:
            offenders[path.relative_to(SRC).as_posix()] = bad[:5]
    assert found >= 20, f"the explorer's style sheet was not found (only {found} CSS rules in {sheets})"
    assert not offenders, f"one CSS rule a line (a rule opens and closes on its own line): {offenders}"


# ----- the face -------------------------------------------------------------------------------------------------
def _notebook_code() -> str:
    cells = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells += [
            "".join(c["source"])
            for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "code"
        ]
    return "\n".join(cells)


def _example_text(doc: str | None) -> str:
    examples = doctest.DocTestParser().get_examples(doc or "")
    return "\n".join(e.source + e.want for e in examples)


def _home_doc(name: str) -> str:
    obj = getattr(viewlab, name)
    module = getattr(obj, "__module__", None) if not isinstance(obj, (tuple, list, dict)) else None
    homes = [m for m in vars(viewlab).values() if hasattr(m, "__all__") and name in m.__all__ and m is not viewlab]
    modules = [sys.modules[module]] if module in sys.modules else homes
    return "\n".join(m.__doc__ or "" for m in modules)


def test_the_face_is_small_and_every_name_is_used_or_shown():
    assert len(viewlab.__all__) <= MAX_FACE, (len(viewlab.__all__), viewlab.__all__)
    undocumented = [n for n in viewlab.__all__ if not (getattr(viewlab, n).__doc__ or "").strip()]
    assert not undocumented, undocumented
    code = _notebook_code()
    unseen = []
    for name in viewlab.__all__:
        word = re.compile(rf"\b{re.escape(name)}\b")
        used = bool(re.search(rf"\b(?:vl|viewlab)\.{re.escape(name)}\b", code)) or any(
            word.search(m.group(0)) for m in re.finditer(r"from viewlab import[^\n]*(?:\([^)]*\))?", code)
        )
        obj = getattr(viewlab, name)
        own = "" if isinstance(obj, (tuple, list, dict)) else obj.__doc__  # a tuple's __doc__ is tuple's
        shown = bool(_example_text(own)) or bool(word.search(_example_text(_home_doc(name))))
        if name in SHOWN_BY:
            shown = shown or bool(_example_text(getattr(viewlab, SHOWN_BY[name]).__doc__))
        if not (used or shown):
            unseen.append(name)
    assert not unseen, f"on the face but neither used by a notebook nor shown in an example: {unseen}"


def test_a_name_taken_off_the_face_stays_reachable_from_its_module():
    from viewlab.viewops import OFFICIAL_VIEW_OPS

    assert "OFFICIAL_VIEW_OPS" not in viewlab.__all__ and viewlab.viewops.OFFICIAL_VIEW_OPS is OFFICIAL_VIEW_OPS
