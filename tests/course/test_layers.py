"""viewlab.course.layers: squeeze-and-excitation, the layer claim B07 measures."""

from __future__ import annotations

import pytest
import torch

from viewlab import measure
from viewlab.course.layers import SqueezeExcitation


def test_squeeze_excitation_expand_as_equals_broadcasting():
    torch.manual_seed(0)
    se = SqueezeExcitation(32, reduction=8)
    x = torch.randn(2, 32, 5, 6)
    assert torch.equal(se(x), se(x, use_expand_as=True))
    w = se.weights(x)
    assert w.shape == (2, 32, 1, 1) and ((w > 0) & (w < 1)).all()
    with measure(device="cpu", log_ops=True) as m:
        se(x, use_expand_as=True)
    expand_ops = [op for op in m.ops if op.name == "aten.expand.default"]
    assert expand_ops and all(op.bytes == 0 for op in expand_ops)


def test_squeeze_excitation_errors_name_the_sizes():
    with pytest.raises(ValueError, match=r"channels=8, reduction=16 give channels // reduction = 0.*reduction <= 8"):
        SqueezeExcitation(8)
    with pytest.raises(ValueError, match=r"expects x of shape \(B, 4, H, W\); got shape \(1, 3, 2, 2\) \(dim 1 is 3\)"):
        SqueezeExcitation(4, reduction=2)(torch.zeros(1, 3, 2, 2))


def test_squeeze_excitation_checks_dtype_and_pixels():
    se = SqueezeExcitation(4, reduction=2)
    with pytest.raises(TypeError, match=r"`x` has dtype torch.float64 but the module's weights are torch.float32"):
        se(torch.zeros(1, 4, 2, 2, dtype=torch.float64))  # was: mat1 and mat2 must have the same dtype
    with pytest.raises(ValueError, match=r"has no pixels \(H \* W = 0\)"):
        se(torch.zeros(1, 4, 0, 2))  # was: NaN weights from the mean of nothing
