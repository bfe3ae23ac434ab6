"""Sentinels: guards that watch code run and speak up at the line that does something you did not mean.

* :func:`views_only` -- inside it, any operator that returns a tensor with **new storage** raises
  :class:`CopyError` (a guaranteed view instead of a silent copy: ``reshape`` and ``contiguous`` copy
  when the layout forces them).
* :func:`watch_broadcasts` -- reports elementwise operators whose operands were stretched *against each
  other* (``(N, 1) - (N,)`` gives ``(N, N)``) and loss functions called with input and target of
  different shapes; one-sided broadcasts (a bias, a scale) are never reported.
* :func:`held_by_ipython` / :func:`release_ipython_refs` -- tensors kept alive only by IPython's output
  history (``Out``, ``_``, ``__``, ``___``, ``_5``), its last result, or the last stored traceback.

Nothing here starts at import: the modes are entered only inside the ``with`` block (or the decorated
call) and removed by identity when it ends.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ._dispatch import called_from_viewlab, learner_line, storage_key, tensors_in
from ._dispatch import enter_mode as _enter_mode
from ._dispatch import remove_mode as _remove_mode
from .errors import BroadcastStretchError, BroadcastWarning, CopyError

__all__ = [
    "views_only",
    "watch_broadcasts",
    "HeldTensor",
    "held_by_ipython",
    "release_ipython_refs",
]


# ---------------------------------------------------------------------- where the learner is


def _learner_line() -> str | None:
    return learner_line()


def _called_from_viewlab() -> bool:
    return called_from_viewlab(__file__)


def _describe(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, stride {tuple(t.stride())}, offset {t.storage_offset()}"


_tensors = tensors_in
_storage_key = storage_key


class _CallRecorder(TorchFunctionMode):
    """Remembers the outermost torch function being called (``Tensor.reshape``, ``torch.zeros``)."""

    def __init__(self) -> None:
        super().__init__()
        self.current: tuple[Any, tuple, dict] | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        outer = self.current
        if outer is None:
            self.current = (func, args, kwargs)
        try:
            return func(*args, **kwargs)
        finally:
            self.current = outer


def _public_name(func: Any) -> str:
    name = getattr(func, "__name__", str(func))
    owner = getattr(func, "__objclass__", None) or getattr(func, "__self__", None)
    if owner is torch.Tensor or getattr(func, "__qualname__", "").startswith("TensorBase."):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", "") or ""
    return f"torch.nn.functional.{name}" if module.endswith("functional") else f"torch.{name}"


# ---------------------------------------------------------------------- views_only


def _blocking_dims(t: torch.Tensor) -> list[tuple[int, int]]:
    """Adjacent dimension pairs that cannot be merged into one without a copy: for dims ``i, i+1`` (both of
    size > 1), a view can merge them only when ``stride[i] == stride[i+1] * size[i+1]``."""
    dims = [d for d in range(t.dim()) if t.shape[d] != 1]
    return [(a, b) for a, b in zip(dims, dims[1:]) if t.stride(a) != t.stride(b) * t.shape[b]]


def _why_not_a_view(func: Any, args: tuple, kwargs: dict) -> str:
    name = _public_name(func) if func is not None else ""
    short = name.rsplit(".", 1)[-1]
    base = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if base is None:
        return "it creates a tensor from scratch, which always allocates"
    if short == "contiguous":
        return f"the input ({_describe(base)}) was not contiguous, so contiguous() had to copy it"
    if short in ("reshape", "reshape_as", "flatten", "ravel", "view_as"):
        blocked = _blocking_dims(base)
        if blocked:
            pairs = "; ".join(
                f"dims {a} and {b}: stride[{a}] = {base.stride(a)} but stride[{b}] * size[{b}] = "
                f"{base.stride(b)} * {base.shape[b]} = {base.stride(b) * base.shape[b]}"
                for a, b in blocked
            )
            return (
                f"the input ({_describe(base)}) cannot be read in the new shape with strides alone; the "
                f"dimensions that would have to merge are not laid out back to back ({pairs})"
            )
        return f"the input ({_describe(base)}) cannot be viewed in the new shape"
    return f"{short} computes new values (input {_describe(base)}), which need new storage"


_LIFT_FRESH = torch.ops.aten.lift_fresh.default


class _ViewsOnlyMode(TorchDispatchMode):
    def __init__(self, allow: frozenset[str], recorder: _CallRecorder) -> None:
        super().__init__()
        self.allow = allow
        self.recorder = recorder

    def _allowed(self, func: Any) -> bool:
        aten = str(func)  # e.g. "aten.clone.default"
        packet = aten.split(".")[1] if aten.startswith("aten.") else aten
        call = self.recorder.current
        public = _public_name(call[0]).rsplit(".", 1)[-1] if call else ""
        return bool({aten, packet, public} & self.allow)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        # lift_fresh hands over a tensor torch.tensor(...) just built: new storage although it is the input.
        inputs = set() if func is _LIFT_FRESH else {_storage_key(t) for t in _tensors((*args, *kwargs.values()))}
        out = func(*args, **kwargs)
        for t in _tensors(out if isinstance(out, (list, tuple)) else (out,)):
            key = _storage_key(t)
            if key is None or key in inputs or t.device.type == "meta" or self._allowed(func):
                continue
            if not t.untyped_storage().resizable():  # borrowed memory (NumPy, DLPack): nothing was copied
                continue
            call = self.recorder.current
            called = _public_name(call[0]) if call else str(func)
            why = _why_not_a_view(*(call if call else (None, args, kwargs)))
            line = _learner_line()
            raise CopyError(
                f"views_only(): {called} made new storage ({t.untyped_storage().nbytes():,} bytes for a tensor of "
                f"shape {tuple(t.shape)}; PyTorch ran {func}). Why: {why}.\n"
                + (f"At {line}\n" if line else "")
                + "If a copy is what you want, make it explicit: x.contiguous(), x.clone(), or x.reshape(...) "
                f"outside the block; or allow it here: views_only(allow=({called.rsplit('.', 1)[-1]!r},))."
            )
        return out


class _Guard:
    """A context manager that is also a decorator, entering its modes on the calling thread."""

    def __init__(self, make_modes: Callable[[], tuple[TorchFunctionMode, TorchDispatchMode]]) -> None:
        self._make = make_modes
        self._active: list[tuple[TorchFunctionMode, TorchDispatchMode]] = []

    def __enter__(self) -> _Guard:
        function_mode, dispatch_mode = self._make()
        function_mode.__enter__()
        try:
            _enter_mode(dispatch_mode)
        except BaseException:
            function_mode.__exit__(None, None, None)
            raise
        self._active.append((function_mode, dispatch_mode))
        return self

    def __exit__(self, *exc: object) -> None:
        function_mode, dispatch_mode = self._active.pop()
        _remove_mode(dispatch_mode)
        function_mode.__exit__(None, None, None)

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"used as a decorator, this needs a function, got {type(fn).__name__}.")

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return guarded


def _names(allow: Any, where: str) -> frozenset[str]:
    if isinstance(allow, str):
        allow = (allow,)
    if not isinstance(allow, (list, tuple, set, frozenset)) or not all(isinstance(a, str) and a for a in allow):
        raise TypeError(f"{where}(allow=...) expects operator names such as ('reshape', 'clone'), got {allow!r}.")
    return frozenset(allow)


def views_only(allow: Iterable[str] = ()) -> _Guard:
    """Guarantee that the code inside makes no copy: an operator returning new storage raises :class:`CopyError`.

    Views (``view``, ``t``, ``expand``, slicing, a ``reshape`` that can be a view), in-place operators on
    existing storage and metadata queries pass. The error names the operator, the input's shape, stride and
    offset, why it could not be a view, and how to copy on purpose. ``allow`` lists operators that may
    allocate, by the name you call (``"reshape"``, ``"clone"``) or PyTorch's (``"aten.clone.default"``).
    Works as ``with views_only(): ...`` or as a decorator ``@views_only()``.

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
    allowed = _names(allow, "views_only")

    def make() -> tuple[TorchFunctionMode, TorchDispatchMode]:
        recorder = _CallRecorder()
        return recorder, _ViewsOnlyMode(allowed, recorder)

    return _Guard(make)


