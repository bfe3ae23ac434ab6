"""Notebook 08 (under the hood): the torch behaviours its prose states hold on this torch, and its sections keep
the titles other notebooks link to.

The notebook checks each fact in a cell beside it, on one example; these tests keep the same facts under the
unit-test run, on more than one input where the fact is about any input, so a torch upgrade that changes one fails
here with a plain message.
"""

from __future__ import annotations

import gzip
import json
import sys
import warnings

import nbformat
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from tests.conftest import ROOT
from viewlab import measure

NB08 = ROOT / "notebooks" / "08_under_the_hood.ipynb"
SECTIONS = [
    "A dispatch mode of your own",
    "What IPython keeps alive",
    "Naming what autograd saves",
    "Memory per module",
    "Predicting memory without allocating",
    "A memory timeline from the profiler",
    "Snapshots on a GPU, and what the CPU has instead",
    "Where the bytes come from",
]
SUBCLASS_ERROR = "Creating a new Tensor subclass"


class Passing(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _mlp(width: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 3))


def test_the_sections_have_the_titles_other_notebooks_link_to():
    nb = nbformat.read(NB08, as_version=4)
    heads = [line for c in nb.cells if c.cell_type == "markdown" for line in c.source.splitlines()]
    numbered = [h.removeprefix("## ").split(". ", 1) for h in heads if h.startswith("## ") and h[3].isdigit()]
    assert [title.split("  <span")[0] for _, title in numbered] == SECTIONS
    assert [int(n) for n, _ in numbered] == list(range(1, len(SECTIONS) + 1))


def test_a_subclass_made_by_the_tensor_constructor_cannot_be_made_inside_a_dispatch_mode():
    from torch.nn.attention.bias import causal_lower_right

    assert type(causal_lower_right(2, 3)).__name__ == "CausalBias"  # outside any mode: fine
    with pytest.raises(RuntimeError, match=SUBCLASS_ERROR), Passing():
        causal_lower_right(2, 3)


def test_as_subclass_inside_a_dispatch_mode_works_on_this_torch():
    """pytorch/pytorch#149290's own example, which raised on torch 2.4."""

    class Mine(torch.Tensor):
        def __new__(cls, data):
            return data.as_subclass(cls)

    with Passing():
        made = Mine(torch.rand(4, requires_grad=True) * 2)
    assert type(made) is Mine and made.grad_fn is not None


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


@pytest.mark.parametrize("width", [8, 64])
def test_a_non_reentrant_checkpoint_saves_only_its_input_and_holds_only_its_output(width):
    from torch.utils.checkpoint import checkpoint

    model, x, saved = _mlp(width), torch.randn(5, 16), []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        with measure(device="cpu") as m:
            out = checkpoint(model, x, use_reentrant=False)
    assert len(saved) == 1 and saved[0].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert m.allocated_bytes == out.untyped_storage().nbytes()


def test_cpu_dropout_in_training_saves_a_float_mask_as_big_as_its_input():
    x = torch.randn(6, 5, requires_grad=True)
    y = nn.Dropout(0.1).train()(x)
    assert y.grad_fn.name() == "MulBackward0"
    assert y.grad_fn._saved_other.dtype == torch.float32 and y.grad_fn._saved_other.shape == x.shape


def test_mem_tracker_runs_on_the_cpu_without_a_process_group_and_fake_equals_real():
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    def peak():
        model = _mlp(32)
        opt = torch.optim.Adam(model.parameters(), foreach=False)
        tracker = MemTracker()
        tracker.track_external(model, opt)
        with tracker:
            F.cross_entropy(model(torch.randn(4, 16)), torch.zeros(4, dtype=torch.long)).backward()
            opt.step()
        (by_kind,) = tracker.get_tracker_snapshot("peak").values()
        return {str(k).split(".")[-1]: v for k, v in by_kind.items()}

    with FakeTensorMode():
        fake = peak()
    assert not torch.distributed.is_initialized()
    assert fake == peak() and fake["PARAM"] == fake["GRAD"] > 0


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_minflt counts page faults this way on Linux")
def test_a_big_cpu_tensor_faults_its_pages_in_on_first_touch_and_again_after_del():
    import resource

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    n = 16 * 2**20  # 64 MiB of float32, above glibc's largest mmap threshold (32 MiB)
    pages = n * 4 // 4096
    f0 = faults()
    big = torch.empty(n)
    f1 = faults()
    big.fill_(1.0)
    f2 = faults()
    big.fill_(2.0)
    f3 = faults()
    del big
    big = torch.empty(n)
    big.fill_(3.0)
    f4 = faults()
    assert f1 - f0 < pages // 100 and f3 - f2 < pages // 100
    assert f2 - f1 >= pages // 512 and f4 - f3 >= pages // 512  # at least one fault per 2 MiB (huge pages)


def test_a_subclass_made_from_an_existing_tensor_can_be_made_inside_a_dispatch_mode():
    class Own(torch.Tensor):  # no __new__: torch.Tensor's constructor makes it
        pass

    with Passing():
        param = nn.Parameter(torch.ones(3))
        made = torch.Tensor._make_subclass(Own, torch.ones(2))
        with pytest.raises(RuntimeError, match=SUBCLASS_ERROR + " Own"):
            Own([1.0, 2.0])
    assert type(param) is nn.Parameter and type(made) is Own


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


@pytest.mark.parametrize("op", ["nonzero", "mask"])
def test_fake_tensors_refuse_an_output_shape_that_depends_on_the_data(op):
    from torch._subclasses.fake_tensor import DynamicOutputShapeException, FakeTensorMode

    with FakeTensorMode():
        scores = torch.randn(8, 3)
        with pytest.raises(DynamicOutputShapeException):
            scores.nonzero() if op == "nonzero" else scores[scores > 0]
        assert torch.where(scores > 0, scores, 0.0).shape == (8, 3)


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
