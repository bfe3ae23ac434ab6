"""Exercises for notebook 10 (PyTorch's own memory tools): the bytes autograd saves, counted by storage.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("10")
['10-saved-bytes']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, register, tensors
from viewlab.course.exercises.programs import Program, _run


def _programs() -> Any:
    """(fn, a, b): a and b of one 2-D shape (size 0 included, any layout), each requiring grad or not, and fn a
    program of 2 to 5 steps from the menu, built step by step on a copy of the inputs so that each step fits
    (a view only of a contiguous value, matmul only of values of 2 dims or more; no in-place op, which would
    leave a saved tensor unfit for backward). relu saves its result, sin its input, mul the other operand of
    each one that requires grad, matmul the same (one operand as a transposed view). Programs that save are drawn first:
    each step acts on the newest value or on an input (the one that requires grad first), and t * t comes
    before t * u."""
    from hypothesis import strategies as st

    from viewlab.course.exercises.compare import fresh

    @st.composite
    def draw(draw: Any) -> tuple[Any, ...]:
        sized = st.tuples(st.integers(1, 3), st.integers(1, 3))
        shape = draw(st.integers(0, 7).flatmap(lambda k: st.just((0, 2)) if k == 0 else sized))  # size 0: 1 in 8
        a, b = draw(tensors(shape=shape)), draw(tensors(shape=shape))
        grads = draw(st.sampled_from([(True, False), (False, True), (False, False), (True, True)]))
        a, b = fresh(a).requires_grad_(grads[0]), fresh(b).requires_grad_(grads[1])
        inputs = ["b", "a"] if b.requires_grad and not a.requires_grad else ["a", "b"]  # the one with grad first
        values = {"a": fresh(a), "b": fresh(b)}
        steps: list[tuple[str, str, str, str | None]] = []
        for i in range(draw(st.integers(2, 5))):
            made = [f"t{k}" for k in range(i, 0, -1)]  # the newest first
            name = draw(st.sampled_from([*made[:1], *inputs, *made[1:]]))
            t = values[name]
            kinds = ["relu", "sin", "mul"] + (["matmul"] if t.dim() > 1 else []) + ["clone"]
            kinds += (["expand", "repeat", "cat"] if t.dim() < 4 else []) + (["view"] if t.is_contiguous() else [])
            kind = draw(st.sampled_from(kinds))
            same = sorted(n for n, u in values.items() if u.shape == t.shape and n != name)
            w = draw(st.sampled_from([name, *same, None])) if kind in ("mul", "cat", "matmul") else None
            values[f"t{i + 1}"] = _run(kind, t, None if w is None else values[w])
            steps.append((f"t{i + 1}", kind, name, w))
        made = sorted(n for n in values if n.startswith("t"))
        returns = draw(st.lists(st.sampled_from(made), min_size=1, max_size=2, unique=True))
        return Program(tuple(steps), tuple(returns)), a, b

    return draw()


def _saved_bytes(fn, *args):
    saved = {}  # storage address -> its bytes: each storage once
    held = []  # the saved tensors, held so that no address is freed and given to another storage meanwhile

    def pack(t):
        held.append(t)
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t.detach()  # what autograd stores (detached: t itself would tie a saved output to its own graph)

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return sum(saved.values())


def _hooked(fn: Any, args: tuple[Any, ...], keep: Any) -> Any:
    """Run ``fn(*args)`` with a pack hook that calls ``keep(t)`` on each saved tensor; returns fn's result."""
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (keep(t), t.detach())[1], lambda t: t):
        return fn(*args)


def _per_tensor(fn, *args):  # every tensor pack is given: one storage saved twice (t1 * t1) counts twice
    sizes: list[int] = []
    _hooked(fn, args, lambda t: sizes.append(t.untyped_storage().nbytes()))
    return sum(sizes)


