"""Input validation shared by the helpers: one place that turns bad input into a clear error.

Every public function of viewlab checks its arguments with these helpers *before* it calls torch or
matplotlib. Each error is a ``TypeError`` (wrong kind of thing: type, dtype) or a ``ValueError``
(right kind, wrong value: rank, shape, device, range) whose message names the function the learner
called (``split_heads()``), the argument (```num_heads```), what came in (:func:`describe_value`: type,
shape, dtype, device, or the value itself) and what to pass instead.

The function's name is not passed around: the public function carries ``@entry("split_heads")``, and
every message raised while it runs (by these validators or by :func:`problem`) starts with ``split_heads()``.

>>> @entry("split_heads")
... def split_heads(x, num_heads):
...     return require_int(num_heads, "num_heads", minimum=1)
>>> split_heads(None, 2.5)
Traceback (most recent call last):
TypeError: split_heads(): `num_heads` must be an int >= 1; got float 2.5. Pass a whole number, e.g. num_heads=2.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import operator
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import torch

from ._dispatch import pending, sweep

# Dtype families, as names that read well in a message ("must hold floats"), and the cast to each.
FLOAT, COMPLEX, INT, BOOL = "float", "complex", "int", "bool"
_KIND_WORDS = {FLOAT: "floating-point numbers", COMPLEX: "complex numbers", INT: "integers", BOOL: "booleans"}
_KIND_FIX = {FLOAT: ".float()", COMPLEX: ".to(torch.complex64)", INT: ".long()", BOOL: ".bool()"}
INT64_MAX = 2**63 - 1  # sizes beyond this do not fit torch's int64 sizes
_QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}


def describe_value(obj: Any) -> str:
    """What came in, in words: tensors by type, shape, dtype and device, other values by type and value.

    >>> describe_value(torch.zeros(2, 3, dtype=torch.float64)), describe_value([1, 2]), describe_value(None)
    ('a tensor of shape (2, 3), dtype torch.float64, on cpu', 'list [1, 2]', 'None')
    """
    if obj is None:
        return "None"
    if isinstance(obj, torch.Tensor):
        extra = "" if obj.layout == torch.strided else f", layout {obj.layout}"
        if not extra and getattr(obj, "is_nested", False):
            extra = ", nested"
        try:
            shape = str(tuple(obj.shape))
        except Exception:  # noqa: BLE001 - nested tensors have no single shape
            shape = "(irregular)"
        return f"a tensor of shape {shape}, dtype {obj.dtype}, on {obj.device}{extra}"
    if type(obj).__module__ == "numpy" and hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return f"a numpy.{type(obj).__name__} of shape {tuple(obj.shape)}, dtype {obj.dtype}"
    try:
        text = " ".join(repr(obj).split())
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(obj).__name__} object>"
    return f"{type(obj).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


# The boundary: which public function the learner called.
_CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("viewlab_caller", default=None)
F = TypeVar("F", bound=Callable[..., Any])


def entry(name: str) -> Callable[[F], F]:
    """Decorate a public function (or method) so that every error raised while it runs names ``name``.

    Only the outermost decorated call sets the name: ``draw_broadcast`` calling ``explain_broadcast``
    still reports ``draw_broadcast()``, the function the learner called.

    >>> @entry("twice")
    ... def twice(n):
    ...     return 2 * require_int(n, "n")
    >>> twice(4), caller()
    (8, 'viewlab')
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _CALLER.get() is not None:
                return fn(*args, **kwargs)
            if pending():  # another thread ended something entered here and left its undo for this one
                sweep()
            token = _CALLER.set(name)
            try:
                return fn(*args, **kwargs)
            finally:
                _CALLER.reset(token)

        return wrapper  # type: ignore[return-value]

    return decorate


