"""IPython and Jupyter lookups in one room: are we in a kernel, on Colab, and what IPython keeps alive.

* :func:`in_kernel`, :func:`on_colab` -- where the code runs (the monitor picks its display from them).
* :func:`held_by_ipython` / :func:`release_ipython_refs` -- tensors kept alive only by IPython's output
  history (``Out``, ``_``, ``__``, ``___``, ``_5``), its last result, or the last stored traceback.

Nothing here imports IPython at module load.

>>> in_kernel(), on_colab()
(False, False)
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

import torch

from ._checks import entry, problem, type_error, value_error
from ._dispatch import storage_key
from ._format import exact_bytes

__all__ = ["in_kernel", "on_colab", "HeldTensor", "held_by_ipython", "release_ipython_refs"]


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


_HISTORY_NAMES = ("_", "__", "___")
_SOURCES = ("history", "result", "traceback")


class HeldTensor:
    """A tensor that IPython keeps alive, and ``where`` (``"Out[3]"``, ``"_"``, ``"traceback: f() local 'x'"``).

    >>> HeldTensor("_", torch.zeros(2, 3))
    HeldTensor(_: shape (2, 3), torch.float32, cpu, 24 B)
    """

    def __init__(self, where: str, tensor: torch.Tensor) -> None:
        self.where, self.shape, self.dtype, self.device = where, tuple(tensor.shape), tensor.dtype, tensor.device
        self.bytes = tensor.untyped_storage().nbytes() if tensor.layout == torch.strided else 0

    def __repr__(self) -> str:
        return f"HeldTensor({self.where}: shape {self.shape}, {self.dtype}, {self.device}, {exact_bytes(self.bytes)})"


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


def _history_slots(ip: Any, sources: tuple[str, ...]) -> list[tuple[str, Any]]:
    ns = ip.user_ns
    slots: list[tuple[str, Any]] = []
    if "history" in sources:
        out = ns.get("Out") or ns.get("_oh") or {}
        slots += [(f"Out[{number}]", value) for number, value in sorted(out.items())] if isinstance(out, dict) else []
        slots += [(name, ns[name]) for name in _HISTORY_NAMES if name in ns]
        slots += [(name, value) for name, value in ns.items() if name.startswith("_") and name[1:].isdigit()]
    if "result" in sources:
        result = getattr(getattr(ip, "last_execution_result", None), "result", None)
        slots += [("the last execution result", result)] if result is not None else []
    if "traceback" in sources:
        tb = getattr(sys, "last_traceback", None) or getattr(getattr(ip, "InteractiveTB", None), "tb", None)
        while tb is not None:
            frame = tb.tb_frame
            # A cell's own frame ("<module>", or "<cell line: 0>" in IPython 7): its locals are your namespace.
            if frame.f_locals is not frame.f_globals and not frame.f_code.co_name.startswith(("<module>", "<cell")):
                where = f"traceback: {frame.f_code.co_name}() local"
                slots += [(f"{where} {local!r}", value) for local, value in frame.f_locals.items()]
            tb = tb.tb_next
    return slots


def _held_in(value: Any) -> list[torch.Tensor]:
    """The tensors one namespace value holds: itself, or the items of a list, tuple or dict (an output such as
    ``(loss, logits)``); unlike :func:`viewlab._dispatch.tensors_in` (an operator's arguments) it reads dicts."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
    return [v for v in items if isinstance(v, torch.Tensor)]


@entry("held_by_ipython")
def held_by_ipython(ip: Any = None, sources: Any = _SOURCES) -> list[HeldTensor]:
    """Tensors kept alive only by IPython: output history (``Out``, ``_``, ``__``, ``___``, ``_N``), the last
    execution result, or the locals of the last stored traceback (after an error such as an out-of-memory).

    Tensors whose storage one of your own variables also reaches are left out (releasing them frees nothing).
    ``ip``: the shell (default: ``get_ipython()``); ``sources``: some of "history", "result", "traceback".

    >>> from types import SimpleNamespace                      # a stand-in shell: just its namespace
    >>> shell = SimpleNamespace(user_ns={"Out": {3: torch.zeros(250)}, "kept": torch.ones(2)})
    >>> [(h.where, h.shape, h.bytes) for h in held_by_ipython(shell)]
    [('Out[3]', (250,), 1000)]
    """
    ip, sources = _shell(ip, sources)
    # Storages one of your own variables also reaches: releasing IPython's reference would free nothing.
    yours = [v for k, v in ip.user_ns.items() if not k.startswith("_") and k not in ("Out", "In")]
    own = {storage_key(t) for v in yours for t in _held_in(v)}
    held, seen = [], set()
    for where, value in _history_slots(ip, sources):
        for t in _held_in(value):
            key = (where, storage_key(t))
            if key[1] not in own and key not in seen:
                seen.add(key)
                held.append(HeldTensor(where, t))
    return held


@entry("release_ipython_refs")
def release_ipython_refs(ip: Any = None, sources: Any = _SOURCES) -> int:
    """Drop IPython's own references to tensors (those :func:`held_by_ipython` lists; ``ip`` and ``sources``
    as there) and return how many bytes of storage that freed. Your own variables are untouched.

    >>> from types import SimpleNamespace
    >>> shell = SimpleNamespace(user_ns={"Out": {3: torch.zeros(250)}, "kept": torch.ones(2)})
    >>> release_ipython_refs(shell), shell.user_ns["Out"], shell.user_ns["kept"].shape
    (1000, {}, torch.Size([2]))
    """
    ip, sources = _shell(ip, sources)
    # Weak references only: no reference of ours may outlive this line (comprehension names do not leak).
    kept = [
        t.untyped_storage() for _, v in _history_slots(ip, sources) for t in _held_in(v) if t.layout == torch.strided
    ]
    watched = {s._cdata: (weakref.ref(s), s.nbytes()) for s in kept}  # storage key -> (weak reference, bytes)
    del kept
    ns, last = ip.user_ns, getattr(ip, "last_execution_result", None)
    if "history" in sources:
        out = ns.get("Out")
        for number in [n for n, v in out.items() if _held_in(v)] if isinstance(out, dict) else ():
            del out[number]
        # IPython pushes _, __, ___ and _N with interactive=False, which also records them in user_ns_hidden.
        for space in (ns, getattr(ip, "user_ns_hidden", None) or {}):
            for name in [name for name, value in space.items() if _held_in(value)]:
                if name in _HISTORY_NAMES:
                    space[name] = None
                elif name.startswith("_") and name[1:].isdigit():
                    del space[name]
        hook = getattr(ip, "displayhook", None)
        for attr in _HISTORY_NAMES:
            if _held_in(getattr(hook, attr, None)):
                setattr(hook, attr, None)
    if "result" in sources and _held_in(getattr(last, "result", None)):
        last.result = None
    if "traceback" in sources:  # every place the last error's traceback (so its frames' locals) is kept
        if getattr(sys, "last_traceback", None) is not None:
            sys.last_traceback = sys.last_value = sys.last_type = None
            if hasattr(sys, "last_exc"):
                sys.last_exc = None
        if getattr(last, "error_in_exec", None) is not None:  # right after the failing cell
            last.error_in_exec = None
        for printer in ("InteractiveTB", "SyntaxTB"):
            if getattr(getattr(ip, printer, None), "tb", None) is not None:
                getattr(ip, printer).tb = None
    gc.collect()
    return sum(nbytes for ref, nbytes in watched.values() if ref() is None)
