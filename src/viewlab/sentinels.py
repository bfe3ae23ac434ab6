"""Sentinels: guards that watch code run and speak up at the line that does something you did not mean.

* :func:`views_only` -- any operator that returns a tensor with **new storage** raises :class:`CopyError`
  (``reshape`` and ``contiguous`` copy silently when the layout forces them).
* :func:`watch_broadcasts` -- reports elementwise operators whose operands were stretched *against each
  other* (``(N, 1) - (N,)`` gives ``(N, N)``: no operand has the result's shape, leading 1s aside) by accident, and losses
  called with input and target of different shapes; one-sided broadcasts (a bias, a scale, a scalar) never.

Both work as ``with`` blocks and as decorators; their modes are entered only there, removed by identity after.

>>> x = torch.zeros(2, 3)
>>> with views_only(), watch_broadcasts(action="raise"):  # indexing and t() are views; nothing is stretched
...     y = x[1:].t()
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._checks import entry, require_bool, type_error, value_error
from ._dispatch import storages_of, tensors_in
from ._guard import _CallRecorder, _Guard, _public_name
from ._learner import called_from_viewlab, learner_line
from ._stretch import _BroadcastWatch, _mutual_stretch  # noqa: F401 - _mutual_stretch: notebooks/conftest.py
from .errors import BroadcastStretchError, BroadcastWarning, CopyError

__all__ = ["views_only", "watch_broadcasts"]


def _why_not_a_view(func: Any, args: tuple, kwargs: dict) -> str:
    name = _public_name(func) if func is not None else ""
    short = name.rsplit(".", 1)[-1]
    base = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if base is None:
        inside = tensors_in(args)  # torch.cat, torch.stack: the inputs come in a list
        if inside:
            return f"it copies its {len(inside)} input tensors into new memory, which always allocates"
        return "it creates a tensor from scratch, which always allocates"
    desc = f"shape {tuple(base.shape)}, " + (
        f"stride {tuple(base.stride())}, offset {base.storage_offset()}"
        if base.layout == torch.strided
        else str(base.layout)
    )
    if short == "contiguous":
        return f"the input ({desc}) was not contiguous, so contiguous() had to copy it"
    if short in ("reshape", "reshape_as", "flatten", "ravel", "view_as"):
        # Adjacent dims (of size > 1) a, b merge into one without a copy only when stride[a] = stride[b] * size[b].
        dims = [d for d in range(base.dim()) if base.shape[d] != 1]
        blocked = [(a, b) for a, b in zip(dims, dims[1:]) if base.stride(a) != base.stride(b) * base.shape[b]]
        if blocked:
            pairs = "; ".join(
                f"dims {a} and {b}: stride[{a}] = {base.stride(a)} but stride[{b}] * size[{b}] = "
                f"{base.stride(b)} * {base.shape[b]} = {base.stride(b) * base.shape[b]}"
                for a, b in blocked
            )
            text = f"the input ({desc}) cannot be read in the new shape with strides alone; the dimensions that would"
            return f"{text} have to merge are not laid out back to back ({pairs})"
        return f"the input ({desc}) cannot be viewed in the new shape"
    return f"{short} computes new values (input {desc}), which need new storage"


class _ViewsOnlyMode(TorchDispatchMode):
    """Notes every storage an operator returns that is new or grew; when the learner's outermost call has
    returned, one of them still alive (returned, or kept as a .grad) is a copy. Temporaries that die inside
    the call (the tensor ``x[0] = 5`` wraps 5 in, an index list made a tensor) are not the learner's copy."""

    armed = True  # see _CallRecorder.armed

    def __init__(self, allow: frozenset[str]) -> None:
        super().__init__()
        self.allow, self.recorder = allow, _CallRecorder()  # recorder: which public call made the storage
        self.recorder.finished = self._check  # type: ignore[method-assign]
        self.made: list[tuple] = []  # (weakref to the storage, aten op, shape, nbytes, grew, data pointer)

    def _allowed(self, func: Any) -> bool:
        aten = str(func)  # e.g. "aten.clone.default"
        packet = aten.split(".")[1] if aten.startswith("aten.") else aten
        call = self.recorder.current
        public = _public_name(call[0]).rsplit(".", 1)[-1] if call else ""
        return bool({aten, packet, public} & self.allow)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        if not self.armed:
            return func(*args, **kwargs)
        # lift_fresh hands over a tensor torch.tensor(...) just built: new storage although it is the input.
        fresh = func is torch.ops.aten.lift_fresh.default
        ins = () if fresh else tensors_in((*args, *kwargs.values()))
        before = {st.data_ptr(): st.nbytes() for t in ins for st in storages_of(t)}
        out = func(*args, **kwargs)
        if self._allowed(func):
            return out
        for t in tensors_in(out if isinstance(out, (list, tuple)) else (out,)):
            for st in storages_of(t) if t.device.type != "meta" else ():
                # New (or grown: resize_, out=) unless empty or borrowed (NumPy, DLPack: nothing was copied).
                # Shared memory is not resizable either, but share_memory_() copies the bytes into it, through a
                # copy_ into storage that none of the learner's call's tensors had.
                new = before.get(st.data_ptr(), -1) < st.nbytes() or self._copied_into_other(func, st)
                if new and st.nbytes() and _allocated_here(st):
                    grew = any(t is i for i in ins)  # resize_ and out= hand back the tensor they were given
                    self.made.append((weakref.ref(st), func, tuple(t.shape), st.nbytes(), grew, st.data_ptr()))
        if self.recorder.current is None:  # not inside a torch function (torch.ops called directly)
            self._check((None, args, kwargs))
        return out

    def _copied_into_other(self, func: Any, st: Any) -> bool:
        """A copy_ whose destination is storage none of the tensors of the learner's current call has."""
        call = self.recorder.current
        if func is not torch.ops.aten.copy_.default or call is None:
            return False
        held = {s.data_ptr() for x in tensors_in((*call[1], *call[2].values())) for s in storages_of(x)}
        return st.data_ptr() not in held

    def _check(self, call: tuple[Any, tuple, dict] | None, out: Any = None) -> None:
        # alive: its storage object still exists, or a tensor of the call now uses it (share_memory_ swaps the
        # storage under the tensor it was given, and the storage object the operator returned is gone)
        used = set()
        if call is not None:
            used = {s.data_ptr() for x in tensors_in((*call[1], *call[2].values())) for s in storages_of(x)}
        alive, self.made = [m for m in self.made if m[0]() is not None or m[5] in used], []
        if (
            not alive or call is None or called_from_viewlab(__file__)
        ):  # viewlab's own work (a monitor's warm-up) is not yours
            return
        _, func, shape, nbytes, grew, _ = alive[0]
        called = _public_name(call[0]) if call[0] is not None else str(func)
        why = "it grew the storage of a tensor it was given (resize_, or out= smaller than the result)"
        why = why if grew else _why_not_a_view(*call)
        line = learner_line()
        # The learner's code runs here, after views_only() returned: named after the guard, not by problem().
        made = f"{nbytes:,} bytes for a tensor of shape {shape}; PyTorch ran {func}"
        fix = "If a copy is what you want, make it explicit: x.contiguous(), x.clone(), or x.reshape(...) outside"
        fix += f" the block; or allow it here: views_only(allow=({called.rsplit('.', 1)[-1]!r},))."
        where = f"At {line}\n" if line else ""
        raise CopyError(f"views_only(): {called} made new storage ({made}). Why: {why}.\n{where}{fix}")


