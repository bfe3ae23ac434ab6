"""The course's notebooks run under watch_broadcasts() with no false alarm.

That check rides on the strict nbval run (notebooks/conftest.py), so each notebook is executed once: the
watch is entered before a notebook's first cell and stays active to its last, and a cell may trigger a
report only if it is tagged ``mutual-broadcast``, while every cell so tagged must trigger one. These tests
show, on a probe notebook run under the same configuration, that both halves of the rule really fail.
"""

from __future__ import annotations

import nbformat
import pytest

from tests.conftest import ROOT
from tests.notebooks.nbval_probe import probe

pytestmark = pytest.mark.kernel
TAG = "mutual-broadcast"


def test_an_untagged_cell_that_stretches_both_operands_fails_with_the_report():
    outcome, message = probe().outcomes["Cell 3"]
    assert outcome == "failed", message
    assert f"not tagged {TAG!r}" in message and "broadcast (4, 1) and (4,) to (4, 4)" in message, message


def test_a_tagged_cell_that_stretches_nothing_fails_as_a_stale_tag():
    outcome, message = probe().outcomes["Cell 4"]
    assert outcome == "failed" and f"cell tagged {TAG!r} stretched no operands" in message, message


def test_a_tagged_cell_that_stretches_passes_and_its_report_stays_in_that_cell():
    assert probe().outcomes["Cell 5"] == ("passed", "")
    assert probe().outcomes["Cell 6"] == ("passed", ""), "a one-sided broadcast after a tagged cell is silent"


def test_the_watch_leaves_what_the_notebook_sees_unchanged():
    """Its requests between cells are silent (no count, no output) and put IPython's last result back."""
    assert probe().outcomes["Cell 7"] == ("passed", "")
    assert probe().outcomes["Cell 8"] == ("passed", ""), probe().outcomes["Cell 8"][1]


def test_the_course_uses_the_tag():
    """The tag name the hook reads is the one the notebooks carry."""
    tagged = sum(
        TAG in c.metadata.get("tags", [])
        for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
        for c in nbformat.read(path, as_version=4).cells
    )
    assert tagged >= 1
