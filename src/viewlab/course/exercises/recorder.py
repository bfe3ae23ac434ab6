"""What the learner's function did while it ran, recorded with torch's public modes in the calling thread.

* :class:`OpRecorder` (a ``TorchDispatchMode``): every aten operator, the ones run by the autograd engine,
  tensors built from Python data, the first use of each family in :data:`~.rules.FAMILIES`, the first tensor
  made with new storage (any device, meta included) and the bytes borrowed from outside torch.
* :class:`ApiRecorder` (a ``TorchFunctionMode``): the torch functions called before they decompose
  (:data:`~.rules.API_NAMES`: ``repeat_interleave``, ``scaled_dot_product_attention``, ``_make_dual``,
  ``torch.autograd.grad``, ``Tensor.backward``), and where data leaves torch (``.tolist()``, ``.numpy()``,
  ``Tensor.__array__``, which numpy calls to read a tensor).
* :class:`Hit`: one thing seen (a family, the operator or call, the learner's line), and :class:`Seen`, the
  whole record of one run as plain data (strings and numbers): what :mod:`.messages` judges, in this process
  or in another one that recorded the run.

A mode sees the thread that entered it: work in a thread the function starts is not recorded here.

>>> import torch
>>> with OpRecorder() as rec:
...     _ = torch.ones(2).repeat(3)
>>> rec.first_hit("repeat").op
'aten.repeat.default'
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from viewlab._checks import entry, require_str
from viewlab._dispatch import enter_mode, remove_mode, storage_of, tensors_in
from viewlab._learner import learner_line

from .rules import API_NAMES, FAMILIES, op_in

__all__ = ["Hit", "at", "OpRecorder", "ApiRecorder", "Seen", "autograd_name", "EXITS"]


def at(line: str | None) -> str:
    """`` at <place>: `<code>```, the code quoted so that the sentence after it reads apart from it.

    >>> at("line 2 of this cell: y = x.repeat(2)")
    ' at line 2 of this cell: `y = x.repeat(2)`'
    """
    if not line:
        return ""
    place, sep, code = line.partition(": ")
    return f" at {place}: `{code}`" if sep else f" at {line}"


def _storage_key(t: torch.Tensor) -> int | None:
    """An identity for ``t``'s storage, equal for every view of it (how the recorder tells the inputs' storages
    from new ones), or None when it has none.

    >>> x = torch.zeros(4)
    >>> _storage_key(x) == _storage_key(x[1:]), _storage_key(x) == _storage_key(x.clone())
    (True, False)
    """
    st = storage_of(t)
    return None if st is None else st._cdata


@dataclass(frozen=True)
class Hit:
    """A forbidden operator (or call) seen while the learner's function ran, with the learner's line if found,
    and the torch function it ran inside when that is not the operator itself (``torch.repeat_interleave``)."""

    family: str
    op: str
    line: str | None = None  # as viewlab._dispatch.learner_line says it: "line 3 of this cell: code"
    inside: str | None = None

    def where(self) -> str:
        """:func:`at` of the line.

        >>> Hit("repeat", "aten.repeat.default", "line 2 of this cell: y = x.repeat(2)").where()
        ' at line 2 of this cell: `y = x.repeat(2)`'
        """
        return at(self.line)

    def ran(self) -> str:
        """What the learner's function did, as a verb and an object.

        >>> Hit("tile", "numpy.tile").ran(), Hit("copy", "aten.clone.default", None, "Tensor.repeat_interleave").ran()
        ('called numpy.tile', 'ran aten.clone.default (inside Tensor.repeat_interleave)')
        """
        if self.op.startswith(("aten.", "prims.", "the autograd engine", "forward-mode autograd")):
            inside = f" (inside {self.inside})" if self.inside and self.inside.split(".")[-1] not in self.op else ""
            return f"ran {self.op}{inside}"
        return f"called {self.op}"


#: Calls that expand their operands themselves, as part of their own work (matmul its batch dims: notebook 07, B04):
#: that expand is torch's, not the answer's, so it does not count against a rule that forbids expand.
_BROADCASTS_ITSELF = frozenset({"Tensor.matmul", "torch.matmul", "Tensor.__matmul__", "Tensor.__rmatmul__"})


class OpRecorder(TorchDispatchMode):
    """Records every aten operator run while active: counts, ops run by the autograd engine, ``torch.tensor``
    built from Python data, the first use of each family in :data:`FAMILIES` (with the learner's line), the
    first tensor made with new storage on any device (meta included) and the bytes of memory borrowed from
    outside torch (numpy, a buffer: a storage torch cannot resize) among the operators' tensors.

    ``inputs``: the function's arguments, whose storages are neither new nor borrowed. Nothing is recorded at
    import; enter it with ``with OpRecorder() as rec:`` (pushed and removed by identity, so it nests with
    ``viewlab.measure``); it records the thread that entered it (a mode is per thread).

    >>> import numpy as np
    >>> with OpRecorder() as rec:
    ...     _ = torch.from_numpy(np.zeros(3)) + 1
    >>> rec.created.op, rec.borrowed_bytes
    ('aten.lift_fresh.default on cpu', 24)
    """

    def __init__(self, inputs: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.n_ops = 0
        self.names: list[str] = []
        self.lifted_elements = 0  # elements of tensors made from Python data (torch.tensor([...]))
        self.hits: dict[str, Hit] = {}
        self.created: Hit | None = None  # family "created": the first new storage
        self.inside: Callable[[], str | None] = lambda: None  # the torch function running now (set by the watch)
        self._inputs = {k for k in map(_storage_key, inputs) if k is not None}
        self._known = set(self._inputs)
        self._borrowed: dict[int, int] = {}

    @property
    def borrowed_bytes(self) -> int:
        return sum(self._borrowed.values())

    def note_borrowed(self, t: torch.Tensor) -> None:
        """Count ``t``'s storage as borrowed when torch cannot resize it (numpy's or a buffer's memory)."""
        key = _storage_key(t)
        if key is None or key in self._inputs or key in self._borrowed:
            return
        st = storage_of(t)
        if st is not None and not st.resizable():
            self._borrowed[key] = st.nbytes()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        name = str(func)
        self.n_ops += 1
        self.names.append(name)
        in_backward = torch._C._current_graph_task_id() != -1
        for family, (ops, _fix) in FAMILIES.items():
            if family in self.hits or (family == "expand" and self.inside() in _BROADCASTS_ITSELF):
                continue
            if (family == "autograd" and in_backward) or op_in(name, ops):
                self.hits[family] = Hit(
                    family,
                    "the autograd engine (running " + name + ")" if family == "autograd" else name,
                    learner_line(),
                    self.inside(),
                )
        out = func(*args, **(kwargs or {}))
        if name.startswith("aten.lift_fresh") and isinstance(out, torch.Tensor):
            self.lifted_elements += out.numel()
        for t in tensors_in(args):
            self.note_borrowed(t)
        for t in tensors_in(out if isinstance(out, (tuple, list)) else (out,)):
            key = _storage_key(t)
            if key is not None and key not in self._known:
                self._known.add(key)
                self.note_borrowed(t)
                if self.created is None:
                    self.created = Hit("created", f"{name} on {t.device}", learner_line(), self.inside())
        return out

    @entry("OpRecorder.first_hit")
    def first_hit(self, family: str) -> Hit | None:
        """The first operator of ``family`` (a name of :data:`~.rules.FAMILIES`) seen, or None."""
        require_str(family, "family")
        return self.hits.get(family)

    def __enter__(self) -> OpRecorder:
        enter_mode(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        remove_mode(self)


def autograd_name(shown: str) -> str:
    """How a message names autograd seen by name: the engine (backward, grad) or forward-mode AD.

    >>> autograd_name("torch.autograd.grad"), autograd_name("torch.func.jacfwd")
    ('the autograd engine (through torch.autograd.grad)', 'forward-mode autograd (through torch.func.jacfwd)')
    """
    reverse = shown.endswith((".grad", ".backward", "vjp", "jacrev")) and "forward_ad" not in shown
    return f"{'the autograd engine' if reverse else 'forward-mode autograd'} (through {shown})"


def _api_name(func: Any) -> tuple[str, str]:
    """(bare name, name as the learner wrote it): ``("repeat_interleave", "Tensor.repeat_interleave")``."""
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(func), str(func)
    bare = getattr(func, "__name__", str(func))
    qual = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", "") or ""
    if qual.startswith(("TensorBase.", "Tensor.")):
        return bare, f"Tensor.{bare}"
    if module in ("torch._C._nn", "torch.nn.functional"):
        return bare, f"torch.nn.functional.{bare}"
    public = module.startswith("torch.") and "._" not in module
    return bare, f"{module}.{bare}" if public else f"torch.{bare}"


_API_FAMILY = {n: family for family, names in API_NAMES.items() for n in names}
#: torch functions through which the data leaves torch (rule torch_only), seen on a tensor of more than one element
EXITS = ("tolist", "numpy", "__array__")


class ApiRecorder(TorchFunctionMode):
    """Records the torch functions called while active (before they decompose): the first of each family in
    :data:`~.rules.API_NAMES` or :data:`~.rules.FAMILIES` (a ``torch.ops.aten`` call by name), the first one
    through which data leaves torch, and, per thread, the one running now (:meth:`running`).

    >>> with ApiRecorder() as api:
    ...     _ = torch.arange(4).repeat_interleave(2).tolist()
    >>> api.hits["repeat"].op, api.exits[0].op
    ('Tensor.repeat_interleave', 'Tensor.tolist')
    """

    def __init__(self) -> None:
        super().__init__()
        self.hits: dict[str, Hit] = {}
        self.exits: list[Hit] = []
        self._now = threading.local()

    def running(self) -> str | None:
        """The outermost torch function running now in this thread (None between calls)."""
        return getattr(self._now, "name", None)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        bare, shown = _api_name(func)
        family = _API_FAMILY.get(bare)
        if family is None and bare.startswith("aten."):
            match = [f for f, (ops, _) in FAMILIES.items() if op_in(bare, ops)]
            family = match[0] if match else None
        if family is not None and family not in self.hits:
            self.hits[family] = Hit(family, autograd_name(shown) if family == "autograd" else shown, learner_line())
        if bare in EXITS and not self.exits and any(isinstance(a, torch.Tensor) and a.numel() > 1 for a in args):
            self.exits.append(Hit("torch_only", shown, learner_line()))
        outer = self.running()
        self._now.name = shown if outer is None else outer
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self._now.name = outer

    def __enter__(self) -> ApiRecorder:
        enter_mode(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        remove_mode(self)


@dataclass
class Seen:
    """One run of the learner's function, as plain data: what :mod:`.messages` judges.

    Built by :meth:`.watch.Watch.seen` from the recorders and the answer's source; a grader that runs the
    answer in another process can build it from what that process recorded (every field is a str, an int,
    a :class:`Hit` of str, or a dict or list of them).

    Fields: ``ops`` (family -> the first aten operator of it), ``named`` (family -> the first torch function,
    numpy function or autograd call of it seen by name), ``created`` (the first tensor made with new
    storage), ``made`` (a tensor made over memory from outside torch, by name: ``torch.frombuffer``),
    ``borrowed_bytes``, ``n_ops``, ``lifted_elements``, ``numpy`` / ``exit`` / ``viewlab`` (the first such
    call), ``loop`` (``(what, line)`` from the source), ``peak_bytes`` (``viewlab.measure``'s, or None) and
    ``allocations`` (``[operator, bytes]`` for each operator that made new storage while measured, in order).

    >>> Seen(ops={"repeat": Hit("repeat", "aten.repeat.default")}).first("repeat").op
    'aten.repeat.default'
    """

    ops: dict[str, Hit] = field(default_factory=dict)
    named: dict[str, Hit] = field(default_factory=dict)
    created: Hit | None = None
    made: Hit | None = None
    borrowed_bytes: int = 0
    n_ops: int = 0
    lifted_elements: int = 0
    numpy: Hit | None = None
    exit: Hit | None = None
    viewlab: Hit | None = None
    loop: tuple[str, str | None] | None = None
    peak_bytes: int | None = None
    allocations: list[tuple[str, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (dicts, lists, str, int, None): what another process sends back.

        >>> Seen.from_dict(Seen(n_ops=2, exit=Hit("torch_only", "Tensor.tolist")).to_dict()).exit.op
        'Tensor.tolist'
        """
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Seen:
        """The record :meth:`to_dict` gave (tuples may come back as lists, as JSON has them)."""
        out = cls(**data)
        out.ops = {k: Hit(**h) for k, h in (data.get("ops") or {}).items()}
        out.named = {k: Hit(**h) for k, h in (data.get("named") or {}).items()}
        for name in ("created", "made", "numpy", "exit", "viewlab"):
            found = data.get(name)
            setattr(out, name, None if found is None else Hit(**found))
        loop = data.get("loop")
        out.loop = None if loop is None else (loop[0], loop[1])
        out.allocations = [(name, int(n)) for name, n in data.get("allocations") or ()]
        return out

    def first(self, family: str) -> Hit | None:
        """The first hit of ``family``: autograd by name (it says which), the others by the operator run."""
        by_op, by_name = self.ops.get(family), self.named.get(family)
        return (by_name or by_op) if family == "autograd" else (by_op or by_name)