@contextlib.contextmanager
def outside_entry() -> Iterator[None]:
    """Run the learner's own code (an exercise check runs a solution) outside the current :func:`entry`
    boundary, so a viewlab function called from it names itself, as in the learner's cell.

    >>> twice = entry("twice")(lambda n: 2 * require_int(n, "n"))
    >>> @entry("check")
    ... def check(solution):
    ...     with outside_entry():
    ...         return solution()
    >>> check(lambda: twice(1.5))
    Traceback (most recent call last):
    TypeError: twice(): `n` must be an int >= 0; got float 1.5. Pass a whole number, e.g. n=2.
    """
    token = _CALLER.set(None)
    try:
        yield
    finally:
        _CALLER.reset(token)


def caller() -> str:
    """The public function the learner called (see :func:`entry`), or ``'viewlab'`` outside any.

    >>> caller()
    'viewlab'
    """
    return _CALLER.get() or "viewlab"


def problem(kind: type[Exception], text: str) -> Exception:
    """``kind`` with ``text`` after the caller's name, the one renderer of free-form messages (``raise problem(...)``).

    >>> str(entry("merge_heads")(lambda: problem(ValueError, "expects x of shape (B, H, L, Dh)."))())
    'merge_heads(): expects x of shape (B, H, L, Dh).'
    """
    return kind(f"{caller()}(): {text}")


def _message(arg: str, want: str, got: Any, fix: str = "") -> str:
    text = f"`{arg}` must be {want}; got {describe_value(got)}."
    return f"{text} {fix}" if fix else text


def type_error(arg: str, want: str, got: Any, fix: str = "") -> TypeError:
    """A ``TypeError`` worded the standard way (returned, so the caller writes ``raise type_error(...)``).

    >>> str(entry("layout")(lambda: type_error("t", "a torch.Tensor", "abc"))())
    "layout(): `t` must be a torch.Tensor; got str 'abc'."
    """
    return problem(TypeError, _message(arg, want, got, fix))  # type: ignore[return-value]


def value_error(arg: str, want: str, got: Any, fix: str = "") -> ValueError:
    """A ``ValueError`` worded the standard way.

    >>> str(entry("causal_mask")(lambda: value_error("q_len", "an int >= 0", -1))())
    'causal_mask(): `q_len` must be an int >= 0; got int -1.'
    """
    return problem(ValueError, _message(arg, want, got, fix))  # type: ignore[return-value]


# Tensors.
def _dtype_kind(dtype: torch.dtype) -> str | None:
    if dtype == torch.bool:
        return BOOL
    if dtype.is_complex or dtype.is_floating_point:
        return COMPLEX if dtype.is_complex else FLOAT
    return None if is_quantized_dtype(dtype) else INT


def is_quantized_dtype(dtype: torch.dtype) -> bool:
    """True for quantized dtypes (``torch.qint8`` ...), whose elements are not plain numbers.

    >>> is_quantized_dtype(torch.qint8), is_quantized_dtype(torch.int8)
    (True, False)
    """
    return dtype in _QUANTIZED


