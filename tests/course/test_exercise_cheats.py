"""Answers written to beat the checker, run against the real exercises: each is rejected with a message that names
the rule it breaks and the line that broke it (checked against the file itself), while right answers still pass.

One section per way of cheating: numpy doing the work, the course's own helpers, torch functions that decompose
before the dispatcher sees them, loops the operator count misses, forward-mode AD, "zero new bytes" for a view,
work moved into a thread (the grader's job: the in-kernel check follows no thread), tensors (meta ones too) created
by a prediction.
"""

from __future__ import annotations

import linecache
import re
import threading
from array import array
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import viewlab
from tests.conftest import ROOT
from viewlab.course import exercises as ex
from viewlab.course.exercises import FAILED, PASSED, Rules, check, tensors
from viewlab.course.exercises.source import static_loop
from viewlab.course.exercises.watch import Watch

_PLACE = re.compile(r"(?P<file>[^ `]+\.py):(?P<line>\d+): `(?P<code>[^`]+)`")


def rejected(exercise_id: str, fn, rule: str, *, where: str = __file__) -> str:
    """Check ``fn`` against the exercise: it must fail on ``rule``, naming a line of ``where`` whose code is quoted
    exactly as the file has it (the oracle: linecache reads the file itself)."""
    result = ex.check_exercise(exercise_id, fn)
    assert result.status == FAILED, f"{exercise_id}: a cheat passed:\n{result}"
    msg = result.reason
    assert msg.startswith(f"breaks rule `{rule}`"), msg
    places = [m for m in _PLACE.finditer(msg) if m["file"] == where]
    assert places, f"the learner's line in {where} is not named: {msg}"
    for m in places:
        assert linecache.getline(m["file"], int(m["line"])).strip() == m["code"], msg
    assert "Smallest failing input found" in str(result) and "Traceback" not in str(result)
    return msg


def passes(exercise_id: str, fn) -> None:
    result = ex.check_exercise(exercise_id, fn)
    assert result.status == PASSED, str(result)


# ----- numpy does the forbidden work ---------------------------------------------------------------------------
def _pairs_by_np_tile(p):
    a = p.numpy()
    n = a.shape[0]
    return torch.from_numpy(np.tile(a[:, None], (1, n, 1)) - np.tile(a[None], (n, 1, 1)))


def _pairs_by_np_broadcast(p):
    a = p.numpy()
    return torch.from_numpy(np.broadcast_to(a[:, None], (a.shape[0],) + a.shape) - a[None])


def _pairs_by_numpy_arithmetic(p):  # no numpy function at all: the data leaves torch, numpy subtracts
    a = p.numpy()
    return torch.from_numpy(a[:, None, :] - a[None, :, :])


def _count_by_np_bincount(labels, c):
    return torch.from_numpy(np.stack([np.bincount(row, minlength=c) for row in labels.numpy()]).astype(np.float32))


def _count_by_np_add_at(labels, c):
    counts = np.zeros((labels.shape[0], c), dtype=np.float32)
    np.add.at(counts, (np.arange(labels.shape[0])[:, None], labels.numpy()), 1)
    return torch.from_numpy(counts)


def _causal_by_np_tri(q, k, w):
    return torch.from_numpy(np.tri(q, k, dtype=bool) & ~np.tri(q, k, -w, dtype=bool))


def _peak_by_numpy_temporary(r):  # the temporary r * 2 lives in numpy: the data leaving torch is what is seen
    return torch.tensor((r.numpy().astype(np.float64) * 2).sum(), dtype=r.dtype)


