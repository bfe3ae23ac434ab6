"""IPython and Jupyter lookups in one room: are we in a kernel, on Colab, and what IPython keeps alive.

* :func:`in_kernel`, :func:`on_colab` -- where the code runs (the monitor picks its display from them).
* :func:`held_by_ipython` / :func:`release_ipython_refs` -- tensors kept alive only by IPython: output history
  (``Out``, ``_``, ``_5``, their hidden and display-hook copies), the last result, the last stored error. Each
  holder is walked into containers, ``nn.Module`` parameters and buffers, NumPy arrays sharing a tensor's storage
  and objects' attributes, six levels deep; a tensor is IPython's only if no variable of yours reaches
  its storage by the same walk. A tensor with an autograd graph (a ``loss`` left in ``Out``) is walked into the
  tensors that graph saved for backward and the leaves it accumulates into, which die with it (one level: not into
  their own graphs). Not seen: closures, ``functools.partial``, ``__slots__``, dict keys (only values are walked),
  bound methods (``obj.method`` does not lead to ``obj``), C objects, past 50,000 new objects from one name (each
  of your variables and each holder has its own 50,000, so a big list hides nothing after it).

Nothing here imports IPython at module load.

>>> in_kernel(), on_colab()
(False, False)
"""

from __future__ import annotations

import gc
import sys
import types
import weakref
from functools import partial
from typing import Any

import torch

from ._checks import entry, problem, type_error, value_error
from ._dispatch import storages_of
from ._format import exact_bytes

__all__ = ["in_kernel", "on_colab", "HeldTensor", "held_by_ipython", "release_ipython_refs"]
_DEPTH, _BUDGET = 6, 50_000  # levels followed from one name; new objects looked at from one name (a list of a million)


def in_kernel() -> bool:
    """True inside a running Jupyter kernel (a shell with a ``kernel``), False in plain Python or a terminal IPython."""
    return getattr(_running_shell(), "kernel", None) is not None


def on_colab() -> bool:
    """True on Google Colab (its ``google.colab`` module has been imported by the runtime)."""
    return "google.colab" in sys.modules


def _running_shell() -> Any:
    """``get_ipython()``: the running shell, or None outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the course
        return None
    return get_ipython()


_UNDERS = ("_", "__", "___")
_SOURCES = ("history", "result", "traceback")
_LEAVES = (str, bytes, bytearray, int, float, complex, type, types.ModuleType, types.FunctionType, types.MethodType)
_LEAVES += (types.BuiltinFunctionType, weakref.ref, range, torch.dtype, torch.device)


def _storages(t: torch.Tensor) -> dict[int, Any]:
    """The storages holding ``t``'s data, by identity (a sparse tensor's indices and values, a nested one's parts)."""
    return {s._cdata: s for s in storages_of(t)}


class HeldTensor:
    """A tensor that IPython keeps alive, and ``where`` (``"Out[3]"``, ``"_"``, ``"traceback: f() local 'x'"``).

    ``bytes``: what its storages hold (0 on the meta device, which holds none).

    >>> HeldTensor("_", torch.zeros(2, 3))
    HeldTensor(_: shape (2, 3), torch.float32, cpu, 24 B)
    """

    def __init__(self, where: str, tensor: torch.Tensor) -> None:
        self.where, self.dtype, self.device = where, tensor.dtype, tensor.device
        try:
            self.shape: tuple = tuple(tensor.shape)
        except RuntimeError:  # a nested tensor has no one shape: its components' shapes
            self.shape = tuple(tuple(c.shape) for c in tensor.unbind())
        meta = tensor.device.type == "meta"
        self.bytes = 0 if meta else sum(s.nbytes() for s in _storages(tensor).values())

    def __repr__(self) -> str:
        return f"HeldTensor({self.where}: shape {self.shape}, {self.dtype}, {self.device}, {exact_bytes(self.bytes)})"


