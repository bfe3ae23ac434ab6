"""Regression tests for the fuzz review's defect groups in the guards and the toolbox's checks
(E1, E4, E5, E6, E8, E17, E19, D23, and the sizes of attention.causal_mask / versions.torch_at_least).

Each test is the review's repro, through the public API only; each failed on the code the review read.
"""

from __future__ import annotations

import asyncio
import copy
import fractions
import gc
import pickle
import threading
import warnings

import numpy as np
import pytest
import torch

import viewlab as vl
from viewlab.attention import causal_mask, scaled_dot_product_attention
from viewlab.course import bench
from viewlab.course.versions import check_torch, torch_at_least


def _on_thread(fn):
    """Run ``fn`` on a new thread; what it returned or raised."""
    box = []

    def run():
        try:
            box.append(fn())
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            box.append(err)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    return box[0] if box else None


def _stacks():
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return len(_get_current_function_mode_stack()), len(_get_current_dispatch_mode_stack())


# ----- E4: a generator suspended inside a guard, finished on another thread ------------------------------------
GUARDS = {
    "views_only": lambda: vl.views_only(),
    "watch_broadcasts": lambda: vl.watch_broadcasts(action="raise"),
}
# What each guard catches on the thread that entered it, while it is on.
CAUGHT = {
    "views_only": (vl.CopyError, lambda: torch.arange(3.0).clone()),
    "watch_broadcasts": (vl.BroadcastStretchError, lambda: torch.zeros(3, 1) - torch.zeros(3)),
}


@pytest.mark.parametrize("how", ["close", "finish", "collect"])
@pytest.mark.parametrize("name", GUARDS)
def test_a_guard_in_a_generator_ended_on_another_thread_leaves_nothing_on_the_first(name, how):
    def gen():
        with GUARDS[name]():
            yield 1

    g = gen()
    next(g)
    with pytest.raises(CAUGHT[name][0]):
        CAUGHT[name][1]()  # the block is open on this thread
    if how == "close":
        ended = _on_thread(g.close)
    elif how == "finish":
        ended = _on_thread(lambda: next(g, "done"))
    else:
        holder = [g]
        del g

        def collect():
            holder.pop()
            gc.collect()

        ended = _on_thread(collect)
    assert not isinstance(ended, BaseException), f"{how} on another thread raised {ended!r}"
    assert isinstance(CAUGHT[name][1](), torch.Tensor), "the guard still acts on the first thread"
    vl.layout(torch.zeros(1))  # the next viewlab entry on this thread takes the disarmed modes off
    assert _stacks() == (0, 0)


def test_torch_alone_in_a_generator_closed_on_another_thread_puts_the_modes_back_here():
    seen = []

    def gen():
        with bench.torch_alone():
            yield

    with vl.watch_broadcasts(action=seen.append):
        g = gen()
        next(g)
        _on_thread(g.close)
        vl.layout(torch.zeros(1))  # the next viewlab entry on this thread puts its set-aside modes back
        i = torch.arange(3)
        causal = i[:, None] >= i[None, :]  # made on purpose: the watcher's call recorder must see it
        _ = torch.zeros(3, 1) - torch.zeros(3)  # an accident: reported
    assert causal.shape == (3, 3)
    assert len(seen) == 1 and seen[0].startswith("watch_broadcasts(): Tensor.sub"), seen
    assert _stacks() == (0, 0)


# ----- E5: guards as decorators of generator and async functions ------------------------------------------------
@pytest.mark.parametrize("name", GUARDS)
def test_a_guard_refuses_to_decorate_a_generator_or_an_async_function(name):
    def gen(t):
        yield t.clone()

    async def coro(t):
        return t.clone()

    async def agen(t):
        yield t.clone()

    for fn, kind in ((gen, "generator function"), (coro, "async function"), (agen, "async generator function")):
        with pytest.raises(
            TypeError, match=rf"^{name}\(\): cannot guard the {kind} .*{fn.__name__}.* Write `with {name}\(\):` inside"
        ):
            GUARDS[name]()(fn)


def test_a_decorated_plain_function_is_still_guarded():
    @vl.views_only()
    def copies(t):
        return t.clone()

    with pytest.raises(vl.CopyError):
        copies(torch.zeros(2))
    assert asyncio.run(_plain()) == 1


async def _plain():
    return 1


# ----- E6: watch_broadcasts entered inside torch_alone -----------------------------------------------------------
def test_watch_broadcasts_inside_torch_alone_sees_the_calls():
    seen = []
    with vl.watch_broadcasts(action=seen.append), bench.torch_alone(), vl.watch_broadcasts(action=seen.append):
        i = torch.arange(4)
        mask = i[:, None] >= i[None, :]  # meant: None made both size-1 dims
        bug = torch.zeros(4, 1) - torch.zeros(4)
    assert mask.shape == bug.shape == (4, 4)
    assert len(seen) == 1 and "Tensor.sub (aten.sub.Tensor)" in seen[0], seen  # named by the call, once


