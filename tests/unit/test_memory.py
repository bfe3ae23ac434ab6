"""viewlab.measure: exact bytes of tensor storages (CPU) and the CUDA allocator counters (CUDA)."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import viewlab
from viewlab import measure
from viewlab.memory import resolve_device, rss_bytes

pytestmark = pytest.mark.colab
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA; torch.cuda.is_available() is False")


def test_expand_is_free_and_repeat_costs_numel_times_itemsize():
    x = torch.ones(1, 5)
    with measure(device="cpu") as m_expand:
        e = x.expand(1000, 5)
    with measure(device="cpu") as m_repeat:
        r = x.repeat(1000, 1)
    assert m_expand.allocated_bytes == 0 and m_expand.peak_bytes == 0
    assert m_repeat.allocated_bytes == r.numel() * r.element_size() == 20_000
    assert m_repeat.peak_bytes == 20_000
    assert e.shape == r.shape


DTYPES = [torch.float16, torch.float32, torch.float64, torch.int8, torch.int64, torch.bool, torch.complex64]


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    reps=st.lists(st.integers(1, 3), min_size=3, max_size=3),
    dtype=st.sampled_from(DTYPES),
)
def test_repeat_and_expand_are_exact_for_any_shape_and_dtype(shape, reps, dtype):
    x = torch.zeros(shape, dtype=dtype)
    reps = reps[: len(shape)]
    with measure(device="cpu") as m:
        r = x.repeat(*reps)
    assert m.allocated_bytes == r.numel() * r.element_size()
    big = [s * k for s, k in zip(shape, reps)]
    ones = torch.zeros([1] * len(shape), dtype=dtype)
    with measure(device="cpu") as m0:
        e = ones.expand(*big)
        c = e.contiguous()  # materialising the expanded view does cost memory
    # an expand that changes no size is already contiguous, and contiguous() then returns it unchanged
    assert m0.allocated_bytes == (0 if e.is_contiguous() else c.numel() * c.element_size())
    with measure(device="cpu") as m1:
        e = ones.expand(*big)
    assert m1.allocated_bytes == 0 and e.numel() == c.numel()


def test_temporary_counts_in_peak_not_in_allocated():
    x = torch.ones(100)  # 400 bytes
    with measure(device="cpu") as m:
        total = (x * 2).sum()  # x * 2 (400 B) lives only during the statement
    assert m.allocated_bytes == total.element_size() == 4
    assert m.peak_bytes == 400 + 4


def test_freed_inside_is_subtracted_and_live_values_update():
    with measure(device="cpu") as m:
        a = torch.empty(256)
        assert m.allocated_bytes == 1024
        del a
        assert m.allocated_bytes == 0
        b = torch.empty(10, dtype=torch.float64)
    assert (m.allocated_bytes, m.peak_bytes) == (80, 1024)
    del b
    assert m.allocated_bytes == 80, "values are frozen at exit"


def test_views_and_inplace_ops_allocate_nothing():
    x = torch.arange(24.0).view(2, 3, 4)
    with measure(device="cpu", log_ops=True) as m:
        views = [
            x.t() if x.dim() == 2 else x.transpose(0, 2),
            x[1:, ::2],
            x.view(6, 4),
            x.unsqueeze(0),
            x.permute(2, 0, 1),
        ]
        x.mul_(2)
        x.contiguous()  # already contiguous: returns itself
    assert m.allocated_bytes == 0 and m.peak_bytes == 0
    assert m.ops and all(op.bytes == 0 for op in m.ops), m.ops
    assert len(views) == 5


def test_materialising_a_non_contiguous_view_is_counted():
    x = torch.zeros(64, 32)
    with measure(device="cpu") as m:
        y = x.t().contiguous()
    assert m.allocated_bytes == y.numel() * 4 == 8192


def test_torch_tensor_and_factories_are_counted():
    with measure(device="cpu") as m:
        a = torch.tensor([1.0, 2.0, 3.0])  # reaches dispatch as lift_fresh
        b = torch.zeros(3, dtype=torch.int64)
        c = torch.arange(5, dtype=torch.int16)
    assert m.allocated_bytes == 12 + 24 + 10
    assert a.numel() + b.numel() + c.numel() == 11


def test_resize_growth_is_counted():
    with measure(device="cpu") as m:
        a = torch.empty(0)
        a.resize_(100)
    assert m.allocated_bytes == 400


def test_storages_from_before_the_block_are_out_of_scope():
    x = torch.ones(1000)
    with measure(device="cpu") as m:
        del x  # freeing something older than the block is not a negative allocation here
        y = torch.ones(10)
    assert m.allocated_bytes == 40 and m.peak_bytes == 40 and y.numel() == 10
    assert "before" in m.note


def test_log_ops_records_names_and_bytes_in_order():
    x = torch.ones(2, 3)
    with measure(device="cpu", log_ops=True) as m:
        x.expand(4, 2, 3)
        x.repeat(2, 2)
    assert [(op.name, op.bytes) for op in m.ops] == [("aten.expand.default", 0), ("aten.repeat.default", 96)]
    assert m.ops[1].shapes == ((4, 6),)
    with measure(device="cpu") as quiet:
        x.repeat(2, 2)
    assert quiet.ops == []


def test_nested_measures_both_count():
    with measure(device="cpu") as outer:
        a = torch.zeros(10)
        with measure(device="cpu") as inner:
            b = torch.zeros(20)
    assert inner.allocated_bytes == 80
    assert outer.allocated_bytes == 120
    assert a.numel() + b.numel() == 30


def test_training_step_gradients_and_optimiser_state_are_counted():
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 16)
    opt = torch.optim.Adam(model.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    data = torch.randn(8, 32)
    with measure(device="cpu") as m:
        loss = model(data).square().mean()
        loss.backward()
        opt.step()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters())
    assert grads == param_bytes
    # Adam keeps exp_avg and exp_avg_sq (one parameter-sized buffer each) plus a step count per parameter.
    state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    assert state >= 2 * param_bytes
    assert m.allocated_bytes >= grads + state
    assert m.peak_bytes >= m.allocated_bytes


def test_measure_holds_no_reference_to_tensors():
    with measure(device="cpu", log_ops=True) as m:
        t = torch.zeros(1000)
        ref = weakref.ref(t)
        del t
        gc.collect()
        assert ref() is None, "a tensor made inside must die when the user drops it"
        u = torch.zeros(5)
        ref_u = weakref.ref(u)
    del u
    gc.collect()
    assert ref_u() is None
    assert m.allocated_bytes == 20


def test_exception_inside_leaves_no_active_mode():
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    with pytest.raises(ValueError):
        with measure(device="cpu") as m:
            torch.zeros(3)
            raise ValueError("boom")
    assert _get_current_dispatch_mode() is None
    assert m.allocated_bytes == 0  # the zeros were never bound, so freed before exit
    assert m.peak_bytes == 12


def test_other_threads_are_not_counted():
    out = []
    with measure(device="cpu") as m:
        th = threading.Thread(target=lambda: out.append(torch.zeros(1000)))
        th.start()
        th.join()
        mine = torch.zeros(1)
    assert m.allocated_bytes == 4
    assert out[0].numel() == 1000 and mine.numel() == 1


def test_backend_is_named_and_default_counts_every_device():
    with measure(device="cpu") as m:
        pass
    assert m.backend == "tensor storages (cpu)"
    assert "tensor storages" in str(m)
    # The default is the same exact backend with or without CUDA, so notebook cells print the same
    # numbers on a laptop and on a GPU runtime.
    with measure() as auto:
        z = torch.zeros(2)
    assert auto.backend == "tensor storages (all devices)"
    assert auto.allocated_bytes == z.numel() * 4
    if not torch.cuda.is_available():
        assert resolve_device(None) == torch.device("cpu")


@pytest.mark.cuda
@needs_cuda
def test_default_counts_cpu_and_cuda_storages_alike():
    x = torch.ones(1, 256)
    with measure() as m:
        a = x.repeat(4, 1)
        b = x.to("cuda").repeat(4, 1)
    # The CUDA copy of x is a temporary: in the peak, not in what is still held.
    assert m.allocated_bytes == a.numel() * 4 + b.numel() * 4
    assert m.peak_bytes == m.allocated_bytes + 256 * 4
    del a, b


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"device": "gpu"}, ValueError, "'cpu', 'cuda'"),
        ({"device": 0}, TypeError, "'cuda:0'"),
        ({"device": "meta"}, ValueError, "no memory"),
        ({"log_ops": "yes"}, TypeError, "True or False"),
    ],
)
def test_bad_arguments_say_what_to_pass(kwargs, error, words):
    with pytest.raises(error, match=words) as err:
        measure(**kwargs)
    assert str(err.value).startswith("measure(): "), "the message names the function the learner called"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error shown when CUDA is missing")
def test_asking_for_cuda_without_cuda_explains():
    with pytest.raises(RuntimeError, match="device='cpu'"):
        measure(device="cuda")
    assert not torch.cuda.is_initialized()


def test_a_measure_object_is_used_once():
    ctx = measure(device="cpu")
    with ctx:
        pass
    with pytest.raises(RuntimeError, match="new one"):
        with ctx:
            pass


def test_rss_is_a_positive_number_on_linux():
    value = rss_bytes()
    assert value is None or value > 1_000_000


def test_exported_from_package():
    assert viewlab.measure is measure
    assert "measure" in viewlab.__all__


# ---------------------------------------------------------------- CUDA (skipped without a GPU)


@pytest.mark.cuda
@needs_cuda
def test_cuda_expand_zero_repeat_exact_and_temporary_in_peak():
    x = torch.ones(1, 1024, device="cuda")
    torch.cuda.synchronize()
    with measure(device="cuda") as m0:
        e = x.expand(4096, 1024)
    with measure(device="cuda") as m1:
        r = x.repeat(4096, 1)
    with measure(device="cuda") as m2:
        s = (r * 2).sum()
    assert m0.backend.startswith("cuda allocator")
    assert m0.allocated_bytes == 0 and m0.peak_bytes == 0
    assert m1.allocated_bytes == r.numel() * 4
    assert m2.peak_bytes >= r.numel() * 4 and m2.allocated_bytes < 1024
    assert m1.reserved_bytes is not None and e.shape == r.shape and s.item() == 2 * r.numel()
    assert "process-global" in m1.note


@pytest.mark.cuda
@needs_cuda
def test_cuda_log_ops_names_the_allocating_op():
    x = torch.ones(1, 256, device="cuda")
    with measure(device="cuda", log_ops=True) as m:
        x.expand(8, 256)
        y = x.repeat(8, 1)
    assert [(op.name, op.bytes) for op in m.ops] == [("aten.expand.default", 0), ("aten.repeat.default", 8192)]
    assert y.is_cuda


def test_cpu_with_an_index_counts_like_cpu():
    """Regression: device='cpu:0' (or torch.device('cpu', 0)) used to report 0 bytes for everything."""
    for device in ("cpu:0", torch.device("cpu", 0)):
        with measure(device=device) as m:
            y = torch.zeros(4, 3)
        assert (m.allocated_bytes, m.backend) == (48, "tensor storages (cpu)"), device
    assert y.numel() == 12


def test_memory_borrowed_from_numpy_is_not_counted():
    """Regression: torch.from_numpy / torch.as_tensor share the array's memory; torch allocates nothing."""
    import numpy as np

    arr = np.zeros(1000, dtype=np.float32)
    with measure() as m:
        shared = torch.from_numpy(arr)
        also_shared = torch.as_tensor(arr)
        copied = torch.tensor(arr)  # a real copy: counted
    assert m.allocated_bytes == copied.nbytes == 4000
    assert shared.data_ptr() == also_shared.data_ptr() == arr.ctypes.data


