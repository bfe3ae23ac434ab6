"""Attention written out by hand, so every broadcast is visible.

Multi-head attention with masks built by broadcasting (never materialised per batch and head). The conventions are those of ``torch.nn.functional.scaled_dot_product_attention``
(SDPA): tensors are ``(batch..., heads, length, head_dim)``; a bool mask is ``True`` where a query **may**
attend to a key (``nn.MultiheadAttention``'s ``key_padding_mask`` is the opposite); a float mask is *added*
to the scores; a query whose keys are all masked returns zeros. A padding mask is ``(B, 1, 1, Lk)``: it
depends only on the batch item and the key, and broadcasts over heads and queries. A causal mask is
``(Lq, Lk)``: it depends only on the two positions, and broadcasts over batch and heads.

>>> tuple(combine_masks(padding_mask(torch.tensor([2, 3])), causal_mask(3)).shape)
(2, 1, 3, 3)
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ._checks import (
    FLOAT,
    INT,
    INT64_MAX,
    entry,
    problem,
    require_allocation,
    require_bool,
    require_choice,
    require_device,
    require_environment_device,
    require_int,
    require_number,
    require_same_device,
    require_same_dtype,
    require_shape,
    require_tensor,
)

__all__ = ["padding_mask", "causal_mask", "combine_masks", "scaled_dot_product_attention"]
__all__ += ["split_heads", "merge_heads", "multi_head_self_attention"]


@entry("padding_mask")
def padding_mask(lengths: Any, max_len: int | None = None) -> torch.Tensor:
    """Boolean key-padding mask of shape ``(B, 1, 1, max_len)``: ``True`` where key ``j < lengths[b]``.

    A ``(1, L)`` row of positions against a ``(B, 1)`` column of ``lengths`` (1-D integers, not ``meta``).
    ``max_len``: an int >= the longest length (the default).

    >>> padding_mask(torch.tensor([3, 1]), max_len=4)[:, 0, 0].int().tolist()
    [[1, 1, 1, 0], [1, 0, 0, 0]]
    """
    lengths = require_tensor(lengths, "lengths", meta=False)
    if lengths.dim() != 1:
        text = "`lengths` must be 1-D (one length per batch item), got shape"
        fix = "For a (B, L) 0/1 mask you already have, use `mask.bool()[:, None, None, :]` instead."
        raise problem(ValueError, f"{text} {tuple(lengths.shape)}. {fix}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool or lengths.is_complex():
        raise problem(TypeError, f"`lengths` must hold integers, got dtype {lengths.dtype}; pass lengths.long().")
    b = lengths.numel()
    if b and int(lengths.min()) < 0:
        raise problem(ValueError, f"lengths must be >= 0, got {lengths.tolist()}.")
    longest = int(lengths.max()) if b else 0
    max_len = longest if max_len is None else require_int(max_len, "max_len", maximum=INT64_MAX)
    if longest > max_len:
        fix = f"pass max_len >= {longest} (the padded sequence length)."
        raise problem(ValueError, f"a length ({longest}) exceeds max_len={max_len}; {fix}")
    if not b:  # an empty batch: no positions to compare, whatever max_len is
        return torch.zeros(0, 1, 1, max_len, dtype=torch.bool, device=lengths.device)
    require_allocation(b * max_len + 8 * max_len, f"a padding mask of shape ({b}, 1, 1, {max_len})", lengths.device)
    return (torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None])[:, None, None, :]


@entry("causal_mask")
def causal_mask(q_len: int, k_len: int | None = None, device: Any = None) -> torch.Tensor:
    """Boolean ``(q_len, k_len)`` mask, ``True`` where key ``j <= i`` (query ``i`` sees the past): a ``(q_len, 1)``
    column compared with a ``(1, k_len)`` row, aligned at the top left like SDPA's ``is_causal=True``.

    >>> causal_mask(3).int().tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    q_len = require_int(q_len, "q_len", maximum=INT64_MAX)
    k_len = q_len if k_len is None else require_int(k_len, "k_len", maximum=INT64_MAX)
    device = require_device(device)
    if device is not None:
        require_environment_device(device)
    require_allocation(q_len * k_len + 8 * (q_len + k_len), f"a ({q_len}, {k_len}) mask", device)
    return torch.arange(k_len, device=device)[None, :] <= torch.arange(q_len, device=device)[:, None]