# ---------------------------------------------------------------------- watch_broadcasts


_LOSSES = frozenset(
    {
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "soft_margin_loss",
        "poisson_nll_loss",
        "gaussian_nll_loss",
        "kl_div",
        "hinge_embedding_loss",
    }
)


def mutual_stretch(shapes: list[tuple[int, ...]]) -> dict[int, list[tuple[int, int, int]]] | None:
    """For operand shapes that broadcast, which operand was stretched along which dim (right-aligned index in
    the result, size before, size after) -- or None when the broadcast is one-sided (some operand already
    has the result's shape, so the others were only stretched to fit it).

    >>> mutual_stretch([(5, 1), (5,)])
    {0: [(1, 1, 5)], 1: [(0, 0, 5)]}
    >>> mutual_stretch([(8, 4), (4,)]) is None
    True
    """
    result = torch.broadcast_shapes(*shapes)
    if len(shapes) < 2 or any(tuple(s) == tuple(result) for s in shapes):
        return None
    stretched: dict[int, list[tuple[int, int, int]]] = {}
    for k, shape in enumerate(shapes):
        padded = (0,) * (len(result) - len(shape)) + tuple(shape)  # 0 marks a missing dimension
        for d, (before, after) in enumerate(zip(padded, result)):
            if before != after:
                stretched.setdefault(k, []).append((d, before, after))
    return stretched if len([k for k in stretched if stretched[k]]) >= 2 else None


