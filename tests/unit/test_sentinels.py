"""viewlab.sentinels: views_only agrees with storage sharing, watch_broadcasts reports exactly the mutual
stretches, held_by_ipython finds what IPython keeps alive (in a real kernel)."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from viewlab import shares_storage
from viewlab.sentinels import (
    BroadcastStretchError,
    BroadcastWarning,
    CopyError,
    mutual_stretch,
    views_only,
    watch_broadcasts,
)
from viewlab.viewops import OP_CASES


def _results(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


# ---------------------------------------------------------------------- views_only


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: f"{c.op}: {c.code}")
def test_views_only_agrees_with_storage_sharing_on_every_listed_op(case):
    """Every view op of PyTorch's list, every copying op and every layout-dependent op: views_only raises
    exactly when the result does not share the input's storage."""
    x = case.make_input()
    if x.layout != torch.strided:
        pytest.skip("sparse inputs have no single storage to compare")
    # Some expressions build a helper tensor themselves (torch.empty(...) to copy a shape from, an index
    # tensor): that allocation is new storage too, and views_only must say so.
    builds = any(f"torch.{f}(" in case.code for f in ("empty", "tensor", "zeros", "ones", "arange"))
    expected_view = all(shares_storage(r, x) for r in _results(case.apply(x)))
    x = case.make_input()
    try:
        with views_only():
            case.apply(x)
        raised = False
    except CopyError:
        raised = True
    assert raised == (not expected_view or builds), (
        f"{case.code}: shares storage {expected_view}, builds a tensor {builds}, views_only raised {raised}"
    )
    assert _get_current_dispatch_mode_stack() == []


def test_copy_error_names_the_call_the_layout_and_the_blocking_dims():
    x = torch.arange(6.0).view(2, 3).t()  # shape (3, 2), stride (1, 3)
    with pytest.raises(CopyError) as err:
        with views_only():
            x.reshape(6)
    text = str(err.value)
    assert "Tensor.reshape made new storage (24 bytes" in text
    assert "shape (3, 2), stride (1, 3), offset 0" in text
    assert "dims 0 and 1: stride[0] = 1 but stride[1] * size[1] = 3 * 2 = 6" in text
    assert "test_sentinels.py" in text, "the learner's own line is named"
    assert "allow=('reshape',)" in text


def test_contiguous_of_a_non_contiguous_input_is_explained_and_allow_lets_it_through():
    x = torch.arange(6.0).view(2, 3).t()
    with pytest.raises(CopyError, match="was not contiguous, so contiguous\\(\\) had to copy it"):
        with views_only():
            x.contiguous()
    with views_only(allow=("contiguous",)):
        y = x.contiguous()
    with views_only():
        z = y.contiguous()  # already contiguous: the same tensor, no copy
    assert z is y


def test_views_in_place_ops_and_metadata_pass():
    x = torch.zeros(4, 3)
    with views_only():
        v = x[1:].t().unsqueeze(0).expand(2, 3, 3)
        x.add_(1)
        x[0].fill_(5)
        shape, stride, contiguous = x.shape, x.stride(), v.is_contiguous()
    assert v.shape == (2, 3, 3) and float(x[0, 0]) == 5.0 and shape == (4, 3) and stride == (3, 1)
    assert contiguous is False


def test_arithmetic_and_factories_are_copies():
    x = torch.ones(3)
    for action in (lambda: x * 2, lambda: torch.zeros(3), lambda: x.sum()):
        with pytest.raises(CopyError, match="made new storage"):
            with views_only():
                action()


def test_views_only_as_a_decorator_and_bad_allow():
    @views_only()
    def first_row(t):
        return t[0]

    assert first_row(torch.ones(2, 2)).shape == (2,)
    with pytest.raises(TypeError, match=r"views_only\(allow=...\) expects operator names"):
        views_only(allow=3)
    with pytest.raises(TypeError, match="needs a function"):
        views_only()(5)


# ---------------------------------------------------------------------- watch_broadcasts


shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(a=shapes, b=shapes)
def test_watch_broadcasts_reports_exactly_the_mutual_stretches(a, b):
    try:
        result = torch.broadcast_shapes(a, b)
    except RuntimeError:
        return
    x, y = torch.zeros(a), torch.zeros(b)
    mutual = len(a) > 0 and len(b) > 0 and a != result and b != result
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with watch_broadcasts():
            x + y
    reported = [w for w in seen if issubclass(w.category, BroadcastWarning)]
    assert bool(reported) == mutual, f"{a} + {b} -> {result}: mutual {mutual}, reported {len(reported)}"
    assert (mutual_stretch([a, b]) is not None) == mutual


def test_the_classic_loss_bug_is_caught_with_shapes_dims_and_fix():
    pred, target = torch.zeros(8, 1), torch.zeros(8)
    with pytest.raises(BroadcastStretchError) as err:
        with watch_broadcasts(action="raise"):
            ((pred - target) ** 2).mean()
    text = str(err.value)
    assert "(8, 1) and (8,) to (8, 8)" in text and "64 elements" in text
    assert "operand 0 (8, 1) along dim 1 (1 -> 8)" in text and "operand 1 (8,) along dim 0 (missing -> 8)" in text
    assert "squeeze dim 1 of operand 0 ((8, 1) -> (8,))" in text and "allow_outer=True" in text


