"""viewlab.sentinels: views_only agrees with storage sharing, watch_broadcasts reports exactly the mutual
stretches, and both name the learner's line (in a real kernel too). What IPython keeps alive: test_ipython.py."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from tests.unit.test_ipython import run_in_kernel
from viewlab import shares_storage
from viewlab.errors import BroadcastStretchError, BroadcastWarning, CopyError
from viewlab.sentinels import _mutual_stretch, views_only, watch_broadcasts
from viewlab.viewops import OP_CASES

pytestmark = pytest.mark.colab  # also run on Colab's stack (IPython 7.34): make test-colab


def _results(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


# ---------------------------------------------------------------------- views_only


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: f"{c.op}: {c.code}")
def test_views_only_agrees_with_storage_sharing_on_every_listed_op(case):
    """Every view op of PyTorch's list, every copying op and every layout-dependent op: views_only raises
    exactly when the result does not share the input's storage."""
    x = case.make_input()
    bases = [x._indices(), x._values()] if x.layout == torch.sparse_coo else [x]  # where a sparse tensor's memory is
    # Some expressions build a helper tensor themselves (torch.empty(...) to copy a shape from, an index
    # tensor): that allocation is new storage too, and views_only must say so.
    builds = any(f"torch.{f}(" in case.code for f in ("empty", "tensor", "zeros", "ones", "arange"))
    expected_view = all(any(shares_storage(r, b) for b in bases) for r in _results(case.apply(x)))
    x = case.make_input()
    try:
        with views_only():
            case.apply(x)
        raised = False
    except CopyError:
        raised = True
    assert raised == (not expected_view or builds), (
        f"{case.code}: shares storage {expected_view}, builds a tensor {builds}, views_only raised {raised}"
    )
    assert _get_current_dispatch_mode_stack() == [] and _get_current_function_mode_stack() == []


def test_copy_error_names_the_call_the_layout_and_the_blocking_dims():
    x = torch.arange(6.0).view(2, 3).t()  # shape (3, 2), stride (1, 3)
    with pytest.raises(CopyError) as err:
        with views_only():
            x.reshape(6)
    text = str(err.value)
    assert "Tensor.reshape made new storage (24 bytes" in text
    assert "shape (3, 2), stride (1, 3), offset 0" in text
    assert "dims 0 and 1: stride[0] = 1 but stride[1] * size[1] = 3 * 2 = 6" in text
    assert "test_sentinels.py" in text, "the learner's own line is named"
    assert "allow=('reshape',)" in text


def test_contiguous_of_a_non_contiguous_input_is_explained_and_allow_lets_it_through():
    x = torch.arange(6.0).view(2, 3).t()
    with pytest.raises(CopyError, match="was not contiguous, so contiguous\\(\\) had to copy it"):
        with views_only():
            x.contiguous()
    with views_only(allow=("contiguous",)):
        y = x.contiguous()
    with views_only():
        z = y.contiguous()  # already contiguous: the same tensor, no copy
    assert z is y


def test_views_in_place_ops_and_metadata_pass():
    x = torch.zeros(4, 3)
    with views_only():
        v = x[1:].t().unsqueeze(0).expand(2, 3, 3)
        x.add_(1)
        x[0].fill_(5)
        shape, stride, contiguous = x.shape, x.stride(), v.is_contiguous()
    assert v.shape == (2, 3, 3) and float(x[0, 0]) == 5.0 and shape == (4, 3) and stride == (3, 1)
    assert contiguous is False


def test_arithmetic_and_factories_are_copies():
    x = torch.ones(3)
    for action in (lambda: x * 2, lambda: torch.zeros(3), lambda: x.sum()):
        with pytest.raises(CopyError, match="made new storage"):
            with views_only():
                action()


def test_views_only_as_a_decorator_and_bad_allow():
    @views_only()
    def first_row(t):
        return t[0]

    assert first_row(torch.ones(2, 2)).shape == (2,)
    with pytest.raises(
        TypeError, match=r"views_only\(\): `allow` must be operator names such as \('reshape', 'clone'\)"
    ):
        views_only(allow=3)
    with pytest.raises(TypeError, match=r"views_only\(\): `allow` .* got list \['reshape', ''\]"):
        views_only(allow=["reshape", ""])
    with pytest.raises(TypeError, match=r"^views_only\(\): used as a decorator, this needs a function, got int"):
        views_only()(5)
    with pytest.raises(TypeError, match=r"^watch_broadcasts\(\): used as a decorator"):
        watch_broadcasts()("not a function")


# ---------------------------------------------------------------------- one guard, several threads

