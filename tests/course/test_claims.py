"""The claims registry (viewlab.course.claims): complete, every evidence function run, every judge able to disagree."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import inspect
import json
import pkgutil
import re
import time

import pytest
import torch

from viewlab.course import claims as cl


@pytest.fixture(scope="module")
def timed_table():
    """The whole table, built once for this module (it runs every evidence function, timings included).

    Each claim's evidence is wrapped to count its calls and keep the facts it returned, so the test that
    every evidence function runs exactly once needs no second table."""
    calls: dict[str, int] = {}
    facts_seen: dict[str, dict] = {}

    def counted(claim):
        def run():
            calls[claim.id] = calls.get(claim.id, 0) + 1
            facts = claim.evidence()
            facts_seen[claim.id] = facts
            return facts

        return dataclasses.replace(claim, evidence=run)

    start = time.perf_counter()
    rows = cl.table(claims=[counted(c) for c in cl.CLAIMS])
    return rows, time.perf_counter() - start, calls, facts_seen


def test_the_table_covers_both_articles(timed_table):
    rows, seconds, _, _ = timed_table  # how long it took is printed by --durations, never asserted here
    assert len(rows) == len(cl.CLAIMS) >= 35
    by_article = cl.counts(rows)
    assert set(by_article) == {"000 expand", "001 expand_as"}
    assert all(sum(c.values()) >= 15 for c in by_article.values())
    for row in rows:
        assert set(row) == {"id", "article", "statement", "verdict", "why", "evidence"}
        assert row["verdict"] in cl.VERDICTS and row["why"].strip()
        assert isinstance(row["evidence"], dict) and row["evidence"], row["id"]


def test_every_evidence_function_ran_once_for_the_table(timed_table):
    rows, _, calls, facts_seen = timed_table
    assert calls == {c.id: 1 for c in cl.CLAIMS}
    assert all(row["evidence"] is facts_seen[row["id"]] for row in rows)


@pytest.mark.parametrize("claim", cl.CLAIMS, ids=lambda c: c.id)
def test_every_judge_can_give_another_verdict(claim, timed_table):
    rows, *_ = timed_table
    real = next(r for r in rows if r["id"] == claim.id)["evidence"]
    outcomes = {cl.judge(claim, real)[0]}
    assert claim.examples, f"{claim.id}: give facts under which the judge says something else"
    for verdict, override in claim.examples.items():
        unknown = set(override) - set(real)
        assert not unknown, f"{claim.id}: example facts {unknown} are not facts the evidence returns"
        got, why = cl.judge(claim, {**real, **override})
        assert got == verdict, f"{claim.id}: facts {override} should give {verdict!r}, gave {got!r} ({why})"
        outcomes.add(got)
    assert len(outcomes) >= 2, f"{claim.id}: the judge can only say {outcomes}"


def test_registry_is_well_formed():
    ids = [c.id for c in cl.CLAIMS]
    assert len(ids) == len(set(ids))
    assert all(i[0] == ("A" if c.article == "000 expand" else "B") for i, c in zip(ids, cl.CLAIMS))
    for c in cl.CLAIMS:
        assert c.kind in cl.KINDS and c.section and c.statement.endswith(".")
    assert cl.VERDICTS == ("true", "false", "misleading", "not checkable here")
    with pytest.raises(ValueError, match="kind must be one of"):
        dataclasses.replace(cl.CLAIMS[0], kind="opinion")
    # every message names the public function the learner called
    with pytest.raises(KeyError, match=r"get\(\): no claim 'Z9'"):
        cl.get("Z9")
    with pytest.raises(KeyError, match=r"show\(\): no claim 'Z9'"):
        cl.show("Z9")
    with pytest.raises(KeyError, match=r"table\(\): unknown claim ids"):
        cl.table(ids=["Z9"])
    with pytest.raises(TypeError, match=r"table\(\): `ids` must be a list of claim ids"):
        cl.table(ids="A01")
    with pytest.raises(TypeError, match=r"table\(\): `claims` must hold Claim objects"):
        cl.table(claims=["A01"])
    with pytest.raises(ValueError, match=r"show\(\): `width` must be an int >= 20; got int 0"):
        cl.show("A22", width=0)
    with pytest.raises(TypeError, match=r"format_table\(\): `width` must be an int >= 4"):
        cl.format_table([], width=60.5)
    with pytest.raises(ValueError, match=r"format_table\(\): `width` must be an int >= 4; got int 3"):
        cl.format_table([], width=3)


def test_a_judge_must_answer_in_the_vocabulary():
    bad = dataclasses.replace(cl.get("A22"), judge=lambda f: ("half right", "x"))
    with pytest.raises(ValueError, match=r"judge\(\): claim A22 gave verdict 'half right', not one of"):
        cl.judge(bad, {"shape": (2, 5)})
    with pytest.raises(ValueError, match=r"table\(\): claim A22 gave verdict 'half right'"):
        cl.table(claims=[bad])
    silent = dataclasses.replace(cl.get("A22"), judge=lambda f: ("true", " "))
    with pytest.raises(ValueError, match=r"judge\(\): claim A22 gave no reason for 'true'"):
        cl.judge(silent, {"shape": (2, 5)})


def test_what_the_machine_has_is_checked(timed_table):
    rows, *_ = timed_table
    a07 = next(r for r in rows if r["id"] == "A07")
    if torch.cuda.is_available():
        assert "needs a CUDA GPU" not in a07["why"], "with a GPU present, the RTX 3090 timing claim must be measured"
        assert a07["evidence"]["repeat_median_s"] is not None
    else:  # the expand half is measured on CPU and meta; only the repeat half needs the GPU
        assert a07["evidence"]["expand_ops"] == ["expand"] and a07["evidence"]["repeat_median_s"] is None
        assert "needs a CUDA GPU" in a07["why"]


def test_claim_ids_are_unique_and_each_is_found():
    ids = [c.id for c in cl.CLAIMS]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert all(cl.get(c.id) is c for c in cl.CLAIMS)
    assert ids == sorted(ids), "CLAIMS lists article 000 first, each article in id order"


def test_the_code_notebook_07_prints_is_public_and_found():
    from tests.conftest import ROOT
    from viewlab.course import article_helpers as ah

    cells = json.loads((ROOT / "notebooks" / "07_the_two_articles.ipynb").read_text(encoding="utf-8"))["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    printed = re.findall(r"inspect\.getsource\(([\w.]+)\)", code)
    assert len(printed) >= 6, printed
    for dotted in printed:
        first, *rest = dotted.split(".")
        obj = {"cl": cl, "ah": ah}[first]
        for part in rest:
            assert not part.startswith("_"), f"notebook 07 prints the private {dotted}: make it public"
            obj = getattr(obj, part)
        assert inspect.getsource(obj).lstrip().startswith(("def ", "class ")), dotted


def test_every_claims_module_has_a_docstring_example():
    """The examples themselves run in `make test` (pytest --doctest-modules over src/viewlab); here: each has one."""
    import viewlab.course

    modules = [
        cl,
        viewlab.course,
        *(importlib.import_module(f"{cl.__name__}.{m.name}") for m in pkgutil.iter_modules(cl.__path__)),
    ]
    for module in modules:
        examples = sum(len(t.examples) for t in doctest.DocTestFinder().find(module))
        assert examples > 0, f"{module.__name__} has no runnable docstring example"
