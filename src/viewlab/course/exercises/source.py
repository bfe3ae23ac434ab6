"""The answer's own source, read with :mod:`ast`: its loops, and the calls it makes by name.

:func:`read` parses the learner's function (a ``def`` or a ``lambda``) from its file, and the helpers it calls
by name when they are the learner's code too (:func:`viewlab._learner.is_learner_file`), and finds:

* the first Python loop (:func:`static_loop`): ``for``, ``while``, a comprehension, recursion (a call of
  itself, directly or through its helpers), ``map`` / ``filter`` / ``functools.reduce`` / ``itertools``, and
  ``sum`` / ``math.prod`` / ``math.fsum`` over data (over sizes, such as ``math.prod(x.shape)``, they are arithmetic);
* the calls that are not torch doing the work (:attr:`Reading.calls`): numpy (``np.tile``, ``np.add.at``,
  any numpy function), viewlab's own functions (``viewlab.attention.causal_mask``), autograd by name
  (``torch.func.jacfwd``, ``torch.autograd.forward_ad``, ``torch.autograd.grad``) and the ways into torch
  from outside memory (``torch.from_numpy``, ``torch.frombuffer``).

A call is resolved the way Python would resolve it when the function runs: names through the function's
globals, closure and the imports written inside it, attributes through modules and classes only (no
property of a value is read). What cannot be resolved that way (a method of a value, such as ``a.astype``)
is not named here; the data leaving torch (``.numpy()``, ``.tolist()``) is seen while the function runs
(:class:`.recorder.ApiRecorder`), and the operator count on two sizes sees a loop run from C.

The source comes from :mod:`linecache` (files, and notebook cells, which IPython registers there). A function
with no source to read (built with ``exec`` from a string, say) has no reading: the operator count still runs.

>>> def by_loop(x):
...     return [v * 2 for v in x]
>>> static_loop(by_loop)[1]
'a comprehension'
>>> static_loop(lambda x: x * 2) is None
True
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from viewlab._learner import BANK_DIR, is_learner_file, place

__all__ = ["Call", "Reading", "read", "read_once", "static_loop"]

_KIND = {
    ast.For: "a for loop",
    ast.AsyncFor: "a for loop",
    ast.While: "a while loop",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
}
_MAPS = {"map", "filter", "reduce", "starmap", "accumulate"}  # a Python loop run by a function
_SUMS = {"sum", "prod", "fsum"}  # a loop over a sequence, unless the sequence is sizes
_KEYED = {"sorted", "max", "min"}  # with key=: a Python function called once per item
_AUTOGRAD_MODULES = ("torch.autograd", "torch.autograd.forward_ad", "torch.autograd.functional")
_PROFILER_MODULES = ("torch.profiler", "torch.autograd.profiler")
_MOST_HELPERS = 16  # functions read per answer, the answer included
_NOTHING = object()


@dataclass(frozen=True)
class Call:
    """A call by name in the answer's source: ``kind`` is ``"numpy"``, ``"viewlab"``, ``"autograd"``,
    ``"profiler"`` or ``"exit"``; ``name`` as a message shows it (``numpy.tile``); ``line`` as :func:`~viewlab._learner.place`
    says it."""

    kind: str
    name: str
    line: str


@dataclass
class Reading:
    """What :func:`read` found: ``loop`` (``(what, line)``, or None) and ``calls`` (in source order)."""

    loop: tuple[str, str] | None = None
    calls: list[Call] = field(default_factory=list)


# ----- finding the function in its file ---------------------------------------------------------------------
def _tree(filename: str) -> ast.AST | None:
    text = "".join(linecache.getlines(filename))
    return _parsed(text) if text else None


@functools.lru_cache(maxsize=32)
def _parsed(text: str) -> ast.AST | None:
    """The parsed file, once per text (an answer and its helpers often share one file)."""
    try:
        return ast.parse(text)
    except SyntaxError:  # a cell with IPython magics, say: no reading
        return None


def _params(node: ast.AST) -> list[str]:
    args = node.args  # type: ignore[attr-defined]
    return [a.arg for a in (*args.posonlyargs, *args.args)]


def _names_used(node: ast.AST) -> set[str]:
    """The global names and attributes ``node`` reads: what its bytecode's ``co_names`` hold."""
    bound = {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments) for a in (*n.args, *n.kwonlyargs)}
    bound |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in bound}
    return names | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _code_names(code: types.CodeType) -> set[str]:
    nested = (c for c in code.co_consts if isinstance(c, types.CodeType))
    return set(code.co_names) | set(code.co_freevars) | {n for c in nested for n in _code_names(c)}


