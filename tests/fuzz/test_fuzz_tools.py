"""Fuzzing the tools: measure, MemoryMonitor, the guards (views_only, watch_broadcasts), what IPython keeps
alive, the figure helpers and viewlab.course.versions. Every input gives a correct result or a clear error, changes no
input, hangs not, and leaves no thread or mode behind; the harness (strategies, bends, the clear-error rule,
the checks) is :mod:`tests.fuzz.harness`, shared with test_fuzz_api.py. The last test checks that every public
callable of the surface (``viewlab.__all__`` and the public submodules) is a target of one file or the other.
"""

from __future__ import annotations

import pkgutil
import threading
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import viewlab
import viewlab.course.bench
from tests.fuzz.harness import (
    FIGURES,
    Hang,
    Target,
    _fixed,
    _merge,
    _optional,
    fuzz,
    is_clear,
    public,
    run_with_time_limit,
    surface,
    uncovered,
)
from tests.fuzz.test_fuzz_api import TARGETS
from tests.fuzz.test_fuzz_claims import CLAIM_TARGETS

measure, MemoryMonitor, cuda_process_peak = public("measure"), public("MemoryMonitor"), public("cuda_process_peak")
views_only, watch_broadcasts, shares_storage = (
    public("views_only"),
    public("watch_broadcasts"),
    public("shares_storage"),
)
show_figure, draw_layout, render_png = public("show_figure"), public("draw_layout"), public("render_png")


def _measure_block(device: Any = None, log_ops: Any = False) -> tuple:
    with measure(device=device, log_ops=log_ops) as m:
        made = torch.ones(1, 8).repeat(4, 1)
    return m, made


def oracle_measure(kw: dict, result: Any, data: Any) -> None:
    m, made = result
    assert m.allocated_bytes == m.requested_bytes == made.numel() * made.element_size() == 128
    assert m.peak_bytes >= 128 and (m.ops != []) == bool(kw.get("log_ops", False))


def _monitor_cycle(**kwargs: Any) -> Any:
    mon = MemoryMonitor(**kwargs)
    with mon:
        keep = torch.zeros(256)
        mon.mark("made")
    assert keep.numel() == 256
    return mon


def oracle_monitor(kw: dict, result: Any, data: Any) -> None:
    assert not result.running and result.samples and [m.label for m in result.marks] == ["made"]
    if result.backend_kind == "storages":
        assert result.marks[0].allocated == 1024


_BASE = torch.arange(6.0).view(2, 3)


def _views_block(allow: Any = ()) -> Any:
    with views_only(allow=allow):
        return _BASE.t().unsqueeze(0)


def oracle_views(kw: dict, result: Any, data: Any) -> None:
    assert shares_storage(result, _BASE) and result.shape == (1, 3, 2)


def _alone_block() -> torch.Tensor:
    with views_only():  # a guard already on: torch_alone sets it aside in its block, then puts it back
        with viewlab.course.bench.torch_alone():
            inside = torch.ones(2).repeat(2)  # a copy, and no CopyError: the guard is aside
        with pytest.raises(viewlab.CopyError):
            torch.ones(2).repeat(2)  # the guard is back
    return inside


def oracle_alone(kw: dict, result: Any, data: Any) -> None:
    assert torch.equal(result, torch.ones(4))


def _watch_block(action: Any = "warn", allow_outer: Any = False) -> torch.Tensor:
    with watch_broadcasts(action=action, allow_outer=allow_outer):
        return torch.zeros(4, 3) + torch.ones(3)  # one-sided: never reported


def oracle_watch(kw: dict, result: Any, data: Any) -> None:
    assert result.shape == (4, 3) and float(result.sum()) == 12.0


def _shell() -> SimpleNamespace:
    return SimpleNamespace(user_ns={"Out": {1: torch.zeros(8)}, "kept": torch.ones(2)})


def oracle_held(kw: dict, result: Any, data: Any) -> None:
    history = "history" in (kw.get("sources") or ("history",))
    assert [h.where for h in result] == (["Out[1]"] if history else [])


def oracle_release(kw: dict, result: Any, data: Any) -> None:
    history = "history" in (kw.get("sources") or ("history",))
    assert result == (32 if history else 0)


def _figure_block(alt: Any = "a picture", dpi: Any = 100) -> Any:
    return show_figure(draw_layout(torch.arange(3)), alt=alt, dpi=dpi)


def oracle_figure(kw: dict, result: Any, data: Any) -> None:
    assert result.data.startswith(b"\x89PNG") and result.alt == kw.get("alt", "a picture").strip()


def oracle_png(kw: dict, result: Any, data: Any) -> None:
    assert result.startswith(b"\x89PNG")


def oracle_at_least(kw: dict, result: Any, data: Any) -> None:
    assert result is True


def oracle_false(kw: dict, result: Any, data: Any) -> None:
    assert result is False


_sources = st.sampled_from([("history",), ("traceback",), ("history", "result", "traceback"), "history"])

