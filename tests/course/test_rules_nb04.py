"""Notebook 04's general sentences, each checked against torch over generated inputs (H = 1, Dh = 1, Lq = 1,
Lq != Lk, empty batches, bool and float masks, padded and unpadded sequences, every mask rank)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import TENSOR_KINDS, attention_cases, learner_tensors
from viewlab import measure
from viewlab.attention import causal_mask, merge_heads, padding_mask, scaled_dot_product_attention, split_heads

pytestmark = pytest.mark.nb04

dims = st.integers(1, 3)


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _unpack(case) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int, int, int]:  # noqa: ANN001
    """q, k, v as the shared strategy made them (split_heads, transpose(1, 2), fused, contiguous), and B, H, Lq, Lk."""
    sizes = case.sizes
    return case.q, case.k, case.v, sizes["B"], sizes["H"], sizes["Lq"], sizes["Lk"]


def _sdpa(q, k, v, mask):  # noqa: ANN001, ANN202 -- None where SDPA refuses the mask
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    except (RuntimeError, IndexError):
        return None


@st.composite
def lengths_for(draw, b: int, lk: int, low: int = 1) -> torch.Tensor:
    return torch.tensor(draw(st.lists(st.integers(min(low, lk), lk), min_size=b, max_size=b)), dtype=torch.long)


@pytest.mark.rule(
    "04",
    "`@` (matmul) **broadcasts over those leading dims**: it runs one `(Lq, E) @ (E, Lk)` product per batch item "
    "and head.",
)
@RULE_SETTINGS
@given(case=attention_cases(), one_b=st.booleans(), one_h=st.booleans())
def test_matmul_broadcasts_over_the_leading_dims(case, one_b, one_h):
    q, k, _, b, h, lq, lk = _unpack(case)
    k = k.transpose(-2, -1)[: 1 if one_b else b, : 1 if one_h else h]  # (B or 1, H or 1, Dh, Lk): a view
    out = q @ k
    assert out.shape == (b, h, lq, lk)
    for i in range(b):
        for j in range(h):
            torch.testing.assert_close(out[i, j], q[i, j] @ k[0 if one_b else i, 0 if one_h else j])


def _merges_as_a_view(t: torch.Tensor, batch: tuple[int, ...]) -> bool:
    try:
        t.expand(*batch, *t.shape[-2:]).view(-1, *t.shape[-2:])
    except RuntimeError:
        return False
    return True


@pytest.mark.rule(
    "04",
    "Unlike element-wise broadcasting, this can copy: matmul merges the leading dims into one with `reshape`, which "
    "copies an operand whose leading dims cannot merge as a view.",
)
@RULE_SETTINGS
@given(case=attention_cases(), one_b=st.booleans(), one_h=st.booleans(), contiguous_q=st.booleans())
def test_matmul_copies_each_operand_whose_broadcast_leading_dims_cannot_merge(case, one_b, one_h, contiguous_q):
    q, k, _, b, h, lq, lk = _unpack(case)
    q = q.contiguous() if contiguous_q else q
    k = k.transpose(-2, -1)[: 1 if one_b else b, : 1 if one_h else h]  # shared across batch items and/or heads
    with measure(device="cpu") as m:
        out = q @ k
    copied = sum(
        0 if _merges_as_a_view(t, (b, h)) else b * h * t.shape[-2] * t.shape[-1] * t.element_size() for t in (q, k)
    )
    assert m.allocated_bytes == out.untyped_storage().nbytes()
    assert m.peak_bytes - m.allocated_bytes == copied  # the temporaries: each copied operand at the full batch
    if one_h and not one_b and b > 1 and h > 1:
        assert copied >= h * k.nbytes  # keys (B, 1, Dh, Lk) shared across heads: at least H times their size


@pytest.mark.rule(
    "04",
    "heads straight from `split_heads` are copied once, at their own size, unless `B` or `H` is 1 (or `L`, for heads "
    "of a whole `(B, L, D)` tensor)",
)
@RULE_SETTINGS
@given(case=attention_cases(layouts=("split_heads", "transpose", "fused_qkv")))
def test_split_heads_are_copied_once_at_their_own_size_unless_b_or_h_is_1(case):
    q, k, _, b, h, lq, lk = _unpack(case)
    k_full = k.transpose(-2, -1).contiguous()  # (B, H, Dh, Lk), nothing to merge-copy
    with measure(device="cpu") as m:
        scores = q @ k_full  # kept: its bytes stay allocated, only temporaries are freed
    temporary = m.peak_bytes - m.allocated_bytes
    whole = case.layout != "fused_qkv"  # a chunk of a fused projection is not a whole (B, L, D) tensor
    copied = b > 1 and h > 1 and not (whole and lq == 1)
    assert temporary == (q.numel() * q.element_size() if copied else 0), (case, temporary)
    assert m.allocated_bytes == scores.untyped_storage().nbytes()


@pytest.mark.rule(
    "04",
    "SDPA's default CPU kernel also wants 2 dims or more: a 1-D `(Lk,)` or 0-d mask broadcasts, yet raises "
    "`IndexError`; pass `(1, Lk)`.",
)
@RULE_SETTINGS
@given(case=attention_cases(), as_float=st.booleans(), zero_d=st.booleans())
def test_a_mask_of_fewer_than_2_dims_broadcasts_but_the_default_cpu_kernel_raises(case, as_float, zero_d):
    q, k, v, b, h, lq, lk = _unpack(case)
    keep = torch.ones(()) > 0 if zero_d else torch.arange(lk) < max(lk - 1, 1)  # 0-d, or one sequence's (Lk,)
    mask = keep.to(q.dtype).log() if as_float else keep  # the 0 / -inf float form too
    assert torch.broadcast_shapes(mask.shape, (b, h, lq, lk)) == (b, h, lq, lk)
    with pytest.raises(IndexError):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    fixed = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.reshape(1, -1))  # (1, Lk) or (1, 1): runs
    with sdpa_kernel(SDPBackend.MATH):  # MATH takes the 1-D mask and agrees with the (1, Lk) one
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), fixed)


@pytest.mark.rule(
    "04",
    "The scores are `(B, H, Lq, Lk)`, the only tensor that grows with `Lq·Lk`: bigger than the keys when `Lq > E`, "
    "than the queries when `Lk > E`.",
)
@RULE_SETTINGS
@given(case=attention_cases())
def test_the_scores_outgrow_keys_and_queries_only_past_the_head_dim(case):
    q, k, _, b, h, lq, lk = _unpack(case)
    e = q.shape[-1]
    scores = q @ k.transpose(-2, -1)
    assert scores.shape == (b, h, lq, lk)
    if scores.numel():  # an empty batch has no sizes to compare
        assert (scores.numel() > k.numel()) == (lq > e) and (scores.numel() > q.numel()) == (lk > e)


@pytest.mark.rule(
    "04",
    "The gradients of `q` and `k` stay finite only if the mask selects (`masked_fill`, `torch.where`), which passes "
    "no gradient to the masked scores; an added `0` / `-inf` float mask passes it, so they are NaN too",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_dead_row_gives_nan_gradients_to_q_and_k_only_through_an_added_mask(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    assume(b > 0 and lk > 0 and lq > 0)
    lengths = data.draw(lengths_for(b, lk, low=0))
    assume((lengths == 0).any())  # at least one empty sequence: a row with no key
    keep = padding_mask(lengths, lk)
    added = torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    selects = {
        "masked_fill": lambda s: s.masked_fill(~keep, float("-inf")),
        "where": lambda s: s.where(keep, -math.inf),
    }
    for form in ("masked_fill", "where", "added"):
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        s = qg @ kg.transpose(-2, -1)
        s = selects[form](s) if form in selects else s + added
        (s.softmax(-1) @ vg).sum().backward()
        assert torch.isnan(vg.grad).any()
        assert torch.isnan(qg.grad).any() == torch.isnan(kg.grad).any() == (form == "added")


@pytest.mark.rule(
    "04",
    "Zeroing the dead rows' weights after the softmax clears the output and the gradient of `v`: enough for a "
    "selecting mask, not for an added one, whose NaN has already reached the scores' gradient; the fix below, before "
    "the softmax, works for both.",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_zeroing_dead_rows_after_the_softmax_misses_only_an_added_mask(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    assume(b > 0 and lk > 0 and lq > 0)
    lengths = data.draw(lengths_for(b, lk, low=0))
    assume((lengths == 0).any())  # at least one empty sequence: a row with no key
    keep = padding_mask(lengths, lk)
    dead = ~keep.any(-1, keepdim=True)
    added = torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    forms = {
        "masked_fill": lambda s: s.masked_fill(~keep, float("-inf")),
        "where": lambda s: s.where(keep, -math.inf),
        "added": lambda s: s + added,
    }
    for form, apply in forms.items():
        for fix in ("after", "before"):
            qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
            s = apply(qg @ kg.transpose(-2, -1))
            s = s.masked_fill(dead, 0.0) if fix == "before" else s  # finite scores for the dead rows
            out = s.softmax(-1).masked_fill(dead, 0.0) @ vg
            out.sum().backward()
            assert torch.isfinite(out).all() and torch.isfinite(vg.grad).all()
            nan_qk = torch.isnan(qg.grad).any().item(), torch.isnan(kg.grad).any().item()
            assert nan_qk == ((form == "added" and fix == "after"),) * 2


@st.composite
def inputs(draw) -> tuple[torch.Tensor, int]:
    """(B, L, D) tensors as learners meet them (every kind of the shared strategy that has rank 3, unfold windows
    of a 2-D tensor included), and a head count H dividing D."""
    rank3 = tuple(k for k in TENSOR_KINDS if k not in ("unfold", "zero_d", "channels_last"))
    x = draw(st.one_of(learner_tensors(dims=(3, 3), kinds=rank3), learner_tensors(dims=(2, 2), kinds=("unfold",))))
    d = x.shape[-1]
    h = draw(st.sampled_from([n for n in range(1, d + 1) if d % n == 0] if d else [1, 2, 3]))
    return x, h


@pytest.mark.rule(
    "04",
    "Splitting is `x.view(B, L, H, Dh)` then `transpose(1, 2)`: both only rewrite shape and stride, so the heads "
    "share `x`'s memory and cost **0 bytes**.",
)
@RULE_SETTINGS
@given(case=inputs())
def test_splitting_heads_is_always_a_view(case):
    x, h = case
    b, length, d = x.shape
    heads = x.view(b, length, h, d // h).transpose(1, 2)  # never raises: splitting one dim is always a view
    assert heads._base is (x._base if x._base is not None else x) and (x.numel() == 0 or _shares(heads, x))
    for i in range(h):
        assert torch.equal(heads[:, i], x[:, :, i * (d // h) : (i + 1) * (d // h)])


@pytest.mark.rule(
    "04",
    "Head `h` reads features `h·Dh … (h+1)·Dh − 1` of each position: stride `Dh` = 4 from head to head, `D` = 12 from "
    "position to position.",
)
@RULE_SETTINGS
@given(b=dims, length=st.integers(2, 4), h=st.integers(2, 4), dh=dims)
def test_head_and_position_strides_of_a_contiguous_input(b, length, h, dh):
    x = torch.randn(b, length, h * dh)
    heads = x.view(b, length, h, dh).transpose(1, 2)
    assert heads.stride()[1:] == (dh, h * dh, 1)


@st.composite
def head_outputs(draw) -> torch.Tensor:
    """(B, H, L, Dh) outputs laid out in each of the 24 dim orders, with H = 1, Dh = 1, L = 1 and empty batches."""
    b, h, length, dh = draw(st.integers(0, 2)), draw(dims), draw(dims), draw(dims)
    order = draw(st.permutations(range(4)))
    sizes = (b, h, length, dh)
    stored = torch.randn([sizes[i] for i in order])
    return stored.permute(*[order.index(i) for i in range(4)])


@pytest.mark.rule("04", "`reshape` views when the strides allow and copies otherwise.")
@pytest.mark.rule(
    "04",
    "So a contiguous `out.transpose(1, 2)` is enough for a view, not needed. The exact condition is "
    "`stride(2) == Dh · stride(3)` in the transposed tensor, or `H = 1`, or `Dh = 1`, or an empty tensor",
)
@RULE_SETTINGS
@given(out=st.one_of(head_outputs(), attention_cases().map(lambda case: case.q)))
def test_merging_heads_is_a_view_exactly_when(out):
    b, h, length, dh = out.shape
    t = out.transpose(1, 2)
    merged = t.reshape(b, length, h * dh)
    try:
        t.view(b, length, h * dh)
        viewable = True
    except RuntimeError:
        viewable = False
    view = merged._base is not None and (out.numel() == 0 or _shares(merged, out))
    assert view == viewable  # reshape views exactly where view works
    assert view == (t.stride(2) == dh * t.stride(3) or h == 1 or dh == 1 or out.numel() == 0)
    if t.is_contiguous():
        assert view
    assert torch.equal(merge_heads(out), merged)


@pytest.mark.rule(
    "04",
    "If the output is a contiguous `(B, H, L, Dh)` tensor, the merge **copies**: after the transpose one head's "
    "features and the next head's are `L·Dh` elements apart, not `Dh`.",
)
@pytest.mark.rule(
    "04",
    "A size-1 `H` or `Dh` merges whatever its stride, and at `L = 1` the heads sit `Dh` apart: so even a contiguous "
    "output merges as a view, as does an empty tensor",
)
@pytest.mark.rule(
    "04",
    "it copies a contiguous `(B, H, L, Dh)` output (ours; MATH, what dropout runs on CPU) unless `L`, `H` or `Dh` "
    "is 1 or it is empty, and is a view when `out.transpose(1, 2)` is contiguous.",
)
@RULE_SETTINGS
@given(b=st.integers(0, 2), h=dims, length=dims, dh=dims)
def test_merging_a_contiguous_output_copies_unless_a_dim_is_one(b, h, length, dh):
    out = torch.randn(b, h, length, dh)
    t = out.transpose(1, 2)
    assert t.stride(2) == length * dh
    merged = merge_heads(out)
    view = merged._base is not None
    assert view == (1 in (length, h, dh) or out.numel() == 0)


@pytest.mark.rule(
    "04",
    "our attention and SDPA's MATH kernel return a contiguous tensor; SDPA's default CPU kernel keeps `q`'s order of "
    "dims (position-major for `split_heads` of a row-major `x`), but whenever it refuses the call (a last stride other "
    "than 1 in `q`, `k` or `v`, as from a transposed `x`; dropout; a mask that requires grad or has 3 dims), SDPA runs "
    "MATH, and the merge copies",
)
@RULE_SETTINGS
@given(case=attention_cases())
def test_the_output_layout_is_the_kernels_and_decides_the_merge(case):
    q, k, v, *_ = _unpack(case)
    dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)  # training: the fused CPU kernel refuses dropout
    with pytest.raises(RuntimeError), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert dropped.is_contiguous()  # MATH's layout, for either input layout
    assert (merge_heads(dropped)._base is not None) == (1 in dropped.shape[1:] or dropped.numel() == 0)
    with sdpa_kernel(SDPBackend.MATH):
        by_math = F.scaled_dot_product_attention(q, k, v)
    default = F.scaled_dot_product_attention(q, k, v)
    assert scaled_dot_product_attention(q, k, v).is_contiguous() and by_math.is_contiguous()
    if case.layout in ("contiguous", "transposed_x"):  # q's own order, or MATH's (a last stride L): contiguous
        assert default.is_contiguous()
        assert (merge_heads(default)._base is not None) == (1 in default.shape[1:] or default.numel() == 0)
    else:
        assert default.transpose(1, 2).is_contiguous()
        assert merge_heads(default)._base is not None  # so its merge is a view


def _layout_sdpa_keeps(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, ...]:
    """The strides SDPA's default CPU call gives its output: q's dim order where the flash kernel runs (q, k and
    v all with last stride 1), else MATH's row-major."""
    if not q.stride(-1) == k.stride(-1) == v.stride(-1) == 1:
        return torch.empty(q.shape).stride()
    order = sorted(range(3), key=lambda d: -q.stride(d)) + [3]  # q's dims, outermost first
    return torch.empty([q.shape[d] for d in order]).permute(*[order.index(d) for d in range(4)]).stride()