def require_tensor(
    obj: Any,
    arg: str,
    *,
    ndim: int | Sequence[int] | None = None,
    min_ndim: int | None = None,
    kinds: Iterable[str] | None = None,
    meta: bool = True,
    quantized: bool = False,
    storage: bool = False,
    shape_hint: str = "",
) -> torch.Tensor:
    """A dense (strided) tensor with the stated rank and dtype family, or an error that says what to pass.

    ``ndim``: the allowed number(s) of dims, ``min_ndim``: the fewest; ``kinds``: allowed dtype families among
    ``"float"``, ``"complex"``, ``"int"``, ``"bool"`` (None = any); ``meta``, ``quantized``: whether a meta tensor
    (shape only, no values), a quantized dtype is accepted; ``storage``: whether the tensor must have a storage of
    its own to look at (not a wrapper made inside ``torch.func.vmap``/``grad``/``functionalize``); ``shape_hint``:
    the shape in words, e.g. ``"(B, L, D)"``.

    >>> require_tensor(torch.zeros(2, 3), "x", ndim=2).shape
    torch.Size([2, 3])
    >>> entry("f")(require_tensor)(torch.zeros(3, dtype=torch.int64), "q", kinds=("float",))
    Traceback (most recent call last):
    TypeError: f(): `q` must be a tensor of floating-point numbers; got a tensor of shape (3,), dtype torch.int64, on cpu. Pass q.float().
    """
    if not isinstance(obj, torch.Tensor):
        hint = ""
        if isinstance(obj, (list, tuple)):
            hint = f" Wrap it first: {caller()}(torch.tensor({arg}))."
        elif type(obj).__module__ == "numpy":
            hint = f" Convert it without copying: {caller()}(torch.from_numpy({arg}))."
        raise problem(TypeError, f"expects a torch.Tensor for `{arg}`, got {type(obj).__name__}.{hint}")
    if obj.layout != torch.strided:
        text = f"works on dense (strided) tensors; `{arg}` has layout {obj.layout}, which has no strides."
        raise problem(ValueError, f"{text} Pass `{arg}.to_dense()` to look at its dense layout.")
    if getattr(obj, "is_nested", False):
        fix = f"pass one of its components, e.g. `{arg}.unbind()[0]`."
        raise problem(ValueError, f"does not support nested tensors; {fix}")
    if is_quantized_dtype(obj.dtype) and not quantized:
        raise type_error(arg, "a tensor of plain numbers, not a quantized one", obj, f"Pass {arg}.dequantize().")
    if not meta and obj.device.type == "meta":
        fix = "Create it on 'cpu' (or 'cuda'); a meta tensor has a shape but no data."
        raise value_error(arg, "a tensor that holds values (not on the meta device)", obj, fix)
    if storage:
        try:
            obj.untyped_storage()
        except (RuntimeError, NotImplementedError) as exc:
            text = f"`{arg}` has no storage of its own to look at ({str(exc).splitlines()[0]}): it is a wrapper, as"
            fix = "tensors are inside torch.func.vmap, grad or functionalize. Call it outside the transform."
            raise problem(ValueError, f"{text} {fix}") from None
    words = f" {shape_hint}" if shape_hint else ""
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim or ())
    if ndim is not None and obj.dim() not in allowed:
        dims = " or ".join(str(n) for n in allowed)
        fix = f"It has {obj.dim()} dims; reshape or index it to {dims} dims."
        raise value_error(arg, f"a {dims}-D tensor{words}", obj, fix)
    if min_ndim is not None and obj.dim() < min_ndim:
        fix = f"It has {obj.dim()}; add the missing dims, e.g. {arg}.unsqueeze(0)."
        raise value_error(arg, f"a tensor with at least {min_ndim} dims{words}", obj, fix)
    kinds = None if kinds is None else tuple(kinds)
    if kinds is not None and _dtype_kind(obj.dtype) not in kinds:
        words = " or ".join(_KIND_WORDS[k] for k in kinds)
        raise type_error(arg, f"a tensor of {words}", obj, f"Pass {arg}{_KIND_FIX[kinds[0]]}.")
    return obj


def _require_same(tensors: dict[str, torch.Tensor], attr: str, kind: type[Exception], text: str) -> Any:
    """The one ``attr`` (device, dtype) of all ``tensors`` (None skipped), or ``kind`` with ``text`` filled in."""
    (first, value), *rest = [(n, getattr(t, attr)) for n, t in tensors.items() if t is not None]
    for name, this in rest:
        if this != value:
            raise problem(kind, text.format(name=name, first=first, this=this, that=value))
    return value


def require_same_device(tensors: dict[str, torch.Tensor]) -> torch.device:
    """All ``tensors`` (name -> tensor) on one device, or a ValueError naming the two that differ.

    ``meta`` counts as a device of its own: mixing it with real data would compute nothing.

    >>> require_same_device({"q": torch.zeros(1), "k": torch.zeros(1)})
    device(type='cpu')
    """
    text = "`{name}` is on {this} but `{first}` is on {that}; every tensor must be on one device."
    return _require_same(tensors, "device", ValueError, text + " Move it: {name}.to({first}.device).")


