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


# Section 6b: `%reset -f out` leaves IPython's hidden `_` holding the last output, and IPython stops updating `_`
# (its display hook takes the '' that the flush wrote for a value the learner assigned); release_ipython_refs()
# frees it. In a fresh shell, a tensor held there only through a functools.partial is not seen; `%reset -f` frees it.
HIDDEN_UNDERSCORE = [
    "t = torch.zeros(1_000_000)\nref = weakref.ref(t)",
    "t",
    "del t",
    "get_ipython().run_line_magic('reset', '-f out')",
    "1 + 1",
    "2 + 2",
    "3 + 3",
    "ip = get_ipython()\n"
    "kept = dict(alive=ref() is not None, hidden=ip.user_ns_hidden['_'] is ref(), underscore=ip.user_ns['_'],"
    " held=[h.where for h in held_by_ipython()], freed=release_ipython_refs())\n"
    "kept['alive_after'] = ref() is not None\nprint('RESULT ' + json.dumps(kept))",
]
THROUGH_A_PARTIAL = [
    "import functools\nb = torch.zeros(250_000)\nref_b = weakref.ref(b)",
    "functools.partial(print, b)",
    "del b",
    "get_ipython().run_line_magic('reset', '-f out')",
    "pass",
    "kept = dict(alive=ref_b() is not None, held=[h.where for h in held_by_ipython()])\n"
    "sys.kept_for_test = (kept, ref_b)",
    "get_ipython().run_line_magic('reset', '-f')",
    "import json, sys\nkept, ref_b = sys.kept_for_test\nkept['after_full_reset'] = ref_b() is not None\n"
    "print('RESULT ' + json.dumps(kept))",
]


def test_the_hidden_underscore_outlives_reset_out_release_frees_it_and_only_a_full_reset_frees_a_partial():
    from tests.unit.test_ipython import SETUP, run_in_shell

    kept, partial = run_in_shell([[SETUP, "import json", *HIDDEN_UNDERSCORE], [SETUP, *THROUGH_A_PARTIAL]])
    assert kept["alive"] and kept["hidden"] and kept["underscore"] == ""  # three outputs later, still held
    assert kept["held"] == ["IPython's hidden _"] and kept["freed"] == 4_000_000 and not kept["alive_after"]
    assert partial == {"alive": True, "held": [], "after_full_reset": False}  # not seen; only %reset -f frees it
