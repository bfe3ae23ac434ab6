"""views_only against an exact oracle: a call's result is a copy iff one of its storages (a sparse tensor's indices
and values included) is new or grew, by at least one byte, judged by comparing ``untyped_storage().data_ptr()``
and ``nbytes()`` before and after the call, run outside any guard. Every op runs on every layout; an op torch
rejects on a layout must raise torch's own error inside the guard too."""

from __future__ import annotations

import threading
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from viewlab.errors import CopyError
from viewlab.sentinels import views_only

LAYOUTS = {
    "contiguous (3, 4)": lambda: torch.arange(12.0).reshape(3, 4),
    "transposed (4, 3)": lambda: torch.arange(12.0).reshape(3, 4).t(),
    "3-D (2, 3, 4)": lambda: torch.arange(24.0).reshape(2, 3, 4),
    "permuted 3-D (4, 2, 3)": lambda: torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
    "every other column (3, 2)": lambda: torch.arange(12.0).reshape(3, 4)[:, ::2],
    "offset rows (2, 4)": lambda: torch.arange(12.0).reshape(3, 4)[1:],
    "expanded, stride 0 (3, 4)": lambda: torch.arange(3.0).reshape(3, 1).expand(3, 4),
    "size-1 dims (1, 4, 1)": lambda: torch.arange(4.0).reshape(1, 4, 1),
    "0-d": lambda: torch.tensor(7.0),
    "empty (0, 3)": lambda: torch.zeros(0, 3),
    "1-D (5,)": lambda: torch.arange(5.0),
    "channels_last (2, 3, 2, 2)": lambda: (
        torch.arange(24.0).reshape(2, 3, 2, 2).contiguous(memory_format=torch.channels_last)
    ),
    "int64 (3, 4)": lambda: torch.arange(12).reshape(3, 4),
    "NumPy memory (3, 4)": lambda: torch.from_numpy(np.arange(12.0).reshape(3, 4)),
    "sparse COO (3, 4)": lambda: torch.eye(3, 4).to_sparse().coalesce(),
    "sparse CSR (3, 4)": lambda: torch.eye(3, 4).to_sparse_csr(),
}


def _helpers(x: torch.Tensor) -> SimpleNamespace:
    """Tensors an op may take besides x, built before the call (so they are inputs, not the op's copies)."""
    shape, dtype = tuple(x.shape), x.dtype
    return SimpleNamespace(
        other=torch.ones(shape, dtype=dtype),
        idx=torch.zeros(1, dtype=torch.long),
        mask=torch.ones(shape, dtype=torch.bool),
        big=torch.empty((2, *shape)),
        small=torch.empty(0, dtype=dtype),  # out= too small: the op resizes it
        fit=torch.empty(shape, dtype=dtype),  # out= of the right size: written in place
        one=torch.ones((), dtype=dtype),
    )