def test_requested_equals_allocated_for_storages_and_summary_shows_one_number():
    with measure(device="cpu") as m:
        y = torch.ones(1)
    assert (m.allocated_bytes, m.requested_bytes, m.peak_bytes, m.requested_peak_bytes) == (4, 4, 4, 4)
    assert m.summary() == "tensor storages (cpu): allocated 4 B, peak 4 B" and m.cuda_counters_before is None
    assert y.item() == 1.0


@pytest.mark.cuda
@needs_cuda
def test_cuda_allocated_is_block_rounded_and_requested_is_exact():
    with measure(device="cuda") as m:
        tiny = torch.ones(1, device="cuda")
    assert (m.allocated_bytes, m.requested_bytes) == (512, 4)
    assert "allocated 512 B (requested 4 B)" in m.summary()
    assert set(m.cuda_counters_before) == {
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
    }
    assert tiny.is_cuda


@pytest.mark.cuda
@needs_cuda
def test_cuda_nested_measure_keeps_the_outer_peak():
    with measure(device="cuda") as outer:
        big = torch.empty(8 * 2**20, dtype=torch.uint8, device="cuda")
        del big
        with measure(device="cuda") as inner:
            small = torch.empty(1024, dtype=torch.uint8, device="cuda")
    assert inner.peak_bytes == 1024 and outer.peak_bytes >= 8 * 2**20
    assert small.is_cuda


