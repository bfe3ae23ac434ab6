"""Watching one call of the learner's function with public mechanisms only, and judging what was seen.

:class:`Watch` is entered around one call of the learner's function (:func:`.engine.run_once`). While it is
on, in the calling thread:

* :class:`~.recorder.OpRecorder` (a ``TorchDispatchMode``) records every aten operator, the new and
  borrowed storages, and the operators the autograd engine runs;
* :class:`~.recorder.ApiRecorder` (a ``TorchFunctionMode``) records the torch functions called before they
  decompose (``repeat_interleave``, ``scaled_dot_product_attention``, ``_make_dual``, ``torch.autograd.grad``)
  and the data leaving torch (``.tolist()``, ``.numpy()``, ``Tensor.__array__``).

After the call, :func:`.source.read` reads the answer's source and its helpers' (loops; numpy, viewlab and
autograd called by name; ``torch.from_numpy`` / ``torch.frombuffer``). :meth:`Watch.seen` puts it all in a
:class:`~.recorder.Seen`, plain data that :mod:`.messages` judges. The operator count on two sizes
(:func:`.engine.check`'s loop probe) is the third witness of a loop.

Not followed, by design: threads the function starts (a mode is per thread, and nothing of the process is
patched: work moved into a thread is not recorded), other processes, code that takes torch's modes off
itself, and C extensions other than torch. The in-kernel check aims at honest mistakes; trusted grading runs
the answer in another process.

>>> import numpy as np
>>> from viewlab.course.exercises.rules import Rules
>>> def answer(x):
...     return np.tile(x.numpy(), 2)
>>> import torch
>>> with Watch(Rules(forbid=("tile",))) as w:
...     _ = answer(torch.arange(2))
>>> seen = w.seen(answer)
>>> seen.named["tile"].op, seen.exit.op
('numpy.tile', 'Tensor.numpy')
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from viewlab._dispatch import enter_mode, remove_mode

from .messages import forbid_problem, judge_after, judge_before, static_loop_problem
from .recorder import ApiRecorder, Hit, OpRecorder, Seen, autograd_name
from .rules import NUMPY_NAMES, Rules
from .source import read_once

__all__ = ["Watch", "call_problem"]


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    return [t for o in obj for t in _tensors(o)] if isinstance(obj, (tuple, list)) else []


def call_problem(fn: Callable[..., Any], reference: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """Why ``fn`` cannot be called with ``args`` (the signature it should have, from the reference), or None:
    said before calling it, since a hint about the solution would not help.

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
        wanted = str(inspect.signature(reference).replace(return_annotation=inspect.Signature.empty))
        wanted = wanted.replace("'", "")
    except (TypeError, ValueError):
        wanted = f"{len(args)} parameters"
    return (
        f"your function cannot be called as the check calls it: it takes {inspect.signature(fn)}, the check passes "
        f"{len(args)} argument{'s' if len(args) != 1 else ''}, as in {wanted}"
    )


def _allocations(measured: Any) -> list[tuple[str, int]]:
    """The operators that made new storage in ``measured`` (a ``viewlab.measure`` with ``log_ops=True``)."""
    return [] if measured is None else [(op.name, op.bytes) for op in measured.ops if op.bytes > 0]


