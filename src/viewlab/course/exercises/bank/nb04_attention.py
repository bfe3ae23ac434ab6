"""Exercises for notebook 04 (broadcasting in attention): masks by broadcasting, heads as views,
and a loss weighted by a mask in the right orientation.

>>> from viewlab.course.exercises import exercise_ids
>>> exercise_ids("04")
['04-causal-mask', '04-masked-token-mean', '04-sdpa-by-hand', '04-split-heads']
"""

from __future__ import annotations

from typing import Any

import torch

from viewlab.course.exercises import Exercise, Rules, register, tensors


def _causal_inputs() -> Any:
    from hypothesis import strategies as st

    return st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(1, 7))  # a window of 1 and one past L too


def _causal(q_len: int, k_len: int, window: int) -> torch.Tensor:
    i, j = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
    return (j <= i) & (i - j < window)


def _causal_by_list(q_len: int, k_len: int, window: int) -> torch.Tensor:  # rule-breaking: right values, lists
    rows = [[j <= i and i - j < window for j in range(k_len)] for i in range(q_len)]
    return torch.tensor(rows, dtype=torch.bool).reshape(q_len, k_len)


def _causal_by_tril(q_len: int, k_len: int, window: int) -> torch.Tensor:  # rule-breaking: right values, tril
    ones = torch.ones(q_len, k_len, dtype=torch.bool)
    return ones.tril() & ~ones.tril(-window)


register(
    Exercise(
        id="04-causal-mask",
        title="A sliding-window causal mask by broadcasting",
        statement=(
            "Given ints q_len and k_len (>= 0) and window (>= 1), return a bool tensor of shape (q_len, k_len) that "
            "is True exactly where query i may attend to key j in sliding-window causal attention: j <= i (itself "
            "and the past; top-left aligned, query 0 beside key 0, as is_causal=True does when q_len != k_len) and "
            "i - j < window (only the window most recent keys, itself included: older ones fall out). The way to "
            "build it: compare a column of query positions with a row of key positions. Rules: no Python loop or "
            "list, no tril (nor triu)."
        ),
        signature="def causal(q_len: int, k_len: int, window: int) -> torch.Tensor",
        reference=_causal,
        inputs=_causal_inputs,
        rules=Rules(forbid=("tril",), no_python_loops=lambda n: (n, n + 1, 2)),
        examples=((4, 4, 2), (2, 5, 3), (3, 3, 5)),
        hints=(
            "Which two conditions on query position i and key position j must both hold for query i to see key j?",
            "A column of query positions and a row of key positions broadcast to (q_len, k_len): one comparison of "
            "them is the causal rule, and the window limits their difference. How do you keep only the entries "
            "where both bool tables are True, and is the limit on the difference strict or not?",
        ),
        why=(
            "A (q_len, 1) column and a (1, k_len) row broadcast to (q_len, k_len): [i, j] compares query i with key "
            "j, once for j <= i and once for i - j < window, and & keeps the entries where both hold.",
            "tril builds the causal half from a full matrix (and tril(-window) the part that fell out); the "
            "comparisons state the rule itself, and the window is the only new term.",
        ),
        wrong=(
            (lambda q, k, w: torch.arange(k)[None, :] <= torch.arange(q)[:, None], "values differ"),  # no window
            (
                lambda q, k, w: (
                    (torch.arange(k) <= torch.arange(q)[:, None]) & (torch.arange(q)[:, None] - torch.arange(k) <= w)
                ),
                "values differ",
            ),  # one key too many
            (_causal_by_tril, "rule `forbid tril`"),
            (_causal_by_list, "rule `no_python_loops`"),
        ),
    )
)


def _heads_inputs() -> Any:
    from hypothesis import strategies as st

    def build(h: int, dh: int) -> Any:
        shape = st.tuples(st.integers(0, 2), st.integers(0, 3), st.just(h * dh))  # empty batch or sequence too
        return st.tuples(tensors(shape=shape), st.just(h))

    return st.tuples(st.integers(1, 3), st.integers(0, 3)).flatmap(lambda p: build(*p))