@st.composite
def _strided_heads(draw, sizes: tuple[int, int, int, int]) -> torch.Tensor:
    """A (B, H, L, Dh) tensor stored in any dim order, its head dim maybe strided or padded (last stride != 1)."""
    order = draw(st.permutations(range(4)))
    step, extra = draw(st.integers(1, 2)), draw(st.integers(0, 3))
    stored_sizes = [sizes[i] for i in order]
    stored_sizes[order.index(3)] = sizes[3] * step + extra  # a strided or padded head dim: not dense
    return torch.randn(stored_sizes).permute(*[order.index(i) for i in range(4)])[..., : sizes[3] * step : step]


def _flash_runs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch says why flash is refused: a last stride other than 1
        try:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                F.scaled_dot_product_attention(q, k, v, **kwargs)
        except RuntimeError:
            return False
    return True


@pytest.mark.rule(
    "04",
    "SDPA's default CPU kernel keeps `q`'s order of dims (position-major for `split_heads` of a row-major `x`), but "
    "whenever it refuses the call (a last stride other than 1 in `q`, `k` or `v`, as from a transposed `x`; dropout; a "
    "mask that requires grad or has 3 dims), SDPA runs MATH, and the merge copies",
)
@RULE_SETTINGS
@given(sizes=st.tuples(*[st.integers(2, 4)] * 4), data=st.data())
def test_sdpa_cpu_output_follows_q_only_where_flash_runs(sizes, data):
    q, k, v = (data.draw(_strided_heads(sizes)) for _ in range(3))
    all_last_1 = q.stride(-1) == k.stride(-1) == v.stride(-1) == 1
    assert _flash_runs(q, k, v) == all_last_1  # the kernel's condition: last strides, nothing else here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = F.scaled_dot_product_attention(q, k, v)
        dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    assert out.stride() == _layout_sdpa_keeps(q, k, v)
    assert dropped.is_contiguous()  # dropout: MATH, whatever the inputs
    b, h, length, _ = q.shape
    for bias in (torch.zeros(1, h, length, length, requires_grad=True), torch.zeros(h, length, length)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            masked = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        assert not _flash_runs(q, k, v, attn_mask=bias) and masked.is_contiguous()  # a learnable or 3-D bias: MATH
    b, h, length, dh = q.shape
    x_t = torch.randn(b, h * dh, length).transpose(1, 2)  # a transposed x: split_heads gives last stride L
    heads_t = split_heads(x_t, h)
    row = split_heads(torch.randn(b, length, h * dh), h)
    out_t = F.scaled_dot_product_attention(row, row, heads_t)  # only v from a transposed x is enough
    assert out_t.is_contiguous() and merge_heads(out_t)._base is None  # so the merge copies


@st.composite
def mask_shapes(draw) -> tuple[tuple[int, ...], object]:
    case = draw(attention_cases())
    _, _, _, b, h, lq, lk = _unpack(case)
    ndim = draw(st.integers(0, 5))
    pool = [1, b, h, lq, lk, 2]
    shape = tuple(draw(st.sampled_from(pool)) for _ in range(ndim))
    return shape, case


@pytest.mark.rule(
    "04",
    "It must *broadcast* to the scores' shape `(B, H, Lq, Lk)`; it does not have to *be* that shape.",
)
@pytest.mark.rule(
    "04",
    "`torch.broadcast_shapes(mask.shape, scores.shape)` says whether it does, without touching any data: it must "
    "return the scores' shape itself (broadcasting *with* the scores to a bigger shape is not enough).",
)
@RULE_SETTINGS
@given(case=mask_shapes(), floats=st.booleans())
def test_sdpa_takes_a_mask_exactly_when_it_broadcasts_to_the_scores(case, floats):
    shape, qkv = case
    q, k, v, *sizes = _unpack(qkv)
    scores = tuple(sizes)
    mask = torch.ones(shape, dtype=torch.bool)
    mask = torch.zeros(shape, dtype=q.dtype) if floats else mask
    try:
        to_scores = tuple(torch.broadcast_shapes(shape, scores)) == scores
    except RuntimeError:
        to_scores = False
    accepted = _sdpa(q, k, v, mask) is not None
    assert accepted == (to_scores and len(shape) >= 2)
    if len(shape) == 1:
        with pytest.raises(IndexError):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        with sdpa_kernel(SDPBackend.MATH):
            assert (_sdpa(q, k, v, mask) is not None) == to_scores


@pytest.mark.rule(
    "04",
    "Convention (the same as SDPA): a **boolean mask is `True` where a query may attend to a key**.",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_boolean_mask_is_true_where_a_query_may_attend(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    keep = torch.tensor(data.draw(st.lists(st.booleans(), min_size=b * lq * lk, max_size=b * lq * lk)))
    keep = keep.reshape(b, 1, lq, lk)
    keep[..., 0] = True  # every query keeps a key
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    by_hand = scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v
    float_mask = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, float("-inf"))
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=keep), by_hand)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask), by_hand)