TOOL_TARGETS: list[Target] = [
    Target(
        "measure",
        _measure_block,
        _optional(device=st.sampled_from([None, "cpu", "cpu:0", torch.device("cpu")]), log_ops=st.booleans()),
        oracle_measure,
        examples=80,
        covers=measure,
    ),
    Target(
        "MemoryMonitor",
        _monitor_cycle,
        _merge(
            _fixed(display=st.just(False), interval=st.sampled_from([0.25, 1.0, 60.0])),
            _optional(
                device=st.sampled_from([None, "cpu"]),
                backend=st.sampled_from(["auto", "storages", "rss"]),
                rss=st.booleans(),
                title=st.just("t"),
                frames=st.sampled_from(["auto", "thread", "cell"]),
            ),
        ),
        oracle_monitor,
        examples=60,
        covers=MemoryMonitor,
    ),
    Target(
        "views_only",
        _views_block,
        _optional(allow=st.sampled_from([(), ("reshape",), "clone"])),
        oracle_views,
        examples=60,
        covers=views_only,
    ),
    Target(
        "watch_broadcasts",
        _watch_block,
        _optional(action=st.sampled_from(["warn", "raise", print]), allow_outer=st.booleans()),
        oracle_watch,
        examples=60,
        quiet=True,
        covers=watch_broadcasts,
    ),
    Target(
        "held_by_ipython",
        public("held_by_ipython"),
        _merge(_fixed(ip=st.builds(_shell)), _optional(sources=_sources)),
        oracle_held,
        examples=50,
    ),
    Target(
        "release_ipython_refs",
        public("release_ipython_refs"),
        _merge(_fixed(ip=st.builds(_shell)), _optional(sources=_sources)),
        oracle_release,
        examples=50,
    ),
    Target(
        "show_figure",
        _figure_block,
        _optional(alt=st.just(" three cells "), dpi=st.sampled_from([50, 100, 200.5])),
        oracle_figure,
        examples=20,
        covers=show_figure,
    ),
    Target(
        "render_png",
        render_png,
        _fixed(fig=st.builds(lambda: draw_layout(torch.arange(2)))),
        oracle_png,
        examples=10,
    ),
    Target(
        "torch_at_least",
        public("torch_at_least"),
        _merge(_fixed(version=st.sampled_from(["2.0", "2.5.0", "1"])), _optional(installed=st.just("2.11.0+cu128"))),
        oracle_at_least,
        examples=50,
    ),
]
TOOL_TARGETS += [
    Target(
        "resolve_device",
        public("resolve_device"),
        _optional(device=st.sampled_from([None, "cpu", "cpu:0", torch.device("cpu")])),
        lambda kw, result, data: None if result.type in ("cpu", "cuda") else pytest.fail(str(result)),
        examples=50,
    ),
    Target(
        "rss_bytes",
        public("rss_bytes"),
        st.just({}),
        lambda kw, result, data: None if result is None or result > 1_000_000 else pytest.fail(str(result)),
        examples=5,
    ),
    Target(
        "fmt_bytes",
        public("fmt_bytes"),
        _fixed(n=st.sampled_from([0, 1023, 1536, 3 * 2**20, -2048, None])),
        lambda kw, result, data: None if isinstance(result, str) and result else pytest.fail(repr(result)),
        examples=50,
    ),
    Target(
        "check_torch",
        public("check_torch"),
        st.just({}),
        lambda kw, result, data: None if result == [] else pytest.fail(str(result)),
        examples=3,
    ),
    Target("in_kernel", public("in_kernel"), st.just({}), oracle_false, examples=5),  # pytest is no kernel
    Target("torch_alone", _alone_block, st.just({}), oracle_alone, examples=3, covers=public("torch_alone")),
    Target("on_colab", public("on_colab"), st.just({}), oracle_false, examples=5),
]
if torch.cuda.is_available():
    TOOL_TARGETS.append(
        Target(
            "cuda_process_peak",
            cuda_process_peak,
            _optional(device=st.just("cuda")),
            lambda kw, result, data: None,
            examples=20,
        )
    )


@pytest.mark.parametrize("target", TOOL_TARGETS, ids=[t.name for t in TOOL_TARGETS])
def test_fuzz_tools(target: Target) -> None:
    fuzz(target)  # the same settings, strategies and checks as every target of test_fuzz_api


def test_without_cuda_the_cuda_functions_say_so_by_name():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: cuda_process_peak is fuzzed above")
    with pytest.raises(RuntimeError, match=r"cuda_process_peak\(\): device='cuda', but CUDA is not available here"):
        cuda_process_peak("cuda")
    with pytest.raises(ValueError, match=r"cuda_process_peak\(\): device='cpu': pass a CUDA device"):
        cuda_process_peak("cpu")