def _node_of(fn: Callable[..., Any]) -> tuple[ast.AST, str] | None:
    """The ``def`` or ``lambda`` node of ``fn`` in its file: its first line and name, then (for lambdas on one
    line) its parameters and the names it reads, told apart from the others'."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    tree = _tree(code.co_filename)
    if tree is None:
        return None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found += [node] if first == code.co_firstlineno else []
        elif isinstance(node, ast.Lambda) and code.co_name == "<lambda>" and node.lineno == code.co_firstlineno:
            found.append(node)
    params = list(code.co_varnames[: code.co_argcount])
    found = [n for n in found if _params(n) == params]
    if not found:
        return None
    names = _code_names(code)
    best = min(found, key=lambda n: len(_names_used(n) ^ names))
    return best, code.co_filename


# ----- resolving a name as Python would ---------------------------------------------------------------------
class _Scope:
    """The names a function's body sees: its imports written inside it, its closure, its globals, builtins."""

    def __init__(self, fn: Callable[..., Any], node: ast.AST) -> None:
        self.names: dict[str, Any] = {}
        self.names.update(vars(builtins))
        self.names.update(getattr(fn, "__globals__", {}))
        code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
        for name, cell in zip(code.co_freevars if code else (), cells):
            try:
                self.names[name] = cell.cell_contents
            except ValueError:  # a cell not filled yet
                pass
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                for alias in sub.names:
                    module = sys.modules.get(alias.name)
                    top = alias.name.split(".")[0]
                    self.names[alias.asname or top] = module if alias.asname else sys.modules.get(top)
            elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
                module = sys.modules.get(sub.module)
                for alias in sub.names:
                    self.names[alias.asname or alias.name] = getattr(module, alias.name, _NOTHING)

    def resolve(self, node: ast.AST) -> tuple[Any, str]:
        """(the object ``node`` names, how to spell it), or ``(_NOTHING, "")``."""
        if isinstance(node, ast.Name):
            obj = self.names.get(node.id, _NOTHING)
            return obj, obj.__name__ if isinstance(obj, types.ModuleType) else _spelled(obj)
        if isinstance(node, ast.Attribute):
            base, spelled = self.resolve(node.value)
            if base is _NOTHING or not isinstance(base, (types.ModuleType, type)) and not _is_ufunc(base):
                return _NOTHING, ""
            try:
                obj = inspect.getattr_static(base, node.attr)
                obj = getattr(base, node.attr)  # a descriptor (a classmethod, a ufunc's method) bound as called
            except AttributeError:
                return _NOTHING, ""
            return obj, f"{spelled}.{node.attr}" if isinstance(base, types.ModuleType) else _spelled(obj)
        return _NOTHING, ""


def _is_ufunc(obj: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(obj, numpy.ufunc)


def _spelled(obj: Any) -> str:
    """``module.qualname`` of a function or class (a ufunc and its methods: ``numpy.add``, ``numpy.add.at``)."""
    owner = getattr(obj, "__self__", None)
    if _is_ufunc(obj) or _is_ufunc(owner):
        return f"numpy.{owner.__name__}.{obj.__name__}" if _is_ufunc(owner) else f"numpy.{obj.__name__}"
    module, qual = getattr(obj, "__module__", None) or "", getattr(obj, "__qualname__", "") or ""
    return f"{module}.{qual}".removesuffix(".__init__") if module and qual else ""


def _kind_of(obj: Any, spelled: str) -> str | None:
    """``"numpy"``, ``"viewlab"``, ``"autograd"``, ``"profiler"`` or ``"exit"`` for a call of ``obj``, else None."""
    module = getattr(obj, "__module__", None) or ""
    owner = getattr(obj, "__self__", None)
    if spelled.startswith("numpy.") or module.startswith("numpy") or _is_ufunc(obj) or _is_ufunc(owner):
        return "numpy"
    if obj is torch.from_numpy or obj is torch.frombuffer:
        return "exit"
    if module.startswith(_PROFILER_MODULES) or spelled.startswith(_PROFILER_MODULES):
        return "profiler"
    if module.startswith("torch._functorch") or spelled.startswith("torch.func."):
        return "autograd"
    if module in _AUTOGRAD_MODULES and (module != "torch.autograd" or not isinstance(obj, type)):
        return "autograd"
    if module.startswith("viewlab.") and not is_learner_file(getattr(inspect.getmodule(obj), "__file__", "") or ""):
        return "viewlab"
    return None


def _bank_file(filename: str) -> bool:
    return filename.replace("\\", "/").startswith(BANK_DIR)


def _bank(fn: types.FunctionType) -> bool:
    """A function of the exercise bank (a reference, an answer): the learner's code in the course's own tests,
    viewlab's when an answer written elsewhere calls it."""
    return _bank_file(fn.__code__.co_filename)


def _over_sizes(args: list[ast.expr]) -> bool:
    """``x.shape``, ``x.size()``, ``x.shape[1:]`` or a literal tuple: sizes, not data."""
    if not args:
        return True
    arg = args[0]
    while isinstance(arg, ast.Subscript):
        arg = arg.value
    if isinstance(arg, (ast.Tuple, ast.List)):
        return not any(isinstance(e, ast.Starred) for e in arg.elts)
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute):
        return arg.func.attr == "size"
    return isinstance(arg, ast.Attribute) and arg.attr == "shape"