# ----- E1: allow_outer=True and size-1 dims kept from tensors made before the block -------------------------------
def test_allow_outer_keeps_exempting_a_dim_an_op_inside_kept_from_before():
    a, b = torch.zeros(4, 1), torch.zeros(1, 4)  # made before the block
    seen = []
    with vl.watch_broadcasts(action=seen.append, allow_outer=True):
        a - b
        (a + 1) - b
        a.float() - b
        a[:] - b
        torch.where(a > 0, a, 0.0) - b
        model = torch.nn.Linear(3, 1)(torch.ones(4, 3))  # made inside, by a model: still reported
        model - torch.zeros(4)
    assert len(seen) == 1 and "torch.nn.functional.linear" in seen[0], seen
    seen.clear()
    with vl.watch_broadcasts(action=seen.append):
        (a + 1) - b
    assert len(seen) == 1 and "from before the watch began" in seen[0] and "allow_outer=True" in seen[0], seen


# ----- E8: BroadcastError round-trips --------------------------------------------------------------------------
def test_broadcast_error_pickles_and_copies():
    with pytest.raises(vl.BroadcastError) as caught:
        vl.explain_broadcast((4, 3), (4,))
    err = caught.value
    for again in (pickle.loads(pickle.dumps(err)), copy.copy(err), copy.deepcopy(err)):
        assert type(again) is vl.BroadcastError and str(again) == str(err)
        assert again.conflicts == err.conflicts and again.fixes == err.fixes


# ----- E17: NumPy (and other) numbers where viewlab accepts numbers -----------------------------------------------
def test_numpy_bools_and_numbers_are_accepted_where_the_convention_says():
    with vl.watch_broadcasts(allow_outer=np.bool_(True)):
        pass
    with vl.measure(log_ops=np.bool_(False)):
        pass
    q = k = v = torch.eye(3)[None]
    scaled_dot_product_attention(q, k, v, is_causal=np.bool_(True))
    for seconds in (np.float32(0.01), fractions.Fraction(1, 100), torch.tensor(0.01)):
        c = bench.compare({"a": lambda: None}, bytes_moved={"a": np.int64(8)}, rounds=1, min_run_time=seconds)
        assert c["a"].bytes_moved == 8


# ----- E19: storage-less wrappers; share_memory_ of NumPy-backed memory --------------------------------------------
@pytest.mark.parametrize("name", ["layout", "storage_indices", "shares_storage"])
def test_vmap_tensors_get_a_clear_error_naming_the_function(name):
    fn = getattr(vl, name)

    def inside(t):
        fn(*([t, t] if name == "shares_storage" else [t]))
        return t

    with pytest.raises(ValueError, match=rf"^{name}\(\): `\w` has no storage of its own to look at .*torch.func.vmap"):
        torch.func.vmap(inside)(torch.zeros(2, 3))


def test_views_only_sees_share_memory_of_a_numpy_backed_tensor_copy_its_bytes():
    t = torch.from_numpy(np.zeros(24, dtype=np.float32))
    with pytest.raises(vl.CopyError, match=r"^views_only\(\): torch.share_memory_ made new storage \(96 bytes"):
        with vl.views_only():
            t.share_memory_()
    with vl.views_only():  # borrowing NumPy's memory copies nothing
        torch.from_numpy(np.zeros(3))
        torch.as_tensor(np.zeros(3))


# ----- D23: versions.check_torch and the TypedStorage warning -------------------------------------------------------
def test_check_torch_leaves_the_typed_storage_warning_as_it_found_it():
    def warns() -> bool:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.zeros(1).storage()
        return any("TypedStorage is deprecated" in str(w.message) for w in caught)

    warns()  # the learner has seen it once: torch shows it once per process
    assert check_torch() == []
    assert not warns(), "check_torch() re-armed the warning"


# ----- sizes: meta devices and huge sizes refused by name --------------------------------------------------------
def test_causal_mask_refuses_sizes_past_int64_even_on_meta():
    with pytest.raises(ValueError, match=r"^causal_mask\(\): a \(1000000000000, 1000000000000\) mask would take"):
        causal_mask(10**12, device="meta")
    with pytest.raises(ValueError, match=r"^causal_mask\(\): .*int64"):
        causal_mask(3, 2**62, device="meta")
    assert causal_mask(10**12, 2, device="meta").shape == (10**12, 2)  # fits: meta holds no data


def test_the_fuzz_reference_of_causal_mask_builds_no_cpu_mask_for_a_meta_result():
    from tests.fuzz.test_fuzz_api import oracle_causal

    result = causal_mask(10**12, 4, device="meta")  # 4 TB as a CPU bool mask
    oracle_causal({"q_len": 10**12, "k_len": 4, "device": "meta"}, result, None)


@pytest.mark.parametrize("text", ["05-can-expand", "cuda:7", "2.5-x", "v2.5"])
def test_torch_at_least_reads_whole_versions_only(text):
    with pytest.raises(ValueError, match=rf"^torch_at_least\(\): version='{text}': pass a version such as"):
        torch_at_least(text)
    assert torch_at_least("2.6", installed="2.6.0rc1+cpu") and torch_at_least("2.5", installed="2.11.0.dev20260101")
