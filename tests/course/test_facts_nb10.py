"""Notebook 10 (PyTorch's own memory tools): the torch behaviours its prose states hold on this torch, and its
sections keep the titles other notebooks link to.

The notebook checks each fact in a cell beside it, on one example; these tests keep the same facts under the
unit-test run, on more than one input where the fact is about any input, so a torch upgrade that changes one fails
here with a plain message.
"""

from __future__ import annotations

import gzip
import json
import warnings

import nbformat
import pytest
import torch
from torch import nn

from tests.conftest import ROOT
from viewlab import measure

NB10 = ROOT / "notebooks" / "10_memory_tools.ipynb"
SECTIONS = [
    "Naming what autograd saves",
    "Memory per module",
    "Predicting memory without allocating",
    "A memory timeline from the profiler",
    "Snapshots on a GPU, and what the CPU has instead",
]


def _mlp(width: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 3))


def test_the_sections_have_the_titles_other_notebooks_link_to():
    nb = nbformat.read(NB10, as_version=4)
    heads = [line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines()]
    numbered = [h.removeprefix("## ").split(". ", 1) for h in heads if h.startswith("## ") and h[3].isdigit()]
    assert [title.split("  <span")[0] for _, title in numbered] == SECTIONS
    assert [int(n) for n, _ in numbered] == list(range(1, len(SECTIONS) + 1))


@pytest.mark.parametrize("width", [8, 64])
def test_a_non_reentrant_checkpoint_saves_only_its_input_and_holds_only_its_output(width):
    from torch.utils.checkpoint import checkpoint

    model, x, saved = _mlp(width), torch.randn(5, 16), []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        with measure(device="cpu") as m:
            out = checkpoint(model, x, use_reentrant=False)
    assert len(saved) == 1 and saved[0].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert m.allocated_bytes == out.untyped_storage().nbytes()


