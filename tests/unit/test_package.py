"""Importing viewlab must start nothing: no CUDA init, no threads, no pyplot, no benchmark timer."""

import subprocess
import sys

CHECK = """
import threading, sys
import viewlab, torch
assert threading.active_count() == 1, threading.enumerate()
assert not torch.cuda.is_initialized()
assert "matplotlib.pyplot" not in sys.modules
assert "torch.utils.benchmark" not in sys.modules  # bench imports it when it times something (~0.1 s)
print("clean")
"""


def test_import_has_no_side_effects():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "clean"


def test_public_names_have_runnable_docstrings():
    """Every public callable shows an example; the examples themselves run under ``--doctest-modules src``."""
    import viewlab

    for name in viewlab.__all__:
        obj = getattr(viewlab, name)
        if callable(obj) and not isinstance(obj, type):
            assert obj.__doc__ and ">>>" in obj.__doc__, f"viewlab.{name} needs a docstring example"
