"""Watching the learner's function while it runs, by name and by behaviour, in its thread and the ones it starts.

:class:`Watch` is entered around one call of the learner's function (:func:`.engine.run_once`). Beside the
dispatch-level :class:`~.rules.OpRecorder` (aten operators, new and borrowed storages) it records:

* the torch functions called, before they decompose (a ``TorchFunctionMode``: ``repeat_interleave`` and
  ``scaled_dot_product_attention`` reach the dispatcher only as their parts), by the names of
  :data:`~.rules.API_NAMES`, and the one running when an operator runs (named in the message);
* the calls the learner's own code makes into numpy (the functions of :data:`~.rules.NUMPY_NAMES` do a
  family's work; any other numpy call is numpy doing the work), into viewlab (its own helpers, such as
  ``viewlab.attention.causal_mask``), into forward-mode AD and ``torch.func``, and the places where data
  leaves torch (``.tolist()``, ``.numpy()``, ``torch.from_numpy``, ``torch.frombuffer``): a profile hook
  (``sys.setprofile``) that sees C calls too;
* with ``loops=True``, the dynamic witness of a Python loop (``sys.settrace``): a line of the learner's code
  reached again by a backward jump in the same call (``for``, ``while``, a comprehension), a function of it
  entered again while it still runs (recursion), or a C function that loops over a Python sequence (``sum``,
  ``math.prod``, ``functools.reduce``). A multi-line expression revisits a line number without jumping back,
  so it is not mistaken for a loop; a loop written on one line shows its jump from its second pass (the
  static witness, :func:`.loops.static_loop`, sees it from the source).

Threads: while the watch is on, ``threading.Thread.start`` is wrapped so that a thread started by the
function runs with the same recorders, hooks and meter (``viewlab.measure``'s dispatch mode); everything is
restored when the watch ends. Out of reach, and said so in :mod:`.rules`: another process (a fork, a
subprocess), a thread started before the check (a pool made earlier), ``_thread.start_new_thread`` called
directly, a function that takes the hooks off itself (``sys.setprofile(None)``), and work in C extensions
other than torch and numpy. A tracer or profiler already installed (a
debugger, coverage) is set aside for the call and put back after it.

>>> import numpy as np
>>> from viewlab.course.exercises.rules import Rules
>>> def answer(x):
...     for _i in range(2):
...         x = x + 1
...     return np.tile(x, 2)
>>> with Watch(Rules(forbid=("tile",), no_python_loops=lambda n: (n,))) as w:
...     _ = answer(np.arange(2))
>>> w.more["tile"].op, w.loop[0]
('numpy.tile', 'a loop (this line ran again after a jump back)')
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from viewlab._dispatch import PACKAGE_DIR, enter_mode, learner_line, remove_mode

from .loops import place, static_loop
from .rules import (
    _BANK,
    _HERE,
    _SKIP,
    API_NAMES,
    FAMILIES,
    NUMPY_NAMES,
    Hit,
    OpRecorder,
    Rules,
    bytes_problem,
    forbid_problem,
    outside_problem,
    predict_problem,
    static_loop_problem,
    view_bytes_problem,
)

__all__ = ["Watch", "ApiRecorder", "is_learner_file", "call_problem"]


def _dir_of(module: str) -> str | None:
    spec = importlib.util.find_spec(module)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return locations[0].replace("\\", "/") + "/" if locations else None


_TORCH = os.path.dirname(torch.__file__).replace("\\", "/") + "/"
_NUMPY = _dir_of("numpy") or "\0"  # numpy is optional: without it, nothing starts with "\0"
_LIBS = tuple(
    p.replace("\\", "/") + "/" for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib")
)
_OUTSIDE = (*_SKIP, _TORCH, *_LIBS, "<frozen")
#: forward-mode AD and torch.func: where their entry points live, and the names that are autograd
_AD_FILES = (
    _TORCH + "_functorch/",
    _TORCH + "func/",
    _TORCH + "autograd/forward_ad.py",
    _TORCH + "autograd/functional.py",
)
_FUNC_AD = {"jacfwd", "jacrev", "jvp", "vjp", "grad", "grad_and_value", "hessian", "linearize"}
_WATCHED = (_NUMPY, PACKAGE_DIR, *_AD_FILES)
#: calls that leave torch with the data (rule torch_only), and C functions that loop over a Python sequence
_EXITS = {"tolist", "numpy", "from_numpy", "frombuffer"}
_C_LOOPS = {"map", "filter", "reduce", "sum", "prod", "fsum", "starmap", "accumulate"}
_C_LOOP_MODULES = ("builtins", "math", "functools", "itertools", "_functools")


@functools.lru_cache(maxsize=4096)
def is_learner_file(filename: str) -> bool:
    """True for code the learner wrote (a cell, a script, the bank's answers), not torch, numpy, the standard
    library, installed packages or viewlab's own tools.

    Code compiled under a name starting ``<viewlab`` (a test run's own watcher in the kernel) is viewlab's too.

    >>> is_learner_file(torch.__file__), is_learner_file("/tmp/ipykernel_1/cell.py"), is_learner_file("<viewlab x>")
    (False, True, False)
    """
    name = filename.replace("\\", "/")
    if name.startswith("<viewlab"):
        return False
    return name.startswith(_BANK) or not name.startswith(_OUTSIDE)  # the bank plays the learner, installed or not


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


def _viewlab_name(frame: Any, module: str) -> str | None:
    """The public viewlab function a call from the learner's code entered, or None for the checker's own hooks
    (dispatch modes, finalisers, the thread wrapper: torch, the GC or a thread call them, not the learner)."""
    code = frame.f_code
    if code.co_filename.replace("\\", "/").startswith(_HERE):
        return None
    fn = frame.f_locals.get("fn") if code.co_name == "wrapper" else None  # a public function behind @entry
    if fn is not None:
        module, qual = getattr(fn, "__module__", module), getattr(fn, "__qualname__", code.co_qualname)
    elif code.co_name.startswith("_") and code.co_name != "__init__":
        return None
    else:
        qual = code.co_qualname
    return f"{module}.{qual.removesuffix('.__init__')}"


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    return [t for o in obj for t in _tensors(o)] if isinstance(obj, (tuple, list)) else []


@functools.lru_cache(maxsize=256)
def _static_cached(fn: Callable[..., Any]) -> tuple[str, str] | None:
    return static_loop(fn)


def _static(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """:func:`.loops.static_loop`, read once per function (the source does not change between inputs)."""
    try:
        return _static_cached(fn)
    except TypeError:  # an unhashable callable object
        return static_loop(fn)


def _autograd(shown: str) -> str:
    """How a message names autograd seen by name: the engine (backward, grad) or forward-mode AD.

    >>> _autograd("torch.autograd.grad"), _autograd("torch.func.jacfwd")
    ('the autograd engine (through torch.autograd.grad)', 'forward-mode autograd (through torch.func.jacfwd)')
    """
    reverse = shown.endswith((".grad", ".backward", "vjp", "jacrev")) and "forward_ad" not in shown
    return f"{'the autograd engine' if reverse else 'forward-mode autograd'} (through {shown})"


_API_FAMILY = {n: family for family, names in API_NAMES.items() for n in names}


class ApiRecorder(TorchFunctionMode):
    """Records the torch functions called while active (before they decompose): the first of each family in
    :data:`~.rules.API_NAMES` or :data:`~.rules.FAMILIES` (an ``torch.ops.aten`` call by name), the first one
    through which data leaves torch, and, per thread, the one running now (:meth:`running`)."""

    def __init__(self, hits: dict[str, Hit], exits: list[Hit]) -> None:
        super().__init__()
        self.hits, self.exits = hits, exits
        self._now = threading.local()

    def running(self) -> str | None:
        return getattr(self._now, "name", None)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        bare, shown = _api_name(func)
        family = _API_FAMILY.get(bare)
        if family is None and bare.startswith("aten."):
            match = [f for f, (ops, _) in FAMILIES.items() for o in ops if bare == o or bare.startswith(o + ".")]
            family = match[0] if match else None
        if family is not None and family not in self.hits:
            self.hits[family] = Hit(family, _autograd(shown) if family == "autograd" else shown, learner_line(_SKIP))
        if bare in _EXITS and not self.exits and any(isinstance(a, torch.Tensor) and a.numel() > 1 for a in args):
            self.exits.append(Hit("torch_only", shown, learner_line(_SKIP)))
        outer = self.running()
        self._now.name = shown if outer is None else outer
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self._now.name = outer


def call_problem(fn: Callable[..., Any], reference: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """Why ``fn`` cannot be called with ``args`` before calling it (a hint about the solution would not help) (the signature it should have, from the reference), or None.

    >>> call_problem(lambda x: x, lambda x, n: x, (1, 2))
    'your function cannot be called as the check calls it: it takes (x), the check passes 2 arguments, as in (x, n)'
    """
    try:
        inspect.signature(fn).bind(*args)
        return None
    except TypeError:
        pass
    except ValueError:  # no signature to read (a builtin): let the call itself say what is wrong
        return None
    try:  # annotations as written (the bank's are strings), without the return type
        wanted = str(inspect.signature(reference).replace(return_annotation=inspect.Signature.empty)).replace("'", "")
    except (TypeError, ValueError):
        wanted = f"{len(args)} parameters"
    return (
        f"your function cannot be called as the check calls it: it takes {inspect.signature(fn)}, the check passes "
        f"{len(args)} argument{'s' if len(args) != 1 else ''}, as in {wanted}"
    )


class Watch:
    """Records the learner's function as it runs (see the module docstring); read its findings after the ``with``.

    Args:
        rules: the exercise's rules (what to watch for).
        memory: the exercise's demand on memory (``"view"``: zero new bytes are counted, borrowed ones too).
        inputs: the function's arguments (their storages are neither new nor borrowed).
        loops: also watch for loops (default: when the rules say ``no_python_loops``).

    Findings: ``recorder`` (the dispatch-level :class:`~.rules.OpRecorder`), ``more`` (family ->
    :class:`~.rules.Hit`, by name: torch functions, numpy, forward AD), ``numpy`` / ``viewlab`` / ``exits``
    (the first such call, as a Hit), ``made`` (a tensor made without an operator, e.g. ``torch.frombuffer``),
    ``loop`` (``(what, line)``) and ``threads`` (how many were followed). :meth:`before_compare` and
    :meth:`after_compare` turn them into the message of the first rule broken.
    """

    def __init__(
        self, rules: Rules, memory: str | None = None, inputs: tuple[Any, ...] = (), loops: bool | None = None
    ) -> None:
        self.rules, self.memory = rules, memory
        self.loops = rules.no_python_loops is not None if loops is None else loops
        self.recorder = OpRecorder(_tensors(inputs))
        self.modes: tuple[Any, ...] = ()  # the meter's dispatch mode, entered in started threads
        self.more: dict[str, Hit] = {}
        self.exits: list[Hit] = []
        self.numpy: Hit | None = None
        self.viewlab: Hit | None = None
        self.made: Hit | None = None
        self.loop: tuple[str, str | None] | None = None
        self.threads = 0
        self.api = ApiRecorder(self.more, self.exits)
        self._start: Callable[..., Any] | None = None
        self._saved: tuple[Any, Any] | None = None

    @staticmethod
    def wanted(rules: Rules, memory: str | None) -> bool:
        """Whether a check needs watching: an exercise with rules, or one that asks for a view (zero new bytes)."""
        return bool(rules.labels()) or memory == "view"

    def follow_meter(self, measurement: Any) -> Watch:
        """Enter ``viewlab.measure``'s dispatch mode in the threads started too (None: no meter)."""
        tracker = getattr(getattr(measurement, "_live", None), "tracker", None)
        self.modes = (tracker,) if tracker is not None else ()
        return self

    # ----- the messages, in the order the rules are judged ----------------------------------------------------
    def forbidden(self, fn: Callable[..., Any] | None = None) -> str | None:
        """The first forbidden family seen, or with ``fn`` a loop in its source or seen while it ran: the rules
        that come first, even when the function then raised."""
        reason = forbid_problem(self.rules, self.recorder, self.more)
        if reason is None and fn is not None and self.rules.no_python_loops is not None:
            static = _static(fn)
            seen = (static[1], static[0]) if static is not None else self.loop  # (what, line)
            reason = static_loop_problem(*seen) if seen is not None else None
        return reason

    def before_compare(self, fn: Callable[..., Any], args: tuple[Any, ...], got: Any, measured: Any) -> str | None:
        """Rules judged before the values: forbidden work, loops, a prediction that ran, bytes."""
        for t in _tensors(got):
            self.recorder.note_borrowed(t)  # a result made straight from a buffer or an array ran no operator
        # a loop is named before the bytes it spent: the loop is the cause, its temporaries the symptom
        reason = self.forbidden(fn) or predict_problem(self.rules, self.recorder.created or self.made)
        if reason is None and measured is not None:
            reason = bytes_problem(self.rules, args, measured.peak_bytes, self.recorder.borrowed_bytes)
        return reason

    def after_compare(self, measured: Any) -> str | None:
        """Rules judged once the values are right: zero new bytes for a view, torch does the work."""
        if self.memory == "view" and measured is not None:
            made = self.recorder.created or self.made
            reason = view_bytes_problem(measured.peak_bytes + self.recorder.borrowed_bytes, made)
            if reason is not None:
                return reason
        if not self.rules.labels():
            return None
        return outside_problem(self.numpy, self.exits[0] if self.exits else None, self.viewlab)

    # ----- what is seen ------------------------------------------------------------------------------------
    def _note(self, kind: str, name: str, line: str | None) -> None:
        hit = Hit(kind, name, line)
        if kind == "numpy":
            self.numpy = self.numpy or hit
            for family in NUMPY_NAMES.get(name, ()):
                self.more.setdefault(family, Hit(family, name, line))
        elif kind == "viewlab":
            self.viewlab = self.viewlab or hit
        elif kind == "autograd":
            self.more.setdefault("autograd", Hit("autograd", _autograd(name), line))
        elif kind == "exit":
            if not self.exits:
                self.exits.append(hit)
            if name.endswith("frombuffer"):
                self.made = self.made or Hit("created", name, line)
        elif kind == "loop" and self.loops:
            self.loop = self.loop or (f"{name}(), a Python loop in C over a sequence", line)

    def _called(self, frame: Any) -> None:
        """A Python function entered from the learner's code: numpy, viewlab or forward AD?"""
        code = frame.f_code
        file, name = code.co_filename.replace("\\", "/"), code.co_name
        if is_learner_file(file) or name.startswith("<") or name.endswith("_dispatcher"):
            return
        caller = frame.f_back
        line = place(caller.f_code.co_filename, caller.f_lineno)
        module = frame.f_globals.get("__name__", "")
        if file.startswith(_NUMPY):
            self._note("numpy", f"numpy.{name}", line)
        elif file.startswith(PACKAGE_DIR):
            shown = _viewlab_name(frame, module)
            if shown is not None and not set(shown.split(".")) & set(self.rules.allow_viewlab):
                self._note("viewlab", shown, line)
        elif file.startswith(_AD_FILES[2:]) or name in _FUNC_AD:
            shown = f"torch.func.{name}" if file.startswith(_AD_FILES[:2]) else f"{module}.{code.co_qualname}"
            self._note("autograd", shown, line)

    def _c_called(self, fn: Any, frame: Any) -> None:
        """A C function called by the learner's code: numpy's, torch's ways out of torch, a loop in C?"""
        name = getattr(fn, "__name__", "")
        module = getattr(fn, "__module__", None) or ""
        owner = getattr(fn, "__self__", None)
        owner_module = type(owner).__module__ or ""
        line = place(frame.f_code.co_filename, frame.f_lineno)
        if module.startswith("numpy") or owner_module.startswith("numpy"):
            if type(owner).__name__ == "ufunc":
                self._note("numpy", f"numpy.{owner.__name__}.{name}", line)
            elif owner_module.startswith("numpy") and type(owner).__name__ == "ndarray":
                self._note("numpy", f"ndarray.{name}", line)
            else:
                self._note("numpy", f"numpy.{name}", line)
        elif name in _EXITS and (module == "torch" or isinstance(owner, torch.Tensor)):
            shown = f"Tensor.{name}" if isinstance(owner, torch.Tensor) else f"torch.{name}"
            if not isinstance(owner, torch.Tensor) or owner.numel() > 1:
                self._note("exit", shown, line)
        elif name in _C_LOOPS and (module in _C_LOOP_MODULES or owner_module in _C_LOOP_MODULES):
            self._note("loop", name, line)

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            file = frame.f_code.co_filename
            if file.startswith(_WATCHED) and frame.f_back is not None:
                if is_learner_file(frame.f_back.f_code.co_filename):
                    self._called(frame)
        elif event == "c_call" and is_learner_file(frame.f_code.co_filename):
            self._c_called(arg, frame)

    def _tracer(self) -> Callable[..., Any]:
        """A ``sys.settrace`` function for one thread: backward jumps and re-entry in the learner's code."""
        last: dict[Any, int] = {}  # frame -> offset of its last line event
        active: dict[Any, int] = {}  # code object -> frames of it running now

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                if frame.f_lasti <= last.get(frame, -1) and self.loop is None:
                    line = place(frame.f_code.co_filename, frame.f_lineno)
                    self.loop = ("a loop (this line ran again after a jump back)", line)
                last[frame] = frame.f_lasti
            elif event == "return":
                active[frame.f_code] -= 1
                if not frame.f_code.co_flags & 0x20 or arg is None:  # a generator that yields comes back
                    last.pop(frame, None)
            return local

        def trace(frame: Any, event: str, arg: Any) -> Any:
            if event != "call" or not is_learner_file(frame.f_code.co_filename):
                return None
            code = frame.f_code
            active[code] = active.get(code, 0) + 1
            if active[code] > 1 and frame not in last and self.loop is None:
                caller = frame.f_back
                where = place(caller.f_code.co_filename, caller.f_lineno) if caller is not None else None
                self.loop = (f"a call of {code.co_name} while it runs (recursion)", where)
            return local

        return trace

    # ----- on and off, in this thread and the ones started -------------------------------------------------
    def _on(self, modes: tuple[Any, ...]) -> tuple[Any, Any]:
        saved = sys.gettrace(), sys.getprofile()
        for mode in modes:
            enter_mode(mode)
        self.api.__enter__()
        sys.setprofile(self._profile)
        if self.loops:
            sys.settrace(self._tracer())
        return saved

    def _off(self, modes: tuple[Any, ...], saved: tuple[Any, Any]) -> None:
        sys.settrace(saved[0])
        sys.setprofile(saved[1])
        self.api.__exit__(None, None, None)
        for mode in reversed(modes):
            remove_mode(mode)

    def _follow(self, thread: threading.Thread) -> None:
        """Make ``thread`` (about to start) run with this watch's recorders, hooks and meter."""
        run = thread.run
        modes = (self.recorder, *self.modes)

        def followed() -> None:
            saved = self._on(modes)
            try:
                run()
            finally:
                self._off(modes, saved)

        thread.run = followed  # type: ignore[method-assign]
        self.threads += 1

    def __enter__(self) -> Watch:
        self.recorder.inside = self.api.running
        enter_mode(self.recorder)
        self._start = start = threading.Thread.start
        watch = self

        def start_followed(thread: threading.Thread) -> None:
            watch._follow(thread)
            start(thread)

        threading.Thread.start = start_followed  # type: ignore[method-assign]
        self._saved = self._on(())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._saved is not None and self._start is not None
        self._off((), self._saved)
        threading.Thread.start = self._start  # type: ignore[method-assign]
        remove_mode(self.recorder)