OPS = [
    # views (one call each: in a chain, a copy in the middle would be the guard's answer, not the result's)
    "x[0]", "x[1:]", "x[..., ::2]", "x[None]", "x[..., None, :]", "x.t()", "x.mT", "x.transpose(0, -1)",
    "x.permute(*reversed(range(x.dim())))", "x.view(-1)", "x.view(x.shape)", "x.view_as(h.other)",
    "x.unsqueeze(0)", "x.squeeze()", "x.expand(2, *x.shape)", "x.expand_as(h.big)", "x.narrow(0, 0, 1)",
    "x.select(0, 0)", "x.unbind(0)", "x.split(1)", "x.chunk(2)", "x.diagonal()", "x.unfold(0, 1, 1)",
    "x.detach()", "x.movedim(0, -1)", "x.swapaxes(0, -1)", "x.unflatten(0, (1, -1))", "x.real",
    "x.as_strided((1,), (1,))", "x.expand(*x.shape)",
    # layout-dependent: a view, the same tensor, or a copy
    "x.reshape(-1)", "x.reshape(x.shape)", "x.reshape(1, -1)", "x.flatten()", "x.ravel()", "x.contiguous()",
    "x.contiguous(memory_format=torch.channels_last)", "x.to(x.dtype)", "x.to(torch.float64)", "x.double()",
    "x.float()", "torch.as_tensor(x)", "x.coalesce()", "x.to_dense()", "x.to_sparse()",
    # copies and allocations
    "x.clone()", "x.clone(memory_format=torch.preserve_format)", "torch.empty_like(x)", "torch.zeros_like(x)",
    "x.new_empty(3)", "x.new_zeros(0)", "torch.zeros(3)", "torch.ones(2, 2)", "torch.arange(4)", "torch.empty(0)",
    "torch.cat([x, x])", "torch.cat([x])", "torch.stack([x, x])", "x.repeat(*[2] * x.dim())", "x.tile(2)",
    "x.flip(0)", "x.roll(1)", "x.sum()", "x.sum(0)", "x.amax()", "x.abs()", "x + 1", "x * 2.5", "x + h.other",
    "x @ x.mT", "x.sort()", "x.cumsum(0)", "x.indices()", "x.values()", "x._indices()", "x.crow_indices()",
    "x.col_indices()",
    # indexing reads: basic (view), advanced (copy)
    "x[h.idx]", "x[[0]]", "x[[0, 0]]", "x[h.mask]", "x.index_select(0, h.idx)", "x.masked_select(h.mask)",
    "x.nonzero()", "x[10]",
    # scalars and lists in and out
    "torch.tensor([1.0, 2.0])", "torch.tensor(5.0)", "torch.as_tensor([1, 2])", "x.new_tensor([1])",
    "x.tolist()", "x.item()", "x.numpy()", "x.shape", "x.stride()", "x.is_contiguous()",
    # writes and in-place ops
    "x.__setitem__(0, 5)", "x.__setitem__(Ellipsis, 0)", "x.__setitem__(h.idx, 1)", "x.__setitem__([0], 2)",
    "x.__setitem__(h.mask, 3)", "x.__setitem__(10, 5)", "x.__setitem__(0, h.one)", "x.copy_(h.other)",
    "x.fill_(3)", "x.zero_()", "x.add_(1)", "x.mul_(h.other)", "x.clamp_(0, 1)", "x.masked_fill_(h.mask, 0)",
    "x.index_fill_(0, h.idx, 1)", "x.t_()", "x.unsqueeze_(0)", "x.squeeze_()",
    # storage growth: resize_ and out= (a copy when the storage grows, not when it shrinks or fits)
    "x.resize_(x.shape)", "x.resize_(1)", "x.resize_(100)", "x.resize_as_(h.big)", "torch.add(x, 1, out=h.small)",
    "torch.add(x, 1, out=h.fit)", "torch.cat([x, x], out=h.small)", "torch.neg(x, out=h.fit)",
]  # fmt: skip
_FNS = {code: eval(f"lambda x, h: {code}", {"torch": torch}) for code in OPS}  # noqa: S307 - the fixed list above


