"""Inputs at the edges, and answers judged there: every exercise's generator reaches the edges its statement
allows (size 0, size 1, 0-d for "any shape", exact ties for a comparison, non-contiguous and expanded inputs for
a view); wrong answers that differ only there are rejected and shrink to the edge; rule-breaking answers of the
"broadcasting only" and "one indexed write" kinds are rejected by the rule the statement names; and at least two
right answers besides the model answer pass every exercise.
"""

from __future__ import annotations

import inspect
import math
from collections import Counter
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from viewlab.course import exercises as ex
from viewlab.course.exercises import FAILED, PASSED, Rules, check
from viewlab.course.exercises.bank import nb05_pitfalls
from viewlab.course.exercises.bank import nb10_memory_tools as nb10
from viewlab.course.exercises.compare import fresh

# as many draws as check_exercise tries by default: the edges must show up within them
DRAWS = inspect.signature(ex.check_exercise).parameters["max_examples"].default


def _t(args: tuple[Any, ...], i: int = 0) -> torch.Tensor:
    return args[i]


def empty(i: int = 0):
    return lambda a: a[i].numel() == 0


def zero_d(i: int = 0):
    return lambda a: a[i].dim() == 0


def has_size_1(i: int = 0):
    return lambda a: 1 in tuple(a[i].shape)


def non_contiguous(i: int = 0):
    return lambda a: a[i].numel() > 1 and not a[i].is_contiguous()


def expanded(i: int = 0):
    return lambda a: 0 in a[i].stride() and a[i].numel() > 1


def _saves(a: tuple[Any, ...]) -> dict[str, Any]:
    """What autograd saves while ``fn(a, b)`` runs on copies of the inputs: the saved tensors, the distinct
    tensor objects among them, and the (non-empty) storages of fn's inputs and results that are among them."""
    fn, *args = fresh(a)
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t), t)[1], lambda t: t):
        out = fn(*args)
    returned = _storages(out if isinstance(out, tuple) else (out,))
    kept = _storages(saved)
    return {
        "saved": saved,
        "objects": {id(t) for t in saved if t.numel()},
        "inputs": _storages(args) & kept,
        "results": returned & kept,
        "returned": returned,
    }


def _storages(ts: Any) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in ts if t.numel()}


def _is(value: Any):
    return lambda a: a[0] == value


def _tie(a: tuple[float, ...]) -> bool:
    ma, ia, mb, ib = a
    return abs(mb - ma) == ia + ib


def _aligned(a: tuple[Any, ...]) -> tuple[Any, ...]:
    """x's sizes lined up from the right under other's (None where x has no dim)."""
    x, other = a
    return (None,) * (other.dim() - x.dim()) + tuple(x.shape)


def _expands(a: tuple[Any, ...]) -> bool:
    x, other = a
    return x.dim() <= other.dim() and all(n in (None, 1, w) for n, w in zip(_aligned(a), other.shape))


