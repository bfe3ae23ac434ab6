"""Notebook 06 (memory lab): each general sentence of its prose, checked against torch over generated inputs.

Bytes are checked exactly on the CPU: a storage's size with ``untyped_storage().nbytes()`` and what a block of
code allocated with ``viewlab.measure(device="cpu")``. Section 7's sentences hold only on CUDA and are not
bound here (no GPU in this run); their cells assert them where a GPU is present.
"""

from __future__ import annotations

import gc
import itertools
import tracemalloc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from tests.conftest import RULE_SETTINGS
from tests.course.learner_inputs import DTYPES, learner_tensors
from viewlab import MemoryMonitor, measure
from viewlab.ipython import held_by_ipython, release_ipython_refs

pytestmark = pytest.mark.nb06

sizes = st.integers(0, 4)
shapes = st.lists(sizes, min_size=0, max_size=3).map(tuple)
dtypes = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int64])


def tensors() -> st.SearchStrategy[torch.Tensor]:
    """Tensors as learners meet them (the shared strategy: offsets, views of views, transposes, expands, unfold
    windows, channels_last, 0-d, empty, size-1 dims, requires_grad, ten dtypes)."""
    return learner_tensors(dims=(0, 3), side=(0, 4))


def _views(x: torch.Tensor) -> dict[str, object]:
    """The view-making operators of section 1, each as a function of x (None where x's shape does not allow it)."""
    return {
        "expand": lambda: x.unsqueeze(0).expand(3, *x.shape),
        "slice": lambda: x[1:] if x.ndim else x[...],
        "view": lambda: x.view(-1) if x.is_contiguous() else x.view(x.shape),
        "t": lambda: x.t() if x.ndim <= 2 else x.transpose(0, 1),
        "permute": lambda: x.permute(tuple(reversed(range(x.ndim)))),
        "unsqueeze": lambda: x.unsqueeze(-1),
    }


@pytest.mark.rule("06", "Memory is spent when an operator makes a new storage; a view of one adds no storage bytes.")
@RULE_SETTINGS
@given(tensors(), st.sampled_from(["expand", "slice", "view", "t", "permute", "unsqueeze"]))
def test_a_view_allocates_nothing(x, op):
    with measure(device="cpu") as m:
        v = _views(x)[op]()
    assert m.allocated_bytes == m.peak_bytes == 0
    assert v.untyped_storage()._cdata == x.untyped_storage()._cdata


@pytest.mark.rule(
    "06",
    "`t.untyped_storage().nbytes()` is the size of the block behind `t`, `t.untyped_storage().data_ptr()` its address,"
    " the same for every view of it.",
)
@RULE_SETTINGS
@given(tensors(), st.sampled_from(["expand", "slice", "view", "t", "permute", "unsqueeze"]))
def test_every_view_reports_the_same_block(x, op):
    v = _views(x)[op]()
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert v.untyped_storage().nbytes() == x.untyped_storage().nbytes()


@pytest.mark.rule("06", "Torch's empty storages have address 0 (NumPy's need not).")
@RULE_SETTINGS
@given(
    st.sampled_from(["empty", "zeros", "tensor([])", "arange(0)", "slice of a full tensor, cloned"]),
    st.sampled_from([torch.float32, torch.int8, torch.float64]),
)
def test_an_empty_storage_has_address_zero_so_equal_addresses_do_not_prove_sharing(maker, dtype):
    make = {
        "empty": lambda: torch.empty(0, dtype=dtype),
        "zeros": lambda: torch.zeros(0, dtype=dtype),
        "tensor([])": lambda: torch.tensor([], dtype=dtype),
        "arange(0)": lambda: torch.arange(0, dtype=dtype),
        "slice of a full tensor, cloned": lambda: torch.ones(5, dtype=dtype)[:0].clone(),
    }[maker]
    a, b = make(), torch.empty(0, dtype=dtype)
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() == 0
    assert a.untyped_storage()._cdata != b.untyped_storage()._cdata  # two storages all the same
    import numpy as np

    borrowed = torch.from_numpy(np.empty(0, dtype=np.float32))  # NumPy's buffer, even of 0 bytes, has an address
    assert borrowed.untyped_storage().nbytes() == 0 and borrowed.untyped_storage().data_ptr() != 0


