"""Which operations return views and which copy -- decided by running them, not by a list.

:data:`OP_CASES` holds one runnable example per operation: every op in PyTorch's official list of
view ops (docs page "Tensor Views"), the common copying ops, and the ops whose answer depends on the
input: ``reshape``/``flatten`` return a view *or* a copy, ``contiguous``/``to`` return the input itself *or* a copy
(never a new view), as their docs say. :func:`view_op_table` runs them all and reports what actually happened.

>>> [(op, x, observed) for op, _, x, _, observed in view_op_table("view or copy").rows[:2]]
[('reshape', '3x4 float', 'view'), ('reshape', '3x4 transposed (non-contiguous)', 'copy')]
>>> case = next(c for c in OP_CASES if c.op == "expand")
>>> case.code, case.documented, observe(case), "expand" in OFFICIAL_VIEW_OPS
('x.expand(2, 3, 5)', 'view', 'view', True)
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._checks import entry, problem, require_choice, type_error
from .layout import shares_storage

__all__ = ["OpCase", "OP_CASES", "OFFICIAL_VIEW_OPS", "DOCUMENTED", "observe", "view_op_table", "OpTable"]

# The ops listed on PyTorch's "Tensor Views" docs page (plus basic indexing, listed there in prose).
_LISTED = (
    "basic indexing, adjoint, as_strided, detach, diagonal, expand, expand_as, movedim, narrow, permute, select, "
    "squeeze, transpose, t, T, H, mT, mH, real, imag, view_as_real, unflatten, unfold, unsqueeze, view, view_as, "
    "unbind, split, hsplit, vsplit, tensor_split, split_with_sizes, swapaxes, swapdims, chunk, indices, values"
)
OFFICIAL_VIEW_OPS: tuple[str, ...] = tuple(_LISTED.split(", "))

# The inputs the cases run on, by the description shown in tables; each call builds a fresh tensor.
_R, _M, _T = "2x3x4 float", "3x4 float", "3x4 transposed (non-contiguous)"
_C, _COL, _S = "3x2 complex", "3x1 float", "2x2 sparse COO"
_INPUTS: dict[str, Callable[[], torch.Tensor]] = {
    _R: lambda: torch.arange(24.0).reshape(2, 3, 4),
    _M: lambda: torch.arange(12.0).reshape(3, 4),
    _M + " (already float32)": lambda: torch.arange(12.0).reshape(3, 4),
    _T: lambda: torch.arange(12.0).reshape(3, 4).t(),  # non-contiguous: stride (1, 4)
    _C: lambda: torch.view_as_complex(torch.arange(12.0).reshape(3, 2, 2)).clone(),  # 3x2 complex64
    _COL: lambda: torch.arange(3.0).reshape(3, 1),
    _S: lambda: torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse().coalesce(),
}

# What the docs promise for an op; `observe` reports "view", "copy" or "same tensor".
DOCUMENTED: tuple[str, ...] = ("view", "copy", "view or copy", "self or copy")


@dataclass(frozen=True)
class OpCase:
    """One runnable example of an operation; ``documented`` is one of :data:`DOCUMENTED` (see the module docstring)."""

    op: str  #: the name used in tables (matches :data:`OFFICIAL_VIEW_OPS` for documented view ops)
    code: str  #: the expression learners see, written in terms of ``x``
    documented: str  #: what PyTorch's docs promise: "view", "copy", "view or copy" or "self or copy"
    input: str  #: a short description of ``x``
    make_input: Callable[[], torch.Tensor]  #: builds ``x`` afresh
    apply: Callable[[torch.Tensor], Any]  #: the result from ``x`` (a tensor, or a sequence for split-like ops)


def _c(op: str, code: str, documented: str, input: str) -> OpCase:
    # The expression is evaluated with `x` bound, so the code shown is exactly the code run.
    fn = eval(f"lambda x: {code}", {"torch": torch})  # noqa: S307 - fixed strings defined below
    return OpCase(op, code, documented, input, _INPUTS[input], fn)


_RESHAPES = (("reshape", "x.reshape(12)"), ("reshape_as", "x.reshape_as(torch.empty(12))"), ("flatten", "x.flatten()"))
OP_CASES: tuple[OpCase, ...] = (
    _c("basic indexing", "x[0, 1:, ::2]", "view", _R),
    _c("adjoint", "x.adjoint()", "view", _C),
    _c("as_strided", "x.as_strided((2, 2), (1, 2))", "view", _R),
    _c("detach", "x.detach()", "view", _R),
    _c("diagonal", "x.diagonal(dim1=1, dim2=2)", "view", _R),
    _c("expand", "x.expand(2, 3, 5)", "view", _COL),
    _c("expand_as", "x.expand_as(torch.empty(4, 3, 6))", "view", _COL),
    _c("movedim", "x.movedim(0, -1)", "view", _R),
    _c("narrow", "x.narrow(2, 1, 2)", "view", _R),
    _c("permute", "x.permute(2, 0, 1)", "view", _R),
    _c("select", "x.select(1, 2)", "view", _R),
    _c("squeeze", "x.squeeze(1)", "view", _COL),
    _c("transpose", "x.transpose(0, 2)", "view", _R),
    _c("t", "x.t()", "view", _M),
    *(
        _c(op, f"x.{op}", "view", x)
        for op, x in (("T", _M), ("H", _C), ("mT", _R), ("mH", _C), ("real", _C), ("imag", _C))
    ),
    _c("view_as_real", "torch.view_as_real(x)", "view", _C),
    _c("unflatten", "x.unflatten(2, (2, 2))", "view", _R),
    _c("unfold", "x.unfold(2, 2, 1)", "view", _R),
    _c("unsqueeze", "x.unsqueeze(0)", "view", _R),
    _c("view", "x.view(6, 4)", "view", _R),
    _c("view_as", "x.view_as(torch.empty(4, 6))", "view", _R),
    _c("unbind", "x.unbind(1)", "view", _R),
    _c("split", "x.split(2, dim=2)", "view", _R),
    _c("hsplit", "x.hsplit(3)", "view", _R),
    _c("vsplit", "x.vsplit(2)", "view", _R),
    _c("tensor_split", "x.tensor_split(3, dim=2)", "view", _R),
    _c("split_with_sizes", "x.split_with_sizes([1, 3], dim=2)", "view", _R),
    _c("swapaxes", "x.swapaxes(0, 1)", "view", _R),
    _c("swapdims", "x.swapdims(1, 2)", "view", _R),
    _c("chunk", "x.chunk(2, dim=2)", "view", _R),
    _c("indices", "x.indices()", "view", _S),
    _c("values", "x.values()", "view", _S),
    # Layout-dependent: the docs say "may return a view or a copy"; one contiguous and one
    # non-contiguous input shows both outcomes.
    *(_c(op, code, "view or copy", x) for op, code in _RESHAPES for x in (_M, _T)),
    *(_c("contiguous", "x.contiguous()", "self or copy", x) for x in (_M, _T)),
    _c("to", "x.to(torch.float32)", "self or copy", _M + " (already float32)"),
    _c("to", "x.to(torch.float64)", "self or copy", _M),
    # Copies: new memory every time.
    _c("advanced indexing", "x[[0, 2]]", "copy", _M),
    _c("boolean mask", "x[x > 5]", "copy", _M),
    _c("clone", "x.clone()", "copy", _M),
    _c("repeat", "x.repeat(2, 5)", "copy", _COL),
    _c("tile", "x.tile((1, 5))", "copy", _COL),
    _c("repeat_interleave", "x.repeat_interleave(2, dim=0)", "copy", _M),
    _c("index_select", "x.index_select(0, torch.tensor([0, 2]))", "copy", _M),
    _c("masked_select", "x.masked_select(x > 5)", "copy", _M),
    _c("gather", "x.gather(1, torch.tensor([[0], [1], [2]]))", "copy", _M),
    _c("torch.cat", "torch.cat([x, x])", "copy", _M),
    _c("torch.stack", "torch.stack([x, x])", "copy", _M),
    _c("arithmetic", "x + 0", "copy", _M),
    _c("flip", "x.flip(0)", "copy", _M),
    _c("roll", "x.roll(1, 0)", "copy", _M),
)


@entry("observe")
def observe(case: OpCase | str) -> str:
    """Run ``case`` and say what happened: ``"same tensor"``, ``"view"``, ``"copy"`` (or ``"mixed"``).

    ``case`` is an :class:`OpCase` (e.g. from :data:`OP_CASES`) or the name of an op with exactly one
    case (``"expand"``). ``"view"`` means every returned tensor shares memory with the input (see
    :func:`shares_storage`); ``"same tensor"`` means the op returned its input object unchanged.

    >>> observe(next(c for c in OP_CASES if c.op == "expand")), observe("clone")
    ('view', 'copy')
    """
    if isinstance(case, str):
        name, matches = case, [c for c in OP_CASES if c.op == case]
        if not matches:
            close = difflib.get_close_matches(name, sorted({c.op for c in OP_CASES}), n=3)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            hint += " The ops with a case: [c.op for c in viewlab.OP_CASES]."
            raise problem(ValueError, f"no case for op {name!r} in OP_CASES.{hint}")
        if len(matches) > 1:
            inputs = ", ".join(repr(c.input) for c in matches)
            text = f"op {name!r} has {len(matches)} cases, one per input ({inputs}), and the answer depends on"
            pick = f"next(c for c in OP_CASES if c.op == {name!r} and c.input == ...)"
            raise problem(ValueError, f"{text} which; pass one of them: {pick}.")
        case = matches[0]
    elif not isinstance(case, OpCase):
        raise type_error("case", "an OpCase (e.g. viewlab.OP_CASES[0]) or an op name such as 'expand'", case)
    x = case.make_input()
    result = case.apply(x)
    parts: Sequence[torch.Tensor] = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(parts) == 1 and parts[0] is x:
        return "same tensor"
    # Sparse tensors have no single storage: compare with their internal index/value tensors.
    bases = [x._indices(), x._values()] if x.layout == torch.sparse_coo else [x]
    shared = [any(shares_storage(p, b) for b in bases) for p in parts]
    return "view" if all(shared) else "mixed" if any(shared) else "copy"


@dataclass(frozen=True)
class OpTable:
    """Rows of (op, code, input, documented, observed), with text and HTML renderings."""

    rows: tuple[tuple[str, str, str, str, str], ...]
    header: tuple[str, ...] = ("op", "code", "input x", "docs say", "observed")

    def __str__(self) -> str:
        widths = [max(len(str(r[i])) for r in (self.header, *self.rows)) for i in range(len(self.header))]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        rows = [self.header, ["-" * w for w in widths], *self.rows]
        return "\n".join(fmt.format(*r).rstrip() for r in rows)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.header)
        body = "".join(
            "<tr>" + "".join(f"<td><code>{html.escape(str(c))}</code></td>" for c in r) + "</tr>" for r in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@entry("view_op_table")
def view_op_table(documented: str | None = None) -> OpTable:
    """Run every case in :data:`OP_CASES` (or only those documented as ``documented``).

    >>> print(view_op_table("copy").rows[0][4])
    copy
    """
    if documented is not None:
        require_choice(documented, "documented", DOCUMENTED)
    cases = [c for c in OP_CASES if documented is None or c.documented == documented]
    return OpTable(tuple((c.op, c.code, c.input, c.documented, observe(c)) for c in cases))