# Results a learner reads, not something a learner calls.
RECORDS = {
    public(name)
    for name in (
        "Layout",
        "BroadcastExplanation",
        "BroadcastFix",
        "OperandInfo",
        "DimStep",
        "OpCase",
        "OpTable",
        "BenchRow",
        "Comparison",
        "Exercise",
        "CheckResult",
        "Measurement",
        "OpRecord",
        "Sample",
        "Mark",
        "CellRecord",
        "HeldTensor",
        "Explorer",  # what explore() returns; its .tensor() is fuzzed with it
        "PNGFigure",
        "Behaviour",
        "Claim",  # written by the course's authors; a learner gets one from claims.get()
    )
}
# Public modules whose callables are not held to the clear-error rule, and why.
EXEMPT = {
    "viewlab.course.claims.article_code": "the source articles' examples rebuilt with their flaws: what torch raises "
    "on bad input is part of the evidence a claim checks (notebook 07 prints their source)",
}
# The public surface the fuzz suite must cover, by module: the toolbox's face, its public submodules and the
# course's exercises and claims (the harness's SURFACE lists old homes of moved modules too).
REQUIRED = (
    "viewlab",
    "viewlab.attention",
    "viewlab.course.bench",
    "viewlab.course.versions",
    "viewlab.ipython",
    "viewlab.course.exercises",
    "viewlab.course.claims",
)


def test_every_public_callable_of_the_surface_is_fuzzed():
    """A new public function (in viewlab.__all__ or a public submodule's __all__) needs a Target in
    test_fuzz_api.py, test_fuzz_claims.py or here; a new result class needs a place in RECORDS."""
    # cuda_process_peak: fuzzed where CUDA exists; its no-CUDA errors are checked above.
    targets = (
        TARGETS + TOOL_TARGETS + CLAIM_TARGETS + [Target("cuda_process_peak", cuda_process_peak, st.just({}), print)]
    )
    missing = uncovered(targets, RECORDS, EXEMPT)
    assert not missing, f"add these to TARGETS, TOOL_TARGETS or CLAIM_TARGETS: {missing}"


def test_the_surface_is_read_from_the_modules_themselves():
    """Every required module is read, and so is every public top-level module of viewlab (found by walking the
    package, not listed by hand): a new public module cannot escape the fuzz suite."""
    read = {m.__name__ for m in surface()}
    assert set(REQUIRED) <= read, sorted(set(REQUIRED) - read)
    found = {f"viewlab.{m.name}" for m in pkgutil.iter_modules(viewlab.__path__) if not m.name.startswith("_")}
    found -= {"viewlab.course", "viewlab.errors"}  # the course's own modules are REQUIRED; errors holds exceptions
    assert found <= read, f"add to harness.SURFACE: {sorted(found - read)}"
    counted = [n for m in surface() for n in getattr(m, "__all__", ()) if callable(getattr(m, n))]
    assert {"get", "table", "counts", "judge", "show", "format_table", "torch_at_least", "held_by_ipython"} <= set(
        counted
    )


def test_the_harness_fails_a_hang_and_what_a_call_leaves_on_its_thread():
    """The checks around every call can fail: a call that does not answer (on Windows too: no signal), a
    dispatch mode left pushed and grad mode left off on the thread that ran the call (torch keeps both per
    thread, so they are read there)."""
    release = threading.Event()
    answered = threading.Event()

    def waits() -> None:
        release.wait(30)
        answered.set()

    with pytest.raises(Hang, match=r"(?s)no answer within 0.2 s; the call was at:\n.*release.wait\(30\)"):
        run_with_time_limit(waits, 0.2)
    assert not answered.is_set()  # the limit fired while the call was still waiting (no clock read here)
    release.set()  # let the worker finish: no thread outlives the test
    outcome = run_with_time_limit(lambda: 1 + 1, 5)
    assert (outcome.result, outcome.error, outcome.after) == (2, None, outcome.before)

    def leaves_a_mode() -> None:
        TorchDispatchMode().__enter__()

    for fn in (leaves_a_mode, lambda: torch.set_grad_enabled(False)):
        with pytest.raises(AssertionError, match="left a mode or grad mode behind on its thread"):
            fuzz(Target("leaky", fn, st.just({}), lambda kw, result, data: None, examples=1))
    assert torch.is_grad_enabled(), "only the worker thread's grad mode was turned off"
    FIGURES.pop("leaky")  # not a callable of viewlab: kept out of the run's figures


def test_a_clear_error_is_raised_in_viewlab_and_names_the_function_called():
    layout, noop = public("layout"), st.just({})
    with pytest.raises(TypeError) as err:
        layout(3)  # raised inside viewlab: "layout(): expects a torch.Tensor ..."
    assert is_clear(Target("layout", layout, noop, print), err.value)
    assert not is_clear(Target("storage_indices", layout, noop, print), err.value), "it names another function"
    with pytest.raises(TypeError) as mine:
        raise TypeError("layout(): raised here, in the test")
    assert not is_clear(Target("layout", layout, noop, print), mine.value), "raised outside viewlab"
