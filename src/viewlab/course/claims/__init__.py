"""Every claim of the two source articles, with the code that checks it and the rule that judges it.

The course was prompted by two blog posts (in Chinese):

* **000 expand** -- "PyTorch张量扩展的隐藏技巧：用expand()高效实现数据复制与广播" ("Hidden tricks of PyTorch
  tensor expansion: efficient data replication and broadcasting with expand()");
* **001 expand_as** -- "PyTorch张量广播的幕后功臣：手把手教你用expand_as()实现高效数据对齐" ("The unsung hero
  of PyTorch broadcasting: efficient data alignment with expand_as(), step by step").

Each :class:`Claim` restates one thing an article says, in our words; its ``evidence`` function runs
code here and returns facts (bytes, booleans, error texts, timings with their spread); its ``judge``
maps those facts to one verdict of :data:`VERDICTS` and a reason. Nothing is a literal: feed a judge
other facts and it gives another verdict (``examples`` holds, per claim, facts that do so, and
``tests/course/test_claims.py`` checks every one). Where an article's example is needed, its behaviour is
described in prose and rebuilt in our own code (:mod:`~viewlab.course.claims.article_code`) -- the
articles' code is not carried over.

Where things are: :mod:`~viewlab.course.claims.model` (what a claim is, the verdicts, :func:`judge`);
one module per section (or pair of sections) of an article, along the article's own headings, each claim's
evidence, judge and row side by side -- article 000: ``a000_views`` (introduction and 1, views and copies), ``a000_table`` (1's table of memory and time),
``a000_scenarios`` (2, batches, attention, pooling), ``a000_performance`` (3, memory and autograd),
``a000_practice`` (4, errors, other APIs, and the closing paragraph); article 001: ``b001_broadcasting``
(introduction, 1 and 2), ``b001_layers`` (3, a custom layer, and 4, pitfalls and performance advice),
``b001_debugging`` (5 and 6) -- and ``_evidence`` (the measuring helpers they share). A claim's id is its
place in the order the registry grew; its ``section`` says where in the article it is.

>>> rows = table(ids=["A02", "B09"])
>>> [(r["id"], r["verdict"]) for r in rows]
[('A02', 'true'), ('B09', 'true')]
>>> sorted(rows[0])
['article', 'evidence', 'id', 'statement', 'verdict', 'why']
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from viewlab._checks import entry, problem, require_int, type_error, value_error

from . import (
    a000_performance,
    a000_practice,
    a000_scenarios,
    a000_table,
    a000_views,
    article_code,
    b001_broadcasting,
    b001_debugging,
    b001_layers,
)
from .model import ARTICLES, KINDS, VERDICT_MEANINGS, VERDICTS, Claim, UnknownClaim, judge

__all__ = [
    "VERDICTS",
    "VERDICT_MEANINGS",
    "KINDS",
    "ARTICLES",
    "Claim",
    "UnknownClaim",
    "CLAIMS",
    "get",
    "judge",
    "table",
    "counts",
    "format_table",
    "show",
    "article_code",
]

_MODULES = (
    a000_views,
    a000_table,
    a000_scenarios,
    a000_performance,
    a000_practice,
    b001_broadcasting,
    b001_layers,
    b001_debugging,
)
#: Every claim, article 000 first, in id order.
CLAIMS: tuple[Claim, ...] = tuple(sorted((c for m in _MODULES for c in m.CLAIMS), key=lambda c: c.id))
_BY_ID = {c.id: c for c in CLAIMS}  # tests/course/test_claims.py checks that no id is used twice


def _known(claim_id: Any, arg: str = "claim_id") -> Claim:
    if not isinstance(claim_id, str):
        raise type_error(arg, "a claim id such as 'A01' (a str)", claim_id, f"The ids: {', '.join(_BY_ID)}.")
    if claim_id not in _BY_ID:
        raise problem(UnknownClaim, f"no claim {claim_id!r}; known ids: {', '.join(_BY_ID)}.")
    return _BY_ID[claim_id]


def _items(value: Any, arg: str, what: str) -> list[Any]:
    """``value`` as a list, or a TypeError when it is no collection (a str, a dict or a single object)."""
    fix = f"Wrap a single one: {arg}=[...]."
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise type_error(arg, f"a list of {what}", value, fix)
    try:
        return list(value)
    except (TypeError, RuntimeError, ValueError, NotImplementedError):  # a 0-d or nested tensor is no list
        raise type_error(arg, f"a list of {what}", value, fix) from None


def _rows(rows: Any, keys: tuple[str, ...]) -> list[Mapping[str, Any]]:
    """``rows`` (as :func:`table` returns them), each a mapping with ``keys``, or an error naming the first bad one."""
    rows = _items(rows, "rows", "rows as table() returns them (dicts with keys " + ", ".join(keys) + ")")
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise type_error(f"rows[{i}]", "a dict as table() returns it", row)
        missing = [k for k in keys if k not in row]
        if missing:
            raise value_error(f"rows[{i}]", f"a dict with keys {', '.join(keys)} (missing {', '.join(missing)})", row)
        bad = [k for k in keys if not isinstance(row[k], str)]
        if bad:
            raise type_error(f"rows[{i}][{bad[0]!r}]", "a str", row[bad[0]])
    return rows


@entry("get")
def get(claim_id: str) -> Claim:
    """The claim with this id.

    >>> get("A21").article
    '000 expand'
    """
    return _known(claim_id)


@entry("table")
def table(claims: Iterable[Claim] | None = None, ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Run every claim's evidence and judge it: one dict per claim with keys
    ``id, article, statement, verdict, why, evidence``.

    >>> [r["verdict"] for r in table(ids=["A21", "A22"])]
    ['false', 'true']
    """
    chosen = list(CLAIMS) if claims is None else _items(claims, "claims", "Claim objects (from CLAIMS), or None")
    bad = [c for c in chosen if not isinstance(c, Claim)]
    if bad:
        raise problem(
            TypeError,
            f"`claims` must hold Claim objects (from viewlab.course.claims.CLAIMS), got {type(bad[0]).__name__}.",
        )
    if ids is not None:
        if isinstance(ids, str):
            raise problem(
                TypeError, f"`ids` must be a list of claim ids such as ['A01', 'B02'], got the string {ids!r}."
            )
        ids = _items(ids, "ids", "claim ids such as ['A01', 'B02'], or None")
        for i in ids:
            if not isinstance(i, str):
                raise type_error("ids", "a list of claim ids such as ['A01', 'B02'] (each a str)", ids)
        unknown = [i for i in ids if i not in _BY_ID]
        if unknown:
            raise problem(UnknownClaim, f"unknown claim ids {unknown}; known ids: {', '.join(_BY_ID)}.")
        chosen = [c for c in chosen if c.id in ids]
    # Torch warns about Tensor.storage() once per process; claims A05 and A28 call it, and the learner's own
    # first call must still warn (and the next claim's evidence must not depend on what ran before).
    warned = torch.storage._warn_typed_storage_removal.__dict__.get("has_warned", False)
    try:
        return [_row(claim) for claim in chosen]
    finally:
        torch.storage._warn_typed_storage_removal.__dict__["has_warned"] = warned