def _allocated_here(st: Any) -> bool:
    """Whether torch allocated this storage (resizable, or CPU shared memory), rather than borrowed it."""
    return bool(st.resizable() or (st.device.type == "cpu" and st.is_shared()))


@entry("views_only")
def views_only(allow: Iterable[str] = ()) -> _Guard:
    """Guarantee that the code inside makes no copy (views, in-place operators, metadata queries pass).

    A call copies when a storage it made or grew (``resize_``, a too small ``out=``) is still alive when it
    returns: its result, or what it kept (a ``.grad``). Temporaries freed inside the call (the tensor that
    ``x[0] = 5`` wraps 5 in) and empty storages are not copies; a call that fails raises torch's own error.
    The :class:`CopyError` says which call copied, why it could not be a view, and how to copy on purpose.
    ``allow``: operators that may allocate, by the name you call (``"reshape"``) or PyTorch's.

    Seen: the thread that entered the guard (one guard object used on several threads guards each on its
    own). Not seen: other threads, those started inside the block included; memory a kernel uses inside one
    operator; NumPy's; viewlab's own helpers (a ``MemoryMonitor`` started inside).

    >>> x = torch.arange(6).view(2, 3)
    >>> with views_only():
    ...     y = x.t().reshape(3, 2)         # a transpose can be read as (3, 2) with strides: a view
    >>> try:
    ...     with views_only():
    ...         z = x.t().reshape(6)        # flattening the transpose must copy
    ... except CopyError as err:
    ...     print(str(err).split(" (")[0])
    views_only(): Tensor.reshape made new storage
    """
    names = (allow,) if isinstance(allow, str) else allow
    if not isinstance(names, (list, tuple, set, frozenset)) or not all(isinstance(a, str) and a for a in names):
        raise type_error("allow", "operator names such as ('reshape', 'clone')", allow, "Pass allow=('reshape',).")
    return _Guard("views_only", lambda: _ViewsOnlyMode(frozenset(names)))


