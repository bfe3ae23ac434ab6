"""The grader on a generated classroom: every gradebook row, two gradings giving the same CSV, the report in
chromium with nothing fetched, and the in-kernel checker's words for the same honest answers.

The classroom (``grade_classroom.py``): right answers written several ways, wrong answers, rule-breaking
answers, answers that read frames or the garbage collector, a tensor subclass, a custom operator, input
mutation, ``while True: pass``, a 50 GB allocation, a crash, network and subprocess calls, importing the bank,
a syntax error, a stub, a call that does not fit, a malformed, an empty and an answerless file.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from viewlab.course.exercises import check_exercise
from viewlab.course.grade import record
from viewlab.course.grade.__main__ import main

from .grade_classroom import EXERCISES, LOOPS, RULE_BREAKING, build
from .test_grade_submit import make_submission

CHROMIUM = shutil.which("chromium")
ARGS = ["--cpu-seconds", "1", "--wall-seconds", "3", "--inputs", "10", "--jobs", "2"]
ARGS += [a for e in EXERCISES for a in ("--exercise", e)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The classroom, graded twice by the command line (two fresh sets of processes)."""
    root = tmp_path_factory.mktemp("classroom")
    want = build(root / "submissions")
    record.clear()  # a submission made by submission() itself, from checked cells
    make_submission(root / "submissions", "Zoe")
    record.clear()
    want.update({("Zoe", e): (False, "no answer submitted") for e in EXERCISES})
    want[("Zoe", "05-flatten-any")] = (True, "")
    want[("Zoe", "07-safe-copy")] = (False, "breaks rule `must_copy`")
    assert main([str(root / "submissions"), "--out", str(root / "out1"), *ARGS]) == 0
    assert main([str(root / "submissions"), "--out", str(root / "out2"), *ARGS]) == 0
    return root, want


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_at_least_twenty_submissions(graded):
    root, _ = graded
    assert len(list((root / "submissions").glob("*.json"))) >= 20


def test_every_row(graded):
    root, want = graded
    rows = _rows(root / "out1" / "gradebook.csv")
    got = {(r["learner"], r["exercise"]): r for r in rows}
    assert len(got) == len(rows), "one row per learner and exercise"
    assert set(got) == set(want)
    for key, (passed, text) in want.items():
        row = got[key]
        assert row["passed"] == ("true" if passed else "false"), (key, row)
        assert text in row["reason"], (key, text, row["reason"])
        if passed:
            assert row["reason"] == ""
    hung = got[("Jo", "05-flatten-any")]
    assert hung["seconds"] == "3", "the CSV's seconds: the limit that stopped the answer"
    assert all(r["seconds"] == "" for k, r in got.items() if k != ("Jo", "05-flatten-any"))


def test_same_csv_twice(graded):
    root, _ = graded
    one = (root / "out1" / "gradebook.csv").read_bytes()
    assert one == (root / "out2" / "gradebook.csv").read_bytes()
    assert (root / "out1" / "report.html").read_bytes() == (root / "out2" / "report.html").read_bytes()


def test_jsonl_details(graded):
    root, want = graded
    lines = [json.loads(x) for x in (root / "out1" / "gradebook.jsonl").read_text().splitlines()]
    assert len(lines) == len(want)
    by = {(d["learner"], d["exercise"]): d for d in lines}
    ada = by[("Ada", "05-flatten-any")]
    assert ada["passed"] is True and ada["same_as_solution"] is True, "a pasted solution is flagged"
    assert by[("Ben", "05-flatten-any")]["same_as_solution"] is False
    assert ada["inputs_judged"] >= 10 and ada["cpu_seconds"] >= 0
    dev = by[("Dev", "02-pairwise-diff")]
    assert "aten.repeat.default" in dev["operators_seen"]
    assert dev["message"].startswith("02-pairwise-diff (") and "Failing input:" in dev["message"]


def _load(name: str, source: str, folder: Path):
    """The answer as the learner's kernel holds it: defined from a cell file (so messages say "this cell")."""
    path = folder / "ipykernel_fidelity" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source.strip("\n") + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_answer_{name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [v for k, v in vars(module).items() if callable(v) and getattr(v, "__module__", "") == module.__name__][-1]


@pytest.mark.parametrize(
    "learner,exercise,source",
    [("Dev", e, t) for e, (t, _) in RULE_BREAKING.items()] + [("Eve", e, t) for e, (t, _) in LOOPS.items()],
)
def test_rules_judged_as_the_kernel_judges(graded, tmp_path, learner, exercise, source):
    """An honest answer that breaks a stated rule gets the in-kernel checker's reason, word for word."""
    root, _ = graded
    row = {(r["learner"], r["exercise"]): r for r in _rows(root / "out1" / "gradebook.csv")}[(learner, exercise)]
    kernel = check_exercise(exercise, _load(exercise, source, tmp_path), max_examples=30)
    assert row["passed"] == "false" and not kernel.passed
    assert row["reason"] == kernel.reason


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (apt-get install chromium)")
def test_report_in_chromium(graded, chromium_args):
    from playwright.sync_api import sync_playwright

    root, want = graded
    rows = _rows(root / "out1" / "gradebook.csv")
    foreign: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args)
        page = browser.new_page(viewport={"width": 1400, "height": 900})

        def route(r):
            if r.request.url.startswith("file://"):
                r.continue_()
            else:
                foreign.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.goto((root / "out1" / "report.html").as_uri(), wait_until="load")
        bars = page.eval_on_selector_all(
            "svg#pass-rate g.bar",
            "gs => gs.map(g => [g.dataset.exercise, +g.dataset.passed, +g.dataset.total, g.textContent])",
        )
        grid = page.eval_on_selector_all(
            "table#grid tbody tr", "trs => trs.map(tr => [...tr.children].map(c => c.textContent))"
        )
        failures = page.eval_on_selector_all("dl.failures dt", "dts => dts.length")
        browser.close()
    assert foreign == [], "the report fetches nothing outside file://"
    graded_rows = [r for r in rows if r["exercise"] != "*"]
    for ex, passed, total, text in bars:
        mine = [r for r in graded_rows if r["exercise"] == ex]
        assert (passed, total) == (sum(r["passed"] == "true" for r in mine), len(mine))
        assert f"{passed}/{total}" in text, "each bar says its count in text"
    assert [b[0] for b in bars] == EXERCISES
    learners = sorted({r["learner"] for r in graded_rows})
    assert [g[0] for g in grid] == learners
    cell = {(r["learner"], r["exercise"]): r for r in graded_rows}
    words = {"true": "pass", "false": "FAIL"}
    for row in grid:
        who = row[0]
        for ex, text in zip(EXERCISES, row[1:]):
            r = cell[(who, ex)]
            if r["reason"] == "no answer submitted":
                assert text == "none"
            elif r["reason"] == "not solved yet":
                assert text == "not solved"
            else:
                assert text.startswith(words[r["passed"]]), (who, ex, text)
    n_fail = sum(
        r["passed"] == "false" and r["reason"] not in ("no answer submitted", "not solved yet") for r in graded_rows
    )
    assert failures == n_fail