@pytest.mark.parametrize("layers", [4, 8])
def test_one_checkpoint_keeps_the_peak_and_smaller_segments_lower_it(layers):
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(16, 16), nn.ReLU())])
    x = torch.randn(1024, 16)  # activations far above the parameters
    peaks = []
    for forward in (
        lambda: model(x),
        lambda: checkpoint(model, x, use_reentrant=False),
        lambda: checkpoint_sequential(model, layers // 2, x, use_reentrant=False),
    ):
        model.zero_grad(set_to_none=True)
        with measure(device="cpu") as m:
            forward().sum().backward()
        peaks.append(m.peak_bytes)
    plain, whole, segments = peaks
    assert whole == plain > segments


def test_cpu_dropout_in_training_saves_a_float_mask_as_big_as_its_input():
    x = torch.randn(6, 5, requires_grad=True)
    y = nn.Dropout(0.1).train()(x)
    assert y.grad_fn.name() == "MulBackward0"
    assert y.grad_fn._saved_other.dtype == torch.float32 and y.grad_fn._saved_other.shape == x.shape


@pytest.mark.parametrize("width", [1, 7, 64])
def test_measure_on_fake_tensors_predicts_the_real_run(width):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), measure(device="cpu") as fake:
        model = _mlp(width)
        out = model(torch.randn(5, 16))
    with measure(device="cpu") as real:
        real_model = _mlp(width)
        real_out = real_model(torch.randn(5, 16))
    assert type(out).__name__ == "FakeTensor" and real_out.shape == out.shape
    assert (fake.allocated_bytes, fake.peak_bytes) == (real.allocated_bytes, real.peak_bytes) > (0, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that reading a fake tensor's address will raise one day
        assert out.untyped_storage().data_ptr() == 0


def test_mem_tracker_runs_on_the_cpu_without_a_process_group_and_fake_equals_real():
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    def peak(give_batch: bool):
        model = _mlp(32)
        opt = torch.optim.Adam(model.parameters(), foreach=False)
        inputs, target = torch.randn(4, 16), torch.zeros(4, dtype=torch.long)  # made before the tracker's block
        tracker = MemTracker()
        tracker.track_external(model, opt, *((inputs, target) if give_batch else ()))
        with tracker:
            F.cross_entropy(model(inputs), target).backward()
            opt.step()
        (by_kind,) = tracker.get_tracker_snapshot("peak").values()
        return {str(k).split(".")[-1]: v for k, v in by_kind.items()}, inputs.nbytes + target.nbytes

    with FakeTensorMode():
        fake, batch = peak(give_batch=True)
    assert not torch.distributed.is_initialized()
    assert (fake, batch) == peak(give_batch=True) and fake["PARAM"] == fake["GRAD"] > 0
    # It sees only the tensors made inside its block and those given to track_external: a batch made before and
    # not given is in no category and not in Total; given, it is `OTH`.
    unseen, _ = peak(give_batch=False)
    assert fake["OTH"] == batch == fake["Total"] - unseen["Total"] and unseen.get("OTH", 0) == 0


def test_sdpas_cpu_kernel_has_scratch_for_each_thread_that_measure_does_not_see():
    """Section 3: measure counts what the fused kernel returns (output, logsumexp); the profiler's allocation
    events also its scratch, one block per thread, freed before it returns."""
    import itertools

    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    q = torch.randn(2, 2, 512, 64)
    with measure(device="cpu") as m:
        out = F.scaled_dot_product_attention(q, q, q)
    assert m.peak_bytes == out.untyped_storage().nbytes() + 2 * 2 * 512 * 4
    threads, scratch = torch.get_num_threads(), {}
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
                F.scaled_dot_product_attention(q, q, q)
            events = sorted(
                (e.start_ns(), e.nbytes()) for e in p.profiler.kineto_results.events() if e.name() == "[memory]"
            )
            scratch[n] = max(itertools.accumulate(b for _, b in events)) - m.peak_bytes
            assert sum(b for _, b in events) == 0  # all of it freed before the call returned (out is dropped)
    finally:
        torch.set_num_threads(threads)
    assert scratch[1] > 0 and scratch[2] == 2 * scratch[1]


@pytest.mark.parametrize("op", ["nonzero", "mask"])
def test_fake_tensors_refuse_an_output_shape_that_depends_on_the_data(op):
    from torch._subclasses.fake_tensor import DynamicOutputShapeException, FakeTensorMode

    with FakeTensorMode():
        scores = torch.randn(8, 3)
        with pytest.raises(DynamicOutputShapeException):
            scores.nonzero() if op == "nonzero" else scores[scores > 0]
        assert torch.where(scores > 0, scores, 0.0).shape == (8, 3)


def test_the_profilers_memory_timeline_exports_on_the_cpu(tmp_path):
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX

    model = _mlp(32)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as p:
        model(torch.randn(4, 16)).sum().backward()
    raw, plot = tmp_path / "t.raw.json.gz", tmp_path / "t.json"
    with pytest.warns(FutureWarning, match="deprecated"):
        p.export_memory_timeline(str(raw), device="cpu")
        p.export_memory_timeline(str(plot), device="cpu")
    with gzip.open(raw, "rt") as f:
        events = json.load(f)
    assert events and all(len(e) == 4 and 0 <= e[3] < len(_CATEGORY_TO_INDEX) for e in events)
    times, sizes = json.loads(plot.read_text())
    assert len(times) == len(sizes) and all(len(row) == len(_CATEGORY_TO_INDEX) + 1 for row in sizes)


def test_the_memory_timeline_needs_all_three_flags_and_the_warning_names_a_missing_function(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p:
        torch.ones(4).mul(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="record_shapes=True, with_stack=True required"):
            p.export_memory_timeline(str(tmp_path / "t.json"), device="cpu")
    (message,) = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert "_export_memory_snapshot" in message and not hasattr(torch.cuda.memory, "_export_memory_snapshot")
    assert hasattr(torch.cuda.memory, "_dump_snapshot")


@pytest.mark.parametrize("layers", [4, 8])
def test_one_checkpoint_lowers_a_peak_that_falls_in_the_forward_because_recomputation_stops_early(layers):
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop

    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(16, 16), nn.ReLU())])
    x = torch.randn(1024, 16)

    def deep_then_wide(inputs):  # a temporary after the layers that backward does not need
        return torch.cat([model(inputs)] * 8, dim=1).sum(dim=1)

    def peaks(forward):
        model.zero_grad(set_to_none=True)
        with measure(device="cpu") as m:
            y = forward()
            forward_peak = m.peak_bytes
            y.sum().backward()
        return forward_peak, m.peak_bytes

    plain_forward, plain = peaks(lambda: deep_then_wide(x))
    _, whole = peaks(lambda: checkpoint(deep_then_wide, x, use_reentrant=False))
    with set_checkpoint_early_stop(False):
        _, whole_no_early_stop = peaks(lambda: checkpoint(deep_then_wide, x, use_reentrant=False))
    assert plain_forward == plain > whole
    assert whole_no_early_stop > whole  # rerun to the end, the wide temporary is made again
