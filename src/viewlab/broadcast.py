"""Broadcasting, step by step: which shapes combine, why, and what it costs in memory.

Two shapes broadcast when, lined up from the **right**, every pair of sizes is equal or one of them
is 1 (a missing leading dimension counts as 1). The result takes the larger size in every position.
An operand of size 1 along a dimension is *virtually* copied along it: PyTorch reads the same stored
element again and again (stride 0) instead of allocating the copy. :func:`explain_broadcast` performs
those steps for any number of shapes or tensors, or raises :class:`BroadcastError` with a fix.

>>> explain_broadcast((3, 1), (4,)).shape, explain_broadcast((3, 1), (4,))["a"].expanded_stride
(torch.Size([3, 4]), (1, 0))
"""

from __future__ import annotations

import html
import itertools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ._checks import caller, entry, is_quantized_dtype, problem, require_tensor
from ._format import dtype_name, fmt_shape
from .errors import BroadcastError

__all__ = ["BroadcastExplanation", "BroadcastFix", "OperandInfo", "DimStep", "explain_broadcast"]
__all__ += ["EQUAL", "STRETCHED", "NEW_DIM"]

_Operand = torch.Tensor | torch.Size | Sequence[int]

EQUAL, STRETCHED, NEW_DIM = "equal", "stretched from 1", "new leading dim"  # the rule at one dim, per operand

_MAX_FIX_RANK = 12  # searching for unsqueeze fixes is combinatorial; beyond this rank we do not try
_MAX_FIXES_SHOWN = 3


def _default_name(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i] if i < 26 else f"op{i}"


@dataclass(frozen=True)
class BroadcastFix:
    """One way to make the shapes broadcast: change one operand (``code`` is runnable PyTorch)."""

    operand: str  #: name of the operand to change
    code: str  #: expression in terms of that name, e.g. ``"b.unsqueeze(1)"``
    new_shape: tuple[int, ...]  #: the operand's shape after the fix
    result_shape: tuple[int, ...]  #: the broadcast result after the fix (always the shape of the other operands)
    note: str  #: what the fix lines up with, in words


@dataclass(frozen=True)
class DimStep:
    """The rule applied at one dimension of the result."""

    from_right: int  #: -1 for the last dimension, -2 for the one before, ...
    result_dim: int  #: the same dimension counted from the left of the result
    sizes: tuple[int | None, ...]  #: each operand's size here, None where it has no such dim (padded with 1)
    own_dims: tuple[int | None, ...]  #: each operand's own index of this dimension, None where it has none
    rules: tuple[str, ...]  #: per operand, :data:`EQUAL`, :data:`STRETCHED` or :data:`NEW_DIM`
    result: int  #: the result's size here
    names: tuple[str, ...] = ()  #: the operands' names (default ``a``, ``b``, ...)

    def _names(self) -> tuple[str, ...]:
        return self.names or tuple(_default_name(i) for i in range(len(self.rules)))

    @property
    def summary(self) -> str:
        """The rules that fired here, in words: ``"equal"`` or e.g. ``"a stretched from 1"``."""
        parts = [f"{name} {rule}" for name, rule in zip(self._names(), self.rules) if rule != EQUAL]
        return "; ".join(parts) if parts else EQUAL

    def __str__(self) -> str:
        sizes = ", ".join(f"{n} {'-' if s is None else s}" for n, s in zip(self._names(), self.sizes))
        return f"dim {self.from_right}: {sizes} -> {self.result}   {self.summary}"


@dataclass(frozen=True)
class OperandInfo:
    """One operand as broadcasting sees it.

    ``expanded_dims`` are exactly the dims that get stride 0 in ``operand.expand(result_shape)`` (for an
    operand with no stride-0 dims of its own); autograd sums a gradient over ``sum_dims`` for you.
    """

    name: str  #: label used in text, HTML and error messages
    shape: torch.Size  #: the operand's own shape
    padded: tuple[int, ...]  #: the shape right-aligned to the result's rank, missing leading dims as 1
    rules: tuple[str, ...]  #: per result dim, :data:`EQUAL`, :data:`STRETCHED` or :data:`NEW_DIM`
    expanded_dims: tuple[int, ...]  #: result dims it is virtually copied along: padded size 1, result size > 1
    sum_dims: tuple[int, ...]  #: result dims a gradient is summed over to get its shape back (rule not EQUAL)
    expanded_stride: tuple[int, ...]  #: ``stride()`` of ``operand.expand(result_shape)``, as PyTorch computes it
    dtype: torch.dtype  #: the tensor's (the ``dtype`` argument's for a shape operand)
    itemsize: int  #: bytes per element of ``dtype``
    is_tensor: bool  #: the operand was a tensor (its bytes are real) rather than a shape
    own_bytes: int  #: ``numel * itemsize`` of the operand itself
    copy_bytes: int  #: bytes a copy at the result shape (``repeat``) would allocate; 0 when not expanded

    @property
    def broadcast_bytes(self) -> int:
        """Bytes broadcasting allocates for this operand's virtual copies: always 0 (a stride-0 view)."""
        return 0


