"""The public surface is deliberate: what a module defines without a leading underscore is exactly its __all__.

A name a learner can see (no underscore) is a promise: it is documented and kept working. Everything
else is private (``_name``) or lives in ``viewlab.course``. The book's reference is generated from
``viewlab.__all__`` (book/_config.yml: ``autosummary_ignore_module_all: false``), so these checks also
keep the reference listing exactly the public names (tests/test_book.py checks the built pages).
"""

from __future__ import annotations

import ast
import importlib
import sys
import types
from pathlib import Path

import pytest

import viewlab

SRC = Path(viewlab.__file__).resolve().parent
# The modules whose surface is checked here; memory and monitor are checked where they are maintained.
MODULES = (
    "attention",
    "layout",
    "draw.layout",
    "draw.broadcast",
    "draw.png",
    "course.bench",
    "course.layers",
    "broadcast",
    "viewops",
    "sentinels",
    "ipython",
    "errors",
    "course.versions",
    "explorer",
    "course.exercises.engine",
    "course.exercises.result",
    "course.exercises.strategies",
    "course.exercises.rules",
    "course.exercises.recorder",
    "course.exercises.messages",
    "course.exercises.registry",
    "course.exercises.picture",
    "course.exercises.watch",
    "course.exercises.source",
    "course.exercises.compare",
)
# IPython finds these two hooks by their exact names, so they cannot take an underscore; they are
# not in __all__ because learners never call them (``%load_ext viewlab`` does).
IPYTHON_HOOKS = {"load_ipython_extension", "unload_ipython_extension"}


def defined_public_names(path: Path) -> set[str]:
    """Top-level functions, classes and assignments of a module's source without a leading underscore.

    Imports are not definitions (``from typing import Any`` adds no public name of ours).
    """
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.add(leaf.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_defined_public_names_sees_defs_classes_and_constants(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import Any\nimport os\nA = 1\n_b = 2\nc: int = 3\n"
        "def f(): pass\ndef _g(): pass\nclass K: pass\nx, _y = 1, 2\n"
    )
    assert defined_public_names(source) == {"A", "c", "f", "K", "x"}


@pytest.mark.parametrize("name", MODULES)
def test_module_all_is_exactly_its_public_definitions(name):
    module = importlib.import_module(f"viewlab.{name}")
    module = sys.modules[f"viewlab.{name}"]  # viewlab.layout the attribute is the function, not the module
    declared = list(module.__all__)
    assert len(declared) == len(set(declared)), f"viewlab.{name}.__all__ lists a name twice"
    source = SRC / f"{name.replace('.', '/')}.py"
    defined = defined_public_names(source if source.is_file() else source.with_suffix("") / "__init__.py")
    assert set(declared) - defined == set(), f"viewlab.{name}.__all__ names what the module does not define"
    assert defined - set(declared) == set(), (
        f"viewlab.{name} defines public names that are not in its __all__: make them private (_name) "
        "or add them to __all__ with a docstring"
    )


def test_package_all_names_exist_once_and_nothing_public_is_left_out():
    declared = list(viewlab.__all__)
    assert len(declared) == len(set(declared))
    missing = [n for n in declared if not hasattr(viewlab, n)]
    assert not missing, f"viewlab.__all__ names what viewlab does not have: {missing}"
    stray = sorted(
        n
        for n, obj in vars(viewlab).items()
        if not n.startswith("_")
        and not isinstance(obj, types.ModuleType)
        and n not in declared
        and n not in IPYTHON_HOOKS
    )
    assert not stray, f"public names of viewlab missing from viewlab.__all__ (and so from the book): {stray}"


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_has_a_docstring(name):
    module = sys.modules[f"viewlab.{name}"]
    undocumented = [
        n for n in module.__all__ if callable(getattr(module, n)) and not (getattr(module, n).__doc__ or "").strip()
    ]
    assert not undocumented, f"viewlab.{name}: {undocumented} need docstrings"