WAIT_S = 60  # generous: an event that does not come within this is a hang, not a slow machine
GUARDS = {"views_only": views_only, "watch_broadcasts": lambda: watch_broadcasts(action="raise")}
# What each guard stops, and something it lets through.
CAUGHT = {
    "views_only": (CopyError, lambda: torch.zeros(2) + 1),
    "watch_broadcasts": (BroadcastStretchError, lambda: torch.zeros(3, 1) - torch.zeros(3)),
}


def _stacks() -> tuple[list, list]:
    return _get_current_dispatch_mode_stack(), _get_current_function_mode_stack()


def _in_thread(fn) -> list:
    """Run fn on a new thread; what it returned (or raised), once it is done."""
    box: list = []
    thread = threading.Thread(target=lambda: box.append(_call(fn)), daemon=True)
    thread.start()
    thread.join(WAIT_S)
    assert box, "the thread did not finish"
    return box[0]


def _call(fn):
    try:
        return fn()
    except BaseException as err:  # noqa: BLE001 - handed back to the test thread
        return err


@pytest.mark.parametrize("name", GUARDS)
def test_one_guard_on_two_threads_keeps_each_threads_mode(name):
    """Regression: a guard's active modes were one list for all threads, so the first thread to leave took
    the other's mode and left its own on its stack for good (every allocation there raised afterwards)."""
    guard, (caught, bad) = GUARDS[name](), CAUGHT[name]
    both_in, first_out, results = threading.Barrier(2, timeout=WAIT_S), threading.Event(), {}

    def first():
        with guard:
            both_in.wait()
        first_out.set()  # the first thread in leaves first, while the second is still inside
        results["first after"] = (_call(bad), _stacks())

    def second():
        with guard:
            both_in.wait()
            assert first_out.wait(WAIT_S)
            results["second still guarded"] = isinstance(_call(bad), caught)
        results["second after"] = (_call(bad), _stacks())

    threads = [threading.Thread(target=f, daemon=True) for f in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert results.get("second still guarded"), results
    for key in ("first after", "second after"):
        value, stacks = results[key]
        assert isinstance(value, torch.Tensor) and stacks == ([], []), (key, value, stacks)
    assert _stacks() == ([], [])


@pytest.mark.parametrize("name", GUARDS)
def test_a_decorated_function_called_concurrently_and_recursively(name):
    """Two threads inside one decorated function at once, leaving first in, first out (the order a shared list
    of active modes got wrong); each call is a guard of its own, recursion too."""
    caught, bad = CAUGHT[name]
    barrier, turn, order = threading.Barrier(2, timeout=WAIT_S), threading.Condition(), []

    @GUARDS[name]()
    def inside(depth: int):
        if depth:
            return inside(depth - 1)
        with turn:
            order.append(threading.get_ident())
        barrier.wait()
        outcome = _call(bad)
        with turn:
            assert turn.wait_for(lambda: order[0] == threading.get_ident(), WAIT_S)
        return outcome

    outcomes = []

    def run():
        outcome = inside(2)
        outcomes.append((outcome, _stacks(), _call(bad)))
        with turn:
            order.pop(0)
            turn.notify_all()

    threads = [threading.Thread(target=run, daemon=True) for _ in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    checks = [(isinstance(o, caught), s, isinstance(after, torch.Tensor)) for o, s, after in outcomes]
    assert checks == [(True, ([], []), True)] * 2, outcomes
    assert _stacks() == ([], []) and isinstance(bad(), torch.Tensor)


@pytest.mark.parametrize("name", GUARDS)
def test_exit_without_enter_and_enter_twice_are_clear_errors(name):
    guard = GUARDS[name]()
    with pytest.raises(RuntimeError, match=rf"^{name}\(\): __exit__ without __enter__ on this thread"):
        guard.__exit__(None, None, None)
    with guard:
        with pytest.raises(RuntimeError, match=rf"^{name}\(\): this guard is already active on this thread"):
            guard.__enter__()
        assert isinstance(_call(CAUGHT[name][1]), CAUGHT[name][0])
        # Another thread ends the block (a generator suspended inside it, closed there): the guard is
        # disarmed at once, and this thread's own exit afterwards only tidies up (tests/fuzz: E4).
        assert _in_thread(lambda: guard.__exit__(None, None, None)) is None
        assert not isinstance(_call(CAUGHT[name][1]), Exception)
    assert _stacks() == ([], [])
    with pytest.raises(RuntimeError, match=rf"^{name}\(\): __exit__ without __enter__ on this thread"):
        guard.__exit__(None, None, None)  # a third exit has nothing left to end


def test_exits_out_of_order_remove_exactly_their_own_modes():
    """Regression: the torch-function mode was popped from the top, so leaving an outer guard before an inner
    one took the inner guard's recorder and left the outer's behind."""
    outer, inner = views_only(), watch_broadcasts(action="raise")
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)
    assert isinstance(torch.zeros(2) + 1, torch.Tensor)  # views_only is gone
    with pytest.raises(BroadcastStretchError, match=r"^watch_broadcasts\(\): Tensor.sub \(aten"):
        torch.zeros(3, 1) - torch.zeros(3)  # watch_broadcasts is not, and its recorder still names the call
    inner.__exit__(None, None, None)
    assert _stacks() == ([], [])


# ---------------------------------------------------------------------- watch_broadcasts


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@settings(max_examples=300, deadline=None)
@given(a=shapes, b=shapes)
def test_watch_broadcasts_reports_exactly_the_mutual_stretches(a, b):
    """Operands made before the watch (where their size-1 dims came from is not known): every stretch against
    each other is reported, size-0 dims included (0 was once the "missing dim" marker and hid them); an operand
    that only gains leading 1s, as (3,) against (1, 1), is read as it is: one-sided, silent."""
    try:
        result = torch.broadcast_shapes(a, b)
    except RuntimeError:
        return
    x, y = torch.zeros(a), torch.zeros(b)

    def read_as_it_is(shape):  # the result's shape once size-1 dims are added in front: no element read twice
        return (1,) * (len(result) - len(shape)) + shape == tuple(result)

    mutual = len(a) > 0 and len(b) > 0 and not read_as_it_is(a) and not read_as_it_is(b)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with watch_broadcasts():
            x + y
    reported = [w for w in seen if issubclass(w.category, BroadcastWarning)]
    assert len(reported) == mutual, f"{a} + {b} -> {result}: mutual {mutual}, reported {len(reported)}"
    assert (_mutual_stretch([a, b]) is not None) == mutual


def test_the_classic_loss_bug_is_caught_with_shapes_dims_and_fix():
    pred, target = torch.zeros(8, 1), torch.zeros(8)
    with pytest.raises(BroadcastStretchError) as err:
        with watch_broadcasts(action="raise"):
            ((pred - target) ** 2).mean()
    text = str(err.value)
    assert "(8, 1) and (8,) to (8, 8)" in text and "64 elements" in text
    assert "operand 0 (8, 1) along dim 1 (1 -> 8)" in text and "operand 1 (8,) along dim 0 (missing -> 8)" in text
    assert "squeeze dim 1 of operand 0 ((8, 1) -> (8,))" in text and "allow_outer=True" in text


def test_loss_functions_with_different_input_and_target_shapes_are_reported():
    pred, target = torch.zeros(8, 1), torch.zeros(8)
    with pytest.raises(BroadcastStretchError, match=r"mse_loss got input of shape \(8, 1\) and target of shape \(8,\)"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch's own size warning for mse_loss
            with watch_broadcasts(action="raise"):
                torch.nn.functional.mse_loss(pred, target)
    with watch_broadcasts(action="raise"):
        torch.nn.MSELoss()(pred.squeeze(1), target)  # fixed: silent


@pytest.mark.parametrize(("pred", "target"), [((3, 1), (3,)), ((3,), (3, 1)), ((0,), (0, 1))])
def test_a_loss_that_stretches_its_pair_inside_gets_the_losss_own_report(pred, target):
    """hinge_embedding_loss broadcasts input and target in a `where` of its own: that operator does not report
    the pair first (once per call), so the one report names the loss and the shapes it was given."""
    found: list[str] = []
    with watch_broadcasts(action=found.append):
        torch.nn.functional.hinge_embedding_loss(torch.zeros(pred), torch.ones(target))
    assert (
        len(found) == 1 and f"hinge_embedding_loss got input of shape {pred} and target of shape {target}" in found[0]
    )


@pytest.mark.parametrize(
    ("left", "right"),
    [((16, 32), (32,)), ((2, 3, 5, 5), (1, 3, 1, 1)), ((4, 4), ()), ((3, 1), (3, 4)), ((2, 8, 8), (8, 8))],
)
def test_one_sided_broadcasts_are_silent(left, right):
    with watch_broadcasts(action="raise"):
        torch.zeros(left) * torch.ones(right)
        torch.zeros(left) * 2.0


def test_allow_outer_tells_an_intended_outer_product_from_the_n1_accident():
    """Regression: allow_outer=True silenced the (N, 1) - (N,) accident along with the outer product."""
    a, b = torch.arange(3.0), torch.arange(4.0)
    col = a[:, None]  # made before the watch: where its size-1 dim came from is not seen
    with pytest.raises(BroadcastStretchError, match="dim 1 of operand 0 has size 1 from before the watch began"):
        with watch_broadcasts(action="raise"):
            col * b
    with watch_broadcasts(action="raise", allow_outer=True):
        outer = col * b  # allow_outer: size-1 dims made before the block count as meant
        pred = torch.nn.Linear(2, 1)(torch.ones(4, 2))  # (4, 1), made by the model inside the block
    assert outer.shape == (3, 4)
    with pytest.raises(BroadcastStretchError, match=r"size 1 from torch.nn.functional.linear"):
        with watch_broadcasts(action="raise", allow_outer=True):
            pred = torch.nn.Linear(2, 1)(torch.ones(4, 2))
            pred - torch.zeros(4)  # the accident is still reported


def test_bad_watch_arguments():
    with pytest.raises(ValueError, match=r"^watch_broadcasts\(\): `action` must be 'warn', 'raise' or a function"):
        watch_broadcasts(action="log")
    with pytest.raises(ValueError, match=r"`action` .*; got int 3"):
        watch_broadcasts(action=3)  # not a str either: still a ValueError, as before
    with pytest.raises(TypeError, match=r"^watch_broadcasts\(\): `allow_outer` must be True or False; got str 'yes'"):
        watch_broadcasts(allow_outer="yes")
    assert _get_current_dispatch_mode_stack() == []


# ---------------------------------------------------------------------- in a real kernel


@pytest.mark.kernel
def test_in_a_kernel_the_error_names_the_line_of_the_cell():
    texts = run_in_kernel(
        [
            "from viewlab import views_only\nimport torch\nx = torch.zeros(2, 3).t()\ntry:\n"
            "    with views_only():\n        y = x.reshape(6)\nexcept Exception as err:\n    print(err)",
        ]
    )
    assert "At line 6 of this cell: y = x.reshape(6)" in texts[0], texts[0]


def test_viewlabs_own_helpers_are_not_reported_but_the_same_code_in_yours_is():
    from viewlab.attention import padding_mask

    lengths = torch.tensor([3, 1])
    with watch_broadcasts(action="raise"):
        mask = padding_mask(lengths, 4)  # built inside viewlab by comparing (1, L) with (B, 1): not your code
    assert mask.shape == (2, 1, 1, 4)
    row, col = torch.arange(4)[None, :], lengths[:, None]  # made before the watch: not known to be meant
    with pytest.raises(BroadcastStretchError, match=r"\(1, 4\) and \(2, 1\) to \(2, 4\)"):
        with watch_broadcasts(action="raise"):
            _ = row < col  # the same comparison written here: reported


@pytest.mark.parametrize("watch_outside", [True, False], ids=["watch-outside-measure", "watch-inside-measure"])
def test_an_operator_run_inside_measure_is_still_yours(watch_outside):
    """measure's dispatch mode passes the learner's operator on from viewlab code; that must not make it
    'viewlab's own' (it did: a mutual broadcast inside `with measure():` went unreported)."""
    from viewlab import measure
    from viewlab.attention import padding_mask

    def run():
        if watch_outside:
            with watch_broadcasts(action="raise"), measure():
                yield
        else:
            with measure(), watch_broadcasts(action="raise"):
                yield

    with pytest.raises(BroadcastStretchError, match=r"\(1, 4\) and \(4, 1\) to \(4, 4\)"):
        for _ in run():
            _ = torch.ones(1, 4) + torch.ones(4, 1)
    for _ in run():
        mask = padding_mask(torch.tensor([3, 1]), 4)  # viewlab's own helper, inside measure: still not reported
    assert mask.shape == (2, 1, 1, 4)


def test_a_mode_under_a_guard_still_sees_the_learners_operators_as_the_learners():
    """Regression: a guard's call recorder (a torch-function mode in viewlab) sat between a mode entered under
    the guard and the learner's code, so every operator looked like viewlab's own (the notebook run's count of
    stretches, entered under its watch, saw none)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from viewlab._dispatch import enter_mode, remove_mode
    from viewlab._learner import called_from_viewlab
    from viewlab.attention import padding_mask

    here, seen = (lambda: 0).__code__.co_filename, []

    class Below(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((str(func), called_from_viewlab(here)))
            return func(*args, **(kwargs or {}))

    below = Below()
    enter_mode(below)
    try:
        with watch_broadcasts(action="raise"):
            lengths = torch.ones(2, dtype=torch.long) + 1
            mine = len(seen)
            padding_mask(lengths, 3)
    finally:
        remove_mode(below)
    assert mine and not any(v for _, v in seen[:mine]), seen[:mine]
    assert seen[mine:] and all(v for _, v in seen[mine:]), seen[mine:]


def test_views_only_says_cat_copies_its_inputs_rather_than_creating_from_scratch():
    x = torch.ones(2, 3)
    with pytest.raises(CopyError, match=r"Why: it copies its 2 input tensors into new memory"):
        with views_only():
            torch.cat([x, x])