_STYLE = {
    EQUAL: "",
    STRETCHED: "background:#FFE7B3;color:#000",
    NEW_DIM: "background:#D6ECFA;color:#000;font-style:italic",
}


@dataclass(eq=False)
class BroadcastExplanation:
    """Result of :func:`explain_broadcast`: the steps, the result shape, the memory story.

    >>> e = explain_broadcast((3, 1), (4,))
    >>> e.shape, [s.rules for s in e.steps]
    (torch.Size([3, 4]), [('stretched from 1', 'equal'), ('equal', 'new leading dim')])
    """

    shape: torch.Size  #: the broadcast result, equal to ``torch.broadcast_shapes``
    operands: tuple[OperandInfo, ...]  #: one :class:`OperandInfo` per operand, in the order given
    steps: tuple[DimStep, ...]  #: one :class:`DimStep` per result dimension, from the right (``steps[0]`` is dim -1)

    def __getitem__(self, key: int | str) -> OperandInfo:
        """An operand's info by position or by name."""
        names, n = [o.name for o in self.operands], len(self.operands)
        if isinstance(key, str):
            if key in names:
                return self.operands[names.index(key)]
            raise KeyError(f"no operand named {key!r}; the names are {names}")
        if isinstance(key, bool) or not hasattr(key, "__index__"):
            raise TypeError(f"BroadcastExplanation[...] takes an operand's position (int) or name (str), got {key!r}.")
        if not -n <= operator.index(key) < n:
            text = f"there are {n} operands (positions 0..{n - 1}, or -1 for the last)."
            raise IndexError(f"BroadcastExplanation[{key!r}]: {text}")
        return self.operands[key]

    @property
    def in_place_targets(self) -> tuple[str, ...]:
        """Names of operands that could receive the result in place (``x.add_(y)``): those whose own
        shape already equals the result. In-place broadcasting is one-way: the target never grows."""
        return tuple(op.name for op in self.operands if tuple(op.shape) == tuple(self.shape))

    @property
    def copy_bytes(self) -> int:
        """Total bytes materialising every expanded operand would allocate (broadcasting: 0)."""
        return sum(op.copy_bytes for op in self.operands)

    def _title(self) -> str:
        return f"broadcast {', '.join(f'{op.name} {fmt_shape(op.shape)}' for op in self.operands)}"

    def __str__(self) -> str:
        rank = len(self.shape)
        labels = [f"{op.name} {fmt_shape(op.shape)}" for op in self.operands]
        lw = max(len(s) for s in labels + ["result"])
        cells = [[("[1]" if r == NEW_DIM else str(n)) for n, r in zip(op.padded, op.rules)] for op in self.operands]
        cw = max([3] + [len(c) for row in cells for c in row] + [len(str(n)) for n in self.shape] + [len(str(-rank))])
        lines = [f"{self._title()} -> {fmt_shape(self.shape)}", ""]
        lines.append("1. right-align the shapes; pad missing leading dims with 1 (shown [1]):")
        for label, row in [("dim", range(-rank, 0)), *zip(labels, cells)]:
            lines.append(f"   {label:<{lw}}  {' '.join(f'{c:>{cw}}' for c in row)}".rstrip())
        lines.append("2. each dimension from the right: sizes must be equal, or 1 (stretched to the other):")
        lines += [f"   {step}" for step in self.steps] or ["   (no dimensions: every operand is a scalar)"]
        lines += [f"3. result: {fmt_shape(self.shape)}", ""]
        lines.append("virtual copies (stride 0: one stored element is read many times, no new memory):")
        for op in self.operands:
            dims = f"dim{'s' if len(op.expanded_dims) > 1 else ''} {', '.join(str(d) for d in op.expanded_dims)}"
            stride = f"{op.name}.expand{fmt_shape(self.shape)} has stride {fmt_shape(op.expanded_stride)}"
            copy = f"a materialised copy would take {op.copy_bytes:,} bytes ({dtype_name(op.dtype)})"
            expanded = f"{op.name}: expanded along result {dims}; {stride}; {copy}, broadcasting takes 0"
            lines.append("   " + (expanded if op.expanded_dims else f"{op.name}: not expanded (nothing to copy)"))
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rank, esc = len(self.shape), html.escape
        head = "".join(f"<th>dim {d}<br><small>(result dim {rank + d})</small></th>" for d in range(-rank, 0))
        th, rows = "<tr><th style='text-align:left'>{} <code>{}</code></th>", ""
        for op in self.operands:
            rows += th.format(esc(op.name), esc(fmt_shape(op.shape)))
            for n, rule, res in zip(op.padded, op.rules, self.shape):
                text = {EQUAL: str(n), STRETCHED: f"1 &rarr; {res}", NEW_DIM: f"[1] &rarr; {res}"}[rule]
                under = "" if rule == EQUAL else f"<br><small>{esc(rule)}</small>"
                rows += f"<td style='text-align:center;{_STYLE[rule]}' title='{esc(rule)}'>{text}{under}</td>"
            rows += "</tr>"
        rows += th.format("result", esc(fmt_shape(self.shape)))
        rows += "".join(f"<td style='text-align:center'><b>{n}</b></td>" for n in self.shape) + "</tr>"
        names = [op.name for op in self.operands]
        steps = "".join(
            f"<li>dim {s.from_right}: "
            + ", ".join(f"{esc(n)} {'&ndash;' if z is None else z}" for n, z in zip(names, s.sizes))
            + f" &rarr; <b>{s.result}</b> &nbsp; <i>{esc(s.summary)}</i></li>"
            for s in self.steps
        )
        mem_rows = "".join(
            f"<tr><td>{esc(op.name)}</td><td><code>{esc(dtype_name(op.dtype))}</code></td>"
            f"<td>{esc(', '.join(map(str, op.expanded_dims)) or 'none')}</td>"
            f"<td><code>{esc(fmt_shape(op.expanded_stride))}</code></td>"
            f"<td style='text-align:right'>{op.copy_bytes:,}</td><td style='text-align:right'>0</td></tr>"
            for op in self.operands
        )
        return (
            f"<div><p><b>{esc(self._title())} &rarr; {esc(fmt_shape(self.shape))}</b></p>"
            "<table><caption>Shapes right-aligned; [1] = missing leading dim padded with 1</caption>"
            f"<tr><th></th>{head}</tr>{rows}</table><ol>{steps}</ol>"
            "<table><caption>Virtual copies (stride 0) cost no memory</caption>"
            "<tr><th>operand</th><th>dtype</th><th>expanded along result dims</th>"
            "<th>stride after expand</th><th>bytes if materialised</th><th>bytes broadcasting</th></tr>"
            f"{mem_rows}</table></div>"
        )


