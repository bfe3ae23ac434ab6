"""Exercise 10-saved-bytes: each plausible wrong count fails on the input that shows what it misses (a hand-made
example first, and the generator alone finds the same gap and shrinks to it), and the count agrees with notebook
10's section 1 on its MLP.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.course import test_exercise_edges as edges
from viewlab.course import exercises as ex
from viewlab.course.exercises import FAILED, check
from viewlab.course.exercises.bank import nb10_memory_tools as nb10

pytestmark = pytest.mark.nb10
E = ex.get("10-saved-bytes")
NEEDS_NO_GRAD = "fn(a, b): t1 = a.clone(); t2 = t1 * b; t3 = t2.relu(); return t3"

# wrong count -> (the example it fails on first, the edge of the generator where it fails: what it misses)
GAPS = {
    nb10._needing_grad_only: (NEEDS_NO_GRAD, "a saved tensor that needs no grad"),
    nb10._nothing_unless_all_need_grad: (NEEDS_NO_GRAD, None),
    nb10._per_tensor: (
        "fn(a, b): t1 = a.clone(); t2 = t1 * t1; t3 = t2.relu(); return t3",
        "a storage saved twice",
    ),
    nb10._with_results: ("fn(a, b): t1 = a.clone(); t2 = t1.sin(); return t2", "a result not saved"),
    nb10._made_by_fn_only: ("fn(a, b): t1 = a.sin(); t2 = t1.relu(); return t2", "a saved input"),
    nb10._elements_read: (
        "fn(a, b): t1 = a * b; t2 = t1.relu(); return t2",
        "a saved tensor that reads part of its storage",
    ),
    nb10._from_the_graph: (
        "fn(a, b): t1 = a.clone(); t2 = t1.relu(); t3 = t1.clone(); return t3",
        "a save whose value fn drops",
    ),
    nb10._per_tensor_object: (
        "fn(a, b): t1 = a.clone(); t2 = t1.view(-1); t3 = t2.sin(); t4 = t1.sin(); return t3, t4",
        "two tensors on one saved storage",
    ),
}
WRONG = [pytest.param(fn, id=fn.__name__) for fn in GAPS]


def test_every_wrong_count_of_the_exercise_has_its_gap_here():
    assert {fn for fn, _ in E.wrong} == set(GAPS)


@pytest.mark.parametrize("fn", WRONG)
def test_a_wrong_count_fails_first_on_the_example_that_shows_its_gap(fn):
    result = ex.check_exercise(E.id, fn)
    assert result.status == FAILED, str(result)
    assert repr(result.failing_input[0]) == GAPS[fn][0], str(result)
    assert f"arg 0: {GAPS[fn][0]}" in str(result)


@pytest.mark.parametrize("fn", WRONG)
def test_the_generator_alone_finds_the_gap_and_shrinks_to_it(fn):
    result = check(fn, E.reference, E.inputs())  # no hand-made examples
    assert result.status == FAILED, str(result)
    edge = GAPS[fn][1]
    args = result.failing_input
    if edge is None:  # 0 unless every input requires grad: an input without grad, and something saved
        assert not all(t.requires_grad for t in args[1:]) and E.reference(*args) > 0, str(result)
    else:
        assert edges.EDGES[E.id][edge](args), f"the smallest failing input is not at {edge!r}:\n{result}"


def test_the_count_agrees_with_notebook_10_on_its_mlp():
    # section 1: pack saw 4 tensors (348,160 B) on 3 storages: x, the ReLU's output (saved twice) and 2.weight
    torch.manual_seed(0)
    mlp, x = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)), torch.randn(64, 256)
    want = 64 * 256 * 4 + 64 * 512 * 4 + 512 * 10 * 4
    assert want == 217_088
    assert E.reference(mlp, x) == want
    for right in edges.RIGHT[E.id]:
        assert right(mlp, x) == want
    assert nb10._per_tensor(mlp, x) == 348_160  # the notebook's 4 saved tensors, the ReLU's output twice
    assert nb10._made_by_fn_only(mlp, x) == want - 64 * 256 * 4  # x left out; 2.weight is no argument, so in
    # under no_grad nothing is saved, and an input that requires grad adds the first weight (as its transpose)
    with torch.no_grad():
        assert E.reference(mlp, x) == 0
    assert E.reference(mlp, x.detach().requires_grad_(True)) == want + 256 * 512 * 4


@pytest.mark.parametrize("grads", [(True, False), (False, True), (True, True)])
def test_matmul_saves_each_operand_only_when_the_other_requires_grad(grads):
    """The statement's rule for matmul, v @ w.mT: w (as the transposed view) when v requires grad, v when w does."""
    v, w = torch.ones(2, 3, requires_grad=grads[0]), torch.ones(4, 3, requires_grad=grads[1])
    saved: list = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        v @ w.mT
    expected = ([w] if grads[0] else []) + ([v] if grads[1] else [])
    assert sorted(t.untyped_storage().data_ptr() for t in saved) == sorted(t.data_ptr() for t in expected)
    assert all(t.shape == (3, 4) for t in saved if t.data_ptr() == w.data_ptr())  # w.mT: a transposed view