def require_same_dtype(tensors: dict[str, torch.Tensor]) -> torch.dtype:
    """All ``tensors`` of one dtype, or a TypeError naming the two that differ and the cast that fixes it.

    >>> require_same_dtype({"q": torch.zeros(1), "k": torch.zeros(1)})
    torch.float32
    """
    text = "`{name}` has dtype {this} but `{first}` has {that}; they must match. Cast one: {name}.to({first}.dtype)."
    return _require_same(tensors, "dtype", TypeError, text)


def require_shape(t: torch.Tensor, arg: str, shape: tuple[int, ...], names: str = "", why: str = "") -> None:
    """``t.shape == shape``, or a ValueError saying which shape was expected (``names``: it in letters) and why.

    >>> entry("f")(require_shape)(torch.zeros(3), "lengths", (2,), names="(B,)", why="one length per batch item")
    Traceback (most recent call last):
    ValueError: f(): lengths must have shape (B,) = (2,) (one length per batch item); got a tensor of shape (3,), dtype torch.float32, on cpu.
    """
    if tuple(t.shape) != tuple(shape):
        letters, reason = f"{names} = " if names else "", f" ({why})" if why else ""
        raise problem(ValueError, f"{arg} must have shape {letters}{tuple(shape)}{reason}; got {describe_value(t)}.")


# Plain Python values.
def require_int(value: Any, arg: str, minimum: int | None = 0, maximum: int | None = None) -> int:
    """``value`` as an ``int`` (Python, NumPy or 0-dim integer tensor; never a bool), within bounds.

    >>> require_int(3, "q_len")
    3
    """
    want = "an int" + ("" if minimum is None else f" >= {minimum}")
    if maximum is not None:
        want = f"an int in {minimum}..{maximum}" if minimum is not None else f"an int <= {maximum}"
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise type_error(arg, want, value, f"Pass a number such as {arg}={max(minimum or 0, 1)}, not a bool.")
    if isinstance(value, torch.Tensor) and (value.numel() != 1 or value.device.type == "meta"):
        raise type_error(arg, want, value, f"Pass a Python int, e.g. {arg}=int(...).")
    try:
        number = operator.index(value)
    except TypeError:
        fix = f"Pass a whole number, e.g. {arg}={max(minimum or 0, 2)}."
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            fix = f"Pass {arg}={int(value)} (an int, not a float)."
        raise type_error(arg, want, value, fix) from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise value_error(arg, want, number)
    return number


def require_number(
    value: Any,
    arg: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    finite: bool = True,
) -> float:
    """``value`` as a ``float`` (a real number, not a bool), finite unless told, within bounds (``above``: exclusive).

    >>> require_number(0.5, "min_run_time", above=0)
    0.5
    """
    bounds = ((">=", minimum), (">", above), ("<=", maximum))
    want = " ".join(["a finite number" if finite else "a number"] + [f"{op} {b}" for op, b in bounds if b is not None])
    if isinstance(value, (bool, complex, str, bytes)):
        raise type_error(arg, want, value)
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError):
        raise type_error(arg, want, value) from None
    if isinstance(value, torch.Tensor) and (value.numel() != 1 or value.is_complex() or value.dtype == torch.bool):
        raise type_error(arg, want, value)
    low = (minimum is not None and number < minimum) or (above is not None and number <= above)
    if math.isnan(number) or (finite and math.isinf(number)) or low or (maximum is not None and number > maximum):
        raise value_error(arg, want, value)
    return number


def require_bool(value: Any, arg: str) -> bool:
    """``value`` if it is a bool (Python or NumPy), else a TypeError: ``1`` or ``"yes"`` is not a flag.

    >>> import numpy as np
    >>> require_bool(True, "causal"), require_bool(np.bool_(False), "causal")
    (True, False)
    """
    kind = type(value)  # NumPy's bool is numpy.bool_ (NumPy 1) or numpy.bool (NumPy 2)
    if isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool")):
        return bool(value)
    raise type_error(arg, "True or False", value)


