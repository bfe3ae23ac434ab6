"""The house rules of the package, checked on its source: the toolbox knows nothing of the course, no
module grows past one concern's size, and the face a learner sees stays small.

These read files and import modules only; they run in a second.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import viewlab

SRC = Path(viewlab.__file__).resolve().parent
MAX_MODULE_LINES = 600  # a module past this is split by concern
MAX_TOOLBOX_LINES = 5_050  # everything in src/viewlab outside course/ (4,454 before the explorer, per-thread
# guards with intent, the IPython holders walk and the timer frames: each added what its feature needs)
MAX_FACE = 26  # names in viewlab.__all__


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


def test_no_source_file_is_over_the_size_of_one_concern():
    sources = [p for pattern in ("*.py", "*.js") for p in SRC.rglob(pattern)]  # explorer.js is a module too
    sizes = {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in sources}
    too_big = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not too_big, f"split these by concern (more than {MAX_MODULE_LINES} lines): {too_big}"


def test_the_toolbox_stays_small():
    total = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in _toolbox_files())
    assert total <= MAX_TOOLBOX_LINES, (
        f"src/viewlab outside course/ has {total:,} lines (at most {MAX_TOOLBOX_LINES:,})"
    )


def test_the_face_is_small_and_every_name_is_documented():
    assert len(viewlab.__all__) <= MAX_FACE, viewlab.__all__
    undocumented = [n for n in viewlab.__all__ if not (getattr(viewlab, n).__doc__ or "").strip()]
    assert not undocumented, undocumented