def _result_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@pytest.mark.rule(
    "06",
    "`expand`, basic slicing, `view`, `t()` make none; `repeat`, `contiguous()` of a non-contiguous view and"
    " out-of-place arithmetic do (`numel × element size` of the result; a whole-tensor in-place `x += 1` makes none,"
    " unless autograd must keep the old value or the operand has another dtype).",
)
@RULE_SETTINGS
@given(tensors(), st.lists(st.integers(0, 3), min_size=3, max_size=3))
def test_copies_allocate_numel_times_element_size_and_views_and_in_place_nothing(x, reps):
    reps = tuple(reps[: x.ndim]) + (1,) * max(0, x.ndim - 3) if x.ndim else tuple(reps[:1])
    with measure(device="cpu") as m_views:
        views = [x.expand(2, *x.shape), x[1:] if x.ndim else x[...], x.view(x.shape), x.t() if x.ndim <= 2 else x.mT]
    assert m_views.allocated_bytes == m_views.peak_bytes == 0 and len(views) == 4
    with measure(device="cpu") as m_rep:
        r = x.repeat(reps)
    with measure(device="cpu") as m_mat:
        c = x.contiguous()
    with measure(device="cpu") as m_out:
        y = x * 2
    target = x.detach().clone()
    with measure(device="cpu") as m_in:
        if target.dtype == torch.bool:
            target |= True  # bool has no += 1 (its sum would be an int): its in-place op is logical
        else:
            target += 1
    assert m_rep.allocated_bytes == _result_bytes(r) == r.untyped_storage().nbytes()
    assert m_mat.allocated_bytes == (0 if x.is_contiguous() else _result_bytes(c))
    assert m_out.allocated_bytes == _result_bytes(y) and m_in.allocated_bytes == m_in.peak_bytes == 0


@pytest.mark.rule(
    "06",
    "In place on a whole tensor, with an operand of the same dtype that already exists, allocates nothing unless"
    " autograd must keep the"
    " old value: `c *= y` with `y` requiring grad, or `c.pow_(2)`, needs the `c` of before for its backward, so"
    " autograd saves a clone of it.",
)
@RULE_SETTINGS
@given(st.integers(1, 64), st.sampled_from([torch.float32, torch.float64]), st.sampled_from(["add", "mul", "pow"]))
def test_in_place_saves_a_clone_only_when_backward_needs_the_old_value(n, dtype, op):
    w, y = torch.randn(n, dtype=dtype, requires_grad=True), torch.randn(n, dtype=dtype, requires_grad=True)
    c = w * 1.0  # not a leaf: in place is allowed, and autograd records it
    with measure(device="cpu", log_ops=True) as m:
        {"add": lambda: c.add_(1), "mul": lambda: c.mul_(y), "pow": lambda: c.pow_(2)}[op]()
    saved = sum(o.bytes for o in m.ops if o.name == "aten.clone.default")
    assert m.allocated_bytes == m.peak_bytes == saved == (0 if op == "add" else c.nbytes)
    with torch.no_grad(), measure(device="cpu") as m_plain:  # no graph: nothing to keep
        c.mul_(y)
    assert m_plain.allocated_bytes == 0


MASKED_INCREMENT_READS_THEN_WRITES = (  # one sentence bound to two tests
    "`c[mask] += 1` reads the selection out (a copy), adds, and writes it back; `measure` sees the mask "
    "and that copy, not the int64 indices (`nonzero`, 8 B × ndim per selected element, made twice; "
    "section 3)."
)


@pytest.mark.rule("06", MASKED_INCREMENT_READS_THEN_WRITES)
@RULE_SETTINGS
@given(st.lists(st.booleans(), min_size=0, max_size=64), st.sampled_from([torch.float32, torch.float64, torch.int64]))
def test_an_indexed_in_place_update_copies_the_selection_and_writes_it_back(picks, dtype):
    c = torch.zeros(len(picks), dtype=dtype)
    where = torch.tensor(picks, dtype=torch.bool)
    with measure(device="cpu", log_ops=True) as m:
        c[c == 0] += 1  # the mask is made in the line, as in the notebook
    assert m.allocated_bytes == 0 and torch.equal(c, torch.ones_like(c))  # written back into c's own storage
    assert m.peak_bytes == len(picks) * (1 + c.element_size())  # all of c is 0, so all is selected: mask + copy
    with measure(device="cpu", log_ops=True) as m_some:
        c[where] += 1  # a mask made before the line: only the selection's copy
    assert m_some.allocated_bytes == 0 and m_some.peak_bytes == sum(picks) * c.element_size()
    assert torch.equal(c, 1 + where.to(dtype))


