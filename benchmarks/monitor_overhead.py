"""Overhead of viewlab's memory monitor on a loop of 10,000 small tensor ops.

Conditions, all in one run and interleaved (so machine load hits them alike):
  off        -- no monitor
  sampling   -- MemoryMonitor sampling in its thread only, no per-op hook (CUDA allocator counters
                on a GPU, process RSS on a CPU)
  per-op     -- MemoryMonitor with the tensor-storage backend: every operator goes through a
                TorchDispatchMode (exact bytes, per-op)
  per-op+log -- viewlab.measure(log_ops=True): per-op tracking plus one record per operator

Each condition runs ``--repeats`` times; the median wall time is reported with its ratio to "off".
Not a test: timings vary by machine. Results go to benchmarks/results/monitor_overhead.json, which
notebook 06 shows.

Usage: python benchmarks/monitor_overhead.py [--ops 10000] [--repeats 5] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

import viewlab
from viewlab import MemoryMonitor, measure

RESULTS = Path(__file__).resolve().parent / "results" / "monitor_overhead.json"


def workload(n_ops: int, device: str) -> None:
    x = torch.ones(16, device=device)
    for _ in range(n_ops // 2):
        y = x + 1  # one small allocation ...
        x = y * 1  # ... and another; the previous x is freed each time
    if device == "cuda":
        torch.cuda.synchronize()


def run_condition(name: str, n_ops: int, device: str) -> float:
    start = time.perf_counter()
    if name == "off":
        workload(n_ops, device)
    elif name == "sampling":
        with MemoryMonitor(device=device, backend="cuda" if device == "cuda" else "rss", display=False):
            workload(n_ops, device)
    elif name == "per-op":
        with MemoryMonitor(device=device, backend="storages", display=False):
            workload(n_ops, device)
    elif name == "per-op+log":
        with measure(device="cpu" if device == "cpu" else device, log_ops=True) as m:
            workload(n_ops, device)
        assert len(m.ops) >= n_ops
    else:  # pragma: no cover
        raise ValueError(name)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    conditions = ["off", "sampling", "per-op", "per-op+log"]
    for name in conditions:  # warm-up: imports, first-use costs (torch._dynamo on the first dispatch mode)
        run_condition(name, 200, args.device)
    times: dict[str, list[float]] = {c: [] for c in conditions}
    for _ in range(args.repeats):
        for name in conditions:
            times[name].append(run_condition(name, args.ops, args.device))
    base = statistics.median(times["off"])
    result = {
        "ops": args.ops,
        "repeats": args.repeats,
        "device": args.device,
        "torch": torch.__version__,
        "viewlab": viewlab.__version__,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "median_seconds": {c: round(statistics.median(v), 4) for c, v in times.items()},
        "per_op_microseconds": {c: round(statistics.median(v) / args.ops * 1e6, 2) for c, v in times.items()},
        "ratio_to_off": {c: round(statistics.median(v) / base, 2) for c, v in times.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    width = max(map(len, conditions))
    print(f"{args.ops:,} small ops on {args.device}, median of {args.repeats} (torch {torch.__version__})")
    for c in conditions:
        print(
            f"  {c:<{width}}  {result['median_seconds'][c]:8.4f} s  {result['per_op_microseconds'][c]:7.2f} us/op"
            f"  x{result['ratio_to_off'][c]:.2f}"
        )
    print(f"written to {args.out}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