@pytest.mark.rule(
    "04",
    "`nn.MultiheadAttention`'s `key_padding_mask` (what the `nn.Transformer*` layers' `*_key_padding_mask` becomes) "
    "and boolean `attn_mask` mean the opposite, `True` = ignore: pass `~keep`, `~causal_mask(L)`.",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_key_padding_mask_is_true_where_a_key_is_ignored(case, data):
    _, k, _, b, _, _, lk = _unpack(case)
    assume(b > 0 and lk > 0)
    lengths = data.draw(lengths_for(b, lk))  # every sequence keeps a key
    keep = padding_mask(lengths, lk)[:, 0, 0]  # (B, Lk), True = may attend, as SDPA reads it
    x = k[:, 0].detach().float()  # (B, Lk, E): self-attention over the keys, in the modules' float32
    e = x.shape[-1]
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(e, 1, batch_first=True)
    with torch.no_grad():
        w_right = mha(x, x, x, key_padding_mask=~keep)[1]  # (B, Lk, Lk), averaged over heads
        w_wrong = mha(x, x, x, key_padding_mask=keep)[1]
    assert (w_right.masked_select(~keep[:, None, :].expand_as(w_right)) == 0).all()
    torch.testing.assert_close(w_right.sum(-1), torch.ones(b, lk))
    partly = (lengths > 0) & (lengths < lk)  # with keep passed, those sequences attend to their padding only
    assert (w_wrong[partly].masked_select(keep[partly][:, None, :].expand_as(w_wrong[partly])) == 0).all()
    layer = torch.nn.TransformerEncoderLayer(e, 1, dim_feedforward=4, dropout=0.0, batch_first=True)
    noise = torch.where(keep[..., None], x, torch.randn(x.shape))  # padded positions' content changed
    with torch.no_grad():
        out, out_noise = (layer(t, src_key_padding_mask=~keep) for t in (x, noise))
    torch.testing.assert_close(out[keep], out_noise[keep])  # real tokens never read the padding
    causal = causal_mask(lk)  # True = may attend, the course's convention
    with torch.no_grad():
        w_causal = mha(x, x, x, attn_mask=~causal)[1]
        w_raw = mha(x, x, x, attn_mask=causal)[1]  # passed as is: MHA reads True as "ignore"
    assert (w_causal.masked_select(~causal.expand_as(w_causal)) == 0).all()
    torch.testing.assert_close(w_causal.sum(-1), torch.ones(b, lk))
    early = w_raw[:, :-1]  # the last query bans every key as is: a NaN row
    assert (early.masked_select(causal[:-1].expand_as(early)) == 0).all()  # so the earlier ones see only the future


@pytest.mark.rule(
    "04",
    "it turns a boolean `False` into `-inf`, but it adds a float mask to the scores as it is.",
)
@pytest.mark.rule(
    "04",
    "So a 0/1 float keep mask, what `keep.float()` gives, is silently wrong: a kept key gets `+1`, a padded key "
    "`+0`, so a padded key's weight shrinks only by a factor `e ≈ 2.7` against a kept key's, instead of to 0.",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_float_mask_is_added_so_a_zero_one_mask_is_wrong(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    lengths = data.draw(lengths_for(b, lk))
    keep = padding_mask(lengths, lk)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    as_float = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.to(q.dtype))
    torch.testing.assert_close(as_float, (scores + keep.to(q.dtype)).softmax(-1) @ v)  # added as it is
    by_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(by_bool, scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v)  # False: -inf
    log_weights = (scores + keep.to(q.dtype)).log_softmax(-1)  # in logs: no underflow to 0
    assert torch.isfinite(log_weights).all()  # every padded key keeps a weight
    for i in range(b):
        n = int(lengths[i])
        if n < lk:  # against a kept key (key 0 always is), a padded one's weight shrinks by e exactly
            torch.testing.assert_close(
                log_weights[i, ..., n] - log_weights[i, ..., 0], scores[i, ..., n] - scores[i, ..., 0] - 1
            )


@pytest.mark.rule(
    "04",
    "Whether key `j` is real depends only on the batch item `b` and the key position `j`, so those are the only dims "
    "it needs; the two 1s broadcast over heads and over **queries** (no query may look at a padded key).",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_padding_mask_hides_padded_keys_from_every_query_and_head(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    lengths = data.draw(lengths_for(b, lk))
    mask = padding_mask(lengths, lk)
    assert mask.shape == (b, 1, 1, lk)
    _, weights = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    for i in range(b):
        assert weights[i, :, :, int(lengths[i]) :].abs().sum() == 0
    torch.testing.assert_close(weights.sum(-1), torch.ones(b, h, lq, dtype=q.dtype))


@pytest.mark.rule(
    "04",
    "Each row of weights is a softmax, so it **sums to 1**, and a masked key gets **exactly 0** (`exp(-inf) = 0`), "
    "while the row keeps a key (section 6b: the other case).",
)
@RULE_SETTINGS
@given(lq=dims, lk=dims, data=st.data())
def test_weight_rows_sum_to_one_while_a_key_is_kept(lq, lk, data):
    keep = torch.tensor(data.draw(st.lists(st.booleans(), min_size=lq * lk, max_size=lq * lk))).reshape(lq, lk)
    scores = torch.randn(lq, lk, dtype=torch.float64)
    weights = scores.masked_fill(~keep, float("-inf")).softmax(-1)
    alive = keep.any(-1)
    torch.testing.assert_close(weights[alive].sum(-1), torch.ones(int(alive.sum()), dtype=torch.float64))
    assert (weights[alive][~keep[alive]] == 0).all()
    assert torch.isnan(weights[~alive]).all()  # the other case: 0 / 0


@pytest.mark.rule(
    "04",
    "With `Lq != Lk`, `j <= i` puts query 0 beside key 0 (**top-left**, as `is_causal=True` and `causal_mask(Lq, "
    "Lk)` do).",
)
@pytest.mark.rule(
    "04",
    "When the queries are the *last* `Lq` of `Lk` positions (a decoding step with cached keys), query `i` sits at "
    "position `i + Lk - Lq` and may see `j <= i + Lk - Lq` (**lower-right**, "
    "`torch.nn.attention.bias.causal_lower_right`); the top-left mask lets a single new query see key 0 only.",
)
@RULE_SETTINGS
@given(case=attention_cases())
def test_causal_alignment_top_left_and_lower_right(case):
    q, k, v, b, h, lq, lk = _unpack(case)
    assume(lq <= lk)  # a decoding step: the queries are the last Lq of Lk positions
    top_left = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None]
    assert torch.equal(causal_mask(lq, lk), top_left)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True), _sdpa(q, k, v, top_left))
    lower_right = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + (lk - lq)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(lq, lk)), _sdpa(q, k, v, lower_right)
    )
    assert causal_mask(1, lk).tolist() == [[True] + [False] * (lk - 1)]