def _allocation_events(fn) -> list[int]:  # noqa: ANN001
    """Every allocation (+) and free (-) the profiler recorded while ``fn`` ran (its ``[memory]`` events), in order:
    the scratch inside operators too, which ``measure`` never sees."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = prof.profiler.kineto_results.events()
    return [b for _, b in sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")]


# the learners' dtypes (the shared strategy's), less complex: add_ into a real tensor refuses a complex operand
_REAL_DTYPES = [d for d in DTYPES if not d.is_complex]


@pytest.mark.rule(
    "06",
    "An operand of another dtype converts inside the CPU kernel: one temporary of `c`'s dtype if the result keeps it,"
    " else two or more of the wider one (`c += y64`): `measure` reports 0 (section 3).",
)
@RULE_SETTINGS
@given(st.integers(2, 64), st.sampled_from(_REAL_DTYPES), st.sampled_from(_REAL_DTYPES))
def test_an_in_place_operand_of_another_dtype_converts_through_hidden_temporaries(n, low, other):
    wider = torch.promote_types(low, other)
    assume(torch.can_cast(wider, low))  # else add_ refuses (a float into an int tensor): no write at all
    c, y = torch.zeros(n, dtype=low), torch.ones(n, dtype=other)
    with measure(device="cpu") as m:
        c += y
    assert m.allocated_bytes == m.peak_bytes == 0 and c.dtype == low
    events = _allocation_events(lambda: c.add_(y))
    if other == low:
        assert events == []  # the same dtype: no scratch at all
    elif wider == low:  # the result keeps c's dtype: y is converted once, into one temporary of c's size
        assert events == [n * c.element_size(), -n * c.element_size()]
    else:  # computed in the wider dtype: each temporary has the wider dtype's size
        size = n * torch.empty(0, dtype=wider).element_size()
        made = [b for b in events if b > 0]
        assert len(made) >= 2 and set(made) == {size} and sum(events) == 0


@pytest.mark.rule("06", MASKED_INCREMENT_READS_THEN_WRITES)
@RULE_SETTINGS
@given(
    st.sampled_from([(40,), (5, 8), (2, 4, 5), (2,), (1, 3)]),
    st.sampled_from([torch.float32, torch.float64, torch.int64]),
    st.integers(0, 2**40),
)
def test_an_indexed_in_place_update_makes_int64_indices_twice_that_measure_does_not_see(shape, dtype, seed):
    c = torch.zeros(shape, dtype=dtype)
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) < 0.5
    k = int(mask.sum())
    # Two or more selected: one selected element is written back without indices (the write makes none). And the
    # indices (16 B or more) then stand above the 0-d tensors the Python numbers become (4 to 12 B at once).
    assume(k >= 2)
    index_bytes, selection = 8 * c.ndim * k, k * c.element_size()
    with measure(device="cpu") as m:
        c[mask] += 1
    assert m.peak_bytes == selection and m.allocated_bytes == 0
    events = _allocation_events(lambda: c.__setitem__(mask, c[mask].add_(1)))  # c[mask] += 1, as a call
    assert events.count(index_bytes) >= 2 and max(itertools.accumulate(events)) == index_bytes + selection
    everything = torch.zeros(shape, dtype=dtype)

    def all_selected() -> None:
        everything[everything >= 0] += 1  # the mask made in the line: every element selected

    peak = max(itertools.accumulate(_allocation_events(all_selected)))
    assert peak == everything.numel() * (1 + 8 * c.ndim + everything.element_size())  # mask + indices + copy


@pytest.mark.rule(
    "06",
    "A **temporary** is created and freed inside one line: it is not in what is held afterwards, but it raises the"
    " peak, and the peak is what runs out of memory.",
)
@RULE_SETTINGS
@given(tensors())
def test_a_temporary_is_in_the_peak_and_not_in_what_is_held(x):
    with measure(device="cpu") as m:
        total = (x * 2).sum()
    temporary = _result_bytes(x * 2)
    assert m.allocated_bytes == total.untyped_storage().nbytes()
    assert m.peak_bytes == temporary + total.untyped_storage().nbytes()


@pytest.mark.rule(
    "06", "`allocated_bytes`: the bytes of storages made inside the block that are still alive at its end;"
)
@pytest.mark.rule("06", "`peak_bytes`: the most bytes of storages made inside the block that were alive at one moment.")
@pytest.mark.rule(
    "06",
    "Both count only storages made inside the block: freeing a tensor made before it lowers neither, so they are not"
    " the process's memory going up and down",
)
@RULE_SETTINGS
@given(tensors(), st.integers(0, 3), st.booleans())
def test_allocated_and_peak_count_only_storages_made_inside_the_block(old, n_new, free_old_first):
    old = old.detach().clone()  # a storage of its own, made before the block
    sizes = [4 * (k + 1) for k in range(n_new)]
    with measure(device="cpu") as m:
        if free_old_first:
            del old  # the process frees that storage: neither number sees it
        made = [torch.zeros(k, dtype=torch.uint8) for k in sizes]
        if not free_old_first:
            del old
        kept = made[::2]  # the others die inside the block
        del made
    assert m.allocated_bytes == sum(t.untyped_storage().nbytes() for t in kept) == sum(sizes[::2])
    assert m.peak_bytes == sum(sizes)  # all were alive at once, whatever the old storage's fate


@pytest.mark.rule(
    "06",
    "Do not measure tensors with `tracemalloc`: it sees NumPy's buffers (a `torch.from_numpy` tensor's), not the "
    "storages PyTorch allocates.",
)
@pytest.mark.rule(
    "06",
    "A tensor made by `torch.from_numpy` borrows NumPy's buffer: tracemalloc sees all of it, and `measure` none of it.",
)
@RULE_SETTINGS
@given(st.integers(0, 2_000_000), dtypes)
def test_tracemalloc_sees_numpys_buffers_and_not_pytorchs_storages(n, dtype):
    np_dtype = None if dtype == torch.bfloat16 else torch.empty(0, dtype=dtype).numpy().dtype  # NumPy has no bf16
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        t = torch.zeros(n, dtype=dtype)
        seen = tracemalloc.get_traced_memory()[0] - before
        if np_dtype is not None:
            with measure(device="cpu") as m:
                borrowed = torch.from_numpy(np.zeros(n, dtype=np_dtype))
            seen_np = tracemalloc.get_traced_memory()[0] - before - seen
    finally:
        tracemalloc.stop()
    assert seen < 1024  # the Python object only: the same for 0 bytes of storage as for 16 MB
    assert t.untyped_storage().nbytes() == n * t.element_size()
    if np_dtype is not None:
        assert borrowed.nbytes <= seen_np < borrowed.nbytes + 4096  # the whole buffer, plus the few objects
        assert m.allocated_bytes == m.peak_bytes == 0  # measure counts storages PyTorch makes


def _profiled(fn) -> tuple[int, int]:
    """(sum of Self CPU Mem over all rows, the peak replayed from the events in time order)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    total = sum(ev.self_cpu_memory_usage for ev in prof.key_averages())
    timeline = sorted(
        (ev.time_range.start, ev.self_cpu_memory_usage) for ev in prof.events() if ev.self_cpu_memory_usage
    )
    return total, max(itertools.accumulate((b for _, b in timeline), initial=0))