@pytest.mark.parametrize(
    ("exercise_id", "fn", "rule", "named"),
    [
        ("02-pairwise-diff", _pairs_by_np_tile, "forbid tile", "numpy.tile"),
        ("02-pairwise-diff", _pairs_by_np_broadcast, "torch_only", "numpy.broadcast_to"),
        ("02-pairwise-diff", _pairs_by_numpy_arithmetic, "torch_only", "Tensor.numpy"),
        ("05-count-labels", _count_by_np_bincount, "forbid bincount", "numpy.bincount"),
        ("05-count-labels", _count_by_np_add_at, "forbid bincount", "numpy.add.at"),
        ("04-causal-mask", _causal_by_np_tri, "forbid tril", "numpy.tri"),
        ("06-lower-the-peak", _peak_by_numpy_temporary, "torch_only", "Tensor.numpy"),
    ],
)
def test_numpy_doing_the_work_is_caught(exercise_id, fn, rule, named):
    msg = rejected(exercise_id, fn, rule)
    assert f"called {named}" in msg
    assert "Python lists" not in msg  # np.tri used to be reported as "built tensors from Python lists"


def test_memory_borrowed_from_numpy_counts_as_new_bytes():
    def view_after_a_numpy_scratch(x):
        _ = torch.from_numpy(np.zeros(3))  # 24 B of numpy's memory: viewlab.measure counts only torch's
        return x[1::2]

    def view_after_a_buffer(x):
        _ = torch.frombuffer(bytearray(16), dtype=torch.float32)  # no operator runs at all
        return x[1::2]

    msg = rejected("01-odd-positions", view_after_a_numpy_scratch, "must_view")
    assert "new tensors took 24 B" in msg and "aten.lift_fresh" in msg
    msg = rejected("01-odd-positions", view_after_a_buffer, "must_view")
    assert "made a tensor over memory from outside torch" in msg and "torch.frombuffer" in msg


# ----- the course's own helpers --------------------------------------------------------------------------------
def _causal_by_helper(q, k, w):
    return viewlab.attention.causal_mask(q, k) & (torch.arange(q)[:, None] - torch.arange(k) < w)


def _sdpa_by_helper(q, k, v, keep):
    return viewlab.attention.scaled_dot_product_attention(q, k, v, keep, is_causal=True)


def _can_expand_by_helper(a, b):
    from viewlab.course.article_helpers import can_expand

    return can_expand(a, b)


def _pairs_by_the_exercise_itself(p):
    return ex.get("02-pairwise-diff").reference(p)


@pytest.mark.parametrize(
    ("exercise_id", "fn", "named"),
    [
        ("04-causal-mask", _causal_by_helper, "viewlab.attention.causal_mask"),
        ("04-sdpa-by-hand", _sdpa_by_helper, "viewlab.attention.scaled_dot_product_attention"),
        ("05-can-expand", _can_expand_by_helper, "viewlab.course.article_helpers.can_expand"),
        ("02-pairwise-diff", _pairs_by_the_exercise_itself, "viewlab.course.exercises.registry.get"),
    ],
)
def test_the_course_helpers_may_not_do_the_work(exercise_id, fn, named):
    msg = rejected(exercise_id, fn, "no_viewlab")
    assert f"called {named}" in msg


def test_an_exercise_may_allow_a_viewlab_function_by_name():
    def uses_measure(x):
        with viewlab.measure(device="cpu"):
            return x.t()

    args = st.tuples(tensors(dims=(2, 2)))
    strict = Rules(forbid=("repeat",))
    assert "rule `no_viewlab`" in check(uses_measure, lambda x: x.t(), args, rules=strict).reason
    allowed = Rules(forbid=("repeat",), allow_viewlab=("measure",))
    assert check(uses_measure, lambda x: x.t(), args, rules=allowed).passed
    assert check(uses_measure, lambda x: x.t(), args).passed  # no rules: nothing is forbidden
    with pytest.raises(TypeError, match=r"^Rules\(\): `allow_viewlab` must be a tuple"):
        Rules(allow_viewlab="measure")


# ----- torch functions that decompose before the dispatcher sees them ----------------------------------------
def _pairs_by_repeat_interleave(p):
    n = p.shape[0]
    return p.repeat_interleave(n, dim=0).view(n, n, -1) - p[None]


def _outer_by_repeat_interleave(a, b):
    return a.repeat_interleave(b.shape[0]).view(-1, b.shape[0]) + b


