"""IPython and Jupyter lookups in one room: are we in a kernel, on Colab, and (below) what IPython keeps alive.

Nothing here imports IPython at module load; each function looks it up when called.

>>> in_kernel(), on_colab()
(False, False)
"""

from __future__ import annotations

import sys

__all__ = ["in_kernel", "on_colab"]


def in_kernel() -> bool:
    """True inside a running Jupyter kernel (a shell with a ``kernel``), False in plain Python or a terminal IPython.

    >>> in_kernel()
    False
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the course
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def on_colab() -> bool:
    """True on Google Colab (its ``google.colab`` module has been imported by the runtime).

    >>> on_colab()
    False
    """
    return "google.colab" in sys.modules