def _sdpa_math(q, k, v):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v)


PROFILED = {  # name -> a function of three (1, 2, L, 4) tensors
    "expand-contiguous-mul": lambda q, k, v: q.expand(3, 2, -1, 4).contiguous() * q,
    "doubled sum": lambda q, k, v: (q * 2).sum(),
    "scores softmax": lambda q, k, v: (q @ k.transpose(-1, -2)).softmax(-1),
    "SDPA (math)": _sdpa_math,
    "layer norm": lambda q, k, v: F.layer_norm(q, (4,)),
}


@pytest.mark.rule(
    "06",
    'With `profile_memory=True` it records per operator its *self* memory ("Self CPU Mem"): the bytes allocated minus'
    " the bytes freed while that operator was the innermost one running; frees between operators are `[memory]` rows"
    " (negative).",
)
@RULE_SETTINGS
@given(st.sampled_from(sorted(PROFILED)), st.integers(1, 8))
def test_self_cpu_mem_is_net_so_it_sums_to_what_is_held(name, length):
    fn = PROFILED[name]
    q, k, v = (torch.randn(1, 2, length, 4) for _ in range(3))
    total, replayed = _profiled(lambda: fn(q, k, v))
    with measure(device="cpu") as m:
        fn(q, k, v)
    assert total == m.allocated_bytes  # net: what is still held


