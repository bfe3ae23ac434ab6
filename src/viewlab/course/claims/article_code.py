"""The articles' examples, rebuilt: their behaviour, in our own code (the articles' code is not carried over).

Each function or class here does what an example of a source article does, flaws included, so that a
claim about it can be checked by running it. Notebook 07 prints their source next to the verdicts, so
their names and bodies are part of what the course shows.

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
    """Our model of article 000's attention layer (our code, its behaviour): one projection makes q, k
    and v side by side; the heads are never split (``heads`` only sets the scale); no softmax; a mask
    of ones is built and expanded on every call, then used to hide nothing."""
    n_batch, n_tok, width = x.shape
    q, k, v = (x @ w_in.T).chunk(3, dim=-1)
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(width // heads)
    keep = torch.ones(1, n_tok, n_tok).expand(n_batch, n_tok, n_tok)
    scores = scores.masked_fill(keep == 0, float("-inf"))
    return torch.bmm(scores, v) @ w_out.T


def pool_expanded(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Our model of article 000's pooling (its behaviour): a learnable (1, D) weight is stretched to
    (batch, D), given a length-1 time axis, multiplied with x (batch, T, D) and summed over T."""
    stretched = w.expand(len(x), w.shape[-1])[:, None, :]
    return (x * stretched).sum(1)


class ShapeBufferScale(nn.Module):
    """Our model of article 001's "efficient expansion" example (its behaviour, our code): a learnable
    (1, C, 1, 1) scale; buffers of two "common" input shapes, allocated and never filled, kept only to
    compare sizes; forward multiplies x by the scale stretched onto whichever buffer matches x, else onto x."""

    def __init__(self, channels: int, common: Iterable[tuple[int, ...]]) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.randn(1, channels, 1, 1))
        self.templates = []
        for i, shape in enumerate(common):
            self.register_buffer(f"template_{i}", torch.empty(shape))
            self.templates.append(f"template_{i}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        target = next((getattr(self, n) for n in self.templates if getattr(self, n).shape == x.shape), x)
        return x * self.scale.expand_as(target)


def article_masked_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Our model of article 001's masked loss (its behaviour): one-hot targets, element-wise binary
    cross-entropy on the logits (batch, seq, vocab), the (batch, 1, seq) mask stretched with expand_as
    onto that loss, weighted sum divided by the stretched mask's sum."""
    targets = F.one_hot(labels, logits.size(-1)).type_as(logits)
    each = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    weights = mask.expand_as(each)
    return (each * weights).sum() / weights.sum()


def article_guarded_expand_as(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Our model of article 001's guarded expand_as (its behaviour): assert that the article's checker
    accepts the pair, then call expand_as."""
    assert ah.article_check_expandable(a, b), f"expand_as guard refused {tuple(a.shape)} -> {tuple(b.shape)}"
    return a.expand_as(b)
