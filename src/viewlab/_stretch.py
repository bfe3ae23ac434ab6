"""How :func:`viewlab.watch_broadcasts` tells a meant broadcast from an accident: where each size-1 dim came
from (the learner's None/unsqueeze/view/reshape/keepdim, a tensor made before the block, or neither), which
operands were stretched against each other, and the report with its fix.

>>> _mutual_stretch([(4, 1), (1, 4)])  # an outer product: both operands stretched
{0: [(1, 1, 4)], 1: [(0, 1, 4)]}
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._dispatch import tensors_in
from ._guard import _CallRecorder, _public_name
from ._learner import called_from_viewlab, learner_line

_LOSSES = frozenset(
    "mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits "
    "soft_margin_loss poisson_nll_loss gaussian_nll_loss kl_div hinge_embedding_loss".split()
)
# Calls whose size-1 dims are the learner's own (all of them), and reductions (which drop a dim unless keepdim).
_MAKERS = frozenset("view reshape view_as reshape_as unflatten".split())
_REDUCTIONS = frozenset(
    "sum mean prod amax amin max min argmax argmin std var norm logsumexp median nansum any all nanmean nanmedian "
    "count_nonzero mode kthvalue quantile nanquantile std_mean var_mean aminmax linalg_vector_norm linalg_norm".split()
)
_BUSY = threading.local()  # .call: the innermost watcher has the current call; the ones under it only record


def _mutual_stretch(shapes: list[tuple[int, ...]]) -> dict[int, list[tuple[int, int | None, int]]] | None:
    """For shapes that broadcast: operand -> [(dim in the result, size before (None: missing), size after)] it
    was stretched along; None when the broadcast is one-sided (some operand is not stretched at all).

    A dim added in front with the result's size 1 is no stretch: that operand's elements are still read once each.

    >>> _mutual_stretch([(5, 1), (5,)])
    {0: [(1, 1, 5)], 1: [(0, None, 5)]}
    >>> _mutual_stretch([(0, 1), (0,)])  # size 0 is a size like any other
    {0: [(1, 1, 0)], 1: [(0, None, 0)]}
    >>> _mutual_stretch([(8, 4), (4,)]) is None
    True
    >>> _mutual_stretch([(3,), (1, 1)]) is None  # (3,) only gains a leading 1: one-sided
    True
    """
    result = torch.broadcast_shapes(*shapes)
    if len(shapes) < 2:
        return None
    stretched: dict[int, list[tuple[int, int | None, int]]] = {}
    for k, shape in enumerate(shapes):
        padded = (None,) * (len(result) - len(shape)) + tuple(shape)
        for d, (before, after) in enumerate(zip(padded, result)):
            # None marks a missing dim: a size (0 included) is never taken for one; missing -> 1 reads nothing twice
            if before != after and not (before is None and after == 1):
                stretched.setdefault(k, []).append((d, before, after))
    return stretched if len(stretched) == len(shapes) else None


def _indexed(
    items: tuple, base: torch.Tensor, explicit: frozenset[int], out: torch.Tensor, kept: dict[int, int] | None = None
) -> set[int]:
    """The size-1 dims of ``base[items]`` the learner made: each None, a slice that keeps one element of a
    longer dim, and those ``base`` had made so. Advanced indexing: none. ``kept``, when given, is filled with
    {dim of the result: dim of ``base``} for every dim a slice carried over."""
    if any(isinstance(i, bool) or not (i is None or i is Ellipsis or isinstance(i, (int, slice))) for i in items):
        return set()
    fill = [slice(None)] * (base.dim() - sum(isinstance(i, (int, slice)) for i in items))
    if not any(i is Ellipsis for i in items):
        items = (*items, Ellipsis)
    made, src, dst = set(), 0, 0
    for item in (x for i in items for x in (fill if i is Ellipsis else [i])):
        if item is None or not isinstance(item, int):  # None: a new dim; a slice: base's dim, maybe narrowed
            if item is None or src in explicit or (base.shape[src] != 1 and out.shape[dst] == 1):
                made.add(dst)
            elif kept is not None:
                kept[dst] = src
            src, dst = src + (item is not None), dst + 1
        else:
            src += 1
    return made


class _WatchCalls(_CallRecorder):
    """Remembers where each tensor's size-1 dims came from (the learner's None/unsqueeze/view/reshape/keepdim,
    or not) and whether a reduction dropped one of its dims, and watches loss functions."""

    def __init__(self, watch: _BroadcastWatch) -> None:
        super().__init__()
        self.watch, self.reported = watch, False  # reported: this call was reported (once per call)
        self.origins: dict[int, tuple[weakref.ref, tuple[frozenset[int], bool, str, frozenset[int]]]] = {}

    def record(self, t: torch.Tensor) -> tuple[frozenset[int], bool, str, frozenset[int]] | None:
        """(the dims of size 1 made on purpose, made by a reduction without keepdim, the call, the dims of size 1
        kept from a tensor made before the watch began) or None: not seen."""
        entry = self.origins.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        if not self.armed:
            return func(*args, **(kwargs or {}))
        below = getattr(_BUSY, "call", False)
        if self.current is None:
            self.reported = below  # a watcher entered later has this call: it reports, this one only records
        _BUSY.call = True
        try:
            return super().__torch_function__(func, types, args, kwargs)
        finally:
            _BUSY.call = below

    def finished(self, call: tuple[Any, tuple, dict] | None, out: Any) -> None:
        if call is None:
            return
        func, args, kwargs = call
        ins = tensors_in((*args, *kwargs.values()))
        for t in tensors_in(out if isinstance(out, (list, tuple)) else (out,)):
            try:
                self._remember(t, func, args, kwargs, ins)
            except Exception:  # noqa: BLE001 - never break the learner's call: its size-1 dims stay "not seen"
                continue
        if getattr(func, "__name__", "") in _LOSSES and not self.reported:
            self._check_loss(func, args, kwargs)

    def _remember(self, t: torch.Tensor, func: Any, args: tuple, kwargs: dict, ins: list[torch.Tensor]) -> None:
        name, ones = getattr(func, "__name__", ""), {d for d, n in enumerate(t.shape) if n == 1}
        base = ins[0] if ins else None
        rec = self.record(base) if base is not None else None
        mine, reduced, origin = rec[0] if rec else frozenset(), False, _public_name(func)
        early: set[int] = set()  # size-1 dims kept from a tensor made before the watch (allow_outer's)
        if name in _MAKERS:
            made = ones
        elif name in ("__getitem__", "unsqueeze") and base is not None:
            dim = (*args[1:2], kwargs.get("dim", 0))[0]
            index = args[1] if name == "__getitem__" else (slice(None),) * (dim % t.dim()) + (None,)
            kept: dict[int, int] = {}
            made = _indexed(index if isinstance(index, tuple) else (index,), base, mine, t, kept)
            # indexing keeps the size-1 dims of a tensor made before the watch (or kept from one) as they came
            early = {d for d, s in kept.items() if d in ones and (rec is None or s in rec[3])}
        elif base is not None and any(a is True for a in (kwargs.get("keepdim"), *args[2:3])) and base.dim() == t.dim():
            made = {d for d in ones if base.shape[d] != 1 or d in mine}
            early = {d for d in ones - made if rec is None or d in rec[3]}
        else:
            try:  # elementwise (or same shape): each size-1 dim is made on purpose if an operand's was
                same = bool(ins) and tuple(t.shape) == tuple(torch.broadcast_shapes(*(i.shape for i in ins)))
            except RuntimeError:
                same = False
            recs = [(i, self.record(i)) for i in ins] if same else []
            made = {d + t.dim() - i.dim() for i, r in recs if r for d in r[0]} & ones
            for i, r in recs:  # a size-1 dim an operand made before the watch had (or kept from one) stays so
                shift = t.dim() - i.dim()
                kept = r[3] if r else {d for d in range(i.dim()) if i.shape[d] == 1}
                early |= {d + shift for d in kept}
            early = (early & ones) - made
            reduced = any(r[1] for i, r in recs if r and i.shape == t.shape)
            reduced = reduced or (name in _REDUCTIONS and base is not None and t.dim() < base.dim())
            origin = next((r[2] for _, r in recs if r), origin)
        if ones or reduced:
            key = id(t)  # the weakref's callback forgets the tensor when it dies
            self.origins[key] = (
                weakref.ref(t, functools.partial(_forget, self.origins, key)),
                (frozenset(made), reduced, origin, frozenset(early)),
            )

    def loss_will_report(self) -> bool:
        """The call running now is a named loss whose input and target differ in shape: its own report, made
        when it returns, names the pair, so the elementwise operators inside it do not report it first."""
        if self.current is None or getattr(self.current[0], "__name__", "") not in _LOSSES:
            return False
        shapes = _loss_shapes(*self.current[1:])
        return len(shapes) == 2 and shapes[0] != shapes[1]

    def _check_loss(self, func: Any, args: tuple, kwargs: dict) -> None:
        shapes = _loss_shapes(args, kwargs)
        if len(shapes) == 2 and shapes[0] != shapes[1] and not called_from_viewlab(__file__):
            try:
                result = f"broadcasts them to {tuple(torch.broadcast_shapes(*shapes))}"
            except RuntimeError:  # the loss took them without broadcasting
                result = "compares them"
            text = f"watch_broadcasts(): {_public_name(func)} got input of shape {shapes[0]} and target of shape"
            text += f" {shapes[1]}; the loss {result} before averaging, which is rarely what a loss should do."
            fix = " Reshape one to the other's shape first (e.g. input.squeeze(-1) or target.view_as(input))."
            line = learner_line()
            self.reported = True
            self.watch.report(text + fix + (f"\nAt {line}" if line else ""))


def _loss_shapes(args: tuple, kwargs: dict) -> list[tuple[int, ...]]:
    """The shapes of a loss call's input and target, passed by position or by name."""
    tensors = tensors_in(args[:2]) + tensors_in([kwargs.get("input"), kwargs.get("target")])
    return [tuple(t.shape) for t in tensors[:2]]


