"""``python -m viewlab.course.grade SUBMISSIONS... --out DIR`` (also ``viewlab-grade``): grade a class.

Writes ``DIR/gradebook.csv``, ``DIR/gradebook.jsonl`` and ``DIR/report.html``; prints one line per learner.
The exit status is 0 when grading ran (whatever the grades), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="viewlab-grade",
        description="Grade viewlab submissions, each in a fresh process; writes gradebook.csv, "
        "gradebook.jsonl and report.html.",
    )
    p.add_argument("submissions", nargs="+", help="submission files (.json) or folders of them")
    p.add_argument("--out", required=True, help="folder for gradebook.csv, gradebook.jsonl and report.html")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="submissions graded at once")
    p.add_argument("--cpu-seconds", type=float, default=10.0, help="CPU-time limit per answer (default 10)")
    p.add_argument("--wall-seconds", type=float, default=20.0, help="wall-clock limit per answer (default 20)")
    p.add_argument("--memory-gb", type=float, default=4.0, help="memory limit per process, GiB (default 4)")
    p.add_argument("--inputs", type=int, default=40, help="generated inputs per exercise (default 40)")
    p.add_argument("--exercise", action="append", help="grade only this exercise (repeatable)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    missing = [s for s in args.submissions if not Path(s).exists()]
    if missing:
        print(f"viewlab-grade: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    import torch

    from .gradebook import write_csv, write_jsonl
    from .grader import Limits, grade
    from .report import render

    torch.set_num_threads(1)
    limits = Limits(args.cpu_seconds, args.wall_seconds, int(args.memory_gb * 2**30))
    rows = grade(args.submissions, limits, jobs=args.jobs, n_inputs=args.inputs, exercises=args.exercise)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "gradebook.csv", "w", encoding="utf-8", newline="") as f:
        write_csv(rows, f)
    with open(out / "gradebook.jsonl", "w", encoding="utf-8") as f:
        write_jsonl(rows, f)
    (out / "report.html").write_text(render(rows), encoding="utf-8")
    for who in sorted({r.learner for r in rows}):
        mine = [r for r in rows if r.learner == who and r.exercise != "*"]
        bad = [r.reason for r in rows if r.learner == who and r.exercise == "*"]
        print(
            f"{who}: not graded ({bad[0]})"
            if bad and not mine
            else f"{who}: {sum(r.passed for r in mine)}/{len(mine)} passed"
        )
    print(f"wrote {out / 'gradebook.csv'}, gradebook.jsonl and report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