def _c_loop(obj: Any, call: ast.Call) -> str | None:
    """A function that runs a Python loop over a sequence (``map``, ``sum`` over data, ``sorted(key=)``,
    ``iter(f, sentinel)``, ``collections.Counter`` ...), named, or None."""
    name = getattr(obj, "__name__", "")
    module = getattr(obj, "__module__", None) or ""
    if module == "collections" and name == "Counter" and call.args:
        return "collections.Counter(), a Python loop that counts"
    if module not in ("builtins", "math", "functools", "_functools", "itertools"):
        return None
    keyed = name in _KEYED and any(k.arg == "key" for k in call.keywords)
    if (
        name in _MAPS
        or keyed
        or (name in _SUMS and not _over_sizes(call.args))
        or (name == "iter" and len(call.args) == 2)
    ):
        return f"{name}(), a Python loop over a sequence"
    return None


# ----- reading -------------------------------------------------------------------------------------------
_Todo = list[tuple[Callable[..., Any], tuple[Any, ...]]]  # (a function to read, the calls that lead to it)


def _read_one(
    fn: Callable[..., Any],
    node: ast.AST,
    filename: str,
    chain: tuple[Any, ...],
    out: Reading,
    todo: _Todo,
) -> None:
    scope = _Scope(fn, node)
    own = getattr(node, "name", None)
    helper = f" (in {getattr(fn, '__name__', 'a helper')}, which your function calls)" if len(chain) > 1 else ""
    loops: list[tuple[int, str]] = []
    for sub in ast.walk(node):
        kind = _KIND.get(type(sub))
        if kind is None and isinstance(sub, ast.Call):
            obj, spelled = scope.resolve(sub.func)
            bare = sub.func.id if isinstance(sub.func, ast.Name) else getattr(sub.func, "attr", None)
            if (own is not None and bare == own) or (obj is not _NOTHING and any(obj is f for f in chain)):
                kind = "a call of itself (recursion)"
            elif obj is not _NOTHING:
                kind = _c_loop(obj, sub)
                what = _kind_of(obj, spelled)
                if what is not None:
                    shown = (_spelled(obj) if what == "viewlab" else "") or spelled or ast.unparse(sub.func)
                    out.calls.append(Call(what, shown, place(filename, sub.lineno)))
                elif isinstance(obj, types.FunctionType) and _bank(obj) and not _bank_file(filename):
                    shown = f"the exercise's own code ({_spelled(obj)})"
                    out.calls.append(Call("viewlab", shown, place(filename, sub.lineno)))
                elif isinstance(obj, types.FunctionType) and is_learner_file(obj.__code__.co_filename):
                    todo.append((obj, (*chain, obj)))
        if kind is not None:
            loops.append((sub.lineno, kind + helper))
    if loops and out.loop is None:
        lineno, kind = min(loops)
        out.loop = (kind, place(filename, lineno))


def read(fn: Callable[..., Any]) -> Reading:
    """Read ``fn``'s source and its helpers' (see the module docstring); an empty reading without source."""
    out = Reading()
    todo: _Todo = [(fn, (fn,))]
    seen: set[int] = set()
    while todo and len(seen) < _MOST_HELPERS:
        one, chain = todo.pop(0)
        if id(getattr(one, "__code__", one)) in seen:
            continue
        seen.add(id(getattr(one, "__code__", one)))
        code = getattr(one, "__code__", None)
        if code is None or not is_learner_file(code.co_filename):  # torch's, numpy's or viewlab's own: not read
            continue
        found = _node_of(one)
        if found is not None:
            _read_one(one, found[0], found[1], chain, out, todo)
    return out


@functools.lru_cache(maxsize=256)
def _read_cached(fn: Callable[..., Any]) -> Reading:
    return read(fn)


def read_once(fn: Callable[..., Any]) -> Reading:
    """:func:`read`, once per function (the source does not change between the inputs of one check)."""
    try:
        return _read_cached(fn)
    except TypeError:  # an unhashable callable object
        return read(fn)


def static_loop(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """``(where, what)`` of the first Python loop in ``fn``'s source or its helpers', or None."""
    loop = read(fn).loop
    return None if loop is None else (loop[1], loop[0])
