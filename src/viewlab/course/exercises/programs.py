"""Small generated functions as data: what exercises 08 and 10 pass as ``fn`` (a function of two tensors).

A :class:`Program` is a few steps, each binding a new name to one operator of a menu (expand, repeat, clone,
mul, view, add_, cat; and relu, sin and matmul, for which autograd saves tensors: exercise 10) applied to earlier
names, and the names it returns. Called, it runs the steps and nothing outlives the call but what it returns
(and what autograd saves); shown, it reads as the code it runs. It is plain data (str and tuples), so the
grader sends it to the answer's process as :meth:`Program.plain` and that process, which may not import the
exercise bank, makes it callable again with :func:`revive`.

>>> fn = Program((("t1", "clone", "a", None), ("t2", "mul", "t1", "b")), ("t2",))
>>> fn
fn(a, b): t1 = a.clone(); t2 = t1 * b; return t2
>>> import torch
>>> fn(torch.ones(2), torch.full((2,), 3.0)).tolist()
[3.0, 3.0]
>>> revive(fn.plain()) == fn
True
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["MENU", "Program", "revive", "plain"]

MENU = ("expand", "repeat", "clone", "mul", "view", "add_", "cat", "relu", "sin", "matmul")
_MARK = "__program__"


def _run(kind: str, v: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
    if kind == "expand":
        return v.expand(2, *v.shape)
    if kind == "repeat":
        return v.repeat(2, *[1] * (v.dim() - 1))
    if kind == "clone":
        return v.clone()
    if kind == "mul":
        return v * (2 if w is None else w)
    if kind == "view":
        return v.view(-1)
    if kind == "add_":
        return v.add_(1)
    if kind == "relu":
        return v.relu()  # autograd saves its result
    if kind == "sin":
        return v.sin()  # autograd saves its input
    if kind == "matmul":
        return v @ (v if w is None else w).mT  # saves each operand when the other requires grad, w as a transposed view
    return torch.cat([v, v if w is None else w])


def _code(kind: str, v: str, w: str | None) -> str:
    return {
        "expand": f"{v}.expand(2, *{v}.shape)",
        "repeat": f"{v}.repeat(2, *[1] * ({v}.dim() - 1))",
        "clone": f"{v}.clone()",
        "mul": f"{v} * {w or 2}",
        "view": f"{v}.view(-1)",
        "add_": f"{v}.add_(1)",
        "cat": f"torch.cat([{v}, {w or v}])",
        "relu": f"{v}.relu()",
        "sin": f"{v}.sin()",
        "matmul": f"{v} @ {w or v}.mT",
    }[kind]


class Program:
    """``fn(a, b)`` as data: ``steps`` of ``(name, kind, v, w)`` (``kind`` from :data:`MENU`, ``v`` the name it
    acts on, ``w`` a second operand's name or None) and the names it ``returns``."""

    def __init__(self, steps: tuple[tuple[str, str, str, str | None], ...], returns: tuple[str, ...]) -> None:
        for step in steps:
            name, kind, v, w = step
            if kind not in MENU or not (
                isinstance(name, str) and isinstance(v, str) and isinstance(w, (str, type(None)))
            ):
                raise ValueError(
                    f"Program(): each step is (name, kind from {MENU}, operand, second operand or None); got {step!r}"
                )
        self.steps, self.returns = tuple(tuple(s) for s in steps), tuple(returns)

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> Any:
        env: dict[str, Any] = {"a": a, "b": b}
        for name, kind, v, w in self.steps:
            env[name] = _run(kind, env[v], None if w is None else env[w])
        out = tuple(env[r] for r in self.returns)
        return out[0] if len(out) == 1 else out

    def __repr__(self) -> str:
        body = "".join(f"{name} = {_code(kind, v, w)}; " for name, kind, v, w in self.steps)
        return f"fn(a, b): {body}return {', '.join(self.returns)}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Program) and (self.steps, self.returns) == (other.steps, other.returns)

    __hash__ = None  # type: ignore[assignment]

    def plain(self) -> tuple[Any, ...]:
        """The program as str and tuples (what ``torch.load(weights_only=True)`` reads back)."""
        return (_MARK, self.steps, self.returns)


def revive(obj: Any) -> Any:
    """``obj`` with every :meth:`Program.plain` in it (at its top level, or in a tuple or list) made a Program."""
    if isinstance(obj, tuple) and len(obj) == 3 and obj[0] == _MARK:
        return Program(tuple(tuple(s) for s in obj[1]), tuple(obj[2]))
    if isinstance(obj, (tuple, list)):
        return type(obj)(revive(o) for o in obj)
    return obj


def plain(obj: Any) -> Any:
    """The inverse of :func:`revive`: every Program in ``obj`` as its plain form."""
    if isinstance(obj, Program):
        return obj.plain()
    if isinstance(obj, (tuple, list)):
        return type(obj)(plain(o) for o in obj)
    return obj
