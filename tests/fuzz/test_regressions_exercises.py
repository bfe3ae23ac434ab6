"""Regressions of the fuzz review's defect groups in the exercise checker (E2, E7, E10, E14, E15, E19, D17, D24,
D25): each test is the review's repro, and fails on the checker as it was before the fix.

Each asserts the designed behaviour: a clear error that names the function, the argument, what came and what
to pass, or a check status of 'failed' with a reason; never a bare traceback from inside the checker.
"""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
from hypothesis import strategies as st

from viewlab.course import exercises as ex
from viewlab.course.exercises import FAILED, Rules, check, named_rule, tensors

_GOOD_PAIRS = lambda p: p[:, None, :] - p[None, :, :]  # noqa: E731 - the right answer to 02-pairwise-diff
_ARGS = st.tuples(tensors(dims=(1, 1), side=(1, 3)))


def _public(name: str):
    """A name of the checker's rules API, from the module that holds it now (its messages, its recorder) or,
    on an older checker, from the rules module that held everything."""
    for module in ("messages", "recorder", "rules"):
        found = getattr(importlib.import_module(f"viewlab.course.exercises.{module}"), name, None)
        if found is not None:
            return found
    raise AssertionError(f"no {name} in viewlab.course.exercises")


# ----- E10: nothing of the process is patched while a check runs, and nothing is left after crossing checks ---
def _modes_in_a_new_thread() -> tuple[object, object, list, list]:
    out: list = []

    def look() -> None:
        out.append(
            (
                sys.getprofile(),
                sys.gettrace(),
                list(torch.overrides._get_current_function_mode_stack()),
                list(torch.utils._python_dispatch._get_current_dispatch_mode_stack()),
            )
        )

    t = threading.Thread(target=look)
    t.start()
    t.join()
    return out[0]


def test_a_check_patches_nothing_of_the_process_while_it_runs_e10():
    start, profile = threading.Thread.start, sys.getprofile()
    during = []

    def pairs(p):
        during.append((threading.Thread.start, sys.getprofile()))
        return _GOOD_PAIRS(p)

    assert ex.check_exercise("02-pairwise-diff", pairs).passed
    assert during and all(d == (start, profile) for d in during), during[0]


def test_concurrent_checks_leave_no_patch_and_no_mode_behind_e10():
    start = threading.Thread.start
    barrier = threading.Barrier(3)
    results: list = []

    def one() -> None:
        barrier.wait()
        results.append(ex.check_exercise("02-pairwise-diff", _GOOD_PAIRS).status)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["passed"] * 3
    assert threading.Thread.start is start
    assert _modes_in_a_new_thread() == (None, None, [], [])


# ----- E2: the bank is loaded under a lock ---------------------------------------------------------------
def test_the_bank_loads_whole_for_threads_that_look_it_up_at_once_e2():
    script = textwrap.dedent(
        """
        import threading
        from viewlab.course import exercises as ex
        barrier, out = threading.Barrier(8), []
        def look():
            barrier.wait()
            try:
                out.append((len(ex.exercise_ids()), ex.get("05-flatten-any").id))
            except Exception as exc:
                out.append((type(exc).__name__, str(exc)[:60]))
        threads = [threading.Thread(target=look) for _ in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(sorted(set(map(repr, out))))
        """
    )
    for _ in range(2):  # a fresh interpreter each time: the bank is not loaded yet
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        seen = eval(done.stdout.strip())  # one repr per distinct answer
        assert len(seen) == 1 and "05-flatten-any" in seen[0], seen


# ----- E7: a meta, sparse or nested result is a failure with a reason, not a crash ----------------------
@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (lambda x: x.reshape(-1).to("meta"), "on meta"),
        (lambda x: x.reshape(-1).to_sparse(), "sparse"),
        (lambda x: torch.nested.nested_tensor([x.reshape(-1)]), "nested"),
    ],
    ids=["meta", "sparse", "nested"],
)
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_an_unusual_result_fails_with_a_reason_e7(answer, said):
    r = ex.check_exercise("05-flatten-any", answer)
    assert r.status == FAILED and said in r.reason, r
    assert "Smallest failing input found" in str(r)
    r.figure(), r.alt_text()  # the picture of the failure is drawn, or skipped, without raising


# ----- E14: an Exercise whose signature does not parse is refused when it is built ----------------------
@pytest.mark.parametrize("signature", ["def f(x", "def f(x=)", "def f(x):"])
def test_an_exercise_signature_that_does_not_parse_is_refused_e14(signature):
    with pytest.raises(
        ValueError, match=r"^Exercise\(\): `signature` must look like .*a def that parses.*got 'def f\(x"
    ):
        dataclasses.replace(ex.get("05-can-expand"), id="99-bad-signature", signature=signature)


# ----- E15: an extra rule returning neither None nor a str -------------------------------------------------
@pytest.mark.parametrize("returned", [True, 5])
def test_an_extra_rule_returning_a_non_str_names_the_rule_e15(returned):
    rule = named_rule("my_rule", lambda args, out: returned)
    with pytest.raises(TypeError, match=r"^check\(\): the extra rule 'my_rule' returned .* a rule returns None"):
        check(lambda x: x, lambda x: x, _ARGS, extra=[rule])


# ----- D17: no_python_loops returning something other than an argument tuple -------------------------------
def test_no_python_loops_returning_a_tensor_is_refused_d17():
    rules = Rules(no_python_loops=lambda n: torch.arange(float(n)))  # should be (torch.arange(float(n)),)
    with pytest.raises(TypeError, match=r"^check\(\): `no_python_loops` must be a function n -> the argument tuple"):
        check(lambda x: x * 2, lambda x: x * 2, _ARGS, rules=rules)


# ----- D24: bad arguments to the rules API name the function called ----------------------------------------
def test_the_rules_api_names_itself_on_bad_arguments_d24():
    with pytest.raises(TypeError, match=r"^Rules\(\): `forbid` must be a tuple of names from .*got tuple"):
        Rules(forbid=(["repeat"],))
    forbid_problem, loop_problem, op_recorder = (
        _public("forbid_problem"),
        _public("loop_problem"),
        _public("OpRecorder"),
    )
    rec = op_recorder()
    with pytest.raises(TypeError, match=r"^forbid_problem\(\): `rules` must be a Rules"):
        forbid_problem(None, rec)
    with pytest.raises(TypeError, match=r"^loop_problem\(\): `small` must be the record of one run"):
        loop_problem(None, rec, 3, 6)
    with pytest.raises(TypeError, match=r"^OpRecorder.first_hit\(\): `family` must be a str; got list"):
        rec.first_hit(["x"])


# ----- D25: a rule's name may not be empty ------------------------------------------------------------------
@pytest.mark.parametrize("label", ["", "  "])
def test_named_rule_refuses_an_empty_name_d25(label):
    with pytest.raises(ValueError, match=r"^named_rule\(\): `label` must be a non-empty str"):
        named_rule(label, lambda args, out: None)


# ----- E19: a dtype of raw bits draws no numbers --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bits8, torch.bits16])
def test_tensors_refuses_a_dtype_of_raw_bits_e19(dtype):
    with pytest.raises(TypeError, match=r"^tensors\(\): `dtype` must be a torch.dtype of plain numbers"):
        ex.tensors(dtype=dtype)
