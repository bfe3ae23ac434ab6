"""The fuzz suite of tests/test_fuzz.py, extended to measure, MemoryMonitor, the sentinels, the figure helpers
and viewlab.versions: every input gives a correct result or a clear error, changes no input, hangs not, and
leaves no thread or mode behind. The harness (strategies, bends, clear-error rule, checks) is test_fuzz's.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import strategies as st

import viewlab
from tests.fuzz import test_fuzz as fuzz_harness
from tests.fuzz.test_fuzz import FIGURES, Target, _fixed, _merge, _optional
from viewlab import memory, monitor, sentinels, versions
from viewlab.draw import PNGFigure, render_png


def _measure_block(device: Any = None, log_ops: Any = False) -> tuple:
    with viewlab.measure(device=device, log_ops=log_ops) as m:
        made = torch.ones(1, 8).repeat(4, 1)
    return m, made


def oracle_measure(kw: dict, result: Any, data: Any) -> None:
    m, made = result
    assert m.allocated_bytes == m.requested_bytes == made.numel() * made.element_size() == 128
    assert m.peak_bytes >= 128 and (m.ops != []) == bool(kw.get("log_ops", False))


def _monitor_cycle(**kwargs: Any) -> monitor.MemoryMonitor:
    mon = viewlab.MemoryMonitor(**kwargs)
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
    with viewlab.views_only(allow=allow):
        return _BASE.t().unsqueeze(0)


def oracle_views(kw: dict, result: Any, data: Any) -> None:
    assert viewlab.shares_storage(result, _BASE) and result.shape == (1, 3, 2)


def _watch_block(action: Any = "warn", allow_outer: Any = False) -> torch.Tensor:
    with viewlab.watch_broadcasts(action=action, allow_outer=allow_outer):
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


def _figure_block(alt: Any = "a picture", dpi: Any = 100) -> PNGFigure:
    return viewlab.show_figure(viewlab.draw_layout(torch.arange(3)), alt=alt, dpi=dpi)


def oracle_figure(kw: dict, result: Any, data: Any) -> None:
    assert result.data.startswith(b"\x89PNG") and result.alt == kw.get("alt", "a picture").strip()


def oracle_png(kw: dict, result: Any, data: Any) -> None:
    assert result.startswith(b"\x89PNG")


def oracle_at_least(kw: dict, result: Any, data: Any) -> None:
    assert result is True


_sources = st.sampled_from([("history",), ("traceback",), ("history", "result", "traceback"), "history"])

TOOL_TARGETS: list[Target] = [
    Target(
        "measure",
        _measure_block,
        _optional(device=st.sampled_from([None, "cpu", "cpu:0", torch.device("cpu")]), log_ops=st.booleans()),
        oracle_measure,
        examples=80,
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
    ),
    Target(
        "views_only",
        _views_block,
        _optional(allow=st.sampled_from([(), ("reshape",), "clone"])),
        oracle_views,
        examples=60,
    ),
    Target(
        "watch_broadcasts",
        _watch_block,
        _optional(action=st.sampled_from(["warn", "raise", print]), allow_outer=st.booleans()),
        oracle_watch,
        examples=60,
        quiet=True,
    ),
    Target(
        "held_by_ipython",
        sentinels.held_by_ipython,
        _merge(_fixed(ip=st.builds(_shell)), _optional(sources=_sources)),
        oracle_held,
        examples=50,
    ),
    Target(
        "release_ipython_refs",
        sentinels.release_ipython_refs,
        _merge(_fixed(ip=st.builds(_shell)), _optional(sources=_sources)),
        oracle_release,
        examples=50,
    ),
    Target(
        "show_figure",
        _figure_block,
        _optional(alt=st.just(" three cells "), dpi=st.sampled_from([50, 100, 200.5])),
        oracle_figure,
        examples=40,
    ),
    Target(
        "render_png",
        render_png,
        _fixed(fig=st.builds(lambda: viewlab.draw_layout(torch.arange(2)))),
        oracle_png,
        examples=20,
    ),
    Target(
        "torch_at_least",
        versions.torch_at_least,
        _merge(_fixed(version=st.sampled_from(["2.0", "2.5.0", "1"])), _optional(installed=st.just("2.11.0+cu128"))),
        oracle_at_least,
        examples=50,
    ),
]
TOOL_TARGETS += [
    Target(
        "resolve_device",
        memory.resolve_device,
        _optional(device=st.sampled_from([None, "cpu", "cpu:0", torch.device("cpu")])),
        lambda kw, result, data: None if result.type in ("cpu", "cuda") else pytest.fail(str(result)),
        examples=50,
    ),
    Target(
        "rss_bytes",
        memory.rss_bytes,
        st.just({}),
        lambda kw, result, data: None if result is None or result > 1_000_000 else pytest.fail(str(result)),
        examples=5,
    ),
    Target(
        "fmt_bytes",
        monitor.fmt_bytes,
        _fixed(n=st.sampled_from([0, 1023, 1536, 3 * 2**20, -2048, None])),
        lambda kw, result, data: None if isinstance(result, str) and result else pytest.fail(repr(result)),
        examples=50,
    ),
    Target(
        "check_torch",
        versions.check_torch,
        st.just({}),
        lambda kw, result, data: None if result == [] else pytest.fail(str(result)),
        examples=3,
    ),
]
if torch.cuda.is_available():
    TOOL_TARGETS.append(
        Target(
            "cuda_process_peak",
            memory.cuda_process_peak,
            _optional(device=st.just("cuda")),
            lambda kw, result, data: None,
            examples=20,
        )
    )


@pytest.mark.parametrize("target", TOOL_TARGETS, ids=[t.name for t in TOOL_TARGETS])
def test_fuzz_tools(target: Target) -> None:
    fuzz_harness.test_fuzz(target)  # the same settings, strategies and checks as every other target


def test_without_cuda_the_cuda_functions_say_so_by_name():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: cuda_process_peak is fuzzed above")
    with pytest.raises(RuntimeError, match=r"cuda_process_peak\(device='cuda'\), but CUDA is not available here"):
        memory.cuda_process_peak("cuda")
    with pytest.raises(ValueError, match=r"cuda_process_peak\(device='cpu'\): pass a CUDA device"):
        memory.cuda_process_peak("cpu")


def test_every_public_callable_of_the_tool_modules_is_fuzzed():
    wrapped = {
        "measure": viewlab.measure,
        "MemoryMonitor": viewlab.MemoryMonitor,
        "views_only": viewlab.views_only,
        "watch_broadcasts": viewlab.watch_broadcasts,
        "show_figure": viewlab.show_figure,
    }
    covered = {t.fn for t in TOOL_TARGETS} | {wrapped[t.name] for t in TOOL_TARGETS if t.name in wrapped}
    covered |= {memory.cuda_process_peak}  # fuzzed where CUDA exists, its no-CUDA errors checked above
    records = {
        PNGFigure,
        memory.Measurement,
        memory.OpRecord,
        sentinels.HeldTensor,
        versions.Behaviour,
        monitor.Sample,
        monitor.Mark,
        monitor.CellRecord,
    }  # results, not something a learner calls
    missing = []
    for module in (memory, monitor, sentinels, versions):
        for name in module.__all__:
            obj = getattr(module, name)
            if (
                callable(obj)
                and obj not in covered
                and obj not in records
                and not (isinstance(obj, type) and issubclass(obj, (Exception, Warning)))
            ):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, f"add these to TOOL_TARGETS: {missing}"


def test_zz_tool_fuzz_figures():
    rows = {name: FIGURES[name] for name in (t.name for t in TOOL_TARGETS) if name in FIGURES}
    tried = sum(r["tried"] for r in rows.values())
    rejected = sum(r["clear"] + r["unclear"] for r in rows.values())
    clear = sum(r["clear"] for r in rows.values())
    print(
        f"tool fuzz: {tried} inputs over {len(rows)} callables, {rejected} rejected, "
        f"{clear / rejected:.0%} of them clearly"
        if rejected
        else "no rejection"
    )
    assert all(r["unclear"] == 0 for r in rows.values())