_PROBE = torch.library.Library("viewlab_probe", "DEF")  # a real operator whose two outputs alias two inputs
_PROBE.define("pair(Tensor(a) x, Tensor(b) y) -> (Tensor(a), Tensor(b))")
_PROBE.impl("pair", lambda x, y: (x.view(x.shape), y.view(y.shape)), "CompositeExplicitAutograd")
_PROBE.define("fresh_and_view(Tensor(a) x, Tensor y) -> (Tensor, Tensor(a))")
_PROBE.impl("fresh_and_view", lambda x, y: (y.clone(), x.view(x.shape)), "CompositeExplicitAutograd")


def test_outputs_that_alias_different_inputs_are_never_counted():
    # The input storages were once collected lazily with sizes 0 for an operator that mutates nothing, so a second
    # output that aliased another input counted that input's whole storage as new.
    a, b = torch.zeros(10), torch.zeros(20)
    with measure(device="cpu") as m:
        p, q = torch.ops.viewlab_probe.pair(a, b)
    assert (m.allocated_bytes, m.peak_bytes) == (0, 0)
    assert p.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    with measure(device="cpu") as m2:
        fresh, view = torch.ops.viewlab_probe.fresh_and_view(a, b)
    assert m2.allocated_bytes == fresh.untyped_storage().nbytes() == b.numel() * 4
    assert view.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() and q.numel() == 20


