"""The explorer's ES modules joined into the one module anywidget and the book run, with no build tool.

The modules (``arithmetic.js``, ``strip.js``, ``style.js``, ``words.js``, ``keyboard.js``, ``panes.js``,
``render.js``) import one another by relative path, so each is a valid module on its own. Joining them is
plain text work: each file's ``import {...} from "./x.js";`` lines are dropped and the files are
concatenated in :data:`ORDER` (each after what it imports), which leaves one module with no import at
all: a page loads it inline, from ``file://`` and with no network.

This file imports nothing from viewlab, so the book's extension can load it by path without anywidget.

>>> source = bundle()
>>> "export default { render };" in source and "import {" not in source
True
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

__all__ = ["ORDER", "bundle", "module_files"]

HERE = Path(__file__).parent
ORDER = ("arithmetic", "strip", "style", "words", "keyboard", "panes", "render")
_LOCAL_IMPORT = re.compile(r'^import\s*\{[^}]*\}\s*from\s*"\./([\w-]+)\.js";\n', re.MULTILINE)
_ANY_IMPORT = re.compile(r"^\s*import\b|\bimport\s*\(", re.MULTILINE)


def module_files() -> list[Path]:
    """The modules in the order the bundle joins them."""
    return [HERE / f"{name}.js" for name in ORDER]


@functools.cache
def bundle() -> str:
    """One ES module: every explorer module, its local imports dropped, in :data:`ORDER`.

    Raises ``RuntimeError`` when a module imports one that comes after it, or anything not local.

    >>> bundle().count("export function render(")
    1
    """
    parts, seen = [], set()
    for path in module_files():
        text = path.read_text(encoding="utf-8")
        for name in _LOCAL_IMPORT.findall(text):
            if name not in seen:
                raise RuntimeError(f"explorer bundle: {path.name} imports {name}.js, which is not before it in ORDER")
        body = _LOCAL_IMPORT.sub("", text)
        if _ANY_IMPORT.search(body):
            raise RuntimeError(f"explorer bundle: {path.name} imports something that is not an explorer module")
        parts.append(f"// ---- {path.name} ----\n{body.strip()}\n")
        seen.add(path.stem)
    return "\n".join(parts)