def _graph_saved(fn: Any) -> list[tuple[str, Any]]:
    """``(path, tensor)`` for every tensor the autograd graph from node ``fn`` saved for backward (and the leaves
    it accumulates into): what keeps a 0-d ``loss`` from being 4 bytes."""
    nodes, items, at, ids = [fn], [], 0, {id(fn)}
    while at < len(nodes) and at < _BUDGET:  # nodes are kept in the list, so no id is reused during the walk
        node, at = nodes[at], at + 1
        for attr in [a for a in dir(node) if a.startswith("_saved_")] + (
            ["variable"] if hasattr(node, "variable") else []
        ):
            try:
                value = getattr(node, attr)
            except RuntimeError:  # freed by a backward already: holds nothing
                continue
            for v in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(v, torch.Tensor):
                    items.append((f".grad_fn graph: {type(node).__name__}.{attr}", v))
        for n, _ in getattr(node, "next_functions", ()):
            if n is not None and id(n) not in ids:
                nodes.append(n)
                ids.add(id(n))
    return items


def _walk(
    where: str, value: Any, found: list, seen: dict[int, int], depth: int = _DEPTH, stop: int | None = None
) -> None:
    """Append ``(path, tensor)`` for every tensor ``value`` reaches; ``seen``: the depth left when each id was
    walked, so an object is walked again only when reached with more depth left (a container one name reaches at
    the depth limit is still walked from a name that reaches it higher up). ``stop``: the size of ``seen`` at which
    this walk ends, ``_BUDGET`` new objects past its size at the start, so each name has a budget of its own."""
    stop = len(seen) + _BUDGET if stop is None else stop
    if depth < 0 or value is None or isinstance(value, _LEAVES) or seen.get(id(value), -1) >= depth:
        return
    if len(seen) > stop:
        return
    seen[id(value)] = depth
    if isinstance(value, torch.Tensor):  # a leaf's .grad, and a non-leaf's kept by retain_grad()
        found.append((where, value))
        keeps_grad = (value.is_leaf or value.retains_grad) and not value.is_nested
        items = [(".grad", value.grad)] if keeps_grad else []
        if value.grad_fn is not None and depth > 0:  # what its graph saved: walked one level, not into their graphs
            items += _graph_saved(value.grad_fn)
            depth = 1
    elif isinstance(value, torch.nn.Module):  # parameters and buffers of every layer, then its other attributes
        items = [(f".{n}", t) for n, t in [*value.named_parameters(), *value.named_buffers()]]
        items += [(f".{k}", v) for k, v in vars(value).items() if k not in ("_parameters", "_buffers")]
    elif isinstance(value, dict):
        items = [(f"[{k!r}]", v) for k, v in list(value.items())]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = [(f"[{i}]", v) for i, v in enumerate(list(value))]
    elif type(value).__module__ == "numpy":  # an array made by .numpy() keeps the tensor as its base
        items = [(".base", getattr(value, "base", None))]
    else:
        attrs = getattr(value, "__dict__", None)
        items = [(f".{k}", v) for k, v in list(attrs.items())] if isinstance(attrs, dict) else []
        items += [(".args", value.args)] if isinstance(value, BaseException) else []
    for step, item in items:
        _walk(where + step, item, found, seen, depth - 1, stop)
    if len(seen) > stop:  # the budget ended this walk inside ``value``: another name may walk it again
        seen[id(value)] = -1


def _shell(ip: Any, sources: Any) -> tuple[Any, tuple[str, ...]]:
    """The shell to look into (``ip``, or the running one; a clear error outside IPython) and the sources."""
    if ip is not None and not isinstance(getattr(ip, "user_ns", None), dict):
        raise type_error("ip", "the IPython shell (get_ipython()) or None for the running one", ip)
    ip = _running_shell() if ip is None else ip
    if ip is None or not isinstance(getattr(ip, "user_ns", None), dict):
        why = "in a script nothing keeps outputs alive."
        raise problem(RuntimeError, f"works inside IPython or Jupyter (get_ipython() is None here); {why}")
    names = (sources,) if isinstance(sources, str) else sources
    known = isinstance(names, (list, tuple, set)) and all(isinstance(x, str) and x in _SOURCES for x in names)
    if not known or not names:
        what = f"some of {_SOURCES} (output history, the last result, the last stored traceback)"
        raise value_error("sources", what, sources)
    return ip, tuple(names)