class _BroadcastWatch(TorchDispatchMode):
    def __init__(self, report: Callable[[str], None], allow_outer: bool, recorder: _CallRecorder) -> None:
        super().__init__()
        self.report = report
        self.allow_outer = allow_outer
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        if torch.Tag.pointwise in func.tags and not self.allow_outer:
            operands = [a for a in args if isinstance(a, torch.Tensor) and a.dim() > 0]
            shapes = [tuple(a.shape) for a in operands]
            if len(shapes) >= 2:
                try:
                    stretched = mutual_stretch(shapes)
                except RuntimeError:  # not broadcastable: torch raises its own error below
                    stretched = None
                if stretched and not _called_from_viewlab():
                    self.report(_stretch_message(func, self.recorder, shapes, stretched))
        return func(*args, **kwargs)


def _stretch_message(func: Any, recorder: _CallRecorder, shapes: list, stretched: dict) -> str:
    result = tuple(torch.broadcast_shapes(*shapes))
    call = recorder.current
    called = _public_name(call[0]) if call else str(func)
    parts = []
    for k, dims in stretched.items():
        moves = ", ".join(f"dim {d} ({'missing' if b == 0 else b} -> {a})" for d, b, a in dims)
        parts.append(f"operand {k} {shapes[k]} along {moves}")
    numel = 1
    for n in result:
        numel *= n
    first, second = shapes[0], shapes[1]
    if len(first) == len(second) + 1 and first[-1] == 1 and first[:-1] == second:
        fix = f"squeeze dim {len(first) - 1} of operand 0 ({first} -> {first[:-1]})"
    elif len(second) == len(first) + 1 and second[-1] == 1 and second[:-1] == first:
        fix = f"squeeze dim {len(second) - 1} of operand 1 ({second} -> {second[:-1]})"
    else:
        fix = "make the operands' shapes equal first (reshape or view_as one of them)"
    fix += "; if an outer product is what you meant, pass allow_outer=True"
    line = _learner_line()
    return (
        f"watch_broadcasts(): {called} ({func}) broadcast {' and '.join(map(str, shapes))} to {result}: "
        f"the operands were stretched against each other ({'; '.join(parts)}), so the result has "
        f"{numel:,} elements, more than any operand. To compute elementwise, {fix}." + (f"\nAt {line}" if line else "")
    )


