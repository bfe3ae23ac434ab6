"""viewlab.ipython: where the code runs (kernel, Colab), and what IPython keeps alive -- found and released
in a real kernel, and named clearly outside one."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

import viewlab
from viewlab.ipython import HeldTensor, held_by_ipython, in_kernel, on_colab, release_ipython_refs

pytestmark = pytest.mark.colab  # also run on Colab's stack (IPython 7.34): make test-colab


def run_in_kernel(codes: list[str], timeout: float = 120) -> list[str]:
    """Run each code string as one cell of a fresh python3 kernel; what each cell printed."""
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


def test_the_package_face_and_this_module_are_the_same_functions():
    assert viewlab.held_by_ipython is held_by_ipython and viewlab.release_ipython_refs is release_ipython_refs


@pytest.mark.kernel
def test_in_a_kernel_output_history_and_a_traceback_keep_tensors_alive_until_released():
    texts = run_in_kernel(
        [
            "import torch, gc, weakref\nfrom viewlab.ipython import held_by_ipython, in_kernel, release_ipython_refs",
            "torch.zeros(1000, 250)",  # a cell whose value is a 1,000,000-byte tensor: Out[2] and _ keep it
            "def f():\n    big = torch.ones(500_000)\n    raise RuntimeError('boom')\nf()",  # the traceback keeps big
            "mine = torch.ones(10)\nmine",  # shown, but also held by the learner's own variable
            "for h in held_by_ipython():\n    print(h.where, h.shape, h.bytes)\n"
            "print('only traceback', [h.where for h in held_by_ipython(sources=('traceback',))])",
            "print('freed', release_ipython_refs())\nprint('left', [h.where for h in held_by_ipython()])",
            "import gc\nfor o in gc.get_objects():\n    if isinstance(o, torch.Tensor) and o.numel() in (250000, 500000):\n        print('ALIVE', o.shape, [type(r).__name__ for r in gc.get_referrers(o)])",
            "print('mine still there', mine.shape, 'in a kernel', in_kernel())",
        ]
    )
    held = texts[4]
    assert "Out[2] (1000, 250) 1000000" in held and "_2 (1000, 250) 1000000" in held
    assert "traceback: f() local 'big' (500000,) 2000000" in held
    assert "(10,)" not in held, "a tensor the learner still names is not reported"
    assert "only traceback [\"traceback: f() local 'big'\"]" in held, held
    assert "freed 3000000" in texts[5] and "left []" in texts[5]
    assert "mine still there torch.Size([10]) in a kernel True" in texts[7], texts[6]


def test_outside_ipython_it_says_so_and_bad_sources_are_named():
    with pytest.raises(RuntimeError, match=r"^held_by_ipython\(\): works inside IPython or Jupyter"):
        held_by_ipython()
    with pytest.raises(RuntimeError, match=r"^release_ipython_refs\(\): works inside IPython or Jupyter"):
        release_ipython_refs()
    shell = SimpleNamespace(user_ns={"Out": {1: torch.zeros(4)}})
    with pytest.raises(ValueError, match=r"^release_ipython_refs\(\): `sources` must be some of \('history', "):
        release_ipython_refs(shell, sources="logs")
    with pytest.raises(ValueError, match=r"^held_by_ipython\(\): `sources` .*; got tuple \(\)"):
        held_by_ipython(shell, sources=())
    with pytest.raises(ValueError, match=r"`sources` .*; got list \[\['history'\]\]"):
        held_by_ipython(shell, sources=[["history"]])  # unhashable items: the same clear error
    with pytest.raises(TypeError, match=r"^held_by_ipython\(\): `ip` must be the IPython shell \(get_ipython\(\)\)"):
        held_by_ipython(ip=3)
    assert release_ipython_refs(shell, sources="traceback") == 0 and 1 in shell.user_ns["Out"]
    assert release_ipython_refs(shell, sources="history") == 16 and shell.user_ns["Out"] == {}


def test_outputs_inside_tuples_and_dicts_are_found_and_shared_storage_counts_once():
    big = torch.zeros(300)
    shell = SimpleNamespace(
        user_ns={
            "Out": {
                1: (big, "text"),
                2: {"logits": torch.ones(2, 3)},
                3: [[torch.ones(5)]],
            },  # a list in a list: not read
            "_": big[:10],  # the same storage as Out[1], under another name
            "_7": 5,
        }
    )
    held = held_by_ipython(shell)
    assert [(h.where, h.shape, h.bytes) for h in held] == [
        ("Out[1]", (300,), 1200),
        ("Out[2]", (2, 3), 24),
        ("_", (10,), 1200),
    ]
    assert repr(held[0]) == "HeldTensor(Out[1]: shape (300,), torch.float32, cpu, 1,200 B (1.2 KiB))"
    assert repr(HeldTensor("_", torch.zeros(2))) == "HeldTensor(_: shape (2,), torch.float32, cpu, 8 B)"
    del big, held
    assert release_ipython_refs(shell) == 1200 + 24
    assert list(shell.user_ns["Out"]) == [3], "only what holds a tensor at the top level is dropped"
    assert shell.user_ns["_"] is None and shell.user_ns["_7"] == 5


def test_in_kernel_and_on_colab_read_the_running_session():
    assert in_kernel() is False, "plain pytest is no kernel"
    assert on_colab() is ("google.colab" in sys.modules)
