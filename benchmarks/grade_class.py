"""How long the grader takes for a class: 30 submissions, every exercise of the course answered.

    nice python benchmarks/grade_class.py [--learners 30] [--jobs 2]

Each learner answers every exercise: with the course's solution, except that every third learner gets one
exercise wrong, which a real class would do (the wrong answer returns its input, or 0). The figure is the wall
time of ``python -m viewlab.course.grade`` with its defaults (40 inputs per exercise, 2 jobs), measured once,
plus the CPU time of the grader and of its children. Not part of ``make test`` (a timing is no test).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--learners", type=int, default=30)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    from viewlab.course.exercises import exercise_ids, get, solution_source
    from viewlab.course.grade.__main__ import main as grade_main

    ids = exercise_ids()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "class"
        folder.mkdir()
        for n in range(args.learners):
            answers = {i: solution_source(get(i)) for i in ids}
            if n % 3 == 0:
                wrong = ids[n % len(ids)]
                stub = get(wrong).signature
                answers[wrong] = f"{stub}:\n    return {stub[4:].split('(')[1].split(':')[0].split(')')[0] or '0'}\n"
            data = {"format": 1, "learner": f"learner-{n:02d}", "course_version": "bench", "answers": answers}
            (folder / f"learner-{n:02d}.json").write_text(json.dumps(data), encoding="utf-8")
        start = time.perf_counter()
        grade_main([str(folder), "--out", str(Path(tmp) / "out"), "--jobs", str(args.jobs)])
        wall = time.perf_counter() - start
        rows = (Path(tmp) / "out" / "gradebook.csv").read_text().splitlines()[1:]
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_self, cpu_kids = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
    passed = sum(",true," in r for r in rows)
    print(
        f"{args.learners} submissions x {len(ids)} exercises = {len(rows)} rows ({passed} passed) graded in "
        f"{wall:.1f} s wall with --jobs {args.jobs}; CPU: grader {cpu_self:.1f} s, children {cpu_kids:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
