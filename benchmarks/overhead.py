"""What watching memory costs, as ratios: viewlab's tracker and monitor against an empty dispatch mode and peers.

One run, interleaved: each round times every condition once, in an order rotated from round to round, so the load
of a busy machine falls on all of them alike; the table reports each condition's median seconds per operator and
its ratio to the **floor** (an empty ``TorchDispatchMode``: the least any exact per-operator tracking written in
Python can cost) and to **off** (no tracking). Two workloads: ``small`` (16-float tensors: the per-operator
overhead dominates) and ``1mib`` (1 MiB tensors: the kernels' own work dominates).

Conditions: ``off``; ``empty mode`` (the floor); ``measure``; ``measure(log_ops)``; ``monitor off-screen``
(``display=False``: the sampling thread); ``monitor thread`` / ``monitor cell`` (a displayed monitor whose sampling
thread draws a frame up to 4 times a second and sends it / hands it to the cell's thread, which sends it between two
operators through one more dispatch mode); peers: ``torch.profiler`` (``profile_memory=True``) and
``MemTracker`` (``torch.distributed._tools.mem_tracker``, where importable). Only the workload inside each context
is timed, never its start or stop.

Not a test: timings vary by machine and load (tests/tooling/test_bench_suite.py runs it on a tiny op count and
checks only that it runs and prints its ratios). Writes benchmarks/results.md (a table) and results/overhead.json.

Usage: python benchmarks/overhead.py [--ops 10000] [--big-ops 400] [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import viewlab
from viewlab import MemoryMonitor, measure

HERE = Path(__file__).resolve().parent
RESULTS_MD, RESULTS_JSON = HERE / "results.md", HERE / "results" / "overhead.json"
WORKLOADS = {"small": 16, "1mib": 2**20 // 4}  # float32 elements per tensor


class EmptyMode(TorchDispatchMode):
    """The floor: a dispatch mode that only passes each operator on."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        return func(*args, **(kwargs or {}))


def workload(n_ops: int, numel: int) -> None:
    x = torch.ones(numel)
    for _ in range(n_ops // 2):
        y = x + 1  # one new tensor ...
        x = y * 1  # ... and another; the previous x dies each time


@contextlib.contextmanager
def _monitor(**kwargs: object) -> Iterator[None]:
    # A displayed monitor outside a kernel prints its widget's text: keep the report readable.
    with contextlib.redirect_stdout(io.StringIO()), MemoryMonitor(device="cpu", backend="storages", **kwargs):
        yield


def _mem_tracker() -> Callable[[], contextlib.AbstractContextManager] | None:
    try:
        from torch.distributed._tools.mem_tracker import MemTracker
    except Exception:  # noqa: BLE001 - an optional peer: absent from some builds
        return None
    return MemTracker


def conditions() -> dict[str, Callable[[], contextlib.AbstractContextManager]]:
    """Each condition as a factory of the context manager its workload runs in."""
    from torch.profiler import ProfilerActivity, profile

    found: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
        "off": contextlib.nullcontext,
        "empty mode": EmptyMode,
        "measure": lambda: measure(device="cpu"),
        "measure(log_ops)": lambda: measure(device="cpu", log_ops=True),
        "monitor off-screen": lambda: _monitor(display=False),
        "monitor thread": lambda: _monitor(display=True, frames="thread"),
        "monitor cell": lambda: _monitor(display=True, frames="cell"),
        "torch.profiler": lambda: profile(activities=[ProfilerActivity.CPU], profile_memory=True),
    }
    tracker = _mem_tracker()
    if tracker is not None:
        found["MemTracker"] = tracker
    return found


def time_one(factory: Callable[[], contextlib.AbstractContextManager], n_ops: int, numel: int) -> tuple[float, float]:
    """Seconds per operator of the workload inside one fresh context, and of the whole block (with its start and
    stop: a profiler does much of its work when it stops; a displayed monitor draws its final plot)."""
    begin = time.perf_counter()
    with factory():
        start = time.perf_counter()
        workload(n_ops, numel)
        seconds = time.perf_counter() - start
    return seconds / n_ops, (time.perf_counter() - begin) / n_ops


