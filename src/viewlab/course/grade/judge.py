"""The grader's side of grading: inputs, reference values and the verdict, all in the grader's own process.

:class:`Plan` holds one exercise's inputs (its ``examples`` first, then draws of its strategy, deterministic: the
seed is hypothesis's derandomized one, the same on every run), the reference's value on each (computed here,
never sent anywhere) and the plain description of its rules that the answer's process needs to record what it
does. :func:`judge` takes what that process sent back (:mod:`.runner`) and gives the verdict in the order and
with the words of the in-kernel check (:func:`viewlab.course.exercises.engine.run_once`): a call that does not fit,
a stub, an error (a forbidden family seen first is named first), the rules of how (forbidden work, loops, a
prediction that ran, bytes), the values (:func:`~viewlab.course.exercises.compare.compare`), ``must_view`` /
``must_copy``, zero new bytes for a view, torch does the work, the inputs unchanged, the named extra rules, and
last the loop probe on two sizes.

The result is rebuilt from plain data, and checked again here: every tensor must be exactly ``torch.Tensor``
(``torch.load(weights_only=True)`` builds nothing else, and ``type(x) is torch.Tensor`` is asked again), and its
shape, dtype, strides and offset must be those the answer's process reported.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch

from viewlab.course.exercises.compare import compare, describe, fresh, tensor_parts
from viewlab.course.exercises.engine import ATOL, FAILED, NOT_SOLVED, PASSED, RTOL
from viewlab.course.exercises.messages import Refused, refusal_problem
from viewlab.course.exercises.programs import plain
from viewlab.course.exercises.registry import Exercise
from viewlab.course.exercises.strategies import run_examples

from . import seam

__all__ = ["Plan", "Verdict", "plan_for", "judge", "same_as_solution", "DEFAULT_INPUTS", "decode"]

DEFAULT_INPUTS = 40  #: draws per exercise, after its explicit examples
_LOOP_SIZES = (3, 6)


@dataclass
class Plan:
    """One exercise, ready to grade: inputs, reference values, the rules as plain data."""

    ex: Exercise
    inputs: list[tuple[Any, ...]]
    expected: list[Any]
    probe: list[tuple[Any, ...]] = field(default_factory=list)
    probe_expected: Any = None

    @property
    def title(self) -> str:
        return f"{self.ex.id} ({self.ex.title})"

    @property
    def name(self) -> str:
        return self.ex.signature[4:].split("(")[0]

    def spec(self) -> dict[str, Any]:
        """What the answer's process needs to watch the answer (no callable, no value)."""
        r = self.ex.rules
        return {
            "forbid": list(r.forbid),
            "no_python_loops": r.no_python_loops is not None,
            "must_view": r.must_view,
            "must_copy": r.must_copy,
            "max_new_bytes": r.max_new_bytes is not None,
            "predict_without_running": r.predict_without_running,
            "allow_viewlab": list(r.allow_viewlab),
            "memory": self.ex.memory,
            "refuses": bool(self.ex.raises),  # some inputs must raise: a raise does not end the run (which: not said)
        }

    def job(self) -> dict[str, Any]:
        """The file the answer's process loads: the exercise's inputs (fresh copies) and the spec."""
        return {
            "exercise": self.ex.id,
            "name": self.name,
            "spec": self.spec(),
            "inputs": [plain(fresh(a)) for a in self.inputs],  # a generated fn (exercise 08) as str and tuples
            "probe": [plain(fresh(a)) for a in self.probe],
        }


_PLANS: dict[tuple[str, int, int], Plan] = {}


def plan_for(ex: Exercise, n_inputs: int = DEFAULT_INPUTS) -> Plan:
    """The inputs of ``ex`` (examples, then ``n_inputs`` deterministic draws) and the reference's values.

    Made once per process and exercise (the draws are deterministic; nothing a grading does changes a plan)."""
    key = (ex.id, n_inputs, id(ex))
    if key not in _PLANS:
        _PLANS[key] = _plan(ex, n_inputs)
    return _PLANS[key]