@pytest.mark.rule("06", "what is still held is the sum of that column, but the peak is not in it.")
@RULE_SETTINGS
@given(
    st.sampled_from([1, 2]), st.sampled_from([1, 5]), st.sampled_from([1, 6]), st.sampled_from([1, 4])
)  # H, Lq, Lk, Dh
def test_a_replay_of_the_profiler_misses_the_temporaries_sdpa_frees_inside(heads, lq, lk, dh):
    q, k, v = torch.randn(1, heads, lq, dh), torch.randn(1, heads, lk, dh), torch.randn(1, heads, lk, dh)
    total, replayed = _profiled(lambda: _sdpa_math(q, k, v))
    with measure(device="cpu") as m:
        _sdpa_math(q, k, v)
    assert total == m.allocated_bytes and replayed < m.peak_bytes


@pytest.mark.rule(
    "06",
    "An operator that frees its own temporaries has the frees booked to itself, and a replay in time order counts"
    " them at its start, before its inner operators allocate",
)
@RULE_SETTINGS
@given(
    st.sampled_from([1, 7, 1000]),
    st.sampled_from([(torch.float32, torch.float64), (torch.float16, torch.float64), (torch.float16, torch.float32)]),
)
def test_an_in_place_op_books_its_temporaries_frees_to_itself_ahead_of_their_allocations(n, dtypes):
    c, y = torch.zeros(n, dtype=dtypes[0]), torch.ones(n, dtype=dtypes[1])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        c.add_(y)  # converts inside: temporaries made by inner operators, freed by add_ itself
    booked = [ev for ev in prof.events() if ev.self_cpu_memory_usage]
    (outer,) = [ev for ev in booked if ev.name == "aten::add_"]
    inner = [ev for ev in booked if ev is not outer]
    assert inner and all(ev.self_cpu_memory_usage > 0 for ev in inner)  # each temporary, on the operator making it
    assert outer.self_cpu_memory_usage == -sum(ev.self_cpu_memory_usage for ev in inner)  # their frees, on add_
    assert all(outer.time_range.start < ev.time_range.start for ev in inner)  # so a replay frees before it allocates
    timeline = sorted((ev.time_range.start, ev.self_cpu_memory_usage) for ev in booked)
    assert max(itertools.accumulate((b for _, b in timeline), initial=0)) == 0  # the replay never sees the peak
    assert _allocation_peak(prof) == sum(ev.self_cpu_memory_usage for ev in inner)  # the events do


def _allocation_peak(prof) -> int:  # noqa: ANN001
    """The peak of every allocation and free the profiler recorded (its ``[memory]`` events), replayed in order."""
    events = prof.profiler.kineto_results.events()
    return max(
        itertools.accumulate(b for _, b in sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]"))
    )


@pytest.mark.rule(
    "06",
    "`measure`: held and peak, exact for every storage an operator returns, blind to what it allocates and frees"
    " inside.",
)
@pytest.mark.rule("06", "The profiler's allocation events see that too")
@RULE_SETTINGS
@given(
    st.sampled_from([1, 2]), st.sampled_from([1, 5]), st.sampled_from([1, 6]), st.sampled_from([1, 4])
)  # H, Lq, Lk, Dh
def test_measure_sees_what_sdpa_returns_and_the_allocation_events_also_its_temporaries(heads, lq, lk, dh):
    q, k, v = torch.randn(1, heads, lq, dh), torch.randn(1, heads, lk, dh), torch.randn(1, heads, lk, dh)
    with measure(device="cpu", log_ops=True) as m:
        out = F.scaled_dot_product_attention(q, k, v)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        F.scaled_dot_product_attention(q, k, v)
    (fused,) = [op for op in m.ops if op.name.startswith("aten._scaled_dot_product_flash_attention_for_cpu")]
    returned = out.untyped_storage().nbytes() + heads * lq * 4  # the output and its float32 logsumexp
    assert fused.bytes == returned == m.peak_bytes  # every returned storage, exactly; nothing else
    scratch = sum(e.self_cpu_memory_usage for e in prof.events() if e.key == "aten::empty")
    assert scratch > 0 and _allocation_peak(prof) >= m.peak_bytes  # its own buffers, freed before it returns
    with sdpa_kernel(SDPBackend.MATH), measure(device="cpu", log_ops=True) as m_math:
        F.scaled_dot_product_attention(q, k, v)
    with sdpa_kernel(SDPBackend.MATH), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p_math:
        F.scaled_dot_product_attention(q, k, v)
    scores = heads * lq * lk
    assert any(op.name.startswith("aten._safe_softmax") for op in m_math.ops)
    allocated = [e.nbytes() for e in p_math.profiler.kineto_results.events() if e.name() == "[memory]"]
    assert scores in allocated  # one byte per score: the boolean tensor, which measure never books
    assert _allocation_peak(p_math) >= m_math.peak_bytes  # above it where the scores dominate, as in the notebook