# exercise id -> edge name -> predicate on one generated argument tuple
EDGES: dict[str, dict[str, Any]] = {
    "01-channels-first": {
        "size 0": empty(),
        "size 1": has_size_1(),
        "strided": non_contiguous(),
        "stride 0": expanded(),
    },
    "01-odd-positions": {
        "length 0": lambda a: a[0].shape == (0,),
        "length 1": lambda a: a[0].shape == (1,),
        "strided": non_contiguous(),
        "stride 0": expanded(),
        "offset": lambda a: a[0].storage_offset() > 0,
    },
    "01-independent-flat": {
        "size 0": empty(),
        "size 1": has_size_1(),
        "strided": non_contiguous(),
        "stride 0": expanded(),
    },
    "02-center-rows": {
        "size 0": empty(),
        "one column": lambda a: a[0].shape[1] == 1,
        "square": lambda a: a[0].shape[0] == a[0].shape[1] > 1,
    },
    "02-pairwise-diff": {"size 0": empty(), "one point": lambda a: a[0].shape[0] == 1, "strided": non_contiguous()},
    "02-per-sample-error": {"size 0": empty(), "one sample": lambda a: a[0].shape == (1, 1)},
    "02-bias-grad": {"size 0": empty(), "no leading dim": lambda a: a[0].dim() == 1, "size 1": has_size_1()},
    "03-outer-sum": {"size 0": empty(), "size 1": has_size_1(), "other size 0": empty(1)},
    "03-interleave-view": {
        "size 0": empty(),
        "n == 1": lambda a: a[1] == 1,
        "strided": non_contiguous(),
        "stride 0": expanded(),
    },
    "03-grad-of-expand": {"size 0": empty(), "one row": lambda a: a[0].shape[0] == 1},
    "03-follow-up-bytes": {  # (R, C, follow-up); each follow-up at each of these sizes is an example too
        "no rows": lambda a: a[0] == 0,
        "no columns": lambda a: a[1] == 0 and a[0] > 1,
        "one row": lambda a: a[0] == 1 and a[1] > 1,
        "one column": lambda a: a[1] == 1 and a[0] > 1,
        "stretched, wider than 1": lambda a: a[0] > 1 and a[1] > 1,
    },
    "03-windows-by-strides": {
        "one window": lambda a: a[0].shape[0] == a[1],
        "size 1": lambda a: a[1] == 1,
        "offset, stride 1": lambda a: a[0].storage_offset() > 0 and a[0].stride() == (1,),
        "stride 2, no offset": lambda a: a[0].stride() == (2,) and a[0].storage_offset() == 0,
        "offset and stride": lambda a: a[0].storage_offset() > 0 and a[0].stride()[0] > 1,
        "stride 0": lambda a: a[0].stride() == (0,) and a[0].shape[0] > 1,
        "overlapping": lambda a: a[2] < a[1],
        "gaps": lambda a: a[2] > a[1] and a[0].shape[0] >= a[1] + a[2],
    },
    "03-writes-into-expand": {w: _is(w) for w in ("e.fill_(7)", "e[:, 0] += 1", "e[0] = 5")},
    "04-causal-mask": {
        "q_len 0": lambda a: a[0] == 0,
        "k_len 0": lambda a: a[1] == 0,
        "size 1": lambda a: 1 in a[:2],
        "square": lambda a: a[0] == a[1] > 1,
        "window 1": lambda a: a[2] == 1 and min(a[:2]) > 1,
        "window cuts": lambda a: 1 < a[2] < min(a[:2]),
        "window past every key": lambda a: a[2] >= max(a[:2]) > 1,
    },
    "04-split-heads": {
        "size 0": empty(),
        "one head": lambda a: a[1] == 1,
        "strided": non_contiguous(),
        "stride 0": expanded(),
    },
    "04-masked-token-mean": {
        "V == 1": lambda a: a[0].shape[2] == 1,
        "one token": lambda a: a[0].shape[:2] == (1, 1),
        "padding": lambda a: not bool(a[1].all()),
    },
    "04-sdpa-by-hand": {
        "size 0": empty(),
        "one key": lambda a: a[1].shape[2] == 1,
        "padding": lambda a: not a[3].all(),
        "more queries than keys": lambda a: a[0].shape[2] > a[1].shape[2] and a[0].numel() > 0,
        "fewer queries than keys": lambda a: 0 < a[0].shape[2] < a[1].shape[2] and a[0].numel() > 0,
    },
    "05-batch-view": {"0-d": zero_d(), "n == 0": lambda a: a[1] == 0, "size 0": empty(), "strided": non_contiguous()},
    "05-count-labels": {
        "no rows": lambda a: a[0].shape[0] == 0,
        "empty rows": lambda a: a[0].shape[0] > 0 and a[0].shape[1] == 0,
        "one label": lambda a: tuple(a[0].shape) == (1, 1),
        "one class": lambda a: a[1] == 1 and a[0].numel() > 0,
        "duplicates in a row": lambda a: any(r.unique().numel() < r.numel() for r in a[0]),
        "rows that differ": lambda a: a[0].shape[0] > 1 and not bool((a[0] == a[0][:1]).all()),
    },
    "05-flatten-any": {"0-d": zero_d(), "size 0": empty(), "strided": non_contiguous(), "stride 0": expanded()},
    "05-can-expand": {
        "a 0-d": lambda a: a[0] == (),
        "a size 0": lambda a: 0 in a[0],
        "a longer": lambda a: len(a[0]) > len(a[1]),
    },
    "06-repeat-bytes": {
        "size 0": empty(),
        "a 0 rep": lambda a: 0 in a[1],
        "float16": lambda a: a[0].dtype == torch.float16,
        "more reps than dims": lambda a: len(a[1]) > a[0].dim() and 0 not in a[1] and a[0].numel() > 0,
        "stride 0": expanded(),
        "storage bigger than x": lambda a: a[0].untyped_storage().nbytes() > a[0].nbytes > 0,
    },
    "06-doubled-sum-peak": {
        "0-d": zero_d(),
        "size 0": empty(),
        "one element, 1-d": lambda a: tuple(a[0].shape) in ((1,), (1, 1)),
        "float16": lambda a: a[0].dtype == torch.float16,
    },
    "06-adam-state-bytes": {
        "0-d parameter": lambda a: any(s == () for s, _ in a[0]),
        "empty parameter": lambda a: any(0 in s for s, _ in a[0]),
        "amsgrad": lambda a: a[1],
        "without amsgrad": lambda a: not a[1],
        "mixed dtypes": lambda a: len({d for _, d in a[0]}) > 1,
        "half precision": lambda a: any(d.itemsize == 2 and math.prod(s) for s, d in a[0]),
    },
    "06-lower-the-peak": {"size 0": empty(), "size 1": lambda a: a[0].shape == (1,)},
    "07-safe-copy": {"0-d": zero_d(), "size 0": empty(), "strided": non_contiguous(), "stride 0": expanded()},
    "07-mask-tokens": {
        "size 0": empty(),
        "V == 1": lambda a: a[0].shape[2] == 1,
        "L == V": lambda a: a[0].shape[1] == a[0].shape[2] > 1,
    },
    "07-expand-as-by-strides": {
        "new leading dim": lambda a: _expands(a) and a[1].dim() > a[0].dim(),
        "size 1 stretched": lambda a: _expands(a) and any(n == 1 < w for n, w in zip(_aligned(a), a[1].shape)),
        "size 1 kept": lambda a: _expands(a) and any(n == 1 == w for n, w in zip(_aligned(a), a[1].shape)),
        "to size 0": lambda a: _expands(a) and 0 in a[1].shape,
        "0-d other": lambda a: a[1].dim() == 0,
        "x transposed": lambda a: (
            _expands(a) and a[0].dim() > 1 and not a[0].is_contiguous() and 0 not in a[0].stride()
        ),
        "x expanded": lambda a: _expands(a) and 0 in a[0].stride() and a[0].numel() > 1,
        "refused: a size neither 1 nor other's": lambda a: not _expands(a) and a[0].dim() <= a[1].dim(),
        "refused: more dims": lambda a: a[0].dim() > a[1].dim(),
    },
    "08-bytes-by-dispatch": {
        "size 0": lambda a: a[1].numel() == 0,
        "a requires grad": lambda a: a[1].requires_grad and a[1].numel() > 0,
        "a temporary dies": lambda a: len(a[0].steps) > len(a[0].returns),
        "two results": lambda a: len(a[0].returns) == 2,
        "an in-place op": lambda a: any(kind == "add_" for _, kind, _v, _w in a[0].steps),
        "an expand": lambda a: any(kind == "expand" for _, kind, _v, _w in a[0].steps),
        "a non-contiguous input": lambda a: a[1].numel() > 1 and not a[1].is_contiguous(),
    },
    "09-pick-per-row": {
        "no rows": lambda a: a[0].shape[0] == 0,
        "an ignored row": lambda a: bool((a[1] == -1).any()),
        "the last column picked": lambda a: bool((a[1] == a[0].shape[1] - 1).any()) and a[0].shape[1] > 1,
        "one column": lambda a: a[0].shape[1] == 1 and a[0].shape[0] > 0,
        "scores transposed": non_contiguous(),
        "one row expanded": lambda a: a[0].shape[0] > 1 and a[0].stride(0) == 0,
        "labels strided": lambda a: a[1].numel() > 1 and not a[1].is_contiguous(),
    },
    "10-saved-bytes": {
        "size 0": lambda a: a[1].numel() == 0,
        "nothing requires grad": lambda a: not (a[1].requires_grad or a[2].requires_grad),
        "a storage saved twice": lambda a: len(_saves(a)["saved"]) > len(_storages(_saves(a)["saved"])) > 0,
        "two tensors on one saved storage": lambda a: (
            len(_saves(a)["objects"]) > len(_storages(_saves(a)["saved"])) > 0
        ),
        "a saved tensor that needs no grad": lambda a: any(
            t.numel() and not t.requires_grad for t in _saves(a)["saved"]
        ),
        "a saved input": lambda a: bool(_saves(a)["inputs"]),
        "a saved result": lambda a: bool(_saves(a)["results"]),
        "a result not saved": lambda a: bool(_saves(a)["saved"]) and _saves(a)["results"] != _saves(a)["returned"],
        "a saved tensor that reads part of its storage": lambda a: any(
            t.nbytes != t.untyped_storage().nbytes() for t in _saves(a)["saved"]
        ),
        "a save whose value fn drops": lambda a: nb10._from_the_graph(*fresh(a)) < nb10._saved_bytes(*fresh(a)),
    },
    "07-faster-beyond-spread": {
        "tie, a slower": lambda a: _tie(a) and a[0] > a[2],
        "tie, a faster": lambda a: _tie(a) and a[0] < a[2],
        "zero spread": lambda a: a[1] == 0 or a[3] == 0,
    },
}
BY_ID = [pytest.param(i, marks=getattr(pytest.mark, f"nb{i[:2]}"), id=i) for i in ex.exercise_ids()]