class _LossWatch(_CallRecorder):
    def __init__(self, report: Callable[[str], None]) -> None:
        super().__init__()
        self.report = report

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        if self.current is None and getattr(func, "__name__", "") in _LOSSES:
            tensors = _tensors(args[:2]) + _tensors([kwargs.get("input"), kwargs.get("target")])
            if len(tensors) >= 2 and tuple(tensors[0].shape) != tuple(tensors[1].shape) and not _called_from_viewlab():
                line = _learner_line()
                self.report(
                    f"watch_broadcasts(): {_public_name(func)} got input of shape {tuple(tensors[0].shape)} and "
                    f"target of shape {tuple(tensors[1].shape)}; the loss broadcasts them to "
                    f"{tuple(torch.broadcast_shapes(tensors[0].shape, tensors[1].shape))} before averaging, "
                    "which is rarely what a loss should do. Reshape one to the other's shape first "
                    "(e.g. input.squeeze(-1) or target.view_as(input))." + (f"\nAt {line}" if line else "")
                )
        return super().__torch_function__(func, types, args, kwargs)


def watch_broadcasts(action: str = "warn", allow_outer: bool = False) -> _Guard:
    """Report broadcasts that succeed but compute the wrong thing.

    Inside it, an elementwise or comparison operator whose operands were stretched *against each other* --
    no operand has the result's shape, as in ``(N, 1) - (N,)`` giving ``(N, N)`` -- is reported with the
    operator, the shapes, the dimensions stretched and a likely fix; so is a loss function called with input
    and target of different shapes. One-sided broadcasts (a bias ``(D,)`` on ``(N, D)``, a scale
    ``(1, C, 1, 1)`` on ``(B, C, H, W)``, a scalar) are never reported. ``action="warn"`` issues a
    :class:`BroadcastWarning`; ``"raise"`` raises :class:`BroadcastStretchError`. Operations inside
    viewlab's own helpers (a mask built by ``padding_mask``, say) are not reported: it watches your code. ``allow_outer=True``
    silences intended outer products (loss-shape checks stay on). ``action`` may also be a function: it is
    called with each report's text (to collect them, say) and the code goes on.

    >>> pred, target = torch.zeros(4, 1), torch.zeros(4)
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     with watch_broadcasts():
    ...         diff = pred - target                      # (4, 1) - (4,) -> (4, 4)
    ...         bias = torch.zeros(4, 3) + torch.ones(3)  # one-sided: silent
    >>> len(seen), diff.shape
    (1, torch.Size([4, 4]))
    """
    if not callable(action) and not (isinstance(action, str) and action in ("warn", "raise")):
        raise ValueError(f"watch_broadcasts(action={action!r}): pass 'warn', 'raise' or a function taking the message.")
    if not isinstance(allow_outer, bool):
        raise TypeError(f"watch_broadcasts(allow_outer=...) expects True or False, got {allow_outer!r}.")

    def report(message: str) -> None:
        if callable(action):
            action(message)
        elif action == "raise":
            raise BroadcastStretchError(message)
        else:
            warnings.warn(message, BroadcastWarning, stacklevel=2)

    def make() -> tuple[TorchFunctionMode, TorchDispatchMode]:
        recorder = _LossWatch(report)
        return recorder, _BroadcastWatch(report, allow_outer, recorder)

    return _Guard(make)


# ---------------------------------------------------------------------- what IPython keeps alive