def _sdpa_by_math_kernel(q, k, v, keep):
    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=keep)[0]


def _count_by_histc(labels, c):
    return torch.histc(labels.float(), bins=c, min=0, max=c)


@pytest.mark.parametrize(
    ("exercise_id", "fn", "rule", "named"),
    [
        ("02-pairwise-diff", _pairs_by_repeat_interleave, "forbid repeat", "Tensor.repeat_interleave"),
        ("03-outer-sum", _outer_by_repeat_interleave, "forbid repeat", "Tensor.repeat_interleave"),
        ("04-sdpa-by-hand", _sdpa_by_math_kernel, "forbid sdpa", "aten._scaled_dot_product_attention_math"),
        ("05-count-labels", _count_by_histc, "forbid bincount", "histc"),
    ],
)
def test_forbidden_functions_are_seen_before_they_decompose(exercise_id, fn, rule, named):
    msg = rejected(exercise_id, fn, rule)
    assert named in msg
    seen = msg.split("The exercise forbids")[0].replace(str(ROOT), "<root>")  # a checkout's path may say "clone"
    assert "clone" not in seen  # repeat_interleave is not reported as a clone


def test_an_operator_run_inside_a_function_names_both():
    r = check(
        lambda x: x.repeat_interleave(2),
        lambda x: x.repeat_interleave(2),
        st.tuples(tensors(dims=(1, 1))),
        rules=Rules(forbid=("copy",)),
    )
    assert "ran aten.clone.default (inside Tensor.repeat_interleave)" in r.reason, r.reason


# ----- loops the operator count misses ----------------------------------------------------------------------
def _count_without_torch_ops(labels, c):  # the loop runs no torch operator: the count is the same on every size
    counts = array("f", bytes(4 * c * labels.shape[0] + 4))  # a spare float: a buffer may not be empty
    for b, row in enumerate(labels.tolist()):
        for label in row:
            counts[b * c + label] += 1
    return torch.frombuffer(counts, dtype=torch.float32)[:-1].view(labels.shape[0], c).clone()


def _count_over_the_classes(labels, c):  # a loop over a quantity the probe never varies (3 classes)
    return torch.stack([(labels == k).sum(1) for k in range(c)], 1).float()


def _pairs_with_a_fixed_bound(p):
    for _ in range(1):
        d = p[:, None] - p[None]
    return d


def _count_recursively(labels, c):
    if labels.shape[1] == 0:
        return torch.zeros(labels.shape[0], c)
    out = _count_recursively(labels[:, 1:], c)
    return out.scatter_add_(1, labels[:, :1], torch.ones(labels.shape[0], 1))


def _causal_by_map(q, k, w):
    return torch.stack(list(map(lambda i: (torch.arange(k) <= i) & (i - torch.arange(k) < w), range(q)))).reshape(q, k)


def _outer_in_a_while_that_runs_once(a, b):  # a fixed bound: the loop runs once whatever the size
    done = False
    while not done:
        out, done = a[:, None] + b[None, :], True
    return out


def _count_class_by_class(labels, c):  # a loop over the classes: 3 in the probe whatever the size
    counts = torch.zeros(labels.shape[0], c)
    for k in range(c):
        counts[:, k] = (labels == k).sum(1)
    return counts


def _pairs_feature_by_feature(p):  # a loop over the features: 2 in the probe whatever the size
    return torch.stack([p[:, None, j] - p[None, :, j] for j in range(p.shape[1])], -1)


@pytest.mark.parametrize(
    ("exercise_id", "fn", "kind"),
    [
        ("05-count-labels", _count_without_torch_ops, "a for loop"),
        ("05-count-labels", _count_over_the_classes, "a comprehension"),
        ("02-pairwise-diff", _pairs_with_a_fixed_bound, "a for loop"),
        ("03-outer-sum", _outer_in_a_while_that_runs_once, "a while loop"),
        ("05-count-labels", _count_class_by_class, "a for loop"),
        ("02-pairwise-diff", _pairs_feature_by_feature, "a comprehension"),
        ("05-count-labels", _count_recursively, "recursion"),
        ("04-causal-mask", _causal_by_map, "map()"),
    ],
)
def test_loops_are_seen_in_the_source(exercise_id, fn, kind):
    msg = rejected(exercise_id, fn, "no_python_loops")
    assert kind in msg


