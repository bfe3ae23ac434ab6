"""Exercises for notebook 04 (broadcasting in attention): masks by broadcasting, heads as views,
and a loss weighted by a mask in the right orientation."""

from __future__ import annotations

from typing import Any

import torch

from ...exercises import Exercise, register, tensors


def _causal_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 6), st.integers(0, 6))


def _causal(q_len: int, k_len: int) -> torch.Tensor:
    return torch.arange(k_len)[None, :] <= torch.arange(q_len)[:, None]


register(Exercise(
    id="04-causal-mask",
    title="A causal mask by broadcasting",
    statement=(
        "Given ints q_len and k_len (>= 0), return a bool tensor of shape (q_len, k_len) that is True exactly "
        "where key position j <= query position i (query i may look at itself and the past). Build it by "
        "comparing a column of query positions with a row of key positions: no loop, no tril."
    ),
    signature="def causal(q_len: int, k_len: int) -> torch.Tensor",
    reference=_causal,
    inputs=_causal_inputs,
    examples=((3, 3), (2, 4)),
    hints=(
        "torch.arange(q_len)[:, None] has shape (q_len, 1); torch.arange(k_len)[None, :] has shape (1, k_len).",
        "torch.arange(k_len)[None, :] <= torch.arange(q_len)[:, None]",
    ),
    wrong=(
        (lambda q, k: torch.arange(k)[None, :] < torch.arange(q)[:, None], "values differ"),
        (lambda q, k: torch.arange(k)[None, :] >= torch.arange(q)[:, None], "values differ"),
    ),
))


def _heads_inputs() -> Any:
    from hypothesis import strategies as st

    def build(h: int, dh: int) -> Any:
        shape = st.tuples(st.integers(1, 2), st.integers(1, 3), st.just(h * dh))
        return st.tuples(tensors(shape=shape), st.just(h))

    return st.tuples(st.integers(1, 3), st.integers(1, 3)).flatmap(lambda p: build(*p))


def _split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    b, length, d = x.shape
    return x.view(b, length, num_heads, d // num_heads).transpose(1, 2)


register(Exercise(
    id="04-split-heads",
    title="Split into heads without copying",
    statement=(
        "Given x of shape (B, L, D) and num_heads H dividing D, return a tensor of shape (B, H, L, D // H) "
        "where head h holds features h*D//H ... (h+1)*D//H - 1 of every position. It must be a view of x "
        "(zero new bytes), whatever x's memory layout."
    ),
    signature="def heads_view(x: torch.Tensor, num_heads: int) -> torch.Tensor",
    reference=_split_heads,
    inputs=_heads_inputs,
    memory="view",
    hints=(
        "First split the last dim into (H, D // H) with view, then swap the L and H dims.",
        "x.view(B, L, H, D // H).transpose(1, 2)",
    ),
    wrong=(
        (lambda x, h: x.view(x.shape[0], h, x.shape[1], x.shape[2] // h), "values differ"),
        (lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 2).contiguous(), "shares no memory"),
    ),
))


def _loss_inputs() -> Any:
    from hypothesis import strategies as st

    def build(b: int, length: int, v: int) -> Any:
        loss = tensors(shape=(b, length, v), values=(0, 9), layouts=("contiguous",))
        mask = st.lists(st.booleans(), min_size=b * length, max_size=b * length).map(
            lambda bits: torch.tensor(bits).view(b, length)
        ).filter(lambda m: bool(m.any()))
        return st.tuples(loss, mask)

    return st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4)).flatmap(lambda p: build(*p))


def _masked_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask[:, :, None].to(loss.dtype)  # (B, L, 1): one weight per token, broadcast over V
    return (loss * weights).sum() / (weights.sum() * loss.shape[-1])


register(Exercise(
    id="04-masked-token-mean",
    title="Average a per-token loss over real tokens only",
    statement=(
        "Given `loss` of shape (B, L, V) (one value per token and vocabulary entry) and a bool `mask` of "
        "shape (B, L) (True = real token, False = padding; at least one True), return the mean of `loss` over "
        "all entries of real tokens, as a 0-dim tensor. Use broadcasting: put the mask's singleton dim where V is."
    ),
    signature="def masked_token_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor",
    reference=_masked_mean,
    inputs=_loss_inputs,
    examples=((torch.ones(2, 3, 3), torch.tensor([[True, True, False], [True, False, False]])),),
    hints=(
        "mask[:, :, None] has shape (B, L, 1), which lines up with (B, L, V). A (B, 1, L) mask would line "
        "L up with V instead -- an error, or a silently wrong answer when L == V.",
        "w = mask[:, :, None].to(loss.dtype); (loss * w).sum() / (w.sum() * loss.shape[-1])",
    ),
    wrong=(
        (lambda loss, mask: loss.mean(), "values differ"),
        (lambda loss, mask: (loss * mask[:, :, None]).sum() / mask.sum(), "values differ"),
    ),
))
