"""The fuzz harness: every input gives a correct result or a clear error, and leaves no trace.

Each public callable is one :class:`Target`: the callable, a strategy of *good* arguments (consistent
shapes, right types) and an oracle that checks a returned result, against torch where torch has the same
operation. The targets are listed in ``test_fuzz_api.py`` (layouts, broadcasting, attention, bench, the
exercises), ``test_fuzz_tools.py`` (measure, the monitor, the guards, IPython, figures, versions) and
``test_fuzz_claims.py`` (the course's claims); ``test_fuzz_context.py`` misuses every context manager (entered
twice, exited without enter, interrupted, from other threads). This module is what they share. Every example draws a mode:

* ``good``: the good arguments unchanged; the call must return, and the oracle must accept;
* ``near``: one tensor argument bent by :data:`MUTATIONS` (moved to ``meta``, another dtype,
  transposed, expanded, offset, overlapping, zero-size, one dim more or less, sparse, quantized,
  requiring grad): a correct result or a clear error;
* ``bad`` / ``many``: one or several arguments replaced by values from :func:`bad_values` (wrong
  types, None, nested lists, numpy arrays, negative / huge / NaN / inf numbers, rank 0 and rank 7+
  tensors, odd dtypes and layouts, wrong keyword values): a correct result or a clear error.

A *clear* error is a ``TypeError`` or ``ValueError`` raised by viewlab itself (the innermost frame is
in viewlab, so torch or matplotlib never got the bad input), whose message names the function the
learner called, ``func(``. :class:`viewlab.BroadcastError` also counts: its message names the
operands and the dimension instead (the notebooks show it as is). ``RuntimeError`` counts only for
the environment (no CUDA; not inside IPython), worded the same way. Around every call it also checks:

* no input tensor changed: values, ``_version``, shape, stride, offset, dtype, device, requires_grad;
* nothing hangs: each call runs on a worker thread that must answer within :data:`CALL_TIMEOUT_S`
  (a thread and ``join(timeout)``, not a signal: it works on Windows too); a hang names the line the
  worker was stuck at;
* nothing is left behind: no new thread, no torch dispatch or function mode and grad mode as before on
  the thread that ran the call (torch keeps those per thread), default dtype and thread count as before.

Targets name public callables by their public name (:func:`public`), looked up in ``viewlab.__all__`` and
the public submodules' ``__all__`` (:data:`SURFACE`), not by a private path: when a module moves, only
:data:`SURFACE` changes. The figures (inputs tried, share of clear rejections, time) are printed at the
end of the run and written to ``$VIEWLAB_FUZZ_REPORT`` (JSON) when that is set (``conftest.py``). Under CI
the examples are derandomised (see tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import math
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

import viewlab
from viewlab import BroadcastError

CALL_TIMEOUT_S = 10.0
SRC = str(Path(viewlab.__file__).resolve().parent)
FIGURES: dict[str, dict[str, int]] = {}
MODE = ["good"]  # the mode of the example being run, for oracles that depend on it
STARTED = time.perf_counter()

# ----- the public surface -------------------------------------------------------------------------------------
# Where a learner finds viewlab's callables: the face and the submodules imported by name. Old and new homes of
# a moving module are both listed (viewlab.exercises -> viewlab.course.exercises, viewlab.sharing into
# viewlab.layout, viewlab.draw_broadcast into viewlab.draw); whichever exists is read.
SURFACE = (
    "viewlab",
    "viewlab.layout",
    "viewlab.sharing",
    "viewlab.broadcast",
    "viewlab.viewops",
    "viewlab.attention",
    "viewlab.draw",
    "viewlab.draw_broadcast",
    "viewlab.course.bench",
    "viewlab.course.layers",
    "viewlab.memory",
    "viewlab.monitor",
    "viewlab.sentinels",
    "viewlab.ipython",
    "viewlab.versions",  # now viewlab.course.versions
    "viewlab.explorer",
    "viewlab.course.versions",
    "viewlab.course.exercises",
    "viewlab.exercises",
    "viewlab.course.claims",
)


def surface() -> list[ModuleType]:
    """The modules of :data:`SURFACE` that exist (an import error inside an existing one is raised)."""
    found = []
    for name in SURFACE:
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
    return found


def public(name: str, module: str | None = None) -> Any:
    """The object every surface module that lists ``name`` in its ``__all__`` agrees on, e.g. ``public("layout")``;
    ``module`` picks one home where two modules use one name for different things (``get`` of the exercises and
    of the claims).

    >>> public("shares_storage") is viewlab.shares_storage
    True
    """
    homes = [m for m in surface() if name in getattr(m, "__all__", ()) and module in (None, m.__name__)]
    found = {id(getattr(m, name)): getattr(m, name) for m in homes}
    assert homes, f"{name!r} is in no __all__ of the public surface: add its module to SURFACE"
    assert len(found) == 1, f"{name!r} means different objects in {[m.__name__ for m in homes]}: pass module="
    return next(iter(found.values()))


# ----- values -----------------------------------------------------------------------------------------------
def _quantized(t: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(t.float(), 0.1, 0, torch.qint8)


def _sparse(t: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if t.is_meta:  # meta has no to_sparse kernel: an all-zero sparse tensor of that shape, built without data
            shape = tuple(t.shape) or (1,)
            return torch.sparse_coo_tensor(
                torch.zeros(len(shape), 0, dtype=torch.long), torch.zeros(0, dtype=t.dtype), shape
            )
        return t.to_sparse() if t.dim() else t.reshape(1).to_sparse()


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])


DTYPES = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.int8,
    torch.bool,
    torch.complex64,
)

# Bends of one good tensor argument: each name maps to a function of the tensor.
MUTATIONS: dict[str, Callable[[torch.Tensor], Any]] = {
    "meta": lambda t: torch.empty_like(t, device="meta"),
    "float64": lambda t: t.to(torch.float64),
    "float16": lambda t: t.to(torch.float16),
    "int64": lambda t: t.to(torch.int64) if not t.is_complex() else t.real.to(torch.int64),
    "bool": lambda t: t != 0,
    "complex": lambda t: t.to(torch.complex64),
    "transposed": lambda t: t.mT.contiguous().mT if t.dim() >= 2 else t,
    "offset": lambda t: torch.cat([t.reshape(-1)[:1], t.reshape(-1)])[1:].view(t.shape) if t.numel() else t,
    "expanded": lambda t: t[..., :1].expand(t.shape) if t.dim() and t.shape[-1] else t,
    "overlapping": lambda t: torch.zeros(64, dtype=t.dtype).as_strided((3, 2), (3, 6), 2),
    "zero-size": lambda t: t[..., :0] if t.dim() else t.reshape(-1)[:0],
    "one dim more": lambda t: t.unsqueeze(0),
    "one dim less": lambda t: t[0] if t.dim() and t.shape[0] else t.reshape(-1)[:0],
    "sparse": _sparse,
    "quantized": _quantized,
    "requires grad": lambda t: t.detach().clone().requires_grad_(True) if t.is_floating_point() else t,
    "numpy": lambda t: (
        np.zeros(tuple(t.shape))
        if t.device.type == "meta" or t.layout != torch.strided
        else (t.detach().cpu().numpy() if t.dtype != torch.bfloat16 else t.detach().float().numpy())
    ),
    "nested list": lambda t: t.tolist() if t.layout == torch.strided and t.device.type == "cpu" else [[1], [2, 3]],
}


@st.composite
def odd_tensors(draw: Any) -> torch.Tensor:
    """Tensors no function expects: any rank 0..8, odd dtypes, sizes, devices, layouts, NaN/inf values."""
    rank = draw(st.integers(0, 8))
    shape = tuple(
        draw(st.integers(0, 3 if rank <= 3 else 1)) if rank < 7 else draw(st.integers(1, 2)) for _ in range(rank)
    )
    dtype = draw(st.sampled_from(DTYPES))
    base = torch.tensor(
        draw(
            st.lists(
                st.sampled_from([0.0, 1.0, -2.0, 3.5, math.nan, math.inf, -math.inf, 1e30]),
                min_size=math.prod(shape),
                max_size=math.prod(shape),
            )
        ),
        dtype=torch.float64,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = (
            base.reshape(shape).nan_to_num(0.0).to(dtype)
            if not (dtype.is_floating_point or dtype.is_complex)
            else base.reshape(shape).to(dtype)
        )
    return _odd_layout(t, draw(st.sampled_from(["plain", "meta", "transposed", "expanded", "sparse", "quantized"])))


def _odd_layout(t: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "meta":
        return torch.empty_like(t, device="meta")
    if kind == "transposed" and t.dim() >= 2:
        return t.mT
    if kind == "expanded" and t.dim() and t.shape[-1]:
        return t[..., :1].expand(*t.shape[:-1], 3)
    if kind == "sparse" and t.dtype != torch.bfloat16:
        return _sparse(t)
    if kind == "quantized" and t.is_floating_point():
        return _quantized(t)
    return t


def bad_values() -> st.SearchStrategy[Any]:
    """Wrong types, None, nested lists, numpy, edge and huge numbers, odd tensors, wrong keyword values."""
    plain = st.sampled_from(
        [
            None,
            True,
            False,
            0,
            1,
            -1,
            2,
            3,
            7,
            2**31,
            2**63,
            -(2**63),
            10**12,
            0.0,
            -0.0,
            0.5,
            2.0,
            math.nan,
            math.inf,
            -math.inf,
            1j,
            "",
            "x",
            "cpu",
            "meta",
            "cuda",
            "cuda:7",
            "zero",
            "nan",
            "+",
            "view",
            "05-can-expand",
            b"bytes",
            (),
            [],
            [1, 2],
            [[1, 2], [3]],
            (2, 3),
            (-1, 2),
            (2.5, 1),
            ((1, 2), (3,)),
            {},
            {"a": 1},
            {"a": lambda: None},
            object(),
            print,
            lambda: None,
            lambda x: x,
            torch.float32,
            torch.qint8,
            torch.device("meta"),
            torch.Size([2, 3]),
            range(3),
        ]
    )
    numpy = st.sampled_from(
        [np.arange(3), np.zeros((2, 3), dtype=np.float32), np.float64(2.0), np.int64(3), np.array(5), np.bool_(True)]
    )
    return st.one_of(plain, numpy, odd_tensors(), st.builds(_nested))


# ----- good arguments per function -----------------------------------------------------------------------------
def _randn(gen_seed: int, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(gen_seed), dtype=dtype)


small = st.integers(1, 4)
seeds = st.integers(0, 2**16)
float_dtypes = st.sampled_from([torch.float32, torch.float64])


@st.composite
def any_strided(draw: Any) -> torch.Tensor:
    """A valid tensor for layout-style helpers: any dtype/rank, contiguous or not, sometimes meta."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    dtype = draw(st.sampled_from(DTYPES))
    t = (torch.arange(math.prod(shape)) % 7).reshape(shape).to(dtype)
    kind = draw(st.sampled_from(["plain", "transposed", "expanded", "offset", "as_strided", "meta"]))
    if kind == "transposed" and t.dim() >= 2:
        t = t.mT
    elif kind == "expanded" and t.dim() and t.shape[-1]:
        t = t[..., :1].expand(t.shape)
    elif kind == "offset" and t.numel():
        t = MUTATIONS["offset"](t)
    elif kind == "as_strided":
        dims = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 7)), min_size=1, max_size=3))
        size, stride = tuple(n for n, _ in dims), tuple(s for _, s in dims)
        off = draw(st.integers(0, 3))
        need = off + 1 + sum((n - 1) * s for n, s in dims) if all(size) else off + 1
        t = torch.arange(need).to(dtype).as_strided(size, stride, off)
    elif kind == "meta":
        t = torch.empty_like(t, device="meta")
    return t


