"""Loops seen as loops: the static witness of the rule ``no_python_loops`` (the answer's own source, read with ``ast``).

:func:`static_loop` finds the first ``for``, ``while``, comprehension, call of the function by its own name
(recursion) or ``map`` / ``filter`` / ``reduce`` / ``itertools`` over a Python sequence in the source of the
learner's function (a ``def`` or a ``lambda``; nested functions included). The dynamic witness (a line run
again after a backward jump, or a function entered while it is still running) is :class:`.watch.Watch`; the
third is the operator count on two sizes (:func:`.rules.loop_problem`).

The source comes from ``linecache`` (files, and notebook cells, which IPython registers there). A function
with no source to read (built with ``exec`` from a string, say) has no static witness: the dynamic one still runs.

>>> def by_loop(x):
...     return [v * 2 for v in x]
>>> static_loop(by_loop)[1]
'a comprehension'
>>> static_loop(lambda x: x * 2) is None
True
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Callable
from typing import Any

__all__ = ["static_loop", "place"]

_MAPS = {"map", "filter", "reduce", "starmap", "accumulate"}  # a Python loop run by a function
_KIND = {
    ast.For: "a for loop",
    ast.AsyncFor: "a for loop",
    ast.While: "a while loop",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
}


def place(filename: str, lineno: int) -> str:
    """``line N of this cell: code`` in a notebook, ``file:N: code`` elsewhere (as ``viewlab._dispatch.learner_line``).

    >>> place("/tmp/ipykernel_1/abc.py", 3)
    'line 3 of this cell'
    """
    in_cell = "ipykernel_" in filename or filename.startswith("<ipython-input")
    where = f"line {lineno} of this cell" if in_cell else f"{filename}:{lineno}"
    code = linecache.getline(filename, lineno).strip()
    return f"{where}: {code}" if code else where


def _tree(filename: str) -> ast.AST | None:
    lines = linecache.getlines(filename)
    try:
        return ast.parse("".join(lines)) if lines else None
    except SyntaxError:  # a cell with IPython magics, say: no static witness
        return None


def _node_of(fn: Callable[..., Any]) -> tuple[ast.AST, str] | None:
    """The ``def`` or ``lambda`` node of ``fn`` in its file, told apart by the source positions of its bytecode."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    tree = _tree(code.co_filename)
    if tree is None:
        return None
    spots = [  # where the bytecode's instructions are (RESUME and the like span nothing: no place)
        (line, col) for line, _end, col, ecol in code.co_positions() if None not in (line, col, ecol) and ecol > col
    ]
    candidates = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            if first != code.co_firstlineno or (not isinstance(node, ast.Lambda) and node.name != code.co_name):
                continue
            start, end = (node.lineno, node.col_offset), (node.end_lineno or node.lineno, node.end_col_offset or 0)
            if isinstance(node, ast.Lambda) and not all(start <= s <= end for s in spots):
                continue  # another lambda on the same line
            candidates.append(node)
    if not candidates:
        return None
    # the innermost candidate: a lambda inside another lambda on the same line is the smaller span
    best = min(candidates, key=lambda n: ((n.end_lineno or 0) - n.lineno, (n.end_col_offset or 0) - n.col_offset))
    return best, code.co_filename


def static_loop(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """``(where, what)`` of the first Python loop in ``fn``'s source (``where`` as :func:`place` says it), or None."""
    found = _node_of(fn)
    if found is None:
        return None
    node, filename = found
    own = getattr(node, "name", None)
    hits: list[tuple[int, str]] = []
    for sub in ast.walk(node):
        kind = _KIND.get(type(sub))
        if kind is None and isinstance(sub, ast.Call):
            name = sub.func.id if isinstance(sub.func, ast.Name) else getattr(sub.func, "attr", None)
            if own is not None and name == own:
                kind = "a call of itself (recursion)"
            elif name in _MAPS:
                kind = f"{name}(), a Python loop over a sequence"
        if kind is not None:
            hits.append((sub.lineno, kind))
    if not hits:
        return None
    lineno, kind = min(hits)
    return place(filename, lineno), kind
