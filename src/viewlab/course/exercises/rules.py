"""The rules an exercise states, as data, and how :func:`viewlab.course.exercises.engine.check` enforces them.

An exercise says *what* to return (the reference checks that) and often *how*: "no loops", "no repeat",
"without calling autograd", "predict without running it". :class:`Rules` holds the how:

* ``forbid``: friendly names of operators or families (see :data:`FAMILIES`), seen by name and by
  behaviour: :class:`OpRecorder`, a dispatch mode, records every aten operator the learner's function runs;
  beside it :class:`.watch.Watch` records the torch functions called before they decompose
  (``repeat_interleave``, ``scaled_dot_product_attention``: :data:`API_NAMES`) and the numpy functions that
  do the same work (:data:`NUMPY_NAMES`: ``np.tile``, ``np.tri``, ``np.add.at`` ...). ``"autograd"`` is any
  operator run by the autograd engine (``torch.autograd.grad``, ``.backward()``) and forward-mode AD and
  ``torch.func`` (``jacfwd``, ``jvp``, ``torch.autograd.forward_ad``).
* ``no_python_loops``: a function ``n -> args`` building inputs of size ``n``. Three witnesses: the answer's
  source has no loop (:func:`.loops.static_loop`: ``for``, ``while``, comprehensions, recursion, ``map``);
  no line of it runs again after a backward jump, nor does a function of it start while it runs (the
  dynamic witness, :class:`.watch.Watch`); and on two sizes it runs the same number of torch operators.
  Building the result with ``torch.tensor`` from a Python list is caught too.
* ``must_view`` / ``must_copy``: the result shares memory with an input / shares none. ``must_view`` is
  also "zero new bytes": nothing may be allocated while the function runs, not even a temporary
  (``viewlab.measure``; memory borrowed from numpy or a buffer counts as new).
* ``max_new_bytes``: the peak of new tensor storage while the function runs (``viewlab.measure``, plus any
  memory borrowed from numpy or a buffer), an int or a function of the arguments.
* ``predict_without_running``: a prediction creates no tensor on any device (meta included) while it runs:
  a formula on sizes needs none (and ``forbid`` names the op it predicts about).
* ``allow_viewlab``: an exercise with any rule is answered with torch alone: calling viewlab's own
  functions (``viewlab.attention.causal_mask`` ...) breaks rule ``no_viewlab`` unless named here, and numpy
  doing the work (or the data leaving torch: ``.tolist()``, ``.numpy()``, ``torch.from_numpy``) breaks rule
  ``torch_only``.

Every rule is checked in the calling thread and in the threads it starts while it runs (they inherit the
recorders and the meter). Out of reach, so not checked: work in another process (a forked child, a
subprocess, a multiprocessing pool), threads started before the check (a thread pool made earlier), a
function that takes the checker's hooks off itself, and C extensions other than torch and numpy.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from viewlab import shares_storage
from viewlab._checks import entry, problem, require_bool, require_int, require_str, type_error
from viewlab._dispatch import PACKAGE_DIR, enter_mode, learner_line, remove_mode, storage_key, storage_of, tensors_in

__all__ = [
    "FAMILIES",
    "API_NAMES",
    "NUMPY_NAMES",
    "FORBIDS",
    "at",
    "Rules",
    "OpRecorder",
    "Hit",
    "forbid_problem",
    "loop_problem",
    "bytes_problem",
    "memory_problem",
    "predict_problem",
    "outside_problem",
    "view_bytes_problem",
    "static_loop_problem",
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
    "autograd": (
        ("aten._make_dual", "aten._unpack_dual"),
        "write the backward rule by hand: which rows of the output read the same element?",
    ),
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

#: friendly name -> torch functions seen before they decompose (the dispatch record sees only their parts)
API_NAMES: dict[str, tuple[str, ...]] = {
    "repeat": ("repeat", "repeat_interleave"),
    "tile": ("tile",),
    "tril": ("tril", "triu", "tril_", "triu_", "tril_indices", "triu_indices"),
    "expand": ("expand", "expand_as", "broadcast_to"),
    "bincount": ("bincount", "histc", "histogram", "histogramdd"),
    "sdpa": ("scaled_dot_product_attention",),
    "autograd": ("_make_dual", "_unpack_dual", "backward", "grad"),
}

#: numpy (or math) function -> the families whose work it does
NUMPY_NAMES: dict[str, tuple[str, ...]] = {
    "numpy.tile": ("tile", "repeat"),
    "numpy.repeat": ("repeat",),
    "ndarray.repeat": ("repeat",),
    "numpy.broadcast_to": ("expand",),
    "numpy.broadcast_arrays": ("expand",),
    "numpy.bincount": ("bincount",),
    "numpy.histogram": ("bincount",),
    "numpy.add.at": ("bincount",),
    "numpy.tri": ("tril",),
    "numpy.tril": ("tril",),
    "numpy.triu": ("tril",),
    "numpy.tril_indices": ("tril",),
    "numpy.triu_indices": ("tril",),
}

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
    allow_viewlab: tuple[str, ...] = ()  # viewlab functions an answer may call (by name, e.g. "measure")

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
        allowed = self.allow_viewlab
        if not isinstance(allowed, tuple) or not all(isinstance(n, str) and n for n in allowed):
            raise problem(
                TypeError,
                "`allow_viewlab` must be a tuple of viewlab function names, e.g. allow_viewlab=('measure',); "
                f"got {type(allowed).__name__} {allowed!r}.",
            )

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
                "No Python loops (checked three ways: your source has no for, while, comprehension, recursion or "
                "map; no line of it runs again while it runs; on a bigger input it runs no more torch operators) "
                "and no building the result from Python lists."
            )
        if self.must_view:
            out.append("Return a view: no copy, zero new bytes (measured, temporaries included).")
        if self.must_copy:
            out.append("Return an independent copy (sharing no memory with the input).")
        if self.max_new_bytes is not None:
            out.append(
                "Memory is measured: the peak of new tensor bytes while your function runs is limited "
                "(the statement says how much)."
            )
        if self.predict_without_running:
            out.append(
                "Predict, do not run: your function may create no tensor on any device, meta included "
                "(a formula on sizes needs none)."
            )
        if out:
            allowed = f" except {', '.join(self.allow_viewlab)}" if self.allow_viewlab else ""
            out.append(
                f"Torch does the work: no numpy, and none of viewlab's own functions{allowed} (checked: calls "
                "are recorded, in threads your function starts too)."
            )
        return out


def at(line: str | None) -> str:
    """`` at <place>: `<code>```, the code quoted so that the sentence after it reads apart from it.

    >>> at("line 2 of this cell: y = x.repeat(2)")
    ' at line 2 of this cell: `y = x.repeat(2)`'
    """
    if not line:
        return ""
    place, sep, code = line.partition(": ")
    return f" at {place}: `{code}`" if sep else f" at {line}"


@dataclass(frozen=True)
class Hit:
    """A forbidden operator (or call) seen while the learner's function ran, with the learner's line if found,
    and the torch function it ran inside when that is not the operator itself (``torch.repeat_interleave``)."""

    family: str
    op: str
    line: str | None = None  # as viewlab._dispatch.learner_line says it: "line 3 of this cell: code"
    inside: str | None = None

    def where(self) -> str:
        """:func:`at` of the line.

        >>> Hit("repeat", "aten.repeat.default", "line 2 of this cell: y = x.repeat(2)").where()
        ' at line 2 of this cell: `y = x.repeat(2)`'
        """
        return at(self.line)

    def ran(self) -> str:
        """What the learner's function did, as a verb and an object.

        >>> Hit("tile", "numpy.tile").ran(), Hit("copy", "aten.clone.default", None, "Tensor.repeat_interleave").ran()
        ('called numpy.tile', 'ran aten.clone.default (inside Tensor.repeat_interleave)')
        """
        if self.op.startswith(("aten.", "prims.", "the autograd engine", "forward-mode autograd")):
            inside = f" (inside {self.inside})" if self.inside and self.inside.split(".")[-1] not in self.op else ""
            return f"ran {self.op}{inside}"
        return f"called {self.op}"


#: what each family forbids, in words (the operators, the torch functions and the numpy ones)
FORBIDS = {
    "repeat": "repeat and repeat_interleave (torch's or numpy's)",
    "tile": "tile (torch's or numpy's)",
    "tril": "tril and triu (and numpy's tri, tril, triu)",
    "expand": "expand, expand_as and broadcast_to (torch's or numpy's)",
    "copy": "copying an input (clone, contiguous, .to, repeat)",
    "autograd": "autograd: backward(), torch.autograd.grad, forward-mode AD and torch.func",
    "bincount": "bincount, histc and histogram (torch's or numpy's, and numpy.add.at): they count for you",
    "sdpa": "scaled_dot_product_attention (and its aten kernels)",
}


class OpRecorder(TorchDispatchMode):
    """Records every aten operator run while active: counts, ops run by the autograd engine, ``torch.tensor``
    built from Python data, the first use of each family in :data:`FAMILIES` (with the learner's line), the
    first tensor made with new storage on any device (meta included) and the bytes of memory borrowed from
    outside torch (numpy, a buffer: a storage torch cannot resize) among the operators' tensors.

    ``inputs``: the function's arguments, whose storages are neither new nor borrowed. Nothing is recorded at
    import; enter it with ``with OpRecorder() as rec:`` (pushed and removed by identity, so it nests with
    ``viewlab.measure``); :class:`.watch.Watch` enters it in the threads the function starts too.

    >>> import numpy as np
    >>> with OpRecorder() as rec:
    ...     _ = torch.from_numpy(np.zeros(3)) + 1
    >>> rec.created.op, rec.borrowed_bytes
    ('aten.lift_fresh.default on cpu', 24)
    """

    def __init__(self, inputs: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.n_ops = 0
        self.names: list[str] = []
        self.lifted_elements = 0  # elements of tensors made from Python data (torch.tensor([...]))
        self.hits: dict[str, Hit] = {}
        self.created: Hit | None = None  # family "created": the first new storage
        self.inside: Callable[[], str | None] = lambda: None  # the torch function running now (set by the watch)
        self._inputs = {k for k in map(storage_key, inputs) if k is not None}
        self._known = set(self._inputs)
        self._borrowed: dict[int, int] = {}

    @property
    def borrowed_bytes(self) -> int:
        return sum(self._borrowed.values())

    def note_borrowed(self, t: torch.Tensor) -> None:
        """Count ``t``'s storage as borrowed when torch cannot resize it (numpy's or a buffer's memory)."""
        key = storage_key(t)
        if key is None or key in self._inputs or key in self._borrowed:
            return
        st = storage_of(t)
        if st is not None and not st.resizable():
            self._borrowed[key] = st.nbytes()

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
                    self.inside(),
                )
        out = func(*args, **(kwargs or {}))
        if name.startswith("aten.lift_fresh") and isinstance(out, torch.Tensor):
            self.lifted_elements += out.numel()
        for t in tensors_in(args):
            self.note_borrowed(t)
        for t in tensors_in(out if isinstance(out, (tuple, list)) else (out,)):
            key = storage_key(t)
            if key is not None and key not in self._known:
                self._known.add(key)
                self.note_borrowed(t)
                if self.created is None:
                    self.created = Hit("created", f"{name} on {t.device}", learner_line(_SKIP), self.inside())
        return out

    def first_hit(self, family: str) -> Hit | None:
        return self.hits.get(family)

    def __enter__(self) -> OpRecorder:
        enter_mode(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        remove_mode(self)


def forbid_problem(rules: Rules, rec: OpRecorder | None, more: dict[str, Hit] | None = None) -> str | None:
    """The message for the first forbidden family seen, or None: by the recorder (an aten operator) or, in
    ``more``, by name (a torch function before it decomposes, a numpy function doing the same work)."""
    more = more or {}
    for family in rules.forbid:
        seen = rec.first_hit(family) if rec is not None else None
        # autograd by name says which (torch.func.jacfwd, forward AD); the others by the aten operator run
        hit = (more.get(family) or seen) if family == "autograd" else (seen or more.get(family))
        if hit is not None and family == "repeat" and "tile" in rules.forbid and "tile(" in (hit.line or ""):
            family, hit = "tile", (rec.first_hit("tile") if rec is not None else None) or more.get("tile") or hit
        if hit is not None:
            fix = FAMILIES[family][1]
            return (
                f"breaks rule `forbid {family}`: your function {hit.ran()}{hit.where()}. "
                f"The exercise forbids {FORBIDS[family]}; instead, {fix}"
            )
    return None


_LOOP_FIX = (
    "Replace the loop by one operation on whole tensors (indexing with None adds the size-1 dims broadcasting needs)"
)


def loop_problem(small: OpRecorder, big: OpRecorder, n_small: int, n_big: int) -> str | None:
    """Why the op counts on two input sizes show a Python loop (or a Python list), or None."""
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


def bytes_problem(rules: Rules, args: tuple[Any, ...], peak: int, borrowed: int = 0) -> str | None:
    """The rule ``max_new_bytes`` (``peak``: what ``viewlab.measure`` saw while the learner's function ran on
    ``args``; ``borrowed``: bytes of memory it borrowed from numpy or a buffer, which the meter cannot see).

    >>> bytes_problem(Rules(max_new_bytes=8), (), 12)[:60]
    'breaks rule `max_new_bytes`: while your function ran, new te'
    """
    if rules.max_new_bytes is not None:
        limit = rules.max_new_bytes(*args) if callable(rules.max_new_bytes) else rules.max_new_bytes
        if peak + borrowed > limit:
            also = f" and {borrowed:,} B borrowed from numpy or a buffer" if borrowed else ""
            return (
                f"breaks rule `max_new_bytes`: while your function ran, new tensors peaked at {peak:,} B "
                f"(viewlab.measure){also}; the exercise allows {limit:,} B here. A temporary counts while it is "
                "alive, even when it is gone by the end of the line: find the one you do not need"
            )
    return None


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
