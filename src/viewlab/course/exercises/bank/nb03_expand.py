"""Exercises for notebook 03 (expand, expand_as and repeat, and building a layout from strides).

>>> from viewlab.course.exercises import exercise_ids
>>> print(", ".join(exercise_ids("03")))
03-follow-up-bytes, 03-grad-of-expand, 03-interleave-view, 03-outer-sum, 03-windows-by-strides, 03-writes-into-expand
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab import measure
from viewlab.course.exercises import Exercise, Rules, register, tensors


def _two_vectors() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(1, 1), side=(0, 5)), tensors(dims=(1, 1), side=(0, 5)))  # empty and 1 included


def _outer_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a[:, None] + b[None, :]


def _table_bytes(a: torch.Tensor, b: torch.Tensor) -> int:
    """The bytes of the (N, M) result: all that broadcasting allocates."""
    return a.shape[0] * b.shape[0] * a.element_size()


def _outer_sum_by_gather(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # rule-breaking: copies a gathered
    return a[torch.zeros(b.shape[0], dtype=torch.long)[None, :] + torch.arange(a.shape[0])[:, None]] + b


def _sized_pair(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(float(n)), 10 * torch.arange(float(n + 1))


def _outer_sum_by_loop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # rule-breaking: right bytes, a loop
    out = a.new_empty(a.shape[0], b.shape[0])
    for i in range(a.shape[0]):
        torch.add(a[i], b, out=out[i])
    return out


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
            "(repeat, tile), copied (clone, contiguous, .to) or gathered by indexing first: new bytes may peak at "
            "the result's own N * M elements (measured)."
        ),
        signature="def outer_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor",
        reference=_outer_sum,
        inputs=_two_vectors,
        rules=Rules(forbid=("repeat", "tile", "copy"), no_python_loops=_sized_pair, max_new_bytes=_table_bytes),
        examples=((torch.tensor([0.0, 10.0]), torch.tensor([1.0, 2.0, 3.0])),),
        hints=(
            "Which shapes must a and b take so that + broadcasts them to (N, M), with a varying down the rows?",
            "Indexing with None inserts a size-1 dim where you write it. One input needs it after its dim, the "
            "other before: which is which?",
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
            (_outer_sum_by_gather, "rule `max_new_bytes`"),
        ),
    )
)


def _interleave_inputs() -> Any:
    from hypothesis import strategies as st

    # x may be empty or of length 1, strided, offset or expanded (stride 0): the view must follow its strides
    x = st.one_of(tensors(dims=(1, 1), side=(0, 5)), tensors(dims=(1, 1), side=(2, 5), layouts=("expanded",)))
    return st.tuples(x, st.integers(1, 4))


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
            "Stretching works on size-1 dims only: where must x get one so that out[i, j] reads x[i], and what "
            "size do you then ask for on each dim?",
        ),
        why=(
            "expand gives the size-1 column stride 0, so out[i, j] reads x[i] for every j: a view, 0 bytes.",
            "repeat_interleave writes every value n times into new memory: right values, wrong cost.",
        ),
        wrong=(
            (lambda x, n: x.repeat_interleave(n).view(-1, n), "rule `must_view`: the result shares no memory"),
            (lambda x, n: x.expand(n, -1), "the result"),
            (lambda x, n: x.as_strided((x.shape[0], n), (1, 0)), "values differ"),  # assumes stride 1
        ),
    )
)


def _grad_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(tensors(dims=(2, 2), side=(0, 4)))  # B or D may be 0 or 1


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
            "y[b, d] is w[0, d] for every b: write dL/dw[0, d] as a formula in upstream, then as one tensor "
            "op. How do you keep the answer's shape (1, D) rather than (D,)?",
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


# Follow-ups of e = row.expand(R, C), row = torch.randn(1, C) (float32), as notebook 03, section 4 measures them.
_FOLLOW_UPS: dict[str, Any] = {
    "e.sum()": lambda e: e.sum(),
    "e.sum(dim=0)": lambda e: e.sum(dim=0),
    "e * 2": lambda e: e * 2,
    "e.contiguous()": lambda e: e.contiguous(),
    "e.clone()": lambda e: e.clone(),
    "e.reshape(-1)": lambda e: e.reshape(-1),
    "e.flatten()": lambda e: e.flatten(),
    "e.to(torch.float64)": lambda e: e.to(torch.float64),
    "e.t()": lambda e: e.t(),
    "e[::2]": lambda e: e[::2],
}


def _follow_up_inputs() -> Any:
    from hypothesis import strategies as st

    # sizes 0 (empty), 1 (the stride-0 dim not stretched, or one column) and more, for every follow-up
    return st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from(sorted(_FOLLOW_UPS)))


def _follow_up_bytes(e: torch.Tensor, follow_up: str) -> int:
    """The bytes ``measure`` counts while ``follow_up`` runs on ``e``, its result kept."""
    with measure(device="cpu") as m:
        result = _FOLLOW_UPS[follow_up](e)  # kept alive: allocated_bytes counts the storages alive at the end
    del result
    return m.allocated_bytes


def _measured_follow_up(R: int, C: int, follow_up: str) -> int:
    return _follow_up_bytes(torch.randn(1, C).expand(R, C), follow_up)


def _predicted_follow_up(R: int, C: int, follow_up: str) -> int:
    # A view allocates nothing; a new tensor of e's shape holds R * C elements; a reduction only its output.
    # contiguous() returns e itself unless a stride-0 dim longer than 1 is left (R > 1); reshape(-1) and
    # flatten() copy only when they must merge that dim with a dim longer than 1 (R > 1 and C > 1).
    item = torch.finfo(torch.float32).bits // 8  # bytes of one float32
    full = R * C * item
    if follow_up in ("e.t()", "e[::2]"):
        return 0
    if follow_up == "e.sum()":
        return item  # one 0-d float32, even for an empty e
    if follow_up == "e.sum(dim=0)":
        return C * item
    if follow_up == "e.to(torch.float64)":
        return 2 * full
    if follow_up == "e.contiguous()":
        return full if R > 1 else 0
    if follow_up in ("e.reshape(-1)", "e.flatten()"):
        return full if R > 1 and C > 1 else 0
    return full  # e * 2 and e.clone(): a new result, whatever e's layout


def _every_copy_is_full(R: int, C: int, follow_up: str) -> int:  # wrong: sizes 1 change nothing here
    if follow_up in ("e.t()", "e[::2]"):
        return 0
    return {"e.sum()": 4, "e.sum(dim=0)": C * 4, "e.to(torch.float64)": R * C * 8}.get(follow_up, R * C * 4)


def _reshape_as_contiguous(R: int, C: int, follow_up: str) -> int:  # wrong: reshape copies where contiguous does
    if follow_up in ("e.reshape(-1)", "e.flatten()"):
        return _predicted_follow_up(R, C, "e.contiguous()")
    return _predicted_follow_up(R, C, follow_up)


def _measures_on_strides(R: int, C: int, follow_up: str) -> int:  # rule-breaking: builds the layout and measures
    return _follow_up_bytes(torch.randn(1, C).as_strided((R, C), (0, 1)), follow_up)  # stride 0 without expand


register(
    Exercise(
        id="03-follow-up-bytes",
        title="Which follow-ups of an expand allocate?",
        statement=(
            "row = torch.randn(1, C) (float32) and e = row.expand(R, C): R rows that are one row of memory, as in "
            "section 4. Given R and C (ints from 0 to 4) and one follow-up, as a string from: "
            + ", ".join(repr(f) for f in sorted(_FOLLOW_UPS))
            + ", return (as an int) the bytes viewlab.measure() counts as allocated_bytes while the follow-up "
            "runs on e and its result is kept. Predict: do not build e (or any tensor) and measure."
        ),
        signature="def follow_up_bytes(R: int, C: int, follow_up: str) -> int",
        reference=_measured_follow_up,
        answer=_predicted_follow_up,
        inputs=_follow_up_inputs,
        rules=Rules(forbid=("expand",), predict_without_running=True),
        # tried first: every follow-up on an empty e, one row, one column, one element and a full stretch
        examples=tuple((R, C, f) for R, C in ((4, 3), (1, 3), (3, 1), (1, 1), (0, 3)) for f in sorted(_FOLLOW_UPS)),
        hints=(
            "For each follow-up: does it return a view of e (no new bytes), a new tensor of e's shape (how many "
            "elements, of how many bytes each), or a reduction (how big is its output)?",
            "Sizes 0 and 1 change three of the answers. For which R is e already contiguous, so that contiguous() "
            "returns e itself? And when can reshape(-1) reach every element of e with one stride?",
        ),
        why=(
            "t() and slicing are views: 0 bytes. e * 2, clone() and .to(float64) write a new tensor of R * C "
            "elements (4 bytes each, 8 for float64); sum() returns one float32, sum(dim=0) C of them.",
            "contiguous() copies only when e is not contiguous: R > 1, a stride-0 dim longer than 1. reshape(-1) "
            "and flatten() copy only when they must merge that dim with a dim longer than 1 (R > 1 and C > 1); "
            "with C == 1 the result reads one element R times with stride 0, a view.",
        ),
        wrong=(
            (lambda R, C, follow_up: R * C * 4, "expected"),
            (_every_copy_is_full, "expected"),
            (_reshape_as_contiguous, "expected"),
            (lambda R, C, follow_up: _measured_follow_up(R, C, follow_up), "rule `forbid expand`"),
            (_measures_on_strides, "rule `predict_without_running`"),
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
            "string from: "
            + ", ".join(repr(w) for w in sorted(_WRITES))
            + ", return 'raises' if PyTorch on CPU refuses it "
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
            "Which region does each write write to -- e itself, a row, an element or a column -- and does that "
            "region have two indices on one memory element?",
            "One kind of write in this list skips PyTorch's overlap check, whatever region it writes; the two "
            "fill_ entries differ only in what they pass. Which values keep the check, and which writes pass "
            "such a value?",
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


def _windows_inputs() -> Any:
    from hypothesis import strategies as st

    def build(offset: int, stride: int, n: int, size: int, step: int, stretched: bool) -> tuple[Any, ...]:
        if stretched:  # one element read n times: stride 0, as expand leaves it
            x = torch.tensor([float(offset + 1)]).expand(n)
        else:  # a view of a longer storage: it starts at `offset` and reads every `stride`-th element
            base = torch.arange(float(offset + stride * n + 2))
            x = base[offset::stride][:n]
        return x, size, step

    def sizes(n: int) -> Any:
        offset, stride = st.sampled_from((0, 0, 1, 3)), st.sampled_from((1, 2, 2, 3))
        stretched = st.sampled_from((False, False, False, True))
        return st.tuples(offset, stride, st.just(n), st.integers(1, n), st.integers(1, 3), stretched)

    # the offset and the stride of x drawn apart and together (0 and 1 included), one window (size == n),
    # windows that overlap (step < size), touch (step == size) or leave gaps (step > size)
    return st.integers(1, 7).flatmap(sizes).map(lambda p: build(*p))


def _windows(x: torch.Tensor, size: int, step: int) -> torch.Tensor:
    return x.unfold(0, size, step)


def _windows_by_strides(x: torch.Tensor, size: int, step: int) -> torch.Tensor:
    n_windows = (x.shape[0] - size) // step + 1
    (s,) = x.stride()
    return x.as_strided((n_windows, size), (step * s, s), x.storage_offset())


def _windows_by_stacking(x: torch.Tensor, size: int, step: int) -> torch.Tensor:  # right values, copied
    starts = range(0, x.shape[0] - size + 1, step)
    return torch.stack([x[i : i + size] for i in starts])


def _windows_from_storage_start(x: torch.Tensor, size: int, step: int) -> torch.Tensor:  # ignores the offset
    n_windows = (x.shape[0] - size) // step + 1
    return x.as_strided((n_windows, size), (step * x.stride(0), x.stride(0)), 0)


def _windows_assuming_stride_1(x: torch.Tensor, size: int, step: int) -> torch.Tensor:  # ignores x's stride
    n_windows = (x.shape[0] - size) // step + 1
    return x.as_strided((n_windows, size), (step, 1), x.storage_offset())


def _windows_one_short(x: torch.Tensor, size: int, step: int) -> torch.Tensor:  # counts one window too few
    s = x.stride(0)
    return x.as_strided(((x.shape[0] - size) // step, size), (step * s, s), x.storage_offset())


register(
    Exercise(
        id="03-windows-by-strides",
        title="Sliding windows, from strides",
        statement=(
            "Given a 1-D tensor x of length N (any view: it may start at a storage offset and step through its "
            "storage with a stride other than 1, or 0), an int size (1 <= size <= N) and an int step >= 1, return "
            "the (n_windows, size) tensor of sliding windows: row w holds x[w * step], ..., x[w * step + size - 1], "
            "for every window that fits. Build it with as_strided from x's own stride and storage offset: the "
            "result must be a view of x (nothing copied, no new bytes), and unfold, which does it for you, is "
            "forbidden."
        ),
        signature="def windows_by_strides(x: torch.Tensor, size: int, step: int) -> torch.Tensor",
        reference=_windows,
        answer=_windows_by_strides,
        inputs=_windows_inputs,
        rules=Rules(forbid=("unfold",)),
        memory="view",
        examples=(  # tried first, apart: a wrong answer fails on the one that shows what it ignores
            (torch.arange(6.0)[1:], 2, 1),  # storage offset 1, stride 1
            (torch.arange(10.0)[::2], 2, 1),  # storage offset 0, stride 2
        ),
        hints=(
            "To move one element along a window, how many storage elements does x itself step over, and how many "
            "to move from one window to the next?",
            "The size is (n_windows, size); the inner stride is x's own. How many windows fit in N elements, what "
            "is the outer stride in storage elements, and where in the storage does window 0 start?",
        ),
        why=(
            "Element i of x sits at storage_offset + i * stride, so window w, element j sits at storage_offset + "
            "(w * step + j) * stride: strides (step * stride, stride), offset x's own.",
            "The windows overlap when step < size, so no reshape or view of x can give them; as_strided reads the "
            "same storage, and stacking slices copies every window.",
        ),
        wrong=(
            (_windows_by_stacking, "rule `must_view`"),
            (lambda x, size, step: x.unfold(0, size, step), "rule `forbid unfold`"),
            (_windows_from_storage_start, "values differ"),  # only an input with a storage offset shows it
            (_windows_assuming_stride_1, "values differ"),  # only an input with a stride other than 1 shows it
            (_windows_one_short, "shape"),
        ),
    )
)
