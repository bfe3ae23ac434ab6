"""Every general sentence a notebook states is bound to a property test, and the two cannot drift apart.

A rule test carries ``@pytest.mark.rule("04", "<the sentence as it stands in the notebook>")`` and ``@given``
(hypothesis-generated inputs, edge sizes included). Here: each marked sentence occurs verbatim in that
notebook's markdown (line breaks and runs of spaces count as one space, and a blockquote's ``>`` markers, as in
an "At the edges" block, are not words), each rule test is a property test,
and each of notebooks 01-06 binds at least ``MIN_RULES`` sentences. Every ``test_rules_nbNN.py`` is read
(found by glob), and binds sentences of notebook NN only.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import Counter

import pytest

from tests.conftest import ROOT

MIN_RULES = 5
RULE_MODULES = sorted((ROOT / "tests" / "course").glob("test_rules_nb*.py"))


def _notebook_prose(number: str) -> str:
    (path,) = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    text = re.sub(r"(?m)^[ \t]*>[ \t]?(?:-[ \t])?", "", text)  # blockquote markers (and a quoted bullet's dash)
    return re.sub(r"\s+", " ", text)


def _rule_tests() -> list[tuple[str, object, str, str]]:
    found = []
    for path in RULE_MODULES:
        module = importlib.import_module(f"tests.course.{path.stem}")
        for name, fn in vars(module).items():
            if not name.startswith("test_") or not callable(fn):
                continue
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "rule":
                    notebook, sentence = mark.args
                    found.append((f"{path.stem}::{name}", fn, notebook, sentence))
    return found


RULES = _rule_tests()


def test_rule_marks_are_read_from_every_rule_module():
    # every tests/course/test_rules_nbNN.py binds sentences, each to notebook NN, the number in its file name
    numbered = {p.stem: re.fullmatch(r"test_rules_nb(\d\d)", p.stem) for p in RULE_MODULES}
    assert RULE_MODULES and all(numbered.values()), f"rule modules are named test_rules_nbNN.py: {list(numbered)}"
    assert {r[0].split("::")[0] for r in RULES} == set(numbered)
    assert all(r[2] == numbered[r[0].split("::")[0]][1] and isinstance(r[3], str) for r in RULES)
    notebooks = {p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert {m[1] for m in numbered.values()} <= notebooks, "a rule module names a notebook that does not exist"


@pytest.mark.parametrize(("test", "fn", "notebook", "sentence"), RULES, ids=[r[0] for r in RULES])
def test_each_marked_sentence_stands_verbatim_in_its_notebook(test, fn, notebook, sentence):
    words = re.sub(r"\s+", " ", sentence).strip()
    assert words and words in _notebook_prose(notebook), f"{test}: not found in notebook {notebook}: {sentence!r}"


@pytest.mark.parametrize(("test", "fn", "notebook", "sentence"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_test_is_a_property_test(test, fn, notebook, sentence):
    assert getattr(fn, "is_hypothesis_test", False), f"{test} binds a general sentence: give it @given inputs"


@pytest.mark.parametrize("notebook", ["01", "02", "03", "04", "05", "06"])
def test_each_main_notebook_binds_enough_rules(notebook):
    counts = Counter(r[2] for r in RULES)
    assert counts[notebook] >= MIN_RULES, f"notebook {notebook} binds {counts[notebook]} rules (at least {MIN_RULES})"
