"""Exercises for notebook 06 (memory lab): predict bytes, then let viewlab.measure check the prediction.

Each reference *measures* the real allocation with :func:`viewlab.measure` (tensor-storage backend,
CPU), so a learner's formula is compared with what PyTorch actually allocates, not with another formula.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...exercises import Exercise, register, tensors
from ...memory import measure

_FLOAT_DTYPES = (torch.float16, torch.float32, torch.float64)


def _tensor_any_float() -> Any:
    from hypothesis import strategies as st

    return st.one_of(*[tensors(dims=(1, 3), side=(1, 4), dtype=d) for d in _FLOAT_DTYPES])


def _repeat_inputs() -> Any:
    from hypothesis import strategies as st

    return _tensor_any_float().flatmap(
        lambda x: st.tuples(st.just(x), st.tuples(*[st.integers(1, 3) for _ in range(x.dim())]))
    )


def _measured_repeat_bytes(x: torch.Tensor, reps: tuple[int, ...]) -> int:
    with measure(device="cpu") as m:
        y = x.repeat(*reps)
    del y
    return m.peak_bytes


register(Exercise(
    id="06-repeat-bytes",
    title="Predict what repeat allocates",
    statement=(
        "Given a tensor x and a tuple `reps` with one int per dimension of x, return (as an int) how many bytes "
        "`x.repeat(*reps)` allocates. The check measures the real allocation with viewlab.measure."
    ),
    signature="def repeat_bytes(x: torch.Tensor, reps: tuple[int, ...]) -> int",
    reference=_measured_repeat_bytes,
    inputs=_repeat_inputs,
    hints=(
        "The result is a fresh contiguous tensor: how many elements does it have, and how big is each?",
        "x.numel() * math.prod(reps) * x.element_size()",
    ),
    wrong=(
        (lambda x, reps: x.numel() * x.element_size(), "expected"),
        (lambda x, reps: x.numel() * math.prod(reps), "expected"),
    ),
    examples=((torch.ones(2, 3), (4, 1)),),
))


def _measured_peak_of_doubled_sum(x: torch.Tensor) -> int:
    with measure(device="cpu") as m:
        total = (x * 2).sum()
    del total
    return m.peak_bytes


register(Exercise(
    id="06-doubled-sum-peak",
    title="The peak of a one-liner",
    statement=(
        "x is a floating-point tensor made earlier. Return (as an int) the peak number of bytes that "
        "`(x * 2).sum()` allocates above what existed before it ran -- the temporary `x * 2` included, "
        "even though it is gone by the end of the line."
    ),
    signature="def doubled_sum_peak(x: torch.Tensor) -> int",
    reference=_measured_peak_of_doubled_sum,
    inputs=lambda: __import__("hypothesis.strategies", fromlist=["tuples"]).tuples(_tensor_any_float()),
    hints=(
        "Two tensors are alive at the moment sum() returns: the temporary x * 2 and the 0-d result.",
        "x.numel() * x.element_size() + x.element_size()",
    ),
    wrong=(
        (lambda x: x.element_size(), "expected"),
        (lambda x: x.numel() * x.element_size(), "expected"),
    ),
    examples=((torch.ones(100),),),
))


def _shape_lists() -> Any:
    from hypothesis import strategies as st

    shape = st.lists(st.integers(1, 5), min_size=1, max_size=2).map(tuple)
    return st.tuples(st.lists(shape, min_size=1, max_size=3))


def _measured_adam_state_bytes(shapes: list[tuple[int, ...]]) -> int:
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.Adam(params, foreach=False)
    with measure(device="cpu") as m:
        opt.step()
    return m.allocated_bytes


register(Exercise(
    id="06-adam-state-bytes",
    title="What Adam keeps",
    statement=(
        "`shapes` lists the shapes of float32 parameters. Return (as an int) how many bytes of state "
        "torch.optim.Adam allocates and keeps after its first step() (measured: what is still held)."
    ),
    signature="def adam_state_bytes(shapes: list[tuple[int, ...]]) -> int",
    reference=_measured_adam_state_bytes,
    inputs=_shape_lists,
    hints=(
        "Adam keeps two running averages per parameter, each the parameter's size -- and one more small "
        "thing per parameter: look at opt.state[p] after a step.",
        "sum(2 * math.prod(s) * 4 + 4 for s in shapes): exp_avg, exp_avg_sq, and a float32 `step` scalar",
    ),
    wrong=(
        (lambda shapes: sum(2 * math.prod(s) * 4 for s in shapes), "expected"),
        (lambda shapes: sum(math.prod(s) * 4 for s in shapes), "expected"),
    ),
    examples=(([(3, 4), (4,)],),),
))