class HeldTensor:
    """A tensor that IPython keeps alive: ``where`` (e.g. ``"Out[3]"``, ``"_"``, ``"traceback: f() local 'x'"``)."""

    def __init__(self, where: str, tensor: torch.Tensor) -> None:
        self.where = where
        self.shape = tuple(tensor.shape)
        self.dtype = tensor.dtype
        self.device = tensor.device
        self.bytes = tensor.untyped_storage().nbytes() if tensor.layout == torch.strided else 0

    def __repr__(self) -> str:
        return f"HeldTensor({self.where}: shape {self.shape}, {self.dtype}, {self.device}, {self.bytes:,} B)"


def _shell(ip: Any, func: str = "held_by_ipython") -> Any:
    if ip is not None and not isinstance(getattr(ip, "user_ns", None), dict):
        raise TypeError(
            f"{func}(ip=...) expects the IPython shell (get_ipython()) or None for the running one; "
            f"got {type(ip).__name__}."
        )
    if ip is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython comes with the course
            get_ipython = None
        ip = get_ipython() if get_ipython else None
    if ip is None or not isinstance(getattr(ip, "user_ns", None), dict):
        raise RuntimeError(
            f"{func}() works inside IPython or Jupyter (get_ipython() is None here); "
            "in a script nothing keeps outputs alive."
        )
    return ip


_HISTORY_NAMES = ("_", "__", "___")
_SOURCES = ("history", "result", "traceback")


def _sources(sources: Any, where: str) -> tuple[str, ...]:
    given = sources
    if isinstance(sources, str):
        sources = (sources,)
    if (
        not isinstance(sources, (list, tuple, set))
        or not sources
        or not all(isinstance(x, str) for x in sources)
        or not set(sources) <= set(_SOURCES)
    ):
        raise ValueError(
            f"{where}(sources={given!r}): pass some of {_SOURCES} "
            "(output history, the last result, the last stored traceback)."
        )
    return tuple(sources)


def _history_slots(ip: Any, sources: tuple[str, ...] = _SOURCES) -> list[tuple[str, Any]]:
    ns = ip.user_ns
    slots: list[tuple[str, Any]] = []
    if "history" in sources:
        out = ns.get("Out") or ns.get("_oh") or {}
        for number, value in sorted(out.items()) if isinstance(out, dict) else []:
            slots.append((f"Out[{number}]", value))
        for name in _HISTORY_NAMES:
            if name in ns:
                slots.append((name, ns[name]))
        for name, value in ns.items():
            if name.startswith("_") and name[1:].isdigit():
                slots.append((name, value))
    if "result" in sources:
        result = getattr(getattr(ip, "last_execution_result", None), "result", None)
        if result is not None:
            slots.append(("the last execution result", result))
    if "traceback" in sources:
        tb = getattr(sys, "last_traceback", None) or getattr(getattr(ip, "InteractiveTB", None), "tb", None)
        while tb is not None:
            frame = tb.tb_frame
            # A cell's own frame ("<module>", or "<cell line: 0>" in IPython 7): its locals are your namespace.
            if frame.f_locals is not frame.f_globals and not frame.f_code.co_name.startswith(("<module>", "<cell")):
                for local, value in frame.f_locals.items():
                    slots.append((f"traceback: {frame.f_code.co_name}() local {local!r}", value))
            tb = tb.tb_next
    return slots


def _tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, torch.Tensor)]
    return []


