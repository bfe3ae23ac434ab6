"""What a check runs on: hypothesis strategies for small tensors in varied memory layouts, and the run itself.

Every input the exercises draw comes from here, and this is the one module of the engine that imports
hypothesis (lazily: only when a strategy is built or a check runs). Values are whole numbers (exact to
compare, easy to read in a failure report); the layouts are :data:`LAYOUTS`.

>>> from hypothesis import find
>>> t = find(tensors(dims=(2, 2), side=(2, 3), layouts=("transposed",)), lambda t: True)
>>> (tuple(t.shape), t.stride(), t.is_contiguous())
((2, 2), (1, 2), False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from viewlab._checks import describe_value, entry, is_quantized_dtype, problem

if TYPE_CHECKING:  # hypothesis is imported only when used
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAYOUTS", "MAX_DIMS", "MAX_ELEMENTS", "tensors", "shapes", "is_strategy", "as_arg_tuples", "run_examples"]

LAYOUTS: tuple[str, ...] = ("contiguous", "transposed", "strided", "offset", "expanded")
MAX_DIMS = 8  # tensors()/shapes(): at most this many dims ...
MAX_ELEMENTS = 100_000  # ... and at most this many elements per drawn tensor
_DEFAULT_VALUES = (-9, 9)
# Only the health checks about generation cost; naming others (some are deprecated in newer releases)
# could print warnings into a notebook's compared output.
_QUIET_HEALTH_CHECKS = ("too_slow", "filter_too_much", "data_too_large", "large_base_example")


def _require_range(name: str, rng: Any, lowest: int, highest: int | None = None) -> tuple[int, int]:
    if not (
        isinstance(rng, tuple) and len(rng) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in rng)
    ):
        raise problem(
            TypeError, f"`{name}` must be a (min, max) tuple of ints, e.g. {name}=(1, 3); got {describe_value(rng)}."
        )
    lo, hi = rng
    top = "" if highest is None else f" <= {highest}"
    if lo < lowest or hi < lo or (highest is not None and hi > highest):
        raise problem(ValueError, f"{name}=({lo}, {hi}) is not a valid range: need {lowest} <= min <= max{top}.")
    return lo, hi


def _exact_int_range(dtype: torch.dtype) -> tuple[int, int]:
    """The whole numbers ``dtype`` stores exactly (what :func:`tensors` may draw without wrapping or rounding).

    >>> _exact_int_range(torch.uint8), _exact_int_range(torch.float16)
    ((0, 255), (-2048, 2048))
    """
    if dtype == torch.bool:
        return 0, 1
    if dtype.is_floating_point or dtype.is_complex:
        top = int(round(2 / torch.finfo(dtype).eps))  # 2**(mantissa bits + 1): every integer up to it is exact
        return -top, top
    info = torch.iinfo(dtype)
    return max(info.min, -(2**63)), min(info.max, 2**63 - 1)


def _numel_problem(shape: tuple[int, ...]) -> str | None:
    n = 1
    for k in shape:
        n *= k
    if len(shape) > MAX_DIMS or n > MAX_ELEMENTS:
        return (
            f"shape {shape} has {len(shape)} dims and {n:,} elements; the tensors drawn "
            f"for checks have at most {MAX_DIMS} dims and {MAX_ELEMENTS:,} elements."
        )
    return None


def _shape_ranges(dims: Any, side: Any) -> tuple[int, int, int, int]:
    d_lo, d_hi = _require_range("dims", dims, 0, MAX_DIMS)
    s_lo, s_hi = _require_range("side", side, 0)
    if d_hi and s_hi**d_hi > MAX_ELEMENTS:
        raise problem(
            ValueError,
            f"dims={dims}, side={side} allows {s_hi}**{d_hi} = {s_hi**d_hi:,} elements; "
            f"tensors for checks have at most {MAX_ELEMENTS:,}. Use smaller sides or fewer dims.",
        )
    return d_lo, d_hi, s_lo, s_hi


@entry("shapes")
def shapes(dims: tuple[int, int] = (1, 3), side: tuple[int, int] = (1, 4)) -> SearchStrategy[tuple[int, ...]]:
    """Strategy for tensor shapes with ``dims[0]..dims[1]`` dimensions of size ``side[0]..side[1]``.

    >>> from hypothesis import find
    >>> find(shapes(dims=(2, 3), side=(2, 4)), lambda s: True)
    (2, 2)
    """
    from hypothesis import strategies as st

    d_lo, d_hi, s_lo, s_hi = _shape_ranges(dims, side)
    return st.integers(d_lo, d_hi).flatmap(lambda n: st.tuples(*[st.integers(s_lo, s_hi)] * n))


def _build(shape: tuple[int, ...], kind: str, values: list[int], dtype: torch.dtype, dim: int) -> torch.Tensor:
    """A tensor with ``shape`` and the given values (row-major), laid out in memory as ``kind`` says."""
    flat = torch.tensor(values, dtype=torch.int64).to(dtype)
    if kind == "transposed":  # stored as the transpose of the last two dims
        s = list(shape)
        s[-1], s[-2] = s[-2], s[-1]
        return flat.reshape(shape).transpose(-1, -2).contiguous().reshape(s).transpose(-1, -2)
    if kind == "strided":  # every other element of a wider buffer along the last dim
        wide = torch.zeros(*shape[:-1], 2 * shape[-1], dtype=dtype)
        out = wide[..., ::2]
        out.copy_(flat.reshape(shape))
        return out
    if kind == "offset":  # a view that starts one row/element into its storage
        big = torch.zeros(shape[0] + 1, *shape[1:], dtype=dtype)
        out = big[1:]
        out.copy_(flat.reshape(shape))
        return out
    if kind == "expanded":  # dimension `dim` is a stride-0 broadcast of a single slice
        small = list(shape)
        small[dim] = 1
        n_small = 1
        for s in small:
            n_small *= s
        return flat[:n_small].reshape(small).expand(shape)
    return flat.reshape(shape)


def _plain_numbers(dtype: Any) -> bool:
    """A dtype whose elements are numbers: floating, complex, bool or an integer torch.iinfo knows (not bits8)."""
    if not isinstance(dtype, torch.dtype) or is_quantized_dtype(dtype):
        return False
    if dtype == torch.bool or dtype.is_floating_point or dtype.is_complex:
        return True
    try:
        torch.iinfo(dtype)
    except TypeError:  # torch.bits8, torch.bits16 ...: raw bits, not numbers
        return False
    return True


def _value_range(dtype: Any, values: Any) -> tuple[int, int]:
    if not _plain_numbers(dtype):
        raise problem(
            TypeError,
            f"`dtype` must be a torch.dtype of plain numbers such as torch.float32; got {describe_value(dtype)}.",
        )
    exact_lo, exact_hi = _exact_int_range(dtype)
    if values is None:
        # The default range, cut to what the dtype holds: uint8 gets 0..9, never -9 wrapped to 247.
        return max(_DEFAULT_VALUES[0], exact_lo), min(_DEFAULT_VALUES[1], exact_hi)
    v_lo, v_hi = _require_range("values", values, -(2**63), 2**63 - 1)
    if v_lo < exact_lo or v_hi > exact_hi:
        raise problem(
            ValueError,
            f"values=({v_lo}, {v_hi}) does not fit dtype {dtype}, which holds whole numbers "
            f"{exact_lo}..{exact_hi} exactly; pass values within that range (e.g. "
            f"values=({max(v_lo, exact_lo)}, {min(v_hi, exact_hi)})) or a wider dtype.",
        )
    return v_lo, v_hi


def _require_layouts(layouts: Any) -> None:
    if isinstance(layouts, str) or not isinstance(layouts, (list, tuple)):
        raise problem(
            TypeError,
            f"`layouts` must be a list or tuple of names from {LAYOUTS}, "
            f"e.g. layouts=('contiguous',); got {describe_value(layouts)}.",
        )
    bad = [k for k in layouts if not isinstance(k, str) or k not in LAYOUTS]
    if bad or not layouts:
        raise problem(ValueError, f"layouts must be a non-empty subset of {LAYOUTS}; got {tuple(layouts)!r}.")


@entry("tensors")
def tensors(
    dims: tuple[int, int] = (1, 3),
    side: tuple[int, int] = (1, 4),
    dtype: torch.dtype = torch.float32,
    values: tuple[int, int] | None = None,
    layouts: Sequence[str] = LAYOUTS,
    shape: SearchStrategy[tuple[int, ...]] | tuple[int, ...] | None = None,
) -> SearchStrategy[torch.Tensor]:
    """Strategy for small tensors with integer-valued entries and varied memory layouts.

    Values are whole numbers in ``values`` (exact to compare, easy to read in a failure report); the
    default is -9..9 cut to what ``dtype`` holds (0..9 for unsigned, 0..1 for bool), and an explicit
    range must fit the dtype exactly (no wrap-around, no rounding). At most :data:`MAX_DIMS` dims and
    :data:`MAX_ELEMENTS` elements.
    ``layouts`` chooses among :data:`LAYOUTS`: ``"contiguous"``; ``"transposed"`` (last two dims
    swapped in memory, needs >= 2 dims); ``"strided"`` (every other element, stride 2 in the last
    dim); ``"offset"`` (storage offset > 0); ``"expanded"`` (one dim is a stride-0 broadcast, so the
    tensor is read-only in effect and its values repeat along that dim). Pass ``shape`` (a fixed
    tuple or a strategy) to override ``dims``/``side``.

    >>> from hypothesis import find
    >>> find(tensors(dims=(1, 1), side=(3, 3), layouts=("offset",)), lambda t: True).storage_offset()
    1
    """
    from hypothesis import strategies as st

    v_lo, v_hi = _value_range(dtype, values)
    _require_layouts(layouts)
    if shape is None:
        d_lo, d_hi, s_lo, s_hi = _shape_ranges(dims, side)
        shape_st = st.integers(d_lo, d_hi).flatmap(lambda n: st.tuples(*[st.integers(s_lo, s_hi)] * n))
    elif isinstance(shape, tuple):
        for i, k in enumerate(shape):
            if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                raise problem(ValueError, f"shape={shape!r}: size at index {i} must be an int >= 0, got {k!r}.")
        too_big = _numel_problem(shape)
        if too_big:
            raise problem(ValueError, too_big)
        shape_st = st.just(shape)
    elif isinstance(shape, st.SearchStrategy):
        shape_st = shape
    else:
        raise problem(
            TypeError,
            "`shape` must be None, a tuple of ints or a hypothesis strategy of such tuples; "
            f"got {describe_value(shape)}.",
        )

    @st.composite
    def _draw(draw: Callable[..., Any]) -> torch.Tensor:
        s = tuple(draw(shape_st))
        too_big = _numel_problem(s)
        if too_big:  # raised while hypothesis draws, long after tensors() returned: it names tensors() itself
            raise ValueError(f"tensors(): {too_big}")
        n = 1
        for k in s:
            n *= k
        usable = [k for k in layouts if _layout_fits(k, s)]
        kind = draw(st.sampled_from(usable)) if usable else "contiguous"
        dim = 0
        if kind == "expanded":
            dim = draw(st.sampled_from([d for d, k in enumerate(s) if k > 1]))
        vals = draw(st.lists(st.integers(v_lo, v_hi), min_size=n, max_size=n))
        return _build(s, kind, vals, dtype, dim)

    return _draw()


def _layout_fits(kind: str, shape: tuple[int, ...]) -> bool:
    if kind == "contiguous":
        return True
    if kind == "transposed":
        return len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1
    if kind in ("strided", "offset"):
        return len(shape) >= 1 and shape[-1 if kind == "strided" else 0] > 0
    return any(k > 1 for k in shape)  # expanded


# ----- running a body on drawn inputs (the engine asks; only this module knows hypothesis) ------------------
def is_strategy(obj: Any) -> bool:
    """True when ``obj`` is a hypothesis strategy.

    >>> is_strategy(tensors()), is_strategy([(1,)])
    (True, False)
    """
    from hypothesis import strategies as st

    return isinstance(obj, st.SearchStrategy)


def as_arg_tuples(strategy: SearchStrategy[Any]) -> SearchStrategy[tuple[Any, ...]]:
    """``strategy`` with every draw that is not a tuple wrapped as a 1-tuple (the arguments of one call)."""
    return strategy.map(lambda a: a if isinstance(a, tuple) else (a,))


def _quiet_settings(max_examples: int) -> Any:
    from hypothesis import HealthCheck, Phase, Verbosity, settings

    return settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        suppress_health_check=[getattr(HealthCheck, n) for n in _QUIET_HEALTH_CHECKS if hasattr(HealthCheck, n)],
    )


def run_examples(strategy: SearchStrategy[Any], body: Callable[[Any], None], max_examples: int) -> None:
    """Run ``body`` on up to ``max_examples`` draws of ``strategy``, deterministically and silently.

    The first exception ``body`` raises propagates, after hypothesis shrank its input to the smallest it
    could find (the input ``body`` saw last).

    >>> seen = []
    >>> run_examples(tensors(dims=(1, 1), side=(2, 2)), lambda t: seen.append(t), max_examples=5)
    >>> 1 <= len(seen) <= 5
    True
    """
    from hypothesis import given
    from hypothesis.reporting import with_reporter

    test = _quiet_settings(max_examples)(given(strategy)(body))
    with with_reporter(lambda _msg: None):
        test()