_OPS = {  # each: inputs -> results, over the layouts a learner meets (views, copies, in place, out=, several outputs)
    "add": lambda x: [x + 1],
    "view": lambda x: [x.view(-1)],
    "t_contiguous": lambda x: [x.t().contiguous()],
    "expand": lambda x: [x[:1].expand(3 if len(x) else 0, *x.shape[1:])],
    "repeat": lambda x: [x.repeat(2, 1)],
    "unbind": lambda x: list(x.unbind(0)),
    "chunk_clone": lambda x: [c.clone() for c in x.chunk(2)],
    "sort": lambda x: list(torch.sort(x, dim=-1)),
    "inplace": lambda x: [x.mul_(2)],
    "out_resize": lambda x: [torch.add(x, 1, out=torch.empty(0))],
    "index": lambda x: [x[torch.tensor([0, 0])] if len(x) else x[:0].clone()],
    "cat": lambda x: [torch.cat([x, x])],
    "tensor": lambda x: [torch.tensor([[1.0, 2.0]])],
    # views whose schema says so, and one whose schema does not (aten._unsafe_view returns its input's storage):
    # the tracker looks outputs up among the inputs only for operators that may alias
    "unsafe_view": lambda x: [torch.ops.aten._unsafe_view(x, (-1,))],
    "detach_alias_narrow": lambda x: [x.detach(), torch.ops.aten.alias(x), x.narrow(-1, 0, x.shape[-1])],
    "split_diagonal": lambda x: [*x.split(1, dim=-1), x.diagonal()],
    "clone_mm_where": lambda x: [x.clone(), x @ x.mT, torch.where(x > 0, x, 0.0)],
}


@settings(max_examples=60, deadline=None)
@given(
    shape=st.tuples(st.integers(0, 4), st.integers(0, 3)),
    names=st.lists(st.sampled_from(sorted(_OPS)), min_size=1, max_size=5),
)
def test_allocated_bytes_match_a_storage_oracle(shape, names):
    # The oracle: the distinct storages held by the results that are not the input's, by data pointer and nbytes.
    x = torch.zeros(shape)
    before = {x.untyped_storage().data_ptr()}
    with measure(device="cpu") as m:
        results = [r for name in names for r in _OPS[name](x)]
    storages = {r.untyped_storage().data_ptr(): r.untyped_storage().nbytes() for r in results}
    # an empty storage has data pointer 0: several such results hold no bytes between them
    expected = sum(n for ptr, n in storages.items() if ptr not in before)
    assert m.allocated_bytes == expected, (names, shape)
    assert m.peak_bytes >= m.allocated_bytes


def test_a_storage_freed_on_another_thread_is_subtracted_and_read_from_there():
    seen = []
    with measure(device="cpu") as m:
        box = [torch.zeros(250)]  # 1,000 B, handed to a worker that drops it
        worker = threading.Thread(target=lambda: (box.clear(), seen.append(m.allocated_bytes)))
        worker.start()
        worker.join()
        assert m.allocated_bytes == 0
    assert seen == [0] and m.peak_bytes == 1000
