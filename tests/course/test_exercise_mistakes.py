"""Honest mistakes the in-kernel checker catches with public mechanisms only (torch's modes, the answer's
source), beyond tests/course/test_exercise_cheats.py; right answers that look like mistakes still pass; and the
checker's own guarantees: the same examples on every run, no knob that weakens a course check, a loop probe
that judges what it sees.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
import torch

from viewlab.course import exercises as ex
from viewlab.course.exercises import FAILED, PASSED

REFERENCE_PAIRS = ex.get("02-pairwise-diff").reference  # fetched in an earlier cell, as a learner might


def _fails(exercise_id: str, fn, starts: str) -> str:
    r = ex.check_exercise(exercise_id, fn)
    assert r.status == FAILED and r.reason.startswith(starts), str(r)
    return r.reason


def _passes(exercise_id: str, fn) -> None:
    r = ex.check_exercise(exercise_id, fn)
    assert r.status == PASSED, str(r)


# ----- data out of torch, numpy by name ---------------------------------------------------------------------
def _pairs_through_array(p):  # the array interface numpy uses to read a tensor, called by hand
    a = p.__array__()
    return torch.from_numpy(a[:, None, :] - a[None, :, :])


def _pairs_through_asarray(p):
    a = np.asarray(p)
    return torch.from_numpy(a[:, None, :] - a[None, :, :])


def _heads_after_a_list(x, h):  # the right view, after copying the data out to a Python list
    _ = x.tolist()
    b, length, d = x.shape
    return x.view(b, length, h, d // h).transpose(1, 2)


def test_data_leaving_torch_through_array_is_seen():
    assert "called Tensor.__array__" in _fails("02-pairwise-diff", _pairs_through_array, "breaks rule `torch_only`")
    assert "called numpy.asarray" in _fails("02-pairwise-diff", _pairs_through_asarray, "breaks rule `torch_only`")


def test_a_view_exercise_answered_through_a_list_breaks_must_view():
    msg = _fails("04-split-heads", _heads_after_a_list, "breaks rule `must_view`")
    assert "called Tensor.tolist" in msg and "copies the data out of torch" in msg


# ----- names the operator count alone would miss ----------------------------------------------------------
def _causal_by_inplace_tril_op(q, k, w):
    return torch.ops.aten.tril_(torch.ones(q, k, dtype=torch.bool))


def test_the_in_place_variant_of_a_forbidden_operator_is_the_same_family():
    msg = _fails("04-causal-mask", _causal_by_inplace_tril_op, "breaks rule `forbid tril`")
    assert "aten.tril_" in msg


def _pairs_by_the_reference(p):
    return REFERENCE_PAIRS(p)


def test_the_exercises_own_reference_may_not_do_the_work():
    msg = _fails("02-pairwise-diff", _pairs_by_the_reference, "breaks rule `no_viewlab`")
    assert "the exercise's own code" in msg and "_pairwise" in msg, msg


# ----- loops run from C -------------------------------------------------------------------------------------
def _count_by_counter(labels, c):
    rows = [collections.Counter(row) for row in labels.tolist()]
    return torch.tensor([[float(counts[k]) for k in range(c)] for counts in rows]).view(len(rows), c)


def _count_by_sorted_key(labels, c):
    order = sorted(range(labels.shape[1]), key=lambda i: int(labels[0, i]) if len(labels) else 0)
    picked = labels[:, torch.tensor(order, dtype=torch.long)]
    return torch.zeros(labels.shape[0], c).scatter_add_(1, picked, torch.ones(picked.shape))


def _count_by_iter_sentinel(labels, c):
    rest = [(b, x) for b, row in enumerate(labels.tolist()) for x in row]
    counts = torch.zeros(labels.shape[0], c)
    for b, label in iter(lambda: rest.pop() if rest else None, None):
        counts[b, label] += 1
    return counts


@pytest.mark.parametrize(
    ("fn", "said"),
    [(_count_by_counter, "Counter"), (_count_by_sorted_key, "sorted()"), (_count_by_iter_sentinel, "")],
)
def test_loops_run_from_c_are_seen_in_the_source(fn, said):
    msg = _fails("05-count-labels", fn, "breaks rule `no_python_loops`")
    assert said in msg


def test_arithmetic_on_sizes_is_not_a_loop():
    # math.prod over a shape used to be reported as "prod(), a Python loop in C over a sequence"
    _passes(
        "05-count-labels",
        lambda labels, c: torch.zeros(len(labels), c).scatter_add_(
            1, labels, torch.ones(math.prod(labels.shape)).view(labels.shape)
        ),
    )
    _passes("02-pairwise-diff", lambda p: (p[:, None] - p[None])[..., : sum((p.shape[1], 0))])


# ----- the loop probe judges what it sees ------------------------------------------------------------------
def _pairs_that_raise_on_the_probe(p):  # the strategy draws at most 5 points; the probe's second size is 6
    if p.shape[0] == 6:
        raise ValueError("too many points")
    return p[:, None] - p[None]


def test_a_raise_on_a_probe_input_the_reference_answers_is_a_failure():
    msg = _fails("02-pairwise-diff", _pairs_that_raise_on_the_probe, "your function raised ValueError")
    assert "too many points" in msg


# ----- the check's own guarantees ----------------------------------------------------------------------------
def test_check_exercise_draws_the_same_examples_every_run():
    def recording(seen):
        def flatten_any(x):
            seen.append((tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.tolist()))
            return x.reshape(-1)

        return flatten_any

    first, second = [], []
    assert ex.check_exercise("05-flatten-any", recording(first)).passed
    assert ex.check_exercise("05-flatten-any", recording(second)).passed
    assert first == second and len(first) > 10


def test_max_examples_cannot_weaken_a_course_check():
    with pytest.raises(ValueError, match=r"^check_exercise\(\): max_examples=1 would try fewer inputs"):
        ex.check_exercise("01-odd-positions", lambda x: x[1::2], max_examples=1)
    assert ex.check_exercise("01-odd-positions", lambda x: x[1::2], max_examples=ex.engine.MIN_EXERCISE_EXAMPLES)


# ----- the seam: what one run did, as plain data, judged with the kernel's words ---------------------------
def test_a_run_recorded_as_plain_data_is_judged_with_the_same_message():
    import json

    from viewlab.course.exercises.messages import judge_before
    from viewlab.course.exercises.recorder import Seen
    from viewlab.course.exercises.watch import Watch

    e = ex.get("02-pairwise-diff")
    p = torch.arange(6.0).view(3, 2)
    with Watch(e.rules, e.memory, (p,)) as w:
        got = _pairs_by_np_tile(p)
    sent = json.dumps(w.seen(_pairs_by_np_tile, got).to_dict())  # what another process would send back
    in_parent = judge_before(e.rules, Seen.from_dict(json.loads(sent)), (p,))
    assert in_parent == ex.check_exercise("02-pairwise-diff", _pairs_by_np_tile).reason
    assert in_parent.startswith("breaks rule `forbid tile`: your function called numpy.tile")


def _pairs_by_np_tile(p):
    a = p.numpy()
    n = a.shape[0]
    return torch.from_numpy(np.tile(a[:, None], (1, n, 1)) - np.tile(a[None], (n, 1, 1)))


# ----- 04-masked-token-mean: broadcasting, not gathering (review T-2) ----------------------------------------
@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (lambda loss, mask: loss[mask].mean(), "aten.index.Tensor"),
        (lambda loss, mask: loss.masked_select(mask[..., None]).mean(), "aten.masked_select"),
        (lambda loss, mask: loss[mask.nonzero(as_tuple=True)].mean(), "aten.nonzero"),
        (lambda loss, mask: loss.flatten(0, 1).index_select(0, mask.flatten().nonzero()[:, 0]).mean(), "aten.nonzero"),
    ],
    ids=["bool-index", "masked_select", "nonzero-index", "index_select"],
)
def test_gathering_the_real_tokens_is_refused_with_the_operator_named(fn, op):
    msg = _fails("04-masked-token-mean", fn, "breaks rule `forbid gather`")
    assert f"your function ran {op}" in msg and "each copies the entries it picks" in msg, msg
    assert "size-1 dim" in msg and "instead" in msg, msg


def test_weighting_by_a_broadcast_mask_passes():
    _passes("04-masked-token-mean", lambda loss, mask: (loss * mask[..., None]).sum() / (mask.sum() * loss.shape[-1]))
    _passes("04-masked-token-mean", lambda loss, m: torch.where(m[..., None], loss, 0.0).mean() * m.numel() / m.sum())


# ----- a byte limit broken: the operators that made storage are named (review round 18, 05) ------------------
def test_an_out_of_place_scatter_add_over_the_byte_limit_names_each_operator_that_made_storage():
    def counts(labels, num_classes):  # right values, but zeros, ones and the out-of-place result all allocate
        return torch.zeros(labels.shape[0], num_classes).scatter_add(1, labels, torch.ones(labels.shape))

    msg = _fails("05-count-labels", counts, "breaks rule `max_new_bytes`")
    made = msg.split("new storage was made by ")[1].split(". ")[0]
    assert [name.split(" (")[0] for name in made.split(", ")] == [
        "aten.zeros.default",
        "aten.ones.default",
        "aten.scatter_add.default",
    ], msg


def test_the_operators_that_made_storage_survive_the_plain_data_record():
    import json

    from viewlab.course.exercises.recorder import Seen

    seen = Seen(peak_bytes=96, allocations=[("aten.zeros.default", 32), ("aten.ones.default", 64)])
    back = Seen.from_dict(json.loads(json.dumps(seen.to_dict())))
    assert back.allocations == [("aten.zeros.default", 32), ("aten.ones.default", 64)]


# ----- matmul's own expand is torch's, not the answer's (review round 19, 04) --------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda loss, mask: (mask.float().unsqueeze(1) @ loss).sum() / (mask.sum() * loss.shape[-1]),
        lambda loss, mask: torch.matmul(mask.float().unsqueeze(1), loss).sum() / (mask.sum() * loss.shape[-1]),
    ],
    ids=["@", "torch.matmul"],
)
def test_a_matmul_answer_is_not_charged_with_the_expand_matmul_runs_itself(fn):
    _passes("04-masked-token-mean", fn)


def test_an_expand_the_answer_runs_itself_is_still_refused():
    msg = _fails(
        "04-masked-token-mean",
        lambda loss, mask: (loss * mask[..., None].expand_as(loss)).sum() / (mask.sum() * loss.shape[-1]),
        "breaks rule `forbid expand`",
    )
    assert "inside Tensor.expand_as" in msg, msg


# ----- the advice after a forbidden family never points at another family the rules forbid (review round 23, 07) ----
def test_a_forbidden_repeat_is_not_answered_with_an_expand_the_exercise_also_forbids():
    msg = _fails(
        "07-mask-tokens",
        lambda loss, keep: loss * keep[..., None].repeat(1, 1, loss.shape[-1]),
        "breaks rule `forbid repeat`",
    )
    assert "expand" not in msg.split("instead, ")[1].split("\n")[0] and "size-1 dim" in msg, msg


def test_a_forbidden_expand_gets_advice_for_a_tensor_or_for_a_prediction():
    built = _fails(
        "07-mask-tokens", lambda loss, keep: loss * keep[..., None].expand_as(loss), "breaks rule `forbid expand`"
    )
    assert "broadcast a size-1 dim" in built and "from the sizes alone" not in built, built
    predicted = _fails("05-can-expand", lambda a, b: (torch.zeros(a).expand(b), True)[1], "breaks rule `forbid expand`")
    assert "work it out from the sizes alone" in predicted, predicted