def _plan(ex: Exercise, n_inputs: int) -> Plan:
    inputs = [tuple(a) if isinstance(a, tuple) else (a,) for a in ex.examples]

    def keep(args: Any) -> None:
        inputs.append(tuple(fresh(args)) if isinstance(args, tuple) else (fresh(args),))

    run_examples(ex.inputs(), keep, n_inputs)
    expected = [_expected(ex, a) for a in inputs]
    probe: list[tuple[Any, ...]] = []
    probe_expected = None
    if ex.rules.no_python_loops is not None:
        probe = [tuple(ex.rules.no_python_loops(n)) for n in _LOOP_SIZES]
        probe_expected = ex.reference(*fresh(probe[1]))
    return Plan(ex, inputs, expected, probe, probe_expected)


def _expected(ex: Exercise, args: tuple[Any, ...]) -> Any:
    """The reference's value on ``args``, or :class:`Refused` where it raises what the exercise refuses with."""
    try:
        return ex.reference(*fresh(args))
    except ex.raises as exc:
        return Refused(tuple(t.__name__ for t in ex.raises), str(exc).strip().split("\n")[0])


def _raised_name(record: dict[str, Any], allowed: tuple[str, ...]) -> str:
    """The allowed name that the error the answer's process reported is or derives from (its type's name, then
    its base classes' names as that process listed them), else the type's own name."""
    names = [record["error"], *[n for n in record.get("bases", []) if isinstance(n, str)]]
    return next((n for n in names if n in allowed), record["error"])


@dataclass
class Verdict:
    """The grade of one answer: ``status`` (passed / failed / not solved yet), the reason, the full message."""

    status: str
    reason: str
    message: str
    examples: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def decode(value: Any) -> Any:
    """A value as the answer returned it, from the plain data :func:`.runner.plain_result` made."""
    if value == "__ellipsis__" and isinstance(value, str):
        return Ellipsis
    if type(value) is tuple and len(value) == 2 and value[0] == "__size__":
        return torch.Size(value[1])
    if type(value) is tuple:
        return tuple(decode(v) for v in value)
    if type(value) is list:
        return [decode(v) for v in value]
    return value


def _recheck(value: Any, meta: list[dict[str, Any]]) -> str | None:
    """Verify again, from the data, what the answer's process said of the result."""
    parts = tensor_parts(value)
    if any(type(t) is not torch.Tensor for t in parts) or len(parts) != len(meta):
        return "the result sent back is not what the answer's process described (not plain tensors)"
    for t, m in zip(parts, meta):
        seen = [list(t.shape), str(t.dtype), list(t.stride()), int(t.storage_offset())]
        if seen != [m["shape"], m["dtype"], m["stride"], m["offset"]]:
            return "the result sent back is not what the answer's process described (shape, dtype or strides)"
        if m["requires_grad"] and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
    return None


def _foreign(ex: Exercise, watch: dict[str, Any]) -> str | None:
    """An operator outside aten and prims (a custom op) in an exercise with rules: its work is out of the rules'
    sight (what it runs inside is not recorded), so it breaks rule ``torch_only``, as numpy doing the work does."""
    if not ex.rules.labels():
        return None
    foreign = [op for op in watch["ops"] if not op.startswith(("aten.", "prims."))]
    if not foreign:
        return None
    return (
        f"breaks rule `torch_only`: your function ran the custom operator {foreign[0]}, whose insides the rules "
        "cannot see; instead, do it with torch operations on the tensors themselves"
    )


def _failure(plan: Plan, reason: str, args: tuple[Any, ...], expected: Any, got: Any, error: str | None,
             hinted: bool = True) -> str:  # fmt: skip
    """The text the in-kernel check prints for a failure (the learner's view)."""
    lines = [f"{plan.title}: FAILED -- {reason.rstrip('.')}.", "", "Failing input:"]
    lines += [f"  arg {i}: {describe(a)}" for i, a in enumerate(args)]
    lines.append(f"  expected: {describe(expected)}")
    lines.append(f"  got:      {'raised ' + error if error else describe(got)}")
    hint = plan.ex.hints[0] if plan.ex.hints else None
    if hint and hinted:
        lines += ["", f"Hint: {hint}"]
    return "\n".join(lines)


