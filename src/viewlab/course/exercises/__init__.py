"""Auto-checked exercises: run a learner's function and a reference on many generated inputs.

Quick use in a notebook::

    from viewlab.course import exercises as ex
    ex.show("05-batch-view")          # statement, signature, how to check
    def my_fn(x): ...                 # an unfinished stub is fine: it reports "not solved yet"
    ex.check_exercise("05-batch-view", my_fn)
    ex.hint("05-batch-view", 2)       # more help, one hint at a time
    ex.solution("05-batch-view")      # opt-in: prints the reference solution

and, for a prediction written down before the cell that measures, ``check_guess(guess, actual, why)``.

The package, one job per module: :mod:`.engine` (:func:`check`), :mod:`.result` (:class:`CheckResult`),
:mod:`.compare` (copies, descriptions, the comparison), :mod:`.strategies` (the inputs: :func:`tensors`,
:func:`shapes`, :data:`LAYOUTS`; the only module that imports hypothesis), :mod:`.rules` (:class:`Rules`,
:func:`named_rule`), :mod:`.recorder` (the modes that record a run, as plain data), :mod:`.source` (the
answer's source, read with ``ast``), :mod:`.watch` (one watched call), :mod:`.messages` (the rules judged),
:mod:`.registry` (:class:`Exercise`, :func:`register`, :func:`get`, :func:`exercise_ids`),
:mod:`.picture` (the failure figure), :mod:`.programs` (small generated functions as plain data, the
``fn`` of exercise 08) and :mod:`.bank` (the exercises of each notebook).

Adding exercises for your notebook (authors of other notebooks)
-----------------------------------------------------------------
Exercises are data. Create ``src/viewlab/course/exercises/bank/nbNN_<topic>.py`` (one module per notebook;
every module in that package is found automatically) and call :func:`register` at import time::

    from viewlab.course.exercises import Exercise, register, tensors
    from hypothesis import strategies as st

    def _ref(x):                       # the reference solution (shown only by solution())
        return x.t()

    register(Exercise(
        id="02-my-transpose",          # "NN-" prefix = the notebook number
        title="Transpose without copying",
        statement="Return the transpose of the 2-D tensor x as a view (no copy).",
        signature="def transpose_view(x: torch.Tensor) -> torch.Tensor",
        reference=_ref,
        inputs=lambda: st.tuples(tensors(dims=(2, 2))),   # strategy of argument tuples
        memory="view",                 # or "copy" (must not share memory) or None (don't care)
        hints=("Which op swaps two dims and keeps the storage?", "Two ops do it for a 2-D x: which, and why no copy?"),
        wrong=((lambda x: x.t().contiguous(), "shares no memory"),),  # plausible wrong answers
    ))

``tests/course/test_exercises.py`` then proves, for every registered exercise, that the reference passes
and that each ``wrong`` answer fails with a message containing the given text; ``tests/course/test_hints.py``
that hint 1 is a question, hint 2 still asks something, no hint holds a run of the answer's code, the
statement names every rule, and the printed solution, pasted, passes. In the notebook,
end with a stub cell per exercise: ``def transpose_view(x): raise NotImplementedError`` followed
by ``ex.check_exercise("02-my-transpose", transpose_view)`` -- it prints "not solved yet" and
passes strict nbval until the learner fills it in.

>>> check_exercise("05-flatten-any", lambda x: x.flatten()).passed
True
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from typing import Any

import torch

from viewlab._checks import entry, problem, require_str, type_error
from viewlab.course.grade import record as _record

from .engine import (
    ATOL,
    MAX_EXAMPLES,
    MIN_EXERCISE_EXAMPLES,
    RTOL,
    build_check,
    check,
    require_learner_fn,
    require_max_examples,
)
from .registry import Exercise, UnknownExercise, exercise_ids, get, register, whose_reference
from .result import FAILED, NOT_SOLVED, PASSED, CheckResult
from .rules import Rules, named_rule
from .strategies import LAYOUTS, MAX_DIMS, MAX_ELEMENTS, shapes, tensors

__all__ = [
    "Exercise",
    "CheckResult",
    "Rules",
    "register",
    "get",
    "exercise_ids",
    "show",
    "hint",
    "solution",
    "solution_source",
    "check",
    "check_exercise",
    "check_guess",
    "named_rule",
    "tensors",
    "shapes",
    "LAYOUTS",
    "MAX_DIMS",
    "MAX_ELEMENTS",
    "MAX_EXAMPLES",
    "UnknownExercise",
    "PASSED",
    "FAILED",
    "NOT_SOLVED",
]


@entry("show")
def show(exercise_id: str) -> None:
    """Print the statement, the stub to start from and how to check it.

    >>> show("05-batch-view")  # doctest: +ELLIPSIS
    Exercise 05-batch-view: ...
    """
    ex = get(exercise_id)
    fn = ex.signature[4:].split("(")[0]
    memory = {
        "view": (
            "Return a view: the result must share the input's memory, and your function may allocate nothing, "
            "not even a temporary (measured)."
        ),
        "copy": "Return an independent copy (sharing no memory with the input).",
    }.get(ex.memory or "", "")
    print(f"Exercise {ex.id}: {ex.title}")
    print(textwrap.fill(ex.statement, 100))
    sentences = ex.rules.sentences()
    if memory and memory not in sentences:
        sentences.append(memory)
    for sentence in sentences:
        print(textwrap.fill(f"Rule: {sentence}", 100, subsequent_indent="  "))
    print()
    print(f"{ex.signature}:\n    raise NotImplementedError  # your code here")
    print(f"\nCheck it with: check_exercise({ex.id!r}, {fn})   ({len(ex.hints)} hints: hint({ex.id!r}, 1))")


@entry("hint")
def hint(exercise_id: str, n: int = 1) -> None:
    """Print hint number ``n`` (1-based) of an exercise.

    >>> hint("05-flatten-any", 1)
    Hint 1/2: x.view(-1) needs strides compatible with the new shape: does a transposed tensor have them?
    """
    ex = get(exercise_id)
    if isinstance(n, bool) or not isinstance(n, int):
        raise type_error("n", "an int (the hint number, from 1)", n)
    if not ex.hints:
        print(f"{ex.id} has no hints.")
        return
    if not 1 <= n <= len(ex.hints):
        raise problem(ValueError, f"{ex.id} has hints 1..{len(ex.hints)}; you asked for hint {n!r}.")
    print(f"Hint {n}/{len(ex.hints)}: {ex.hints[n - 1]}")


@entry("solution")
def solution(exercise_id: str) -> None:
    """Print the solution's source and two lines of why (opt-in: try the hints first).

    The function is printed under the stub's own name, with the imports it needs, so that pasting it over
    the stub and running the check cell passes.

    >>> solution("05-batch-view")
    def batch_view(sample: torch.Tensor, n: int) -> torch.Tensor:
        return sample.unsqueeze(0).expand(n, *sample.shape)
    # Why: expand gives the new dim stride 0, so all n entries read the same storage: a view, 0 bytes.
    # Why: repeat writes n copies into new memory: right values, n times the bytes.
    """
    ex = get(exercise_id)
    print(solution_source(ex))
    for line in ex.why:
        print(textwrap.fill(f"# Why: {line}", 100, subsequent_indent="#   "))


@entry("solution_source")
def solution_source(ex: Exercise | str) -> str:
    """The code :func:`solution` prints: the answer as a ``def`` with the stub's name, after its imports
    (``ex``: the exercise or its id).

    >>> print(solution_source(get("06-repeat-bytes")).splitlines()[0])
    import math
    """
    import re

    if isinstance(ex, str):
        ex = get(ex)
    elif not isinstance(ex, Exercise):
        raise type_error("ex", "an exercise id or an Exercise", ex, "e.g. solution_source('05-batch-view').")
    shown = ex.answer or ex.reference
    stub = ex.signature[4:].split("(")[0]
    try:
        src = textwrap.dedent(inspect.getsource(shown))
    except (OSError, TypeError):
        return f"# source not available for {shown!r}"
    name = getattr(shown, "__name__", "")
    if name == "<lambda>":
        body = _lambda_body(src)
        src = f"{ex.signature}:\n    return {body}" if body is not None else src  # the def the learner writes
    elif name.isidentifier():  # the reference's private name (_masked_mean) becomes the stub's (masked_token_mean)
        src = re.sub(rf"\b{re.escape(name)}\b", stub, src)
    found = {n: getattr(shown, "__globals__", {}).get(n) for n in _global_names(getattr(shown, "__code__", None))}
    imports = [
        f"import {m.__name__}" + ("" if m.__name__ == n else f" as {n}")
        for n, m in found.items()
        if inspect.ismodule(m)
    ]
    return "\n".join([*imports, *([""] if imports else []), src.rstrip()])


def _global_names(code: Any) -> list[str]:
    """The global names ``code`` reads, in its nested code (a generator expression's) too: the modules to import."""
    if code is None:
        return []
    nested = [n for c in code.co_consts if inspect.iscode(c) for n in _global_names(c)]
    return list(dict.fromkeys([*code.co_names, *nested]))


def _lambda_body(src: str) -> str | None:
    """The body of the first lambda in ``src`` (a source line such as ``reference=lambda x: x.t(),``).

    >>> _lambda_body("    reference=lambda x: x[1::2],")
    'x[1::2]'
    """
    import ast

    start = src.find("lambda")
    text = src[start:] if start >= 0 else ""
    for end in range(len(text), 0, -1):  # trim trailing ",", ")" ... until the lambda parses alone
        try:
            node = ast.parse(text[:end].strip(), mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Lambda):
            return ast.unparse(node.body)
    return None


@entry("check_exercise")
def check_exercise(exercise_id: str, learner_fn: Callable[..., Any], max_examples: int = 60) -> CheckResult:
    """Check ``learner_fn`` against exercise ``exercise_id`` (see :func:`check` for what is compared).

    >>> print(check_exercise("05-flatten-any", lambda x: x.view(-1)).reason)
    your function raised RuntimeError: view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.
    """
    ex = get(exercise_id)
    require_learner_fn(learner_fn)
    require_max_examples(max_examples, MIN_EXERCISE_EXAMPLES)
    title = f"{ex.id} ({ex.title})"
    owner = whose_reference(inspect.unwrap(learner_fn))
    if owner is not None:  # the bank's own code passed in: it would pass without a line of the learner's
        which = "this exercise" if owner.id == ex.id else f"exercise {owner.id}"
        why = (
            f"that function is the reference solution of {which}, from the exercise bank, not your code: write "
            f"your own `{ex.signature[4:].split('(')[0]}` and check it"
        )
        _record.note(ex.id, learner_fn, FAILED)
        return CheckResult(FAILED, title, f"{title}: FAILED -- {why}.", reason=why, hint_text=_first_hint(ex))
    result = _check_answer(ex, learner_fn, max_examples)
    _record.note(ex.id, learner_fn, result.status)  # for progress() and submission()
    return result


def _first_hint(ex: Exercise) -> str | None:
    return f"{ex.hints[0]}  (more: hint({ex.id!r}, 2))" if len(ex.hints) > 1 else (ex.hints[0] if ex.hints else None)


def _check_answer(ex: Exercise, fn: Callable[..., Any], max_examples: int = 60) -> CheckResult:
    """The check of :func:`check_exercise`, without its first refusal (the bank's own functions) and without
    noting the result: how the course's tests check a reference itself.

    >>> _check_answer(get("05-flatten-any"), get("05-flatten-any").reference).passed
    True
    """
    title = f"{ex.id} ({ex.title})"
    mismatch = _signature_mismatch(ex, fn)
    if mismatch:  # the check would only report a TypeError and a hint about the answer: say what is called
        return CheckResult(FAILED, title, f"{title}: FAILED -- {mismatch}.", reason=mismatch)
    return build_check(
        fn,
        ex.reference,
        ex.inputs(),
        memory=ex.memory,
        examples=ex.examples,
        max_examples=max_examples,
        rtol=RTOL,
        atol=ATOL,
        hint=_first_hint(ex),
        title=title,
        extra=ex.extra,
        rules=ex.rules,
        raises=ex.raises,
    ).run()


def _signature_mismatch(ex: Exercise, learner_fn: Callable[..., Any]) -> str | None:
    """Why ``learner_fn`` cannot be called as the exercise calls it (one argument per stub parameter), or None.

    >>> _signature_mismatch(get("05-can-expand"), lambda a: True)[:52]
    'your function takes (a) but the check calls it as ca'
    """
    import ast

    params = [a.arg for a in ast.parse(ex.signature + ": pass").body[0].args.args]
    try:
        sig = inspect.signature(learner_fn)
    except (TypeError, ValueError):  # a builtin without a signature: let the check find out
        return None
    try:
        sig.bind(*params)
    except TypeError:
        return (
            f"your function takes {str(sig).split(' ->')[0]} but the check calls it as "
            f"{ex.signature[4:].split('(')[0]}({', '.join(params)}): write it as `{ex.signature}`"
        )
    return None


# ----- predict, then run -----------------------------------------------------------------------------------
def _plain_guess(value: Any) -> bool:
    if isinstance(value, (torch.Size, tuple, list)):
        return all(_plain_guess(v) for v in value)
    return isinstance(value, (bool, int, float, str))


def _as_tuples(value: Any) -> Any:
    """``value`` with every list and ``torch.Size`` inside it turned into a tuple (how a guess is shown)."""
    if isinstance(value, (torch.Size, tuple, list)):
        return tuple(_as_tuples(v) for v in value)
    return value


def _same_guess(mine: Any, shown: Any) -> bool:
    """Exact, at every depth: sequences item by item, a bool only equals the same bool (True is not 1 here: a
    yes/no question wants a yes/no answer), a str the same words in any case and spacing, numbers by value
    (96 == 96.0).

    >>> _same_guess(((1, 2),), ((1, 2),)), _same_guess((True,), (1,)), _same_guess(((1, 2),), (1, 2))
    (True, False, False)
    >>> _same_guess("Not  checkable here", "not checkable here"), _same_guess("True", True)
    (True, False)
    """
    if isinstance(mine, tuple) or isinstance(shown, tuple):
        return (
            isinstance(mine, tuple)
            and isinstance(shown, tuple)
            and len(mine) == len(shown)
            and all(_same_guess(a, b) for a, b in zip(mine, shown))
        )
    if isinstance(mine, str) and isinstance(shown, str):  # words: "True" and "true" are one verdict
        return mine.casefold().split() == shown.casefold().split()
    if isinstance(mine, (bool, str)) or isinstance(shown, (bool, str)):
        return type(mine) is type(shown) and mine == shown
    return bool(mine == shown)


@entry("check_guess")
def check_guess(guess: Any, actual: Any, why: str) -> str:
    """Judge a prediction written down *before* the cell that measures ran; print the verdict and why.

    ``guess`` left as ``None`` or ``...`` prints "make your guess first" and reveals nothing. Otherwise
    the verdict is computed by comparing ``guess`` with ``actual`` (tuples and ``torch.Size`` compare by
    value at every depth, so ``((1, 2),)`` equals ``[[1, 2]]``; numbers exactly, and a bool only equals the same
    bool: ``(True,)`` is not ``(1,)``). Returns ``"right"``, ``"wrong"`` or ``"no guess"``.

    >>> check_guess(..., 96, "repeat allocates numel * itemsize")
    make your guess first: replace None in the cell above with your guess, run it, then run this one.
    'no guess'
    >>> check_guess(96, 96, "4 x 6 float32 elements")
    right: 96. 4 x 6 float32 elements
    'right'
    >>> check_guess((3, 4), torch.Size([4, 3]), "transposed")
    wrong: you guessed (3, 4); it is (4, 3). transposed
    'wrong'
    """
    require_str(why, "why")
    for name, value in (("guess", guess), ("actual", actual)):
        if not _plain_guess(value) and not (name == "guess" and (value is None or value is Ellipsis)):
            raise type_error(
                name,
                "a plain value to compare: an int, float, bool, str, or a tuple "
                "of those (a shape), e.g. guess = 96 or guess = (3, 4)",
                value,
            )
    if guess is None or guess is Ellipsis:
        print("make your guess first: replace None in the cell above with your guess, run it, then run this one.")
        return "no guess"
    shown, mine = _as_tuples(actual), _as_tuples(guess)
    same = _same_guess(mine, shown)
    verdict = "right" if same else "wrong"
    if same:
        print(f"right: {shown!r}. {why}")
    else:
        quoted = isinstance(shown, bool) and isinstance(mine, str)  # "True" for True: the answer, in quotes
        note = " (write True or False without quotes)" if quoted else ""
        print(f"wrong: you guessed {mine!r}; it is {shown!r}{note}. {why}")
    return verdict
