"""expand vs repeat vs copying the same bytes, side by side at several sizes (notebook 09, section 5).

A ``(1, 4096)`` float32 row is grown to ``R`` rows. Candidates, interleaved in rounds in one run
(``viewlab.course.bench.compare``) so machine load hits them alike:

  same-bytes copy    -- dst.copy_(src) between preallocated buffers of the output's size (read + write):
                        the yardstick, about the fastest this machine moves that many bytes
  expand             -- metadata only, no data touched
  repeat             -- allocates the output and writes it
  copy_ into buffer  -- writes the same output into a preallocated buffer (repeat without the allocation)

Reported per size: median time, ratio to the same-bytes copy, achieved GB/s. Not a test: timings vary
by machine and load. Results go to benchmarks/results/expand_vs_repeat.json.

Usage: python benchmarks/expand_vs_repeat.py [--rows 16 256 4096 16384] [--rounds 5] [--threads 1] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

from viewlab.course.bench import compare, same_bytes_copy

RESULTS = Path(__file__).resolve().parent / "results" / "expand_vs_repeat.json"
WIDTH = 4096


def run(rows: list[int], rounds: int, min_run_time: float, device: str, threads: int) -> dict:
    row = torch.randn(1, WIDTH, device=device)
    out: dict = {
        "torch": torch.__version__,
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "machine": platform.machine(),
        "threads": threads,
        "sizes": [],
    }
    for r in rows:
        out_bytes = r * WIDTH * 4
        copy_fn, copy_bytes = same_bytes_copy(row.expand(r, WIDTH))
        buffer = torch.empty(r, WIDTH, device=device)
        table = compare(
            {
                "same-bytes copy": copy_fn,
                # Defaults bind this iteration's r and buffer (compare() runs them before the next one).
                "expand": lambda r=r: row.expand(r, WIDTH),
                "repeat": lambda r=r: row.repeat(r, 1),
                "copy_ into buffer": lambda r=r, buffer=buffer: buffer.copy_(row.expand(r, WIDTH)),
            },
            bytes_moved={"same-bytes copy": copy_bytes, "repeat": out_bytes, "copy_ into buffer": out_bytes},
            rounds=rounds,
            min_run_time=min_run_time,
            num_threads=threads,
        )
        print(f"R = {r} rows ({out_bytes:,} bytes of output) on {out['device']}")
        print(table, end="\n\n")
        out["sizes"].append(
            {
                "rows": r,
                "output_bytes": out_bytes,
                "candidates": [
                    {
                        "name": x.name,
                        "median_s": x.median_s,
                        "iqr_s": x.iqr_s,
                        "ratio_to_copy": x.ratio,
                        "bytes_moved": x.bytes_moved,
                        "gb_per_s": x.gb_per_s,
                    }
                    for x in table.rows
                ],
                "repeat_over_expand": table.speedup("repeat", "expand"),
            }
        )
        del buffer
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[16, 256, 4096, 16384])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-run-time", type=float, default=0.1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads (default 1: stable on a shared machine; more for peak bandwidth)",
    )
    parser.add_argument("--no-save", action="store_true", help="print only; do not write the JSON file")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch.cuda.is_available() is False here; use --device cpu.")
    result = run(args.rows, args.rounds, args.min_run_time, args.device, args.threads)
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
