"""``report.html``: one self-contained page for the teacher (no script, no remote asset, nothing fetched).

Three parts: a chart of the class's pass rate per exercise (inline SVG, a bar and its count in text for each
exercise), a grid of learners by exercise (each cell says pass / FAIL / not solved / none in words, its colour
only repeats that; a failed cell links to its reason) and the list of failures with the message each learner
would see. Colours are dark text on light fills (contrast above 7:1) and the bars dark on white.

>>> from viewlab.course.grade.grader import Row
>>> page = render([Row("Ada", "05-batch-view", True, ""), Row("Bob", "05-batch-view", False, "wrong shape")])
>>> "<svg" in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")
True
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .grader import Row

__all__ = ["render"]

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; color: #1a1a1a; background: #fff; margin: 1.5rem; max-width: 90rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table.grid { border-collapse: collapse; font-size: 13px; }
.grid th, .grid td { border: 1px solid #8a8a8a; padding: 2px 4px; text-align: center; white-space: nowrap; }
.grid th.ex { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 600; white-space: nowrap; }
.grid th.who { text-align: left; }
.pass { background: #d4edda; color: #0b3d16; }
.fail { background: #f8d7da; color: #5c0a12; font-weight: 600; }
.notsolved { background: #fff3cd; color: #4d3800; }
.none { background: #eeeeee; color: #333333; }
.fail a { color: #5c0a12; }
dl.failures dt { font-weight: 600; margin-top: .6rem; }
dl.failures dd { margin-left: 1.2rem; }
pre { white-space: pre-wrap; background: #f4f4f4; padding: .5rem; font-size: 12px; }
.legend span { display: inline-block; padding: 1px 6px; margin-right: .6rem; border: 1px solid #8a8a8a; }
"""

_LABEL = {"pass": "pass", "fail": "FAIL", "notsolved": "not solved", "none": "none"}


def _kind(row: Row) -> str:
    if row.passed:
        return "pass"
    if row.reason == "no answer submitted":
        return "none"
    if row.reason == "not solved yet":
        return "notsolved"
    return "fail"


def _anchor(learner: str, exercise: str) -> str:
    safe = "".join(c if c.isalnum() else "-" for c in f"{learner}--{exercise}")
    return f"f-{safe}"


def _chart(exercises: list[str], rows: list[Row]) -> str:
    bar_w, row_h, left, right = 360, 22, 190, 120
    height = row_h * len(exercises) + 30
    parts = [
        f'<svg id="pass-rate" role="img" aria-labelledby="chart-title" width="{left + bar_w + right}" '
        f'height="{height}" viewBox="0 0 {left + bar_w + right} {height}" xmlns="http://www.w3.org/2000/svg">',
        '<title id="chart-title">Pass rate per exercise: how many learners passed each exercise</title>',
    ]
    for i, ex in enumerate(exercises):
        mine = [r for r in rows if r.exercise == ex]
        passed = sum(r.passed for r in mine)
        rate = passed / len(mine) if mine else 0.0
        y = 10 + i * row_h
        parts.append(
            f'<g class="bar" data-exercise="{html.escape(ex)}" data-passed="{passed}" data-total="{len(mine)}">'
            f'<text x="{left - 6}" y="{y + 14}" text-anchor="end" font-size="12" fill="#1a1a1a">{html.escape(ex)}</text>'
            f'<rect x="{left}" y="{y + 2}" width="{bar_w}" height="{row_h - 6}" fill="#e8e8e8" stroke="#8a8a8a"/>'
            f'<rect x="{left}" y="{y + 2}" width="{round(bar_w * rate, 1)}" height="{row_h - 6}" fill="#1f4e89"/>'
            f'<text x="{left + bar_w + 6}" y="{y + 14}" font-size="12" fill="#1a1a1a">'
            f"{passed}/{len(mine)} ({round(100 * rate)}%)</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def render(rows: list[Row], title: str = "Gradebook") -> str:
    """The page, from the gradebook rows (rows with exercise ``*`` are files that could not be graded)."""
    graded = [r for r in rows if r.exercise != "*"]
    bad = [r for r in rows if r.exercise == "*"]
    exercises = sorted({r.exercise for r in graded})
    learners = sorted({r.learner for r in graded})
    cell = {(r.learner, r.exercise): r for r in graded}
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{len(learners)} learners, {len(exercises)} exercises, "
        f"{sum(r.passed for r in graded)} of {len(graded)} answers passed.</p>",
        "<h2>Pass rate per exercise</h2>",
        _chart(exercises, graded),
        "<h2>Learners by exercise</h2>",
        '<p class="legend">'
        + "".join(f'<span class="{k}">{v}</span>' for k, v in _LABEL.items())
        + " (&ldquo;= solution&rdquo;: the answer is the course's printed solution)</p>",
        '<table class="grid" id="grid"><caption>Each cell: the grade of one answer</caption><thead><tr>',
        '<th scope="col" class="who">learner</th>',
        *[f'<th scope="col" class="ex">{html.escape(e)}</th>' for e in exercises],
        '<th scope="col">passed</th></tr></thead><tbody>',
    ]
    for who in learners:
        out.append(f'<tr><th scope="row" class="who">{html.escape(who)}</th>')
        for ex in exercises:
            r = cell.get((who, ex))
            if r is None:
                out.append('<td class="none">none</td>')
                continue
            kind = _kind(r)
            label = _LABEL[kind] + (" (= solution)" if r.details.get("same_as_solution") else "")
            text = f'<a href="#{_anchor(who, ex)}">{label}</a>' if kind == "fail" else label
            tip = f' title="{html.escape(r.reason)}"' if r.reason else ""
            out.append(f'<td class="{kind}" data-exercise="{html.escape(ex)}"{tip}>{text}</td>')
        n = sum(cell[(who, e)].passed for e in exercises if (who, e) in cell)
        out.append(f"<td>{n}/{len(exercises)}</td></tr>")
    out.append("</tbody></table>")
    out.append('<h2>Failures</h2><dl class="failures">')
    for r in graded:
        if _kind(r) != "fail":
            continue
        out.append(
            f'<dt id="{_anchor(r.learner, r.exercise)}">{html.escape(r.learner)}: {html.escape(r.exercise)}</dt>'
        )
        out.append(f"<dd>{html.escape(r.reason)}")
        message = r.details.get("message")
        if message and message != r.reason:
            out.append(f"<details><summary>what the learner sees</summary><pre>{html.escape(message)}</pre></details>")
        out.append("</dd>")
    out.append("</dl>")
    if bad:
        out.append('<h2>Files that could not be graded</h2><ul id="bad-files">')
        out += [f"<li>{html.escape(r.learner)}: {html.escape(r.reason)}</li>" for r in bad]
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out)
