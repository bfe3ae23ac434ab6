"""Exercises for notebook 06 (memory lab): predict bytes, then let viewlab.measure check the prediction.

Each reference *measures* the real allocation with :func:`viewlab.measure` (tensor-storage backend,
CPU), so a learner's formula is compared with what PyTorch actually allocates, not with another formula.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("06")
['06-adam-state-bytes', '06-doubled-sum-peak', '06-lower-the-peak', '06-repeat-bytes']
"""

from __future__ import annotations

import math
from typing import Any

import torch

from viewlab import measure
from viewlab.course.exercises import Exercise, Rules, register, tensors

_FLOAT_DTYPES = (torch.float16, torch.float32, torch.float64)


def _tensor_any_float(dims: tuple[int, int] = (1, 3)) -> Any:
    from hypothesis import strategies as st

    return st.one_of(*[tensors(dims=dims, side=(0, 4), dtype=d) for d in _FLOAT_DTYPES])  # empty x included


def _repeat_inputs() -> Any:
    from hypothesis import strategies as st

    # x in every layout (transposed, strided, offset, expanded: its storage is not its size); reps with a 0, and
    # with up to two more entries than x has dims (repeat adds those as new leading dims)
    reps = lambda x: st.integers(x.dim(), x.dim() + 2).flatmap(lambda n: st.tuples(*[st.integers(0, 3)] * n))  # noqa: E731
    return _tensor_any_float().flatmap(lambda x: st.tuples(st.just(x), reps(x)))


def _measured_repeat_bytes(x: torch.Tensor, reps: tuple[int, ...]) -> int:
    with measure(device="cpu") as m:
        y = x.repeat(*reps)
    del y
    return m.peak_bytes


def _repeat_bytes_formula(x: torch.Tensor, reps: tuple[int, ...]) -> int:
    return x.numel() * math.prod(reps) * x.element_size()


def _allocates_the_result(x: torch.Tensor, reps: tuple[int, ...]) -> int:  # rule-breaking: builds what it predicts
    return x.new_empty([s * r for s, r in zip(x.shape, reps)]).nbytes


register(
    Exercise(
        id="06-repeat-bytes",
        title="Predict what repeat allocates",
        statement=(
            "Given a tensor x and a tuple `reps` of ints, at least one per dimension of x (more add new leading "
            "dims, as repeat does), return (as an int) how many bytes `x.repeat(*reps)` allocates (sizes and reps "
            "may be 0). x may be any view: transposed, strided, sliced or expanded (stride 0), so its storage need "
            "not be its size. The check measures the real allocation with "
            "viewlab.measure. Predict it: do not call repeat (or tile), and do not allocate a tensor of that size to "
            "read its nbytes (what your function allocates is measured)."
        ),
        signature="def repeat_bytes(x: torch.Tensor, reps: tuple[int, ...]) -> int",
        reference=_measured_repeat_bytes,
        answer=_repeat_bytes_formula,
        inputs=_repeat_inputs,
        rules=Rules(forbid=("repeat", "tile"), predict_without_running=True),
        hints=(
            "The result is a fresh contiguous tensor: how many elements does it have, and how big is each?",
            "reps lines up with x's dims from the right, and each extra entry is a new leading dim of size 1 "
            "first. What does that do to the element count -- and does x's layout (a stride of 0, a step) change "
            "what the copy holds?",
        ),
        why=(
            "repeat writes a new contiguous tensor with numel * prod(reps) elements, each element_size() bytes: "
            "extra reps multiply new size-1 dims, so they count like the others.",
            "It copies x's elements, not its storage: a stride-0 or stepped x still yields numel values per copy, "
            "and nothing is shared with x.",
        ),
        wrong=(
            (lambda x, reps: x.numel() * x.element_size(), "expected"),
            (lambda x, reps: x.numel() * math.prod(reps), "expected"),
            (lambda x, reps: x.untyped_storage().nbytes() * math.prod(reps), "expected"),  # storage, not size
            (lambda x, reps: x.numel() * x.element_size() * math.prod(reps[len(reps) - x.dim() :]), "expected"),
            (lambda x, reps: x.repeat(*reps).nbytes, "rule `forbid repeat`"),
            (lambda x, reps: x.tile(reps).nbytes, "rule `forbid tile`"),
            (_allocates_the_result, "rule `predict_without_running`"),
        ),
        examples=((torch.ones(2, 3), (4, 1)), (torch.ones(3).expand(2, 3), (2, 1, 1))),
    )
)


