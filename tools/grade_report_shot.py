"""Grade the test classroom for real and take a screenshot of its report for the book's "Running a class" page.

    python tools/grade_report_shot.py [--out book/_static/grade-report.png]

Builds the generated classroom of ``tests/course/grade_classroom.py`` in a temporary folder, grades it with
``python -m viewlab.course.grade`` (fresh processes, the default limits), opens ``report.html`` in Debian's
chromium with every request outside ``file://`` refused, and saves a PNG of the top of the page.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "book" / "_static" / "grade-report.png"))
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    from tests.course.grade_classroom import EXERCISES, build
    from viewlab.course.grade.__main__ import main as grade_main

    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp) / "class")
        picked = [a for e in EXERCISES for a in ("--exercise", e)]
        grade_main(
            [
                str(Path(tmp) / "class"),
                "--out",
                str(Path(tmp) / "out"),
                "--cpu-seconds",
                "2",
                "--wall-seconds",
                "4",
                *picked,
            ]
        )
        foreign: list[str] = []
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
            page = browser.new_page(viewport={"width": 1200, "height": 1250})

            def route(r):  # noqa: ANN001, ANN202
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:
                    foreign.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.goto((Path(tmp) / "out" / "report.html").as_uri(), wait_until="load")
            page.screenshot(path=args.out, full_page=False)
            browser.close()
    print(f"wrote {args.out}; requests outside file:// refused: {len(foreign)}")
    return 0 if not foreign else 1


if __name__ == "__main__":
    sys.exit(main())