@entry("combine_masks")
def combine_masks(*masks: torch.Tensor) -> torch.Tensor:
    """Logical AND of bool masks on one device, by broadcasting; the result has the broadcast shape.

    >>> m = combine_masks(padding_mask(torch.tensor([2, 3]), 3), causal_mask(3))
    >>> tuple(m.shape), m[0, 0].int().tolist()
    ((2, 1, 3, 3), [[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    """
    if not masks:
        raise problem(ValueError, "needs at least one mask, e.g. combine_masks(pad, causal).")
    for n, m in enumerate(masks):
        if require_tensor(m, f"masks[{n}]").dtype != torch.bool:
            raise problem(TypeError, f"masks[{n}] has dtype {m.dtype}; boolean masks only (True = attend).")
    shapes = [tuple(m.shape) for m in masks]
    require_same_device({f"masks[{n}]": m for n, m in enumerate(masks)})
    try:
        result = torch.broadcast_shapes(*shapes)
    except RuntimeError as exc:
        raise problem(ValueError, f"mask shapes {shapes} do not broadcast together ({exc}).") from None
    require_allocation(math.prod(result), f"the combined mask of shape {tuple(result)}", masks[0].device)
    out = masks[0]
    for m in masks[1:]:
        out = out & m
    return out


def _check_qkv(q: Any, k: Any, v: Any) -> tuple[int, ...]:
    """Validate q, k and v; return the shape of their scores, ``(batch..., Lq, Lk)``."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_tensor(t, name, kinds=(FLOAT,))
        if t.dim() < 2:
            raise problem(ValueError, f"`{name}` needs at least 2 dims (length, dim), got shape {tuple(t.shape)}.")
    require_same_device({"q": q, "k": k, "v": v})
    require_same_dtype({"q": q, "k": k, "v": v})
    if q.shape[-1] != k.shape[-1]:
        got = f"q has shape {tuple(q.shape)} (dim -1 = {q.shape[-1]}), k has {tuple(k.shape)} (dim -1 = {k.shape[-1]})."
        raise problem(ValueError, f"q and k must have the same last dim (the dot-product size); {got}")
    if k.shape[-2] != v.shape[-2]:
        got = f"k has shape {tuple(k.shape)}, v has {tuple(v.shape)}."
        raise problem(ValueError, f"k and v must have the same length (dim -2), one value per key; {got}")
    try:
        batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        dims = f"the batch/head dims (all but the last two) of q {tuple(q.shape)}, k {tuple(k.shape)}"
        raise problem(ValueError, f"{dims} and v {tuple(v.shape)} do not broadcast; each must match or be 1.") from None
    return (*batch, q.shape[-2], k.shape[-2])


def _check_mask(mask: Any, scores_shape: tuple[int, ...], q: torch.Tensor) -> None:
    require_tensor(mask, "mask")
    if mask.dtype != torch.bool and not mask.dtype.is_floating_point:
        fix = "pass a bool mask (True = attend), e.g. `mask.bool()`, or a float mask that is added to the scores"
        raise problem(TypeError, f"mask dtype {mask.dtype} is ambiguous; {fix} (0 or -inf).")
    if mask.dtype != torch.bool and mask.dtype != q.dtype:
        text = f"a float mask is added to the scores, so it must have q's dtype {q.dtype}; `mask` has dtype"
        raise problem(TypeError, f"{text} {mask.dtype}. Pass mask.to(q.dtype), or a bool mask (True = attend).")
    require_same_device({"q": q, "mask": mask})
    if mask.dim() > len(scores_shape):
        text = f"mask has {mask.dim()} dims, shape {tuple(mask.shape)}, but the scores have only {len(scores_shape)}"
        raise problem(ValueError, f"{text}, shape {scores_shape}.")
    padded = (1,) * (len(scores_shape) - mask.dim()) + tuple(mask.shape)
    for d, (m, s) in enumerate(zip(padded, scores_shape)):
        if m not in (1, s):
            lq, lk = scores_shape[-2], scores_shape[-1]
            text = f"mask of shape {tuple(mask.shape)} does not broadcast to the scores (batch..., heads, Lq={lq}"
            fix = "A per-key padding mask of shape (B, Lk) must become (B, 1, 1, Lk): `mask[:, None, None, :]`."
            text += f", Lk={lk}) = {scores_shape}: size {m} at scores dim {d} must be 1 or {s}."
            raise problem(ValueError, f"{text} {fix}")


@entry("scaled_dot_product_attention")
def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    fully_masked: str = "zero",
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention from scratch: ``softmax(q @ k^T * scale + mask) @ v``.

    ``q``: ``(..., Lq, E)``, ``k``: ``(..., Lk, E)``, ``v``: ``(..., Lk, Ev)``, floating point, one dtype and
    device; the leading dims broadcast, and ``mask`` (bool, or float of q's dtype) to ``(..., Lq, Lk)``.
    ``scale``: default ``1/sqrt(E)`` (1 when ``E == 0``). ``fully_masked="nan"`` keeps the plain softmax's NaN
    for a query whose keys are all masked instead of SDPA's 0.

    >>> from torch.nn.functional import scaled_dot_product_attention as sdpa
    >>> q = k = v = torch.eye(3)[None]
    >>> torch.testing.assert_close(scaled_dot_product_attention(q, k, v), sdpa(q, k, v))
    >>> no_keys = torch.zeros(3, 3, dtype=torch.bool)
    >>> scaled_dot_product_attention(q, k, v, mask=no_keys)[0, 0].tolist()
    [0.0, 0.0, 0.0]
    """
    scores_shape = _check_qkv(q, k, v)
    require_bool(is_causal, "is_causal")
    require_bool(return_weights, "return_weights")
    require_choice(fully_masked, "fully_masked", ("zero", "nan"))
    if mask is not None:
        _check_mask(mask, scores_shape, q)
    nbytes = 3 * math.prod(scores_shape) * q.element_size()
    require_allocation(nbytes, f"the attention scores of shape {scores_shape}", q.device)
    # With head dim 0 every score is an empty dot product, 0, whatever the scale: use 1 (SDPA's result is
    # the same: uniform weights, the mean of v) instead of dividing by sqrt(0).
    e = q.shape[-1]
    scale = require_number(scale, "scale") if scale is not None else 1.0 / math.sqrt(e) if e else 1.0
    scores = q @ k.transpose(-2, -1)  # (..., Lq, Lk): one dot product per (query, key) pair
    scores = scores * scale
    keep = causal_mask(q.shape[-2], k.shape[-2], device=q.device) if is_causal else None
    if mask is not None:
        if mask.dtype == torch.bool:
            keep = mask if keep is None else keep & mask
        else:
            scores = scores + mask
    if keep is not None:
        # masked_fill broadcasts `keep` against the scores: nothing is expanded in memory.
        scores = scores.masked_fill(~keep, float("-inf"))
    dead = None
    if fully_masked == "zero":
        # Rows with nothing to attend to: give softmax finite scores there (so neither the output nor
        # any gradient sees 0/0 = NaN), then zero those rows' weights.
        dead = torch.isneginf(scores).all(dim=-1, keepdim=True)
        scores = scores.masked_fill(dead, 0.0)
    weights = torch.softmax(scores, dim=-1)
    if dead is not None:
        weights = weights.masked_fill(dead, 0.0)
    out = weights @ v
    return (out, weights) if return_weights else out


