"""Exercises for notebook 08 (under the hood of ``measure``): a dispatch mode of your own that counts bytes.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("08")
['08-bytes-by-dispatch']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors
from viewlab.course.exercises.programs import Program, _run


def _programs() -> Any:
    """(fn, a, b): a and b of one 2-D shape (size 0 included, any layout), a requiring grad or not, and fn a
    program of 1 to 5 steps from the menu, built step by step on a copy of the inputs so that each step fits
    (a view only of a contiguous value, add_ only on a value fn made itself and that is not an expand of it)."""
    from hypothesis import strategies as st

    from viewlab.course.exercises.compare import fresh

    @st.composite
    def draw(draw: Any) -> tuple[Any, ...]:
        shape = draw(st.one_of(st.tuples(st.integers(1, 3), st.integers(1, 3)), st.just((0, 2))))
        a, b = draw(tensors(shape=shape)), draw(tensors(shape=shape))
        a = fresh(a).requires_grad_(draw(st.booleans()))
        values: dict[str, tuple[torch.Tensor, bool]] = {"a": (fresh(a), False), "b": (fresh(b), False)}
        steps: list[tuple[str, str]] = []
        for i in range(draw(st.integers(1, 5))):
            name = draw(st.sampled_from(list(reversed(values))))  # the newest value first
            t, owned = values[name]
            kinds = ["expand", "repeat", "clone", "mul", "cat"] if t.dim() < 4 else ["clone", "mul"]
            kinds += ["view"] if t.is_contiguous() else []
            kinds += ["add_"] if owned else []
            kind = draw(st.sampled_from(kinds))
            same = sorted(n for n, (u, _) in values.items() if u.shape == t.shape)
            w = draw(st.sampled_from([None, *same])) if kind in ("mul", "cat") else None
            out = _run(kind, t, None if w is None else values[w][0])
            values[f"t{i + 1}"] = (out, owned if kind in ("view", "add_") else kind != "expand")
            steps.append((f"t{i + 1}", kind, name, w))
        made = sorted(n for n in values if n.startswith("t"))
        returns = draw(st.lists(st.sampled_from(made), min_size=1, max_size=2, unique=True))
        return Program(tuple(steps), tuple(returns)), a, b

    return draw()


def _alive_bytes(fn: Any, *args: Any) -> int:
    """What ``viewlab.measure`` reports still allocated when the block ends, ``fn``'s result still held."""
    from viewlab import measure

    with measure(device="cpu") as m:
        out = fn(*args)  # noqa: F841 - held until the count is read: what it holds is alive
    return m.allocated_bytes


def _bytes_by_dispatch(fn, *args):
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    inputs = {id(t.untyped_storage()) for t in args if isinstance(t, torch.Tensor)}

    class AliveBytes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.new = weakref.WeakSet()  # each new storage once; one that dies leaves the set by itself

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and id(t.untyped_storage()) not in inputs:
                    self.new.add(t.untyped_storage())
            return out

    with AliveBytes() as mode:
        out = fn(*args)
    nbytes = sum(s.nbytes() for s in mode.new)  # fn's result is still held here, and so is what autograd saved
    del out
    return nbytes


def _log_bytes(fn, *args):  # the notebook's LogBytes: every new storage, the temporaries that died included
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class LogBytes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen, self.total = set(), 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            for t in tree_leaves((args, kwargs)):
                if isinstance(t, torch.Tensor):
                    self.seen.add(t.untyped_storage().data_ptr())
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.seen:
                    self.seen.add(t.untyped_storage().data_ptr())
                    self.total += t.untyped_storage().nbytes()
            return out

    with LogBytes() as mode:
        fn(*args)
    return mode.total


def _returned_only(fn, *args):  # no mode: the storages of what fn returned, so nothing autograd saved
    inputs = {t.untyped_storage().data_ptr() for t in args}
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in outs}
    return sum(n for p, n in storages.items() if p not in inputs)


