"""Exercises for notebook 03 (expand, expand_as and repeat).

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("03")
['03-grad-of-expand', '03-interleave-view', '03-outer-sum', '03-writes-into-expand']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors


def _two_vectors() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(1, 1), side=(1, 5)), tensors(dims=(1, 1), side=(1, 5)))


def _outer_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a[:, None] + b[None, :]


def _sized_pair(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(float(n)), 10 * torch.arange(float(n + 1))


def _outer_sum_by_loop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # rule-breaking: right values, a loop
    return torch.stack([a[i] + b for i in range(a.shape[0])])


def _tries_on_a_copy_of_the_layout(write: str) -> str:  # rule-breaking: builds the layout and tries the write
    e = torch.zeros(64).as_strided((4, 3), (0, 1))  # stride 0 without calling expand, and 256 B of storage
    try:
        _WRITES[write](e)
    except RuntimeError:
        return "raises"
    return "goes through"


def _grad_by_autograd(upstream: torch.Tensor) -> torch.Tensor:  # rule-breaking: right values, autograd
    w = torch.zeros(1, upstream.shape[1], requires_grad=True)
    (grad,) = torch.autograd.grad(w.expand_as(upstream), w, upstream)
    return grad


def _grad_by_backward(upstream: torch.Tensor) -> torch.Tensor:  # rule-breaking: right values, .backward()
    w = torch.zeros(1, upstream.shape[1], requires_grad=True)
    w.expand_as(upstream).backward(upstream)
    return w.grad


register(
    Exercise(
        id="03-outer-sum",
        title="Every pair, without a loop",
        statement=(
            "Given 1-D tensors a (N,) and b (M,), return the (N, M) tensor out with out[i, j] = a[i] + b[j]. "
            "Use broadcasting: make a a column and b a row; no Python loop, and neither input may be repeated "
            "(repeat, tile) or copied (clone, contiguous, .to) first."
        ),
        signature="def outer_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor",
        reference=_outer_sum,
        inputs=_two_vectors,
        rules=Rules(forbid=("repeat", "tile", "copy"), no_python_loops=_sized_pair),
        examples=((torch.tensor([0.0, 10.0]), torch.tensor([1.0, 2.0, 3.0])),),
        hints=(
            "a[:, None] has shape (N, 1): what shape must b have so that + broadcasts the pair to (N, M)?",
            "Give b a size-1 dim in front; adding a column and a row makes the whole table at once.",
        ),
        why=(
            "(N, 1) + (1, M) broadcasts to (N, M): out[i, j] = a[i] + b[j].",
            "Indexing with None is a view, so only the result is allocated: no repeated or copied input.",
        ),
        wrong=(
            (lambda a, b: a[None, :] + b[:, None], "the result"),
            (lambda a, b: a[:, None].repeat(1, b.shape[0]) + b, "rule `forbid repeat`"),
            (lambda a, b: torch.tile(a[:, None], (1, b.shape[0])) + b, "rule `forbid tile`"),
            (lambda a, b: a[:, None].clone() + b[None, :], "rule `forbid copy`"),
            (_outer_sum_by_loop, "rule `no_python_loops`"),
        ),
    )
)


def _interleave_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(1, 1), side=(1, 5)), st.integers(1, 4))


def _interleave_view(x: torch.Tensor, n: int) -> torch.Tensor:
    return x[:, None].expand(-1, n)


register(
    Exercise(
        id="03-interleave-view",
        title="repeat_interleave, as a view",
        statement=(
            "Given a 1-D tensor x (N,) and an int n >= 1, return an (N, n) tensor with out[i, j] = x[i] -- so that "
            "out.flatten() equals x.repeat_interleave(n) -- without copying anything: the result must be a view of x."
        ),
        signature="def interleave_view(x: torch.Tensor, n: int) -> torch.Tensor",
        reference=_interleave_view,
        inputs=_interleave_inputs,
        memory="view",
        hints=(
            "Which op stretches a size-1 dim to any size with stride 0, writing nothing?",
            "Make x a column (N, 1) first; then stretch only the new dim (-1 keeps a size as it is).",
        ),
        why=(
            "expand gives the size-1 column stride 0, so out[i, j] reads x[i] for every j: a view, 0 bytes.",
            "repeat_interleave writes every value n times into new memory: right values, wrong cost.",
        ),
        wrong=(
            (lambda x, n: x.repeat_interleave(n).view(-1, n), "rule `must_view`: the result shares no memory"),
            (lambda x, n: x.expand(n, -1), "the result"),
        ),
    )
)


def _grad_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(2, 2), side=(1, 4)))


def _grad_of_expand(upstream: torch.Tensor) -> torch.Tensor:
    return upstream.sum(dim=0, keepdim=True)


register(
    Exercise(
        id="03-grad-of-expand",
        title="The gradient of expand, by hand",
        statement=(
            "w has shape (1, D) and y = w.expand(B, D). Given the gradient of the loss with respect to y, "
            "`upstream` (B, D), return the gradient with respect to w, shape (1, D), without calling autograd."
        ),
        signature="def grad_of_expand(upstream: torch.Tensor) -> torch.Tensor",
        reference=_grad_of_expand,
        inputs=_grad_inputs,
        rules=Rules(forbid=("autograd",)),
        hints=(
            "Every row of y is the same memory as w, so w receives the gradient of every row: combine them how?",
            "Reduce upstream over dim 0, and keep that dim so the result has shape (1, D).",
        ),
        why=(
            "Each element of w is read by all B rows of y, and the gradients of all its uses add up.",
            "So dL/dw is upstream summed over the expanded dim, kept as size 1: exactly what autograd computes.",
        ),
        wrong=(
            (lambda g: g.mean(dim=0, keepdim=True), "values differ"),
            (lambda g: g.sum(dim=0), "the result"),
            (_grad_by_autograd, "rule `forbid autograd`"),
            (_grad_by_backward, "rule `forbid autograd`"),
        ),
    )
)


# Writes into e = base.expand(4, 3), base = torch.zeros(3): each entry is one write a learner might try.
_WRITES: dict[str, Any] = {
    "e.add_(1)": lambda e: e.add_(1),
    "e.mul_(2)": lambda e: e.mul_(2),
    "e.copy_(torch.ones(4, 3))": lambda e: e.copy_(torch.ones(4, 3)),
    "e.fill_(7)": lambda e: e.fill_(7),
    "e.fill_(torch.tensor(7.0))": lambda e: e.fill_(torch.tensor(7.0)),
    "e.zero_()": lambda e: e.zero_(),
    "e[0].add_(1)": lambda e: e[0].add_(1),
    "e[0] = 5": lambda e: e.__setitem__(0, 5),
    "e[0, 1] = 5": lambda e: e.__setitem__((0, 1), 5),
    "e[:, 1] = 5": lambda e: e.__setitem__((slice(None), 1), 5),
    "e[:, 0] += 1": lambda e: e[:, 0].add_(1),
}


def _write_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(st.sampled_from(sorted(_WRITES)))


def _measured_write(write: str) -> str:
    e = torch.zeros(3).expand(4, 3)
    try:
        _WRITES[write](e)
    except RuntimeError:
        return "raises"
    return "goes through"


def _predicted_write(write: str) -> str:
    # The rule: a write raises when the region it writes is non-empty and has a stride-0 dim longer than 1,
    # except fill_/zero_ with a Python number (and advanced-index writes, none listed here), which skip the
    # check. Here e has stride 0 along its rows, so e itself and a column e[:, j] are refused; a row e[i] and
    # an element e[i, j] have no stride-0 dim left.
    if write in ("e.fill_(7)", "e.zero_()"):
        return "goes through"
    region_overlaps = write.startswith(("e.", "e[:, "))
    return "raises" if region_overlaps else "goes through"


register(
    Exercise(
        id="03-writes-into-expand",
        title="Which writes into an expanded tensor go through?",
        statement=(
            "e = torch.zeros(3).expand(4, 3): four rows that are one row of memory (stride 0). Given one write, as a "
            "string from: " + ", ".join(repr(w) for w in sorted(_WRITES)) + ", return 'raises' if PyTorch refuses it "
            "(the 'more than one element of the written-to tensor refers to a single memory location' error) or "
            "'goes through' if it writes into the base. Predict: do not build an expanded tensor and try the write."
        ),
        signature="def write_outcome(write: str) -> str",
        reference=_measured_write,
        answer=_predicted_write,
        inputs=_write_inputs,
        rules=Rules(forbid=("expand",), predict_without_running=True),
        examples=tuple((w,) for w in sorted(_WRITES)),
        hints=(
            "Find the region each write writes to: e itself, a row e[0] (three distinct elements), an element "
            "e[0, 1], or a column e[:, 1] (four indices on one element). Does it have two indices on one element?",
            "Of the writes listed, one kind skips the check: fill_ / zero_ with a Python number (advanced-index "
            "writes, e[mask] = 5 or index_put_, skip it too; none is listed). fill_ with a tensor, and an "
            "assignment e[...] = 5 (the number becomes a tensor), keep it.",
        ),
        why=(
            "A write is refused when the region it writes has a stride-0 dim longer than 1, whatever the values: "
            "e and a column e[:, j] have one (the stretched rows), a row e[i] and an element e[i, j] do not.",
            "fill_ and zero_ with a Python number skip that check and write the shared elements (so do advanced-"
            "index writes); everything else here (add_, mul_, copy_, fill_ with a tensor, e[...] = 5) keeps it.",
        ),
        wrong=(
            (lambda write: "raises", "expected 'goes through'"),
            (lambda write: "goes through", "expected 'raises'"),
            (lambda write: _measured_write(write), "rule `forbid expand`"),
            (_tries_on_a_copy_of_the_layout, "rule `predict_without_running`"),
        ),
    )
)
