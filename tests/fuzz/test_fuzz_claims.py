"""Fuzzing viewlab.course.claims: get, table, counts, judge, show and format_table. Every input gives a correct
result or a clear error (the harness's rule: a TypeError or ValueError raised in viewlab that names the function).

The evidence of a few claims takes seconds (timings); the good arguments draw from the claims whose evidence runs
in about a millisecond, so a run stays short, and A05/A28 (which call ``Tensor.storage()``) are among them.
"""

from __future__ import annotations

import collections
from functools import cache
from typing import Any

import pytest
from hypothesis import strategies as st

from tests.fuzz.harness import Target, _fixed, _merge, _optional, fuzz, public

CLAIMS_MODULE = "viewlab.course.claims"
get, table, counts, judge, show, format_table = (
    public(n, CLAIMS_MODULE) for n in ("get", "table", "counts", "judge", "show", "format_table")
)
CLAIMS, VERDICTS, ARTICLES = public("CLAIMS"), public("VERDICTS"), public("ARTICLES")
QUICK = ["A02", "A03", "A04", "A05", "A16", "A18", "A20", "A21", "A22", "A24", "A25", "A28", "B01", "B03", "B06", "B09"]
quick_ids = st.sampled_from(QUICK)


@cache
def _evidence(claim_id: str) -> dict[str, Any]:
    return get(claim_id).evidence()


def _judged(claim_id: str, facts: dict[str, Any]) -> tuple[str, str]:
    return get(claim_id).judge(facts)


def oracle_get(kw: dict, result: Any, data: Any) -> None:
    assert result is next(c for c in CLAIMS if c.id == kw["claim_id"])


def oracle_table(kw: dict, result: Any, data: Any) -> None:
    chosen = list(CLAIMS) if kw.get("claims") is None else list(kw["claims"])
    wanted = [c.id for c in chosen if kw.get("ids") is None or c.id in list(kw["ids"])]
    assert [r["id"] for r in result] == wanted
    for row in result:  # the judge is a function of the facts: the row's verdict and reason follow from its evidence
        assert (row["verdict"], row["why"]) == _judged(row["id"], row["evidence"])
        assert row["statement"] == get(row["id"]).statement and row["article"] == get(row["id"]).article


def oracle_counts(kw: dict, result: Any, data: Any) -> None:
    tally = collections.Counter((r["article"], r["verdict"]) for r in kw["rows"])
    assert result == {a: {v: tally[(a, v)] for v in VERDICTS} for a in ARTICLES}


def oracle_judge(kw: dict, result: Any, data: Any) -> None:
    assert result == _judged(kw["claim"].id, kw["facts"]) and result[0] in VERDICTS


def oracle_show(kw: dict, result: Any, data: Any) -> None:
    assert result["id"] == kw["claim_id"]
    assert (result["verdict"], result["why"]) == _judged(result["id"], result["evidence"])


def oracle_format(kw: dict, result: Any, data: Any) -> None:
    rows, width = list(kw["rows"]), kw.get("width", 60)
    lines = result.split("\n") if rows else []
    assert len(lines) == len(rows) and (result == "") == (not rows)
    for line, row in zip(lines, rows):
        text = row["statement"]
        shown = text if len(text) <= width else text[: width - 3] + "..."
        assert line.split()[:2] == [row["id"], *row["verdict"].split()[:1]] and line.endswith(shown)


rows = st.lists(
    st.fixed_dictionaries(
        {
            "id": quick_ids,
            "article": st.sampled_from(list(ARTICLES)),
            "verdict": st.sampled_from(VERDICTS),
            "statement": st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=80),
        }
    ),
    max_size=4,
)


@st.composite
def judged(draw: Any) -> dict[str, Any]:
    """A claim and facts: its own evidence, or that evidence with one of its examples' overrides."""
    claim = get(draw(quick_ids))
    override = draw(st.sampled_from([{}, *claim.examples.values()]))
    return {"claim": claim, "facts": {**_evidence(claim.id), **override}}


CLAIM_TARGETS: list[Target] = [
    Target("get [claims]", get, _fixed(claim_id=quick_ids), oracle_get, examples=40),
    Target(
        "table [claims]",
        table,
        st.lists(quick_ids, min_size=1, max_size=2, unique=True).flatmap(
            lambda ids: _merge(
                _fixed(claims=st.just([get(i) for i in ids])),
                _optional(ids=st.sampled_from([ids, ids[:1], tuple(ids)])),
            )
        ),
        oracle_table,
        examples=40,
    ),
    Target("counts [claims]", counts, _fixed(rows=rows), oracle_counts, examples=40),
    Target("judge [claims]", judge, judged(), oracle_judge, examples=40),
    Target(
        "show [claims]",
        show,
        _merge(_fixed(claim_id=quick_ids), _optional(width=st.integers(20, 120))),
        oracle_show,
        examples=30,
        quiet=True,
    ),
    Target(
        "format_table [claims]",
        format_table,
        _merge(_fixed(rows=rows), _optional(width=st.integers(4, 90))),
        oracle_format,
        examples=40,
    ),
]


@pytest.mark.parametrize("target", CLAIM_TARGETS, ids=[t.name for t in CLAIM_TARGETS])
def test_fuzz_claims(target: Target) -> None:
    fuzz(target)


@pytest.mark.parametrize("width", [1, 5, 10, 11, 19])
def test_show_refuses_a_width_too_narrow_for_its_labels(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    """E13: show() labels each line with 10 characters ("evidence: "), so a width of 1-19 leaves less than 10
    characters of text a line (width 1 printed 94 lines of one character). Refused, naming show() and the width."""
    with pytest.raises(ValueError, match=rf"show\(\): `width` must be an int >= 20; got int {width}"):
        show("A22", width=width)
    assert capsys.readouterr().out == ""  # nothing printed before the refusal
    show("A22", width=20)  # the narrowest accepted: every wrapped line keeps 10 characters of text
    wrapped = capsys.readouterr().out.splitlines()[1:]  # the first line is the header, never wrapped
    assert wrapped and all(len(line) <= 20 for line in wrapped if " " in line.strip())