def _doubled_sum_formula(x: torch.Tensor) -> int:
    n = x.numel()
    return max(2 * n, n + 1) * x.element_size()  # two full-size temporaries at once, or the 0-d sum beside one


def _measured_peak_of_doubled_sum(x: torch.Tensor) -> int:
    with measure(device="cpu") as m:
        total = (x * 2 + 1).sum()
    del total
    return m.peak_bytes


register(
    Exercise(
        id="06-doubled-sum-peak",
        title="The peak of a one-liner with two temporaries",
        statement=(
            "x is a floating-point tensor made earlier. Return (as an int) the peak number of bytes that "
            "`(x * 2 + 1).sum()` allocates above what existed before it ran -- every temporary included while it "
            "is alive, even though all are gone by the end of the line (x may be empty, or hold one element). "
            "Predict it: do not run the line (or a copy of it); what your function allocates is measured."
        ),
        signature="def doubled_sum_peak(x: torch.Tensor) -> int",
        reference=_measured_peak_of_doubled_sum,
        answer=_doubled_sum_formula,
        inputs=lambda: __import__("hypothesis.strategies", fromlist=["tuples"]).tuples(_tensor_any_float((0, 3))),
        rules=Rules(predict_without_running=True),
        hints=(
            "The line runs three operations, one after the other: which tensors does each create, and which are "
            "still alive when the next one allocates?",
            "While `+ 1` makes its result, is the temporary `x * 2` still alive? And while sum() makes its 0-d "
            "result, which temporary is? Which of those two moments holds more bytes -- for every size of x, "
            "0 and 1 included?",
        ),
        why=(
            "x * 2 is a full-size temporary still alive while + 1 allocates a second full-size one (an operand is "
            "released only after the operation returns); then x * 2 goes, and sum() adds a 0-d result beside x * 2 + 1.",
            "So the peak is the larger of 2 * numel and numel + 1 elements: 2 * numel once x has an element, one "
            "element (the sum) for an empty x.",
        ),
        wrong=(
            (lambda x: (x.numel() + 1) * x.element_size(), "expected"),  # one temporary at a time
            (lambda x: (2 * x.numel() + 1) * x.element_size(), "expected"),  # all three alive at once
            (lambda x: 2 * x.numel() * x.element_size(), "expected"),  # forgets the sum of an empty x
            (lambda x: _measured_peak_of_doubled_sum(x), "rule `predict_without_running`"),  # runs the line
        ),
        examples=((torch.ones(100),),),
    )
)


_PARAM_DTYPES = (torch.float32, torch.float16, torch.float64, torch.bfloat16)


def _param_lists() -> Any:
    from hypothesis import strategies as st

    shape = st.lists(st.integers(0, 5), min_size=0, max_size=2).map(tuple)  # 0-d and empty parameters too
    param = st.tuples(shape, st.sampled_from(_PARAM_DTYPES))
    return st.tuples(st.lists(param, min_size=1, max_size=3), st.booleans())


def _adam_state_formula(params: list[tuple[tuple[int, ...], torch.dtype]], amsgrad: bool) -> int:
    buffers = 3 if amsgrad else 2  # exp_avg, exp_avg_sq (and max_exp_avg_sq), each in the parameter's dtype
    return sum(buffers * math.prod(shape) * dtype.itemsize + 4 for shape, dtype in params)  # + a float32 step


def _measured_adam_state_bytes(params: list[tuple[tuple[int, ...], torch.dtype]], amsgrad: bool) -> int:
    made = [torch.nn.Parameter(torch.zeros(shape, dtype=dtype)) for shape, dtype in params]
    for p in made:
        p.grad = torch.ones_like(p)
    opt = torch.optim.Adam(made, foreach=False, amsgrad=amsgrad)
    with measure(device="cpu") as m:
        opt.step()
    return m.allocated_bytes


def _adam_in_float32(params: list[tuple[tuple[int, ...], torch.dtype]], amsgrad: bool) -> int:  # dtype ignored
    return sum((3 if amsgrad else 2) * math.prod(shape) * 4 + 4 for shape, _ in params)


