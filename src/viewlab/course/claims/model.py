"""What a claim is, the words a verdict may use, and the one place a verdict is checked.

A :class:`Claim` restates one thing an article says; its ``evidence`` runs code and returns facts, its
``judge`` turns facts into ``(verdict, why)``. :func:`judge` applies it and refuses a verdict outside
:data:`VERDICTS` or an empty reason.

>>> c = claim_row("A99", A, "a section", "API", "It works.", lambda: {"ok": True},
...               lambda f: ("true", "it ran") if f["ok"] else ("false", "it did not"), false={"ok": False})
>>> judge(c, c.evidence()), judge(c, c.examples["false"])
(('true', 'it ran'), ('false', 'it did not'))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from viewlab._checks import entry, problem, type_error

__all__ = ["VERDICTS", "VERDICT_MEANINGS", "KINDS", "ARTICLES", "Claim", "UnknownClaim", "judge"]

#: The one verdict vocabulary of the course.
VERDICT_MEANINGS: dict[str, str] = {
    "true": "the literal statement holds (if it is redundant or pointless, `why` says so)",
    "false": "the literal statement does not hold",
    "misleading": "the literal statement holds, but it teaches a wrong lesson (`why` says which)",
    "not checkable here": "what the check needs cannot be observed here (`why` names it: a CUDA GPU this "
    "machine lacks -- where one is present, the claim is checked -- facts only the author has, such as their "
    "own projects, or evidence that measured nothing)",
}
VERDICTS: tuple[str, ...] = tuple(VERDICT_MEANINGS)
KINDS: tuple[str, ...] = ("memory", "speed", "semantics", "API", "advice")
ARTICLES: dict[str, str] = {
    "000 expand": "PyTorch张量扩展的隐藏技巧：用expand()高效实现数据复制与广播",
    "001 expand_as": "PyTorch张量广播的幕后功臣：手把手教你用expand_as()实现高效数据对齐",
}
A, B = "000 expand", "001 expand_as"
NOT_CHECKABLE = "not checkable here"

Facts = dict[str, Any]
Verdict = tuple[str, str]


class UnknownClaim(KeyError, ValueError):
    """No claim has this id. A ``KeyError`` (a failed lookup) and a ``ValueError`` (a wrong argument value)."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Claim:
    """One claim of a source article.

    Attributes:
        id: ``A01``... for article 000, ``B01``... for article 001.
        article: ``"000 expand"`` or ``"001 expand_as"``.
        section: where in the article (its own numbering, titles translated).
        statement: our one-sentence restatement of what the article says.
        kind: one of :data:`KINDS`.
        evidence: runs code, returns facts (plain Python values); its inputs (sizes, dtypes, layouts, seeds)
            are keyword parameters whose defaults are the article's values, so it can be run on others.
        judge: maps facts to ``(verdict, why)``.
        examples: verdict -> facts (overriding the measured ones) under which ``judge`` gives that verdict.
    """

    id: str
    article: str
    section: str
    statement: str
    kind: str
    evidence: Callable[[], Facts]
    judge: Callable[[Mapping[str, Any]], Verdict]
    examples: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Claims are written by the course's authors, not passed in by a learner: no public function to name.
        if self.article not in ARTICLES:
            raise ValueError(f"claim {self.id}: article must be one of {tuple(ARTICLES)}, got {self.article!r}.")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {KINDS}, got {self.kind!r}.")
        bad = [v for v in self.examples if v not in VERDICTS]
        if bad:
            raise ValueError(f"claim {self.id}: example verdicts {bad} are not in {VERDICTS}.")


def claim_row(
    id: str,
    article: str,
    section: str,
    kind: str,
    statement: str,
    evidence: Callable[[], Facts],
    judge_fn: Callable[[Mapping[str, Any]], Verdict],
    **examples: Mapping[str, Any],
) -> Claim:
    """One row of the registry, in reading order (kind before statement); example verdicts are keyword
    arguments, with ``_`` for a space (``not_checkable_here=...``)."""
    return Claim(
        id, article, section, statement, kind, evidence, judge_fn, {k.replace("_", " "): v for k, v in examples.items()}
    )


@entry("judge")
def judge(claim: Claim, facts: Mapping[str, Any]) -> Verdict:
    """Apply ``claim.judge`` to ``facts`` and check that the verdict is one of :data:`VERDICTS`.

    >>> from viewlab.course.claims import get
    >>> judge(get("A22"), {"shape": (2, 5)})[0], judge(get("A22"), {"shape": (1, 5)})[0]
    ('true', 'false')
    """
    if not isinstance(claim, Claim):
        raise type_error("claim", "a Claim, e.g. viewlab.course.claims.get('A22')", claim)
    if not isinstance(facts, Mapping):
        raise type_error("facts", "a dict of facts, e.g. claim.evidence()", facts)
    try:
        verdict, why = claim.judge(facts)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as err:
        text = f"claim {claim.id}'s judge cannot read these facts ({type(err).__name__}: {err})"
        raise problem(
            ValueError, f"{text}; pass what claim.evidence() returns, or it with some facts changed."
        ) from err
    if verdict not in VERDICTS:
        raise problem(ValueError, f"claim {claim.id} gave verdict {verdict!r}, not one of {VERDICTS}.")
    if not isinstance(why, str) or not why.strip():
        raise problem(ValueError, f"claim {claim.id} gave no reason for {verdict!r}.")
    return verdict, why
