"""Submitting and progress: the in-kernel checks record their results; submission() writes the answers'
cells, refuses with no answer, offers the file on Colab; progress() shows which exercises passed."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import pytest

from viewlab.course import progress, submission
from viewlab.course.exercises import check_exercise
from viewlab.course.grade import record
from viewlab.course.grade.progress_table import progress_text
from viewlab.course.grade.submit import answer_text, load

CELL = """import torch

def flatten_any(x):
    return x.reshape(-1)

print("checking")
ex_result = None
"""


def make_submission(folder, learner: str) -> str:
    """A submission written by submission() from two checked cells (one right, one breaking must_copy)."""
    good = _cell(folder, "good", CELL)
    bad = _cell(folder, "bad", "def safe_copy(x):\n    return x\n")
    check_exercise("05-flatten-any", good.flatten_any, max_examples=30)
    check_exercise("07-safe-copy", bad.safe_copy, max_examples=30)
    return submission(str(folder / "zoe.json"), learner=learner)


def _cell(tmp_path, name: str, source: str):
    path = tmp_path / "ipykernel_submit" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_cell_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fresh_record():
    record.clear()
    yield
    record.clear()


def test_no_answers_refused(fresh_record, tmp_path):
    with pytest.raises(ValueError, match="no answers to submit: check an exercise first"):
        submission(str(tmp_path / "s.json"), learner="Ada")
    assert not (tmp_path / "s.json").exists()


def test_submission_round_trip_and_graded(fresh_record, tmp_path, capsys):
    good = _cell(tmp_path, "good", CELL)
    bad = _cell(tmp_path, "bad", "def safe_copy(x):\n    return x\n")
    assert check_exercise("05-flatten-any", good.flatten_any).passed
    assert not check_exercise("07-safe-copy", bad.safe_copy).passed
    text = progress_text()
    status = {line.split()[0]: line.split()[1] for line in text.splitlines()[1:]}
    assert status["05-flatten-any"] == "passed" and status["07-safe-copy"] == "failed"
    assert status["01-channels-first"] == "not"  # "not checked"
    assert text.startswith("Exercises passed in this kernel: 1 of ")
    assert "<table>" in progress()._repr_html_()
    path = submission(str(tmp_path / "s.json"), learner="Ada Lovelace")
    data = json.loads(open(path).read())
    assert data["format"] == 1 and data["learner"] == "Ada Lovelace" and isinstance(data["course_version"], str)
    assert set(data["answers"]) == {"05-flatten-any", "07-safe-copy"}
    src = data["answers"]["05-flatten-any"]
    assert "def flatten_any" in src and "print(" not in src
    assert src.count("\n") == CELL.count("\n"), "the cell's line numbers are kept"
    assert load(path).learner == "Ada Lovelace"  # graded in test_grade.py's classroom (learner "Zoe")


def test_on_colab_the_file_is_offered(fresh_record, tmp_path, monkeypatch):
    """Colab cannot run here: a stand-in for google.colab.files records the call the real one would get."""
    offered = []
    colab = types.ModuleType("google.colab")
    colab.files = types.SimpleNamespace(download=offered.append)
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    good = _cell(tmp_path, "colab", CELL)
    check_exercise("05-flatten-any", good.flatten_any, max_examples=30)
    path = str(tmp_path / "c.json")
    submission(path, learner="Bo")
    assert offered == [path]


def test_answer_text_blanks_the_check_call():
    cell = "def f(x):\n    return x\nex.check_exercise('05-flatten-any', f)\nY = 2\n"
    assert answer_text(cell) == "def f(x):\n    return x\n\nY = 2\n"