@pytest.mark.rule("06", "`contiguous()` ran `aten.clone`, so materialising a view *is* a clone.")
@RULE_SETTINGS
@given(tensors())
def test_contiguous_of_a_non_contiguous_tensor_runs_clone_and_of_a_contiguous_one_nothing(x):
    with measure(device="cpu", log_ops=True) as m:
        c = x.contiguous()
    assert [op.name for op in m.ops] == ([] if x.is_contiguous() else ["aten.clone.default"])
    assert (c is x) == x.is_contiguous() and torch.equal(c, x)


@pytest.mark.rule("06", "Its peak line comes from the backend's own peak counter, not from polling.")
@RULE_SETTINGS
@given(st.sampled_from([0, 1, 1000, 250_000]), st.sampled_from([torch.float32, torch.int8, torch.float64]))
def test_the_monitor_peak_catches_a_temporary_that_no_poll_sees(n, dtype):
    with MemoryMonitor(device="cpu", display=False, interval=5.0) as mon:
        tmp = torch.zeros(n, dtype=dtype)
        del tmp
    assert max(s.allocated for s in mon.samples) == 0
    assert mon.samples[-1].peak == n * torch.empty((), dtype=dtype).element_size()


@pytest.mark.rule(
    "06",
    "The dashed peak line steps up at the first sample after the peak (one every 0.25 s, one at each cell's end):"
    " inside a long cell's span, at the end of a short one.",
)
@RULE_SETTINGS
@given(st.sampled_from([0.0, 0.8]), st.sampled_from([1000, 250_000]))
def test_the_dashed_peak_line_steps_up_at_the_first_sample_after_the_peak(sleep, n):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from viewlab.monitor import load_ipython_extension, unload_ipython_extension

    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    try:
        ip.run_cell("import time, torch")
        mon = load_ipython_extension(ip, device="cpu", display=False)
        assert mon.interval == 0.25
        ip.run_cell(f"total = (torch.zeros({n}) * 2).sum(); time.sleep({sleep})")
        unload_ipython_extension(ip)
    finally:
        InteractiveShell.clear_instance()
    (cell,) = mon.cells
    first = next(s for s in mon.samples if s.peak > 0)  # where the dashed line steps up
    assert first.peak == 2 * n * 4 and first.t >= cell.start
    if sleep > mon.interval:
        assert first.t < cell.end  # a long cell: inside its span
    else:
        assert first.t <= cell.end  # a short one: at its end (a sampler tick may fall just inside)


@pytest.mark.rule(
    "06", "IPython's `%xdel t` deletes `t` and the history's references to it, not a graph that saved it."
)
@RULE_SETTINGS
@given(st.sampled_from([1, 1000]), st.booleans())
def test_xdel_frees_what_only_the_history_holds_but_not_what_a_shown_graph_saved(n, shown_is_a_loss):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=config)
    try:
        ip.run_cell("import torch, weakref", store_history=True)
        ip.run_cell(f"t = torch.zeros({n}, requires_grad=True); ref = weakref.ref(t)", store_history=True)
        ip.run_cell("t.sin().sum()" if shown_is_a_loss else "t", store_history=True)  # in Out, _ and _N
        ip.run_cell("del t", store_history=True)
        held_after_del = ip.user_ns["ref"]() is not None
        ip.run_cell("t = ref()", store_history=True)
        ip.run_cell("%xdel t", store_history=True)
        alive = ip.user_ns["ref"]() is not None
    finally:
        InteractiveShell.clear_instance()
    assert held_after_del  # del alone: the history still holds it (or the loss's graph)
    assert alive == shown_is_a_loss  # %xdel frees t, unless a shown loss's graph saved it


param_shapes = st.lists(st.lists(st.integers(0, 5), min_size=0, max_size=2).map(tuple), min_size=1, max_size=3)