def _per_tensor(fn, *args):  # weak references to the new tensors, not storages: a view of one counts it again
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    inputs = {id(t.untyped_storage()) for t in args}

    class PerTensor(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.made = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and id(out.untyped_storage()) not in inputs:
                self.made.append(weakref.ref(out))
            return out

    with PerTensor() as mode:
        out = fn(*args)  # noqa: F841
    return sum(t.untyped_storage().nbytes() for r in mode.made if (t := r()) is not None)


def _inputs_too(fn, *args):  # every storage an operator returned and still alive, the inputs' own included
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    class Alive(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.new = weakref.WeakSet()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                self.new.add(out.untyped_storage())
            return out

    with Alive() as mode:
        out = fn(*args)  # noqa: F841
    return sum(s.nbytes() for s in mode.new)


def _result_dropped(fn, *args):  # fn's result is not held: it is gone before the count is read
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    inputs = {id(t.untyped_storage()) for t in args}

    class Alive(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.new = weakref.WeakSet()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and id(t.untyped_storage()) not in inputs:
                    self.new.add(t.untyped_storage())
            return out

    with Alive() as mode:
        fn(*args)
    return sum(s.nbytes() for s in mode.new)


def _by_profiler(fn, *args):  # the profiler counts for you: forbidden
    with torch.profiler.profile(profile_memory=True) as prof:
        out = fn(*args)  # noqa: F841
    return sum(max(e.cpu_memory_usage, 0) for e in prof.events())


def _by_viewlab(fn, *args):  # viewlab's own meter counts for you: forbidden
    from viewlab import measure

    with measure(device="cpu") as m:
        out = fn(*args)  # noqa: F841
    return m.allocated_bytes


def _examples() -> tuple[tuple[Any, ...], ...]:
    p, one = Program, torch.ones(1, 3)
    return (
        # notebook 08's three lines, shortened: the 24-byte t1 * 2 and the 48-byte cat die before fn returns
        (p((("t1", "repeat", "a", None), ("t2", "mul", "t1", None), ("t3", "cat", "t2", None)), ("t1",)), one, one),
        # a requires grad: mul saves t1 for backward, so t1 is alive though fn does not return it
        (p((("t1", "clone", "a", None), ("t2", "mul", "t1", "a")), ("t2",)), torch.ones(2, 3, requires_grad=True), one),
        # one storage behind two returned tensors (and an in-place op), counted once
        (
            p((("t1", "clone", "a", None), ("t2", "view", "t1", None), ("t3", "add_", "t2", None)), ("t1", "t3")),
            one,
            one,
        ),
        # an expand of an input: no new storage
        (p((("t1", "expand", "a", None),), ("t1",)), one, one),
    )


register(
    Exercise(
        id="08-bytes-by-dispatch",
        title="Bytes still alive, by a dispatch mode of your own",
        statement=(
            "Given a function fn and its tensor arguments, run fn(*args) under a TorchDispatchMode you write "
            "(notebook 08, section 1) and return how many bytes of new storage its operators made that are still "
            "alive when fn has returned: the storages behind what fn returned, and those autograd keeps for "
            "backward when an input requires grad. A temporary that died counts 0, so the mode must tell the "
            "living from the dead (LogBytes only adds). The inputs' storages are not new (an expand of an input "
            "counts 0), an in-place op makes no storage, and a storage counts once however many tensors share "
            "it. fn is made from expand, repeat, clone, mul, view, add_ and cat. Rules: no profiler "
            "(torch.profiler, torch.autograd.profiler) and not viewlab's measure: your mode does the counting."
        ),
        signature="def bytes_by_dispatch(fn, *args) -> int",
        reference=_alive_bytes,
        answer=_bytes_by_dispatch,
        inputs=_programs,
        rules=Rules(forbid=("profiler",)),
        examples=_examples(),
        hints=(
            "Your mode sees each new storage the moment an operator makes it: how can it know, after fn has "
            "returned, which of those are still alive, without keeping them alive itself?",
            "A storage (what untyped_storage() gives) is a Python object that a weak reference can point to, and one "
            "that dies drops out of a weakref.WeakSet by itself. Which storages must never enter that set, and "
            "when, relative to fn's result going away, do you add up what is left?",
        ),
        why=(
            "A WeakSet of the new storages holds none of them alive: the temporaries leave it when they die, "
            "what fn returned and what autograd saved stay, and a storage shared by two tensors is one entry.",
            "The inputs' storages are left out (a view or expand of an input reuses them), and the sum is read "
            "while fn's result is still held, before the function returns.",
        ),
        wrong=(
            (_log_bytes, "the result is 96 (int), expected 24 (int)"),
            (_returned_only, "the result is 24 (int), expected 48 (int)"),
            (_per_tensor, "the result is 36 (int), expected 12 (int)"),
            (_inputs_too, "the result is 12 (int), expected 0 (int)"),
            (_result_dropped, "the result is 0 (int), expected 24 (int)"),
            (_by_profiler, "rule `forbid profiler`"),
            (_by_viewlab, "rule `no_viewlab`"),
        ),
    )
)