class Watch:
    """Records the learner's function as it runs in this thread (see the module docstring); read
    :meth:`seen` after the ``with``, or the messages :meth:`forbidden`, :meth:`before_compare` and
    :meth:`after_compare`.

    Args:
        rules: the exercise's rules (what to watch for).
        memory: the exercise's demand on memory (``"view"``: zero new bytes are counted, borrowed ones too).
        inputs: the function's arguments (their storages are neither new nor borrowed).
    """

    def __init__(self, rules: Rules, memory: str | None = None, inputs: tuple[Any, ...] = ()) -> None:
        self.rules, self.memory = rules, memory
        self.recorder = OpRecorder(_tensors(inputs))
        self.api = ApiRecorder()
        self._last: Seen | None = None

    @staticmethod
    def wanted(rules: Rules, memory: str | None) -> bool:
        """Whether a check needs watching: an exercise with rules, or one that asks for a view (zero new bytes)."""
        return bool(rules.labels()) or memory == "view"

    def __enter__(self) -> Watch:
        self.recorder.inside = self.api.running
        enter_mode(self.recorder)
        try:
            enter_mode(self.api)
        except BaseException:
            remove_mode(self.recorder)  # nothing left behind by a failed start
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        remove_mode(self.api)
        remove_mode(self.recorder)

    # ----- what was seen, as plain data ------------------------------------------------------------------
    def seen(self, fn: Callable[..., Any], got: Any = None, measured: Any = None) -> Seen:
        """The record of the run (:class:`~.recorder.Seen`): the recorders' findings and ``fn``'s source.

        ``got``: the result (a tensor made straight over a buffer or an array ran no operator: its storage
        counts as borrowed); ``measured``: ``viewlab.measure``'s measurement of the call, or None.
        """
        for t in _tensors(got):
            self.recorder.note_borrowed(t)
        rec, api = self.recorder, self.api
        seen = Seen(
            ops=dict(rec.hits),
            created=rec.created,
            borrowed_bytes=rec.borrowed_bytes,
            n_ops=rec.n_ops,
            lifted_elements=rec.lifted_elements,
            exit=api.exits[0] if api.exits else None,
            peak_bytes=None if measured is None else measured.peak_bytes,
            allocations=_allocations(measured),
        )
        reading = read_once(fn)
        if self.rules.no_python_loops is not None:
            seen.loop = reading.loop
        allowed = set(self.rules.allow_viewlab)
        for call in reading.calls:
            hit = Hit(call.kind, call.name, call.line)
            if call.kind == "numpy":
                seen.numpy = seen.numpy or hit
                for family in NUMPY_NAMES.get(call.name, ()):
                    seen.named.setdefault(family, Hit(family, call.name, call.line))
            elif call.kind == "viewlab" and not set(call.name.split(".")) & allowed:
                seen.viewlab = seen.viewlab or hit
            elif call.kind == "autograd":
                seen.named.setdefault("autograd", Hit("autograd", autograd_name(call.name), call.line))
            elif call.kind == "profiler":
                seen.named.setdefault("profiler", Hit("profiler", call.name, call.line))
            elif call.kind == "exit":
                seen.exit = seen.exit or hit
                if call.name.endswith("frombuffer"):
                    seen.made = seen.made or Hit("created", call.name, call.line)
        for (
            family,
            hit,
        ) in api.hits.items():  # by name in the source first: it says which (torch.func.jacfwd)
            seen.named.setdefault(family, hit)
        self._last = seen
        return seen

    # ----- the messages, in the order the rules are judged ----------------------------------------------
    def forbidden(self, fn: Callable[..., Any]) -> str | None:
        """The first forbidden family seen, or a loop in ``fn``'s source: the rules that come first, even when
        the function then raised."""
        seen = self.seen(fn)
        reason = forbid_problem(self.rules, seen)
        if reason is None and self.rules.no_python_loops is not None and seen.loop is not None:
            reason = static_loop_problem(*seen.loop)
        return reason

    def before_compare(self, fn: Callable[..., Any], args: tuple[Any, ...], got: Any, measured: Any) -> str | None:
        """Rules judged before the values (:func:`~.messages.judge_before`)."""
        return judge_before(self.rules, self.seen(fn, got, measured), args)

    def after_compare(self, measured: Any) -> str | None:
        """Rules judged once the values are right (:func:`~.messages.judge_after`), from the last :meth:`seen`."""
        if self._last is None:
            raise RuntimeError("Watch.after_compare(): call before_compare() first (it records what was seen)")
        if measured is not None:
            self._last.peak_bytes, self._last.allocations = measured.peak_bytes, _allocations(measured)
        return judge_after(self.rules, self.memory, self._last)