def _as_shape(obj: Any, position: int, name: str) -> tuple[tuple[int, ...], torch.Tensor | None]:
    """(shape, tensor-or-None) for one operand, or a clear TypeError / ValueError."""
    where = f"operand {position} ({name})"
    if isinstance(obj, torch.Tensor):
        t = require_tensor(obj, name, quantized=True)
        return tuple(t.shape), t
    if not isinstance(obj, (torch.Size, tuple, list)):
        hint = "; pass a torch.Tensor, a torch.Size, or a tuple/list of ints."
        if isinstance(obj, (int, float, complex)) and not isinstance(obj, bool):
            hint += " A Python number broadcasts like a 0-dim tensor: pass () or torch.tensor(value)."
        elif type(obj).__module__ == "numpy":
            hint += f" Pass its shape ({name}.shape) or the tensor torch.from_numpy({name})."
        raise problem(TypeError, f"{where} is a {type(obj).__name__}{hint}")
    shape = []
    for i, n in enumerate(obj):
        if isinstance(n, (list, tuple)):
            text = f"{where} is a nested sequence, which looks like data, not a shape. Pass a shape such as (2, 3),"
            raise problem(TypeError, f"{text} or the data as a tensor: torch.tensor({name}).")
        try:
            value = None if isinstance(n, bool) else operator.index(n)  # True is an int to Python, not a size
        except TypeError:
            value = None
        if value is None:
            raise problem(TypeError, f"{where}: size at index {i} is {n!r} ({type(n).__name__}); sizes must be ints.")
        if value < 0:
            infer = "(-1 means 'infer' only in view/reshape/expand, not in a shape to broadcast)."
            raise problem(ValueError, f"{where}: size at index {i} is {value}; sizes must be >= 0 {infer}")
        shape.append(value)
    return tuple(shape), None