def _model(shapes_: list[tuple[int, ...]], used: list[bool]) -> tuple[list[torch.nn.Parameter], torch.Tensor]:
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes_]
    loss = sum(((p * p).sum() for p, u in zip(params, used) if u), torch.zeros(()))
    return params, loss


@pytest.mark.rule(
    "06",
    "With Adam a training step holds **4 tensors of parameter size** (5 with `amsgrad=True`) for every parameter that"
    " got a"
    " gradient (parameters, gradients, `exp_avg`, `exp_avg_sq`: 3 × the parameter bytes beyond the parameters), plus"
    " activations from forward to backward.",
)
@RULE_SETTINGS
@given(param_shapes, st.data())
def test_adam_keeps_gradient_and_two_moments_per_parameter_that_got_a_gradient(shapes_, data):
    used = [data.draw(st.booleans()) for _ in shapes_]
    assume(any(used))
    params, loss = _model(shapes_, used)
    opt = torch.optim.Adam(params, foreach=False)
    with measure(device="cpu") as m:
        loss.backward()
        opt.step()
    got = [p for p, u in zip(params, used) if u]
    nbytes = sum(p.untyped_storage().nbytes() for p in got)
    assert all((p.grad is None) == (not u) and (p in opt.state) == u for p, u in zip(params, used))
    state = {k: sum(opt.state[p][k].untyped_storage().nbytes() for p in got) for k in ("exp_avg", "exp_avg_sq", "step")}
    assert state == {"exp_avg": nbytes, "exp_avg_sq": nbytes, "step": 4 * len(got)}
    assert m.allocated_bytes == 3 * nbytes + 4 * len(got)  # gradients + the two moments + a 4-byte step each
    dtype = data.draw(st.sampled_from([torch.float16, torch.bfloat16, torch.float64]))  # the moments follow it
    other = torch.nn.Parameter(torch.zeros(shapes_[0], dtype=dtype))
    other.grad = torch.ones_like(other)
    other_opt = torch.optim.Adam([other], foreach=False)
    other_opt.step()
    assert other_opt.state[other]["exp_avg"].nbytes == other_opt.state[other]["exp_avg_sq"].nbytes == other.nbytes
    ams = torch.optim.Adam([other], amsgrad=True)  # a third tensor of parameter size: max_exp_avg_sq
    with measure(device="cpu") as m_ams:
        ams.step()
    assert m_ams.allocated_bytes == 3 * other.nbytes + 4 and ams.state[other]["max_exp_avg_sq"].nbytes == other.nbytes


@pytest.mark.rule(
    "06",
    "with `foreach=False`, Adam updates one parameter after the other and makes two temporaries the size of the one it"
    " updates (`sqrt`, then a division: its `denom`), while the previous parameter's `denom` is still held, so the"
    " worst moment is 2 × one parameter plus the one before it",
)
@RULE_SETTINGS
@given(param_shapes)
def test_adam_step_peaks_at_two_of_one_parameter_plus_the_previous_denominator(shapes_):
    params, loss = _model(shapes_, [True] * len(shapes_))
    opt = torch.optim.Adam(params, foreach=False)
    loss.backward()
    opt.step()  # the first step makes the state; the second shows the steady peak
    with measure(device="cpu") as m:
        opt.step()
    b = [p.untyped_storage().nbytes() for p in params]
    assert m.allocated_bytes == 0 and m.peak_bytes == max(2 * now + before for before, now in zip([0, *b], b))


@pytest.mark.rule("06", "`zero_grad(set_to_none=True)` frees the gradients.")
@RULE_SETTINGS
@given(param_shapes)
def test_zero_grad_set_to_none_frees_every_gradient(shapes_):
    params, loss = _model(shapes_, [True] * len(shapes_))
    opt = torch.optim.Adam(params, foreach=False)
    with measure(device="cpu") as m:
        loss.backward()
        grads = sum(p.grad.untyped_storage().nbytes() for p in params)
        opt.zero_grad(set_to_none=True)
    assert m.allocated_bytes == 0 and m.peak_bytes >= grads and all(p.grad is None for p in params)


