"""Notebook 08 (under the hood of `measure`): the torch behaviours its prose states hold on this torch, and its
sections keep the titles other notebooks link to.

The notebook checks each fact in a cell beside it, on one example; these tests keep the same facts under the
unit-test run, on more than one input where the fact is about any input, so a torch upgrade that changes one fails
here with a plain message. PyTorch's own memory tools moved to notebook 10: tests/course/test_facts_nb10.py.
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from tests.conftest import ROOT

NB08 = ROOT / "notebooks" / "08_under_the_hood.ipynb"
SECTIONS = [
    "A dispatch mode of your own",
    "What IPython keeps alive",
    "Where the bytes come from",
]
SUBCLASS_ERROR = "Creating a new Tensor subclass"


class Passing(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


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


def test_a_subclass_made_from_an_existing_tensor_can_be_made_inside_a_dispatch_mode():
    class Own(torch.Tensor):  # no __new__: torch.Tensor's constructor makes it
        pass

    with Passing():
        param = nn.Parameter(torch.ones(3))
        made = torch.Tensor._make_subclass(Own, torch.ones(2))
        with pytest.raises(RuntimeError, match=SUBCLASS_ERROR + " Own"):
            Own([1.0, 2.0])
    assert type(param) is nn.Parameter and type(made) is Own


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_minflt counts page faults this way on Linux")
def test_a_big_cpu_tensor_faults_its_pages_in_on_first_touch_and_again_after_del():
    # In a fresh interpreter, as the notebook's kernel is: in a test worker, what earlier tests allocated and freed
    # decides where the C library finds 64 MiB, and a block it already touched costs no fault.
    program = """
import resource, torch
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
n = 16 * 2**20  # 64 MiB of float32, above glibc's largest mmap threshold (32 MiB)
f0 = faults(); big = torch.empty(n); f1 = faults(); big.fill_(1.0); f2 = faults(); big.fill_(2.0); f3 = faults()
del big; big = torch.empty(n); big.fill_(3.0); f4 = faults()
print(f1 - f0, f2 - f1, f3 - f2, f4 - f3)
"""
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    empty, first_fill, second_fill, after_del = map(int, run.stdout.split())
    pages = 16 * 2**20 * 4 // 4096
    assert empty < pages // 100 and second_fill < pages // 100
    assert first_fill >= pages // 512 and after_del >= pages // 512  # at least one fault per 2 MiB (huge pages)
