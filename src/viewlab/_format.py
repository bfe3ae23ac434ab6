"""Numbers, sizes and dtypes as text: one spelling everywhere (messages, tables, figures, alt text).

>>> fmt_bytes(1536), exact_bytes(1536), dtype_name(torch.float32), fmt_shape([2, 3])
('1.5 KiB', '1,536 B (1.5 KiB)', 'float32', '(2, 3)')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._checks import entry, type_error

__all__ = ["fmt_bytes", "exact_bytes", "mib", "dtype_name", "fmt_shape", "cell_value"]


@entry("fmt_bytes")
def fmt_bytes(n: float | None) -> str:
    """Bytes in a short human form with binary units ("n/a" for None).

    >>> fmt_bytes(0), fmt_bytes(1536), fmt_bytes(3 * 2**20), fmt_bytes(-2048)
    ('0 B', '1.5 KiB', '3.0 MiB', '-2.0 KiB')
    """
    if n is None:
        return "n/a"
    if isinstance(n, bool) or type(n).__name__ in ("bool_", "bool") or isinstance(n, (str, bytes, complex)):
        raise type_error("n", "a number of bytes or None", n)
    try:  # NumPy and 0-dim tensor numbers too
        n = float(n) if not isinstance(n, int) else n
    except (TypeError, ValueError, RuntimeError):
        raise type_error("n", "a number of bytes or None", n) from None
    if n != n:
        raise type_error("n", "a number of bytes or None", n)
    sign, n = "-" if n < 0 else "", abs(n)
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{sign}{int(n)} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return f"{sign}{n:.1f} GiB"


def exact_bytes(n: int | None) -> str:
    """Exact bytes first, the binary unit in parentheses where it helps.

    >>> exact_bytes(1048576), exact_bytes(40), exact_bytes(None)
    ('1,048,576 B (1.0 MiB)', '40 B', 'n/a')
    """
    return "n/a" if n is None else f"{n:,} B" if abs(n) < 1024 else f"{n:,} B ({fmt_bytes(n)})"


def mib(n: int) -> str:
    """Exact bytes with MiB beside them, for sizes that are large by construction.

    >>> mib(3 * 2**20)
    '3,145,728 B (3.0 MiB)'
    """
    return f"{n:,} B ({n / 2**20:.1f} MiB)"


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``'float32'``.

    >>> dtype_name(torch.bool)
    'bool'
    """
    return str(dtype).replace("torch.", "")


def fmt_shape(shape: Sequence[int]) -> str:
    """A shape as a plain tuple of ints.

    >>> fmt_shape(torch.Size([4, 1])), fmt_shape(())
    ('(4, 1)', '()')
    """
    return str(tuple(int(n) for n in shape))


def cell_value(v: Any, whole_floats: bool = False) -> str:
    """One tensor element, short enough for a grid cell: bools as T/F, floats with 3 significant digits
    (``whole_floats``: 2.0 as ``2``).

    >>> cell_value(True), cell_value(0.123456), cell_value(2.0), cell_value(2.0, whole_floats=True), cell_value(1+2j)
    ('T', '0.123', '2', '2', '1+2j')
    """
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        if whole_floats and v == v and abs(v) < 1e6 and v == int(v):
            return str(int(v))
        return f"{v:.3g}"
    if isinstance(v, complex):
        return f"{v.real:.2g}{v.imag:+.2g}j"
    return str(v)
