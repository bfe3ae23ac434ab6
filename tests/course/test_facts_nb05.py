"""Notebook 05 (pitfalls): the rules its prose states hold on this torch, and its cross-references resolve.

The notebook checks each rule in a cell beside it; these tests keep the same facts under the unit-test run, so a
torch upgrade that changes one fails here with a plain message, and a renamed section in another notebook fails
here instead of leaving a dangling "see notebook 01, section 8".
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
import torch

from tests.conftest import ROOT
from viewlab.course import exercises as ex

NB05 = ROOT / "notebooks" / "05_pitfalls_and_myths.ipynb"
OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


def _notebook(number: str):
    (path,) = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    return nbformat.read(path, as_version=4)


def _headings(nb) -> list[str]:
    return [
        line.lstrip("#").strip()
        for c in nb.cells
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.startswith("#")
    ]


def _write(op) -> tuple[bool, list[float]]:
    base = torch.zeros(3, 1)
    e = base.expand(3, 4)
    try:
        op(e)
    except RuntimeError as err:
        assert OVERLAP in str(err)
        return True, base.flatten().tolist()
    return False, base.flatten().tolist()


@pytest.mark.parametrize(
    ("name", "op", "raises", "base_after"),
    [
        ("e[0] = 7", lambda e: e.__setitem__(0, 7.0), True, [0.0, 0.0, 0.0]),
        ("e[0, 1] = 7", lambda e: e.__setitem__((0, 1), 7.0), False, [7.0, 0.0, 0.0]),
        ("e[:, 0] = 7", lambda e: e.__setitem__((slice(None), 0), 7.0), False, [7.0, 7.0, 7.0]),
        ("e.fill_(7)", lambda e: e.fill_(7), False, [7.0, 7.0, 7.0]),
        ("e.zero_()", lambda e: e.zero_(), False, [0.0, 0.0, 0.0]),
        ("e.fill_(tensor)", lambda e: e.fill_(torch.tensor(7.0)), True, [0.0, 0.0, 0.0]),
        ("e.add_(1)", lambda e: e.add_(1), True, [0.0, 0.0, 0.0]),
        ("e.mul_(2)", lambda e: e.mul_(2), True, [0.0, 0.0, 0.0]),
        ("e.copy_(ones)", lambda e: e.copy_(torch.ones(3, 4)), True, [0.0, 0.0, 0.0]),
        (
            "e.index_add_ column 0",
            lambda e: e.index_add_(1, torch.tensor([0]), torch.ones(3, 1)),
            True,
            [0.0, 0.0, 0.0],
        ),
        (
            "e.index_put_ column 0",
            lambda e: e.index_put_((torch.arange(3), torch.zeros(3, dtype=torch.int64)), torch.ones(3)),
            False,
            [1.0, 1.0, 1.0],
        ),
    ],
)
def test_p2_expanded_write_rule_is_per_operator(name, op, raises, base_after):
    if name.startswith("e.index_put_"):  # an advanced-index write: not refused, only warned about
        with pytest.warns(UserWarning, match="expanded tensors is deprecated"):
            assert _write(op) == (raises, base_after), f"P2 in notebook 05 states the rule for {name}; torch disagrees"
        return
    assert _write(op) == (raises, base_after), f"P2 in notebook 05 states the rule for {name}; torch disagrees"


def test_p9_a_view_keeps_the_whole_storage_after_del_and_clone_frees_it():
    big = torch.zeros(64, 197, 768)
    view, kept = big[:, 0], big[:, 0].clone()
    del big
    assert view.untyped_storage().nbytes() == 38_731_776 and view._base is not None
    assert kept.untyped_storage().nbytes() == kept.nbytes == 196_608 and kept._base is None


def test_p16_an_inplace_write_bumps_the_version_autograd_checks():
    h = torch.randn(3, requires_grad=True).sigmoid()
    before = h._version
    h[0] = 0.0
    assert h._version == before + 1
    with pytest.raises(RuntimeError, match=f"is at version {before + 1}; expected version {before}"):
        h.sum().backward()


def test_p16_a_write_through_data_is_not_counted_and_backward_runs():
    w = torch.randn(3, requires_grad=True)
    h = w.sigmoid()
    h.data[0] = 2.0
    (grad,) = torch.autograd.grad(h.sum(), w)
    assert h._version == 0 and grad[0].item() == -2.0


PITFALL_LINK = re.compile(r"notebook 05, (P\d+)")


def test_references_to_pitfalls_of_notebook_05_resolve():
    heads = _headings(nbformat.read(NB05, as_version=4))
    sources = [*(ROOT / "src").rglob("*.py"), *(ROOT / "notebooks").glob("*.ipynb"), ROOT / "README.md"]
    found = {(p.name, m) for p in sources for m in PITFALL_LINK.findall(p.read_text(encoding="utf-8"))}
    assert found, "claims.py points to notebook 05, P2; the pattern should find it"
    for name, pitfall in sorted(found):
        assert any(h.startswith(f"{pitfall} ·") for h in heads), (
            f"{name} points to notebook 05, {pitfall}: no such heading"
        )


def test_every_exercise_of_the_bank_is_used_in_notebook_05_and_only_those():
    code = "".join(c.source for c in nbformat.read(NB05, as_version=4).cells if c.cell_type == "code")
    used = set(re.findall(r'"(05-[a-z-]+)"', code))
    assert used == set(ex.exercise_ids("05"))


def test_from_dlpack_of_a_negative_stride_array_aborts_the_process_as_p11_says():
    # P11's edge: not a catchable error but an abort, so the check, like the notebook, runs it in a child process
    code = "import numpy as np, torch; torch.from_dlpack(np.arange(12.0).reshape(3, 4)[:, ::-1])"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert child.returncode != 0
    assert "strides=[4, -1]" in child.stderr
    fine = "import numpy as np, torch; torch.from_dlpack(np.ascontiguousarray(np.arange(12.0).reshape(3, 4)[:, ::-1]))"
    assert subprocess.run([sys.executable, "-c", fine], capture_output=True, timeout=120, check=False).returncode == 0