def _split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    b, length, d = x.shape
    return x.view(b, length, num_heads, d // num_heads).transpose(1, 2)


register(
    Exercise(
        id="04-split-heads",
        title="Split into heads without copying",
        statement=(
            "Given x of shape (B, L, D) and num_heads H dividing D, return a tensor of shape (B, H, L, D // H) "
            "where head h holds features h*D//H ... (h+1)*D//H - 1 of every position. It must be a view of x "
            "(sharing its memory: nothing copied), whatever x's memory layout (transposed, offset, expanded). B, L "
            "and D may be 0."
        ),
        signature="def heads_view(x: torch.Tensor, num_heads: int) -> torch.Tensor",
        reference=_split_heads,
        inputs=_heads_inputs,
        memory="view",
        hints=(
            "Which two view steps: one that splits D into (H, D // H), and one that moves H in front of L?",
            "Once the last dim is split, the heads sit behind L. Which op moves them in front, and does your split "
            "still work when x is transposed in memory?",
        ),
        why=(
            "Splitting the last dim and swapping two dims only rewrite shape and strides: a view, 0 bytes.",
            "Viewing straight to (B, H, L, D // H) keeps row-major order and mixes positions into heads.",
        ),
        wrong=(
            (lambda x, h: x.view(x.shape[0], h, x.shape[1], x.shape[2] // h), "values differ"),
            (
                lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h).transpose(1, 2).contiguous(),
                "rule `must_view`: the result shares no memory",
            ),
            (  # copies exactly when x is not contiguous: only a non-contiguous input shows it
                lambda x, h: x.contiguous().view(x.shape[0], x.shape[1], h, x.shape[2] // h).transpose(1, 2),
                "rule `must_view`: the result shares no memory",
            ),
        ),
    )
)


def _loss_inputs() -> Any:
    from hypothesis import strategies as st

    def build(b: int, length: int, v: int) -> Any:
        loss = tensors(shape=(b, length, v), values=(0, 9), layouts=("contiguous",))
        mask = (
            st.lists(st.booleans(), min_size=b * length, max_size=b * length)
            .map(lambda bits: torch.tensor(bits).view(b, length))
            .filter(lambda m: bool(m.any()))
        )
        return st.tuples(loss, mask)

    return st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4)).flatmap(lambda p: build(*p))


def _masked_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask[:, :, None].to(loss.dtype)  # (B, L, 1): one weight per token, broadcast over V
    return (loss * weights).sum() / (weights.sum() * loss.shape[-1])


register(
    Exercise(
        id="04-masked-token-mean",
        title="Average a per-token loss over real tokens only",
        statement=(
            "Given `loss` of shape (B, L, V) (one value per token and vocabulary entry) and a bool `mask` of "
            "shape (B, L) (True = real token, False = padding; at least one True), return the mean of `loss` over "
            "all entries of real tokens, as a 0-dim tensor (V >= 1). Use broadcasting: put the mask's singleton dim "
            "where V is. Rules: no repeat (nor tile or repeat_interleave) and no expand (nor expand_as or "
            "broadcast_to), on the mask or any other tensor, and no gathering the real tokens' entries by indexing "
            "(loss[mask], masked_select, nonzero, index_select): each copies the entries it picks."
        ),
        signature="def masked_token_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor",
        reference=_masked_mean,
        inputs=_loss_inputs,
        rules=Rules(forbid=("repeat", "expand", "gather")),
        examples=((torch.ones(2, 3, 3), torch.tensor([[True, True, False], [True, False, False]])),),
        hints=(
            "Shapes align from the right: which dims of (B, L, V) must the (B, L) mask meet, and where does it need "
            "a size-1 dim?",
            "Give the mask a size-1 dim in the right place and weight the loss with it. The divisor counts "
            "entries, not tokens: how many entries does one real token have?",
        ),
        why=(
            "A (B, L, 1) weight broadcasts over V, so each token's V entries are kept or zeroed together.",
            "The mean divides by the number of kept entries: real tokens times V.",
        ),
        wrong=(
            (lambda loss, mask: loss.mean(), "values differ"),
            (lambda loss, mask: (loss * mask[:, :, None]).sum() / mask.sum(), "values differ"),
            (
                lambda loss, mask: (
                    (loss * mask[:, :, None].repeat(1, 1, loss.shape[-1])).sum() / (mask.sum() * loss.shape[-1])
                ),
                "rule `forbid repeat`",
            ),
            (
                lambda loss, mask: (loss * mask[:, :, None].expand_as(loss)).sum() / (mask.sum() * loss.shape[-1]),
                "rule `forbid expand`",
            ),
            (lambda loss, mask: loss[mask].mean(), "rule `forbid gather`"),  # copies the (n, V) real entries
        ),
    )
)


def _sdpa_inputs() -> Any:
    from hypothesis import strategies as st

    def build(b: int, h: int, lq: int, lk: int, d: int) -> Any:
        small = dict(values=(-2, 2), layouts=("contiguous", "transposed"))
        # key 0 is never padding (padding comes after the real keys), so every query keeps key 0 at least
        keep = st.lists(st.booleans(), min_size=b * lk, max_size=b * lk).map(
            lambda bits: torch.tensor(bits, dtype=torch.bool).view(b, 1, 1, lk).index_fill(-1, torch.tensor([0]), True)
        )
        return st.tuples(
            tensors(shape=(b, h, lq, d), **small),
            tensors(shape=(b, h, lk, d), **small),
            tensors(shape=(b, h, lk, d), **small),
            keep,
        )

    # B, H and Lq may be 0 (an empty result) or 1; Lk >= 1 (every batch keeps a key)
    # (0 drawn less often than the rest, so that most draws have queries and keys to mask)
    small = st.sampled_from((1, 2, 1, 2, 0))
    lq, lk = st.sampled_from((2, 3, 1, 0)), st.sampled_from((3, 4, 1, 2))
    sizes = st.tuples(small, small, lq, lk, st.integers(1, 3))
    return sizes.flatmap(lambda s: build(*s))


def _sdpa_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()  # is_causal's mask, top-left
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep & causal)


