"""Reach of claims B01-B18: each verdict follows the evidence.

For every claim, either two real evidence runs on different inputs give different verdicts, or a
written reason says why the verdict cannot change -- a fact of PyTorch's API -- and a property test
checks that fact over generated inputs. Every branch of every judge is run here (the ones no real run
on this machine reaches, such as a timing that disagrees with itself, through facts written out).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from viewlab.course import article_helpers as ah
from viewlab.course.claims import b001_broadcasting as bb
from viewlab.course.claims import b001_debugging as bd
from viewlab.course.claims import b001_layers as bl
from viewlab.course.claims._evidence import OpNames
from viewlab.course.claims.article_code import ShapeBufferScale
from viewlab.course.claims.model import NOT_CHECKABLE, judge

FEW = settings(max_examples=25, deadline=None)
SHAPE = st.lists(st.integers(0, 3), max_size=3).map(tuple)


@st.composite
def expandable(draw) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(a, b) with a expandable to b: b's trailing dims, some of them set to 1."""
    target = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple))
    kept = target[len(target) - draw(st.integers(0, len(target))) :]
    ones = draw(st.lists(st.booleans(), min_size=len(kept), max_size=len(kept)))
    return tuple(1 if one else size for size, one in zip(kept, ones)), target


@st.composite
def broadcastable(draw) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(a, b) that broadcast together, in either order: one expandable to the other."""
    a, target = draw(expandable())
    return (a, target) if draw(st.booleans()) else (target, a)


def verdict(claim, facts) -> str:
    return judge(claim, facts)[0]


def with_facts(claim, real: dict, **override) -> str:
    return verdict(claim, {**real, **override})


# ---- B01: reason -- broadcasting allocates the result only, never a copy of an input -----------------------------------
@FEW
@given(broadcastable())
def test_b01_broadcasting_allocates_only_the_result(pair):
    facts = bb._ev_broadcast_no_copy(*pair)
    assert facts["allocated"] == facts["result_bytes"], facts
    # an empty result holds no byte a copy could show: nothing was measured
    assert verdict(bb.B01, facts) == ("true" if math.prod(facts["result_shape"]) else "not checkable here")


def test_b01_judge_reads_the_bytes():
    real = bb._ev_broadcast_no_copy((2, 1, 3), (4, 1))
    assert real["result_shape"] == (2, 4, 3) and real["result_bytes"] == 96
    assert with_facts(bb.B01, real, allocated=real["result_bytes"] * 2) == "false"


# ---- B02: reason -- the three rules are PyTorch's own, for any pair of shapes ------------------------------------------
@FEW
@given(SHAPE, SHAPE)
def test_b02_three_rules_agree_with_torch(a, b):
    facts = bb._ev_three_rules(pairs=[(a, b)])
    assert facts["disagreements"] == 0 and verdict(bb.B02, facts) == "true"


def test_b02_judge_reads_the_disagreements():
    real = bb._ev_three_rules(pairs=[((2,), (3,)), ((1,), (3,))])
    assert real["pairs"] == 2 and real["disagreements"] == 0
    assert with_facts(bb.B02, real, disagreements=1, first=((2,), (3,))) == "false"


# ---- B03: two real runs ------------------------------------------------------------------------------------------------
def test_b03_verdict_follows_the_shapes():
    assert verdict(bb.B03, bb._ev_example_shape()) == "true"
    assert verdict(bb.B03, bb._ev_example_shape((3, 1), (3, 1))) == "false"


# ---- B04: reason -- broadcasting dispatches no expand, whatever the shapes ---------------------------------------------
@FEW
@given(broadcastable())
def test_b04_broadcasting_runs_no_expand(pair):
    a, b = (torch.randn(s) for s in pair)
    from viewlab.memory import measure

    with measure(log_ops=True) as m:
        a * b
    assert not [op.name for op in m.ops if "expand" in op.name]


def test_b04_two_real_runs_fail_for_different_reasons():
    mechanism = bb._ev_weights_times_features()
    assert mechanism["rows_scaled"] and mechanism["expand_as_gives_the_same"]
    assert mechanism["ops_while_broadcasting"] == ["aten.mul.Tensor"]
    why = judge(bb.B04, mechanism)
    assert why[0] == "misleading" and "no hero behind the scenes" in why[1] and mechanism["expand_as_bytes"] == 0
    assert "matmul here" in why[1] and "masked_fill too" in why[1]
    # broadcasting inside other operators: matmul dispatches aten.expand for its batch dimensions
    assert "expand" in mechanism["other_operators_dispatch"]["matmul (2, 1, 3, 4) @ (5, 4, 6)"]
    mismatch = bb._ev_weights_times_features(w_shape=(2, 3))
    assert mismatch["error"].startswith("RuntimeError") and not mismatch["rows_scaled"]
    assert judge(bb.B04, mismatch)[0] == "false" and "does not scale" in judge(bb.B04, mismatch)[1]
    assert with_facts(bb.B04, mechanism, ops_while_broadcasting=["aten.expand.default", "aten.mul.Tensor"]) == "true"
    # expand_as that did not give the same values, or cost bytes, would make the "tool" false
    assert with_facts(bb.B04, mechanism, expand_as_gives_the_same=False) == "false"
    assert with_facts(bb.B04, mechanism, expand_as_bytes=56) == "false"


def test_b04_masked_fill_expands_its_mask_inside_its_kernel():
    """The course's counter-claim must not over-reach: masked_fill's broadcasting does run aten::expand, inside
    its kernel. A dispatch mode sees only the operator called from Python; the profiler sees inside it."""
    from torch.profiler import profile

    values, mask = torch.randn(2, 7), torch.zeros(1, 7, dtype=torch.bool)
    with OpNames() as seen:
        values.masked_fill(mask, 0.0)
    assert seen.names == ["masked_fill"]
    with profile() as prof:
        values.masked_fill(mask, 0.0)
    names = [e.name for e in prof.events()]
    assert names.index("aten::expand") > names.index("aten::masked_fill")


# ---- B05, B06: reason -- expand_as is expand(b.shape): a view, no allocation -------------------------------------------
@FEW
@given(expandable())
def test_b05_b06_expand_as_is_a_free_view(pair):
    expected = "true" if math.prod(pair[1]) else "not checkable here"  # an empty view: no byte to share or compare
    assert verdict(bb.B05, bb._ev_expand_as_view(*pair)) == expected
    assert verdict(bb.B06, bb._ev_expand_equals_expand_as(*pair)) == expected


def test_b05_b06_judges_read_the_facts():
    assert with_facts(bb.B05, bb._ev_expand_as_view(), bytes=48, shares=False) == "false"
    assert with_facts(bb.B06, bb._ev_expand_equals_expand_as(), equal=False) == "false"


# ---- B07: reason -- the module's expand_as is a view and broadcasting weights every position --------------------------
@settings(max_examples=8, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 4), st.integers(0, 9))
def test_b07_channel_weights_cost_nothing(reduction, hidden, batch, side, seed):
    channels = max(2, reduction * hidden)  # at least one hidden unit: SqueezeExcitation refuses fewer
    facts = bl._ev_channel_attention(channels=channels, reduction=reduction, batch=batch, side=side, seed=seed)
    assert facts["expand_bytes"] == 0 and facts["every_position_weighted"] and facts["equal_to_broadcasting"]
    assert verdict(bl.B07, facts) == "true"


def test_b07_judge_reads_the_facts():
    real = bl._ev_channel_attention(channels=4, reduction=2, side=2)
    assert "redundant" not in judge(bl.B07, {**real, "equal_to_broadcasting": False})[1]
    assert with_facts(bl.B07, real, expand_bytes=64) == "false"


# ---- B08: two real runs ------------------------------------------------------------------------------------------------
def test_b08_verdict_follows_the_shapes():
    assert verdict(bl.B08, bl._ev_no_singleton()) == "true"
    assert verdict(bl.B08, bl._ev_no_singleton(a_shape=(3, 1))) == "false"


# ---- B09: reason -- an expand_as view shares its source's memory, so a write always reaches it -----------------------
@FEW
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=4).map(tuple), st.integers(1, 5), st.floats(6, 9))
def test_b09_writes_reach_the_source(column, width, value):
    facts = bl._ev_write_through(column=column, width=width, value=value)
    assert facts["a_after"][0] == pytest.approx(value) and verdict(bl.B09, facts) == "true"


def test_b09_judge_reads_the_facts():
    assert with_facts(bl.B09, bl._ev_write_through(), a_after=[1.0, 2.0, 3.0]) == "false"


# ---- B10: reason -- the gradient of an expand is the gradient summed back to the source's shape -----------------------
@FEW
@given(expandable(), st.integers(0, 9))
def test_b10_gradient_is_summed_back(pair, seed):
    facts = bl._ev_gradient(*pair, seed=seed)
    expected = "true" if math.prod(pair[1]) else "not checkable here"  # an empty gradient equals any empty sum
    assert facts["grad_shape"] == pair[0] and verdict(bl.B10, facts) == expected


def test_b10_judge_reads_the_facts():
    assert with_facts(bl.B10, bl._ev_gradient(), grad_is_row_sum=False) == "false"


# ---- B11: two real runs; the true branch would need an expand that allocates (see B05's property) ---------------------
def test_b11_verdict_follows_what_the_model_goes_through():
    kept = bl._ev_cache()  # the article's case: nothing happens to the model after __init__
    assert kept["cached_follows_parameter"] and verdict(bl.B11, kept) == "misleading"
    assert kept["stale_beside_after"] == ["double", "half"] and "module.double()" in judge(bl.B11, kept)[1]
    assert kept["deepcopy_refused"] and "copy.deepcopy(module) raises" in judge(bl.B11, kept)[1]
    no_hazard = {**bl._ev_cache(beside=()), "deepcopy_refused": False}
    assert "hazard" not in judge(bl.B11, no_hazard)[1] and "stale" not in judge(bl.B11, bl._ev_cache(beside=()))[1]
    stale = bl._ev_cache(convert="double")
    assert stale["expand_bytes"] == 0 and not stale["cached_follows_parameter"]
    assert verdict(bl.B11, stale) == "false"
    half = bl._ev_cache(param_shape=(1, 4), target=(3, 4), convert="half")
    assert verdict(bl.B11, half) == "false" and "half()" in judge(bl.B11, half)[1]
    assert with_facts(bl.B11, kept, expand_bytes=4096) == "true"


# ---- B12: reason -- the buffers never change the output and expand_as allocates nothing, so only speed could count ---
@FEW
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3))
def test_b12_model_equals_plain_broadcasting(channels, batch, side):
    shape = (batch, channels, side, side)
    model = ShapeBufferScale(channels, [shape, (batch + 1, channels, side, side)])
    x = torch.randn(shape)
    with torch.no_grad():
        assert torch.equal(model(x), x * model.scale)
        other = torch.randn(batch, channels, side + 1, side + 1)  # no buffer has this shape: stretched onto x
        assert torch.equal(model(other), other * model.scale)


def test_b12_buffer_bytes_follow_the_common_shapes():
    small = bl._ev_shape_buffers(channels=4, common=((2, 4, 8, 8),), x_shape=(2, 4, 3, 3))
    assert small["buffer_bytes"] == 2 * 4 * 8 * 8 * 4 and small["same_output_as_broadcasting"]
    none = bl._ev_shape_buffers(channels=4, common=(), x_shape=(2, 4, 3, 3))
    assert none["buffer_bytes"] == 0 and none["same_output_as_broadcasting"]
    assert small["model_ops"] == ["expand", "mul"] and small["plain_ops"] == ["mul"]
    assert verdict(bl.B12, small) == "false"  # the same kernels: the timings are shown, never judged
    assert verdict(bl.B12, none) == NOT_CHECKABLE  # no buffer: not the article's model at all
    for rounds in ([3.0, 3.0], [0.3, 0.3], [0.5, 2.0]):  # with the same work, no timing moves the verdict
        assert with_facts(bl.B12, small, plain_over_model_by_round=rounds) == "false"
    # only where the work differed would the timing decide
    times = {"model_median_s": 1e-4, "model_iqr_s": 1e-6, "plain_median_s": 1e-4, "plain_iqr_s": 1e-6}
    differs = {**times, "plain_ops": ["clone", "mul"]}
    assert with_facts(bl.B12, small, **differs, plain_over_model_by_round=[1.0, 1.0]) == "false"
    assert with_facts(bl.B12, small, **differs, buffer_bytes=0, plain_over_model_by_round=[0.5, 2.0]) == NOT_CHECKABLE
    assert with_facts(bl.B12, small, **differs, plain_over_model_by_round=[3.0, 3.0]) == "true"
    assert with_facts(bl.B12, small, same_output_as_broadcasting=False) == NOT_CHECKABLE


# ---- B13: two real runs ------------------------------------------------------------------------------------------------
def test_b13_verdict_follows_the_mask_layout():
    article = bd._ev_masked_loss()
    assert article["error_when_seq_ne_vocab"] and verdict(bd.B13, article) == "false"
    fixed = bd._ev_masked_loss(mask_layout="batch, seq, 1")
    assert fixed["error_when_seq_ne_vocab"] is None and verdict(bd.B13, fixed) == "true"
    other = bd._ev_masked_loss(seq=2, vocab=7, seed=3)
    assert verdict(bd.B13, other) == "false"


# ---- B14, B18: two real runs -------------------------------------------------------------------------------------------
def test_b14_b18_verdicts_follow_the_shapes_tried():
    every = bd._ev_checker()
    assert every["wrong"] > 0 and every["all_wrong_have_more_dims"] and verdict(bd.B14, every) == "false"
    same_ndim = bd._ev_checker(ndims=(2,))
    assert same_ndim["wrong"] == 0 and verdict(bd.B14, same_ndim) == "true"
    assert ", every time" not in judge(bd.B14, {**every, "all_wrong_have_more_dims": False})[1]
    assert verdict(bd.B18, bd._ev_guarded()) == "misleading"
    assert verdict(bd.B18, bd._ev_guarded(ndims=(2,))) == "true"
    assert with_facts(bd.B18, bd._ev_guarded(), mismatches_caught_by_assert=0) == "false"


@FEW
@given(SHAPE, SHAPE)
def test_b14_checker_errs_only_when_a_has_more_dims(a, b):
    if len(a) <= len(b):
        assert ah.article_check_expandable(a, b) == ah.torch_can_expand(a, b)


# ---- B15: reason -- a benchmark.Timer measurement has no memory field, whatever it times -------------------------------
@settings(max_examples=5, deadline=None)
@given(expandable())
def test_b15_timer_reports_no_memory(pair):
    from torch.utils import benchmark

    small, big = torch.randn(pair[0]), torch.randn(pair[1])
    measured = benchmark.Timer("small.expand_as(big)", globals={"small": small, "big": big}).timeit(3)
    assert not [n for n in dir(measured) if "mem" in n.lower() or "byte" in n.lower()]


def test_b15_judge_reads_the_facts():
    real = bd._ev_timer_memory(a_shape=(1, 64), b_shape=(64, 64))
    assert real["memory_fields"] == [] and real["expand_as_bytes"] == 0
    assert real["same_values"] and verdict(bd.B15, real) == "misleading"
    assert with_facts(bd.B15, real, memory_fields=["peak_memory"]) == "true"
    for rounds in ([80.0, 90.0], [1.0, 1.0], [0.9, 80.0], [0.5, 0.4]):  # the times are shown, never judged
        assert with_facts(bd.B15, real, copy_over_view_by_round=rounds) == "misleading"
    assert with_facts(bd.B15, real, expand_as_bytes=4096) == "false"
    assert with_facts(bd.B15, real, same_values=False) == NOT_CHECKABLE


# ---- B16: reason -- expand accepts any strided input; contiguity never matters to it ------------------------------------
@FEW
@given(st.integers(2, 4), st.integers(2, 5), st.integers(1, 5))
def test_b16_sliced_columns_expand(rows, source_cols, width):
    facts = bd._ev_noncontiguous(rows=rows, source_cols=source_cols, width=width)
    assert facts["error"] is None and facts["still_a_view"] and verdict(bd.B16, facts) == "false"


def test_b16_a_contiguous_column_tries_nothing():
    """A column of 0 or 1 rows is contiguous: the claim is about non-contiguous tensors, so nothing was tried."""
    for rows in (0, 1):
        assert verdict(bd.B16, bd._ev_noncontiguous(rows=rows)) == "not checkable here"


def test_b16_judge_reads_the_facts():
    assert with_facts(bd.B16, bd._ev_noncontiguous(), error="RuntimeError: x", input_contiguous=False) == "true"


# ---- B17: reason -- detach() returns a tensor on the same storage, always ---------------------------------------------
@FEW
@given(st.integers(1, 4), st.integers(1, 5))
def test_b17_detach_shares_and_clone_copies(rows, width):
    facts = bd._ev_detach_or_clone(rows=rows, width=width)
    assert facts["detach_shares"] and not facts["clone_shares"] and verdict(bd.B17, facts) == "false"


def test_b17_judge_reads_the_facts():
    real = bd._ev_detach_or_clone()
    copies = {"detach_shares": False, "detach_write_reached": False}
    assert with_facts(bd.B17, real, **copies) == "true"
    assert with_facts(bd.B17, real, **copies, clone_shares=True) == "false"


@pytest.mark.parametrize("claim", bb.CLAIMS + bl.CLAIMS + bd.CLAIMS, ids=lambda c: c.id)
def test_every_evidence_takes_its_inputs_as_keywords_with_defaults(claim):
    import inspect

    params = inspect.signature(claim.evidence).parameters.values()
    assert params and all(p.default is not inspect.Parameter.empty for p in params), claim.id


def test_notebook_07_asserts_facts_never_verdicts():
    """07 shows the registry's verdict and asserts the facts behind it: a changed verdict changes the output."""
    import json
    import re

    from tests.conftest import ROOT

    cells = json.loads((ROOT / "notebooks" / "07_the_two_articles.ipynb").read_text(encoding="utf-8"))["cells"]
    asserts = [
        line
        for c in cells
        if c["cell_type"] == "code"
        for line in "".join(c["source"]).splitlines()
        if line.lstrip().startswith("assert")
    ]
    pinned = [a for a in asserts if re.search(r"""\[["']verdict["']\]\s*==\s*["']""", a)]
    assert asserts and not pinned, pinned


