"""Whose code is this? The one answer to "is this the learner's code?", and where the learner is.

Every tool that names the learner's line (the guards, the monitor, the exercise checker) asks here:

* :func:`is_learner_file`: a file (or compile name) is the learner's when it is not torch, numpy, the standard
  library, an installed package or viewlab itself. The exercise bank, whose wrong answers play the learner in
  the course's tests, is the learner's. Code compiled under a name made by :func:`own_code_name` (a test run's
  watcher, executed in the kernel) is viewlab's.
* :func:`place`: ``line N of this cell: code`` in a notebook, ``file:N: code`` elsewhere.
* :func:`learner_line`: the place of the innermost frame of the learner's code on the current stack.
* :func:`called_from_viewlab`: whether the innermost frame outside torch is viewlab's own code (for the
  guards, the bank is viewlab's: its references broadcast on purpose).

The folders are found from the modules themselves (``torch.__file__``, :mod:`sysconfig`), never by listing
directories, so a zip import or a moved module changes nothing here. Frames are walked with
:func:`inspect.currentframe` and ``f_back``; the source line is read (through :mod:`linecache`) only for
the frame chosen.

>>> is_learner_file("/tmp/ipykernel_1/2.py"), is_learner_file(own_code_name("nbval watch"))
(True, False)
>>> place("/tmp/ipykernel_1/abc.py", 3)
'line 3 of this cell'
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import linecache
import os
import sysconfig

__all__ = [
    "PACKAGE_DIR",
    "BANK_DIR",
    "own_code_name",
    "is_learner_file",
    "is_viewlab_file",
    "place",
    "learner_line",
    "called_from_viewlab",
]

PACKAGE_DIR = os.path.dirname(__file__).replace("\\", "/") + "/"  # .../viewlab/
BANK_DIR = PACKAGE_DIR + "course/exercises/bank/"
_OWN_CODE = "<viewlab "


def own_code_name(what: str) -> str:
    """The name to compile viewlab's own code under when it runs as a string (``"<viewlab what>"``).

    >>> own_code_name("nbval watch")
    '<viewlab nbval watch>'
    """
    return f"{_OWN_CODE}{what}>"


def _dir_of(module: str) -> str | None:
    """The folder of an installed package, found without importing it (None when it is not installed)."""
    spec = importlib.util.find_spec(module)
    found = list(spec.submodule_search_locations or []) if spec is not None else []
    return found[0].replace("\\", "/") + "/" if found else None


@functools.lru_cache(maxsize=1)
def _outside() -> tuple[str, ...]:
    """The prefixes of code that is not the learner's: torch, numpy, the standard library, installed packages."""
    libs = [p for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
    dirs = [_dir_of("torch"), _dir_of("numpy"), *(p.replace("\\", "/") + "/" for p in libs)]
    return (*(d for d in dirs if d), "<frozen", _OWN_CODE)


def is_viewlab_file(filename: str) -> bool:
    """True for viewlab's own modules (the bank's included) and code compiled under :func:`own_code_name`.

    >>> is_viewlab_file(PACKAGE_DIR + "layout.py"), is_viewlab_file("/tmp/ipykernel_1/2.py")
    (True, False)
    """
    name = filename.replace("\\", "/")
    return name.startswith((PACKAGE_DIR, _OWN_CODE))


@functools.lru_cache(maxsize=4096)
def is_learner_file(filename: str) -> bool:
    """True for code the learner wrote (a cell, a script, a test, the bank's answers), False for torch, numpy,
    the standard library, installed packages and viewlab's own tools.

    >>> import torch
    >>> is_learner_file(torch.__file__), is_learner_file(BANK_DIR + "nb01_views.py"), is_learner_file(__file__)
    (False, True, False)
    """
    name = filename.replace("\\", "/")
    if name.startswith(BANK_DIR):  # the bank plays the learner, installed or not
        return True
    return not name.startswith((PACKAGE_DIR, *_outside()))


def _in_cell(filename: str) -> bool:
    """A notebook cell's file is a temporary name (``ipykernel_<pid>/<hash>.py``)."""
    return "ipykernel_" in filename or filename.startswith("<ipython-input")


def place(filename: str, lineno: int) -> str:
    """``line N of this cell: code`` in a notebook, ``file:N: code`` elsewhere (no code when none is found).

    >>> place("/no/such/file.py", 3)
    '/no/such/file.py:3'
    """
    where = f"line {lineno} of this cell" if _in_cell(filename) else f"{filename}:{lineno}"
    code = linecache.getline(filename, lineno).strip()
    return f"{where}: {code}" if code else where


def learner_line() -> str | None:
    """Where the learner is: :func:`place` of the innermost frame of the learner's code, or None.

    >>> learner_line() is None or "line" in learner_line() or ":" in learner_line()
    True
    """
    frame = inspect.currentframe()
    while frame is not None:
        code = frame.f_code
        if is_learner_file(code.co_filename):
            return place(code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def _plumbing(filename: str) -> bool:
    """Frames that only pass a call on: torch's, and the standard library's context managers and wrappers."""
    name = filename.replace("\\", "/")
    return "/torch/" in name or name.endswith(("contextlib.py", "functools.py"))


def called_from_viewlab(this_file: str = "") -> bool:
    """True when the innermost frame outside torch is viewlab's own code (a helper building a mask, say),
    so a watcher reports the learner's code, not the internals of the tools it watches with.

    Another viewlab mode (``measure``, the monitor's frame hook, a rule recorder, a guard's call recorder)
    only passes the learner's operator on from its ``__torch_dispatch__`` or ``__torch_function__``: those
    frames are skipped, so an operator run inside ``with measure():`` is still the learner's.
    ``this_file``: the calling watcher's own file, also skipped.

    >>> called_from_viewlab()
    False
    """
    # _dispatch's helpers (storages_of reads a sparse tensor's parts) run operators on a watcher's behalf
    own = (this_file.replace("\\", "/"), __file__.replace("\\", "/"), PACKAGE_DIR + "_dispatch.py")
    frame = inspect.currentframe()
    while frame is not None:
        code = frame.f_code
        name = code.co_filename.replace("\\", "/")
        passing_on = code.co_name in (
            "__torch_dispatch__",
            "__torch_function__",
        ) and is_viewlab_file(name)
        if not _plumbing(name) and name not in own and not passing_on:
            return is_viewlab_file(name)  # the bank's references included: their broadcasts are meant
        frame = frame.f_back
    return False
