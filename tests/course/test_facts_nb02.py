"""The general rules notebook 02 states in prose, checked on many shapes (the notebook checks one example each).

- Section 5: after a reduction of an (N, D) tensor without keepdim, dim 0 broadcasts back correctly (right
  alignment), dim 1 raises when N != D and neither is 1, and is silently wrong when N == D > 1 or D == 1 != N;
  keepdim=True is right for both.
- Section 7: torch.matmul copies an operand exactly when its expanded batch dims cannot be flattened into one
  as a view (what matmul does before its single bmm); otherwise it allocates only the result.
- Section 8: NumPy and torch broadcast 2,000 seeded random sets of 2-3 shapes (ranks 0-4, sizes 0-3) to the same
  shape, and refuse the same sets (the notebook reads six named cases).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from viewlab import measure


def _centre(x: torch.Tensor, dim: int, keepdim: bool) -> str:
    try:
        out = x - x.mean(dim=dim, keepdim=keepdim)
    except RuntimeError:
        return "raises"
    by_loop = torch.stack([v - v.mean() for v in x.unbind(1 - dim)], dim=1 - dim)
    return "right" if out.shape == by_loop.shape and torch.allclose(out, by_loop) else "silently wrong"


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 2**31 - 1))
def test_reduction_broadcasts_back_by_right_alignment(n, d, seed):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    assert _centre(x, 0, keepdim=False) == "right"  # (D,) meets D: the rule, not luck
    assert _centre(x, 1, keepdim=False) == ("raises" if n != d else "silently wrong")  # (N,) meets D
    assert _centre(x, 0, keepdim=True) == _centre(x, 1, keepdim=True) == "right"


def test_the_centring_check_can_say_each_verdict():
    x = torch.arange(9.0).reshape(3, 3) ** 2
    assert {_centre(x, 1, False), _centre(x, 1, True), _centre(x[:2], 1, False)} == {
        "silently wrong",
        "right",
        "raises",
    }


@st.composite
def _batched_pair(draw):
    rank = draw(st.integers(1, 3))
    batch = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    own = [draw(st.lists(st.booleans(), min_size=rank, max_size=rank)) for _ in range(2)]
    cut = [draw(st.integers(0, rank - 1)) for _ in range(2)]
    shapes = [[s if keep else 1 for s, keep in zip(batch, keeps)][c:] for keeps, c in zip(own, cut)]
    return tuple(shapes[0]) + (2, 3), tuple(shapes[1]) + (3, 4)


def _flattens_as_view(t: torch.Tensor, batch: torch.Size) -> bool:
    flat = t.expand(*batch, *t.shape[-2:]).reshape(-1, *t.shape[-2:])
    return flat.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()


@settings(max_examples=120, deadline=None, derandomize=True)
@given(_batched_pair())
def test_matmul_copies_exactly_the_operands_whose_batch_cannot_flatten_as_a_view(shapes):
    a, b = torch.randn(shapes[0]), torch.randn(shapes[1])
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    with measure(device="cpu") as m:
        c = a @ b
    expected_copies = sum(
        batch.numel() * t.shape[-2] * t.shape[-1] * t.element_size() for t in (a, b) if not _flattens_as_view(t, batch)
    )
    assert m.peak_bytes == c.untyped_storage().nbytes() + expected_copies, (shapes, m.peak_bytes)


def test_both_outcomes_of_the_matmul_rule_occur():
    one, many = torch.randn(1, 2, 3), torch.randn(5, 3, 4)
    assert _flattens_as_view(one, torch.Size([5]))
    a = torch.randn(2, 1, 3, 4)
    assert not _flattens_as_view(a, torch.Size([2, 5]))
    with measure(device="cpu") as m:
        c = one @ many
    assert m.peak_bytes == c.untyped_storage().nbytes()


def test_bmm_broadcasts_nothing():
    one, many = torch.randn(1, 2, 3), torch.randn(5, 3, 4)
    with pytest.raises(RuntimeError, match="Expected size for first two dimensions of batch2"):
        torch.bmm(one, many)
    with pytest.raises(RuntimeError, match="must be a 3D tensor"):
        torch.bmm(torch.randn(2, 1, 2, 3), many)
    assert torch.allclose(torch.bmm(one.expand(5, 2, 3), many), one @ many)


def _rows_back_to_back(x: torch.Tensor) -> bool:
    """torch's strict check before it folds ``x @ W``: ``stride[i] == stride[i+1] * size[i+1]`` for every dim but
    the last, size-1 dims included (a ``view`` would ignore them)."""
    return x.numel() == 0 or all(x.stride(i) == x.stride(i + 1) * x.size(i + 1) for i in range(x.dim() - 2))


def test_the_fold_check_is_stricter_than_a_view_on_a_size_1_dim():
    lone = torch.randn(5, 1, 4).transpose(0, 1)  # (1, 5, 4), stride (4, 4, 1)
    assert lone.view(5, 4).data_ptr() == lone.data_ptr() and not _rows_back_to_back(lone)
    with measure(device="cpu", log_ops=True) as m:
        lone @ torch.randn(4, 6)
    assert "bmm" in [op.name.split(".")[1] for op in m.ops]


def _broadcast(library, shapes):
    try:
        return tuple(library.broadcast_shapes(*shapes))
    except (ValueError, RuntimeError):  # NumPy raises ValueError, torch RuntimeError
        return "refused"


def test_numpy_and_torch_agree_on_2000_seeded_sets_of_shapes():
    rng = np.random.default_rng(0)  # 2-3 shapes of rank 0-4, sizes 0-3
    samples = [
        [tuple(rng.integers(0, 4, size=rng.integers(0, 5)).tolist()) for _ in range(rng.integers(2, 4))]
        for _ in range(2000)
    ]
    outcomes = [(_broadcast(np, s), _broadcast(torch, s)) for s in samples]
    assert all(n == t for n, t in outcomes), [(s, o) for s, o in zip(samples, outcomes) if o[0] != o[1]][:3]
    refused = sum(n == "refused" for n, _ in outcomes)
    assert 0 < refused < len(samples)  # both outcomes occur, so the sweep compares refusals and shapes alike
