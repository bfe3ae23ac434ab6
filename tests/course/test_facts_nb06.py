"""Notebook 06 (memory lab): helper behaviour the notebook relies on."""

from __future__ import annotations

import sys
import weakref
from types import SimpleNamespace

import torch

from viewlab.ipython import release_ipython_refs


def _failed_step() -> None:
    activations = torch.zeros(1000)  # noqa: F841 (kept alive by the traceback)
    raise RuntimeError("out of memory (simulated)")


def test_release_frees_a_traceback_that_the_last_execution_result_still_holds():
    # Right after a failing cell, IPython's last_execution_result.error_in_exec holds the exception too.
    try:
        _failed_step()
    except RuntimeError as exc:
        error = exc
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    ref = weakref.ref(tb.tb_frame.f_locals["activations"])
    del tb
    shell = SimpleNamespace(user_ns={}, last_execution_result=SimpleNamespace(result=None, error_in_exec=error))
    saved = sys.last_type, sys.last_value, sys.last_traceback = type(error), error, error.__traceback__
    del error, saved
    assert ref() is not None
    assert release_ipython_refs(shell, sources="traceback") == 4000
    assert ref() is None and shell.last_execution_result.error_in_exec is None


def test_release_of_the_history_only_leaves_the_failed_result_alone():
    try:
        _failed_step()
    except RuntimeError as exc:
        error = exc
    shell = SimpleNamespace(
        user_ns={"Out": {}}, last_execution_result=SimpleNamespace(result=None, error_in_exec=error)
    )
    assert release_ipython_refs(shell, sources="history") == 0
    assert shell.last_execution_result.error_in_exec is error
