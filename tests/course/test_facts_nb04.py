"""The rules notebook 04 states about masks and merged heads, checked over more cases than the notebook shows."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from viewlab.attention import merge_heads, padding_mask


def _sdpa_with(mask: torch.Tensor, b: int, h: int, lq: int, lk: int) -> torch.Tensor | None:
    g = torch.Generator().manual_seed(b * 1000 + lq * 10 + lk)
    q = torch.randn(b, h, lq, 4, generator=g)
    k, v = torch.randn(b, h, lk, 4, generator=g), torch.randn(b, h, lk, 4, generator=g)
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    except RuntimeError:
        return None


@pytest.mark.parametrize(("b", "lq", "lk"), list(itertools.product(range(1, 5), range(1, 5), (0, 2))))
def test_a_raw_batch_by_key_mask_meets_the_query_dim(b, lq, lk):
    lk = lq + lk  # self-attention (Lk == Lq) and cross-attention (Lk == Lq + 2)
    lengths = torch.arange(lk - 1, lk - 1 - b, -1).clamp(min=0)  # padded, distinct lengths where B <= Lk
    correct = padding_mask(lengths, lk)
    raw = _sdpa_with(correct[:, 0, 0], b, 2, lq, lk)
    right = _sdpa_with(correct, b, 2, lq, lk)
    assert right is not None
    if b not in (1, lq):
        assert raw is None  # the notebook's rule: B against Lq decides
    elif b == 1:
        torch.testing.assert_close(raw, right)  # (1, Lk) reads as (1, 1, 1, Lk): right
    else:
        assert raw is not None and not torch.allclose(raw, right)  # B == Lq > 1: silently wrong


@pytest.mark.parametrize("length", [1, 2, 5])
@pytest.mark.parametrize("written", ["heads first", "positions first"])
def test_merging_heads_is_a_view_exactly_when_one_heads_features_follow_the_last(length, written):
    b, h, dh = 2, 3, 4
    if written == "heads first":  # contiguous (B, H, L, Dh), like a plain matmul output
        out = torch.randn(b, h, length, dh)
    else:  # (B, L, H, Dh) in memory, like a kernel that writes position by position
        out = torch.randn(b, length, h, dh).transpose(1, 2)
    merged = merge_heads(out)
    view = merged.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
    t = out.transpose(1, 2)
    assert view == (t.stride(2) == dh * t.stride(3))
    assert view == (written == "positions first" or length == 1)
    torch.testing.assert_close(merged, out.transpose(1, 2).reshape(b, length, h * dh))