# Losses that compare an input with a target elementwise: different shapes broadcast silently.
@entry("watch_broadcasts")
def watch_broadcasts(action: str = "warn", allow_outer: bool = False) -> _Guard:
    """Report broadcasts that succeed but compute the wrong thing (which: the module docstring), with a fix.

    A stretch against each other is meant when every stretched size-1 dim was made so on purpose inside the
    block: ``x[:, None]``, ``unsqueeze``, ``view``/``reshape``, ``keepdim=True`` (or kept from such a tensor by
    elementwise ops, ``.float()``, indexing). It is reported when a size-1 dim came from elsewhere (a model's
    output, a literal shape such as ``torch.zeros(N, 1)``, a tensor made before the block) or when an operand
    stretched along a missing dim lost it in a reduction without ``keepdim=True``. ``allow_outer=True``: size-1
    dims made before the block count as meant; those seen made otherwise are still reported.

    ``action``: ``"warn"`` (a :class:`BroadcastWarning`), ``"raise"`` (:class:`BroadcastStretchError`) or a
    function called with each report. An operator torch rejects raises torch's own error and is not reported;
    each call of yours is reported at most once, by the innermost watcher. viewlab's own helpers are not
    watched. Seen: the thread that entered the watch. Not seen: other threads; a size-1 dim moved by
    ``transpose``/``permute`` counts as not made on purpose.

    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     with watch_broadcasts():
    ...         pred, target = torch.nn.Linear(3, 1)(torch.ones(4, 3)), torch.zeros(4)
    ...         diff = pred - target                      # (4, 1) - (4,) -> (4, 4): the 1 is the model's
    ...         bias = torch.zeros(4, 3) + torch.ones(3)  # one-sided: silent
    ...         i = torch.arange(4)
    ...         causal = i[:, None] >= i[None, :]         # (4, 1) against (1, 4), both made so: meant, silent
    >>> len(seen), diff.shape, causal.shape
    (1, torch.Size([4, 4]), torch.Size([4, 4]))
    """
    if not callable(action) and not (isinstance(action, str) and action in ("warn", "raise")):
        raise value_error("action", "'warn', 'raise' or a function taking the message", action)
    allow_outer = require_bool(allow_outer, "allow_outer")

    def report(message: str) -> None:
        if callable(action):
            action(message)
        elif action == "raise":
            raise BroadcastStretchError(message)
        else:
            warnings.warn(message, BroadcastWarning, stacklevel=2)

    return _Guard("watch_broadcasts", lambda: _BroadcastWatch(report, allow_outer))