def _one(plan: Plan, i: int, record: dict[str, Any]) -> tuple[str, str, str] | None:
    """(status, reason, message) when input ``i`` fails, else None: :func:`engine.run_once`'s order."""
    ex, args, expected = plan.ex, plan.inputs[i], plan.expected[i]
    kind = record["kind"]
    watch = record.get("watch")
    if kind == "call":
        wanted = str(inspect.signature(ex.reference).replace(return_annotation=inspect.Signature.empty))
        n = record["n_args"]
        reason = (
            f"your function cannot be called as the check calls it: it takes {record['takes']}, the check passes "
            f"{n} argument{'s' if n != 1 else ''}, as in {wanted.replace(chr(39), '')}"
        )
        return FAILED, reason, _failure(plan, reason, args, expected, None, "nothing: it was not called", False)
    if kind == "stub":
        return NOT_SOLVED, "not solved yet", f"{plan.title}: not solved yet (the answer is still a stub)."
    if kind == "raised":
        error = f"{record['error']}: {record['message']}"
        reason = seam.forbidden(ex.rules, watch)
        if reason is None and isinstance(expected, Refused):
            reason = refusal_problem(expected, _raised_name(record, expected.allowed))
            if reason is None:
                return None  # refused as it must be
        reason = reason or f"your function raised {error}"
        return FAILED, reason, _failure(plan, reason, args, expected, None, error)
    if kind == "bad_result":
        return FAILED, record["why"], _failure(plan, record["why"], args, expected, None, record["why"])
    got = decode(record["value"])
    mine = record["inputs_after"]
    reason = _recheck(got, record["meta"])
    if reason is None and (got is None or got is Ellipsis) and not (expected is None or expected is Ellipsis):
        return NOT_SOLVED, "not solved yet", f"{plan.title}: not solved yet (the answer returns None or ...)."
    for p, q in zip(tensor_parts(args), tensor_parts(mine)):
        if p.requires_grad and not q.requires_grad and (q.is_floating_point() or q.is_complex()):
            q.requires_grad_(True)
    if reason is None and isinstance(expected, Refused):
        reason = seam.forbidden(ex.rules, watch) or refusal_problem(expected, None, got)
    if reason is None and watch is not None:  # Watch.before_compare, and no custom operator doing the work
        reason = _foreign(ex, watch) or seam.before(ex.rules, watch, mine)
    if reason is None:
        reason = compare(expected, got, "the result", RTOL, ATOL)
    if reason is None:
        reason = seam.memory_problem(ex.memory, tensor_parts(mine), tensor_parts(got))
        if reason and "allocated" in record:
            reason = f"{reason.rstrip('.')} (viewlab.measure saw {record['allocated']:,} new bytes)"
    if reason is None and watch is not None:  # Watch.after_compare
        reason = seam.after(ex.rules, ex.memory, watch)
    if reason is None:
        for p, q in zip(tensor_parts(args), tensor_parts(mine)):
            if p.shape != q.shape or not torch.equal(p.detach(), q.detach()):
                reason = (
                    "your function changed its input in place (e.g. with an in-place op or "
                    "by writing into a view); work on a copy or use out-of-place ops"
                )
                break
    if reason is None:
        for rule in ex.extra:
            reason = rule(mine, got)
            if reason:
                label = getattr(rule, "rule", None)
                reason = f"breaks rule `{label}`: {reason}" if label else reason
                break
    if reason is None:
        return None
    return FAILED, reason, _failure(plan, reason, args, expected, got, None)


