"""The articles' examples, rebuilt: their behaviour, in our own code (the articles' code is not carried over).

Each function or class here does what an example of a source article does, flaws included, so that a
claim about it can be checked by running it; its docstring says that behaviour in one sentence, and the
code is the smallest of ours that has it (not the article's steps renamed). Notebook 07 prints their
source next to the verdicts, so their names and bodies are part of what the course shows.

>>> x = torch.ones(2, 3, 4)
>>> pool_expanded(x, torch.ones(1, 4)).shape, article_guarded_expand_as(torch.ones(3, 1), torch.ones(3, 4)).shape
(torch.Size([2, 4]), torch.Size([3, 4]))
>>> try:
...     article_guarded_expand_as(torch.ones(1, 3), torch.ones(3))  # the article's guard lets it through
... except RuntimeError as err:
...     print("PyTorch refuses:", str(err).split(":")[0])
PyTorch refuses: expand(torch.FloatTensor{[1, 3]}, size=[3])
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from .. import article_helpers as ah

__all__ = [
    "article_attention",
    "pool_expanded",
    "ShapeBufferScale",
    "article_masked_loss",
    "article_guarded_expand_as",
]


def article_attention(x: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor, heads: int) -> torch.Tensor:
    """Article 000's attention layer, as behaviour: it projects x (batch, tokens, width) once into
    full-width queries, keys and values (``heads`` only sets the 1/sqrt(width // heads) scale: the heads
    are never split), scores queries against keys without a softmax, hides the scores where an all-ones
    mask -- made with torch.ones and expanded to the batch on every call -- is 0 (nowhere), and projects
    the score-weighted values out."""
    batch, tokens, width = x.shape
    everywhere = torch.ones(tokens, tokens).expand(batch, tokens, tokens)
    q, k, v = torch.split(x @ w_in.T, width, dim=-1)
    scores = torch.where(everywhere.bool(), torch.bmm(q, k.mT) / math.sqrt(width // heads), -math.inf)
    return torch.bmm(scores, v) @ w_out.T  # bmm: what a 3-d @ runs, after no-op expands of its operands


def pool_expanded(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Article 000's weighted pooling, as behaviour: it stretches a learnable (1, D) weight (or one
    already (batch, D)) to one row per sample, gives it a time axis of length 1, multiplies x (batch, T, D)
    by it -- a (batch, T, D) product -- and sums over T."""
    per_sample = w.expand(len(x), w.shape[-1])
    return (x * per_sample[:, None, :]).sum(1)


class ShapeBufferScale(nn.Module):
    """Article 001's "efficient expansion" model, as behaviour: a learnable (1, C, 1, 1) scale, plus one
    registered buffer per "common" input shape (allocated, never filled, saved with the model, used only
    for its shape); forward stretches the scale onto the buffer whose shape is x's (onto x when none is)
    and multiplies x by it."""

    def __init__(self, channels: int, common: Iterable[tuple[int, ...]]) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(1, channels, 1, 1))
        for i, shape in enumerate(common):
            self.register_buffer(f"buffer_{i}", torch.empty(shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        like = next((buf for buf in self.buffers() if buf.shape == x.shape), x)
        return x * self.scale.expand_as(like)


def article_masked_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Article 001's masked loss, as behaviour: binary cross-entropy of every logit (batch, seq, vocab)
    against one-hot labels, weighted by the mask (meant as (batch, 1, seq)) stretched with expand_as to
    the logits' shape, summed and divided by the stretched mask's total."""
    stretched = mask.expand_as(logits)
    hot = (labels[..., None] == torch.arange(logits.shape[-1])).to(logits.dtype)
    per_logit = F.binary_cross_entropy_with_logits(logits, hot, reduction="none")
    return (per_logit * stretched).sum() / stretched.sum()


def article_guarded_expand_as(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Article 001's guarded expand_as, as behaviour: an ``assert`` that the article's shape check accepts
    a and b (so ``python -O`` drops it), then ``a.expand_as(b)``."""
    accepted = ah.article_check_expandable(a, b)
    assert accepted, f"{tuple(a.shape)} cannot be expanded to {tuple(b.shape)}, says the guard"
    return a.expand_as(b)
