"""The rules an exercise states, as data, and how :func:`viewlab.exercises.check` enforces them.

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
the operator and, when the stack shows it, the learner's own line.

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

import linecache
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._dispatch import enter_mode as _enter_mode
from .._dispatch import remove_mode as _remove_mode

__all__ = ["FAMILIES", "PREDICT_PEAK_BYTES", "Rules", "OpRecorder", "Hit", "forbid_problem", "loop_problem"]

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

_TORCH_DIR = os.path.dirname(torch.__file__)
_VIEWLAB_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENGINE_DIRS = (
    _TORCH_DIR,
    os.path.join(_VIEWLAB_DIR, "exercises.py"),
    os.path.abspath(__file__),
    os.path.join(_VIEWLAB_DIR, "memory.py"),
)


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

    def __post_init__(self) -> None:
        if isinstance(self.forbid, str) or not isinstance(self.forbid, tuple):
            raise TypeError(
                f"Rules(): `forbid` must be a tuple of names from {tuple(FAMILIES)}, e.g. "
                f"forbid=('repeat',); got {type(self.forbid).__name__} {self.forbid!r}."
            )
        bad = [n for n in self.forbid if n not in FAMILIES]
        if bad:
            raise ValueError(f"Rules(): forbid names {bad} are unknown; pick from {tuple(FAMILIES)}.")
        if self.must_view and self.must_copy:
            raise ValueError("Rules(): must_view and must_copy exclude each other; pick one.")
        if self.no_python_loops is not None and not callable(self.no_python_loops):
            raise TypeError("Rules(): `no_python_loops` must be a function n -> argument tuple of size n.")

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
        """The rules in words, for :func:`viewlab.exercises.show`."""
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
    line: str | None = None

    def where(self) -> str:
        return f" at {self.line}" if self.line else ""


def _learner_line(code: Any) -> str | None:
    """``line N: `source``` of the innermost frame outside torch and the checker (the learner's code)."""
    frame = sys._getframe(2)
    chosen = None
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if chosen is None and not name.startswith(_ENGINE_DIRS):
            chosen = frame
        if code is not None and frame.f_code is code:
            chosen = chosen or frame
            break
        frame = frame.f_back
    if chosen is None:
        return None
    text = linecache.getline(chosen.f_code.co_filename, chosen.f_lineno).strip()
    return f"line {chosen.f_lineno}: `{text}`" if text else f"line {chosen.f_lineno}"


class OpRecorder(TorchDispatchMode):
    """Records every aten operator run while active: counts, ops run by the autograd engine, ``torch.tensor``
    built from Python data, and the first use of each family in :data:`FAMILIES` (with the learner's line).

    Nothing is recorded at import; enter it with ``with OpRecorder() as rec:`` (pushed and removed by
    identity, so it nests with ``viewlab.measure``).
    """

    def __init__(self, learner_code: Any = None) -> None:
        super().__init__()
        self.learner_code = learner_code
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
                    _learner_line(self.learner_code),
                )
        out = func(*args, **(kwargs or {}))
        if name.startswith("aten.lift_fresh") and isinstance(out, torch.Tensor):
            self.lifted_elements += out.numel()
        return out

    def first_hit(self, family: str) -> Hit | None:
        return self.hits.get(family)

    def __enter__(self) -> OpRecorder:
        _enter_mode(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _remove_mode(self)


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