def held_by_ipython(ip: Any = None, sources: Any = _SOURCES) -> list[HeldTensor]:
    """Tensors kept alive only by IPython: output history (``Out``, ``_``, ``__``, ``___``, ``_N``), the last
    execution result, or the locals of the last stored traceback (after an error such as an out-of-memory).

    A tensor whose storage one of your own variables also reaches is not listed (releasing it would free
    nothing).
    ``ip`` defaults to the running shell (``get_ipython()``); ``sources`` picks some of ``"history"``,
    ``"result"`` and ``"traceback"``. See :func:`release_ipython_refs`.

    >>> from types import SimpleNamespace                      # a stand-in shell: just its namespace
    >>> shell = SimpleNamespace(user_ns={"Out": {3: torch.zeros(250)}, "kept": torch.ones(2)})
    >>> [(h.where, h.shape, h.bytes) for h in held_by_ipython(shell)]
    [('Out[3]', (250,), 1000)]
    """
    ip, sources = _shell(ip, "held_by_ipython"), _sources(sources, "held_by_ipython")
    # Storages one of your own variables also reaches: releasing IPython's reference would free nothing.
    own = {
        _storage_key(t)
        for k, v in ip.user_ns.items()
        if not k.startswith("_") and k not in ("Out", "In")
        for t in _tensors_in(v)
    }
    held, seen = [], set()
    for where, value in _history_slots(ip, sources):
        for t in _tensors_in(value):
            key = _storage_key(t)
            if key in own or (where, key) in seen:
                continue
            seen.add((where, key))
            held.append(HeldTensor(where, t))
    return held


def release_ipython_refs(ip: Any = None, sources: Any = _SOURCES) -> int:
    """Drop IPython's own references to tensors (history entries, ``_``/``__``/``___``, ``_N``, the last
    result, the last traceback) and return how many bytes of storage that freed (storages that really died).

    Your own variables are untouched. ``sources`` as for :func:`held_by_ipython`.

    >>> from types import SimpleNamespace
    >>> shell = SimpleNamespace(user_ns={"Out": {3: torch.zeros(250)}, "kept": torch.ones(2)})
    >>> release_ipython_refs(shell), shell.user_ns["Out"], shell.user_ns["kept"].shape
    (1000, {}, torch.Size([2]))
    """
    import gc
    import weakref

    ip, sources = _shell(ip, "release_ipython_refs"), _sources(sources, "release_ipython_refs")
    watched = {}  # storage key -> (weak reference to the storage, its bytes)
    for _where, value in _history_slots(ip, sources):
        for t in _tensors_in(value):
            if t.layout == torch.strided:
                storage = t.untyped_storage()
                watched[storage._cdata] = (weakref.ref(storage), storage.nbytes())
                del storage
            del t  # no reference of ours may outlive the loop
        value = None
    ns = ip.user_ns
    out = ns.get("Out") if "history" in sources else None
    if isinstance(out, dict):
        for number in [n for n, v in out.items() if _tensors_in(v)]:
            del out[number]
    # IPython pushes _, __, ___ and _N with interactive=False, which also records them in user_ns_hidden.
    for space in (ns, getattr(ip, "user_ns_hidden", None) or {}) if "history" in sources else ():
        for name in list(space):
            if _tensors_in(space[name]):
                if name in _HISTORY_NAMES:
                    space[name] = None
                elif name.startswith("_") and name[1:].isdigit():
                    del space[name]
    hook = getattr(ip, "displayhook", None) if "history" in sources else None
    for attr in _HISTORY_NAMES:
        if hook is not None and _tensors_in(getattr(hook, attr, None)):
            setattr(hook, attr, None)
    result = getattr(ip, "last_execution_result", None) if "result" in sources else None
    if result is not None and _tensors_in(getattr(result, "result", None)):
        result.result = None
    if "traceback" in sources and getattr(sys, "last_traceback", None) is not None:
        sys.last_traceback = sys.last_value = sys.last_type = None
        if hasattr(sys, "last_exc"):
            sys.last_exc = None
    last = getattr(ip, "last_execution_result", None) if "traceback" in sources else None
    if getattr(last, "error_in_exec", None) is not None:  # right after the failing cell, its result holds the error
        last.error_in_exec = None
    for printer in (
        ("InteractiveTB", "SyntaxTB") if "traceback" in sources else ()
    ):  # IPython's traceback printers keep the last one too
        if getattr(getattr(ip, printer, None), "tb", None) is not None:
            getattr(ip, printer).tb = None
    gc.collect()
    return sum(nbytes for ref, nbytes in watched.values() if ref() is None)
