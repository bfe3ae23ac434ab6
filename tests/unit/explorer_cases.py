"""Cases for the stride explorer's arithmetic (src/viewlab/explorer/arithmetic.js), each answered by real torch.

Three kinds, drawn from a seeded generator (the same cases on every run):

* ``layout``: a shape, stride and offset over a storage of ``size`` elements. Torch answers whether
  ``torch.arange(size).as_strided(...)`` exists (in bounds), which storage element each logical element
  reads (the values of an ``arange`` storage are its indices; read over a storage big enough when the
  layout is out of bounds), whether two elements share one storage element, and ``is_contiguous()``.
  Negative strides and offsets are included: torch refuses them, so must the explorer.
* ``view``: a layout and a new shape (with -1 at times, sometimes of the wrong element count). Torch
  answers ``view``'s strides or its refusal, and whether ``reshape`` returns a view (and its strides)
  or a copy.
* ``op``: transpose, permute, a slice with a step, expand, unsqueeze, unfold, contiguous, with arguments
  that are sometimes invalid. Torch answers the result's shape, stride and offset, or its refusal.

``python -m tests.unit.explorer_cases out.json`` writes them to a file to read.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import torch


def _storage(size: int) -> torch.Tensor:
    return torch.arange(size, dtype=torch.int64)


def _needed(shape: list[int], stride: list[int], offset: int) -> int:
    return 0 if 0 in shape else offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def _layout(t: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(t.shape), "stride": list(t.stride()), "offset": t.storage_offset()}


def _random_shape(rng: random.Random, max_dims: int = 4) -> list[int]:
    # sizes 0 and 1 often: they are where the rules have their special cases
    return [rng.choice((0, 1, 1, 2, 2, 3, 4)) if rng.random() < 0.9 else 1 for _ in range(rng.randint(0, max_dims))]


def _random_layout(rng: random.Random) -> tuple[list[int], list[int], int]:
    shape = _random_shape(rng)
    style = rng.random()
    if style < 0.3:  # contiguous, then maybe a transpose: the common cases
        stride = list(torch.empty(shape).stride())
        if len(shape) >= 2 and rng.random() < 0.5:
            i, j = rng.sample(range(len(shape)), 2)
            shape[i], shape[j] = shape[j], shape[i]
            stride[i], stride[j] = stride[j], stride[i]
    else:  # anything, stride 0 and overlapping strides included
        stride = [rng.choice((0, 1, 1, 2, 3, 4, 6, 12)) for _ in shape]
    return shape, stride, rng.choice((0, 0, 0, 1, 2, 5))


def layout_cases(rng: random.Random, count: int) -> list[dict[str, Any]]:
    cases = []
    for _ in range(count):
        shape, stride, offset = _random_layout(rng)
        if rng.random() < 0.04 and shape:  # torch refuses these outright
            stride[rng.randrange(len(shape))] = -rng.randint(1, 3)
        if rng.random() < 0.02:
            offset = -1
        needed = _needed(shape, stride, offset)
        size = max(0, needed + rng.choice((-2, -1, 0, 0, 0, 1, 3)))
        case = {"kind": "layout", "shape": shape, "stride": stride, "offset": offset, "size": size}
        try:
            t = _storage(size).as_strided(shape, stride, offset)
            in_bounds = True
        except RuntimeError:
            if min(stride, default=0) < 0 or offset < 0:
                cases.append({**case, "expect": {"error": True}})
                continue
            t, in_bounds = _storage(max(needed, size)).as_strided(shape, stride, offset), False
        indices = t.flatten().tolist()
        case["expect"] = {
            "in_bounds": in_bounds,
            "indices": indices,
            "overlap": len(set(indices)) < len(indices),
            "contiguous": t.is_contiguous(),
        }
        cases.append(case)
    return cases


def _random_new_shape(rng: random.Random, n: int) -> list[int]:
    if rng.random() < 0.1:  # most likely the wrong element count: neither view nor reshape works
        return _random_shape(rng, 3)
    if n == 0:  # any shape with a 0 in it
        sizes = [*_random_shape(rng, 2), 0]
        rng.shuffle(sizes)
    else:  # n split into random factors
        sizes, rest = [], n
        for _ in range(rng.randint(0, 2)):
            factor = rng.choice([d for d in range(1, rest + 1) if rest % d == 0])
            sizes.append(factor)
            rest //= factor
        sizes.append(rest)
    if rng.random() < 0.3:
        sizes.insert(rng.randrange(len(sizes) + 1), 1)
    if rng.random() < 0.3:
        sizes[rng.randrange(len(sizes))] = -1
    return sizes


def view_cases(rng: random.Random, count: int) -> list[dict[str, Any]]:
    cases = []
    while len(cases) < count:
        shape, stride, offset = _random_layout(rng)
        t = _storage(_needed(shape, stride, offset)).as_strided(shape, stride, offset)
        new = _random_new_shape(rng, t.numel())
        expect: dict[str, Any] = {}
        try:
            expect["view"] = list(t.view(new).stride())
        except RuntimeError:
            expect["view"] = None
        try:
            r = t.reshape(new)
            expect["reshape"] = {"kind": "view" if r._is_view() else "copy", "stride": list(r.stride())}
        except RuntimeError:
            expect = {"error": True}
        cases.append({"kind": "view", "shape": shape, "stride": stride, "offset": offset, "new": new, "expect": expect})
    return cases


def _op_args(rng: random.Random, op: str, shape: list[int]) -> list[Any]:
    n = len(shape)
    dim = lambda: rng.randint(-n - 1, n)  # noqa: E731 - out of range at times on purpose
    if op == "transpose":
        return [dim(), dim()]
    if op == "permute":
        dims = list(range(n))
        rng.shuffle(dims)
        if rng.random() < 0.1 and dims:
            dims[0] = dims[-1]  # repeated: refused
        return [[d - n if rng.random() < 0.3 else d for d in dims]]
    if op == "slice":
        return [
            dim(),
            rng.choice((None, -3, -1, 0, 1, 2)),
            rng.choice((None, -1, 0, 1, 3, 9)),
            rng.choice((1, 1, 2, 3)),
        ]
    if op == "expand":
        sizes = [
            -1 if rng.random() < 0.3 else (rng.choice((2, 3)) if s == 1 and rng.random() < 0.6 else s) for s in shape
        ]
        lead = [rng.choice((1, 2, 3, 0)) for _ in range(rng.choice((0, 0, 1, 2)))]
        if rng.random() < 0.08 and sizes:
            sizes[rng.randrange(len(sizes))] = 5  # a non-1 dim asked to stretch: refused
        return [lead + sizes]
    if op == "unsqueeze":
        return [rng.randint(-n - 2, n + 1)]
    if op == "unfold":
        return [dim(), rng.choice((0, 1, 2, 3, 5)), rng.choice((1, 1, 2, 3))]
    return []


def _apply(t: torch.Tensor, op: str, args: list[Any]) -> torch.Tensor:
    if op == "slice":
        d, start, stop, step = args
        d = d + t.dim() if d < 0 else d
        if t.dim() == 0 or not 0 <= d < t.dim():
            raise IndexError("dim out of range")
        return t[(slice(None),) * d + (slice(start, stop, step),)]
    if op == "contiguous":
        return t.contiguous()
    return getattr(t, op)(*args)


OPS = ("transpose", "permute", "slice", "expand", "unsqueeze", "unfold", "contiguous")


def op_cases(rng: random.Random, count: int) -> list[dict[str, Any]]:
    cases = []
    for k in range(count):
        shape, stride, offset = _random_layout(rng)
        t = _storage(_needed(shape, stride, offset)).as_strided(shape, stride, offset)
        op = OPS[k % len(OPS)]
        args = _op_args(rng, op, shape)
        try:
            r = _apply(t, op, args)
            expect: dict[str, Any] = _layout(r)
            if op == "contiguous":
                expect = {"kind": "view" if r is t else "copy", "shape": list(r.shape), "stride": list(r.stride())}
        except (RuntimeError, IndexError, ValueError):
            expect = {"error": True}
        cases.append({"kind": "op", "op": op, "args": args, **_layout(t), "expect": expect})
    return cases


def all_cases(seed: int = 27, layouts: int = 1400, views: int = 800, ops: int = 1050) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return layout_cases(rng, layouts) + view_cases(rng, views) + op_cases(rng, ops)


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        json.dump(all_cases(), f)