# a helper whose loop is outside the answer's own source: the helpers it calls by name are read too
def _rows_of_a_causal_mask(q, k, w):
    rows, i = bytearray(), 0
    while i < q:
        rows += bytes(j <= i and i - j < w for j in range(k))
        i += 1
    return rows


def _causal_by_a_looping_helper(q, k, w):
    rows = _rows_of_a_causal_mask(q, k, w) + bytearray(1)  # one spare byte: a buffer may not be empty
    return torch.frombuffer(rows, dtype=torch.bool)[: q * k].view(q, k).clone()


def _counts_by_a_looping_helper(labels, c):
    return torch.tensor(_tally(labels.tolist(), c), dtype=torch.float32).view(labels.shape[0], c)


def _tally(rows, c):
    out = [[0] * c for _ in rows]
    for b, row in enumerate(rows):
        for x in row:
            out[b][x] += 1
    return out


def test_loops_in_helpers_are_seen_in_the_helpers_source():
    for exercise_id, fn, helper in (
        ("04-causal-mask", _causal_by_a_looping_helper, "_rows_of_a_causal_mask"),
        ("05-count-labels", _counts_by_a_looping_helper, "_tally"),
    ):
        msg = rejected(exercise_id, fn, "no_python_loops")
        assert f"(in {helper}, which your function calls)" in msg, msg


def test_a_loop_without_source_is_seen_by_the_operator_count():
    namespace: dict = {"torch": torch}
    exec(
        "def count(labels, c):\n    out = torch.zeros(labels.shape[0], c)\n    for b in range(labels.shape[0]):\n"
        "        for x in labels[b]:\n            out[b, x] += 1\n    return out\n",
        namespace,
    )
    assert static_loop(namespace["count"]) is None  # exec'd from a string: no source to read
    r = ex.check_exercise("05-count-labels", namespace["count"])
    # no line to name (the old line tracer, sys.settrace, is gone): the operator count grows with the size
    assert r.reason.startswith("breaks rule `no_python_loops`: your function ran "), r.reason
    assert "torch operators for size 3 and" in r.reason, r.reason


def test_a_loop_in_c_without_source_is_seen_by_the_operator_count():
    # no source to read, no line run twice, no C call from Python code: map calls p.__rsub__ from C, once per row
    namespace: dict = {"torch": torch}
    exec("def pairs(p):\n    return torch.stack(list(map(p.__rsub__, p)))\n", namespace)
    r = ex.check_exercise("02-pairwise-diff", namespace["pairs"])
    assert r.reason.startswith("breaks rule `no_python_loops`: your function ran "), r.reason
    assert "torch operators for size 3 and" in r.reason and "for size 6" in r.reason


def test_right_answers_with_multi_line_expressions_and_helpers_called_twice_pass():
    def col(t):
        return t[:, None]

    # fmt: off
    def outer(a, b):
        return (
            col(a)
            + b[None, :]
        )
    # fmt: on

    passes("03-outer-sum", outer)
    passes("03-outer-sum", lambda a, b: col(a) + col(b).t())  # the same helper twice: not recursion
    passes("02-pairwise-diff", lambda p: col(p) - p[None])
    passes(
        "04-causal-mask",
        lambda q, k, w: (
            (torch.arange(k)[None, :] <= col(torch.arange(q))) & (col(torch.arange(q)) - torch.arange(k) < w)
        ),
    )
    passes(
        "05-count-labels",
        lambda labels, c: torch.zeros(len(labels), c).scatter_add_(1, labels, torch.ones(labels.shape)),
    )


