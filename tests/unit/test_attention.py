"""viewlab.attention matches PyTorch's own attention, masks are built by broadcasting, bad input is explained."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from viewlab import measure
from viewlab.attention import (
    causal_mask,
    combine_masks,
    merge_heads,
    multi_head_self_attention,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)

DOUBLE = dict(dtype=torch.float64)


def _qkv(b, h, lq, lk, e, ev=None, gen=None):
    gen = gen or torch.Generator().manual_seed(0)
    q = torch.randn(b, h, lq, e, generator=gen, **DOUBLE)
    k = torch.randn(b, h, lk, e, generator=gen, **DOUBLE)
    v = torch.randn(b, h, lk, ev or e, generator=gen, **DOUBLE)
    return q, k, v


@pytest.mark.parametrize(
    "b,h,lq,lk,e",
    [(1, 1, 1, 1, 4), (2, 4, 5, 5, 8), (3, 2, 7, 4, 16), (4, 8, 1, 9, 2), (2, 3, 6, 6, 5)],
)
def test_matches_sdpa_without_mask(b, h, lq, lk, e):
    q, k, v = _qkv(b, h, lq, lk, e)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))


@pytest.mark.parametrize("b,h,seq,e", [(2, 4, 6, 8), (3, 1, 5, 4), (5, 2, 9, 16)])
def test_matches_sdpa_with_padding(b, h, seq, e):
    q, k, v = _qkv(b, h, seq, seq, e)
    lengths = torch.randint(1, seq + 1, (b,), generator=torch.Generator().manual_seed(b))
    lengths[0] = seq  # one unpadded row, the rest random
    mask = padding_mask(lengths, seq)
    assert mask.shape == (b, 1, 1, seq)
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    )


@pytest.mark.parametrize("b,h,lq,lk", [(2, 3, 5, 5), (1, 2, 3, 7), (2, 1, 6, 6)])
def test_matches_sdpa_causal(b, h, lq, lk):
    q, k, v = _qkv(b, h, lq, lk, 8)
    ours = scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    torch.testing.assert_close(ours, scaled_dot_product_attention(q, k, v, causal_mask(lq, lk)))


def test_matches_sdpa_padding_and_causal_combined_and_float_mask():
    q, k, v = _qkv(3, 2, 6, 6, 4)
    mask = combine_masks(padding_mask(torch.tensor([6, 3, 1]), 6), causal_mask(6))
    assert mask.shape == (3, 1, 6, 6)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask), expected)
    additive = torch.zeros(mask.shape, **DOUBLE).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, additive), expected)


def test_custom_scale_and_value_dim_and_broadcast_batch():
    q, k, v = _qkv(2, 3, 4, 5, 6, ev=3)
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, scale=0.3), F.scaled_dot_product_attention(q, k, v, scale=0.3)
    )
    # one key/value set shared by every batch item: k and v broadcast over dim 0
    out = scaled_dot_product_attention(q, k[:1], v[:1])
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k[:1].expand_as(k), v[:1].expand_as(v)))


def test_fully_masked_row_is_zero_like_sdpa_or_nan_when_asked():
    q, k, v = _qkv(1, 1, 3, 3, 4)
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ours = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(ours, sdpa)
    assert torch.equal(ours[0, 0, 1], torch.zeros(4, **DOUBLE))
    raw = scaled_dot_product_attention(q, k, v, mask, fully_masked="nan")
    assert torch.isnan(raw[0, 0, 1]).all() and not torch.isnan(raw[0, 0, [0, 2]]).any()


@pytest.mark.parametrize("float_mask", [False, True])
def test_fully_masked_row_leaves_every_gradient_finite(float_mask):
    q, k, v = (t.requires_grad_() for t in _qkv(2, 1, 3, 3, 4))
    mask = padding_mask(torch.tensor([3, 0]), 3)
    if float_mask:
        mask = torch.zeros(mask.shape, **DOUBLE).masked_fill(~mask, float("-inf"))
    grads = torch.autograd.grad(scaled_dot_product_attention(q, k, v, mask).sum(), (q, k, v))
    assert all(torch.isfinite(g).all() for g in grads)
    raw = scaled_dot_product_attention(q, k, v, mask, fully_masked="nan")
    assert torch.isnan(torch.autograd.grad(raw.sum(), v)[0]).any()


def test_weights_rows_sum_to_one_and_respect_mask():
    q, k, v = _qkv(2, 2, 4, 4, 4)
    mask = padding_mask(torch.tensor([4, 2]), 4)
    _, w = scaled_dot_product_attention(q, k, v, mask, return_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 4, **DOUBLE))
    assert torch.equal(w[1, :, :, 2:], torch.zeros(2, 4, 2, **DOUBLE))


def test_gradients_match_sdpa():
    q, k, v = (t.requires_grad_() for t in _qkv(2, 2, 5, 5, 4))
    mask = padding_mask(torch.tensor([5, 3]), 5)
    grads_ours = torch.autograd.grad(scaled_dot_product_attention(q, k, v, mask, is_causal=False).sum(), (q, k, v))
    grads_sdpa = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum(), (q, k, v))
    for a, b in zip(grads_ours, grads_sdpa):
        torch.testing.assert_close(a, b)


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(1, 3),
    h=st.integers(1, 3),
    lq=st.integers(1, 6),
    lk=st.integers(1, 6),
    e=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    causal=st.booleans(),
)
def test_matches_sdpa_property(b, h, lq, lk, e, seed, causal):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = _qkv(b, h, lq, lk, e, gen=gen)
    lengths = torch.randint(1, lk + 1, (b,), generator=gen)
    mask = padding_mask(lengths, lk)
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v, mask, is_causal=causal),
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask & causal_mask(lq, lk) if causal else mask),
    )


@pytest.mark.parametrize("b,seq,d,heads", [(2, 5, 8, 2), (3, 7, 12, 4), (1, 1, 6, 6)])
def test_multi_head_matches_nn_multihead_attention(b, seq, d, heads):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(d, heads, batch_first=True).double().eval()
    x = torch.randn(b, seq, d, **DOUBLE)
    lengths = torch.arange(seq, seq - b, -1).clamp(min=1)
    params = (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)
    with torch.no_grad():
        ours = multi_head_self_attention(x, heads, *params, lengths=lengths)
        key_padding = ~padding_mask(lengths, seq)[:, 0, 0]  # nn.MultiheadAttention: True = ignore
        ref, _ = mha(x, x, x, key_padding_mask=key_padding, need_weights=False)
        torch.testing.assert_close(ours, ref)
        ours_c = multi_head_self_attention(x, heads, *params, causal=True)
        ref_c, _ = mha(x, x, x, attn_mask=~causal_mask(seq), need_weights=False)
        torch.testing.assert_close(ours_c, ref_c)


def test_masks_are_built_by_broadcasting_and_stay_small():
    lengths = torch.tensor([5, 2, 7, 1])
    with measure(device="cpu") as m:
        mask = padding_mask(lengths, 7)
    assert mask.shape == (4, 1, 1, 7)
    assert mask.int().sum(-1).flatten().tolist() == [5, 2, 7, 1]
    # 4*7 booleans for the mask (plus the 7 positions and the small temporaries freed inside)
    assert m.allocated_bytes == 4 * 7
    assert m.peak_bytes < 4 * 7 * 8 * 7  # far below a mask materialised per head and query (B*H*L*L)
    c = causal_mask(3, 5)
    assert c.int().tolist() == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]]
    assert torch.equal(c, torch.ones(3, 5, dtype=torch.bool).tril())


def test_split_heads_is_a_view_and_merge_heads_inverts_it():
    x = torch.randn(2, 5, 12)
    h = split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4) and h.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert torch.equal(h[:, 1], x[:, :, 4:8])
    assert torch.equal(merge_heads(h), x)


def test_errors_name_the_shape_and_the_dimension():
    q, k, v = _qkv(2, 2, 4, 4, 8)
    with pytest.raises(ValueError, match=r"same last dim.*dim -1 = 8.*dim -1 = 7"):
        scaled_dot_product_attention(q, k[..., :7], v)
    with pytest.raises(ValueError, match=r"same length \(dim -2\)"):
        scaled_dot_product_attention(q, k, v[..., :3, :])
    with pytest.raises(ValueError, match=r"size 3 at scores dim 3 must be 1 or 4.*mask\[:, None, None, :\]"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"size 2 at scores dim 2 must be 1 or 4"):
        scaled_dot_product_attention(q, k, v, torch.ones(2, 4, dtype=torch.bool))  # (B, L) read as (Lq, Lk) with B != L
    with pytest.raises(TypeError, match="ambiguous"):
        scaled_dot_product_attention(q, k, v, torch.ones(4, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="fully_masked"):
        scaled_dot_product_attention(q, k, v, fully_masked="ignore")
    with pytest.raises(TypeError, match="expects a torch.Tensor for `k`"):
        scaled_dot_product_attention(q, [[1.0]], v)
    with pytest.raises(ValueError, match=r"dim 2 of x, shape \(2, 3, 10\)\) is 10, not divisible by num_heads=3"):
        split_heads(torch.zeros(2, 3, 10), 3)
    with pytest.raises(ValueError, match="must be 1-D"):
        padding_mask(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(TypeError, match="integers"):
        padding_mask(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"exceeds max_len=3; pass max_len >= 5"):
        padding_mask(torch.tensor([5, 2]), 3)
    with pytest.raises(ValueError, match="do not broadcast"):
        combine_masks(torch.ones(2, 3, dtype=torch.bool), torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"lengths must have shape \(B,\) = \(2,\)"):
        x = torch.zeros(2, 3, 4)
        w = torch.zeros(12, 4)
        multi_head_self_attention(x, 2, w, None, torch.zeros(4, 4), None, lengths=torch.tensor([1, 2, 3]))


# --- regressions: wrong answers and obscure failures, now correct results or clear errors -------------------
def test_meta_query_with_cpu_keys_is_refused_regression():
    # used to return a CPU tensor of uninitialised memory
    q = torch.empty(1, 2, 4, device="meta")
    k = v = torch.randn(1, 2, 4)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention\(\): `k` is on cpu but `q` is on meta"):
        scaled_dot_product_attention(q, k, v)
    with pytest.raises(ValueError, match=r"`mask` is on meta but `q` is on cpu"):
        scaled_dot_product_attention(k, k, v, torch.ones(2, 2, dtype=torch.bool, device="meta"))
    # all on meta is fine: shapes only, and the answer is on meta
    out = scaled_dot_product_attention(q, q, q)
    assert out.device.type == "meta" and out.shape == (1, 2, 4)


def test_float64_mask_with_float32_inputs_is_refused_regression():
    # used to fail deep in torch: "expected scalar type Double but found Float"
    q = torch.randn(1, 3, 4)
    with pytest.raises(
        TypeError, match=r"float mask .* must have q's dtype torch.float32; `mask` has dtype torch.float64"
    ):
        scaled_dot_product_attention(q, q, q, torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"`k` has dtype torch.float64 but `q` has torch.float32"):
        scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(TypeError, match=r"`q` must be a tensor of floating-point numbers.*Pass q.float\(\)"):
        scaled_dot_product_attention(q.long(), q, q)


def test_head_dim_0_gives_sdpas_answer_regression():
    # used to raise ZeroDivisionError (1 / sqrt(0)); every score is an empty dot product, 0
    q = k = torch.zeros(2, 3, 0, dtype=torch.float64)
    v = torch.arange(18.0, dtype=torch.float64).view(2, 3, 3)
    ours = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(ours, v.mean(dim=1, keepdim=True).expand(2, 3, 3))


def test_multi_head_errors_name_multi_head_self_attention_regression():
    x = torch.zeros(2, 3, 4)
    w_in, w_out = torch.zeros(12, 4), torch.zeros(4, 4)
    with pytest.raises(ValueError, match=r"^multi_head_self_attention\(\): the model dim .* num_heads=3"):
        multi_head_self_attention(x, 3, w_in, None, w_out, None)  # was worded as split_heads()
    with pytest.raises(ValueError, match=r"^multi_head_self_attention\(\): a length \(5\) exceeds max_len=3"):
        multi_head_self_attention(x, 2, w_in, None, w_out, None, lengths=torch.tensor([5, 1]))  # was padding_mask()
    with pytest.raises(TypeError, match=r"^multi_head_self_attention\(\): `in_proj_weight` has dtype torch.float64"):
        multi_head_self_attention(x, 2, w_in.double(), None, w_out, None)  # was: mat1 and mat2 must have the same dtype
    with pytest.raises(TypeError, match=r"^multi_head_self_attention\(\): `causal` must be True or False; got str"):
        multi_head_self_attention(x, 2, w_in, None, w_out, None, causal="yes")


def test_masks_check_their_arguments():
    with pytest.raises(ValueError, match=r"causal_mask\(\): `device` must be a device such as"):
        causal_mask(3, device="gpu")
    with pytest.raises(ValueError, match=r"causal_mask\(\): a \(1000000000000, 1000000000000\) mask would take"):
        causal_mask(10**12)
    with pytest.raises(ValueError, match=r"combine_masks\(\): `masks\[1\]` is on meta but `masks\[0\]` is on cpu"):
        combine_masks(causal_mask(2), causal_mask(2, device="meta"))
    with pytest.raises(ValueError, match=r"padding_mask\(\): `lengths` must be a tensor that holds values"):
        padding_mask(torch.zeros(2, dtype=torch.long, device="meta"))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized = torch.quantize_per_tensor(torch.tensor([2.0, 1.0]), 1.0, 0, torch.qint8)
    with pytest.raises(TypeError, match=r"padding_mask\(\): `lengths` must be a tensor of plain numbers"):
        padding_mask(quantized)  # found by the fuzz suite: used to return a wrong mask


def test_padding_mask_of_an_empty_batch_allocates_nothing_whatever_max_len_regression():
    # found by the fuzz suite: lengths=[] with max_len=2**31 built a 16 GiB position row before giving (0, 1, 1, L)
    from viewlab.attention import padding_mask

    with measure(device="cpu") as m:
        mask = padding_mask(torch.tensor([], dtype=torch.long), 2**31)
    assert mask.shape == (0, 1, 1, 2**31) and mask.dtype == torch.bool
    assert m.peak_bytes == 0


def test_a_mask_too_big_for_the_free_memory_is_refused_before_it_is_built_regression():
    """A padding mask of 2**31 positions needs about 19 GB (an int64 position row and the bool mask). The old
    limit was the machine's total memory, so on a 24 GB machine it was built and the process was killed by
    the kernel's out-of-memory killer (a random fuzz example did this in `make test`). The limit is now half
    of the memory free at the call."""
    from viewlab._checks import spare_bytes
    from viewlab.attention import padding_mask

    needed = 9 * 2**31  # (B = 1 bool) + 8 bytes of position per key
    if needed <= spare_bytes():
        pytest.skip(f"this machine can spare {spare_bytes():,} bytes: the mask would really be built")
    with pytest.raises(ValueError, match=r"^padding_mask\(\): a padding mask of shape \(1, 1, 1, 2147483648\) would"):
        padding_mask(torch.tensor([1]), max_len=2**31)
    assert padding_mask(torch.tensor([1]), max_len=4).shape == (1, 1, 1, 4)