@st.composite
def drawable(draw: Any) -> torch.Tensor:
    t = draw(any_strided())
    return t if t.device.type != "meta" and t.numel() <= 32 else torch.arange(6).view(2, 3)


@st.composite
def qkv(draw: Any) -> dict[str, Any]:
    b, h, lq, lk, e, ev = (
        draw(st.integers(1, 3)),
        draw(st.integers(1, 3)),
        draw(small),
        draw(small),
        draw(st.integers(0, 5)),
        draw(st.integers(1, 4)),
    )
    dtype, seed = draw(float_dtypes), draw(seeds)
    out: dict[str, Any] = {
        "q": _randn(seed, b, h, lq, e, dtype=dtype),
        "k": _randn(seed + 1, b, h, lk, e, dtype=dtype),
        "v": _randn(seed + 2, b, h, lk, ev, dtype=dtype),
    }
    mask_kind = draw(st.sampled_from([None, "bool", "float", "padding"]))
    if mask_kind == "bool":
        out["mask"] = torch.rand(lq, lk, generator=torch.Generator().manual_seed(seed)) > 0.3
    elif mask_kind == "float":
        out["mask"] = torch.zeros(lq, lk, dtype=dtype).masked_fill(torch.eye(lq, lk, dtype=torch.bool), -1.0)
    elif mask_kind == "padding":
        out["mask"] = public("padding_mask")(
            torch.randint(0, lk + 1, (b,), generator=torch.Generator().manual_seed(seed)), lk
        )
    if draw(st.booleans()):
        out["is_causal"] = draw(st.booleans())
    if draw(st.booleans()):
        out["scale"] = draw(st.sampled_from([0.5, 1.0, 2, 0.0]))
    if draw(st.booleans()):
        out["fully_masked"] = draw(st.sampled_from(["zero", "nan"]))
    if draw(st.booleans()):
        out["return_weights"] = draw(st.booleans())
    return out