@pytest.mark.rule(
    "06",
    "A `weakref.ref` does not keep a tensor alive, so `ref()` after `del` tells whether something else does.",
)
@RULE_SETTINGS
@given(st.integers(0, 100), st.sampled_from(["nothing", "a list", "a view", "a dict"]))
def test_a_weak_reference_tells_whether_something_else_holds_the_tensor(n, holder):
    t = torch.zeros(n)
    ref = weakref.ref(t)
    keep = {"nothing": None, "a list": [t], "a view": t[1:], "a dict": {"t": t}}[holder]
    del t
    assert (ref() is not None) == (holder != "nothing")
    del keep
    assert ref() is None


@pytest.fixture(scope="module")
def frozen_gc():
    # release_ipython_refs() runs gc.collect(), whose cost grows with every object alive in the test process
    # (hypothesis's own included); frozen, the collector scans only what the examples create.
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.rule(
    "06",
    "Both follow a tensor's autograd graph into what it saved for backward: a 0-d `loss` in `Out[n]` is 4 B; its"
    " graph keeps activations",
)
@RULE_SETTINGS
@given(st.integers(1, 64), st.booleans())
def test_a_loss_in_out_is_followed_into_what_its_graph_saved(frozen_gc, n, keep_leaf):
    w = torch.randn(n, requires_grad=True)
    h = w.clone()  # n x 4 B, saved by sin's backward
    h_ref, loss = weakref.ref(h), h.sin().sum()
    del h
    shell = SimpleNamespace(user_ns={"Out": {1: loss}, **({"w": w} if keep_leaf else {})})
    shell.user_ns["Out"][1], loss = loss, None
    held = held_by_ipython(shell, sources="history")
    saved = [x for x in held if "SinBackward0._saved_self" in x.where]
    assert [x.bytes for x in held if x.where == "Out[1]"] == [4] and [x.bytes for x in saved] == [4 * n]
    leaf_bytes = 0 if keep_leaf else 4 * n  # the leaf the graph accumulates into dies too, unless it is yours
    del w
    assert release_ipython_refs(shell, sources="history") == 4 + 4 * n + leaf_bytes and h_ref() is None


@pytest.mark.rule(
    "06",
    "`viewlab.release_ipython_refs()` adds the rest: it drops the references to tensors it finds in those places"
    ' (`sources=` picks some of `"history"`, `"result"`, `"traceback"`), leaves your own variables alone, and returns'
    " the bytes that died.",
)
@RULE_SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["only Out", "also mine", "a view of mine"])), max_size=4)
)
def test_release_returns_exactly_the_bytes_only_ipython_held(frozen_gc, entries):
    mine, out, t = {}, {}, None
    for number, (n, kind) in enumerate(entries, start=1):
        t = torch.zeros(n)
        out[number] = t if kind != "a view of mine" else t[1:]
        if kind != "only Out":
            mine[f"x{number}"] = t
    dying = sum(4 * n for n, kind in entries if kind == "only Out")
    del t
    shell = SimpleNamespace(user_ns={"Out": out, **mine}, last_execution_result=SimpleNamespace(result=None))
    assert release_ipython_refs(shell, sources=("history", "result")) == dying
    assert shell.user_ns["Out"] == {} and all(shell.user_ns[k] is v for k, v in mine.items())


@pytest.mark.rule(
    "06",
    "That is the phase's true peak when it frees nothing made before it, as forward and the optimiser step do. "
    "Otherwise it is a lower bound, as for the ordinary rebinding `h = h * 2`: the new `h` exists before the old one "
    "is freed.",
)
@RULE_SETTINGS
@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 1000), st.booleans())
def test_the_phase_peak_formula_is_exact_without_frees_of_older_storages_and_a_lower_bound_with(
    older_n, new_n, tmp_n, free_older
):
    with MemoryMonitor(device="cpu", display=False, interval=5.0) as mon:
        held = {"older": torch.zeros(older_n, dtype=torch.uint8)}  # made before the phase, inside the monitor
        with measure(device="cpu") as ph:  # the phase, as notebook 06's phase() measures it
            held["new"] = torch.zeros(new_n, dtype=torch.uint8)
            if free_older:
                del held["older"]
            tmp = torch.zeros(tmp_n, dtype=torch.uint8)
            del tmp
        formula = mon.mark("phase").allocated - ph.allocated_bytes + ph.peak_bytes
    true_peak = older_n + new_n + (0 if free_older else tmp_n)
    true_peak = max(true_peak, new_n + tmp_n)
    if free_older:
        assert formula <= true_peak and formula == max(new_n, new_n + tmp_n)
    else:
        assert formula == true_peak == older_n + new_n + tmp_n
