"""What the learner reads: hints that leave the work, statements that state every rule, a solution that pastes.

A hint may name an op or a shape, never the model answer's code: the longest run of tokens a hint shares with
the answer is at most :data:`MAX_SHARED_RUN`. Hint 1 is a question; hint 2 is a partial step that still asks
something, and any code it holds, made into an answer, fails the check. Every rule an exercise enforces is
named in its statement, and the statement claims no loop, byte or prediction rule that is not enforced.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize

import pytest
import torch

from viewlab.course import exercises as ex
from viewlab.course.exercises import PASSED, solution_source

IDS = ex.exercise_ids()
BY_ID = [pytest.param(i, marks=getattr(pytest.mark, f"nb{i[:2]}"), id=i) for i in IDS]
MAX_SHARED_RUN = 5  # tokens: `reshape(-1)` (5) may be named; a run of 6 is a piece of the answer's code
_WORD = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?|\*\*|//|<=|>=|==|!=|[^\sA-Za-z_\d]")


def _answer_body(e: ex.Exercise) -> str:
    """The printed solution below its ``def`` line: the code a hint must not give away."""
    lines = solution_source(e).splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("def "))
    return "\n".join(lines[start + 1 :])


def _code_tokens(src: str) -> list[str]:
    kinds = (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING)
    return [t.string for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type in kinds]


def _longest_shared_run(a: list[str], b: list[str]) -> int:
    """The longest run of consecutive tokens that ``a`` and ``b`` share (dynamic programming, exact)."""
    best, prev = 0, [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def _code_spans(text: str) -> list[str]:
    """Every piece of ``text`` that parses as a Python expression with a call, an index or an attribute in it,
    from each word to each word end: the code a hint holds, however it is written. Prose around code may parse
    too (``x[1::2] is the``), so each shorter piece is kept as well; a sentence break (``. W``) ends a piece."""
    spans: list[str] = []
    word = lambda c: c.isalnum() or c == "_"  # noqa: E731
    for i, ch in enumerate(text):
        if not (ch.isalpha() or ch == "_") or (i and (word(text[i - 1]) or text[i - 1] == ".")):
            continue
        for end in range(i + 1, min(len(text), i + 90) + 1):
            piece = text[i:end]
            if (end < len(text) and word(text[end]) and word(text[end - 1])) or re.search(r"\.\s", piece):
                continue
            try:
                node = ast.parse(piece.strip(), mode="eval").body
            except SyntaxError:
                continue
            prose = isinstance(node, ast.Compare) and any(isinstance(o, (ast.Is, ast.In)) for o in node.ops)
            acts = any(isinstance(n, (ast.Call, ast.Subscript, ast.Attribute)) for n in ast.walk(node))
            if acts and not prose and not isinstance(node, ast.Tuple):  # `x[i],` is `x[i]` and a comma
                spans.append(piece.strip())
    return list(dict.fromkeys(spans))


def _as_answer(e: ex.Exercise, expression: str):
    """``expression`` as the body of a function with the stub's parameters, or None when it does not compile."""
    params = [a.arg for a in ast.parse(e.signature + ": pass").body[0].args.args]
    try:
        return eval(f"lambda {', '.join(params)}: {expression}", {"torch": torch, "math": math})
    except SyntaxError:
        return None


def test_the_code_finder_finds_an_answer_written_in_a_hint():
    # positive control: were the answer's return expression written into a hint, it is found and it passes
    e = ex.get("01-odd-positions")
    spans = _code_spans("A slice does it: x[1::2] is the answer. Which step?")
    assert "x[1::2]" in spans
    assert ex.check_exercise(e.id, _as_answer(e, "x[1::2]"), max_examples=30).status == PASSED
    assert _longest_shared_run(_code_tokens("x[1::2]"), _code_tokens(_answer_body(e))) > MAX_SHARED_RUN


@pytest.mark.parametrize("exercise_id", BY_ID)
def test_no_hint_holds_the_model_answers_code(exercise_id):
    e = ex.get(exercise_id)
    answer = _code_tokens(_answer_body(e))
    for n, h in enumerate(e.hints, 1):
        run = _longest_shared_run(_WORD.findall(h), answer)
        assert run <= MAX_SHARED_RUN, f"{exercise_id}: hint {n} shares {run} tokens in a row with the answer: {h!r}"