def _ipython_names(ip: Any) -> set[str]:
    """The names IPython put in ``user_ns`` and still owns (``Out``, ``_``, ``_5`` ...): IPython also pushes them
    into ``user_ns_hidden``, the same object until you assign the name yourself (the test its display hook uses).
    A stand-in shell without it: the names IPython uses."""
    ns, hidden = ip.user_ns, getattr(ip, "user_ns_hidden", None)
    if isinstance(hidden, dict):
        return {n for n, v in ns.items() if n in hidden and hidden[n] is v}
    return {n for n in ns if n in ("Out", "In", "_oh", "_ih", *_UNDERS) or (n[0] == "_" and n.lstrip("_i").isdigit())}


def _forget(spaces: list[Any], name: str, *value: None) -> None:
    """Drop ``name`` from each namespace that has it, or set it to ``value``."""
    for space in (s for s in spaces if name in s):
        space.update({name: value[0]}) if value else space.pop(name)


def _forget_errors(ip: Any) -> None:
    """Drop every place the last error (so its traceback and its frames' locals) is kept."""
    places = [(sys, n) for n in ("last_exc", "last_value", "last_type", "last_traceback")]
    places += [(getattr(ip, "last_execution_result", None), "error_in_exec")]  # right after the failing cell
    for obj, attr in places + [(getattr(ip, n, None), "tb") for n in ("InteractiveTB", "SyntaxTB")]:
        if getattr(obj, attr, None) is not None:
            setattr(obj, attr, None)


def _error_slots(ip: Any) -> list[tuple[str, Any, Any]]:
    """The stored errors (with their causes and contexts) and the locals of their traceback's frames."""
    last, drop = getattr(getattr(ip, "last_execution_result", None), "error_in_exec", None), partial(_forget_errors, ip)
    errors = [e for e in (getattr(sys, "last_exc", None), getattr(sys, "last_value", None), last) if e is not None]
    for error in errors:  # the list grows while it is read
        errors += [e for e in (error.__cause__, error.__context__) if e is not None and all(e is not x for x in errors)]
    slots, frames = [(f"traceback: the error {type(e).__name__}", e, drop) for e in errors], {}
    tbs = [getattr(sys, "last_traceback", None), getattr(getattr(ip, "InteractiveTB", None), "tb", None)]
    for tb in tbs + [e.__traceback__ for e in errors]:
        while tb is not None:
            frames[id(tb.tb_frame)], tb = tb.tb_frame, tb.tb_next
    for f in frames.values():
        # A cell's own frame ("<module>", or "<cell line: 0>" in IPython 7): its locals are your namespace.
        if f.f_locals is not f.f_globals and not f.f_code.co_name.startswith(("<module>", "<cell")):
            slots += [(f"traceback: {f.f_code.co_name}() local {k!r}", v, drop) for k, v in f.f_locals.items()]
    return slots


def _holders(ip: Any, sources: tuple[str, ...]) -> list[tuple[str, Any, Any]]:
    """Where IPython itself keeps objects: ``(name, object, drop)``, ``drop()`` removing that reference."""
    ns, mine, hidden = ip.user_ns, _ipython_names(ip), getattr(ip, "user_ns_hidden", None) or {}
    last, slots = getattr(ip, "last_execution_result", None), []
    if "history" in sources:
        outs = {id(ns[n]): (n, ns[n]) for n in ("_oh", "Out") if n in mine and isinstance(ns[n], dict)}
        slots += [(f"{n}[{k}]", v, partial(o.pop, k, None)) for n, o in outs.values() for k, v in o.items()]
        hook = getattr(getattr(ip, "displayhook", None), "__dict__", {})  # it keeps the last three results too
        for n in [*_UNDERS, *sorted({n for n in [*mine, *hidden] if n[:1] == "_" and n[1:].isdigit()})]:
            keep = [None] if n in _UNDERS else []  # _ __ ___ set to None: IPython still sees them as its own
            spaces = [
                (n, ns if n in mine else {}),
                (f"IPython's hidden {n}", hidden),
                (f"the display hook's {n}", hook),
            ]
            slots += [(where, sp[n], partial(_forget, [sp], n, *keep)) for where, sp in spaces if n in sp]
    if "result" in sources:
        slots.append(
            ("the last execution result", getattr(last, "result", None), partial(setattr, last, "result", None))
        )
    slots += _error_slots(ip) if "traceback" in sources else []
    return [slot for slot in slots if slot[1] is not None]