def _probe_problem(plan: Plan, probe: list[dict[str, Any]]) -> tuple[str, str, str] | None:
    """The loop probe, as the checker runs it: a stub, a raise (a failure where the reference answers the
    input), forbidden work on a probe input, then the operator counts."""
    if plan.ex.rules.no_python_loops is None or len(probe) != 2:
        return None
    if any(p["kind"] == "stub" for p in probe):
        return NOT_SOLVED, "not solved yet", f"{plan.title}: not solved yet (the answer is still a stub)."
    for args, run in zip(plan.probe, probe):
        if run["kind"] == "raised":
            try:
                expected = plan.ex.reference(*fresh(args))
            except Exception:  # noqa: BLE001 - an input the exercise itself does not answer
                return None
            reason = f"your function raised {run['error']}"
            return FAILED, reason, _failure(plan, reason, args, expected, None, run["error"])
        reason = seam.probe_forbidden(plan.ex.rules, run)
        if reason is not None:
            got = decode(run["value"])
            return FAILED, reason, _failure(plan, reason, args, plan.ex.reference(*fresh(args)), got, None)
    reason = seam.probe_loop(probe[0], probe[1], *_LOOP_SIZES)
    if reason is None:
        return None
    got = decode(probe[1]["value"])
    return FAILED, reason, _failure(plan, reason, plan.probe[1], plan.probe_expected, got, None)


def judge(plan: Plan, out: dict[str, Any]) -> Verdict:
    """The verdict on one answer from what its process sent back (``out``, loaded with weights_only)."""
    records = out.get("records", [])
    ops = sorted({op for r in records for op in (r.get("watch") or {}).get("ops", [])})
    peak = max((r.get("peak", 0) for r in records), default=0)
    details = {"inputs_tried": len(records), "operators_seen": ops, "peak_bytes": peak}
    if not out.get("defined"):
        why = str(out.get("why"))
        return Verdict(FAILED, why, f"{plan.title}: FAILED -- {why}.", 0, details)
    for i, record in enumerate(records):
        found = _one(plan, i, record)
        if found is not None:
            status, reason, message = found
            if status == FAILED and reason.startswith("breaks rule `max_new_bytes`"):
                loop = _probe_problem(plan, out.get("probe", []))  # the loop is the cause, the bytes its symptom
                if loop is not None and loop[0] == FAILED:
                    status, reason, message = loop
            details["failing_input"] = i
            return Verdict(status, reason, message, i + 1, details)
    if len(records) < len(plan.inputs):
        why = "the answer's process stopped before every input was tried"
        return Verdict(FAILED, why, f"{plan.title}: FAILED -- {why}.", len(records), details)
    found = _probe_problem(plan, out.get("probe", []))
    if found is not None:
        return Verdict(*found, len(records), details)
    memory = {"view": " and returns a view (no new memory).", "copy": " and returns an independent copy."}
    msg = f"{plan.title}: passed. It matches the reference on every generated input"
    return Verdict(PASSED, "", msg + memory.get(plan.ex.memory or "", "."), len(records), details)


def _body(node: ast.AST) -> str:
    """A function's parameters and body (its name, annotations and docstring aside), as ``ast.dump`` writes them."""
    params = [a.arg for a in node.args.args] if isinstance(node, ast.FunctionDef) else []
    body = list(getattr(node, "body", []))
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return "\n".join([",".join(params), *(ast.dump(b) for b in body)])


def same_as_solution(source: str, solution: str, name: str) -> bool:
    """Whether the answer's function ``name`` has the body of the course's printed solution (comments, names
    of the function and docstrings aside): the grader cannot tell a copied solution from an honest answer, so it
    flags it for the teacher.

    >>> same_as_solution("def f(x):\\n    # mine\\n    return x.t()", "def f(x):\\n    return x.t()", "f")
    True
    """
    try:
        mine = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name]
        theirs = [n for n in ast.walk(ast.parse(textwrap.dedent(solution))) if isinstance(n, ast.FunctionDef)]
    except (SyntaxError, ValueError):
        return False
    return bool(mine and theirs) and _body(mine[0]) == _body(theirs[-1])