def _per_tensor_object(fn, *args):  # once per tensor object: a view on a saved storage is another object
    saved: dict[int, tuple[torch.Tensor, int]] = {}
    _hooked(fn, args, lambda t: saved.setdefault(id(t), (t, t.untyped_storage().nbytes())))
    return sum(n for _, n in saved.values())


def _by_storage(saved: dict[int, int], held: list[Any], size: Any = None, only: Any = None) -> Any:
    """A ``keep`` for :func:`_hooked`: holds each tensor, and records ``size(t)`` (its storage's bytes by
    default) under its storage's address when ``only(t)`` (always, by default)."""

    def keep(t: torch.Tensor) -> None:
        held.append(t)
        if only is None or only(t):
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes() if size is None else size(t)

    return keep


def _elements_read(fn, *args):  # once per storage, but the bytes the tensor reads (t.nbytes), not its storage's
    saved: dict[int, int] = {}
    _hooked(fn, args, _by_storage(saved, [], size=lambda t: t.nbytes))
    return sum(saved.values())


def _with_results(fn, *args):  # what fn returns is added, saved or not
    saved: dict[int, int] = {}
    keep = _by_storage(saved, [])
    out = _hooked(fn, args, keep)
    for t in out if isinstance(out, tuple) else (out,):
        keep(t)
    return sum(saved.values())


def _needing_grad_only(fn, *args):  # a saved tensor that does not require grad is skipped: b in a * b
    saved: dict[int, int] = {}
    _hooked(fn, args, _by_storage(saved, [], only=lambda t: t.requires_grad))
    return sum(saved.values())


def _nothing_unless_all_need_grad(fn, *args):  # 0 as soon as one input does not require grad
    if not all(t.requires_grad for t in args):
        return 0
    return _saved_bytes(fn, *args)


def _made_by_fn_only(fn, *args):  # the inputs' storages left out, as if only new memory counted
    inputs = {t.untyped_storage().data_ptr() for t in args}
    saved: dict[int, int] = {}
    _hooked(fn, args, _by_storage(saved, []))
    return sum(n for p, n in saved.items() if p not in inputs)


def _from_the_graph(fn, *args):  # no hooks: the _saved_* tensors of the graph behind what fn returns
    out = fn(*args)
    nodes, seen, saved = [t.grad_fn for t in (out if isinstance(out, tuple) else (out,))], set(), {}
    while nodes:
        node = nodes.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in (n for n in dir(node) if n.startswith("_saved_")):
            value = getattr(node, name)
            if isinstance(value, torch.Tensor):
                saved[value.untyped_storage().data_ptr()] = value.untyped_storage().nbytes()
        nodes += [parent for parent, _ in node.next_functions]
    return sum(saved.values())


def _examples() -> tuple[tuple[Any, ...], ...]:
    p = Program
    row, rows = (lambda g=False: torch.ones(1, 3, requires_grad=g)), (lambda g=False: torch.ones(2, 3, requires_grad=g))
    strided = torch.arange(6.0).view(1, 6)[:, ::2]  # (1, 3) read from a 24-byte storage
    return (
        # mul saves t1, which needs no grad (only b does), and relu saves its result: 12 + 12
        (
            p((("t1", "clone", "a", None), ("t2", "mul", "t1", "b"), ("t3", "relu", "t2", None)), ("t3",)),
            row(),
            row(True),
        ),
        # t1 * t1 saves t1 twice, one storage; relu saves t3: 24 + 24
        (
            p((("t1", "clone", "a", None), ("t2", "mul", "t1", "t1"), ("t3", "relu", "t2", None)), ("t3",)),
            rows(True),
            rows(),
        ),
        # sin saves its input t1, not its result t2, which fn returns: 12
        (p((("t1", "clone", "a", None), ("t2", "sin", "t1", None)), ("t2",)), row(True), row()),
        # sin saves the input a itself, relu its result: 24 + 24
        (p((("t1", "sin", "a", None), ("t2", "relu", "t1", None)), ("t2",)), rows(True), rows()),
        # mul saves b, a (1, 3) that reads half of its 24-byte storage, and relu t2: 24 + 12
        (p((("t1", "mul", "a", "b"), ("t2", "relu", "t1", None)), ("t2",)), row(True), strided),
        # relu saves t2, and fn drops it: the save was made: 24
        (
            p((("t1", "clone", "a", None), ("t2", "relu", "t1", None), ("t3", "clone", "t1", None)), ("t3",)),
            rows(True),
            rows(),
        ),
        # sin saves t2, a view on t1's storage, and t1 itself: one storage, 24
        (
            p(
                (
                    ("t1", "clone", "a", None),
                    ("t2", "view", "t1", None),
                    ("t3", "sin", "t2", None),
                    ("t4", "sin", "t1", None),
                ),
                ("t3", "t4"),
            ),
            rows(True),
            rows(),
        ),
        # matmul saves t1 and its transpose, two tensors on one storage: 24
        (p((("t1", "clone", "a", None), ("t2", "matmul", "t1", None)), ("t2",)), rows(True), rows()),
        # nothing requires grad: nothing is saved
        (p((("t1", "mul", "a", "b"), ("t2", "relu", "t1", None)), ("t2",)), rows(), rows()),
    )