@st.composite
def mhsa_args(draw: Any) -> dict[str, Any]:
    b, length, h, dh = draw(st.integers(1, 3)), draw(small), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d, seed, dtype = h * dh, draw(seeds), draw(float_dtypes)
    out = {
        "x": _randn(seed, b, length, d, dtype=dtype),
        "num_heads": h,
        "in_proj_weight": _randn(seed + 1, 3 * d, d, dtype=dtype),
        "in_proj_bias": draw(st.sampled_from([None, _randn(seed + 2, 3 * d, dtype=dtype)])),
        "out_proj_weight": _randn(seed + 3, d, d, dtype=dtype),
        "out_proj_bias": draw(st.sampled_from([None, _randn(seed + 4, d, dtype=dtype)])),
    }
    if draw(st.booleans()):
        out["lengths"] = torch.randint(1, length + 1, (b,), generator=torch.Generator().manual_seed(seed))
    if draw(st.booleans()):
        out["causal"] = draw(st.booleans())
    return out


def _fixed(**kwargs: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {k: (v if isinstance(v, st.SearchStrategy) else st.just(v)) for k, v in kwargs.items()}
    )


def _optional(**kwargs: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {}, optional={k: (v if isinstance(v, st.SearchStrategy) else st.just(v)) for k, v in kwargs.items()}
    )