def _draw(exercise_id: str, n: int) -> list[tuple[Any, ...]]:
    """``n`` argument tuples drawn from the exercise's own generator, as a check draws them."""
    seen: list[tuple[Any, ...]] = []
    strategy = ex.get(exercise_id).inputs().map(lambda a: a if isinstance(a, tuple) else (a,))

    @settings(max_examples=n, database=None, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(args):
        seen.append(args)

    collect()
    return seen


def test_every_exercise_lists_its_edges():
    assert sorted(EDGES) == ex.exercise_ids()


@pytest.mark.parametrize("exercise_id", BY_ID)
def test_the_generator_reaches_every_edge(exercise_id):
    drawn = _draw(exercise_id, DRAWS)
    counts = Counter(name for args in drawn for name, hit in EDGES[exercise_id].items() if hit(args))
    missing = [name for name in EDGES[exercise_id] if counts[name] == 0]
    assert not missing, f"{exercise_id}: {len(drawn)} draws never reached {missing} (reached: {dict(counts)})"


# ----- wrong answers that differ only at an edge: rejected, shrunk to that edge -----------------------------
def _smallest_0d(a: tuple[Any, ...]) -> bool:
    """A 0-d tensor holding 0 (and n == 0 beside it, if any): the smallest input there is, shrunk to."""
    return a[0].dim() == 0 and a[0].item() == 0 and all(v == 0 for v in a[1:])


def _length(n: int):
    return lambda a: tuple(a[0].shape) == (n,)


EDGE_WRONG = [
    ("01-odd-positions", lambda x: x.narrow(0, 1, x.shape[0] - 1)[::2], _length(0)),
    ("01-odd-positions", lambda x: x.squeeze()[1::2], _length(1)),
    ("01-odd-positions", lambda x: x if x.shape[0] < 2 else x[1::2], _length(1)),
    (
        "01-odd-positions",
        lambda x: x.as_strided((x.shape[0] // 2,), (2,), x.storage_offset() + 1),
        lambda a: a[0].stride() != (1,) or a[0].storage_offset() == 0,
    ),
    ("05-batch-view", lambda s, n: s.unsqueeze(0).expand(n, -1, *s.shape[1:]), _smallest_0d),
    (
        "05-batch-view",
        lambda s, n: s.reshape(1, -1).expand(n, -1).view(n, *s.shape),
        lambda a: not a[0].is_contiguous(),
    ),
    ("05-flatten-any", lambda x: x.reshape(-1) if x.dim() > 1 else x, _smallest_0d),
    ("07-safe-copy", lambda x: torch.cat([x]), _smallest_0d),
    ("07-safe-copy", lambda x: x.clone() if x.dim() else x, _smallest_0d),
    ("01-channels-first", ex.get("01-channels-first").wrong[2][0], lambda a: not a[0].is_contiguous()),
    ("04-split-heads", ex.get("04-split-heads").wrong[2][0], lambda a: not a[0].is_contiguous()),
    (
        "03-interleave-view",
        lambda x, n: x.as_strided((x.shape[0], n), (1, 0)),
        lambda a: a[0].stride() != (1,) or a[0].storage_offset(),
    ),
    # the storage offset ignored fails where x starts past its storage's start, and on stride 1 (an example)
    ("03-windows-by-strides", ex.get("03-windows-by-strides").wrong[2][0], lambda a: a[0].storage_offset() > 0),
    # x's stride ignored fails where x steps by 2 from the storage's start (an example)
    (
        "03-windows-by-strides",
        ex.get("03-windows-by-strides").wrong[3][0],
        lambda a: a[0].stride() == (2,) and a[0].storage_offset() == 0,
    ),
    ("07-expand-as-by-strides", ex.get("07-expand-as-by-strides").wrong[3][0], lambda a: not a[0].is_contiguous()),
    ("07-expand-as-by-strides", ex.get("07-expand-as-by-strides").wrong[4][0], lambda a: not _expands(a)),
]


@pytest.mark.parametrize(("exercise_id", "k"), [(i, k) for k, (i, _f, _p) in enumerate(EDGE_WRONG)])
def test_a_wrong_answer_at_an_edge_is_rejected_and_shrinks_to_it(exercise_id, k):
    _, fn, at_edge = EDGE_WRONG[k]
    result = ex.check_exercise(exercise_id, fn)
    assert result.status == FAILED, str(result)
    assert at_edge(result.failing_input), f"the smallest failing input is not at the edge:\n{result}"


def test_greater_or_equal_for_greater_is_rejected_at_the_smallest_tie():
    def faster(ma, ia, mb, ib):
        return "a" if mb - ma >= ia + ib else "b" if ma - mb >= ia + ib else "unclear"

    result = ex.check_exercise("07-faster-beyond-spread", faster)
    assert result.status == FAILED and "expected 'unclear'" in result.reason
    assert _tie(result.failing_input)
    # the smallest tie: all four zero (gap 0 equals spreads 0), computed from the generator's own smallest draw
    smallest = _draw("07-faster-beyond-spread", 1)[0]
    assert result.failing_input == smallest and _tie(smallest)


# ----- "broadcasting only" and "one indexed write", enforced by what the statement names -------------------
BROKEN = [
    ("02-pairwise-diff", lambda p: p[:, None].expand(-1, p.shape[0], -1).contiguous() - p[None], "max_new_bytes"),
    ("02-pairwise-diff", lambda p: p[torch.arange(p.shape[0])[:, None]] - p[None], "max_new_bytes"),
    ("02-pairwise-diff", lambda p: torch.index_select(p, 0, torch.arange(p.shape[0]))[:, None] - p, "max_new_bytes"),
    ("03-outer-sum", lambda a, b: a[:, None].expand(-1, b.shape[0]).contiguous() + b, "forbid copy"),
    ("03-outer-sum", lambda a, b: torch.gather(a[:, None], 0, torch.arange(a.shape[0])[:, None]) + b, "max_new_bytes"),
    ("05-count-labels", nb05_pitfalls._count_by_unique, "max_new_bytes"),
    ("05-count-labels", nb05_pitfalls._count_by_one_hot, "max_new_bytes"),
    ("05-count-labels", nb05_pitfalls._count_by_compare, "max_new_bytes"),
    (
        "05-count-labels",
        lambda labels, c: (labels[:, :, None] == torch.arange(c)).sum(1, dtype=torch.float32),
        "max_new_bytes",
    ),
    ("05-count-labels", nb05_pitfalls._count_by_flat_positions, "max_new_bytes"),
    ("07-mask-tokens", lambda loss, keep: loss * keep[:, :, None][:, :, [0] * loss.shape[-1]], "max_new_bytes"),
    # torch runs repeat_interleave as an expand and a copy: the recorder names the expand it saw
    (
        "07-mask-tokens",
        lambda loss, keep: loss * keep.repeat_interleave(loss.shape[-1]).view(loss.shape),
        "forbid expand",
    ),
]


@pytest.mark.parametrize(("exercise_id", "k"), [(i, k) for k, (i, _f, _r) in enumerate(BROKEN)])
def test_a_rule_breaking_answer_is_rejected_by_the_rule_the_statement_names(exercise_id, k):
    _, fn, rule = BROKEN[k]
    result = ex.check_exercise(exercise_id, fn)
    assert result.status == FAILED and result.reason.startswith(f"breaks rule `{rule}`"), str(result)


def test_a_loop_over_the_classes_is_seen_by_the_loop_probe():
    # the probe grows the classes with the labels, so a loop over the classes runs more operators when bigger
    e = ex.get("05-count-labels")
    assert ex.check_exercise(e.id, nb05_pitfalls._count_by_class_loop).status == FAILED
    only_loops = Rules(no_python_loops=e.rules.no_python_loops)
    r = check(nb05_pitfalls._count_by_class_loop, e.reference, inputs=list(e.examples), rules=only_loops)
    assert r.status == FAILED and r.reason.startswith("breaks rule `no_python_loops`"), str(r)
    assert check(e.reference, e.reference, inputs=list(e.examples), rules=only_loops).passed


def test_the_count_budget_is_what_the_model_answer_needs_and_one_scalar():
    # the model answer (counts plus one weight a label) fits with one float32 to spare: room for the answer that
    # broadcasts a single weight instead, which needs only counts and that scalar
    from viewlab import measure

    labels, c = ex.get("05-count-labels").examples[0]
    with measure(device="cpu") as m:
        ex.get("05-count-labels").reference(labels, c)
    scalar, rows = torch.ones(()).nbytes, torch.arange(labels.shape[0]).nbytes
    assert m.peak_bytes + scalar + rows == nb05_pitfalls._count_budget(labels, c)
    # and room for the answer that indexes with a (B, 1) column of row numbers and broadcasts a single weight

    def one_weight(lab, n):
        rows = torch.arange(lab.shape[0])[:, None]
        return torch.zeros(lab.shape[0], n).index_put_((rows, lab), torch.tensor(1.0), accumulate=True)

    assert ex.check_exercise("05-count-labels", one_weight).passed


# ----- right answers other than the model answer ------------------------------------------------------------
def _odd_by_narrow(x):
    return x.narrow(0, min(1, x.shape[0]), max(x.shape[0] - 1, 0))[::2]


def _sdpa_einsum(q, k, v, keep):
    w = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    future = torch.arange(k.shape[2])[None, :] > torch.arange(q.shape[2])[:, None]
    return torch.einsum("bhqk,bhkd->bhqd", w.masked_fill(keep.logical_not() | future, float("-inf")).softmax(-1), v)


def _expand_by_padding_the_shape(x, other):
    if x.dim() > other.dim():
        raise RuntimeError("x has more dims than other")
    pad = other.dim() - x.dim()
    sizes, strides = (1,) * pad + tuple(x.shape), (0,) * pad + tuple(x.stride())
    if any(n not in (1, w) for n, w in zip(sizes, other.shape)):
        raise RuntimeError(f"{tuple(x.shape)} does not expand to {tuple(other.shape)}")
    return x.as_strided(other.shape, [s if n == w else 0 for n, s, w in zip(sizes, strides, other.shape)])


def _expand_by_zipping_from_the_right(x, other):
    strides = []
    for i in range(1, other.dim() + 1):
        n, s = (x.shape[-i], x.stride(-i)) if i <= x.dim() else (1, 0)
        if n not in (1, other.shape[-i]):
            raise ValueError(f"dim -{i}: size {n} does not stretch to {other.shape[-i]}")
        strides.insert(0, s if n == other.shape[-i] else 0)
    if x.dim() > other.dim():
        raise ValueError("too many dims")
    return torch.as_strided(x, other.shape, strides, x.storage_offset())


def _alive_by_weak_refs(fn, *args):
    """Weak references in a list, looked through by identity (no WeakSet), the inputs' storages held apart."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    inputs = [t.untyped_storage() for t in args]
    refs = []

    class Alive(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    s = t.untyped_storage()
                    if all(s is not i for i in inputs) and all(r() is not s for r in refs):
                        refs.append(weakref.ref(s))
            return out

    with Alive():
        out = fn(*args)
    alive = sum(s.nbytes() for r in refs if (s := r()) is not None)
    del out
    return alive


def _alive_by_callbacks(fn, *args):
    """What measure does: add a storage's bytes when it is made, subtract them in its weak reference's callback."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    inputs = {id(t.untyped_storage()) for t in args}

    class Alive(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes, self.refs = 0, {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if not isinstance(t, torch.Tensor):
                    continue
                s = t.untyped_storage()
                known = self.refs.get(id(s))
                if id(s) in inputs or (known is not None and known() is s):
                    continue
                n = s.nbytes()
                self.bytes += n

                def gone(_ref, n=n):
                    self.bytes -= n

                self.refs[id(s)] = weakref.ref(s, gone)
            return out

    with Alive() as mode:
        out = fn(*args)
    alive = mode.bytes
    del out
    return alive


def _saved_by_storage_object(fn, *args):
    """The storage objects themselves, by identity (a storage's Python object is one while it lives)."""
    storages = {}

    def pack(t):
        storages[id(t.untyped_storage())] = t.untyped_storage()  # holds the storage, so its id is not reused
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    del out
    return sum(s.nbytes() for s in storages.values())


def _saved_by_hooks_subclass(fn, *args):
    """saved_tensors_hooks subclassed, pack a method; (address, bytes) pairs in a set, the tensors held."""

    class Saved(torch.autograd.graph.saved_tensors_hooks):
        def __init__(self):
            self.pairs, self.held = set(), []
            super().__init__(self.pack, lambda t: t)

        def pack(self, t):
            self.held.append(t)
            self.pairs.add((t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()))
            return t

    saved = Saved()  # entered below: its __enter__ returns None, so `with Saved() as saved` would bind None
    with saved:
        fn(*args)
    return sum(n for _, n in saved.pairs)


def _write_by_region(write):
    scalar_fill = write in ("e.fill_(7)", "e.zero_()")
    return "goes through" if scalar_fill or write.startswith(("e[0]", "e[0,")) else "raises"


def _follow_up_bytes_by_table(R: int, C: int, follow_up: str) -> int:
    n = R * C
    copies = {  # follow-up -> (bytes when it copies, whether it copies)
        "e * 2": (4 * n, True),
        "e.clone()": (4 * n, True),
        "e.to(torch.float64)": (8 * n, True),
        "e.contiguous()": (4 * n, R > 1),
        "e.reshape(-1)": (4 * n, R > 1 and C > 1),
        "e.flatten()": (4 * n, R > 1 and C > 1),
    }
    if follow_up in ("e.sum()", "e.sum(dim=0)"):
        return 4 if follow_up == "e.sum()" else 4 * C
    nbytes, copied = copies.get(follow_up, (0, False))
    return nbytes if copied else 0


def _follow_up_bytes_by_layout(R: int, C: int, follow_up: str) -> int:
    # e's strides (0, 1), written by hand: contiguous iff every dim longer than 1 has its row-major stride;
    # reshape(-1) is a view iff the two dims merge into one stride (a size-1 dim merges with anything)
    shape, strides, row_major = (R, C), (0, 1), (C, 1)
    contiguous = R * C == 0 or all(n == 1 or s == want for n, s, want in zip(shape, strides, row_major))
    mergeable = R * C == 0 or R == 1 or C == 1 or strides[0] == strides[1] * C
    elements = {
        "e.sum()": 1,
        "e.sum(dim=0)": C,
        "e * 2": R * C,
        "e.clone()": R * C,
        "e.to(torch.float64)": 2 * R * C,
        "e.contiguous()": 0 if contiguous else R * C,
        "e.reshape(-1)": 0 if mergeable else R * C,
        "e.flatten()": 0 if mergeable else R * C,
    }
    return 4 * elements.get(follow_up, 0)


RIGHT: dict[str, tuple[Any, ...]] = {
    "01-channels-first": (lambda im: im.movedim(3, 1), lambda im: im.transpose(1, 3).transpose(2, 3)),
    "01-odd-positions": (lambda x: x[1:][::2], _odd_by_narrow),
    "01-independent-flat": (
        lambda x: torch.empty_like(x, memory_format=torch.contiguous_format).copy_(x).view(-1),
        lambda x: x.clone(memory_format=torch.contiguous_format).flatten(),
    ),
    "02-center-rows": (lambda x: x - x.mean(1)[:, None], lambda x: x - x.sum(1, keepdim=True) / x.shape[1]),
    "02-pairwise-diff": (lambda p: p[:, None, :] - p[None, :, :], lambda p: torch.sub(p.unsqueeze(1), p.unsqueeze(0))),
    "02-per-sample-error": (lambda pred, t: (pred[:, 0] - t) ** 2, lambda pred, t: (pred.view(-1) - t).square()),
    "02-bias-grad": (
        lambda g: torch.einsum("...d->d", g),
        lambda g: g.flatten(0, -2).sum(0) if g.dim() > 1 else g,
    ),
    "03-outer-sum": (lambda a, b: a.unsqueeze(1) + b.unsqueeze(0), lambda a, b: torch.add(a[:, None], b)),
    "03-interleave-view": (
        lambda x, n: x.unsqueeze(1).expand(x.shape[0], n),
        lambda x, n: x.as_strided((x.shape[0], n), (x.stride(0), 0)),
    ),
    "03-windows-by-strides": (
        lambda x, size, step: torch.as_strided(
            x, ((len(x) - size) // step + 1, size), (x.stride(0) * step, x.stride(0)), x.storage_offset()
        ),
        lambda x, size, step: x.as_strided((1 + (x.numel() - size) // step, size), (step * x.stride(0), x.stride(0))),
    ),
    "03-grad-of-expand": (lambda g: g.sum(0)[None], lambda g: torch.ones(1, g.shape[0]) @ g),
    "03-follow-up-bytes": (_follow_up_bytes_by_table, _follow_up_bytes_by_layout),
    "03-writes-into-expand": (
        _write_by_region,
        lambda w: "raises" if w.startswith(("e.", "e[:")) and w not in ("e.fill_(7)", "e.zero_()") else "goes through",
    ),
    "04-causal-mask": (
        lambda q, k, w: (
            (torch.arange(q)[:, None] >= torch.arange(k)) & (torch.arange(q)[:, None] < torch.arange(k) + w)
        ),
        lambda q, k, w: (
            ((torch.arange(q)[:, None] - torch.arange(k)[None, :]) % (q + k + w) < w)
            if q * k
            else torch.zeros(q, k, dtype=torch.bool)
        ),
    ),
    "04-split-heads": (
        lambda x, h: x.unflatten(-1, (h, x.shape[-1] // h)).transpose(1, 2),
        lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h).permute(0, 2, 1, 3),
    ),
    "04-masked-token-mean": (
        lambda loss, m: (loss * m.unsqueeze(-1)).sum() / (m.sum() * loss.shape[-1]),
        lambda loss, m: torch.where(m[..., None], loss, 0.0).sum() / (m.sum() * loss.shape[-1]),
    ),
    "04-sdpa-by-hand": (
        lambda q, k, v, keep: (
            torch.softmax(
                (q @ k.mT) * q.shape[-1] ** -0.5
                + torch.where(keep, 0.0, float("-inf"))
                + torch.where(torch.arange(k.shape[2]) <= torch.arange(q.shape[2])[:, None], 0.0, float("-inf")),
                -1,
            )
            @ v
        ),
        _sdpa_einsum,
    ),
    "05-batch-view": (lambda s, n: s.expand(n, *s.shape), lambda s, n: torch.broadcast_to(s, (n, *s.shape))),
    "05-count-labels": (
        lambda labels, c: torch.zeros(len(labels), c).index_put_(
            (torch.arange(len(labels))[:, None], labels), torch.ones(labels.shape), accumulate=True
        ),
        lambda labels, c: torch.zeros(labels.shape[0], c).scatter_add_(
            -1, labels, torch.ones_like(labels, dtype=torch.float32)
        ),
    ),
    "05-flatten-any": (lambda x: x.flatten(), lambda x: x.reshape(x.numel())),
    "05-can-expand": (
        lambda a, b: len(a) <= len(b) and all(s in (1, t) for s, t in zip(reversed(a), reversed(b))),
        lambda a, b: len(a) <= len(b) and all(a[-i] in (1, b[-i]) for i in range(1, len(a) + 1)),
    ),
    "06-repeat-bytes": (
        lambda x, reps: (
            math.prod(s * r for s, r in zip((1,) * (len(reps) - x.dim()) + x.shape, reps)) * x.element_size()
        ),
        lambda x, reps: x.numel() * x.itemsize * math.prod(reps),
    ),
    "06-doubled-sum-peak": (
        lambda x: (2 * x.numel() if x.numel() else 1) * x.element_size(),
        lambda x: x.itemsize * max(x.nelement() + 1, x.nelement() * 2),
    ),
    "06-adam-state-bytes": (
        lambda params, ams: sum((2 + ams) * math.prod(s) * d.itemsize + 4 for s, d in params),
        lambda params, ams: 4 * len(params) + (3 if ams else 2) * sum(math.prod(s) * d.itemsize for s, d in params),
    ),
    "06-lower-the-peak": (lambda r: 2 * r.sum(), lambda r: torch.sum(r).mul_(2)),
    "07-safe-copy": (lambda x: torch.empty_like(x).copy_(x), lambda x: x.clone(memory_format=torch.contiguous_format)),
    "07-mask-tokens": (
        lambda loss, keep: loss * keep.unsqueeze(-1),
        lambda loss, keep: loss.masked_fill(keep[:, :, None] == 0, 0),
        lambda loss, keep: torch.where(keep[:, :, None].bool(), loss, 0.0),
    ),
    "07-expand-as-by-strides": (_expand_by_padding_the_shape, _expand_by_zipping_from_the_right),
    "08-bytes-by-dispatch": (_alive_by_weak_refs, _alive_by_callbacks),
    "09-pick-per-row": (
        lambda scores, labels: torch.where(labels >= 0, scores[torch.arange(scores.shape[0]), labels], 0),
        # gather needs a valid index: clamp the -1s, then write 0 there (multiplying by the mask would turn -inf into nan)
        lambda scores, labels: (
            scores.gather(1, labels.clamp(min=0).unsqueeze(1)).squeeze(1).masked_fill(labels == -1, 0)
        ),
    ),
    "10-saved-bytes": (_saved_by_storage_object, _saved_by_hooks_subclass),
    "07-faster-beyond-spread": (
        lambda ma, ia, mb, ib: "unclear" if abs(mb - ma) <= ia + ib else ("a" if ma < mb else "b"),
        lambda ma, ia, mb, ib: "a" if mb - ma > ia + ib else "b" if ma - mb > ia + ib else "unclear",
    ),
}


def test_every_exercise_has_two_other_right_answers():
    assert sorted(RIGHT) == ex.exercise_ids() and all(len(v) >= 2 for v in RIGHT.values())


@pytest.mark.parametrize(("exercise_id", "k"), [(i, k) for i in sorted(RIGHT) for k in range(len(RIGHT[i]))])
def test_another_right_answer_passes(exercise_id, k):
    result = ex.check_exercise(exercise_id, RIGHT[exercise_id][k])
    assert result.status == PASSED, str(result)