def require_str(value: Any, arg: str, *, allow_none: bool = False, nonempty: bool = False) -> str | None:
    """``value`` if it is a str (or None when allowed), else a TypeError.

    >>> require_str("a title", "title")
    'a title'
    """
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise type_error(arg, "a str" + (" or None" if allow_none else ""), value)
    if nonempty and not value.strip():
        raise value_error(arg, "a non-empty str", value)
    return value


def require_choice(value: Any, arg: str, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``, else a ValueError listing them.

    >>> require_choice("zero", "fully_masked", ("zero", "nan"))
    'zero'
    """
    try:
        ok = any(value is c or (type(value) is type(c) and value == c) for c in choices)
    except Exception:  # noqa: BLE001 - an object whose == fails is not a valid choice
        ok = False
    if not ok:
        raise value_error(arg, f"one of {', '.join(repr(c) for c in choices)}", value)
    return value


def require_device(value: Any, arg: str = "device") -> torch.device | None:
    """``value`` as a ``torch.device`` (None stays None), or a clear error instead of torch's parser's.

    >>> require_device("cpu")
    device(type='cpu')
    """
    if value is None or isinstance(value, torch.device):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise type_error(arg, "a device such as 'cpu', 'cuda' or torch.device('cpu')", value)
    try:
        return torch.device(value)
    except (RuntimeError, ValueError, TypeError):
        raise value_error(arg, "a device such as 'cpu', 'cuda:0' or 'meta'", value) from None


def require_environment_device(device: torch.device) -> None:
    """A RuntimeError (the environment, not the argument, is at fault) when ``device`` cannot be used here.

    >>> require_environment_device(torch.device("cpu"))
    """
    if device.type == "cuda" and not torch.cuda.is_available():
        text = f"device {device} was asked for, but this machine has no usable CUDA GPU."
        raise problem(RuntimeError, f"{text} Pass device='cpu', or run on a machine with a CUDA GPU.")


# Resources.
def spare_bytes() -> int:
    """What one helper may allocate on this machine: half of the memory free now (Linux: ``MemAvailable``),
    else half of the physical memory. Beyond it a learner's call would push the machine into swap or the
    kernel's out-of-memory killer instead of getting an answer.

    >>> spare_bytes() > 0
    True
    """
    try:
        with open("/proc/meminfo") as fh:
            free = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, ValueError, IndexError, StopIteration):  # not Linux
        try:
            free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
            free = 2**41
    return free // 2


def require_allocation(nbytes: int, what: str, device: torch.device | None = None) -> None:
    """A ValueError when making ``what`` would need more bytes than the device can give: on CUDA its total
    memory, on the CPU :func:`spare_bytes` (half of what is free now). Meta tensors allocate nothing, but torch
    still counts their elements and bytes in int64: past ``INT64_MAX`` bytes they are refused too (torch's own
    error would be an overflow that names no viewlab function).

    >>> require_allocation(1024, "the mask")
    >>> require_allocation(10**24, "a (10**12, 10**12) mask", torch.device("meta"))
    Traceback (most recent call last):
    ValueError: viewlab(): a (10**12, 10**12) mask would take 1,000,000,000,000,000,000,000,000 bytes; torch counts elements and bytes in int64 (at most 9,223,372,036,854,775,807), even on the meta device. Use smaller sizes.
    """
    device = torch.device("cpu") if device is None else device
    if nbytes > INT64_MAX:
        text = f"{what} would take {nbytes:,} bytes; torch counts elements and bytes in int64 (at most {INT64_MAX:,})"
        raise problem(ValueError, f"{text}, even on the meta device. Use smaller sizes.")
    if device.type == "meta":
        return
    limit, where = spare_bytes(), "half of the memory this machine has free now"
    if device.type == "cuda" and torch.cuda.is_available():
        limit, where = torch.cuda.get_device_properties(device).total_memory, f"what {device} has in total"
    if nbytes > limit:
        text = f"{what} would take {nbytes:,} bytes, more than {where} ({limit:,} bytes)."
        raise problem(ValueError, f"{text} Use smaller sizes (or device='meta' to look at shapes only).")