def _held(ip: Any, sources: tuple[str, ...]) -> tuple[list[tuple[str, torch.Tensor]], list]:
    """``(path, tensor)`` for every tensor only IPython holds (once, where first found), and the ``drop`` of each
    holder that reaches a tensor."""
    ns, names, yours = ip.user_ns, _ipython_names(ip), []
    # Your side: the same walk from every name that is not IPython's, never into the shell or its own stores.
    shell = {id(x) for x in (ip, ns, getattr(ip, "user_ns_hidden", None), getattr(ip, "displayhook", None))}
    shell |= {id(ns[n]) for n in ("Out", "_oh", "In", "_ih") if n in names}
    seen = dict.fromkeys(shell, _DEPTH)  # never walked
    for name, value in [(n, v) for n, v in ns.items() if n not in names]:
        _walk(name, value, yours, seen)
    listed = {key for _, t in yours for key in _storages(t)}  # yours, then each storage found, listed once
    held, drops = [], []
    for slot, value, drop in _holders(ip, sources):
        found: list = []
        _walk(slot, value, found, dict.fromkeys(shell, _DEPTH))
        drops += [drop] if found else []
        for path, t in found:
            keys = set(_storages(t)) or {id(t)}
            if not keys & listed:
                listed |= keys
                held.append((path, t))
    return held, drops


@entry("held_by_ipython")
def held_by_ipython(ip: Any = None, sources: Any = _SOURCES) -> list[HeldTensor]:
    """Tensors kept alive only by IPython: output history (``Out``, ``_``, ``__``, ``___``, ``_N``), the last
    execution result, or the last stored error and its traceback's locals (after an error such as an out-of-memory),
    inside containers, models, NumPy arrays and objects too (see the module's docstring).

    Tensors whose storage one of your own variables also reaches are left out (releasing them frees nothing).
    ``ip``: the shell (default: ``get_ipython()``); ``sources``: some of "history", "result", "traceback".

    >>> from types import SimpleNamespace                      # a stand-in shell: just its namespace
    >>> shell = SimpleNamespace(user_ns={"Out": {3: [torch.zeros(250)]}, "kept": torch.ones(2)})
    >>> [(h.where, h.shape, h.bytes) for h in held_by_ipython(shell)]
    [('Out[3][0]', (250,), 1000)]
    """
    ip, sources = _shell(ip, sources)
    return [HeldTensor(path, t) for path, t in _held(ip, sources)[0]]


@entry("release_ipython_refs")
def release_ipython_refs(ip: Any = None, sources: Any = _SOURCES) -> int:
    """Drop IPython's own references to tensors (every holder that reaches one; ``ip`` and ``sources`` as in
    :func:`held_by_ipython`) and return how many bytes of storage that freed. Your own variables are untouched,
    ``_`` and ``_5`` included when you assigned them yourself.

    >>> from types import SimpleNamespace
    >>> shell = SimpleNamespace(user_ns={"Out": {3: torch.zeros(250)}, "kept": torch.ones(2)})
    >>> release_ipython_refs(shell), shell.user_ns["Out"], shell.user_ns["kept"].shape
    (1000, {}, torch.Size([2]))
    """
    ip, sources = _shell(ip, sources)
    held, drops = _held(ip, sources)
    # Weak references only: no reference of ours may outlive this function's frame.
    storages = {k: s for _, t in held if t.device.type != "meta" for k, s in _storages(t).items()}
    watched, held, storages = {k: (weakref.ref(s), s.nbytes()) for k, s in storages.items()}, None, None
    for drop in drops:
        drop()
    gc.collect()
    return sum(nbytes for ref, nbytes in watched.values() if ref() is None)