# ---- B19: real runs on the article's own pairs ---------------------------------------------------------------------------
def test_b19_verdict_follows_the_pairs():
    both = bb._ev_who_is_stretched()  # the article's two examples: one counterexample decides a general statement
    assert (
        verdict(bb.B19, both) == "false"
        and "of the pairs tried, it holds for (2, 1) with (2, 7)" in judge(bb.B19, both)[1]
    )
    assert verdict(bb.B19, bb._ev_who_is_stretched(pairs=(((2, 1), (2, 7)),))) == "true"
    assert verdict(bb.B19, bb._ev_who_is_stretched(pairs=(((3, 1), (1, 4)),))) == "false"


# ---- B20: reason -- autograd sums a gradient handed back in the expanded shape to the input's shape -------------------
@FEW
@given(expandable())
def test_b20_autograd_reduces_an_expanded_gradient(pair):
    facts = bl._ev_custom_gradient(shape=pair[0], size=pair[1])
    if facts["elements"]:
        assert facts["autograd_summed_it"] and verdict(bl.B20, facts) == "misleading"
    else:
        assert verdict(bl.B20, facts) == NOT_CHECKABLE


def test_b04_matmul_copies_only_where_it_flattens_batch_dims():
    cases = bb._ev_weights_times_features()["matmul_cases"]
    assert cases["(2, 1, 3, 4) @ (5, 4, 6)"]["clone_bytes"] == [480, 960]
    assert cases["(1, 3, 4) @ (5, 4, 6)"]["clone_bytes"] == [] and "expand" in cases["(1, 3, 4) @ (5, 4, 6)"]["ops"]
    assert "expand" not in cases["(5, 3, 4) @ (1, 4, 6)"]["ops"]
    assert all(c["new_bytes"] == c["result_bytes"] for k, c in cases.items() if not c["clone_bytes"])
    # evidence beside the verdict (notebook 07's text says what the cases show): the reason keeps to expand_as
    why = judge(bb.B04, bb._ev_weights_times_features())[1]
    assert "@" not in why and "matmul here" in why