@entry("split_heads")
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, L, D)`` -> ``(B, H, L, D // H)``: a view (no copy), head ``h`` gets features ``h*Dh:(h+1)*Dh``.

    ``num_heads``: an int >= 1 that divides ``D``. Any dtype and device, ``meta`` too.

    >>> h = split_heads(torch.arange(12.0).view(1, 2, 6), 3)
    >>> tuple(h.shape), h.stride(), h[0, 1, 0].tolist()
    ((1, 3, 2, 2), (12, 2, 6, 1), [2.0, 3.0])
    """
    x = require_tensor(x, "x")
    num_heads = require_int(num_heads, "num_heads", minimum=1)
    if x.dim() != 3:
        raise problem(ValueError, f"expects x of shape (B, L, D), got shape {tuple(x.shape)} ({x.dim()} dims).")
    b, length, d = x.shape
    if d % num_heads:
        text = f"the model dim (dim 2 of x, shape {tuple(x.shape)}) is {d}, not divisible by num_heads={num_heads}"
        raise problem(ValueError, f"{text}; pick num_heads among the divisors of {d}.")
    return x.view(b, length, num_heads, d // num_heads).transpose(1, 2)


@entry("merge_heads")
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, H, L, Dh)`` -> ``(B, L, H * Dh)``, the inverse of :func:`split_heads`.

    On a contiguous ``(B, H, L, Dh)`` tensor with ``H``, ``L`` and ``Dh`` all above 1 (what attention returns)
    this copies: after the transpose one head's features and the next head's are ``L * Dh`` apart, so
    ``reshape`` must gather them (with one head, one position or one feature a head there is nothing to gather). When ``x.transpose(1, 2)`` is contiguous it is a view: heads straight from :func:`split_heads`,
    or an output a fused kernel wrote position by position, ``(B, L, H, Dh)`` in memory.

    >>> x, out = torch.randn(2, 5, 6), torch.randn(2, 3, 5, 2)  # out: e.g. attention's output
    >>> torch.equal(merge_heads(split_heads(x, 3)), x), merge_heads(out).data_ptr() == out.data_ptr()
    (True, False)
    """
    x = require_tensor(x, "x")
    if x.dim() != 4:
        raise problem(ValueError, f"expects x of shape (B, H, L, Dh), got shape {tuple(x.shape)}.")
    b, h, length, dh = x.shape
    return x.transpose(1, 2).reshape(b, length, h * dh)


@entry("multi_head_self_attention")
def multi_head_self_attention(
    x: torch.Tensor,
    num_heads: int,
    in_proj_weight: torch.Tensor,
    in_proj_bias: torch.Tensor | None,
    out_proj_weight: torch.Tensor,
    out_proj_bias: torch.Tensor | None,
    lengths: torch.Tensor | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """Multi-head self-attention on ``x`` ``(B, L, D)``, weights laid out as in ``nn.MultiheadAttention``.

    ``in_proj_weight`` ``(3D, D)`` (q, k, v stacked), ``out_proj_weight`` ``(D, D)``, biases ``(3D,)`` and
    ``(D,)`` or None: floating point, x's dtype and device. ``lengths`` (``(B,)`` ints ``<= L``) masks padded
    keys with :func:`padding_mask`, ``causal`` adds :func:`causal_mask`; both stay in their small shapes.

    >>> mha, x = nn.MultiheadAttention(8, 2, batch_first=True), torch.randn(2, 5, 8)
    >>> ours = multi_head_self_attention(x, 2, *mha.parameters())  # in_proj weight, bias; out_proj weight, bias
    >>> torch.testing.assert_close(ours, mha(x, x, x, need_weights=False)[0])
    """
    require_tensor(x, "x", kinds=(FLOAT,))
    num_heads = require_int(num_heads, "num_heads", minimum=1)
    split_heads(x, num_heads)  # x must be (B, L, D) with num_heads dividing D: split_heads says so, in its words
    b, length, d = x.shape
    params = {  # name: (tensor, expected shape, that shape in letters)
        "in_proj_weight": (in_proj_weight, (3 * d, d), "(3*D, D)"),
        "in_proj_bias": (in_proj_bias, (3 * d,), "(3*D,)"),
        "out_proj_weight": (out_proj_weight, (d, d), "(D, D)"),
        "out_proj_bias": (out_proj_bias, (d,), "(D,)"),
    }
    for name, (p, shape, letters) in params.items():
        if p is None and name.endswith("bias"):
            continue
        require_tensor(p, name, kinds=(FLOAT,))
        require_shape(p, name, shape, letters, f"for x of shape {tuple(x.shape)}")
    present = {"x": x, **{n: p for n, (p, _, _) in params.items() if p is not None}}
    require_same_device(present)
    require_same_dtype(present)
    causal = require_bool(causal, "causal")
    mask = None
    if lengths is not None:
        require_tensor(lengths, "lengths", kinds=(INT,), meta=False)
        require_shape(lengths, "lengths", (b,), "(B,)", f"for x of shape {tuple(x.shape)}")
        require_same_device({"x": x, "lengths": lengths})
        mask = padding_mask(lengths, length)  # (B, 1, 1, L)
    qkv = nn.functional.linear(x, in_proj_weight, in_proj_bias)  # (B, L, 3D)
    q, k, v = (split_heads(t, num_heads) for t in qkv.chunk(3, dim=-1))  # each (B, H, L, Dh)
    # Errors raised inside the helpers still name multi_head_self_attention: the outermost @entry wins.
    out = scaled_dot_product_attention(q, k, v, mask, is_causal=causal)
    return nn.functional.linear(merge_heads(out), out_proj_weight, out_proj_bias)