def _sdpa_by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    causal = torch.arange(k.shape[-2]) <= torch.arange(q.shape[-2])[:, None]  # (Lq, Lk)
    allowed = keep & causal  # (B, 1, 1, Lk) & (Lq, Lk) broadcast to (B, 1, Lq, Lk)
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v


def _sdpa_causal_only(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    causal = torch.arange(k.shape[-2]) <= torch.arange(q.shape[-2])[:, None]
    return scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v


def _sdpa_unscaled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    causal = torch.arange(k.shape[-2]) <= torch.arange(q.shape[-2])[:, None]
    return (q @ k.transpose(-2, -1)).masked_fill(~(keep & causal), float("-inf")).softmax(dim=-1) @ v


register(
    Exercise(
        id="04-sdpa-by-hand",
        title="Causal attention with a padding mask, by hand",
        statement=(
            "Given q (B, H, Lq, d), k and v (B, H, Lk, d) and a bool padding mask `keep` of shape (B, 1, 1, Lk) "
            "(True = this key is real; key 0 always is), return causal attention over the real keys: "
            "softmax(q k^T / sqrt(d)) v where query i gives zero weight to every padded key and to every key j > i "
            "(top-left aligned, as is_causal=True), shape (B, H, Lq, d). Both masks must hold at once: combine the "
            "(B, 1, 1, Lk) padding mask with an (Lq, Lk) causal one by broadcasting. The check compares with "
            "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep & causal), which you may "
            "not call."
        ),
        signature="def sdpa_by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor",
        reference=_sdpa_reference,
        answer=_sdpa_by_hand,
        inputs=_sdpa_inputs,
        rules=Rules(forbid=("sdpa",)),
        examples=(
            (
                torch.ones(1, 1, 2, 2),
                torch.ones(1, 1, 3, 2),
                torch.arange(6.0).view(1, 1, 3, 2),
                torch.tensor([True, True, False]).view(1, 1, 1, 3),
            ),
            (  # scores that differ from key to key: a missing scale or mask shows here, without a search
                torch.arange(4.0).view(1, 1, 2, 2),
                torch.arange(6.0).view(1, 1, 3, 2),
                torch.arange(6.0).view(1, 1, 3, 2),
                torch.tensor([True, True, False]).view(1, 1, 1, 3),
            ),
            (  # three queries, two batches: the causal mask and each batch's padding both matter
                torch.arange(12.0).view(2, 1, 3, 2) / 4,
                torch.arange(16.0).view(2, 1, 4, 2) / 4,
                torch.arange(16.0).view(2, 1, 4, 2),
                torch.tensor([[True, True, True, False], [True, False, True, True]]).view(2, 1, 1, 4),
            ),
        ),
        hints=(
            "Which product gives one score per (query, key) pair, shape (B, H, Lq, Lk), and what shape does each "
            "of the two masks need to line up with it?",
            "The causal mask is a comparison of a column of query positions with a row of key positions, (Lq, Lk); "
            "the padding mask is (B, 1, 1, Lk). Which logical operation keeps a key only when both allow it, what "
            "shape does it broadcast to, and what score gives a weight of exactly 0 after the softmax?",
        ),
        why=(
            "q @ k.transpose(-2, -1) scores every query against every key; the (Lq, Lk) causal mask and the "
            "(B, 1, 1, Lk) padding mask broadcast together (&) to (B, 1, Lq, Lk), and on over every head.",
            "Filling the scores the combined mask refuses with -inf makes their softmax weight exactly 0, so each "
            "query mixes only real keys at or before it into v.",
        ),
        wrong=(
            (lambda q, k, v, keep: (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v, "values differ"),
            (  # the padding mask alone: query i still sees the keys after it
                lambda q, k, v, keep: (
                    (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~keep, float("-inf")).softmax(-1) @ v
                ),
                "values differ",
            ),
            (_sdpa_causal_only, "values differ"),  # the causal mask alone: padded keys get weight
            (_sdpa_unscaled, "values differ"),
            (
                lambda q, k, v, keep: torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=keep & (torch.arange(k.shape[-2]) <= torch.arange(q.shape[-2])[:, None])
                ),
                "rule `forbid sdpa`",
            ),
        ),
    )
)
