"""The rules an exercise states, as data, and how :func:`viewlab.course.exercises.engine.check` enforces them.

An exercise says *what* to return (the reference checks that) and often *how*: "no loops", "no repeat",
"without calling autograd", "predict without running it". :class:`Rules` holds the how:

* ``forbid``: friendly names of operators or families (see :data:`FAMILIES`), seen through
  :class:`OpRecorder`, a dispatch mode that records every aten operator the learner's function runs;
  ``"autograd"`` is any operator run by the autograd engine (``torch.autograd.grad``, ``.backward()``).
* ``no_python_loops``: a function ``n -> args`` building inputs of size ``n``. The learner's function runs
  on two sizes; a vectorised answer runs the same number of torch operators on both, a Python loop runs
  more on the bigger one. Building the result with ``torch.tensor`` from a Python list is caught too.
* ``must_view`` / ``must_copy``: the result shares memory with an input / shares none.
* ``max_new_bytes``: the peak of new tensor storage while the function runs (``viewlab.measure``), an int
  or a function of the arguments.
* ``predict_without_running``: a prediction may not run what it predicts: the function's own peak stays
  at most :data:`PREDICT_PEAK_BYTES` (and ``forbid`` names the op it predicts about).

Each broken rule gives a message ``breaks rule `<label>`: <what was seen> ... <how to fix it>``, naming
the operator and, when the stack shows it, the learner's own line (:func:`viewlab._dispatch.learner_line`).
Rules the exercise states in its own words are ``extra`` rules, named with :func:`named_rule`.

>>> r = Rules(forbid=("repeat",))
>>> r.labels()
['forbid repeat']
>>> import torch
>>> rec = OpRecorder()
>>> with rec:
...     _ = torch.ones(2).repeat(3)
>>> rec.first_hit("repeat").op
'aten.repeat.default'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from viewlab import shares_storage
from viewlab._checks import entry, problem, require_bool, require_int, require_str, type_error
from viewlab._dispatch import PACKAGE_DIR, enter_mode, learner_line, remove_mode

__all__ = [
    "FAMILIES",
    "PREDICT_PEAK_BYTES",
    "Rules",
    "OpRecorder",
    "Hit",
    "forbid_problem",
    "loop_problem",
    "bytes_problem",
    "memory_problem",
    "named_rule",
]

#: friendly name -> (aten operator names, what to do instead)
FAMILIES: dict[str, tuple[tuple[str, ...], str]] = {
    "repeat": (
        ("aten.repeat", "aten.repeat_interleave"),
        "let broadcasting (or a stride-0 expand) supply the repeated values instead of copying them",
    ),
    "tile": (("aten.repeat",), "torch.tile copies like repeat (PyTorch runs it as aten.repeat); broadcast instead"),
    "tril": (
        ("aten.tril", "aten.triu", "aten.tril_indices", "aten.triu_indices"),
        "compare a column of positions with a row of positions (arange[:, None] and arange[None, :])",
    ),
    "expand": (
        ("aten.expand",),
        "work it out from the sizes alone (expand, expand_as and broadcast_to all run aten.expand)",
    ),
    "copy": (
        ("aten.clone", "aten.copy_", "aten._to_copy", "aten.repeat"),
        "index with None (or unsqueeze) to add size-1 dims; those are views, and + broadcasts them",
    ),
    "autograd": ((), "write the backward rule by hand: which rows of the output read the same element?"),
    "bincount": (
        ("aten.bincount", "aten.histc", "aten.histogram"),
        "make the indexed write accumulate: index_add_, or index_put_ with accumulate=True",
    ),
    "sdpa": (
        (
            "aten.scaled_dot_product_attention",
            "aten._scaled_dot_product_flash_attention_for_cpu",
            "aten._scaled_dot_product_attention_math",
            "aten._scaled_dot_product_efficient_attention",
            "aten._scaled_dot_product_flash_attention",
            "aten._scaled_dot_product_cudnn_attention",
        ),
        "build it from its parts: scores from q and k, the mask, a softmax, then the weighted sum of v",
    ),
}

#: what a prediction may allocate while it runs (a few small tensors, never what it predicts)
PREDICT_PEAK_BYTES = 64

_HERE = __file__.replace("\\", "/").rsplit("/", 1)[0] + "/"  # .../viewlab/course/exercises/, spelled as PACKAGE_DIR
_BANK = _HERE + "bank/"


def _not_learner_code() -> tuple[str, ...]:
    """What the learner's line is searched outside of: all of viewlab (the engine, the recorder, ``measure``
    and any tool the learner's function calls) except the exercise bank, whose wrong answers play the learner.

    Listed from the folders themselves, so moving or splitting a module needs no change here.

    >>> skip = _not_learner_code()
    >>> any((_BANK + "nb01_views.py").startswith(p) for p in skip), any((_HERE + "engine.py").startswith(p) for p in skip)
    (False, True)
    >>> any((PACKAGE_DIR + "layout.py").startswith(p) for p in skip)
    True
    """
    course = PACKAGE_DIR + "course/"
    outside = [PACKAGE_DIR + n for n in os.listdir(PACKAGE_DIR) if PACKAGE_DIR + n + "/" != course]
    above = [course + n for n in os.listdir(course) if course + n + "/" != _HERE]
    engine = [_HERE + n for n in os.listdir(_HERE) if _HERE + n + "/" != _BANK]
    return tuple(outside + above + engine)


_SKIP = _not_learner_code()


@dataclass(frozen=True)
class Rules:
    """The rules of one exercise (see the module docstring). Empty by default: nothing forbidden.

    >>> Rules(no_python_loops=lambda n: (n,), must_copy=True).labels()
    ['no_python_loops', 'must_copy']
    """

    forbid: tuple[str, ...] = ()
    no_python_loops: Callable[[int], tuple[Any, ...]] | None = None
    must_view: bool = False
    must_copy: bool = False
    max_new_bytes: int | Callable[..., int] | None = None
    predict_without_running: bool = False

    @entry("Rules")
    def __post_init__(self) -> None:
        if isinstance(self.forbid, str) or not isinstance(self.forbid, tuple):
            raise problem(
                TypeError,
                f"`forbid` must be a tuple of names from {tuple(FAMILIES)}, e.g. "
                f"forbid=('repeat',); got {type(self.forbid).__name__} {self.forbid!r}.",
            )
        bad = [n for n in self.forbid if n not in FAMILIES]
        if bad:
            raise problem(ValueError, f"forbid names {bad} are unknown; pick from {tuple(FAMILIES)}.")
        for flag in ("must_view", "must_copy", "predict_without_running"):
            require_bool(getattr(self, flag), flag)
        budget = self.max_new_bytes
        if budget is not None and not callable(budget):
            require_int(budget, "max_new_bytes")
        if self.must_view and self.must_copy:
            raise problem(ValueError, "must_view and must_copy exclude each other; pick one.")
        if self.no_python_loops is not None and not callable(self.no_python_loops):
            raise problem(TypeError, "`no_python_loops` must be a function n -> argument tuple of size n.")

    def labels(self) -> list[str]:
        """One label per rule, as the failure messages name them."""
        out = [f"forbid {n}" for n in self.forbid]
        out += ["no_python_loops"] if self.no_python_loops is not None else []
        out += ["must_view"] if self.must_view else []
        out += ["must_copy"] if self.must_copy else []
        out += ["max_new_bytes"] if self.max_new_bytes is not None else []
        out += ["predict_without_running"] if self.predict_without_running else []
        return out

    def sentences(self) -> list[str]:
        """The rules in words, for :func:`viewlab.course.exercises.show`."""
        out = [f"Do not use {n} (checked: every operator your function runs is recorded)." for n in self.forbid]
        if self.no_python_loops is not None:
            out.append(
                "No Python loops (checked: on a bigger input, a vectorised answer runs no more torch "
                "operators) and no building the result from Python lists."
            )
        if self.must_view:
            out.append("Return a view: no copy, zero new bytes.")
        if self.must_copy:
            out.append("Return an independent copy (sharing no memory with the input).")
        if self.max_new_bytes is not None:
            out.append(
                "Memory is measured: the peak of new tensor bytes while your function runs is limited "
                "(the statement says how much)."
            )
        if self.predict_without_running:
            out.append(
                f"Predict, do not run: your function may allocate at most {PREDICT_PEAK_BYTES} B of "
                "tensors itself (a formula on sizes allocates nothing)."
            )
        return out

    @property
    def needs_recorder(self) -> bool:
        return bool(self.forbid)


@dataclass(frozen=True)
class Hit:
    """A forbidden operator seen while the learner's function ran, with the learner's line if found."""

    family: str
    op: str
    line: str | None = None  # as viewlab._dispatch.learner_line says it: "line 3 of this cell: code"

    def where(self) -> str:
        """`` at <place>: `<code>```, the code quoted so that the sentence after it reads apart from it.

        >>> Hit("repeat", "aten.repeat.default", "line 2 of this cell: y = x.repeat(2)").where()
        ' at line 2 of this cell: `y = x.repeat(2)`'
        """
        if not self.line:
            return ""
        place, sep, code = self.line.partition(": ")
        return f" at {place}: `{code}`" if sep else f" at {self.line}"


class OpRecorder(TorchDispatchMode):
    """Records every aten operator run while active: counts, ops run by the autograd engine, ``torch.tensor``
    built from Python data, and the first use of each family in :data:`FAMILIES` (with the learner's line).

    Nothing is recorded at import; enter it with ``with OpRecorder() as rec:`` (pushed and removed by
    identity, so it nests with ``viewlab.measure``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.n_ops = 0
        self.names: list[str] = []
        self.lifted_elements = 0  # elements of tensors made from Python data (torch.tensor([...]))
        self.hits: dict[str, Hit] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        name = str(func)
        self.n_ops += 1
        self.names.append(name)
        in_backward = torch._C._current_graph_task_id() != -1
        for family, (ops, _fix) in FAMILIES.items():
            if family in self.hits:
                continue
            if (family == "autograd" and in_backward) or any(name == o or name.startswith(o + ".") for o in ops):
                self.hits[family] = Hit(
                    family,
                    "the autograd engine (running " + name + ")" if family == "autograd" else name,
                    learner_line(_SKIP),
                )
        out = func(*args, **(kwargs or {}))
        if name.startswith("aten.lift_fresh") and isinstance(out, torch.Tensor):
            self.lifted_elements += out.numel()
        return out

    def first_hit(self, family: str) -> Hit | None:
        return self.hits.get(family)

    def __enter__(self) -> OpRecorder:
        enter_mode(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        remove_mode(self)


def forbid_problem(rules: Rules, rec: OpRecorder | None) -> str | None:
    """The message for the first forbidden family the recorder saw, or None."""
    if rec is None:
        return None
    for family in rules.forbid:
        hit = rec.first_hit(family)
        if hit is not None and family == "repeat" and "tile" in rules.forbid and "tile(" in (hit.line or ""):
            family, hit = "tile", rec.first_hit("tile")  # torch.tile runs aten.repeat: name what was written
        if hit is not None:
            fix = FAMILIES[family][1]
            return (
                f"breaks rule `forbid {family}`: your function ran {hit.op}{hit.where()}. "
                f"The exercise forbids {family}; instead, {fix}"
            )
    return None


def loop_problem(small: OpRecorder, big: OpRecorder, n_small: int, n_big: int) -> str | None:
    """Why the op counts on two input sizes show a Python loop (or a Python list), or None."""
    if big.n_ops > small.n_ops:
        return (
            f"breaks rule `no_python_loops`: your function ran {small.n_ops} torch operators for size "
            f"{n_small} and {big.n_ops} for size {n_big}; a vectorised answer runs the same few operators "
            "whatever the size, so the work is in a Python loop. Replace the loop by one operation on whole "
            "tensors (indexing with None adds the size-1 dims broadcasting needs)"
        )
    if big.lifted_elements > small.lifted_elements:
        return (
            f"breaks rule `no_python_loops`: your function built tensors from Python lists of "
            f"{small.lifted_elements} scalars for size {n_small} and {big.lifted_elements} for size {n_big} "
            "(torch.tensor of a list made in Python); compute the result with torch operations on whole "
            "tensors instead"
        )
    return None


def memory_problem(memory: str | None, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> str | None:
    """The rules ``must_view`` (``memory="view"``: every output shares memory with an input) and ``must_copy``
    (``"copy"``: none does), or None when ``outputs`` keep them.

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
        if memory == "copy" and shared:
            return (
                f"breaks rule `must_copy`: {where} shares memory with the input, so writing to it would change the "
                "input. The exercise asks for an independent copy: add .clone() (or .contiguous() after an expand)."
            )
    return None


def bytes_problem(rules: Rules, args: tuple[Any, ...], peak: int) -> str | None:
    """The rules on measured bytes: ``max_new_bytes`` and ``predict_without_running`` (``peak``: what
    ``viewlab.measure`` saw while the learner's function ran on ``args``).

    >>> bytes_problem(Rules(max_new_bytes=8), (), 12)[:60]
    'breaks rule `max_new_bytes`: while your function ran, new te'
    """
    if rules.max_new_bytes is not None:
        limit = rules.max_new_bytes(*args) if callable(rules.max_new_bytes) else rules.max_new_bytes
        if peak > limit:
            return (
                f"breaks rule `max_new_bytes`: while your function ran, new tensors peaked at {peak:,} B "
                f"(viewlab.measure); the exercise allows {limit:,} B here. A temporary counts while it is "
                "alive, even when it is gone by the end of the line: find the one you do not need"
            )
    if rules.predict_without_running and peak > PREDICT_PEAK_BYTES:
        return (
            f"breaks rule `predict_without_running`: your function allocated {peak:,} B of tensors while it "
            f"ran (viewlab.measure; a prediction may use at most {PREDICT_PEAK_BYTES} B). It ran the code "
            "it should predict: compute the answer from sizes, dtypes and element sizes instead"
        )
    return None


@entry("named_rule")
def named_rule(label: str, rule: Callable[[tuple[Any, ...], Any], str | None]) -> Callable[..., str | None]:
    """Give an ``extra`` rule a name: its failure message then starts ``breaks rule `<label>```.

    >>> named_rule("no_stride_0", lambda args, out: None).rule
    'no_stride_0'
    """
    require_str(label, "label")
    if not callable(rule):
        raise type_error("rule", "a function rule(args, result) -> str or None", rule)

    def checked(args: tuple[Any, ...], result: Any) -> str | None:
        return rule(args, result)

    checked.rule = label  # type: ignore[attr-defined]
    return checked