register(
    Exercise(
        id="10-saved-bytes",
        title="The bytes autograd saves, storage by storage",
        statement=(
            "Given a function fn and its tensor arguments, return how many bytes autograd saves for backward while "
            "fn(*args) runs: every tensor that torch.autograd.graph.saved_tensors_hooks hands to pack (notebook 10, "
            "section 1), counted by the storage behind it, each storage once (a tensor saved twice, or two views on "
            "one storage, count once) and whole (untyped_storage().nbytes(), not only the elements a strided or "
            "expanded tensor reads). An input counts like any other tensor: for a * b autograd saves b when a "
            "requires grad, whether b does or not, and it saves nothing when no input requires grad. What fn "
            "returns counts only if autograd saved it, and a save counts even when fn drops the value that needed it "
            "(even if no backward runs). fn is made from expand, repeat, clone, mul, view, cat, relu (autograd "
            "saves its result), sin (its input) and matmul (v @ w.mT: each operand when the other requires grad, w as a "
            "transposed view)."
        ),
        signature="def saved_bytes(fn, *args) -> int",
        reference=_saved_bytes,
        inputs=_programs,
        examples=_examples(),
        hints=(
            "Section 1's pack hook already sees every tensor autograd saves: which of those tensors can stand on "
            "the same memory, and what do you add up for each piece of memory?",
            "Let pack fill a dictionary keyed by something that is the same for every tensor on one storage (the "
            "tensor object is not: a view is another object), holding that storage's bytes. Should pack skip a "
            "tensor that needs no grad, or one that fn returns, and what must pack return so backward still works?",
        ),
        why=(
            "pack gets each saved tensor itself; keyed by its storage's address, a tensor saved twice (t1 * t1) or a "
            "view on a saved storage counts once, and the storage's nbytes() is what saving it keeps alive.",
            "Nothing is filtered: autograd saves what each backward formula needs, inputs and tensors that need no "
            "grad included; the list holds the saved tensors, so no address is freed and reused while fn runs.",
        ),
        wrong=(
            (_needing_grad_only, "the result is 12 (int), expected 24 (int)"),
            (_nothing_unless_all_need_grad, "the result is 0 (int), expected 24 (int)"),
            (_per_tensor, "the result is 72 (int), expected 48 (int)"),
            (_with_results, "the result is 24 (int), expected 12 (int)"),
            (_made_by_fn_only, "the result is 24 (int), expected 48 (int)"),
            (_elements_read, "the result is 24 (int), expected 36 (int)"),
            (_from_the_graph, "the result is 0 (int), expected 24 (int)"),
            (_per_tensor_object, "the result is 48 (int), expected 24 (int)"),
        ),
    )
)
