"""Sentinels: guards that watch code run and speak up at the line that does something you did not mean.

* :func:`views_only` -- any operator that returns a tensor with **new storage** raises :class:`CopyError`
  (``reshape`` and ``contiguous`` copy silently when the layout forces them).
* :func:`watch_broadcasts` -- reports elementwise operators whose operands were stretched *against each
  other* (``(N, 1) - (N,)`` gives ``(N, N)``: no operand has the result's shape) by accident, and losses
  called with input and target of different shapes; one-sided broadcasts (a bias, a scale, a scalar) never.

Both work as ``with`` blocks and as decorators; their modes are entered only there, removed by identity after.

>>> x = torch.zeros(2, 3)
>>> with views_only(), watch_broadcasts(action="raise"):  # indexing and t() are views; nothing is stretched
...     y = x[1:].t()
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import _handover
from ._checks import entry, problem, require_bool, type_error, value_error
from ._dispatch import called_from_viewlab, enter_mode, learner_line, remove_mode, storages_of, tensors_in
from .errors import BroadcastStretchError, BroadcastWarning, CopyError

__all__ = ["views_only", "watch_broadcasts"]


class _CallRecorder(TorchFunctionMode):
    """Remembers the outermost torch function being called (``Tensor.reshape``, ``torch.zeros``) and calls
    ``finished(call)`` when it has returned."""

    current: tuple[Any, tuple, dict] | None = None  # (func, args, kwargs) while a call runs
    armed = True  # False: the guard's block ended on another thread; every call is passed on unchanged

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        outer, kwargs = self.current, kwargs or {}
        if not self.armed:
            return func(*args, **kwargs)
        self.current = outer or (func, args, kwargs)
        try:
            out = func(*args, **kwargs)
        except BaseException:
            if outer is None:
                self.finished(None, None)  # the call failed: torch's error comes first, nothing is judged
            raise
        finally:
            self.current = outer
        if outer is None:
            self.finished((func, args, kwargs), out)
        return out

    def finished(self, call: tuple[Any, tuple, dict] | None, out: Any) -> None:
        """Called after each outermost call returned ``out``; with None when it raised."""


def _public_name(func: Any) -> str:
    name = getattr(func, "__name__", str(func))
    owner = getattr(func, "__objclass__", None) or getattr(func, "__self__", None)
    if owner is torch.Tensor or getattr(func, "__qualname__", "").startswith("TensorBase."):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", "") or ""
    functional = module.endswith("functional") or module == "torch._C._nn"  # F.linear is torch._C._nn.linear
    return f"torch.nn.functional.{name}" if functional else f"torch.{name}"


def _why_not_a_view(func: Any, args: tuple, kwargs: dict) -> str:
    name = _public_name(func) if func is not None else ""
    short = name.rsplit(".", 1)[-1]
    base = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if base is None:
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
        self.made: list[tuple] = []  # (weakref to the storage, aten op, shape, nbytes, grew)

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
                if before.get(st.data_ptr(), -1) < st.nbytes() and st.nbytes() and st.resizable():
                    grew = any(t is i for i in ins)  # resize_ and out= hand back the tensor they were given
                    self.made.append((weakref.ref(st), func, tuple(t.shape), st.nbytes(), grew))
        if self.recorder.current is None:  # not inside a torch function (torch.ops called directly)
            self._check((None, args, kwargs))
        return out

    def _check(self, call: tuple[Any, tuple, dict] | None, out: Any = None) -> None:
        alive, self.made = [m for m in self.made if m[0]() is not None], []
        if (
            not alive or call is None or called_from_viewlab(__file__)
        ):  # viewlab's own work (a monitor's warm-up) is not yours
            return
        _, func, shape, nbytes, grew = alive[0]
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


class _Guard:
    """A context manager and decorator that enters a fresh ``make_mode()`` and its ``recorder`` on the calling
    thread. ``name``: the public function that made it. What is active is kept per thread, so one guard used
    on two threads keeps the two apart; as a decorator, each call enters a guard of its own (recursion and
    concurrent calls too). Generator and async functions are refused as decorated functions: the guard would end
    when the call returns its generator or coroutine, before any of the body runs.

    A block that ends on a thread that did not enter it (a generator suspended inside the block, then closed,
    finished or collected on another thread) disarms its modes at once and leaves their removal to the thread
    whose stack holds them (:mod:`viewlab._handover`): it runs it at its next entry into viewlab."""

    def __init__(self, name: str, make_mode: Callable[[], TorchDispatchMode]) -> None:
        self.name, self._make = name, make_mode
        self._lock, self._entered = threading.Lock(), {}  # thread id -> the mode that thread entered
        self._ended: dict[int, Any] = {}  # thread id -> its mode, whose block another thread ended

    def _problem(self, text: str) -> Exception:
        return entry(self.name)(problem)(RuntimeError, text)

    def __enter__(self) -> _Guard:
        me = threading.get_ident()
        if me in self._entered:
            raise self._problem("this guard is already active on this thread; leave its `with` block first.")
        if _handover.pending():
            _handover.sweep()
        mode = self._make()
        enter_mode(mode.recorder)
        try:
            enter_mode(mode)
        except BaseException:
            remove_mode(mode.recorder)
            raise
        with self._lock:
            self._entered[me] = mode
        return self

    def __exit__(self, *exc: object) -> None:
        me = threading.get_ident()
        with self._lock:
            mode = self._entered.pop(me, None)
            others = list(self._entered.items())
            if mode is None and len(others) == 1:  # the block began on that thread and ends on this one
                owner, mode = others[0]
                del self._entered[owner]
                mode.armed = mode.recorder.armed = False
                self._ended[owner] = mode
                _handover.leave_for(owner, functools.partial(self._finish, owner, mode))
                return
            if mode is None:  # ended by another thread already: this thread's own exit only tidies up
                mode = self._ended.pop(me, None)
        if mode is None:
            text = "__exit__ without __enter__ on this thread; use the guard as `with guard: ...`"
            raise self._problem(f"{text} (or as a decorator), on the thread that runs the code.")
        _remove_both(mode)

    def _finish(self, owner: int, mode: Any) -> None:
        """On ``owner``, the thread that entered ``mode``: take it off, its block having ended elsewhere."""
        with self._lock:
            if self._ended.get(owner) is mode:
                del self._ended[owner]
        _remove_both(mode)

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):  # named after the guard's maker: views_only()(5) names views_only
            text = f"used as a decorator, this needs a function, got {type(fn).__name__}."
            raise entry(self.name)(problem)(TypeError, text)
        kind = _suspending_kind(fn)
        if kind:
            name = getattr(fn, "__qualname__", repr(fn))
            text = f"cannot guard {kind} {name} as a decorator: the guard would end as soon as the call returns its"
            text += f" {'generator' if 'generator' in kind else 'coroutine'}, before any of its body runs. Write"
            text += f" `with {self.name}():` inside {name}, around code that does not yield or await."
            raise entry(self.name)(problem)(TypeError, text)

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with _Guard(self.name, self._make):
                return fn(*args, **kwargs)

        return guarded


def _suspending_kind(fn: Callable) -> str:
    """What kind of function suspends its body (empty for a plain one): generators and coroutines run later."""
    if inspect.isasyncgenfunction(fn):
        return "the async generator function"
    if inspect.iscoroutinefunction(fn):
        return "the async function"
    if inspect.isgeneratorfunction(fn):
        return "the generator function"
    return ""


def _remove_both(mode: Any) -> None:
    """Take a guard's two modes off this thread's stacks, wherever they sit now."""
    remove_mode(mode)  # exactly the modes this thread's enter pushed
    remove_mode(mode.recorder)


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
_LOSSES = frozenset(
    "mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits "
    "soft_margin_loss poisson_nll_loss gaussian_nll_loss kl_div hinge_embedding_loss".split()
)
# Calls whose size-1 dims are the learner's own (all of them), and reductions (which drop a dim unless keepdim).
_MAKERS = frozenset("view reshape view_as reshape_as unflatten".split())
_REDUCTIONS = frozenset(
    "sum mean prod amax amin max min argmax argmin std var norm logsumexp median nansum any all".split()
)
_BUSY = threading.local()  # .call: the innermost watcher has the current call; the ones under it only record


def _mutual_stretch(shapes: list[tuple[int, ...]]) -> dict[int, list[tuple[int, int | None, int]]] | None:
    """For shapes that broadcast: operand -> [(dim in the result, size before (None: missing), size after)] it
    was stretched along; None when the broadcast is one-sided (some operand already has the result's shape).

    >>> _mutual_stretch([(5, 1), (5,)])
    {0: [(1, 1, 5)], 1: [(0, None, 5)]}
    >>> _mutual_stretch([(0, 1), (0,)])  # size 0 is a size like any other
    {0: [(1, 1, 0)], 1: [(0, None, 0)]}
    >>> _mutual_stretch([(8, 4), (4,)]) is None
    True
    """
    result = torch.broadcast_shapes(*shapes)
    if len(shapes) < 2 or any(tuple(s) == tuple(result) for s in shapes):
        return None
    stretched: dict[int, list[tuple[int, int | None, int]]] = {}
    for k, shape in enumerate(shapes):
        padded = (None,) * (len(result) - len(shape)) + tuple(shape)
        for d, (before, after) in enumerate(zip(padded, result)):
            if before != after:  # None marks a missing dim: a size (0 included) is never taken for one
                stretched.setdefault(k, []).append((d, before, after))
    return stretched


def _indexed(
    items: tuple, base: torch.Tensor, explicit: frozenset[int], out: torch.Tensor, kept: dict[int, int] | None = None
) -> set[int]:
    """The size-1 dims of ``base[items]`` the learner made: each None, a slice that keeps one element of a
    longer dim, and those ``base`` had made so. Advanced indexing: none. ``kept``, when given, is filled with
    {dim of the result: dim of ``base``} for every dim a slice carried over."""
    if any(isinstance(i, bool) or not (i is None or i is Ellipsis or isinstance(i, (int, slice))) for i in items):
        return set()
    fill = [slice(None)] * (base.dim() - sum(isinstance(i, (int, slice)) for i in items))
    if not any(i is Ellipsis for i in items):
        items = (*items, Ellipsis)
    made, src, dst = set(), 0, 0
    for item in (x for i in items for x in (fill if i is Ellipsis else [i])):
        if item is None or not isinstance(item, int):  # None: a new dim; a slice: base's dim, maybe narrowed
            if item is None or src in explicit or (base.shape[src] != 1 and out.shape[dst] == 1):
                made.add(dst)
            elif kept is not None:
                kept[dst] = src
            src, dst = src + (item is not None), dst + 1
        else:
            src += 1
    return made


class _WatchCalls(_CallRecorder):
    """Remembers where each tensor's size-1 dims came from (the learner's None/unsqueeze/view/reshape/keepdim,
    or not) and whether a reduction dropped one of its dims, and watches loss functions."""

    def __init__(self, watch: _BroadcastWatch) -> None:
        super().__init__()
        self.watch, self.reported = watch, False  # reported: this call was reported (once per call)
        self.origins: dict[int, tuple[weakref.ref, tuple[frozenset[int], bool, str, frozenset[int]]]] = {}

    def record(self, t: torch.Tensor) -> tuple[frozenset[int], bool, str, frozenset[int]] | None:
        """(the dims of size 1 made on purpose, made by a reduction without keepdim, the call, the dims of size 1
        kept from a tensor made before the watch began) or None: not seen."""
        entry = self.origins.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        if not self.armed:
            return func(*args, **(kwargs or {}))
        below = getattr(_BUSY, "call", False)
        if self.current is None:
            self.reported = below  # a watcher entered later has this call: it reports, this one only records
        _BUSY.call = True
        try:
            return super().__torch_function__(func, types, args, kwargs)
        finally:
            _BUSY.call = below

    def finished(self, call: tuple[Any, tuple, dict] | None, out: Any) -> None:
        if call is None:
            return
        func, args, kwargs = call
        ins = tensors_in((*args, *kwargs.values()))
        for t in tensors_in(out if isinstance(out, (list, tuple)) else (out,)):
            try:
                self._remember(t, func, args, kwargs, ins)
            except Exception:  # noqa: BLE001 - never break the learner's call: its size-1 dims stay "not seen"
                continue
        if getattr(func, "__name__", "") in _LOSSES and not self.reported:
            self._check_loss(func, args, kwargs)

    def _remember(self, t: torch.Tensor, func: Any, args: tuple, kwargs: dict, ins: list[torch.Tensor]) -> None:
        name, ones = getattr(func, "__name__", ""), {d for d, n in enumerate(t.shape) if n == 1}
        base = ins[0] if ins else None
        rec = self.record(base) if base is not None else None
        mine, reduced, origin = rec[0] if rec else frozenset(), False, _public_name(func)
        early: set[int] = set()  # size-1 dims kept from a tensor made before the watch (allow_outer's)
        if name in _MAKERS:
            made = ones
        elif name in ("__getitem__", "unsqueeze") and base is not None:
            dim = (*args[1:2], kwargs.get("dim", 0))[0]
            index = args[1] if name == "__getitem__" else (slice(None),) * (dim % t.dim()) + (None,)
            kept: dict[int, int] = {}
            made = _indexed(index if isinstance(index, tuple) else (index,), base, mine, t, kept)
            # indexing keeps the size-1 dims of a tensor made before the watch (or kept from one) as they came
            early = {d for d, s in kept.items() if d in ones and (rec is None or s in rec[3])}
        elif base is not None and any(a is True for a in (kwargs.get("keepdim"), *args[2:3])) and base.dim() == t.dim():
            made = {d for d in ones if base.shape[d] != 1 or d in mine}
            early = {d for d in ones - made if rec is None or d in rec[3]}
        else:
            try:  # elementwise (or same shape): each size-1 dim is made on purpose if an operand's was
                same = bool(ins) and tuple(t.shape) == tuple(torch.broadcast_shapes(*(i.shape for i in ins)))
            except RuntimeError:
                same = False
            recs = [(i, self.record(i)) for i in ins] if same else []
            made = {d + t.dim() - i.dim() for i, r in recs if r for d in r[0]} & ones
            for i, r in recs:  # a size-1 dim an operand made before the watch had (or kept from one) stays so
                shift = t.dim() - i.dim()
                kept = r[3] if r else {d for d in range(i.dim()) if i.shape[d] == 1}
                early |= {d + shift for d in kept}
            early = (early & ones) - made
            reduced = any(r[1] for i, r in recs if r and i.shape == t.shape)
            reduced = reduced or (name in _REDUCTIONS and base is not None and t.dim() < base.dim())
            origin = next((r[2] for _, r in recs if r), origin)
        if ones or reduced:
            key = id(t)  # the weakref's callback forgets the tensor when it dies
            self.origins[key] = (
                weakref.ref(t, functools.partial(_forget, self.origins, key)),
                (frozenset(made), reduced, origin, frozenset(early)),
            )

    def _check_loss(self, func: Any, args: tuple, kwargs: dict) -> None:
        tensors = tensors_in(args[:2]) + tensors_in([kwargs.get("input"), kwargs.get("target")])
        shapes = [tuple(t.shape) for t in tensors[:2]]
        if len(shapes) == 2 and shapes[0] != shapes[1] and not called_from_viewlab(__file__):
            try:
                result = f"broadcasts them to {tuple(torch.broadcast_shapes(*shapes))}"
            except RuntimeError:  # the loss took them without broadcasting
                result = "compares them"
            text = f"watch_broadcasts(): {_public_name(func)} got input of shape {shapes[0]} and target of shape"
            text += f" {shapes[1]}; the loss {result} before averaging, which is rarely what a loss should do."
            fix = " Reshape one to the other's shape first (e.g. input.squeeze(-1) or target.view_as(input))."
            line = learner_line()
            self.reported = True
            self.watch.report(text + fix + (f"\nAt {line}" if line else ""))


def _forget(origins: dict, key: int, ref: weakref.ref) -> None:
    if origins.get(key, (None,))[0] is ref:
        del origins[key]


class _BroadcastWatch(TorchDispatchMode):
    armed = True  # see _CallRecorder.armed

    def __init__(self, report: Callable[[str], None], allow_outer: bool) -> None:
        super().__init__()
        self.report, self.allow_outer = report, allow_outer
        self.recorder = _WatchCalls(self)  # names the public call, knows where size-1 dims came from

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))  # first: an operator torch rejects gives torch's error, no report
        if not self.armed:
            return out
        operands = [a for a in args if isinstance(a, torch.Tensor) and a.dim() > 0]
        if torch.Tag.pointwise in func.tags and len(operands) >= 2 and not self.recorder.reported:
            try:
                stretched = _mutual_stretch([tuple(a.shape) for a in operands])
            except RuntimeError:
                stretched = None
            reasons = self._accidental(operands, stretched) if stretched else []
            if reasons and not called_from_viewlab(__file__):
                self.recorder.reported = True
                self.report(self._message(func, [tuple(a.shape) for a in operands], stretched, reasons))
        return out

    def _accidental(self, operands: list[torch.Tensor], stretched: dict) -> list[str]:
        """Why the stretch was not meant, one reason per size-1 dim not made on purpose (empty: intended)."""
        reasons, rank, how = [], max(a.dim() for a in operands), ", not from None/unsqueeze/view/reshape/keepdim=True"
        for k, dims in stretched.items():
            rec = self.recorder.record(operands[k])
            for d, before, _ in dims:
                own = d - rank + operands[k].dim()
                if before is None and rec is not None and rec[1]:
                    reasons.append(f"operand {k} lost a dim in {rec[2]} (a reduction without keepdim=True)")
                elif before is not None and rec is None and not self.allow_outer:
                    reasons.append(f"dim {own} of operand {k} has size 1 from before the watch began{how}")
                elif before is not None and rec is not None and own in rec[3]:  # kept from before the block
                    if not self.allow_outer:
                        reasons.append(f"dim {own} of operand {k} has size 1 from before the watch began{how}")
                elif before is not None and rec is not None and own not in rec[0]:
                    reasons.append(f"dim {own} of operand {k} has size 1 from {rec[2]}{how}")
        return list(dict.fromkeys(reasons))

    def _message(self, func: Any, shapes: list, stretched: dict, reasons: list[str]) -> str:
        result, call = tuple(torch.broadcast_shapes(*shapes)), self.recorder.current
        called = _public_name(call[0]) if call else str(func)
        parts = []
        for k, dims in stretched.items():
            moves = ", ".join(f"dim {d} ({'missing' if b is None else b} -> {a})" for d, b, a in dims)
            parts.append(f"operand {k} {shapes[k]} along {moves}")
        fix = "make the operands' shapes equal first (reshape or view_as one of them)"
        for k, (mine, other) in enumerate([(shapes[0], shapes[1]), (shapes[1], shapes[0])]):
            if mine[-1:] == (1,) and mine[:-1] == other:  # (N, 1) against (N,): a trailing 1 too many
                fix = f"squeeze dim {len(mine) - 1} of operand {k} ({mine} -> {mine[:-1]})"
                break
        fix += "; for an outer product, make its size-1 dims on purpose (x[:, None], unsqueeze, keepdim=True)"
        line = learner_line()
        # Reported while the learner's code runs: named after the guard, as views_only's CopyError is.
        return (
            f"watch_broadcasts(): {called} ({func}) broadcast {' and '.join(map(str, shapes))} to {result}: "
            f"the operands were stretched against each other ({'; '.join(parts)}), so the result has "
            f"{math.prod(result):,} elements and a shape no operand has. Not on purpose: {'; '.join(reasons)}. To "
            f"compute elementwise, {fix} (or pass allow_outer=True for those made before the watch began)."
            + (f"\nAt {line}" if line else "")
        )


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