@pytest.mark.rule(
    "04",
    "In self-attention `Lq == Lk`, so both broadcast to `(B, H, L, L)`: **no error**, and real tokens go on "
    "attending to padding.",
)
@pytest.mark.rule(
    "04",
    "(In cross-attention, `Lq != Lk`, the same mistake does not broadcast to the scores' shape, so SDPA raises, "
    "unless `Lk = 1`, where both orientations are one mask — the cell checks both.)",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_mask_in_the_wrong_orientation(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    lengths = data.draw(lengths_for(b, lk))
    right = padding_mask(lengths, lk)
    wrong = right.transpose(-2, -1)
    got = _sdpa(q, k, v, wrong)
    if lq == lk or lk == 1:
        assert got is not None
        if lk == 1:
            torch.testing.assert_close(got, _sdpa(q, k, v, right))
        else:
            _, weights = scaled_dot_product_attention(q, k, v, wrong, return_weights=True)
            for i in range(b):
                n = int(lengths[i])
                assert n == lk or weights[i, :, :n, n:].sum() > 0  # real queries attend to padded keys
    else:
        assert got is None


@pytest.mark.rule(
    "04",
    "A raw `(B, Lk)` mask meets the **query** dim: right for `B == 1`, silently wrong for `B == Lq > 1` (unless all "
    "sequences share one padding), else an error.",
)
@pytest.mark.rule("04", "any other `B` **raises**, even `B == Lk` when `Lq != Lk` (the real error first).")
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_raw_batch_by_key_mask(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    lengths = data.draw(lengths_for(b, lk, low=0))
    right = padding_mask(lengths, lk)
    raw = _sdpa(q, k, v, right[:, 0, 0])
    if b == 1:
        torch.testing.assert_close(raw, _sdpa(q, k, v, right), equal_nan=True)
    elif b == lq:
        assert raw is not None
        same_padding = bool((lengths == lengths[0]).all())
        assert torch.allclose(raw, _sdpa(q, k, v, right), equal_nan=True) == same_padding
    else:
        assert raw is None


@pytest.mark.rule(
    "04",
    "Unsqueezed at the wrong end, `mask[:, :, None]` `(B, Lk, 1)` reads as `(H, Lq, 1)`: it runs when `B` is 1 or `H` "
    "and `Lk` is `Lq` or 1, and then, for `Lk > 1`, masks queries — wrong for `B == 1` too.",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_mask_unsqueezed_at_the_wrong_end(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    lengths = data.draw(lengths_for(b, lk))
    assume(lk == 1 or bool((lengths < lk).any()))  # some sequence is padded
    right = padding_mask(lengths, lk)
    got = _sdpa(q, k, v, right[:, 0, 0, :, None])
    assert (got is not None) == (b in (1, h) and lk in (lq, 1))
    if got is not None and lk > 1:
        assert not torch.allclose(got, _sdpa(q, k, v, right))


@pytest.mark.rule(
    "04",
    "A query with no visible key: `0/0 = NaN` from a plain softmax; SDPA (on CPU) and `viewlab.attention` return 0.",
)
@RULE_SETTINGS
@given(case=attention_cases(), floats=st.booleans(), math_only=st.booleans(), data=st.data())
def test_a_query_with_no_visible_key(case, floats, math_only, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    keep = torch.tensor(data.draw(st.lists(st.booleans(), min_size=b * lq * lk, max_size=b * lq * lk)))
    keep = keep.reshape(b, 1, lq, lk)
    dead = ~keep.any(-1)  # (B, 1, Lq)
    mask = torch.zeros(keep.shape, dtype=q.dtype).masked_fill(~keep, float("-inf")) if floats else keep
    plain = (q @ k.transpose(-2, -1) / 2).masked_fill(~keep, float("-inf")).softmax(-1) @ v
    if math_only:
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ours = scaled_dot_product_attention(q, k, v, keep)
    rows = dead[..., None].expand(b, h, lq, q.shape[-1])
    assert torch.isnan(plain[rows]).all() and (out[rows] == 0).all() and (ours[rows] == 0).all()


@pytest.mark.rule("04", "A materialised mask costs `H·Lq` times more for the same result.")
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_a_materialised_mask_costs_h_lq_times_more(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    lengths = data.draw(lengths_for(b, lk))
    small = padding_mask(lengths, lk)
    big = small.expand(b, h, lq, lk).contiguous()
    assert big.nbytes == h * lq * small.nbytes
    assert torch.equal(_sdpa(q, k, v, small), _sdpa(q, k, v, big))


@RULE_SETTINGS
@given(b=st.integers(0, 3), c=dims, hh=st.integers(0, 3), w=dims)
def test_expand_as_and_broadcasting_are_identical(b, c, hh, w):
    """Channel attention's product, `x * y.expand_as(x)` against `x * y`: identical in value and memory (the fact
    claim B07 of notebook 07 measures; notebook 04 does not teach the layer)."""
    x = torch.randn(b, c, hh, w)
    y = torch.rand(b, c, 1, 1)
    stretched = y.expand_as(x)
    assert stretched.numel() == 0 or _shares(stretched, y)  # a view: no memory of its own
    a, e = x * y, x * stretched
    assert torch.equal(a, e) and a.shape == e.shape and a.nbytes == e.nbytes
    assert a.numel() == 0 or a.stride() == e.stride()  # (an empty tensor's strides mean nothing)


@pytest.mark.rule(
    "04",
    "Measured here (CPU, torch 2.13) with `is_causal=True`, a boolean and a `0` / `-inf` causal mask: the flash kernel "
    "**does** take a mask; only `MATH` and flash run (flash needs last stride 1 in `q`, `k` and `v`: section 2).",
)
@RULE_SETTINGS
@given(case=attention_cases(), kind=st.sampled_from(["none", "bool", "float", "causal"]))
def test_on_cpu_flash_takes_masks(case, kind):
    q, k, v, b, h, lq, lk = _unpack(case)
    dtype = q.dtype
    keep = padding_mask(torch.full((b,), lk), lk)
    kwargs = {
        "none": {},
        "bool": {"attn_mask": keep},
        "float": {"attn_mask": torch.zeros(keep.shape, dtype=dtype)},
        "causal": {"is_causal": True},
    }[kind]
    ran = {}
    for backend in (
        SDPBackend.MATH,
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.CUDNN_ATTENTION,
    ):
        try:
            with sdpa_kernel(backend):
                ran[backend] = F.scaled_dot_product_attention(q, k, v, **kwargs)
        except RuntimeError:
            ran[backend] = None
    assert ran[SDPBackend.EFFICIENT_ATTENTION] is None and ran[SDPBackend.CUDNN_ATTENTION] is None
    assert ran[SDPBackend.MATH] is not None
    assert (ran[SDPBackend.FLASH_ATTENTION] is not None) == (q.stride(-1) == k.stride(-1) == v.stride(-1) == 1)
    if ran[SDPBackend.FLASH_ATTENTION] is not None:
        torch.testing.assert_close(ran[SDPBackend.FLASH_ATTENTION], ran[SDPBackend.MATH], atol=1e-5, rtol=1e-4)


@pytest.mark.rule(
    "04",
    "Given `attn_mask=` and `is_causal=True` together, the default CPU kernel applies both (undocumented: the docs "
    "say this raises), but MATH refuses them, and on CPU every call flash cannot take runs MATH (section 2 lists some; "
    "next cell). For padding plus causal, pass one mask: "
    "`pad & causal_mask(Lq, Lk)`.",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_attn_mask_with_is_causal_runs_only_on_the_fused_kernel_and_one_mask_is_the_fix(case, data):
    q, k, v, b, _, lq, lk = _unpack(case)
    pad = padding_mask(data.draw(lengths_for(b, lk)), lk)
    if not _flash_runs(q, k, v):  # a last stride other than 1 (a transposed x): the default call runs MATH
        with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True)
        # fresh row-major strides: contiguous() keeps a size-1 head dim's stride, which flash still refuses
        q, k, v = (t.clone(memory_format=torch.contiguous_format) for t in (q, k, v))
    both = F.scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True)
    with sdpa_kernel(SDPBackend.MATH):
        one_mask = F.scaled_dot_product_attention(q, k, v, attn_mask=pad & causal_mask(lq, lk))
        with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
            F.scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True)
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=pad, is_causal=True, dropout_p=0.5)
    torch.testing.assert_close(both, one_mask)


@pytest.mark.rule(
    "04",
    "Torch's SDPA first turns a bool mask into a float one of the mask's own shape: a broadcast mask stays tiny, a "
    "materialised one becomes a full float32 score tensor",
)
@RULE_SETTINGS
@given(case=attention_cases(), data=st.data())
def test_sdpa_pays_a_float_copy_of_a_bool_mask_at_the_masks_own_shape(case, data):
    q, k, v, b, h, lq, lk = _unpack(case)
    shape = tuple(data.draw(st.sampled_from([1, n])) for n in (b, h, lq)) + (lk,)  # any shape that broadcasts
    keep = torch.rand(shape, generator=torch.Generator().manual_seed(lq * 7 + lk)) > 0.3
    keep[..., 0] = True
    additive = torch.zeros(shape, dtype=q.dtype).masked_fill(~keep, float("-inf"))
    with measure() as by_bool:
        out_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    with measure() as by_float:
        out_float = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
    assert by_bool.peak_bytes - by_float.peak_bytes == keep.numel() * q.element_size()
    torch.testing.assert_close(out_bool, out_float)


@pytest.mark.rule(
    "04",
    "Keys shared across heads, `(B, 1, Dh, Lk)`, become a temporary `H` times their size (when `q` requires grad, it "
    "is saved for backward",
)
@RULE_SETTINGS
@given(b=st.integers(2, 3), h=st.integers(2, 4), lq=dims, lk=dims, dh=dims)
def test_matmuls_copy_of_shared_keys_is_freed_at_once_or_kept_for_backward(b, h, lq, lk, dh):
    keys = torch.randn(b, 1, dh, lk)  # B > 1: with B = 1 the batch dims merge as a view and nothing is copied
    for grad in (False, True):
        q = torch.randn(b, h, lq, dh, requires_grad=grad)
        with measure() as m:
            scores = q @ keys
        made, kept = m.peak_bytes - m.allocated_bytes, m.allocated_bytes - scores.nbytes
        assert (made, kept) == ((0, h * keys.nbytes) if grad else (h * keys.nbytes, 0))