def _row(claim: Claim) -> dict[str, Any]:
    facts = claim.evidence()
    verdict, why = judge(claim, facts)
    return {
        "id": claim.id,
        "article": claim.article,
        "statement": claim.statement,
        "verdict": verdict,
        "why": why,
        "evidence": facts,
    }


@entry("counts")
def counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Verdict counts per article (every verdict listed, zeros included).

    >>> counts([{"article": "000 expand", "verdict": "true"}])["000 expand"]["true"]
    1
    """
    out = {a: {v: 0 for v in VERDICTS} for a in ARTICLES}
    for i, r in enumerate(_rows(rows, ("article", "verdict"))):
        for key, known in (("article", ARTICLES), ("verdict", VERDICTS)):
            if r[key] not in known:
                raise value_error(f"rows[{i}][{key!r}]", f"one of {', '.join(map(repr, known))}", r[key])
        out[r["article"]][r["verdict"]] += 1
    return out


def _facts_text(facts: Mapping[str, Any]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
        return repr(v)

    return "; ".join(f"{k} = {fmt(v)}" for k, v in facts.items())


_SHOW_MIN_WIDTH = 20


@entry("show")
def show(claim_id: str, width: int = 108) -> dict[str, Any]:
    """Run one claim's evidence, judge it, print the restatement, the facts, the verdict and why, in lines
    of at most ``width`` characters (at least 20); return the row (as in :func:`table`).

    >>> row = show("A22")
    A22 · 000 expand · 4.1 Errors · API
    claim:    torch.ones(1, 5).expand(2, -1) gives shape torch.Size([2, 5]).
    evidence: error = None; shape = (2, 5)
    verdict:  true -- shape (2, 5)
    """
    # Each line starts with a 10-character label ("evidence: "): narrower than 20 leaves under 10 characters of
    # text a line -- one word per line or less (and textwrap's own refusal at <= 10 would not name show()).
    width = require_int(width, "width", minimum=_SHOW_MIN_WIDTH)
    claim = _known(claim_id)
    (row,) = table(claims=[claim])
    print(f"{claim.id} · {claim.article} · {claim.section} · {claim.kind}")
    for label, text in (
        ("claim", claim.statement),
        ("evidence", _facts_text(row["evidence"])),
        ("verdict", f"{row['verdict']} -- {row['why']}"),
    ):
        print(textwrap.fill(text, width, initial_indent=f"{label + ':':<10}", subsequent_indent=" " * 10))
    return row


@entry("format_table")
def format_table(rows: Iterable[Mapping[str, Any]], width: int = 60) -> str:
    """A plain-text summary: id, verdict and the statement (shortened to ``width`` characters).

    >>> print(format_table([{"id": "A22", "verdict": "true", "statement": "expand(2, -1) gives (2, 5)."}]))
    A22  true                expand(2, -1) gives (2, 5).
    """
    width = require_int(width, "width", minimum=4)  # room for one character and the "..."
    lines = []
    for r in _rows(rows, ("id", "verdict", "statement")):
        text = r["statement"] if len(r["statement"]) <= width else r["statement"][: width - 3] + "..."
        lines.append(f"{r['id']:<4} {r['verdict']:<19} {text}")
    return "\n".join(lines)