def run(ops: int, big_ops: int, rounds: int) -> dict:
    """Time every condition on both workloads, interleaved, and return medians and ratios."""
    conds = conditions()
    counts = {"small": ops, "1mib": big_ops}
    for factory in conds.values():  # warm-up: imports and first-use costs (torch._dynamo on the first mode)
        time_one(factory, 20, 16)
    times = {w: {c: [] for c in conds} for w in WORKLOADS}
    whole = {w: {c: [] for c in conds} for w in WORKLOADS}
    names = list(conds)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for w, numel in WORKLOADS.items():
            for c in order:
                inside, block = time_one(conds[c], counts[w], numel)
                times[w][c].append(inside)
                whole[w][c].append(block)
    table = {}
    for w in WORKLOADS:
        med = {c: statistics.median(v) for c, v in times[w].items()}
        block = {c: statistics.median(v) for c, v in whole[w].items()}
        table[w] = {
            c: {
                "us_per_op": m * 1e6,
                "x_floor": m / med["empty mode"],
                "x_off": m / med["off"],
                "block_x_off": block[c] / block["off"],
            }
            for c, m in med.items()
        }
    return {
        "ops": counts,
        "rounds": rounds,
        "torch": torch.__version__,
        "viewlab": viewlab.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "table": table,
    }


def markdown(result: dict) -> str:
    """The results as a Markdown table: one row per condition, per-op time and ratios on both workloads."""
    small, big = result["table"]["small"], result["table"]["1mib"]
    ops = result["ops"]
    lines = [
        "# What watching memory costs",
        "",
        f"`make bench` (benchmarks/overhead.py): {ops['small']:,} small ops (16 floats) and {ops['1mib']:,} ops on "
        f"1 MiB tensors, median of {result['rounds']} interleaved rounds; torch {result['torch']}, "
        f"Python {result['python']}, {result['machine']}. Ratios: to the empty dispatch mode (floor) and to no "
        "tracking (off), inside the block; *block x off*: the whole block with its start and stop, to off. The us/op "
        "columns are this one run's readings on a shared machine, not claims: timings vary by machine and load, and "
        "only the ratios, measured side by side in the same run, are what to compare.",
        "",
        "The displayed monitors draw every live frame on their own sampling thread (matplotlib Agg, never inside the "
        "cell's code); that drawing competes with the cell for the GIL, which is what *monitor thread* adds to "
        "*monitor off-screen*. *monitor cell* adds one pass-through dispatch mode per operator on the cell's thread "
        "(it sends a frame the sampling thread drew, never draws one).",
        "",
        "| condition | small: us/op | x floor | x off | block x off | 1 MiB: us/op | x floor | x off | block x off |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c, s in small.items():
        b = big[c]
        lines.append(
            f"| {c} | {s['us_per_op']:.1f} | {s['x_floor']:.2f} | {s['x_off']:.2f} | {s['block_x_off']:.2f} "
            f"| {b['us_per_op']:.1f} | {b['x_floor']:.2f} | {b['x_off']:.2f} | {b['block_x_off']:.2f} |"
        )
    cell_vs_thread = small["monitor cell"]["us_per_op"] / small["monitor thread"]["us_per_op"]
    lines += ["", f"monitor cell / monitor thread on small ops: {cell_vs_thread:.2f}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000, help="operators per small-op run")
    parser.add_argument("--big-ops", type=int, default=400, help="operators per 1 MiB run")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--md", type=Path, default=RESULTS_MD)
    parser.add_argument("--json", type=Path, default=RESULTS_JSON)
    args = parser.parse_args(argv)
    result = run(args.ops, args.big_ops, args.rounds)
    text = markdown(result)
    args.md.write_text(text)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(text)
    print(f"written to {args.md} and {args.json}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