def _outputs(out) -> list[torch.Tensor]:
    items = out if isinstance(out, (list, tuple)) else (out,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def _storages(t: torch.Tensor) -> list:
    if t.layout == torch.sparse_coo:
        return [t._indices().untyped_storage(), t._values().untyped_storage()]
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return [p.untyped_storage() for p in (t.crow_indices(), t.col_indices(), t.values())]
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return [p.untyped_storage() for p in (t.ccol_indices(), t.row_indices(), t.values())]
    return [t.untyped_storage()]


def oracle(code: str, layout: str) -> tuple[bool | None, type | None]:
    """(is a copy, None) from data pointers and sizes, or (None, the exception torch raised)."""
    x = LAYOUTS[layout]()
    h = _helpers(x)
    inputs = [x, *vars(h).values()]
    before = {st.data_ptr(): st.nbytes() for t in inputs for st in _storages(t)}
    try:
        out = _FNS[code](x, h)
    except Exception as err:  # noqa: BLE001 - torch's own error, compared with the guarded run's
        return None, type(err)
    after = [st for t in (*_outputs(out), *inputs) for st in _storages(t)]
    return any(st.nbytes() > before.get(st.data_ptr(), 0) for st in after), None


def guarded(code: str, layout: str) -> tuple[bool | None, type | None]:
    x = LAYOUTS[layout]()
    h = _helpers(x)
    try:
        with views_only():
            _FNS[code](x, h)
    except CopyError:
        return True, None
    except Exception as err:  # noqa: BLE001
        return None, type(err)
    return False, None


def test_views_only_agrees_with_the_oracle_on_every_op_and_layout():
    counts = {"copy": 0, "no copy": 0, "torch error": 0}
    false_alarms, misses, wrong_errors = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sparse beta, x.T-style deprecations: not the subject here
        for layout in LAYOUTS:
            for code in OPS:
                (want, want_err), (got, got_err) = oracle(code, layout), guarded(code, layout)
                counts["torch error" if want_err else "copy" if want else "no copy"] += 1
                if want_err or got_err:
                    if want_err != got_err:
                        wrong_errors.append(f"{code} on {layout}: torch raised {want_err}, guarded {got_err}")
                elif got and not want:
                    false_alarms.append(f"{code} on {layout}")
                elif want and not got:
                    misses.append(f"{code} on {layout}")
    cases = sum(counts.values())
    summary = (
        f"{len(OPS)} ops x {len(LAYOUTS)} layouts = {cases} cases {counts}: {len(false_alarms)} false alarms, "
        f"{len(misses)} misses, {len(wrong_errors)} errors changed"
    )
    assert (false_alarms, misses, wrong_errors) == ([], [], []), f"{summary}\n" + "\n".join(
        false_alarms + misses + wrong_errors
    )
    assert len(OPS) >= 80 and len(LAYOUTS) >= 15 and min(counts.values()) >= 100, summary
    print(summary)
    assert _get_current_dispatch_mode_stack() == [] and _get_current_function_mode_stack() == []


@settings(max_examples=150, deadline=None)
@given(
    shape=st.lists(st.integers(0, 3), min_size=0, max_size=3),
    transpose=st.booleans(),
    step=st.integers(1, 2),
    code=st.sampled_from(OPS),
)
def test_views_only_agrees_with_the_oracle_on_generated_layouts(shape, transpose, step, code):
    """Sizes 0 and 1, 0-d, transposed and stepped layouts, drawn at random: the same agreement."""

    def make() -> torch.Tensor:
        x = torch.arange(float(np.prod(shape, dtype=int))).reshape(shape)
        x = x.mT if transpose and x.dim() >= 2 else x
        return x[::step] if x.dim() else x

    LAYOUTS["generated"] = make
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want, got = oracle(code, "generated"), guarded(code, "generated")
    finally:
        del LAYOUTS["generated"]
    assert got == want, f"{code} on shape {shape} transposed {transpose} step {step}: oracle {want}, guarded {got}"


def test_a_write_with_a_python_scalar_is_not_a_copy_and_a_bad_index_keeps_torchs_error():
    """Regression: `x[0] = 5` raised CopyError (the scalar torch wraps 5 in was counted as the op's new storage)."""
    x = torch.zeros(3, 4)
    with views_only():
        x[0] = 5
        x[[0, 2]] = 1
    assert x[0].tolist() == [1.0] * 4 and x[1].tolist() == [0.0] * 4
    with pytest.raises(IndexError, match="out of bounds"), views_only():
        x[10] = 5


def test_sparse_views_pass_and_sparse_copies_are_caught():
    """Regression: indices()/values() were rejected, clone and cat of sparse tensors passed."""
    s = torch.eye(3).to_sparse().coalesce()
    with views_only():
        i, v = s.indices(), s.values()
    assert i.untyped_storage().data_ptr() == s._indices().untyped_storage().data_ptr() and v.shape == (3,)
    for copy in (lambda: s.clone(), lambda: torch.cat([s, s])):
        with pytest.raises(CopyError, match="made new storage"), views_only():
            copy()


def test_a_call_that_fails_is_not_judged_and_leaves_nothing_for_the_next_one():
    """A function that allocates (kept alive) and then raises: its error comes through, and the next call is
    judged on its own (the failed call's storage was once blamed on it)."""
    kept: list[torch.Tensor] = []

    def allocate_then_fail(x: torch.Tensor) -> None:
        if torch.overrides.has_torch_function((x,)):
            return torch.overrides.handle_torch_function(allocate_then_fail, (x,), x)
        kept.append(x + 1)
        raise ValueError("failed after allocating")

    x = torch.zeros(3)
    with views_only():
        with pytest.raises(ValueError, match="failed after allocating"):
            allocate_then_fail(x)
        row = x[1:]
    assert len(kept) == 1 and row.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_storage_growth_is_caught():
    """Regression: resize_ and out= resizing passed (the storage was an input's)."""
    x, y, out, fit = torch.zeros(3), torch.ones(2), torch.empty(0), torch.empty(2)
    grew = r"made new storage \(400 bytes .*Why: it grew the storage of a tensor it was given"
    with pytest.raises(CopyError, match=rf"Tensor.resize_ {grew}"), views_only():
        x.resize_(100)
    with pytest.raises(CopyError, match=r"torch.add made new storage \(8 bytes .*Why: it grew"), views_only():
        torch.add(y, 1, out=out)
    with views_only():
        x.resize_(2)  # shrinking keeps the storage
        torch.add(x, 1, out=fit)  # an out= of the right size is written in place


def test_a_memory_monitor_starts_and_stops_inside_views_only():
    """Regression: the monitor's own warm-up (torch.empty(0) under a fresh tracker) raised CopyError."""
    from viewlab import MemoryMonitor

    x = torch.zeros(4)
    with views_only():
        mon = MemoryMonitor(device="cpu", display=False).start()
        try:
            y = x[1:]
        finally:
            mon.stop()
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() and not mon.running


def test_a_guard_does_not_reach_a_thread_it_did_not_start_in():
    """What a guard sees: the thread that entered it. Work in another thread runs unguarded (documented)."""
    done = threading.Event()
    seen: list[object] = []

    def worker() -> None:
        seen.append(torch.zeros(2) + 1)
        done.set()

    with views_only():
        threading.Thread(target=worker, daemon=True).start()
        assert done.wait(timeout=60)
    assert seen[0].tolist() == [1.0, 1.0]