def test_a_loop_in_a_notebook_cell_names_the_cells_line_and_lambdas_are_told_apart():
    cell = "/tmp/ipykernel_1/loops.py"
    source = (
        "right, looped = lambda p: p[:, None] - p[None], lambda p: torch.stack([a - p for a in p])\n"
        "def pairs(p):\n"
        "    return torch.stack([a - p for a in p])\n"
    )
    linecache.cache[cell] = (len(source), None, source.splitlines(True), cell)
    try:
        namespace: dict = {"torch": torch}
        exec(compile(source, cell, "exec"), namespace)
        assert static_loop(namespace["right"]) is None  # the other lambda on its line has the comprehension
        assert static_loop(namespace["looped"]) == (f"line 1 of this cell: {source.splitlines()[0]}", "a comprehension")
        passes("02-pairwise-diff", namespace["right"])
        r = ex.check_exercise("02-pairwise-diff", namespace["pairs"])
    finally:
        del linecache.cache[cell]
    assert "has a comprehension at line 3 of this cell: `return torch.stack([a - p for a in p])`" in r.reason, r.reason


# ----- forward-mode AD and torch.func count as autograd ---------------------------------------------------
def _grad_by_jacfwd(upstream):
    jac = torch.func.jacfwd(lambda w: w.expand_as(upstream))(torch.zeros(1, upstream.shape[1]))
    return (upstream[:, :, None, None] * jac).sum((0, 1))


def _grad_by_forward_ad(upstream):
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        w = fwad.make_dual(torch.zeros(1, upstream.shape[1]), torch.ones(1, upstream.shape[1]))
        tangent = fwad.unpack_dual(w.expand_as(upstream)).tangent
    return (upstream * tangent).sum(0, keepdim=True)


def _grad_by_jvp(upstream):
    w = torch.zeros(1, upstream.shape[1])
    _, tangent = torch.func.jvp(lambda w: w.expand_as(upstream), (w,), (torch.ones_like(w),))
    return (upstream * tangent).sum(0, keepdim=True)


def _grad_by_vjp(upstream):
    _, pull = torch.func.vjp(lambda w: w.expand_as(upstream), torch.zeros(1, upstream.shape[1]))
    return pull(upstream)[0]


@pytest.mark.parametrize(
    ("fn", "named"),
    [
        (_grad_by_jacfwd, "torch.func.jacfwd"),
        (_grad_by_forward_ad, "torch.autograd.forward_ad"),
        (_grad_by_jvp, "torch.func.jvp"),
        (_grad_by_vjp, "torch.func.vjp"),
    ],
)
def test_forward_mode_ad_and_torch_func_are_autograd(fn, named):
    msg = rejected("03-grad-of-expand", fn, "forbid autograd")
    assert named in msg


# ----- "zero new bytes" for a view, measured --------------------------------------------------------------
def _odd_after_a_clone(x):
    _ = x.clone()
    return x[1::2]


def _batch_after_a_temporary(sample, n):
    _ = sample * 0
    return sample.unsqueeze(0).expand(n, *sample.shape)


def _interleave_after_a_sum(x, n):
    _ = x.sum()
    return x[:, None].expand(-1, n)


def _heads_after_a_numpy_scratch(x, h):
    _ = torch.from_numpy(np.zeros(1))
    return x.view(x.shape[0], x.shape[1], h, x.shape[2] // h).transpose(1, 2)  # sizes spelled out: D may be 0


@pytest.mark.parametrize(
    ("exercise_id", "fn"),
    [
        ("01-odd-positions", _odd_after_a_clone),
        ("05-batch-view", _batch_after_a_temporary),
        ("03-interleave-view", _interleave_after_a_sum),
        ("04-split-heads", _heads_after_a_numpy_scratch),
    ],
)
def test_a_throwaway_allocation_breaks_zero_new_bytes(exercise_id, fn):
    msg = rejected(exercise_id, fn, "must_view")
    assert "new tensors took" in msg and "zero new bytes" in msg


# ----- work moved into a thread ------------------------------------------------------------------------------
def _in_a_thread(work):
    out = []
    t = threading.Thread(target=lambda: out.append(work()))
    t.start()
    t.join()
    return out[0]


def _pairs_repeated_in_a_thread(p):
    n = p.shape[0]
    return _in_a_thread(lambda: p.repeat(n, 1).view(n, n, -1).transpose(0, 1) - p[None])


def _odd_cloned_in_a_thread(x):
    _in_a_thread(lambda: x.clone())
    return x[1::2]


def _bytes_allocated_in_a_pool(x, reps):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: x.new_empty([s * r for s, r in zip(x.shape, reps)]).nbytes).result()


