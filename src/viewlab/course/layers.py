"""A layer the course's claims run: squeeze-and-excitation, whose channel weights reach every pixel by broadcasting.

The articles' channel-attention block multiplies a ``(B, C, H, W)`` input by ``(B, C, 1, 1)`` weights, either
broadcast or ``expand_as(x)``; claim B07 (``viewlab.course.claims``) measures that both read the same bits and
neither copies. Only the course uses it, so it lives in ``viewlab.course``, not in the toolbox.

>>> from viewlab.course.layers import SqueezeExcitation
>>> SqueezeExcitation(8, reduction=4).weights(torch.zeros(1, 8, 2, 2)).shape
torch.Size([1, 8, 1, 1])
"""

from __future__ import annotations

import torch
from torch import nn

from viewlab._checks import (
    FLOAT,
    entry,
    problem,
    require_allocation,
    require_bool,
    require_int,
    require_same_device,
    require_tensor,
)

__all__ = ["SqueezeExcitation"]


class SqueezeExcitation(nn.Module):
    """Squeeze-and-excitation channel attention (Hu et al., 2018): ``x * sigmoid(MLP(mean_hw(x)))``.

    The ``(B, C, 1, 1)`` channel weights reach every pixel by broadcasting or an ``expand_as(x)`` view: the
    same bits, and no copy. ``x``: floating-point ``(B, C, H, W)``, ``H * W > 0``, the module's dtype and device.

    >>> se, x = SqueezeExcitation(8, reduction=4), torch.randn(2, 8, 3, 3)
    >>> torch.equal(se(x), se(x, use_expand_as=True))
    True
    """

    @entry("SqueezeExcitation")
    def __init__(self, channels: int, reduction: int = 16) -> None:
        super().__init__()
        channels = require_int(channels, "channels", minimum=1)
        reduction = require_int(reduction, "reduction", minimum=1)
        hidden = channels // reduction
        if hidden == 0:
            text = f"channels={channels}, reduction={reduction} give channels // reduction = 0 hidden units"
            raise problem(ValueError, f"{text}, so the attention would ignore its input. Use reduction <= {channels}.")
        nbytes = 4 * (2 * channels * hidden + channels + hidden)
        require_allocation(nbytes, f"the weights of {channels} channels x {hidden} hidden units")
        self.channels, self.fc1, self.fc2 = channels, nn.Linear(channels, hidden), nn.Linear(hidden, channels)

    @entry("SqueezeExcitation")
    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """The channel weights, shape ``(B, C, 1, 1)``, each in (0, 1).

        >>> SqueezeExcitation(4, 2).weights(torch.randn(3, 4, 2, 2)).shape
        torch.Size([3, 4, 1, 1])
        """
        require_tensor(x, "x", kinds=(FLOAT,))
        if x.dim() != 4 or x.shape[1] != self.channels:
            got = f" (dim 1 is {x.shape[1]})." if x.dim() == 4 else f" ({x.dim()} dims)."
            text = f"a module of {self.channels} channels expects x of shape (B, {self.channels}, H, W)"
            raise problem(ValueError, f"{text}; got shape {tuple(x.shape)}{got}")
        if x.shape[2] * x.shape[3] == 0:
            fix = "so the per-channel mean is undefined; pass an image with H, W >= 1."
            raise problem(ValueError, f"x of shape {tuple(x.shape)} has no pixels (H * W = 0), {fix}")
        weight = self.fc1.weight
        require_same_device({"the module's weights": weight, "x": x})
        if x.dtype != weight.dtype:
            fix = f"they must match. Cast the input, x.to({weight.dtype}), or the module, se.to({x.dtype})."
            raise problem(TypeError, f"`x` has dtype {x.dtype} but the module's weights are {weight.dtype}; {fix}")
        squeezed = x.mean(dim=(2, 3))  # (B, C)
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(squeezed))))[:, :, None, None]

    @entry("SqueezeExcitation")
    def forward(self, x: torch.Tensor, use_expand_as: bool = False) -> torch.Tensor:
        """``x`` scaled per channel by :meth:`weights`; ``use_expand_as`` picks how the weights reach each pixel.

        >>> SqueezeExcitation(4, 2)(torch.ones(1, 4, 2, 2)).shape
        torch.Size([1, 4, 2, 2])
        """
        use_expand_as, w = require_bool(use_expand_as, "use_expand_as"), self.weights(x)
        return x * (w.expand_as(x) if use_expand_as else w)