def test_loss_functions_with_different_input_and_target_shapes_are_reported():
    pred, target = torch.zeros(8, 1), torch.zeros(8)
    with pytest.raises(BroadcastStretchError, match=r"mse_loss got input of shape \(8, 1\) and target of shape \(8,\)"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch's own size warning for mse_loss
            with watch_broadcasts(action="raise"):
                torch.nn.functional.mse_loss(pred, target)
    with watch_broadcasts(action="raise"):
        torch.nn.MSELoss()(pred.squeeze(1), target)  # fixed: silent


@pytest.mark.parametrize(
    ("left", "right"),
    [((16, 32), (32,)), ((2, 3, 5, 5), (1, 3, 1, 1)), ((4, 4), ()), ((3, 1), (3, 4)), ((2, 8, 8), (8, 8))],
)
def test_one_sided_broadcasts_are_silent(left, right):
    with watch_broadcasts(action="raise"):
        torch.zeros(left) * torch.ones(right)
        torch.zeros(left) * 2.0


def test_allow_outer_silences_intended_outer_products():
    a, b = torch.arange(3.0), torch.arange(4.0)
    with watch_broadcasts(action="raise", allow_outer=True):
        outer = a[:, None] * b[None, :]
    assert outer.shape == (3, 4)
    with pytest.raises(BroadcastStretchError):
        with watch_broadcasts(action="raise"):
            a[:, None] * b[None, :]


def test_bad_watch_arguments():
    with pytest.raises(ValueError, match="pass 'warn', 'raise' or a function"):
        watch_broadcasts(action="log")
    with pytest.raises(TypeError, match="True or False"):
        watch_broadcasts(allow_outer="yes")
    assert _get_current_dispatch_mode_stack() == []


# ---------------------------------------------------------------------- held_by_ipython (a real kernel)


def _kernel_run(codes: list[str], timeout: float = 120) -> list[str]:
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    texts = []
    try:
        for code in codes:
            msg_id = kc.execute(code)
            text = []
            while True:
                msg = kc.get_iopub_msg(timeout=timeout)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    text.append(msg["content"]["text"])
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
            texts.append("".join(text))
        return texts
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_in_a_kernel_output_history_and_a_traceback_keep_tensors_alive_until_released():
    texts = _kernel_run(
        [
            "import torch, gc, weakref\nfrom viewlab.sentinels import held_by_ipython, release_ipython_refs",
            "torch.zeros(1000, 250)",  # a cell whose value is a 1,000,000-byte tensor: Out[2] and _ keep it
            "def f():\n    big = torch.ones(500_000)\n    raise RuntimeError('boom')\nf()",  # the traceback keeps big
            "mine = torch.ones(10)\nmine",  # shown, but also held by the learner's own variable
            "for h in held_by_ipython():\n    print(h.where, h.shape, h.bytes)\n"
            "print('only traceback', [h.where for h in held_by_ipython(sources=('traceback',))])",
            "print('freed', release_ipython_refs())\nprint('left', [h.where for h in held_by_ipython()])",
            "import gc\nfor o in gc.get_objects():\n    if isinstance(o, torch.Tensor) and o.numel() in (250000, 500000):\n        print('ALIVE', o.shape, [type(r).__name__ for r in gc.get_referrers(o)])",
            "print('mine still there', mine.shape)",
        ]
    )
    held = texts[4]
    assert "Out[2] (1000, 250) 1000000" in held and "_2 (1000, 250) 1000000" in held
    assert "traceback: f() local 'big' (500000,) 2000000" in held
    assert "(10,)" not in held, "a tensor the learner still names is not reported"
    assert "only traceback [\"traceback: f() local 'big'\"]" in held, held
    assert "freed 3000000" in texts[5] and "left []" in texts[5]
    assert "mine still there torch.Size([10])" in texts[7], texts[6]


def test_outside_ipython_it_says_so_and_bad_sources_are_named():
    from types import SimpleNamespace

    from viewlab.sentinels import held_by_ipython, release_ipython_refs

    with pytest.raises(RuntimeError, match="works inside IPython or Jupyter"):
        held_by_ipython()
    shell = SimpleNamespace(user_ns={"Out": {1: torch.zeros(4)}})
    with pytest.raises(ValueError, match=r"release_ipython_refs\(sources='logs'\): pass some of"):
        release_ipython_refs(shell, sources="logs")
    assert release_ipython_refs(shell, sources="traceback") == 0 and 1 in shell.user_ns["Out"]
    assert release_ipython_refs(shell, sources="history") == 16 and shell.user_ns["Out"] == {}


def test_in_a_kernel_the_error_names_the_line_of_the_cell():
    texts = _kernel_run(
        [
            "from viewlab import views_only\nimport torch\nx = torch.zeros(2, 3).t()\ntry:\n"
            "    with views_only():\n        y = x.reshape(6)\nexcept Exception as err:\n    print(err)",
        ]
    )
    assert "At line 6 of this cell: y = x.reshape(6)" in texts[0], texts[0]


def test_viewlabs_own_helpers_are_not_reported_but_the_same_code_in_yours_is():
    from viewlab import padding_mask

    lengths = torch.tensor([3, 1])
    with watch_broadcasts(action="raise"):
        mask = padding_mask(lengths, 4)  # built inside viewlab by comparing (1, L) with (B, 1): not your code
    assert mask.shape == (2, 1, 1, 4)
    with pytest.raises(BroadcastStretchError, match=r"\(1, 4\) and \(2, 1\) to \(2, 4\)"):
        with watch_broadcasts(action="raise"):
            _ = torch.arange(4)[None, :] < lengths[:, None]  # the same comparison written here: reported


@pytest.mark.parametrize("watch_outside", [True, False], ids=["watch-outside-measure", "watch-inside-measure"])
def test_an_operator_run_inside_measure_is_still_yours(watch_outside):
    """measure's dispatch mode passes the learner's operator on from viewlab code; that must not make it
    'viewlab's own' (it did: a mutual broadcast inside `with measure():` went unreported)."""
    from viewlab import measure, padding_mask

    def run():
        if watch_outside:
            with watch_broadcasts(action="raise"), measure():
                yield
        else:
            with measure(), watch_broadcasts(action="raise"):
                yield

    with pytest.raises(BroadcastStretchError, match=r"\(1, 4\) and \(4, 1\) to \(4, 4\)"):
        for _ in run():
            _ = torch.ones(1, 4) + torch.ones(4, 1)
    for _ in run():
        mask = padding_mask(torch.tensor([3, 1]), 4)  # viewlab's own helper, inside measure: still not reported
    assert mask.shape == (2, 1, 1, 4)