def _peak_in_a_thread(r):
    return _in_a_thread(lambda: (r * 2).sum())


def _count_looped_in_a_thread(labels, c):
    return torch.tensor(_in_a_thread(lambda: _tally(labels.tolist(), c)), dtype=torch.float32)


def test_a_loop_moved_into_a_thread_is_seen_in_the_source():
    # the lambda handed to the thread is part of the answer's source, and _tally is a helper it calls by name
    rejected("05-count-labels", _count_looped_in_a_thread, "no_python_loops")


_THREAD_CHEATS = [
    ("02-pairwise-diff", _pairs_repeated_in_a_thread, "forbid repeat"),
    ("01-odd-positions", _odd_cloned_in_a_thread, "must_view"),
    ("06-repeat-bytes", _bytes_allocated_in_a_pool, "predict_without_running"),
    ("06-lower-the-peak", _peak_in_a_thread, "max_new_bytes"),
]


@pytest.mark.parametrize(("exercise_id", "fn", "rule"), _THREAD_CHEATS)
def test_work_moved_into_a_thread_is_the_graders_job(exercise_id, fn, rule):
    """The in-kernel check does not follow threads the answer starts: torch's modes are per thread, and nothing
    of the process is patched. The checker used to wrap ``threading.Thread.start`` for every thread of the
    process while a check ran (and left it wrapped when two checks crossed on two threads), and caught these four.
    Moving work into a thread is not an honest mistake; trusted grading runs the answer in another process,
    which records every thread there. This test keeps the evidence: the rule is not what the in-kernel check
    reports (an answer that is also wrong on an edge still fails on that)."""
    r = ex.check_exercise(exercise_id, fn)
    assert not (r.reason or "").startswith(f"breaks rule `{rule}`"), r.reason
    with Watch(Rules(forbid=("repeat",), max_new_bytes=0)) as w:
        _in_a_thread(lambda: torch.ones(2).repeat(2))
    seen = w.seen(lambda: None)
    assert "repeat" not in seen.ops and seen.created is None  # the thread's operators were not recorded


def test_the_hooks_are_restored_after_a_check():
    import sys

    before = threading.Thread.start, sys.gettrace(), sys.getprofile()
    rejected("05-count-labels", _count_looped_in_a_thread, "no_python_loops")
    assert (threading.Thread.start, sys.gettrace(), sys.getprofile()) == before
    assert not torch.overrides._get_current_function_mode_stack()
    assert not torch.utils._python_dispatch._get_current_dispatch_mode_stack()


# ----- a prediction creates no tensor, meta ones included -------------------------------------------------
def _repeat_bytes_on_meta(x, reps):
    return torch.empty([s * r for s, r in zip(x.shape, reps)], dtype=x.dtype, device="meta").nbytes


def _doubled_sum_on_meta(x):
    y = x.to("meta") * 2
    return y.nbytes + y.sum().nbytes


def _adam_on_meta(params, amsgrad):
    return sum((2 + amsgrad) * torch.empty(s, dtype=d, device="meta").nbytes + 4 for s, d in params)


def _can_expand_by_adding_on_meta(a, b):
    try:
        return len(a) <= len(b) and (torch.empty(a, device="meta") + torch.empty(b, device="meta")).shape == b
    except RuntimeError:
        return False