def _forget(origins: dict, key: int, ref: weakref.ref) -> None:
    if origins.get(key, (None,))[0] is ref:
        del origins[key]


class _BroadcastWatch(TorchDispatchMode):
    armed = True  # see _CallRecorder.armed

    def __init__(self, report: Callable[[str], None], allow_outer: bool) -> None:
        super().__init__()
        self.report, self.allow_outer = report, allow_outer
        self.recorder = _WatchCalls(self)  # names the public call, knows where size-1 dims came from

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))  # first: an operator torch rejects gives torch's error, no report
        if not self.armed:
            return out
        operands = [a for a in args if isinstance(a, torch.Tensor) and a.dim() > 0]
        if (
            torch.Tag.pointwise in func.tags
            and len(operands) >= 2
            and not self.recorder.reported
            and not self.recorder.loss_will_report()
        ):
            try:
                stretched = _mutual_stretch([tuple(a.shape) for a in operands])
            except RuntimeError:
                stretched = None
            reasons = self._accidental(operands, stretched) if stretched else []
            if reasons and not called_from_viewlab(__file__):
                self.recorder.reported = True
                self.report(self._message(func, [tuple(a.shape) for a in operands], stretched, reasons))
        return out

    def _accidental(self, operands: list[torch.Tensor], stretched: dict) -> list[str]:
        """Why the stretch was not meant, one reason per size-1 dim not made on purpose (empty: intended)."""
        reasons, rank, how = (
            [],
            max(a.dim() for a in operands),
            ", not from None/unsqueeze/view/reshape/keepdim=True/a slice",
        )
        for k, dims in stretched.items():
            rec = self.recorder.record(operands[k])
            for d, before, _ in dims:
                own = d - rank + operands[k].dim()
                if before is None and rec is not None and rec[1]:
                    reasons.append(f"operand {k} lost a dim in {rec[2]} (a reduction without keepdim=True)")
                elif before is not None and rec is None and not self.allow_outer:
                    reasons.append(f"dim {own} of operand {k} has size 1 from before the watch began{how}")
                elif before is not None and rec is not None and own in rec[3]:  # kept from before the block
                    if not self.allow_outer:
                        reasons.append(f"dim {own} of operand {k} has size 1 from before the watch began{how}")
                elif before is not None and rec is not None and own not in rec[0]:
                    reasons.append(f"dim {own} of operand {k} has size 1 from {rec[2]}{how}")
        return list(dict.fromkeys(reasons))

    def _message(self, func: Any, shapes: list, stretched: dict, reasons: list[str]) -> str:
        result, call = tuple(torch.broadcast_shapes(*shapes)), self.recorder.current
        called = _public_name(call[0]) if call else str(func)
        parts = []
        for k, dims in stretched.items():
            moves = ", ".join(f"dim {d} ({'missing' if b is None else b} -> {a})" for d, b, a in dims)
            parts.append(f"operand {k} {shapes[k]} along {moves}")
        fix = "make the operands' shapes equal first (reshape or view_as one of them)"
        for k, (mine, other) in enumerate([(shapes[0], shapes[1]), (shapes[1], shapes[0])]):
            if mine[-1:] == (1,) and mine[:-1] == other:  # (N, 1) against (N,): a trailing 1 too many
                fix = f"squeeze dim {len(mine) - 1} of operand {k} ({mine} -> {mine[:-1]})"
                break
        fix += "; for an outer product, make its size-1 dims on purpose (x[:, None], unsqueeze, keepdim=True)"
        line = learner_line()
        # Reported while the learner's code runs: named after the guard, as views_only's CopyError is.
        return (
            f"watch_broadcasts(): {called} ({func}) broadcast {' and '.join(map(str, shapes))} to {result}: "
            f"the operands were stretched against each other ({'; '.join(parts)}), so the result has "
            f"{math.prod(result):,} elements and a shape no operand has. Not on purpose: {'; '.join(reasons)}. To "
            f"compute elementwise, {fix} (or pass allow_outer=True for those made before the watch began)."
            + (f"\nAt {line}" if line else "")
        )
