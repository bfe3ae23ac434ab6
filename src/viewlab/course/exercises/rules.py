"""The rules an exercise states, as data: :class:`Rules`, the families of operators they may forbid, and
:func:`named_rule` for the rules an exercise states in its own words.

An exercise says *what* to return (the reference checks that) and often *how*: "no loops", "no repeat",
"without calling autograd", "predict without running it". :class:`Rules` holds the how:

* ``forbid``: friendly names of operators or families (see :data:`FAMILIES`), seen by behaviour (every aten
  operator the learner's function runs, :class:`.recorder.OpRecorder`), by the torch function called before it
  decomposes (``repeat_interleave``, ``scaled_dot_product_attention``: :data:`API_NAMES`,
  :class:`.recorder.ApiRecorder`) and by name in the answer's source (the numpy functions that do the same
  work, :data:`NUMPY_NAMES`: ``np.tile``, ``np.tri``, ``np.add.at`` ...). ``"autograd"`` is any operator run
  by the autograd engine (``torch.autograd.grad``, ``.backward()``), forward-mode AD and ``torch.func``
  (``jacfwd``, ``jvp``, ``torch.autograd.forward_ad``).
  ``"profiler"`` is seen by name alone: a call of ``torch.profiler`` or ``torch.autograd.profiler`` in the
  answer's source.
* ``no_python_loops``: a function ``n -> args`` building inputs of size ``n``. Two witnesses: the answer's
  source has no loop (:func:`.source.static_loop`: ``for``, ``while``, comprehensions, recursion, ``map``,
  ``sum`` over data, in the answer and in the helpers it calls by name); and on two sizes it runs the same
  number of torch operators. Building the result with ``torch.tensor`` from a Python list is caught too.
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

What the in-kernel check aims at is honest mistakes, seen with public mechanisms only (dispatch and
torch-function modes in the calling thread, the answer's source): it does not follow threads the answer
starts, other processes, or code that takes the modes off; trusted grading runs answers in another process.
Each broken rule gives a message (:mod:`.messages`).

>>> r = Rules(forbid=("repeat",))
>>> r.labels()
['forbid repeat']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from viewlab._checks import entry, problem, require_bool, require_int, require_str, type_error

__all__ = ["FAMILIES", "API_NAMES", "NUMPY_NAMES", "FORBIDS", "Rules", "named_rule", "op_in"]

#: friendly name -> (aten operator names, what to do instead)
FAMILIES: dict[str, tuple[tuple[str, ...], str]] = {
    "repeat": (
        ("aten.repeat", "aten.repeat_interleave"),
        "let broadcasting (or a stride-0 expand) supply the repeated values instead of copying them",
    ),
    "tile": (
        ("aten.repeat",),
        "torch.tile copies like repeat (PyTorch runs it as aten.repeat); broadcast instead",
    ),
    "tril": (
        ("aten.tril", "aten.triu", "aten.tril_indices", "aten.triu_indices"),
        "compare a column of positions with a row of positions (arange[:, None] and arange[None, :])",
    ),
    "expand": (
        ("aten.expand", "aten.expand_copy"),
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
        ("aten.bincount", "aten.histc", "aten.histogram", "aten._histogramdd_from_bin_cts"),
        "make the indexed write accumulate: scatter_add_ along the dim you count in, or index_put_ with accumulate=True",
    ),
    "unfold": (
        ("aten.unfold",),
        "build the windows yourself with as_strided, from x's own stride and storage offset",
    ),
    "gather": (
        (
            "aten.index.Tensor",
            "aten._unsafe_index.Tensor",
            "aten.masked_select",
            "aten.nonzero",
            "aten.index_select",
            "aten.gather",
            "aten.take",
        ),
        "keep every entry and weight it: give the mask a size-1 dim where the other tensor has its extra dim, "
        "and let broadcasting line them up",
    ),
    "sdpa": (
        (
            "aten.scaled_dot_product_attention",
            "aten._scaled_dot_product_flash_attention_for_cpu",
            "aten._scaled_dot_product_attention_math",
            "aten._scaled_dot_product_efficient_attention",
            "aten._scaled_dot_product_flash_attention",
            "aten._scaled_dot_product_cudnn_attention",
            "aten._native_multi_head_attention",
        ),
        "build it from its parts: scores from q and k, the mask, a softmax, then the weighted sum of v",
    ),
    "profiler": (
        (),  # no operator of its own: seen by name in the answer's source (torch.profiler, torch.autograd.profiler)
        "count with a TorchDispatchMode of your own, which sees each operator's outputs as they are made",
    ),
}


def op_in(op: str, ops: tuple[str, ...]) -> bool:
    """Whether the operator ``op`` is one of ``ops`` (a family's operators of :data:`FAMILIES`): any overload,
    and the in-place variant too (``aten.tril_.default`` is a tril).

    >>> op_in("aten.tril_.default", FAMILIES["tril"][0]), op_in("aten.add.Tensor", FAMILIES["tril"][0])
    (True, False)
    """
    return any(op == o or op.startswith((o + ".", o + "_.")) for o in ops)


#: friendly name -> torch functions seen before they decompose (the dispatch record sees only their parts)
API_NAMES: dict[str, tuple[str, ...]] = {
    "repeat": ("repeat", "repeat_interleave"),
    "tile": ("tile",),
    "tril": ("tril", "triu", "tril_", "triu_", "tril_indices", "triu_indices"),
    "expand": ("expand", "expand_as", "broadcast_to", "expand_copy"),
    "bincount": ("bincount", "histc", "histogram", "histogramdd"),
    "sdpa": ("scaled_dot_product_attention",),
    "unfold": ("unfold",),
    "gather": ("masked_select", "nonzero", "argwhere", "index_select", "gather", "take", "take_along_dim"),
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
    "unfold": "unfold (Tensor.unfold builds the windows for you)",
    "profiler": "the profiler (torch.profiler and torch.autograd.profiler): it counts the bytes for you",
    "gather": (
        "gathering entries by indexing (a bool mask or a tensor of positions as an index, masked_select, nonzero, "
        "index_select, gather, take): each copies the entries it picks"
    ),
}

#: a family named after one of several operators it forbids, as a rule sentence names it
_SHOWN_AS = {"tril": "tril or triu"}


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
        names = f"a tuple of names from {tuple(FAMILIES)}"
        if not isinstance(self.forbid, tuple):
            raise type_error("forbid", names, self.forbid, "e.g. forbid=('repeat',).")
        for name in self.forbid:
            if not isinstance(name, str):
                raise type_error("forbid", names, self.forbid, "each name a str, e.g. forbid=('repeat',).")
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
            raise type_error(
                "no_python_loops",
                "None or a function n -> argument tuple of size n",
                self.no_python_loops,
            )
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
        out = [
            f"Do not use {_SHOWN_AS.get(n, n)} (checked: every operator your function runs is recorded)."
            if FAMILIES[n][0]
            else f"Do not use the {n} (checked: the calls in your source)."
            for n in self.forbid
        ]
        if self.no_python_loops is not None:
            out.append(
                "No Python loops (checked two ways: your source, and the helpers it calls, has no for, while, "
                "comprehension, recursion, map or sum over data; on a bigger input it runs no more torch "
                "operators) and no building the result from Python lists."
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
                f"Torch does the work: no numpy, and none of viewlab's own functions{allowed} (checked: the "
                "calls in your source, and the data leaving torch)."
            )
        return out


@entry("named_rule")
def named_rule(label: str, rule: Callable[[tuple[Any, ...], Any], str | None]) -> Callable[..., str | None]:
    """Give an ``extra`` rule a name: its failure message then starts ``breaks rule `<label>```.

    >>> named_rule("no_stride_0", lambda args, out: None).rule
    'no_stride_0'
    """
    require_str(label, "label", nonempty=True)
    if not callable(rule):
        raise type_error("rule", "a function rule(args, result) -> str or None", rule)

    def checked(args: tuple[Any, ...], result: Any) -> str | None:
        return rule(args, result)

    checked.rule = label  # type: ignore[attr-defined]
    return checked