@pytest.mark.parametrize(
    ("exercise_id", "fn"),
    [
        ("06-repeat-bytes", _repeat_bytes_on_meta),
        ("06-doubled-sum-peak", _doubled_sum_on_meta),
        ("06-adam-state-bytes", _adam_on_meta),
        ("05-can-expand", _can_expand_by_adding_on_meta),
    ],
)
def test_a_prediction_may_not_create_a_tensor_even_on_meta(exercise_id, fn):
    msg = rejected(exercise_id, fn, "predict_without_running")
    assert "on meta" in msg


# ----- the engine's own defects ------------------------------------------------------------------------------
ARGS = st.tuples(tensors(dims=(2, 2), side=(2, 3)))


def test_rules_must_view_and_must_copy_are_enforced_regression():
    # both used to be ignored by check(): only memory= was read
    r = check(lambda x: x.t().contiguous(), lambda x: x.t(), ARGS, rules=Rules(must_view=True))
    assert r.status == FAILED and "rule `must_view`" in r.reason
    r = check(lambda x: x, lambda x: x.clone(), ARGS, rules=Rules(must_copy=True))
    assert r.status == FAILED and "rule `must_copy`" in r.reason
    assert check(lambda x: x.t(), lambda x: x.t(), ARGS, rules=Rules(must_view=True)).passed
    with pytest.raises(ValueError, match=r"^check\(\): memory='copy' contradicts rules=Rules\(must_view=True\)"):
        check(lambda x: x, lambda x: x, ARGS, memory="copy", rules=Rules(must_view=True))


def test_check_called_with_an_exercise_id_points_to_check_exercise_regression():
    # was Python's bare "check() missing 1 required positional argument: 'inputs'"
    with pytest.raises(TypeError, match=r"^check\(\): the first argument is an exercise id \('05-batch-view'\).*"
                       r"check_exercise\('05-batch-view', my_fn\)"):  # fmt: skip
        check("05-batch-view", lambda s, n: s)
    with pytest.raises(TypeError, match=r"^check\(\): needs your function, a reference function and the inputs"):
        check(lambda x: x)


def test_a_wrong_signature_names_the_expected_one_instead_of_a_hint_regression():
    r = ex.check_exercise("05-batch-view", lambda sample: sample)
    assert r.status == FAILED and "Hint:" not in str(r)
    assert "takes (sample)" in r.reason and "batch_view(sample, n)" in r.reason, r.reason
    assert "(sample: torch.Tensor, n: int)" in r.reason, r.reason  # the stated signature, to copy


# ----- the loop witnesses against an exact oracle ------------------------------------------------------------
_STATEMENTS = {  # statement -> a loop in the source?
    "y = x + 1": False,
    "y = (x\n        + 1)": False,  # a multi-line expression
    "for _ in range(n): y = x": True,  # a loop on one line
    "for _ in range(n):\n        y = x": True,
    "while n < 0: n += 1": True,  # a loop that never runs is still a loop
    "y = [x for _ in range(n)]": True,
    "y = sum(x for _ in range(n))": True,
    "y = sum([x, n])": False,  # over a literal list: arithmetic
    "y = sum(range(n))": True,  # sum() over a sequence is a loop in C
    "y = list(map(abs, range(n)))": True,  # map runs its loop in C
}


@settings(max_examples=40, deadline=None, database=None)
@given(st.lists(st.sampled_from(sorted(_STATEMENTS)), min_size=1, max_size=3), st.integers(0, 2))
def test_the_static_loop_witness_matches_an_oracle(statements, n):
    # the dynamic witness (a line tracer, sys.settrace) is gone: the source and the operator count remain
    name = f"/tmp/viewlab_loop_oracle_{abs(hash(tuple(statements)))}.py"
    body = "".join(f"    {s}\n" for s in statements)
    source = f"def answer(x, n):\n    y = x\n{body}    return y\n"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    try:
        namespace: dict = {}
        exec(compile(source, name, "exec"), namespace)
        fn = namespace["answer"]
        in_source = any(_STATEMENTS[s] for s in statements)
        assert (static_loop(fn) is not None) == in_source, (statements, static_loop(fn))
        fn(1, n)  # the answer runs as written
    finally:
        del linecache.cache[name]