def _broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """Broadcast shape, or None if they do not broadcast."""
    out = []
    for k in range(max((len(s) for s in shapes), default=0), 0, -1):
        big = {s[-k] for s in shapes if len(s) >= k} - {1}
        if len(big) > 1:
            return None
        out.append(big.pop() if big else 1)
    return tuple(out)


def _find_fixes(name: str, shape: tuple[int, ...], target: tuple[int, ...]) -> list[BroadcastFix]:
    """Ways to make ``shape`` broadcast with ``target`` without changing ``target``, in no particular order."""
    fixes: list[BroadcastFix] = []
    r, rt = len(shape), len(target)
    if r == 0 or rt > _MAX_FIX_RANK:
        return fixes
    # 1. insert size-1 dims: map the operand's dims, in order, onto dims of target.
    for positions in itertools.combinations(range(rt), r) if r <= rt else ():
        if not all(n == target[p] or n == 1 for n, p in zip(shape, positions)):
            continue
        start, own = positions[0], dict(zip(positions, shape))
        new = tuple(own.get(p, 1) for p in range(start, rt))
        ones_at = [p - start for p in range(start, rt) if p not in own]
        # No inserted dim is the alignment that already failed; inserting only size-1 dims that line up
        # with size-1 dims of the target changes nothing useful.
        if ones_at and _broadcast([new, target]) == tuple(target):
            pairs = enumerate(zip(shape, positions))
            lined = ", ".join(f"its dim {i} (size {n}) with dim {p - rt}" for i, (n, p) in pairs)
            code = name + "".join(f".unsqueeze({p})" for p in sorted(ones_at))
            fixes.append(BroadcastFix(name, code, new, tuple(target), f"lines up {lined} of the result"))
    # 2. reorder dims (small ranks only): a transposed operand.
    for perm in itertools.permutations(range(r)) if 2 <= r <= 4 else ():
        new = tuple(shape[p] for p in perm)
        if perm != tuple(range(r)) and new != shape and _broadcast([new, target]) == tuple(target):
            code = f"{name}.mT" if r == 2 else f"{name}.permute{perm}"
            fixes.append(BroadcastFix(name, code, new, tuple(target), "reorders its dims"))
    return fixes


def _incompatible(names: Sequence[str], shapes: Sequence[tuple[int, ...]]) -> BroadcastError:
    conflicts = []
    for k in range(1, max(len(s) for s in shapes) + 1):
        present = tuple((n, len(s) - k, s[-k]) for n, s in zip(names, shapes) if len(s) >= k)
        if len({size for _, _, size in present if size != 1}) > 1:
            conflicts.append((-k, present))
    fixes: list[BroadcastFix] = []
    for i, name in enumerate(names):
        target = _broadcast([s for j, s in enumerate(shapes) if j != i])
        if target is not None and any(name == m and z != 1 for _, p in conflicts for m, _, z in p):
            fixes.extend(_find_fixes(name, shapes[i], target))
    # fewest inserted dims first, then unsqueeze before permute, then by code
    fixes.sort(key=lambda f: (f.code.count(".unsqueeze(") if "unsqueeze" in f.code else 99, f.code))
    lines = [f"cannot broadcast {', '.join(f'{n} {fmt_shape(s)}' for n, s in zip(names, shapes))}."]
    for dim, present in conflicts:
        parts = [f"{n} has size {z} at its dim {d}" for n, d, z in present]
        desc = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
        lines.append(f"  dimension {dim} (counted from the right): {desc}.")
    lines.append("  Lined up from the right, sizes must be equal or one of them must be 1.")
    if fixes:
        lines.append("Possible fix" + ("es" if len(fixes) > 1 else "") + ":")
        for f in fixes[:_MAX_FIXES_SHOWN]:
            extra = " (if it came from a reduction, keepdim=True keeps that dim)" if "unsqueeze" in f.code else ""
            shapes_text = f"shape {fmt_shape(f.new_shape)}, broadcasts to {fmt_shape(f.result_shape)}"
            lines.append(f"  {f.code} -> {shapes_text}; {f.note}{extra}.")
        if len(fixes) > _MAX_FIXES_SHOWN:
            lines.append(f"  ... and {len(fixes) - _MAX_FIXES_SHOWN} more (see the error's .fixes).")
        if len(fixes) > 1:
            lines.append("  Pick the one whose dims mean the same thing as the dims they line up with.")
    else:  # .mT of one operand may still broadcast, to a bigger shape (a 1-D one is unchanged and fails)
        swap = [[s[:-2] + s[:-3:-1] if j == i else s for j, s in enumerate(shapes)] for i in range(len(shapes))]
        grown = [f"; {n}.mT broadcasts, to {fmt_shape(out)}" for n, t in zip(names, swap) if (out := _broadcast(t))]
        text = "Found no single unsqueeze or permute of one operand that broadcasts to the other operands' shape"
        lines.append(
            f"{text}{''.join(grown)}: check where these shapes come from (a wrong reshape, a reduction "
            "over the wrong dim, or the wrong tensor)."
        )
    return BroadcastError("\n".join(lines), tuple(conflicts), tuple(fixes))


