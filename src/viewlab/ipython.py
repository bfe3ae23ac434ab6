"""IPython and Jupyter lookups in one room: are we in a kernel, on Colab, and what IPython keeps alive.

* :func:`in_kernel`, :func:`on_colab` -- where the code runs (the monitor picks its display from them).
* :func:`held_by_ipython` / :func:`release_ipython_refs` -- tensors kept alive only by IPython: its output
  history (``Out``/``_oh``, ``_``, ``__``, ``___``, ``_5``, the display hook's copies), its last result, or the
  last stored error (``sys.last_exc``/``last_value``/``last_traceback``: the exception and its frames' locals).

Each holder is walked into containers (lists, tuples, sets, dicts), ``nn.Module`` parameters and buffers,
NumPy arrays sharing a tensor's storage and objects' attributes, :data:`DEPTH` levels deep. A tensor counts as
held only by IPython when no variable of yours reaches its storage by the same walk. Not seen: closures,
``__slots__``, C extension objects, and anything past the depth or the :data:`BUDGET` of objects per walk.

Nothing here imports IPython at module load.

>>> in_kernel(), on_colab()
(False, False)
"""

from __future__ import annotations

import functools
import gc
import sys
import types
import weakref
from typing import Any

import torch

from ._checks import entry, problem, type_error, value_error
from ._dispatch import storage_of
from ._format import exact_bytes

__all__ = ["in_kernel", "on_colab", "HeldTensor", "held_by_ipython", "release_ipython_refs"]
DEPTH, BUDGET = 6, 50_000  # levels followed from one name; objects looked at per walk (a list of a million)


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
# The tensors that hold a sparse or nested tensor's data (it has no storage of its own).
_PARTS = {torch.sparse_coo: ("_indices", "_values"), torch.jagged: ("values", "offsets")}
_PARTS.update({k: ("crow_indices", "col_indices", "values") for k in (torch.sparse_csr, torch.sparse_bsr)})
_PARTS.update({k: ("ccol_indices", "row_indices", "values") for k in (torch.sparse_csc, torch.sparse_bsc)})
_LEAVES = (str, bytes, bytearray, int, float, complex, type, types.ModuleType, types.FunctionType, types.MethodType)
_LEAVES += (types.BuiltinFunctionType, weakref.ref, range, torch.dtype, torch.device)


def _storages(t: torch.Tensor) -> dict[int, Any]:
    """The storages holding ``t``'s data, by identity (a sparse tensor's indices and values)."""
    parts = [getattr(t, name)() for name in _PARTS.get(t.layout, ())] or [t]
    return {s._cdata: s for s in map(storage_of, parts) if s is not None}


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


def _walk(where: str, value: Any, found: list, seen: set[int], depth: int = DEPTH) -> None:
    """Append ``(path, tensor)`` for every tensor ``value`` reaches; ``seen``: ids already walked (and skipped)."""
    if depth < 0 or value is None or isinstance(value, _LEAVES) or id(value) in seen or len(seen) > BUDGET:
        return
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        found.append((where, value))
        items = [(".grad", value.grad)] if value.is_leaf and not value.is_nested else []
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
        _walk(where + step, item, found, seen, depth - 1)


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
    """The names in ``user_ns`` that IPython put there and still owns (``Out``, ``_``, ``_5``, ``_i5`` ...): a
    name pushed by IPython is also in ``user_ns_hidden``, with the same object until you assign it yourself
    (the test IPython's own display hook uses). A stand-in shell without it: the names IPython uses."""
    ns, hidden = ip.user_ns, getattr(ip, "user_ns_hidden", None)
    if isinstance(hidden, dict):
        return {n for n, v in ns.items() if n in hidden and hidden[n] is v}
    numbered = {n for n in ns if n.lstrip("_i").isdigit() and n.startswith("_")}
    return numbered | {n for n in ns if n in ("Out", "In", "_oh", "_ih", "_dh", "_i", "_ii", "_iii", *_UNDERS)}


def _errors(ip: Any) -> list[BaseException]:
    """The stored errors (``sys.last_*``, the failing cell's ``error_in_exec``) with their causes and contexts."""
    last = getattr(getattr(ip, "last_execution_result", None), "error_in_exec", None)
    errors = [e for e in (getattr(sys, "last_exc", None), getattr(sys, "last_value", None), last) if e is not None]
    for error in errors:  # the list grows while it is read
        errors += [e for e in (error.__cause__, error.__context__) if e is not None and all(e is not x for x in errors)]
    return errors


def _forget(spaces: list[Any], name: str, *value: None) -> None:
    """Drop ``name`` from each namespace that has it, or set it to ``value`` (``_``: kept, as None)."""
    for space in spaces:
        if name in space:
            space.update({name: value[0]}) if value else space.pop(name)


def _forget_errors(ip: Any) -> None:
    """Drop every place the last error (so its traceback and its frames' locals) is kept."""
    places = [(sys, n) for n in ("last_exc", "last_value", "last_type", "last_traceback")]
    places += [(getattr(ip, "last_execution_result", None), "error_in_exec")]  # right after the failing cell
    for obj, attr in places + [(getattr(ip, n, None), "tb") for n in ("InteractiveTB", "SyntaxTB")]:
        if getattr(obj, attr, None) is not None:
            setattr(obj, attr, None)


