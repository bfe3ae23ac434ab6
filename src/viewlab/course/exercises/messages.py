"""The messages of broken rules, judged from plain data: what one run of the learner's function did
(:class:`.recorder.Seen`), its arguments and the exercise's :class:`~.rules.Rules`.

Each message reads ``breaks rule `<label>`: <what was seen> ... <how to fix it>``, naming the operator or call
and, when one was found, the learner's own line (:func:`viewlab._learner.place`). :func:`judge_before` gives
the rules judged before the values (forbidden work, loops, a prediction that ran, bytes), :func:`judge_after`
those judged once the values are right (zero new bytes for a view, torch does the work). Both read only a
``Seen``, so a grader that ran the answer in another process judges with the same words.

>>> seen = Seen(ops={"repeat": Hit("repeat", "aten.repeat.default", "f.py:2: y = x.repeat(2)")})
>>> judge_before(Rules(forbid=("repeat",)), seen, ()).split(" at ")[0]
'breaks rule `forbid repeat`: your function ran aten.repeat.default'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from viewlab import shares_storage
from viewlab._checks import entry, type_error

from .compare import describe
from .recorder import Hit, OpRecorder, Seen, at
from .rules import FAMILIES, FORBIDS, Rules

__all__ = [
    "judge_before",
    "judge_after",
    "forbid_problem",
    "loop_problem",
    "static_loop_problem",
    "memory_problem",
    "view_bytes_problem",
    "bytes_problem",
    "predict_problem",
    "outside_problem",
    "Refused",
    "refusal_problem",
]


def _require_rules(rules: Any) -> Rules:
    if not isinstance(rules, Rules):
        raise type_error("rules", "a Rules(...), e.g. Rules(forbid=('repeat',))", rules)
    return rules


def _as_seen(seen: Any) -> Seen:
    """A :class:`Seen`, from itself or from an :class:`OpRecorder` (its operators alone)."""
    if isinstance(seen, OpRecorder):
        return Seen(
            ops=dict(seen.hits),
            created=seen.created,
            borrowed_bytes=seen.borrowed_bytes,
            n_ops=seen.n_ops,
            lifted_elements=seen.lifted_elements,
        )
    if not isinstance(seen, Seen):
        raise type_error("seen", "the record of one run (a Seen, or an OpRecorder)", seen)
    return seen


@entry("forbid_problem")
def forbid_problem(rules: Rules, seen: Seen | OpRecorder) -> str | None:
    """The message for the first forbidden family seen (by operator, or by name: a torch function before it
    decomposes, a numpy function doing the same work, autograd by name), or None.

    >>> forbid_problem(Rules(forbid=("tile",)), Seen(named={"tile": Hit("tile", "numpy.tile")}))[:52]
    'breaks rule `forbid tile`: your function called nump'
    """
    rules, seen = _require_rules(rules), _as_seen(seen)
    for family in rules.forbid:
        hit = seen.first(family)
        if hit is not None and family == "repeat" and "tile" in rules.forbid and "tile(" in (hit.line or ""):
            family, hit = "tile", seen.first("tile") or hit
        if hit is not None:
            fix = _fix_for(family, rules)
            return (
                f"breaks rule `forbid {family}`: your function {hit.ran()}{hit.where()}. "
                f"The exercise forbids {FORBIDS[family]}; instead, {fix}"
            )
    return None


def _fix_for(family: str, rules: Rules) -> str:
    """What to do instead of a forbidden family, never pointing at another family the same rules forbid."""
    if family == "expand" and not rules.predict_without_running:  # a tensor is asked for, not a prediction
        return (
            "reach the same stride-0 reads another way: let arithmetic broadcast a size-1 dim (x[:, None]), or set "
            "the strides with as_strided where a view is asked for (expand, expand_as and broadcast_to all run "
            "aten.expand)"
        )
    if family == "repeat" and "expand" in rules.forbid:  # the usual advice, a stride-0 expand, is forbidden too
        return "let broadcasting supply the repeated values: give the smaller tensor a size-1 dim where it must stretch"
    return FAMILIES[family][1]


@entry("judge_before")
def judge_before(rules: Rules, seen: Seen, args: tuple[Any, ...]) -> str | None:
    """Rules judged before the values, in this order: forbidden work, a loop (the cause, named before the
    bytes its temporaries spent), a prediction that created a tensor, the bytes limit; or None."""
    rules, seen = _require_rules(rules), _as_seen(seen)
    reason = forbid_problem(rules, seen)
    if reason is None and rules.no_python_loops is not None and seen.loop is not None:
        reason = static_loop_problem(*seen.loop)
    if reason is None:
        reason = predict_problem(rules, seen.created or seen.made)
    if reason is None and seen.peak_bytes is not None:
        reason = bytes_problem(rules, args, seen.peak_bytes, seen.borrowed_bytes, seen.allocations)
    return reason


@entry("judge_after")
def judge_after(rules: Rules, memory: str | None, seen: Seen) -> str | None:
    """Rules judged once the values are right: zero new bytes for a view (``memory="view"``), then the
    implicit rules of an exercise with rules (``no_viewlab``, ``torch_only``); or None."""
    rules, seen = _require_rules(rules), _as_seen(seen)
    if memory == "view" and seen.peak_bytes is not None:
        reason = view_bytes_problem(seen.peak_bytes + seen.borrowed_bytes, seen.created or seen.made)
        if reason is not None:
            return reason
    if memory == "view" and seen.exit is not None:
        return (
            f"breaks rule `must_view`: your function {seen.exit.ran()}{seen.exit.where()}, which copies the data "
            "out of torch. A view allocates nothing, not even a copy that is gone by the end: reach the result "
            "with view ops alone (view, transpose, expand, slicing)"
        )
    if not rules.labels():
        return None
    return outside_problem(seen.numpy, seen.exit, seen.viewlab)


_LOOP_FIX = (
    "Replace the loop by one operation on whole tensors (indexing with None adds the size-1 dims broadcasting needs)"
)


@entry("loop_problem")
def loop_problem(small: Seen | OpRecorder, big: Seen | OpRecorder, n_small: int, n_big: int) -> str | None:
    """Why the op counts on two input sizes show a Python loop (or a Python list), or None.

    >>> loop_problem(Seen(n_ops=3), Seen(n_ops=6), 3, 6)[:62]
    'breaks rule `no_python_loops`: your function ran 3 torch opera'
    """
    for name, run in (("small", small), ("big", big)):
        if not isinstance(run, (Seen, OpRecorder)):
            raise type_error(name, "the record of one run (a Seen or an OpRecorder)", run)
    if big.n_ops > small.n_ops:
        return (
            f"breaks rule `no_python_loops`: your function ran {small.n_ops} torch operators for size "
            f"{n_small} and {big.n_ops} for size {n_big}; a vectorised answer runs the same few operators "
            f"whatever the size, so the work is in a Python loop. {_LOOP_FIX}"
        )
    if big.lifted_elements > small.lifted_elements:
        return (
            f"breaks rule `no_python_loops`: your function built tensors from Python lists of "
            f"{small.lifted_elements} scalars for size {n_small} and {big.lifted_elements} for size {n_big} "
            "(torch.tensor of a list made in Python); compute the result with torch operations on whole "
            "tensors instead"
        )
    return None


def static_loop_problem(what: str, line: str | None) -> str:
    """The message for a loop seen in the source or while the function ran (``what``: "a for loop", ...).

    >>> static_loop_problem("a for loop", "f.py:3: for v in x:")
    'breaks rule `no_python_loops`: your function has a for loop at f.py:3: `for v in x:`; the exercise allows no Python loop: Replace the loop by one operation on whole tensors (indexing with None adds the size-1 dims broadcasting needs)'
    """
    return f"breaks rule `no_python_loops`: your function has {what}{at(line)}; the exercise allows no Python loop: {_LOOP_FIX}"


def memory_problem(
    memory: str | None, inputs: list[torch.Tensor], outputs: list[torch.Tensor], bytes_limited: bool = False
) -> str | None:
    """The rules ``must_view`` (``memory="view"``: every output shares memory with an input) and ``must_copy``
    (``"copy"``: none does, an empty output aside), or None when ``outputs`` keep them. ``bytes_limited``: the
    exercise also limits its new bytes, so a copy must be made once (no ".clone() after a copy" advice).

    >>> x = torch.zeros(2, 3)
    >>> memory_problem("view", [x], [x.t()]) is None, memory_problem("copy", [x], [x.t()])[:26]
    (True, 'breaks rule `must_copy`: t')
    """
    if memory is None:
        return None
    for i, out in enumerate(outputs):
        where = "the result" if len(outputs) == 1 else f"result tensor {i}"
        shared = any(shares_storage(out, x) for x in inputs)
        if memory == "view" and not shared and out.numel() > 0:
            return (
                f"breaks rule `must_view`: {where} shares no memory with the input, so it was copied (new bytes "
                "were allocated). The exercise asks for a view: use only view ops (view, transpose, expand, "
                "slicing, ...) and avoid contiguous(), clone(), repeat(), reshape() of non-contiguous input, "
                "arithmetic."
            )
        if memory == "copy" and shared and out.numel() > 0:  # an empty result has no element a write could reach
            advice = (
                "make the copy once, with an op that always copies and leaves a layout the rest can view (adding "
                ".clone() after a step that may already have copied copies twice, over the byte limit)"
                if bytes_limited
                else "add .clone(), which always copies (.contiguous() and reshape() return a view, or the input "
                "itself, when the layout allows it)"
            )
            return (
                f"breaks rule `must_copy`: {where} shares memory with the input, so writing to it would change the "
                f"input. The exercise asks for an independent copy: {advice}."
            )
    return None


def view_bytes_problem(new_bytes: int, first: Hit | None) -> str | None:
    """Rule ``must_view`` measured: a view allocates nothing while it runs, not even a temporary. ``first``: the
    first tensor made; with ``new_bytes`` 0, one made over memory from outside torch (``torch.frombuffer``).

    >>> view_bytes_problem(24, Hit("created", "aten.clone.default on cpu", "f.py:2: y = x.clone()"))[:70]
    'breaks rule `must_view`: while your function ran, new tensors took 24 '
    """
    if new_bytes <= 0 and (first is None or first.op.startswith("aten.")):
        return None
    made = f"; the first, {first.op}{first.where()}" if first is not None else ""
    seen = f"new tensors took {new_bytes:,} B" if new_bytes > 0 else "it made a tensor over memory from outside torch"
    return (
        f"breaks rule `must_view`: while your function ran, {seen} (viewlab.measure, memory borrowed from numpy "
        f"included){made}. A view allocates zero new bytes, not even a temporary that is gone by the end: reach the "
        "result with view ops alone (view, transpose, expand, slicing)"
    )


def bytes_problem(
    rules: Rules, args: tuple[Any, ...], peak: int, borrowed: int = 0, made: Sequence[tuple[str, int]] = ()
) -> str | None:
    """The rule ``max_new_bytes`` (``peak``: what ``viewlab.measure`` saw while the learner's function ran on
    ``args``; ``borrowed``: bytes of memory it borrowed from numpy or a buffer, which the meter cannot see;
    ``made``: ``(operator, bytes)`` for each operator that made new storage, named in the message).

    >>> bytes_problem(Rules(max_new_bytes=8), (), 12)[:60]
    'breaks rule `max_new_bytes`: while your function ran, new te'
    """
    if rules.max_new_bytes is not None:
        limit = rules.max_new_bytes(*args) if callable(rules.max_new_bytes) else rules.max_new_bytes
        if peak + borrowed > limit:
            also = f" and {borrowed:,} B borrowed from numpy or a buffer" if borrowed else ""
            return (
                f"breaks rule `max_new_bytes`: while your function ran, new tensors peaked at {peak:,} B "
                f"(viewlab.measure){also}; the exercise allows {limit:,} B here{_made_by(made)}. A temporary "
                "counts while it is alive, even when it is gone by the end of the line: find the one you do not need"
            )
    return None


def _made_by(made: Sequence[tuple[str, int]], most: int = 6) -> str:
    """``; made by aten.zeros.default (64 B), ...``: the operators that made storage, the first ``most``."""
    if not made:
        return ""
    named = ", ".join(f"{name} ({n:,} B)" for name, n in made[:most])
    return f"; new storage was made by {named}" + (f" and {len(made) - most} more" if len(made) > most else "")


def predict_problem(rules: Rules, made: Hit | None) -> str | None:
    """The rule ``predict_without_running``: ``made``, the first tensor the prediction created (any device).

    >>> predict_problem(Rules(predict_without_running=True), Hit("created", "aten.empty.memory_format on meta"))[:69]
    'breaks rule `predict_without_running`: your function created a tensor'
    """
    if not rules.predict_without_running or made is None:
        return None
    return (
        f"breaks rule `predict_without_running`: your function created a tensor ({made.ran()}){made.where()}; "
        "a prediction creates no tensor on any device (meta included). It ran the code it should predict: "
        "compute the answer from sizes, dtypes and element sizes instead"
    )


def outside_problem(numpy: Hit | None, exit: Hit | None, viewlab: Hit | None) -> str | None:
    """The implicit rules of an exercise with rules: ``no_viewlab`` (viewlab's own functions do not do the work)
    and ``torch_only`` (nor numpy, nor Python on data taken out of torch), or None.

    >>> outside_problem(None, None, Hit("viewlab", "viewlab.attention.causal_mask", "f.py:2: return causal_mask(q, k)"))[:62]
    'breaks rule `no_viewlab`: your function called viewlab.attenti'
    """
    if viewlab is not None:
        return (
            f"breaks rule `no_viewlab`: your function {viewlab.ran()}{viewlab.where()}. The exercise asks you to "
            "write that yourself, so viewlab's own functions may not do the work (only those it names); "
            "build it from torch operations instead"
        )
    hit = numpy or exit
    if hit is None:
        return None
    who = "numpy" if numpy is not None else "Python"
    return (
        f"breaks rule `torch_only`: your function {hit.ran()}{hit.where()}, so {who} did work that the rules check "
        "on torch operators (numpy arrays, lists and buffers are out of their sight); instead, do it with torch "
        "operations on the tensors themselves"
    )


# ----- inputs an answer must refuse ----------------------------------------------------------------------
@dataclass(frozen=True)
class Refused:
    """What the reference did with an input it must refuse: raised one of the exercise's ``raises`` types
    (the message is the reference's own). A learner's function must raise one of them there too.

    >>> Refused(("RuntimeError", "ValueError"), "sizes do not match")
    raises RuntimeError or ValueError (the reference: sizes do not match)
    """

    allowed: tuple[str, ...]
    message: str = ""

    def __repr__(self) -> str:
        said = f" (the reference: {self.message})" if self.message else ""
        return f"raises {' or '.join(self.allowed)}{said}"


def refusal_problem(expected: Refused, raised: BaseException | str | None, got: Any = None) -> str | None:
    """Why the learner's answer to an input the exercise refuses is wrong (``raised``: the exception it raised, or
    its type's name; None when it returned ``got``), or None when it raised an allowed type.

    >>> refusal_problem(Refused(("ValueError",), "no"), KeyError("k")).split(";")[1]
    ' it raised KeyError. Raise ValueError with a message that says which sizes do not fit'
    >>> refusal_problem(Refused(("ValueError",), "no"), ValueError("sizes")) is None
    True
    """
    allowed = " or ".join(expected.allowed)
    said = f" ({expected.message})" if expected.message else ""
    if raised is None:
        return (
            f"on these inputs your function must refuse (raise {allowed}), as the reference does{said}; it returned "
            f"{describe(got)} instead. Check the sizes first and raise when they do not fit"
        )
    names = [c.__name__ for c in type(raised).__mro__] if isinstance(raised, BaseException) else [raised]
    if any(n in expected.allowed for n in names):
        return None
    name = names[0]
    return (
        f"on these inputs your function must raise {allowed}, as the reference does{said}; it raised {name}. "
        f"Raise {allowed} with a message that says which sizes do not fit"
    )