def _merge(*parts: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(*parts).map(lambda ds: {k: v for d in ds for k, v in d.items()})


def _broadcastable(rank: int) -> st.SearchStrategy[list[torch.Tensor]]:
    return st.lists(st.integers(1, 3), min_size=0, max_size=rank).flatmap(
        lambda base: st.lists(
            st.lists(st.booleans(), min_size=len(base), max_size=len(base)), min_size=2, max_size=3
        ).map(
            lambda keeps: [
                torch.arange(math.prod(n if k else 1 for n, k in zip(base, keep)), dtype=torch.float32).reshape(
                    tuple(n if k else 1 for n, k in zip(base, keep))
                )
                for keep in keeps
            ]
        )
    )


broadcastable = _broadcastable(3)


# ----- targets ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """One public callable: how to call it well (``good``: kwargs, ``"*"`` for varargs) and how to check it.

    ``covers``: the public callable a wrapper ``fn`` exercises (``views_only`` for a function running a
    ``with views_only():`` block); ``after``: a check run after every call (a module's weights unchanged).
    """

    name: str
    fn: Callable[..., Any]
    good: st.SearchStrategy[dict[str, Any]]
    oracle: Callable[[dict, Any, Any], None]
    examples: int = 120
    quiet: bool = False  # the function prints; capture it
    tensor_args: tuple[str, ...] = field(default=())
    covers: Any = None
    after: Callable[[], None] | None = None


def uncovered(targets: list[Target], records: set[Any], exempt: dict[str, str] | None = None) -> list[str]:
    """Callables of the public surface that no target covers: every function, and every class but ``records``
    (results, not something a learner calls) and exceptions, also in a public module another one lists in its
    ``__all__`` (``claims.article_code``), unless ``exempt`` names that module (with the reason)."""
    covered = {t.fn for t in targets} | {t.covers for t in targets if t.covers is not None}
    missing, modules = [], surface()
    for module in modules:  # grows while it is read: modules listed in an __all__
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if isinstance(obj, ModuleType):
                modules += [obj] if obj not in modules and obj.__name__ not in (exempt or {}) else []
                continue
            if not callable(obj) or obj in covered or obj in records:
                continue
            if isinstance(obj, type) and issubclass(obj, (Exception, Warning)):
                continue
            missing.append(f"{module.__name__}.{name}")
    return sorted(set(missing))


# ----- the harness ----------------------------------------------------------------------------------------------
def _tensors_in(obj: Any, depth: int = 0) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if depth > 3:
        return []
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors_in(o, depth + 1)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors_in(o, depth + 1)]
    return []


def _snapshot(t: torch.Tensor) -> tuple:
    if t.is_nested:
        return (t.layout, t.dtype, t.device, t.requires_grad, t._version, None)
    meta = (t.layout, tuple(t.shape), t.dtype, t.device, t.requires_grad, t._version)
    if t.layout != torch.strided:
        return meta + (None,)
    meta += (tuple(t.stride()), t.storage_offset())
    if t.device.type == "meta":
        return meta + (None,)
    data = t.detach()
    if data.is_quantized:
        data = data.int_repr()
    flat = torch.empty(data.numel(), dtype=data.dtype).copy_(data.reshape(-1).cpu())
    return meta + (flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8),)


def _same(a: tuple, b: tuple) -> bool:
    if a[:-1] != b[:-1]:
        return False
    return (a[-1] is None and b[-1] is None) or (a[-1] is not None and b[-1] is not None and torch.equal(a[-1], b[-1]))


def _process_state() -> tuple:
    """What one call may not leave changed for the whole process: its threads, torch's global settings."""
    return (
        frozenset(t.ident for t in threading.enumerate()),
        torch.get_default_dtype(),
        torch.get_num_threads(),
        "matplotlib.pyplot" in sys.modules,
    )


def _thread_state() -> tuple:
    """What torch keeps per thread, read on the thread that runs the call: mode stacks and grad mode."""
    return (len(_get_current_dispatch_mode_stack()), len(_get_current_function_mode_stack()), torch.is_grad_enabled())


class Hang(Exception):
    """Raised when one call has not answered within CALL_TIMEOUT_S."""


@dataclass
class _Outcome:
    result: Any = None
    error: BaseException | None = None
    before: tuple = ()  # _thread_state() on the worker, before and after the call
    after: tuple = ()


def run_with_time_limit(fn: Callable[[], Any], seconds: float) -> _Outcome:
    """Run ``fn()`` on a fresh daemon thread and wait at most ``seconds`` for it (no signals: Windows has no alarm
    signal). A call that does not answer raises :class:`Hang` naming where the worker is stuck; the thread
    is left to finish on its own (the test has failed by then)."""
    outcome = _Outcome()

    def work() -> None:
        outcome.before = _thread_state()
        try:
            outcome.result = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome.error = exc
        outcome.after = _thread_state()

    worker = threading.Thread(target=work, name="fuzz-call", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        frame = sys._current_frames().get(worker.ident)
        where = "".join(traceback.format_stack(frame)[-3:]) if frame is not None else "(no frame)"
        raise Hang(f"no answer within {seconds} s; the call was at:\n{where}")
    return outcome


def _raised_in_viewlab(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(SRC)


def _public_name(target: Target) -> str:
    """The function a message must name: ``"get"`` for the targets ``"get [claims]"`` and ``"get.method"``."""
    return target.name.split(" ")[0].split(".")[0]


def is_clear(target: Target, exc: BaseException) -> bool:
    """A clear rejection: see the module docstring."""
    if not _raised_in_viewlab(exc):
        return False
    if isinstance(exc, BroadcastError):
        return True
    text = str(exc)
    names = f"{_public_name(target)}(" in text
    if isinstance(exc, (TypeError, ValueError)):
        return names
    # The environment: no CUDA here, or not inside IPython (held_by_ipython needs a running shell).
    return isinstance(exc, RuntimeError) and names and ("CUDA" in text or "GPU" in text or "IPython or Jupyter" in text)


def _bend(data: Any, kwargs: dict[str, Any], target: Target) -> tuple[dict[str, Any], str]:
    mode = data.draw(st.sampled_from(["good", "near", "near", "bad", "bad", "many"]), label="mode")
    kwargs = dict(kwargs)
    if mode == "good":
        return kwargs, mode
    tensor_names = [
        n
        for n in target.tensor_args
        if isinstance(kwargs.get(n), torch.Tensor)
        or (n == "*" and any(isinstance(t, torch.Tensor) for t in kwargs.get("*", ())))
    ]
    if mode == "near" and tensor_names:
        name = data.draw(st.sampled_from(tensor_names), label="bent argument")
        how = data.draw(st.sampled_from(sorted(MUTATIONS)), label="bend")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "*":
                i = data.draw(st.integers(0, len(kwargs["*"]) - 1))
                args = list(kwargs["*"])
                args[i] = MUTATIONS[how](args[i])
                kwargs["*"] = args
            else:
                kwargs[name] = MUTATIONS[how](kwargs[name])
        return kwargs, f"near:{how}"
    params = sorted(set(_parameters(target)) | set(kwargs))
    chosen = [data.draw(st.sampled_from(params), label="bad argument")] if params else []
    if mode == "many" and params:
        chosen = data.draw(
            st.lists(st.sampled_from(params), min_size=1, max_size=3, unique=True), label="bad arguments"
        )
    for name in chosen:
        if name == "*":
            kwargs["*"] = data.draw(st.lists(bad_values(), min_size=0, max_size=3), label="bad varargs")
        else:
            kwargs[name] = data.draw(bad_values(), label=f"bad {name}")
    return kwargs, mode


def _parameters(target: Target) -> list[str]:
    fn = target.fn
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    out = []
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            out.append("*")
        elif p.kind != p.VAR_KEYWORD:
            out.append(p.name)
    return out


def _call(target: Target, kwargs: dict[str, Any]) -> Any:
    args = list(kwargs.get("*", ()))
    rest = {k: v for k, v in kwargs.items() if k != "*"}
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink) if target.quiet else contextlib.nullcontext():
        return target.fn(*args, **rest)


def fuzz_one(target: Target, data: Any) -> None:
    """One example: draw good arguments, bend them, call, and check the result, the inputs and the state."""
    good = data.draw(target.good, label="good arguments")
    kwargs, mode = _bend(data, good, target)
    MODE[0] = mode
    inputs = _tensors_in(kwargs)
    before = [_snapshot(t) for t in inputs]
    state = _process_state()
    here = _thread_state()
    stats = FIGURES.setdefault(target.name, {"tried": 0, "returned": 0, "clear": 0, "unclear": 0, "good": 0})
    stats["tried"] += 1
    stats["good"] += mode == "good"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = run_with_time_limit(lambda: _call(target, kwargs), CALL_TIMEOUT_S)
    except Hang as hang:
        stats["unclear"] += 1
        raise AssertionError(f"{target.name} hung ({mode}) on {kwargs!r}: {hang}") from None
    exc = outcome.error
    if exc is not None and not isinstance(exc, Exception):
        raise exc  # KeyboardInterrupt, SystemExit: not the function's answer
    if exc is not None:
        if mode == "good":
            stats["unclear"] += 1
            raise AssertionError(f"{target.name} rejected good input {kwargs!r}: {type(exc).__name__}: {exc}") from exc
        if not is_clear(target, exc):
            stats["unclear"] += 1
            raise AssertionError(
                f"{target.name} ({mode}) failed unclearly on {kwargs!r}: {type(exc).__name__}: {exc}"
            ) from exc
        stats["clear"] += 1
    else:
        stats["returned"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                target.oracle(kwargs, outcome.result, data)
        except Exception as err:
            raise AssertionError(
                f"{target.name} ({mode}) gave a wrong result on {kwargs!r}: {type(err).__name__}: {err}"
            ) from err
    after = [_snapshot(t) for t in inputs]
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if not _same(a, b)]
    assert not changed, f"{target.name} ({mode}) changed input tensor(s) {changed} of {kwargs!r}"
    assert outcome.after == outcome.before, (
        f"{target.name} ({mode}) left a mode or grad mode behind on its thread: {outcome.before} -> {outcome.after}"
    )
    assert _process_state() == state and _thread_state() == here, (
        f"{target.name} ({mode}) left something behind: {state} -> {_process_state()}"
    )
    if target.after is not None:
        target.after()


def fuzz(target: Target) -> None:
    """Run ``target.examples`` examples of :func:`fuzz_one` (the body of every fuzz test)."""

    @settings(
        max_examples=target.examples,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.nested_given,
        ],
    )
    @given(data=st.data())
    def run(data: Any) -> None:
        fuzz_one(target, data)

    run()


def figures() -> dict[str, Any]:
    """The figures of this run so far: inputs tried, results checked, rejections and how many were clear."""
    tried = sum(s["tried"] for s in FIGURES.values())
    clear = sum(s["clear"] for s in FIGURES.values())
    rejected = clear + sum(s["unclear"] for s in FIGURES.values())
    return {
        "inputs_tried": tried,
        "returned": sum(s["returned"] for s in FIGURES.values()),
        "rejected": rejected,
        "clear_percent": round(100.0 * clear / rejected if rejected else 100.0, 2),
        "seconds": round(time.perf_counter() - STARTED, 1),
        "per_target": FIGURES,
    }