def _adam_step_in_param_dtype(params: list[tuple[tuple[int, ...], torch.dtype]], amsgrad: bool) -> int:
    return sum(((3 if amsgrad else 2) * math.prod(shape) + 1) * dtype.itemsize for shape, dtype in params)


register(
    Exercise(
        id="06-adam-state-bytes",
        title="What Adam keeps, with amsgrad and other dtypes",
        statement=(
            "`params` lists the parameters as (shape, dtype) pairs (float32, float16, float64 or bfloat16, mixed), "
            "each with a gradient (Adam keeps no state for one whose .grad is None), and `amsgrad` says whether the "
            "optimiser is torch.optim.Adam(..., amsgrad=True). Return (as an int) how many bytes of state it "
            "allocates and keeps after its first step() (measured: what is still held). Predict it from the "
            "shapes and dtypes: do not build the optimiser and step it, nor make a tensor to read a size (what "
            "your function allocates is measured)."
        ),
        signature="def adam_state_bytes(params: list[tuple[tuple[int, ...], torch.dtype]], amsgrad: bool) -> int",
        reference=_measured_adam_state_bytes,
        answer=_adam_state_formula,
        inputs=_param_lists,
        rules=Rules(predict_without_running=True),
        hints=(
            "What does Adam remember about each parameter between steps, and what more with amsgrad=True (look "
            "at opt.state[p] after one step of each)?",
            "Each running average has its parameter's shape; in which dtype is it kept? And the small per-parameter "
            "counter: does its dtype follow the parameter's? A torch.dtype knows its own size in bytes: which "
            "attribute says it, without making a tensor?",
        ),
        why=(
            "Adam keeps exp_avg and exp_avg_sq (and, with amsgrad, max_exp_avg_sq), each the parameter's shape "
            "and dtype, plus a `step` counter that is a float32 scalar whatever the parameter's dtype (float64 "
            "if torch's default dtype is float64).",
            "So a parameter of n elements and itemsize b costs (2 or 3) * n * b + 4 bytes of state.",
        ),
        wrong=(
            (lambda params, amsgrad: sum(2 * math.prod(s) * d.itemsize + 4 for s, d in params), "expected"),
            (_adam_in_float32, "expected"),  # the dtype ignored
            (_adam_step_in_param_dtype, "expected"),  # the step counter taken in the parameter's dtype
            (
                lambda params, amsgrad: _measured_adam_state_bytes(params, amsgrad),
                "rule `predict_without_running`",
            ),  # steps Adam
        ),
        examples=(([((3, 4), torch.float32), ((4,), torch.float16)], True), ([((2, 2), torch.float64)], False)),
    )
)


def _vectors_any_float() -> Any:
    from hypothesis import strategies as st

    length = st.one_of(st.integers(0, 1), st.integers(2, 40))  # lengths 0 and 1 drawn as often as all the rest
    return st.one_of(*[tensors(shape=st.tuples(length), dtype=d) for d in _FLOAT_DTYPES]).map(lambda r: (r,))


def _doubled_total(r: torch.Tensor) -> torch.Tensor:
    return r.sum() * 2


register(
    Exercise(
        id="06-lower-the-peak",
        title="Lower the peak",
        statement=(
            "r is a 1-D float tensor. Return the value of (r * 2).sum() -- a 0-d tensor of r's dtype -- while new "
            "tensors peak at no more than 2 * r.element_size() bytes (measured with viewlab.measure)."
        ),
        signature="def doubled_total(r: torch.Tensor) -> torch.Tensor",
        reference=_doubled_total,
        inputs=_vectors_any_float,
        rules=Rules(max_new_bytes=lambda r: 2 * r.element_size()),
        examples=((torch.ones(8),),),  # short: a failure prints its values
        hints=(
            "Does the factor 2 have to be applied to every element before summing?",
            "The big temporary comes from doubling every element. What if the doubling waited: what is left to "
            "double by then, and what does that cost?",
        ),
        why=(
            "sum(2 * r) == 2 * sum(r), so the doubling can wait until there is one number left.",
            "r.sum() * 2 holds two 0-d tensors at its peak (each has its own storage: r.sum() is alive while `* 2` "
            "makes the result); (r * 2).sum() holds a copy of all of r.",
        ),
        wrong=(
            (lambda r: (r * 2).sum(), "rule `max_new_bytes`"),
            (lambda r: r.sum(), "values differ"),
        ),
    )
)
