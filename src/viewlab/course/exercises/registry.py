"""Exercises as data: :class:`Exercise`, the registry, and the bank that fills it.

Every module of :mod:`viewlab.course.exercises.bank` (``nbNN_<topic>.py``, one per notebook) calls
:func:`register` at import time; the bank is imported the first time an exercise is looked up, so a new
file is all it takes to add exercises. See :mod:`viewlab.course.exercises` for the format.

>>> get("05-can-expand").title
'Predict whether expand works'
>>> "05-can-expand" in exercise_ids("05")
True
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from viewlab._checks import entry, problem, require_str, type_error

from .engine import MEMORY
from .rules import Rules

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["Exercise", "register", "get", "exercise_ids", "UnknownExercise", "whose_reference"]


@dataclass(frozen=True)
class Exercise:
    """One exercise, as data.

    Attributes:
        id: ``"NN-short-name"`` with NN the notebook number.
        title: a few words.
        statement: what to write, in full sentences (shapes included).
        signature: the stub's first line, e.g. ``"def f(x: torch.Tensor) -> torch.Tensor"``.
        reference: the reference solution (revealed only by ``solution()``).
        inputs: zero-argument callable returning a hypothesis strategy of argument tuples
            (a callable so hypothesis is imported only when a check runs).
        memory: ``"view"``, ``"copy"`` or None, as in ``check()``.
        hints: from gentle to explicit; the first is shown under a failure.
        wrong: plausible wrong answers with a substring their failure message must contain
            (tested in tests/course/test_exercises.py).
        examples: argument tuples always tried first.
        extra: additional rules for ``check()`` (name each with :func:`~.rules.named_rule`).
        rules: the stated rules, enforced by ``check()`` (:class:`~.rules.Rules`). ``memory``
            is the rule ``must_view`` / ``must_copy``; every rule needs a breaking answer in ``wrong``
            whose message text is ``rule `<label>```.
        answer: what ``solution()`` shows when the reference measures instead of reasoning (default:
            the reference); it must pass the check too.
        why: the two lines of reasoning ``solution()`` prints under the answer.
        raises: exception types the reference raises on the inputs the exercise refuses (shapes that do not
            fit): there the learner's function must raise one of them too.
    """

    id: str
    title: str
    statement: str
    signature: str
    reference: Callable[..., Any]
    inputs: Callable[[], SearchStrategy[Any]]
    memory: str | None = None
    hints: tuple[str, ...] = ()
    wrong: tuple[tuple[Callable[..., Any], str], ...] = ()
    examples: tuple[tuple[Any, ...], ...] = ()
    extra: tuple[Callable[[tuple[Any, ...], Any], str | None], ...] = field(default=())
    rules: Rules = field(default_factory=Rules)
    answer: Callable[..., Any] | None = None
    why: tuple[str, ...] = ()
    raises: tuple[type[Exception], ...] = ()

    def rule_labels(self) -> list[str]:
        """Every rule this exercise states, as failure messages name it (``memory`` and named extras included).

        >>> get("02-pairwise-diff").rule_labels()
        ['forbid repeat', 'forbid tile', 'no_python_loops', 'max_new_bytes']
        """
        labels = self.rules.labels()
        labels += {"view": ["must_view"], "copy": ["must_copy"]}.get(self.memory or "", [])
        labels += [r.rule for r in self.extra if getattr(r, "rule", None)]
        return list(dict.fromkeys(labels))

    @entry("Exercise")
    def __post_init__(self) -> None:
        _require_fields(self)
        if not self.id or not self.id[:2].isdigit() or self.id[2:3] != "-":
            raise problem(ValueError, f"id {self.id!r} must look like 'NN-short-name' (NN = notebook number).")
        if self.memory not in MEMORY:
            raise problem(ValueError, f"{self.id}: memory must be None, 'view' or 'copy', got {self.memory!r}.")
        if not self.statement.strip() or not self.signature.startswith("def "):
            raise problem(ValueError, f"{self.id}: needs a statement and a signature starting with 'def '.")
        if not isinstance(self.rules, Rules):
            raise problem(TypeError, f"{self.id}: `rules` must be a Rules(...), got {type(self.rules).__name__}.")
        if (self.rules.must_view and self.memory == "copy") or (self.rules.must_copy and self.memory == "view"):
            raise problem(ValueError, f"{self.id}: memory={self.memory!r} contradicts its rules.")
        if self.rules.must_view or self.rules.must_copy:
            object.__setattr__(self, "memory", "view" if self.rules.must_view else "copy")


def _require_texts(value: Any, arg: str, example: str) -> None:
    """A tuple of non-empty str: a bare str would be read one character at a time (one hint per letter)."""
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v.strip() for v in value):
        raise type_error(arg, f"a tuple of non-empty str, e.g. {arg}=({example!r},)", value)


def _require_fields(ex: Exercise) -> None:
    """Every field of ``ex`` has the type :class:`Exercise` documents, so a slip fails here, not when shown.

    >>> _require_fields(Exercise(**{**get("05-can-expand").__dict__, "why": "because"}))
    Traceback (most recent call last):
    ...
    TypeError: Exercise(): `why` must be a tuple of non-empty str, e.g. why=('one line of reasoning',); got str 'because'.
    """
    for name in ("id", "title", "statement", "signature"):
        require_str(getattr(ex, name), name, nonempty=True)
    for name in ("reference", "inputs"):
        if not callable(getattr(ex, name)):
            raise type_error(
                name, "a function" + (" returning a hypothesis strategy" if name == "inputs" else ""), getattr(ex, name)
            )
    if ex.answer is not None and not callable(ex.answer):
        raise type_error("answer", "None or a function (what solution() shows)", ex.answer)
    require_str(ex.memory, "memory", allow_none=True)
    _require_texts(ex.hints, "hints", "a question that starts the learner off")
    _require_texts(ex.why, "why", "one line of reasoning")
    pair = lambda w: isinstance(w, tuple) and len(w) == 2 and callable(w[0]) and isinstance(w[1], str)  # noqa: E731
    if not isinstance(ex.wrong, tuple) or not all(pair(w) for w in ex.wrong):
        raise type_error("wrong", "a tuple of (wrong_fn, text its failure message contains) pairs", ex.wrong)
    if not isinstance(ex.examples, tuple) or not all(isinstance(a, tuple) for a in ex.examples):
        raise type_error("examples", "a tuple of argument tuples, e.g. examples=((torch.ones(2),),)", ex.examples)
    if not isinstance(ex.raises, tuple) or not all(isinstance(t, type) and issubclass(t, Exception) for t in ex.raises):
        raise type_error("raises", "a tuple of exception types, e.g. raises=(RuntimeError, ValueError)", ex.raises)
    if not isinstance(ex.extra, tuple) or not all(callable(r) for r in ex.extra):
        raise type_error("extra", "a tuple of rules made with named_rule(label, rule)", ex.extra)
    stub = ex.signature[4:].split("(")[0]
    if not ex.signature.startswith("def ") or not stub.isidentifier() or "(" not in ex.signature or not _parses(ex):
        raise problem(
            ValueError,
            f"`signature` must look like 'def name(arg, ...) -> type', the first line of a def that parses "
            f"(without the colon); got {ex.signature!r}.",
        )


def _parses(ex: Exercise) -> bool:
    """The signature is one ``def`` line: with ``: pass`` after it, it parses as one function."""
    try:
        body = ast.parse(ex.signature + ": pass").body
    except SyntaxError:
        return False
    return len(body) == 1 and isinstance(body[0], ast.FunctionDef)


_REGISTRY: dict[str, Exercise] = {}
_LOADED = False  # the bank is imported, whole
_LOADING = False  # being imported by the thread holding _LOCK (a bank module that looks an exercise up)
_LOCK = threading.RLock()  # the bank is loaded, and exercises registered, by one thread at a time


@entry("register")
def register(exercise: Exercise) -> Exercise:
    """Add ``exercise`` to the registry (its id must be new); returns it.

    >>> register(get("05-can-expand")) is get("05-can-expand")   # re-registering the same object is harmless
    True
    """
    if not isinstance(exercise, Exercise):
        raise problem(TypeError, f"expects an Exercise, got {type(exercise).__name__}.")
    _require_fields(exercise)  # checked when built too; again here, since copy.copy() skips __init__
    with _LOCK:
        old = _REGISTRY.get(exercise.id)
        if old is not None and old is not exercise:
            raise problem(
                ValueError, f"an exercise with id {exercise.id!r} is already registered ({old.title!r}); pick a new id."
            )
        _REGISTRY[exercise.id] = exercise
    return exercise


def _load_bank() -> None:
    """Import every module of the bank once (each registers its notebook's exercises), under a lock: another
    thread looking an exercise up meanwhile waits for the whole bank, never sees part of it."""
    global _LOADED, _LOADING
    if _LOADED:
        return
    with _LOCK:
        if _LOADED or _LOADING:
            return
        _LOADING = True
        try:
            from . import bank

            for info in sorted(pkgutil.iter_modules(bank.__path__), key=lambda m: m.name):
                importlib.import_module(f"{bank.__name__}.{info.name}")
            _LOADED = True
        finally:
            _LOADING = False


@entry("exercise_ids")
def exercise_ids(prefix: str = "") -> list[str]:
    """Ids of all registered exercises (optionally only those starting with ``prefix``, e.g. "05").

    >>> exercise_ids("01")[:1]
    ['01-channels-first']
    """
    require_str(prefix, "prefix")
    _load_bank()
    return sorted(i for i in _REGISTRY if i.startswith(prefix))


def whose_reference(fn: Any) -> Exercise | None:
    """The exercise whose reference (or shown answer) ``fn`` is, the same function or one made from the same
    code, or None: an answer must be the learner's own code, not the bank's.

    >>> whose_reference(get("03-outer-sum").reference).id, whose_reference(lambda a, b: a + b)
    ('03-outer-sum', None)
    """
    _load_bank()
    code = getattr(fn, "__code__", None)
    for ex in list(_REGISTRY.values()):
        for ref in (ex.reference, ex.answer):
            if ref is None:
                continue
            if fn is ref or (code is not None and code is getattr(ref, "__code__", None)):
                return ex
    return None


class UnknownExercise(KeyError, ValueError):
    """No exercise has this id. A ``KeyError`` (a failed lookup) and a ``ValueError`` (a wrong argument value)."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


@entry("get")
def get(exercise_id: str) -> Exercise:
    """The :class:`Exercise` with this id (a clear error lists the known ids otherwise).

    >>> get("05-no-such-thing")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    viewlab.course.exercises.registry.UnknownExercise: get(): no exercise '05-no-such-thing'. Known ids: ...
    """
    require_str(exercise_id, "exercise_id")
    _load_bank()
    try:
        return _REGISTRY[exercise_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise problem(UnknownExercise, f"no exercise {exercise_id!r}. Known ids: {known}.") from None
