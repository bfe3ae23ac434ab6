"""The notebook run's own hooks: ``python -m pytest notebooks`` (flags in pytest.ini beside this file).

nbval executes each notebook once, in one kernel, and compares every stored output. Two more checks ride on
that same execution, so no notebook is executed twice:

* **gpu cells.** nbval has no conditional skip. Cells tagged ``gpu`` need a CUDA device; without one they
  are skipped with a visible reason (``-ra`` lists it) instead of failing or silently passing.
* **watch_broadcasts, no false alarm.** Before a notebook's first cell, ``viewlab.watch_broadcasts()`` is
  entered in its kernel and stays active to the last cell, as a learner would run it. Its reports are
  collected per cell, and so is every stretch of operands against each other, meant or not (a plain count
  beside the watch, which reports only those whose size-1 dims were not made on purpose). A cell may stretch
  or be reported only if it is tagged ``mutual-broadcast`` (it stretches operands against each other: an
  outer product, a mask, or a cell that shows the ``(N, 1) - (N,)`` bug), and every cell so tagged must
  stretch, so the tags cannot go stale. Either failure fails that cell. The run's summary lists the tagged
  cells the watch reported and those it took as meant.

The watch's state lives in the kernel under ``_vl_*`` names and is read back by *silent* requests, which
IPython does not count as cells (no execution count, no ``pre_run_cell`` event, no output), so the
notebooks' own outputs are unchanged.

Example, a notebook whose cell subtracts ``(4,)`` from ``(4, 1)`` without the tag fails with::

    watch_broadcasts() reported in a cell not tagged 'mutual-broadcast': ...
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from viewlab._learner import own_code_name

GPU_TAG = "gpu"
MUTUAL_TAG = "mutual-broadcast"
SILENT_TIMEOUT_S = 60

# Runs silently in the kernel before the first cell. A function as `action` collects each report's text and
# lets the code go on, so one report does not change what the cell does or prints. A silent request still
# replaces IPython's `last_execution_result` (notebook 06 prints what it holds), so the hook keeps the last
# real cell's result and every silent request puts it back (RESTORE, evaluated after the request's code). It
# keeps it inside a module object, which release_ipython_refs' walk from the learner's names does not enter:
# a list in the namespace would make that result look held by the learner (notebook 06 would free 0 B).
# The count is a dispatch mode of its own, entered before the watch (under it, so the watch's report names the
# cell's line, not this code's): every pointwise operator of the cell's own code (not viewlab's) whose operands
# are stretched against each other, whether the watch reports it or not.
PRELUDE = """
import json as _vl_json
import torch as _vl_torch
from torch.utils._python_dispatch import TorchDispatchMode as _VlMode
from viewlab import watch_broadcasts as _vl_watch_broadcasts
from viewlab._dispatch import enter_mode as _vl_enter
from viewlab._learner import called_from_viewlab as _vl_from_viewlab
from viewlab.sentinels import _mutual_stretch as _vl_mutual
_vl_reports, _vl_stretches = [], []
_vl_state = __import__("types").ModuleType("_vl_state")  # a module: viewlab.ipython's walk does not enter one
_vl_state.last = [get_ipython().last_execution_result]
get_ipython().events.register("post_run_cell", lambda result: _vl_state.last.__setitem__(0, result))
_vl_here = (lambda: 0).__code__.co_filename  # this code's own frames are not the cell's
class _VlStretches(_VlMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        shapes = [tuple(a.shape) for a in args if isinstance(a, _vl_torch.Tensor) and a.dim() > 0]
        if _vl_torch.Tag.pointwise in func.tags and len(shapes) >= 2:
            try:
                mutual = _vl_mutual(shapes)
            except RuntimeError:
                mutual = None
            if mutual and not _vl_from_viewlab(_vl_here):
                _vl_stretches.append(f"{func} broadcast {' and '.join(map(str, shapes))}")
        return out
_vl_enter(_VlStretches())
_vl_guard = _vl_watch_broadcasts(action=_vl_reports.append)
_vl_guard.__enter__()
"""
RESTORE = (
    "(setattr(get_ipython(), 'last_execution_result', _vl_state.last[0]),"
    " setattr(get_ipython(), 'last_execution_succeeded', _vl_state.last[0] is None or _vl_state.last[0].success))"
)
# Evaluated silently after each cell: the reports and stretches since the last read, then cleared.
TAKE = "(_vl_json.dumps([_vl_reports, _vl_stretches]), _vl_reports.clear(), _vl_stretches.clear())[0]"
TAGGED: dict[str, tuple[int, int]] = {}  # tagged cell -> (stretches, reports), for the run's summary


def _tags(item: pytest.Item) -> list[str]:
    return (getattr(item, "cell", None) or {}).get("metadata", {}).get("tags", [])


def _is_cell(item: pytest.Item) -> bool:
    return hasattr(item, "cell") and hasattr(item.parent, "kernel")


def pytest_configure(config: pytest.Config) -> None:
    # nbval opens the sanitize file relative to the working directory; pytest.ini names it relative to
    # itself, so `python -m pytest notebooks` works from the repository root and from notebooks/ alike.
    name = getattr(config.option, "nbval_sanitize_with", None)
    if name and not Path(name).is_absolute() and not Path(name).exists():
        beside = config.rootpath / name
        if beside.exists():
            config.option.nbval_sanitize_with = str(beside)


def _cuda_available() -> bool:
    import torch  # imported here, not at module load, so collecting stays cheap

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [i for i in items if GPU_TAG in _tags(i)]
    if not gpu_items or _cuda_available():
        return
    marker = pytest.mark.skip(reason="cell tagged 'gpu' needs CUDA; torch.cuda.is_available() is False here")
    for item in gpu_items:
        item.add_marker(marker)


def _silent(kernel, code: str, expressions: dict[str, str] | None = None) -> dict:
    """Run ``code`` in nbval's kernel without it counting as a cell; the execute reply's content."""
    msg_id = kernel.kc.execute(
        code,
        silent=True,
        store_history=False,
        user_expressions={**(expressions or {}), "restore": RESTORE},
        allow_stdin=False,
        stop_on_error=False,
    )
    while True:
        reply = kernel.get_message("shell", timeout=SILENT_TIMEOUT_S)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    kernel.await_idle(msg_id, SILENT_TIMEOUT_S)  # its iopub messages, so none is left for the next cell
    content = reply["content"]
    if content["status"] != "ok":
        raise RuntimeError(f"the watch_broadcasts() probe failed in the kernel: {content.get('evalue')}")
    restored = content["user_expressions"]["restore"]
    if restored["status"] != "ok":
        raise RuntimeError(f"could not restore the last execution result: {restored.get('evalue')}")
    return content


def _take_reports(kernel) -> tuple[list[str], list[str]]:
    found = _silent(kernel, "", {"reports": TAKE})["user_expressions"]["reports"]
    if found["status"] != "ok":
        raise RuntimeError(f"could not read watch_broadcasts() reports: {found.get('evalue')}")
    reports, stretches = json.loads(ast.literal_eval(found["data"]["text/plain"]))
    return reports, stretches


def watch_problem(tags: list[str], reports: list[str], stretches: list[str] = ()) -> str | None:
    """What is wrong with one cell's reports and stretches against each other (meant or not), or None.

    >>> watch_problem([], []) is None and watch_problem([MUTUAL_TAG], [], ["aten.mul.Tensor"]) is None
    True
    >>> watch_problem([MUTUAL_TAG], [])[:40]
    "cell tagged 'mutual-broadcast' stretched"
    >>> watch_problem([], [], ["aten.mul.Tensor broadcast (3, 1) and (1, 4)"])[:44]
    "a cell not tagged 'mutual-broadcast' stretch"
    """
    if MUTUAL_TAG in tags:
        if not reports and not stretches:
            return (
                f"cell tagged {MUTUAL_TAG!r} stretched no operands against each other under watch_broadcasts(); "
                "remove the tag"
            )
        return None
    if reports:
        shown = "\n---\n".join(r[:600] for r in reports)
        return (
            f"watch_broadcasts() reported in a cell not tagged {MUTUAL_TAG!r}: either the cell has a broadcasting "
            f"bug, or it stretches on purpose and needs the tag.\n{shown}"
        )
    if stretches:
        shown = "\n".join(stretches[:10])
        return (
            f"a cell not tagged {MUTUAL_TAG!r} stretched operands against each other (on purpose: watch_broadcasts()"
            f" did not report it); tag the cell.\n{shown}"
        )
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not _is_cell(item):
        return (yield)
    kernel = item.parent.kernel
    if not getattr(item.parent, "_vl_watching", False):
        # compiled under viewlab's own code name (viewlab._learner.own_code_name): not taken for the learner's code
        _silent(kernel, f"exec(compile({PRELUDE!r}, {own_code_name('nbval watch')!r}, 'exec'))")
        item.parent._vl_watching = True
    try:
        result = yield
    except BaseException:
        if kernel.is_alive():
            _take_reports(kernel)  # the next cell starts with none; this cell has already failed
        raise
    reports, stretches = _take_reports(kernel)
    if MUTUAL_TAG in _tags(item):
        TAGGED[item.nodeid] = (len(stretches), len(reports))
    problem = watch_problem(_tags(item), reports, stretches)
    if problem:
        item.raise_cell_error(problem)  # nbval's own failure report: the message, then the cell's source
    return result


def pytest_terminal_summary(terminalreporter) -> None:
    if TAGGED:
        meant = [name for name, (_, reports) in TAGGED.items() if not reports]
        terminalreporter.write_line(
            f"watch_broadcasts: {len(TAGGED)} tagged cells stretch operands against each other; "
            f"{len(TAGGED) - len(meant)} reported, {len(meant)} taken as meant: {', '.join(meant) or '-'}"
        )