@pytest.mark.parametrize("exercise_id", BY_ID)
def test_hint_one_asks_and_hint_two_leaves_a_decision(exercise_id):
    first, second = ex.get(exercise_id).hints
    assert first.rstrip().endswith("?"), f"{exercise_id}: hint 1 must be a question"
    assert "?" in second, f"{exercise_id}: hint 2 must leave the learner a question to settle"


@pytest.mark.parametrize("exercise_id", BY_ID)
def test_code_in_hint_two_is_not_an_answer(exercise_id):
    e = ex.get(exercise_id)
    for span in _code_spans(e.hints[1]):
        fn = _as_answer(e, span)
        if fn is not None:
            result = ex.check_exercise(exercise_id, fn, max_examples=30)
            assert result.status != PASSED, f"{exercise_id}: hint 2's code {span!r} passes as an answer"


@pytest.mark.parametrize("exercise_id", BY_ID)
def test_pasting_the_printed_solution_over_the_stub_passes(exercise_id, capsys):
    e = ex.get(exercise_id)
    stub = e.signature[4:].split("(")[0]
    ex.solution(exercise_id)
    printed = capsys.readouterr().out
    # no private helper of the bank's (def _name); a class's own methods (def __init__) are the answer's code
    assert f"def {stub}(" in printed and not re.search(r"def _(?!_)", printed), printed
    namespace = {"torch": torch}  # what every notebook has imported
    exec(compile(solution_source(e), "<pasted cell>", "exec"), namespace)
    result = ex.check_exercise(exercise_id, namespace[stub])
    assert result.status == PASSED, str(result)
    assert f"`{stub}`" in str(result)


# Each rule label, and the words a statement uses to name it.
RULE_WORDS = {
    "forbid repeat": r"\brepeat",
    "forbid tile": r"\btile",
    "forbid copy": r"\bclone\b",
    "forbid tril": r"\btril\b",
    "forbid expand": r"\bexpand",
    "forbid autograd": r"\bautograd\b",
    "forbid bincount": r"\bbincount\b",
    "forbid sdpa": r"scaled_dot_product_attention",
    "forbid unfold": r"\bunfold\b",
    "forbid gather": r"\bgather",
    "forbid profiler": r"\bprofiler\b",
    "no_python_loops": r"\bno Python loops?\b",
    "must_view": r"\bview of\b",
    "must_copy": r"\bshares no memory\b|\bnever shares memory\b",
    "max_new_bytes": r"\bnew bytes may peak\b|\bnew tensors peak\b",
    "predict_without_running": r"\bPredict\b",
    "view_when_possible": r"\bcopy only when it must\b",
    "writable": r"\bmemory of its own\b",
}


@pytest.mark.parametrize("exercise_id", BY_ID)
def test_the_statement_names_every_rule_it_enforces(exercise_id):
    e = ex.get(exercise_id)
    for label in e.rule_labels():
        assert label in RULE_WORDS, f"{exercise_id}: rule {label!r} has no words in RULE_WORDS"
        assert re.search(RULE_WORDS[label], e.statement, re.IGNORECASE), (
            f"{exercise_id}: the statement never names rule {label!r} ({RULE_WORDS[label]})"
        )


@pytest.mark.parametrize("exercise_id", BY_ID)
def test_the_statement_claims_no_rule_it_does_not_enforce(exercise_id):
    e = ex.get(exercise_id)
    labels = set(e.rule_labels())
    for label in ("no_python_loops", "must_view", "must_copy", "max_new_bytes", "predict_without_running"):
        if re.search(RULE_WORDS[label], e.statement, re.IGNORECASE):
            assert label in labels, f"{exercise_id}: the statement states {label!r}, which is not enforced"
    for claim in (r"zero new bytes", r"allocate nothing", r"no new memory"):  # measured by no rule here
        assert not re.search(claim, e.statement, re.IGNORECASE) or "max_new_bytes" in labels, (exercise_id, claim)