def _holders(ip: Any, sources: tuple[str, ...]) -> list[tuple[str, Any, Any]]:
    """Where IPython itself keeps objects: ``(name, object, drop)``, ``drop()`` removing that reference."""
    ns, mine, hidden = ip.user_ns, _ipython_names(ip), getattr(ip, "user_ns_hidden", None) or {}
    hook, last, forget = getattr(ip, "displayhook", None), getattr(ip, "last_execution_result", None), _forget
    slots: list[tuple[str, Any, Any]] = []
    if "history" in sources:
        outs = {id(ns[n]): (n, ns[n]) for n in ("_oh", "Out") if n in mine and isinstance(ns[n], dict)}
        slots += [(f"{n}[{k}]", v, functools.partial(o.pop, k, None)) for n, o in outs.values() for k, v in o.items()]
        numbered = sorted(n for n in mine if n[1:].isdigit() and n[0] == "_")
        slots += [(n, ns[n], functools.partial(forget, [ns, hidden], n)) for n in numbered]
        for n in _UNDERS:  # kept as None, so IPython still sees them as its own and updates them
            same = hasattr(hook, n) and n in mine and getattr(hook, n) is ns[n]  # the display hook's copy
            if n in mine:
                spaces = [ns, hidden, vars(hook)] if same else [ns, hidden]
                slots.append((n, ns[n], functools.partial(forget, spaces, n, None)))
            elif n in hidden:  # you assigned it: IPython's copy in user_ns_hidden still holds the old one
                slots.append((f"IPython's hidden {n}", hidden[n], functools.partial(forget, [hidden], n, None)))
            if hasattr(hook, n) and not same:  # the display hook keeps the last three results for itself
                slots.append((f"the display hook's {n}", getattr(hook, n), functools.partial(setattr, hook, n, None)))
    if "result" in sources:
        slots.append(
            ("the last execution result", getattr(last, "result", None), lambda: setattr(last, "result", None))
        )
    if "traceback" in sources:
        errors, drop = _errors(ip), functools.partial(_forget_errors, ip)
        slots += [(f"traceback: the error {type(e).__name__}", e, drop) for e in errors]
        tbs = [getattr(sys, "last_traceback", None), getattr(getattr(ip, "InteractiveTB", None), "tb", None)]
        frames: dict[int, Any] = {}
        for tb in tbs + [e.__traceback__ for e in errors]:
            while tb is not None:
                frames[id(tb.tb_frame)], tb = tb.tb_frame, tb.tb_next
        for frame in frames.values():
            # A cell's own frame ("<module>", or "<cell line: 0>" in IPython 7): its locals are your namespace.
            if frame.f_locals is not frame.f_globals and not frame.f_code.co_name.startswith(("<module>", "<cell")):
                where = f"traceback: {frame.f_code.co_name}() local"
                slots += [(f"{where} {local!r}", value, drop) for local, value in frame.f_locals.items()]
    return [slot for slot in slots if slot[1] is not None]


def _held(ip: Any, sources: tuple[str, ...]) -> tuple[list[tuple[str, torch.Tensor]], list]:
    """``(path, tensor)`` for every tensor only IPython holds, and the holders that reach any tensor."""
    ns, names = ip.user_ns, _ipython_names(ip)
    # Your side: the same walk from every name that is not IPython's, never into the shell or its own stores.
    shell = {id(x) for x in (ip, ns, getattr(ip, "user_ns_hidden", None), getattr(ip, "displayhook", None))}
    shell |= {id(ns[n]) for n in ("Out", "_oh", "In", "_ih") if n in names}
    yours: list = []
    seen = set(shell)
    for name, value in list(ns.items()):
        if name not in names:
            _walk(name, value, yours, seen)
    own = {key for _, t in yours for key in _storages(t)}
    held, reaching, listed = [], [], set()
    for slot, value, drop in _holders(ip, sources):
        found: list = []
        _walk(slot, value, found, set(shell))
        reaching += [(slot, drop)] if found else []
        for path, t in found:
            keys = frozenset(_storages(t)) or frozenset([id(t)])
            if not keys & own and (slot, keys) not in listed:
                listed.add((slot, keys))
                held.append((path, t))
    return held, reaching


@entry("held_by_ipython")
def held_by_ipython(ip: Any = None, sources: Any = _SOURCES) -> list[HeldTensor]:
    """Tensors kept alive only by IPython: output history (``Out``, ``_``, ``__``, ``___``, ``_N``), the last
    execution result, or the last stored error and its traceback's locals (after an error such as an out-of-memory),
    found inside containers, models, NumPy arrays and objects (see the module's docstring).

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
    held, reaching = _held(ip, sources)
    # Weak references only: no reference of ours may outlive this function's frame.
    storages = {k: s for _, t in held if t.device.type != "meta" for k, s in _storages(t).items()}
    watched = {k: (weakref.ref(s), s.nbytes()) for k, s in storages.items()}
    del held, storages
    for _, drop in reaching:
        drop()
    gc.collect()
    return sum(nbytes for ref, nbytes in watched.values() if ref() is None)