@entry("explain_broadcast")
def explain_broadcast(
    *operands: _Operand, names: Sequence[str] | None = None, dtype: torch.dtype = torch.float32
) -> BroadcastExplanation:
    """Explain, step by step, how ``operands`` broadcast together: a :class:`BroadcastExplanation`.

    ``operands``: two or more tensors, ``torch.Size`` objects or tuples/lists of ints, mixed; ``names``: labels
    (default ``a``, ``b``, ...); ``dtype``: assumed for shape operands when counting bytes. Shapes that do not
    broadcast raise :class:`BroadcastError` naming the dimension (from the right and as each operand's own
    index), the sizes, the operands and a fix when one exists; a non-shape, a negative size or fewer than two
    operands raise TypeError / ValueError.

    >>> e = explain_broadcast(torch.zeros(3, 1), (2, 1, 4), names=["col", "grid"])
    >>> e.shape, e["col"].expanded_dims, e["col"].expanded_stride, e["col"].copy_bytes, e["col"].broadcast_bytes
    (torch.Size([2, 3, 4]), (0, 2), (0, 1, 0), 96, 0)
    """
    if len(operands) < 2:
        func = caller()  # draw_broadcast validates through here too
        example = " or explain_broadcast((3, 1), (4,))." if func == "explain_broadcast" else "."
        text = f"needs at least two operands (tensors or shapes), got {len(operands)}."
        raise problem(TypeError, f"{text} Example: {func}(x, y){example}")
    if not isinstance(dtype, torch.dtype) or is_quantized_dtype(dtype):
        raise problem(TypeError, f"dtype must be a torch.dtype such as torch.float32, got {dtype!r}.")
    if names is None:
        names = [_default_name(i) for i in range(len(operands))]
    elif not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
        raise problem(TypeError, f"names must be a list of non-empty strings, got {names!r}.")
    elif len(names) != len(operands):
        raise problem(ValueError, f"got {len(operands)} operands but {len(names)} names; give one name each.")
    elif len(set(names)) != len(names):
        raise problem(ValueError, f"names must be different from each other, got {list(names)!r}.")
    names = list(names)
    parsed = [_as_shape(obj, i, n) for i, (obj, n) in enumerate(zip(operands, names))]
    shapes = [s for s, _ in parsed]
    result = _broadcast(shapes)
    if result is None:
        raise _incompatible(names, shapes)
    rank, infos = len(result), []
    for (shape, t), name in zip(parsed, names):
        pad = rank - len(shape)
        padded = (1,) * pad + shape
        rules = tuple(NEW_DIM if d < pad else (EQUAL if padded[d] == result[d] else STRETCHED) for d in range(rank))
        expanded = tuple(d for d in range(rank) if padded[d] == 1 and result[d] > 1)
        sums = tuple(d for d in range(rank) if rules[d] != EQUAL)
        # The stride after expand is PyTorch's own answer, no data touched (a shape: a meta tensor of it).
        probe = t.detach() if t is not None else torch.empty(shape, dtype=dtype, device="meta")
        size, stride = probe.dtype.itemsize, tuple(probe.expand(result).stride())
        own, copy = math.prod(shape) * size, (math.prod(result) * size if expanded else 0)
        args = (padded, rules, expanded, sums, stride, probe.dtype, size, t is not None, own, copy)
        infos.append(OperandInfo(name, torch.Size(shape), *args))
    steps = []
    for k in range(1, rank + 1):
        sizes = tuple(s[-k] if len(s) >= k else None for s in shapes)
        own_dims = tuple(len(s) - k if len(s) >= k else None for s in shapes)
        rules = tuple(info.rules[-k] for info in infos)
        steps.append(DimStep(-k, rank - k, sizes, own_dims, rules, result[-k], tuple(names)))
    return BroadcastExplanation(torch.Size(result), tuple(infos), tuple(steps))
