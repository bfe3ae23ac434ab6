"""The machinery every guard shares: a recorder of the learner's outermost torch call, the public name of a
call, and :class:`_Guard`, the context manager and decorator that enters a guard's modes on a thread and takes
them off by identity (on another thread's behalf too: :func:`viewlab._dispatch.leave`).

>>> import torch
>>> from torch.utils._python_dispatch import TorchDispatchMode
>>> class Passing(TorchDispatchMode):
...     recorder = None
...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
...         return func(*args, **(kwargs or {}))
>>> def make():
...     mode = Passing()
...     mode.recorder = _CallRecorder()
...     return mode
>>> with _Guard("demo", make):
...     _public_name(torch.Tensor.add), float(torch.ones(1).add(1))
('Tensor.add', 2.0)
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ._checks import entry, problem
from ._dispatch import enter_mode, leave, pending, remove_mode, sweep


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


class _Guard:
    """A context manager and decorator that enters a fresh ``make_mode()`` and its ``recorder`` on the calling
    thread. ``name``: the public function that made it. What is active is kept per thread, so one guard used
    on two threads keeps the two apart; as a decorator, each call enters a guard of its own (recursion and
    concurrent calls too). Generator and async functions are refused as decorated functions: the guard would end
    when the call returns its generator or coroutine, before any of the body runs.

    A block that ends on a thread that did not enter it (a generator suspended inside the block, then closed,
    finished or collected on another thread) disarms its modes at once and leaves their removal to the thread
    whose stack holds them (:func:`viewlab._dispatch.leave`): it runs it at its next entry into viewlab or after
    the cell."""

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
        if pending():
            sweep()
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
                leave(owner, functools.partial(self._finish, owner, mode))
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
