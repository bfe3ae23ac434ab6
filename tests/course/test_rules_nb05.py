"""Notebook 05 (pitfalls): each general sentence of its prose, checked against torch over generated inputs.

The notebook's cells show one example per pitfall; these property tests try the sentence at its edges (the
learner inputs of tests/course/learner_inputs.py: sizes 0 and 1, 0-d, offsets, views of views, transposed,
expanded, unfold windows, channels_last, requires_grad, ten dtypes; duplicate indices), so a sentence that only
holds for the author's example fails here.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st
from torch import nn

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import learner_tensors, numpy_arrays
from viewlab import shares_storage, watch_broadcasts
from viewlab.layout import storage_indices

pytestmark = pytest.mark.nb05

OVERLAP = "more than one element of the written-to tensor refers to a single memory location"
sizes = st.integers(0, 4)
shapes = st.lists(sizes, min_size=0, max_size=3).map(tuple)


def strided(min_dims: int = 0) -> st.SearchStrategy[torch.Tensor]:
    """Tensors as a learner meets them (the shared strategy, tests/course/learner_inputs.py): storage offsets,
    views of views, transposes, permutes, expands, unfold windows, channels_last, 0-d, empty, size-1 dims,
    leaves that require grad and their views, arbitrary as_strided layouts, ten dtypes (bfloat16 and bool
    among them)."""
    return learner_tensors(dims=(min_dims, 4), side=(0, 4))


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage()._cdata == b.untyped_storage()._cdata


def _raises(fn) -> bool:
    try:
        fn()
    except RuntimeError:
        return True
    return False


@pytest.mark.rule("05", "`view` never moves data, so it needs one stride per new dimension")
@RULE_SETTINGS
@given(strided())
def test_view_flattens_exactly_when_one_step_walks_the_storage(x):
    walk = storage_indices(x).flatten().tolist()
    one_step = len({b - a for a, b in zip(walk, walk[1:])}) <= 1
    assert _raises(lambda: x.view(-1)) != one_step, (x.shape, x.stride(), walk)


@pytest.mark.rule("05", "`reshape` (or `flatten`), which views when it can and copies when it must")
@RULE_SETTINGS
@given(strided())
def test_reshape_views_exactly_when_view_works(x):
    can_view = not _raises(lambda: x.view(-1))
    for flat in (x.reshape(-1), x.flatten()):
        assert torch.equal(flat, torch.tensor(x.tolist()).reshape(-1))
        assert _same_storage(flat, x) == can_view, (x.shape, x.stride())


# P2: the overlap check. A write of a *basic* index region (ints, slices) and in-place arithmetic are refused
# exactly when the region has a stride-0 dimension of size > 1; a Python number through fill_/zero_ is never
# refused; advanced-index writes (mask, index lists, index_put_, masked_fill_, index_fill_) are never refused;
# the other indexed writes (index_add_, index_copy_, scatter_, scatter_add_, put_, masked_scatter_) refuse a
# target with a stride-0 dimension of size > 1 whatever the indices.
@st.composite
def expanded_and_region(draw):
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(0, 4))
    base = torch.zeros(rows, 1)
    e = base.expand(rows, cols)
    r0 = draw(st.one_of(st.integers(0, rows - 1), st.tuples(st.integers(0, rows), st.integers(1, 2))))
    c0 = draw(
        st.one_of(st.integers(0, cols - 1), st.tuples(st.integers(0, cols), st.integers(1, 2)))
        if cols
        else st.tuples(st.just(0), st.just(1))
    )
    index = tuple(i if isinstance(i, int) else slice(i[0], None, i[1]) for i in (r0, c0))
    return base, e, index, draw(st.floats(-3, 3))


def _checked_write_raises(region: torch.Tensor) -> bool:
    # torch's check (has_internal_overlap) finds only stride-0 overlap, and none in an empty region
    return region.numel() > 0 and any(s == 0 and n > 1 for s, n in zip(region.stride(), region.shape))


CHECKED_WRITES_RAISE_ON_STRIDE_0 = (  # one sentence bound to two tests
    "On CPU, basic-index assignment (ints, slices) and in-place arithmetic such as `add_` raise when the "
    "region they write has a stride-0 dimension of size > 1"
)


@pytest.mark.rule(
    "05", "Whether a write is refused depends on the operator and on the region written, never on the values."
)
@pytest.mark.rule(
    "05",
    CHECKED_WRITES_RAISE_ON_STRIDE_0,
)
@pytest.mark.rule(
    "05",
    "`fill_` with a Python number (`fill_(7)`) and `zero_()` skip the check and write every shared element; `fill_`"
    " with a 0-d tensor raises (on CPU).",
)
@RULE_SETTINGS
@given(expanded_and_region())
def test_an_expanded_write_is_refused_by_operator_and_region(case):
    base, e, index, value = case
    region = e[index]
    overlaps = _checked_write_raises(region)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # advanced-index writes into an expanded tensor warn (deprecated)
        refused = {
            "e[index] = v": _raises(lambda: e.__setitem__(index, value)),
            "region.add_(v)": _raises(lambda: region.add_(value)),
            "region.mul_(v)": _raises(lambda: region.mul_(value)),
            "region.copy_(...)": _raises(lambda: region.copy_(torch.full(region.shape, value))),
            "region.fill_(tensor)": _raises(lambda: region.fill_(torch.tensor(value))),
            "region.fill_(v)": _raises(lambda: region.fill_(value)),
            "region.zero_()": _raises(lambda: region.zero_()),
            "e[mask] = v": _raises(lambda: e.__setitem__(torch.ones(e.shape, dtype=torch.bool), value)),
            "e[rows, cols] = v": _raises(lambda: e.__setitem__(([0] * 2, [0] * 2), value) if e.shape[1] else None),
            "masked_fill_": _raises(lambda: e.masked_fill_(torch.ones(e.shape, dtype=torch.bool), value)),
            "index_fill_": _raises(lambda: e.index_fill_(1, torch.arange(e.shape[1]), value)),
        }
    checked = {"e[index] = v", "region.add_(v)", "region.mul_(v)", "region.copy_(...)", "region.fill_(tensor)"}
    assert refused == {name: overlaps and name in checked for name in refused}, (e.shape, index, region.stride())


def _storage_elements(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of t as a 1-D tensor of t's dtype (a view: it sees every write)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,))


@pytest.mark.rule(
    "05",
    CHECKED_WRITES_RAISE_ON_STRIDE_0,
)
@RULE_SETTINGS
@given(learner_tensors(dims=(0, 4), side=(0, 4), dtypes=(torch.float32, torch.float64, torch.int64, torch.complex64)))
def test_in_place_writes_refuse_stride_0_only_and_other_overlap_is_written_once_per_index(x):
    t = x.detach()  # the same memory; a leaf that requires grad refuses in-place writes for another reason
    storage = _storage_elements(t)
    before = storage.clone()
    refused = _raises(lambda: t.add_(1))
    assert refused == _checked_write_raises(t), (t.shape, t.stride())
    reads = torch.bincount(storage_indices(t).flatten(), minlength=len(storage))  # indices naming each element
    assert torch.equal(storage, before if refused else before + reads.to(t.dtype)), (t.shape, t.stride())
    assert _raises(lambda: t.__setitem__(..., 5)) == refused


@pytest.mark.rule(
    "05", "There `tril_` and `triu_` skip the check too, in 2-D and 3-D always, writing wrong values silently"
)
@RULE_SETTINGS
@given(st.integers(2, 4), st.integers(2, 4), st.sampled_from(["tril_", "triu_"]), st.sampled_from([None, 1, 3]))
def test_tril_and_triu_skip_the_overlap_check_and_write_wrong_values(n, m, op, batch):
    base = torch.ones(n, 1) if batch is None else torch.ones(batch, n, 1)
    e = base.expand(*base.shape[:-1], m)  # a stride-0 dim of size m > 1: add_ would raise here
    assert _raises(lambda: e.add_(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        getattr(e, op)()
    meant = getattr(torch.ones(e.shape), op[:-1])()
    assert not torch.equal(e, meant)  # a zero written to one index lands on every index sharing its element


@pytest.mark.rule(
    "05",
    "A write through a mask (`e[e >= 0] = 7`) or index lists, or by `index_put_`, `masked_fill_` or `index_fill_`, is"
    " never refused: it only warns.",
)
@RULE_SETTINGS
@given(st.integers(1, 3), st.integers(2, 4), st.lists(st.floats(-5, 5), min_size=2, max_size=4))
def test_advanced_index_writes_into_expanded_memory_warn_and_one_colliding_value_stays(rows, cols, values):
    base = torch.zeros(rows, 1)
    e = base.expand(rows, cols)
    n = min(len(values), cols)
    writes = {
        "mask": lambda: e.__setitem__(e >= 0, 1.0),
        "masked_fill_": lambda: e.masked_fill_(torch.ones(e.shape, dtype=torch.bool), 2.0),
        "index_fill_": lambda: e.index_fill_(1, torch.arange(cols), 3.0),
        "index_put_": lambda: e.index_put_((torch.zeros(n, dtype=torch.int64), torch.arange(n)), torch.ones(n)),
        "index lists": lambda: e.__setitem__(([0] * n, list(range(n))), torch.tensor(values[:n])),
    }
    for write in writes.values():
        with pytest.warns(UserWarning, match="expanded tensors is deprecated"):
            write()
    # the last write: n indices of row 0 name one stored element; which of the n values stays is undefined
    written = {torch.tensor(v).item() for v in values[:n]}  # as float32 stores them
    assert base[0, 0].item() in written and base[1:].eq(3.0).all()  # rows 1..: index_fill_


@pytest.mark.rule(
    "05",
    "The other indexed writes, `index_add_`, `index_copy_`, `scatter_`, `scatter_add_`, `put_` and `masked_scatter_`,"
    " refuse a target with a stride-0 dimension of size > 1 whatever the indices: `e.index_add_` into column 0 alone,"
    " three distinct elements, raises.",
)
@RULE_SETTINGS
@given(
    learner_tensors(dims=(1, 4), side=(0, 4), dtypes=(torch.float32, torch.float64, torch.int64, torch.complex64)),
    st.data(),
)
def test_the_other_indexed_writes_refuse_a_stride_0_target_whatever_the_indices(x, data):
    t = x.detach()  # the same memory; a leaf that requires grad refuses in-place writes for another reason
    k = data.draw(st.integers(0, min(1, t.shape[0])))  # one index, or none at all
    rest = t.shape[1:]
    src, where = torch.ones((k, *rest), dtype=t.dtype), torch.zeros((k, *rest), dtype=torch.int64)
    flat = torch.arange(min(k, t.numel()))
    writes = {
        "index_add_": lambda: t.index_add_(0, torch.arange(k), src),
        "index_copy_": lambda: t.index_copy_(0, torch.arange(k), src),
        "scatter_": lambda: t.scatter_(0, where, 1),
        "scatter_add_": lambda: t.scatter_add_(0, where, src),
        "put_": lambda: t.put_(flat, torch.ones(len(flat), dtype=t.dtype)),
        "masked_scatter_": lambda: t.masked_scatter_(
            torch.zeros(t.shape, dtype=torch.bool), torch.ones(t.numel(), dtype=t.dtype)
        ),
    }
    refused = {}
    for name, write in writes.items():
        try:
            write()
            refused[name] = False
        except RuntimeError as err:
            assert OVERLAP in str(err), (name, str(err))
            refused[name] = True
    assert refused == dict.fromkeys(writes, _checked_write_raises(t)), (t.shape, t.stride(), k)
    e = torch.zeros(3, 1).expand(3, 4)  # the sentence's example: column 0 is three distinct elements
    assert e[:, 0].stride() == (1,) and _raises(lambda: e.index_add_(1, torch.tensor([0]), torch.ones(3, 1)))


@pytest.mark.rule(
    "05", "`(3, 1)` and `(3,)` broadcast to `(3, 3)`, so every prediction is compared with *every* target"
)
@RULE_SETTINGS
@given(st.integers(0, 5))
def test_n_by_1_against_n_broadcasts_to_n_by_n(n):
    pred, target = torch.arange(float(n)).view(n, 1), torch.arange(float(n))
    diff = pred - target
    assert diff.shape == (n, n)
    assert all(diff[i, j] == pred[i, 0] - target[j] for i in range(n) for j in range(n))


@pytest.mark.rule(
    "05",
    "a perfect prediction scores non-zero unless all targets are equal (always so for `N = 1`): in such a batch the bug"
    " hides.",
)
@RULE_SETTINGS
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=5))
def test_a_perfect_n_by_1_prediction_scores_zero_only_when_all_targets_are_equal(labels):
    target = torch.tensor(labels, dtype=torch.float32)
    pred = target.view(-1, 1)  # perfect, but (N, 1)
    by_hand = ((pred - target) ** 2).mean()
    assert (by_hand.item() == 0) == (len(set(labels)) == 1)


@pytest.mark.rule(
    "05",
    "Torch warns here only because `F.mse_loss` checks shapes itself; a hand-written `((pred - target) ** 2).mean()` gets no warning.",
)
@RULE_SETTINGS
@given(shapes, shapes)
def test_mse_loss_warns_exactly_when_shapes_differ_and_by_hand_never(a, b):
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        assume(False)
    pred, target = torch.ones(a), torch.zeros(b)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.mse_loss(pred, target)
    assert any("target size" in str(w.message) for w in caught) == (tuple(a) != tuple(b))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ((pred - target) ** 2).mean()
    assert not caught


@pytest.mark.rule(
    "05",
    "a `(1, 1, 4, 1)` mask varies along *queries* and is stretched along keys, so it hides whole query rows (all `-inf`, hence `nan`) and leaves the real queries attending to padding.",
)
@RULE_SETTINGS
@given(st.lists(st.booleans(), min_size=1, max_size=6).filter(lambda r: any(r) and not all(r)))
def test_a_mask_on_the_query_axis_hides_pad_rows_and_lets_real_queries_see_pads(real):
    keep = torch.tensor(real)
    n = len(real)
    scores = torch.randn(1, 1, n, n)
    attn = scores.masked_fill(~keep[None, None, :, None], float("-inf")).softmax(-1)[0, 0]
    assert torch.equal(attn.isnan().all(-1), ~keep) and not attn[keep].isnan().any()
    assert (attn[keep][:, ~keep].sum(-1) > 0).all()


@pytest.mark.rule(
    "05", "softmax subtracts the row maximum; for a row of all `-inf` that is `-inf - (-inf)`, which is `nan`"
)
@RULE_SETTINGS
@given(
    st.lists(st.lists(st.booleans(), min_size=1, max_size=4), min_size=1, max_size=4).filter(
        lambda m: len({len(r) for r in m}) == 1
    )
)
def test_softmax_row_is_nan_exactly_when_every_entry_is_minus_inf(mask):
    keep = torch.tensor(mask)
    p = torch.randn(keep.shape).masked_fill(~keep, float("-inf")).softmax(-1)
    assert torch.equal(p.isnan().all(-1), ~keep.any(-1)) and torch.equal(p.isnan().any(-1), ~keep.any(-1))


@pytest.mark.rule(
    "05",
    "with SDPA's own answer on CPU, 0",
)
@pytest.mark.rule(
    "05",
    "A float mask of `torch.finfo(dtype).min`, as many codebases build it, is finite: to SDPA that row is not empty,"
    " and its output is silently wrong: the mean of `v` in float32, where the constant drowns the scores; plain"
    " unmasked attention in float16 (min -65504, added in float32 on CPU), where it cancels in the softmax.",
)
@RULE_SETTINGS
@given(
    st.integers(1, 2),
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 3),
    st.sampled_from(["bool", "-inf", "finfo.min"]),
    st.sampled_from([torch.float32, torch.float16]),
    st.data(),
)
def test_sdpa_returns_zeros_for_a_fully_masked_row_unless_the_mask_is_finite(b, h, lq, lk, dh, kind, dtype, data):
    keep = torch.tensor(
        data.draw(st.lists(st.lists(st.booleans(), min_size=lk, max_size=lk), min_size=lq, max_size=lq))
    )
    fill = {"bool": None, "-inf": float("-inf"), "finfo.min": torch.finfo(dtype).min}[kind]
    mask = keep if fill is None else torch.zeros(keep.shape, dtype=dtype).masked_fill(~keep, fill)
    q, k, v = (torch.randn(b, h, n, dh).to(dtype) for n in (lq, lk, lk))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    empty = ~keep.any(-1)
    assert not out.isnan().any()
    if kind == "finfo.min" and dtype == torch.float32:  # every score of the row is finfo.min: a uniform average
        assert torch.allclose(out[:, :, empty], v.mean(-2, keepdim=True).expand(b, h, int(empty.sum()), dh), atol=1e-6)
    elif kind == "finfo.min":  # -65504, added to the scores in float32 on CPU, cancels in the softmax: no mask at all
        plain = F.scaled_dot_product_attention(q, k, v)
        assert torch.allclose(out[:, :, empty], plain[:, :, empty], atol=2e-2)
    else:
        assert out[:, :, empty].eq(0).all()


@pytest.mark.rule(
    "05",
    "an elementwise operator whose operands are stretched against each other (no operand has the result's shape,"
    " leading 1s aside), when a stretched size-1 dim was not made on purpose inside the watched block",
)
@pytest.mark.rule(
    "05",
    "A size-1 dim made inside the block by `None`, `unsqueeze`, `view`, `reshape`, `keepdim=True` or a slice "
    "(`x[:, :1]`) counts as meant",
)
@pytest.mark.rule("05", "even by a `view` that changes no shape (`pred.view(3, 1) - target`)")
@pytest.mark.rule(
    "05",
    "or when an operand lost the dim it is stretched along in a reduction without `keepdim=True`",
)
@RULE_SETTINGS
@given(
    st.integers(0, 4),
    st.integers(0, 4),
    st.sampled_from(
        [
            "before",
            "None",
            "unsqueeze",
            "view",
            "reshape",
            "keepdim",
            "same view",
            "same reshape",
            "slice",
            "last slice",
        ]
    ),
    st.sampled_from(["sub", "add", "mul", "eq"]),
    st.booleans(),
)
def test_watch_broadcasts_reports_a_mutual_stretch_exactly_when_its_size_one_dim_came_from_outside(
    n, m, made, op, reduced
):
    values, scores, table = torch.arange(float(n)), torch.randn(n, 3), torch.randn(2, m)
    outside = values.view(n, 1).clone()  # a (n, 1) tensor made before the watch: a model's output, say
    wide = torch.stack([values, values], 1)  # (n, 2), made before the watch too
    found = []
    with watch_broadcasts(action=found.append):
        col = {
            "before": lambda: outside,
            "None": lambda: values[:, None],
            "unsqueeze": lambda: values.unsqueeze(1),
            "view": lambda: values.view(n, 1),
            "reshape": lambda: values.reshape(n, 1),
            "keepdim": lambda: scores.argmax(1, keepdim=True).float(),  # the accuracy idiom's (N, 1)
            "same view": lambda: outside.view(n, 1),  # a view that changes no shape still counts as meant
            "same reshape": lambda: outside.reshape(n, 1),
            "slice": lambda: wide[:, :1],  # a column sliced in the block, from a tensor made before it
            "last slice": lambda: wide[:, -1:],
        }[made]()
        row = table.sum(0) if reduced else torch.arange(float(m))  # (m,): from a reduction, or made so
        out = getattr(torch, op)(col, row)
    mutual = tuple(out.shape) not in (tuple(col.shape), (1, m))  # row (m,) gaining a leading 1 is read as it is
    assert bool(found) == (mutual and (made == "before" or reduced)), (n, m, made, op, reduced, found)


@pytest.mark.rule(
    "05",
    "An operator's one-sided broadcast is never reported, the square reduction bug `x - x.mean(1)` of notebook 02,"
    " section 5"
    " (*Broadcasting after a reduction*) included.",
)
@RULE_SETTINGS
@given(
    st.integers(0, 4),
    st.integers(0, 4),
    st.sampled_from(["sub", "add", "mul", "eq"]),
    st.sampled_from(["mean", "sum"]),
    st.booleans(),
)
def test_watch_broadcasts_never_reports_a_one_sided_broadcast(n, m, op, reduce, reduced_first):
    x = torch.randn(n, n)
    found = []
    with watch_broadcasts(action=found.append):
        lost = getattr(x, reduce)(1)  # (n,): dim 1 lost in a reduction without keepdim=True
        out = getattr(torch, op)(*((lost, x) if reduced_first else (x, lost)))  # the square bug: (n, n) again
        torch.randn(n, m) + torch.randn(m)  # a bias: one-sided too
    assert tuple(out.shape) == (n, n) and found == [], (n, m, op, reduce, found)


# The eleven losses the watcher names, each called the way its signature wants (extra arguments after the pair).
NAMED_LOSSES = {
    "mse_loss": (),
    "l1_loss": (),
    "smooth_l1_loss": (),
    "huber_loss": (),
    "binary_cross_entropy": (),
    "binary_cross_entropy_with_logits": (),
    "soft_margin_loss": (),
    "poisson_nll_loss": (),
    "kl_div": (),
    "hinge_embedding_loss": (),
    "gaussian_nll_loss": ("var",),
}


NAMED_LOSSES_ARE_REPORTED = (  # one sentence bound to two tests
    "eleven losses it names (`mse_loss`, `l1_loss`, `huber_loss`, ...; not `cross_entropy`), "
    "whenever input and target differ in shape and torch accepts them"
)


@pytest.mark.rule(
    "05",
    NAMED_LOSSES_ARE_REPORTED,
)
@RULE_SETTINGS
@given(
    st.sampled_from(sorted(NAMED_LOSSES)),
    shapes,
    shapes,
    st.sampled_from(["before", "view", "unsqueeze"]),
)
def test_watch_broadcasts_reports_a_named_loss_exactly_when_input_and_target_differ_in_shape(loss, a, b, made):
    fn = getattr(F, loss)
    target = torch.full(b, 0.5)
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own size warning of mse_loss and others
        with watch_broadcasts(action=found.append):
            # how the input's size-1 dims were made (before the block, or on purpose in it) does not matter
            pred = {
                "before": lambda: torch.full(a, 0.5),
                "view": lambda: torch.full((int(np.prod(a)),), 0.5).view(a),
                "unsqueeze": lambda: torch.full(a, 0.5).unsqueeze(0).squeeze(0),
            }[made]()
            extra = [torch.ones(b) for _ in NAMED_LOSSES[loss]]
            try:
                fn(pred, target, *extra)
            except (RuntimeError, ValueError):  # torch refused the pair: its error, and no report
                assume(False)
    assert len(found) == (tuple(a) != tuple(b)), (loss, a, b, made, found)
    assert all(f"functional.{loss} got input of shape {tuple(a)}" in r for r in found)


@pytest.mark.rule(
    "05",
    NAMED_LOSSES_ARE_REPORTED,
)
@RULE_SETTINGS
@given(
    st.sampled_from(["binary_cross_entropy", "binary_cross_entropy_with_logits"]),
    shapes,
    shapes,
)
def test_the_bce_losses_refuse_every_shape_mismatch_themselves_so_the_watch_never_reports_them(loss, a, b):
    assume(tuple(a) != tuple(b))
    found = []
    with watch_broadcasts(action=found.append):
        with pytest.raises(ValueError, match="size"):
            getattr(F, loss)(torch.full(a, 0.5), torch.full(b, 0.5))
    assert found == []


@pytest.mark.rule("05", "eleven losses it names")
@RULE_SETTINGS
@given(st.integers(1, 4), st.integers(2, 4))
def test_watch_broadcasts_names_eleven_losses_and_not_cross_entropy(n, classes):
    from viewlab._stretch import _LOSSES

    assert _LOSSES == set(NAMED_LOSSES) and len(_LOSSES) == 11
    found = []
    with watch_broadcasts(action=found.append):
        F.cross_entropy(torch.randn(n, classes), torch.zeros(n, dtype=torch.int64))  # (N, C) and (N,): by design
    assert found == []


# SDPA's zeros for a fully masked row are SDPA's: MultiheadAttention gives nan there on its default path
# (need_weights=True), and with need_weights=False only its output bias.
@pytest.mark.rule("05", "`nn.MultiheadAttention` may not (P6).")
@pytest.mark.rule(
    "05",
    "the last query has every key blocked and becomes `nan` (P7) on the default path; with `need_weights=False`, off"
    " MHA's eval-mode fast path, that row is 0 (or the output bias), so no `nan` gives the wrong mask away.",
)
@RULE_SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.booleans(), st.booleans(), st.data())
def test_multihead_attention_gives_nan_for_a_fully_blocked_query_only_when_it_returns_weights(
    lq, lk, d, bias, train, data
):
    rows = st.lists(st.lists(st.booleans(), min_size=lk, max_size=lk), min_size=lq, max_size=lq)
    blocked = torch.tensor(data.draw(rows))  # True: blocked, MultiheadAttention's convention
    mha = nn.MultiheadAttention(d, 1, batch_first=True, bias=bias).train(train)
    out_bias = torch.zeros(d)
    if bias:  # a trained model's output bias is not 0 (a fresh one's is)
        with torch.no_grad():
            out_bias = mha.out_proj.bias.copy_(torch.randn(d)).clone()
    q, k, v = torch.randn(1, lq, d), torch.randn(1, lk, d), torch.randn(1, lk, d)
    empty = blocked.all(-1)
    if lq == lk and not train:  # eval self-attention with 2 heads and biases takes MHA's fast path: nan again
        fast = nn.MultiheadAttention(2 * d, 2, batch_first=True, bias=bias).eval()
        x = torch.randn(1, lq, 2 * d)
        with torch.no_grad():
            fast_out, _ = fast(x, x, x, attn_mask=blocked, need_weights=False)
        assert torch.equal(fast_out[0].isnan().all(-1), empty if bias else torch.zeros_like(empty))
    with torch.no_grad():
        weighted, _ = mha(q, k, v, attn_mask=blocked, need_weights=True)
        other, _ = mha(q, k, v, attn_mask=blocked, need_weights=False)
        sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked)
    assert torch.equal(weighted[0].isnan().all(-1), empty) and not weighted[0, ~empty].isnan().any()
    assert not other.isnan().any() and torch.equal(other[0, empty], out_bias.expand(int(empty.sum()), d))
    assert sdpa[0, empty].eq(0).all()
    with torch.no_grad():
        default, _ = mha(q, k, v, attn_mask=blocked)  # need_weights=True is the default
    assert torch.allclose(default, weighted, equal_nan=True)


def _saved_bytes(obj) -> int:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getbuffer().nbytes


@pytest.mark.rule(
    "05",
    "`torch.save` saves *storages*, so that views still share memory after loading; a slice's storage is the whole tensor's.",
)
@RULE_SETTINGS
@given(strided(min_dims=1))
def test_torch_save_writes_the_whole_storage_and_keeps_views_shared(x):
    assume(x.untyped_storage().nbytes() > 0)  # an empty storage has no memory to share, before or after
    whole = x.untyped_storage().nbytes()
    assert _saved_bytes(x) >= whole  # the file holds the whole storage, whatever part of it x reads
    other = x.detach().as_strided((1,), (1,), 0)  # another view: storage element 0
    loaded, loaded_other, loaded_clone = torch.load(io.BytesIO(_dump((x, other, x.clone()))))
    assert loaded.untyped_storage().nbytes() == whole and _same_storage(loaded, loaded_other)
    assert (loaded.shape, loaded.stride(), loaded.storage_offset()) == (x.shape, x.stride(), x.storage_offset())
    assert torch.equal(loaded.detach(), x.detach()) and torch.equal(loaded_other, other)
    assert loaded_clone.untyped_storage().nbytes() == x.numel() * x.element_size()  # a clone saves its own bytes


def _dump(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.rule(
    "05",
    "torch strides are never negative, so `from_numpy`, which must share memory, and `torch.tensor`, which copies, raise"
    " the same `ValueError`, even when the negative stride is on a size-1 dim.",
)
@RULE_SETTINGS
@given(st.lists(st.integers(0, 3), min_size=1, max_size=3), st.data())
def test_from_numpy_refuses_exactly_the_arrays_with_a_negative_stride(shape, data):
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    steps = tuple(data.draw(st.sampled_from([1, 2, -1, -2])) for _ in shape)
    arr = arr[tuple(slice(None, None, s) for s in steps)]
    try:
        t = torch.from_numpy(arr)
    except ValueError as err:
        assert any(s < 0 for s in arr.strides) and "negative" in str(err)
        for make in (torch.as_tensor, torch.tensor, torch.asarray):  # torch.tensor copies, and refuses all the same
            with pytest.raises(ValueError) as other:
                make(arr)
            assert str(other.value) == str(err), make
    else:
        assert all(s >= 0 for s in arr.strides) and np.shares_memory(t.numpy(), arr) == (arr.size > 0)


@pytest.mark.rule(
    "05",
    "`t.numpy()` is the same memory as `t`, so an in-place `t += 10` shows in the array; `t = t + 1` makes a new tensor, which the array never sees.",
)
@RULE_SETTINGS
@given(strided())
def test_numpy_shares_memory_in_place_writes_show_and_rebinding_does_not(x):
    t = x
    if t.requires_grad:  # refused (notebook 01, section 7 shows it); detach() is the same memory
        with pytest.raises(RuntimeError, match=r"requires grad\. Use tensor\.detach\(\)\.numpy\(\) instead"):
            t.numpy()
        t = t.detach()  # the same memory, without the grad
        assert t.numel() == 0 or t.dtype == torch.bfloat16 or t.numpy().__array_interface__["data"][0] == x.data_ptr()
    if t.dtype == torch.bfloat16:
        with pytest.raises(TypeError, match="BFloat16"):
            t.numpy()
        return
    if any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape)):
        t = t.contiguous()  # writing into stride-0 memory is P2's rule, not this one
    arr = t.numpy()
    assert t.numel() == 0 or np.shares_memory(arr, t.numpy())
    t += True if t.dtype == torch.bool else 10
    assert np.array_equal(arr, t.numpy())
    before = arr.copy()
    t = t + 1
    assert np.array_equal(arr, before) and (t.numel() == 0 or not np.shares_memory(arr, t.numpy()))


@pytest.mark.rule(
    "05", "`squeeze()` removes *every* size-1 dimension, and with one sample the batch dimension has size 1 too."
)
@RULE_SETTINGS
@given(shapes)
def test_squeeze_removes_every_size_one_dimension(shape):
    assert torch.zeros(shape).squeeze().shape == tuple(n for n in shape if n != 1)


@pytest.mark.rule("05", "Name the dimensions: `squeeze((2, 3))` or `flatten(1)`")
@RULE_SETTINGS
@given(st.integers(0, 3), st.integers(0, 3))
def test_naming_the_dimensions_keeps_the_batch_of_any_size(batch, channels):
    x = torch.randn(batch, channels, 1, 1)
    assert x.squeeze((2, 3)).shape == x.flatten(1).shape == (batch, channels)


def _identity_mha(d: int) -> nn.MultiheadAttention:
    mha = nn.MultiheadAttention(d, 1, batch_first=True, bias=False)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(d).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(d))
    return mha


@pytest.mark.rule(
    "05",
    "In `F.scaled_dot_product_attention`, `True` means *may attend*; in `nn.MultiheadAttention`, `True` means *blocked*.",
)
@RULE_SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.data())
def test_the_boolean_mask_means_opposite_things_in_sdpa_and_mha(lq, lk, d, data):
    rows = st.lists(st.booleans(), min_size=lk, max_size=lk).filter(any)
    may = torch.tensor(data.draw(st.lists(rows, min_size=lq, max_size=lq)))
    q, k, v = torch.randn(1, lq, d), torch.randn(1, lk, d), torch.randn(1, lk, d)
    out_sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=may)
    out_mha, weights = _identity_mha(d)(q, k, v, attn_mask=~may)
    assert torch.allclose(out_mha, out_sdpa, atol=1e-5) and torch.equal(weights[0] > 0, may)


@pytest.mark.rule(
    "05",
    "`cls` is a view: it holds the whole storage (and, through `cls._base`, the big tensor itself), so `del acts` only removes a name.",
)
@RULE_SETTINGS
@given(strided(min_dims=1), st.data())
def test_a_view_holds_the_whole_storage_after_del_and_a_clone_holds_its_own_bytes(x, data):
    acts = x.clone() if data.draw(st.booleans()) else torch.randn(x.shape)
    whole = acts.untyped_storage().nbytes()
    dim = data.draw(st.integers(0, acts.ndim - 1))
    part = acts.narrow(dim, 0, min(1, acts.shape[dim]))
    kept = part.clone()
    assert part._base is acts
    del acts
    assert part.untyped_storage().nbytes() == whole
    assert kept.untyped_storage().nbytes() == kept.numel() * kept.element_size() and kept._base is None


@pytest.mark.rule("05", "(not `contiguous()`: a contiguous slice, `acts[0]`, stays a view")
@pytest.mark.rule("05", "`acts[:, 0]` is not contiguous, so here it copies by luck)")
@RULE_SETTINGS
@given(strided(min_dims=1), st.data())
def test_contiguous_returns_a_contiguous_slice_itself_storage_and_all(x, data):
    dim = data.draw(st.integers(0, x.ndim - 1))
    part = x.narrow(dim, 0, min(1, x.shape[dim]))
    kept = part.contiguous()
    assert (kept is part) == part.is_contiguous()  # only a slice that is not contiguous yet gets copied
    if part.is_contiguous():
        assert kept.untyped_storage().nbytes() == x.untyped_storage().nbytes()
    else:  # the copy owns only its own elements: the big tensor can go
        assert kept._base is None and kept.untyped_storage().nbytes() == kept.numel() * kept.element_size()


@pytest.mark.rule(
    "05",
    "so the broadcast shape must equal `x`'s shape, leading 1s included: equal element counts are not enough.",
)
@RULE_SETTINGS
@given(shapes, shapes)
def test_an_in_place_op_works_exactly_when_the_broadcast_shape_is_the_written_shape(a, b):
    try:
        out = torch.broadcast_shapes(a, b)
    except RuntimeError:
        assume(False)
    assert _raises(lambda: torch.zeros(a).add_(torch.ones(b))) == (tuple(out) != tuple(a))


@pytest.mark.rule("05", "Assignment `x[:] = v` differs: it drops `v`'s leading 1s first.")
@RULE_SETTINGS
@given(shapes.filter(len), shapes)
def test_assignment_drops_the_values_leading_ones_then_needs_the_written_shape(a, b):
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        assume(False)
    stripped = tuple(b)
    while stripped and stripped[0] == 1:
        stripped = stripped[1:]
    fits = len(stripped) <= len(a) and tuple(torch.broadcast_shapes(a, stripped)) == tuple(a)
    x = torch.zeros(a)
    try:
        x[:] = torch.ones(b)
        ran = True
    except RuntimeError:
        ran = False
    assert ran == fits, (a, b)
    assert not ran or x.eq(1).all()
    assert _raises(lambda: torch.zeros(a).add_(torch.ones(b))) == (tuple(torch.broadcast_shapes(a, b)) != tuple(a))


@pytest.mark.rule("05", "the three writes to index 2 all write the same value")
@RULE_SETTINGS
@given(st.integers(1, 4), st.data())
def test_index_plus_one_counts_each_label_once_and_accumulate_counts_all(classes, data):
    labels = torch.tensor(data.draw(st.lists(st.integers(0, classes - 1), max_size=8)), dtype=torch.int64)
    counts = torch.zeros(classes)
    counts[labels] += 1
    seen = torch.bincount(labels, minlength=classes)
    assert torch.equal(counts, (seen > 0).float())
    fixed = torch.zeros(classes).index_put_((labels,), torch.ones(len(labels)), accumulate=True)
    assert torch.equal(fixed, seen.float()) and torch.equal(
        fixed, torch.zeros(classes).index_add_(0, labels, torch.ones(len(labels)))
    )


@pytest.mark.rule(
    "05",
    "`data_ptr()` is the address of the tensor's *first element*: storage start + offset x itemsize; a tensor with no elements has no first element, and its `data_ptr()` is 0.",
)
@RULE_SETTINGS
@given(strided())
def test_data_ptr_is_storage_start_plus_offset_times_itemsize(x):
    expected = x.untyped_storage().data_ptr() + x.storage_offset() * x.element_size()
    assert x.data_ptr() == (expected if x.numel() else 0), (x.shape, x.storage_offset(), x.dtype)


@pytest.mark.rule(
    "05", "Same elements: for contiguous tensors, compare the byte ranges `[data_ptr(), data_ptr() + nbytes)`."
)
@RULE_SETTINGS
@given(st.integers(0, 12), st.data())
def test_byte_ranges_decide_common_elements_for_contiguous_tensors(n, data):
    a = torch.arange(float(n))
    pieces = [a[data.draw(st.integers(0, n)) :][: data.draw(st.integers(0, n))] for _ in range(2)]
    x, y = pieces
    ranges = x.data_ptr() < y.data_ptr() + y.nbytes and y.data_ptr() < x.data_ptr() + x.nbytes
    common = set(storage_indices(x).flatten().tolist()) & set(storage_indices(y).flatten().tolist())
    assert ranges == bool(common)


@pytest.mark.rule(
    "05",
    "`viewlab.shares_storage` compares the storages' byte ranges instead.",
)
@RULE_SETTINGS
@given(numpy_arrays(dims=(1, 3), side=(1, 4), kinds=("contiguous", "stepped", "fortran")), st.data())
def test_from_numpy_of_a_slice_has_its_own_storage_pointer_over_shared_memory(arr, data):
    start = data.draw(st.integers(0, arr.shape[0] - 1))
    whole, part = torch.from_numpy(arr), torch.from_numpy(arr[start:])
    same_pointer = whole.untyped_storage().data_ptr() == part.untyped_storage().data_ptr()
    assert same_pointer == (start == 0) and shares_storage(whole, part)
    first = (0,) * arr.ndim
    part[first] = 99  # a write through one storage shows through the other (bool stores it as True)
    assert whole[(start, *first[1:])].item() == part[first].item()


def _common_elements(x: torch.Tensor, y: torch.Tensor) -> set[int]:
    """Notebook 05's P14 helper, as its cell defines it: the storage indices of x whose bytes y reads too."""

    def bytes_read(t, start):
        first = start + storage_indices(t).flatten() * t.element_size()
        return {int(byte) + i for byte in first for i in range(t.element_size())}

    shift = y.untyped_storage().data_ptr() - x.untyped_storage().data_ptr()
    return {byte // x.element_size() for byte in bytes_read(x, 0) & bytes_read(y, shift)}


@pytest.mark.rule("05", "answers it exactly, for any strides, and across storages and dtypes")
@RULE_SETTINGS
@given(strided(), st.data())
def test_common_elements_finds_the_shared_bytes_across_dtypes_and_storages(x, data):
    size = x.untyped_storage().nbytes()
    lo = data.draw(st.integers(0, size))
    hi = data.draw(st.integers(lo, size))
    as_bytes = torch.empty(0, dtype=torch.uint8).set_(x.untyped_storage(), 0, (size,))[lo:hi]  # another dtype
    isz = x.element_size()
    expected = {i for i in storage_indices(x).flatten().tolist() if lo < hi and i * isz < hi and lo < (i + 1) * isz}
    assert _common_elements(x, as_bytes) == expected, (x.shape, x.stride(), x.dtype, lo, hi)
    assert _common_elements(x, x.detach().clone()) == set()  # a storage of its own: nothing shared
    if x.dtype != torch.bool and x.numel() and not x.requires_grad:
        other = torch.from_numpy(x.detach().numpy()) if x.dtype != torch.bfloat16 else x  # a second storage object
        assert _common_elements(x, other) == set(storage_indices(x).flatten().tolist())


@pytest.mark.rule("05", "answers it exactly, for any strides")
@RULE_SETTINGS
@given(strided())
def test_storage_indices_are_the_storage_elements_each_element_reads(x):
    n = x.untyped_storage().nbytes() // x.element_size()
    marked = torch.arange(n).as_strided(x.shape, x.stride(), x.storage_offset())  # each element holds its own index
    assert torch.equal(storage_indices(x), marked)


def _as_array(t: torch.Tensor) -> np.ndarray:
    return np.array(t.tolist()).reshape(t.shape)  # an empty tensor's list alone loses its shape


@pytest.mark.rule("05", "`permute` reorders the *strides*, so each pixel's channels are read from the right places.")
@RULE_SETTINGS
@given(strided(min_dims=1), st.data())
def test_permute_reorders_shape_and_strides_and_moves_every_element(x, data):
    order = data.draw(st.permutations(range(x.ndim)))
    p = x.permute(*order)
    assert p.shape == tuple(x.shape[i] for i in order) and p.stride() == tuple(x.stride()[i] for i in order)
    assert _same_storage(p, x) and p.storage_offset() == x.storage_offset()
    # NumPy's own transpose as the reference, read through tolist (NumPy has no bfloat16)
    assert np.array_equal(_as_array(p), np.transpose(_as_array(x), order))


@pytest.mark.rule("05", "`view` keeps the memory order and only regroups it")
@RULE_SETTINGS
@given(shapes, st.data())
def test_view_of_a_contiguous_tensor_keeps_the_row_major_order(shape, data):
    x = torch.arange(float(np.prod(shape))).reshape(shape)
    new = data.draw(st.permutations(list(shape)))
    v = x.view(*new) if new else x.view(())
    assert torch.equal(v.flatten(), x.flatten()) and _same_storage(v, x)


def _write_in_place(t: torch.Tensor, op: str) -> None:
    if op == "add_":
        t.add_(1)
    elif op == "mul_":
        t.mul_(2)
    elif op == "fill_":
        t.fill_(3)
    elif op == "setitem":
        t[...] = 0.5
    elif op == "index +=":  # two in-place ops: add_ into the view t[0], then copy_ of it back into t
        t[0] += 1
    else:  # zero_, on h, on a view of it or on h.detach()
        t.zero_()


@pytest.mark.rule(
    "05",
    "each in-place op through `t`, a view of it or `t.detach()` adds one (`h[0] += 1` is two: an add into the view,"
    " then a copy back), autograd records the version it saved, and backward refuses when the two differ",
)
@RULE_SETTINGS
@given(
    st.integers(0, 4),
    st.lists(st.sampled_from(["add_", "mul_", "zero_", "fill_", "setitem", "index +=", "view", "detach"]), max_size=4),
)
def test_each_in_place_write_adds_one_and_backward_refuses_any(n, writes):
    w = torch.randn(n, requires_grad=True)
    h = w.sigmoid()
    saved = h._version
    assume(n > 0 or "index +=" not in writes)  # t[0] needs an element
    for op in writes:
        _write_in_place({"view": h[: max(n - 1, 0)], "detach": h.detach()}.get(op, h), op)
    assert h._version == saved + sum(2 if op == "index +=" else 1 for op in writes)
    assert _raises(lambda: h.sum().backward()) == bool(writes)


def _write_through_numpy(a: np.ndarray, op: str) -> None:
    if op == "add_":
        a += 1
    elif op == "mul_":
        a *= 2
    else:  # fill_, setitem, zero_
        a[...] = {"fill_": 3.0, "setitem": 0.5}.get(op, 0.0)


@pytest.mark.rule(
    "05",
    "A write that `t._version` does not count goes unseen: through `t.data` (a tensor with a counter of its own, unlike"
    " `t.detach()`) or through memory shared outside torch"
    " (`t.detach().numpy()`, P12): the version stays 0, backward runs, and the gradient is silently wrong",
)
@RULE_SETTINGS
@given(
    st.integers(1, 4),
    st.lists(st.sampled_from(["add_", "mul_", "zero_", "fill_", "setitem"]), min_size=1, max_size=4),
    st.booleans(),
)
def test_a_write_through_data_is_not_counted_and_backward_uses_the_written_value(n, writes, through_numpy):
    w = torch.randn(n, requires_grad=True)
    h = w.sigmoid()
    true = (h * (1 - h)).detach()  # sigmoid's gradient: in (0, 0.25] for every input
    for op in writes:
        if through_numpy:  # NumPy's view of the same memory: the same writes, made where torch never sees them
            _write_through_numpy(h.detach().numpy(), op)
        else:
            data = h.data  # a tensor of its own over h's memory: the write counts on its counter, not on h's
            _write_in_place(data, op)
            assert data._version > 0
    assert h._version == 0
    (grad,) = torch.autograd.grad(h.sum(), w)  # no error: backward reads the saved output as written
    written = h.detach()
    assert torch.allclose(grad, written * (1 - written))
    outside = (written <= 0) | (written >= 1)  # no input of sigmoid gives such an output
    assert not outside.any() or grad[outside].le(0).all() and not torch.allclose(grad, true)


@pytest.mark.rule(
    "05",
    "Errors about **overlap** come from writing into stride-0 memory, refused or not by operator and region (P2: clone it"
    " first), or from an input that partly overlaps the target (`a[1:].copy_(a[:-1])`, notebook 01, section 8"
    " (*Five real mistakes*); clone the input: a cloned target leaves `a` unchanged).",
)
@RULE_SETTINGS
@given(st.integers(1, 8), st.integers(0, 8), st.sampled_from(["copy_", "add_", "mul_"]))
def test_overlap_errors_come_from_stride_0_targets_or_partly_overlapping_inputs(n, shift, op):
    def write(dst, src):
        getattr(dst, op)(src)

    def message(fn) -> str:
        try:
            fn()
        except RuntimeError as err:
            return str(err)
        return ""

    e = torch.ones(1).expand(n)  # n indices, one stored element
    stride_0 = message(lambda: write(e, torch.ones(n)))
    assert ("more than one element of the written-to tensor refers to a single memory location" in stride_0) == (n > 1)
    fixed = torch.ones(1).expand(n).clone()  # the fix: the target gets memory of its own
    write(fixed, torch.full((n,), 2.0))
    assert fixed.stride() == (1,) and fixed.eq({"copy_": 2.0, "add_": 3.0, "mul_": 2.0}[op]).all()
    assume(shift < n)
    a = torch.arange(float(n)) + 1
    dst, src = a[shift:], a[: n - shift]
    partly = 0 < shift < n - shift  # some elements shared, not all
    shifted = message(lambda: write(dst, src))
    assert (
        "some elements of the input tensor and the written-to tensor refer to a single memory location" in shifted
    ) == partly
    if partly:  # the fix: the input gets memory of its own; a cloned target runs, and a stays as it was
        before = a.clone()
        write(dst.clone(), src)
        assert torch.equal(a, before)
        expected = {"copy_": src.clone(), "add_": dst + src, "mul_": dst * src}[op]
        write(dst, src.clone())
        assert torch.equal(dst, expected)


@pytest.mark.rule(
    "05",
    "Other overlaps go unchecked: `unfold` windows are written once per window, a strided shift gives undefined values"
    " (notebook 03, section 5 (*Writing into an expanded tensor*)).",
)
@RULE_SETTINGS
@given(st.integers(1, 8), st.integers(1, 4), st.integers(1, 4), st.integers(2, 4))
def test_only_stride_0_overlap_raises_overlapping_windows_are_written_silently(n, size, step, rows):
    x = torch.ones(n + size)
    windows = x.unfold(0, size, step)  # windows overlap when step < size: one element in several windows
    reads = torch.bincount(storage_indices(windows).flatten(), minlength=len(x))
    assert not _raises(lambda: windows.mul_(2))  # never refused: the overlap has no stride 0
    assert torch.equal(x, 2.0 ** reads.float())  # an element read by k windows was doubled k times
    m = torch.arange(float(rows * (n + 1))).view(rows, n + 1)  # a (B, T) batch, B > 1: its columns are strided
    assert not _raises(lambda: m[:, 1:].copy_(m[:, :-1]))  # a time shift: partly overlapping, never refused


@pytest.mark.rule(
    "05",
    "Same block: compare `untyped_storage().data_ptr()` (two unrelated empty storages torch made, or any two meta tensors, "
    "both report 0).",
)
@RULE_SETTINGS
@given(strided(), strided(), st.booleans())
def test_storage_pointers_are_equal_exactly_for_one_block_or_two_empty_ones(x, other, related):
    y = x[...] if related else other.clone()  # a view of x's block, or a block of its own
    same_block = x.untyped_storage()._cdata == y.untyped_storage()._cdata
    both_empty = x.untyped_storage().nbytes() == y.untyped_storage().nbytes() == 0
    equal = x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    assert equal == (same_block or both_empty)
    metas = (torch.ones(x.shape, device="meta"), torch.zeros(other.shape, device="meta"))  # unrelated, any size
    assert metas[0].untyped_storage().data_ptr() == metas[1].untyped_storage().data_ptr() == 0


@pytest.mark.rule(
    "05",
    "give dead rows finite scores before the softmax, then zero their weights (output 0); zeroing only after it leaves "
    "the gradient NaN with a `0` / `-inf` mask",
)
@pytest.mark.rule("05", "with a `0` / `-inf` mask added (not with `masked_fill`")
@RULE_SETTINGS
@given(
    st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=4).filter(
        lambda m: not all(any(r) for r in m)
    ),
    st.integers(0, 2**16),
)
def test_a_dead_row_is_fixed_before_the_softmax_and_zeroing_after_it_leaves_nan_gradients(mask, seed):
    keep = torch.tensor(mask)  # at least one row with every key masked
    g = torch.Generator().manual_seed(seed)
    scores, w = torch.randn(keep.shape, generator=g, requires_grad=True), torch.randn(3, 2, generator=g)
    added = torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    dead = ~keep.any(-1, keepdim=True)
    after = torch.where(dead, 0.0, (scores + added).softmax(-1))
    fixed = (scores + added).masked_fill(dead, 0.0).softmax(-1).masked_fill(dead, 0.0)
    torch.testing.assert_close(after, fixed)  # the same forward pass: dead rows 0, live rows a softmax
    assert fixed[dead.squeeze(-1)].eq(0).all()
    (grad_after,) = torch.autograd.grad((after @ w).sum(), scores)
    (grad_fixed,) = torch.autograd.grad((fixed @ w).sum(), scores)
    assert grad_after.isnan().any() and grad_fixed.isfinite().all()
    filled = torch.where(dead, 0.0, scores.masked_fill(~keep, float("-inf")).softmax(-1))  # masked_fill's backward
    torch.testing.assert_close(filled, fixed)  # zeroes the masked entries' gradient: finite, zeroed after or not
    (grad_filled,) = torch.autograd.grad((filled @ w).sum(), scores)
    assert grad_filled.isfinite().all()
