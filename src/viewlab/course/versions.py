"""The lowest torch the course needs, and every behaviour of torch it relies on that changed over time.

One place for all of them: each entry names the behaviour, the torch version it arrived in (from
PyTorch's release notes), where the course relies on it, and a check that runs it on the torch you
have. ``pyproject.toml`` and ``environment.yml`` declare ``torch>=TORCH_FLOOR``; a test keeps the three
in step and runs every check.

>>> TORCH_FLOOR, all(b.check() for b in BEHAVIOURS)
('2.5', True)
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .._checks import entry, problem, type_error

__all__ = ["TORCH_FLOOR", "BEHAVIOURS", "Behaviour", "torch_at_least", "check_torch"]

TORCH_FLOOR = "2.5"


# A release ("2.5", "2.11.0"), then at most a pre-release, dev, post or local part ("rc1", ".dev20260101",
# "+cu128"). The whole text must be one: "05-can-expand" is not version 5, "cuda:7" is not version 7.
_VERSION = re.compile(r"(\d+(?:\.\d+)*)(?:(?:a|b|rc|\.dev|\.post)\d*)*(?:\+[0-9A-Za-z.]+)?")


def _parts(text: str) -> tuple[int, ...]:
    match = _VERSION.fullmatch(text.strip())  # "2.11.0+cu128" -> (2, 11, 0); "05-can-expand" -> ()
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


@entry("torch_at_least")
def torch_at_least(version: str, installed: str | None = None) -> bool:
    """True when the installed torch (or ``installed``) is at least ``version`` ("2.5", "2.5.1").

    >>> torch_at_least("2.5", installed="2.11.0+cu128"), torch_at_least("2.5", installed="2.4.1")
    (True, False)
    >>> torch_at_least("2.5.0", installed="2.5"), torch_at_least("2.6", installed="2.6.0rc1+cpu")
    (True, True)
    >>> torch_at_least("05-can-expand")
    Traceback (most recent call last):
    ValueError: torch_at_least(): version='05-can-expand': pass a version such as '2.5' or '2.5.1'.
    """
    if not isinstance(version, str):
        raise type_error("version", "a string such as '2.5'", version)
    if installed is not None and not isinstance(installed, str):
        want = "a version string such as '2.11.0+cu128' or None (the torch running here)"
        raise type_error("installed", want, installed)
    have, want = _parts(installed if installed is not None else torch.__version__), _parts(version)
    if not want:
        raise problem(ValueError, f"version={version!r}: pass a version such as '2.5' or '2.5.1'.")
    if not have:
        raise problem(ValueError, f"installed={installed!r}: pass a version such as '2.11.0+cu128', or None.")
    width = max(len(have), len(want))  # release tuples, the shorter padded with zeros: '2.5' == '2.5.0'
    return have + (0,) * (width - len(have)) >= want + (0,) * (width - len(want))


@dataclass(frozen=True)
class Behaviour:
    """One torch behaviour the course relies on, the version it arrived in, and a check that runs it."""

    name: str
    since: str
    used_in: str
    check: Callable[[], bool]


def _sdpa_fully_masked_row_is_zero() -> bool:
    q, k, v = torch.ones(1, 1, 2, 4), torch.ones(1, 1, 3, 4), torch.arange(12.0).reshape(1, 1, 3, 4)
    mask = torch.tensor([[True, True, True], [False, False, False]])  # the second query sees no key
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return bool((out[0, 0, 1] == 0).all()) and not bool(out.isnan().any())


def _untyped_storage_is_shared_by_views() -> bool:
    base = torch.arange(6)
    return base.untyped_storage().data_ptr() == base.view(2, 3).t().untyped_storage().data_ptr()


def _typed_storage_warns_deprecated() -> bool:
    # torch shows this warning once per process, remembered as a flag on its warning function. The check
    # clears the flag to see the warning, then puts back what it found: a learner who has seen the warning
    # is not shown it again, one who has not still sees it at their own first .storage().
    flag = torch.storage._warn_typed_storage_removal.__dict__
    before = flag.get("has_warned", _ABSENT)
    torch.storage._reset_warn_typed_storage_removal()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.zeros(1).storage()
    finally:
        if before is _ABSENT:
            flag.pop("has_warned", None)
        else:
            flag["has_warned"] = before
    return any("TypedStorage is deprecated" in str(w.message) for w in caught)


_ABSENT = object()


def _memory_history_takes_python_stacks() -> bool:
    record = getattr(torch.cuda.memory, "_record_memory_history", None)
    return record is not None and "stacks" in inspect.signature(record).parameters


BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour(
        "scaled_dot_product_attention returns 0 (not NaN) for a query whose mask row is all False",
        "2.5",
        "notebooks 04 and 05 (fully masked rows); viewlab.attention matches it",
        _sdpa_fully_masked_row_is_zero,
    ),
    Behaviour(
        "Tensor.untyped_storage() exists and views share it",
        "2.0",
        "every notebook; viewlab.layout, viewlab.shares_storage, viewlab.measure",
        _untyped_storage_is_shared_by_views,
    ),
    Behaviour(
        "Tensor.storage() warns that TypedStorage is deprecated", "2.0", "notebook 01", _typed_storage_warns_deprecated
    ),
    Behaviour(
        "torch.cuda.memory._record_memory_history(stacks='python')",
        "2.1",
        "notebook 06 (memory snapshot)",
        _memory_history_takes_python_stacks,
    ),
)


def check_torch() -> list[str]:
    """Run every check on this torch: the names of the behaviours that do not hold (none at or above the floor).

    >>> check_torch()
    []
    """
    return [b.name for b in BEHAVIOURS if not b.check()]
