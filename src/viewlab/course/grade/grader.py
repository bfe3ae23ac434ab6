"""Grade a class: every submission's answers run in a fresh child process, judged here from plain data.

:func:`grade` reads the submission files (folders of them too), makes each exercise's :class:`~.judge.Plan` once
(inputs and reference values, in this process only), writes each exercise's inputs to a file, then for every
submission forks a child from the runner's template (:mod:`.runner`) and sends it one answer at a time. Each answer has a
CPU-time limit (set in the child), a wall-clock limit (the child is killed past it) and the child a memory limit;
a child that dies (a crash, a kill, the CPU limit) gives that answer a row with the reason and is started again
for the answers left. Submissions are graded ``jobs`` at a time (one child each).

What the grader cannot tell, and says so in its documentation: an answer copied from ``solution()`` (it is
flagged when its body is the printed solution's, see :func:`.judge.same_as_solution`); work done by the answer's
cell at definition time (a table computed before the function runs); an answer that takes the recorders off
inside its own process (its values are still judged here, its rules then are not).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from viewlab.course.exercises import exercise_ids, get, solution_source
from viewlab.course.exercises.engine import FAILED, NOT_SOLVED

from .judge import DEFAULT_INPUTS, Plan, Verdict, judge, plan_for, same_as_solution
from .submit import BadSubmission, Submission, load

__all__ = ["Limits", "Row", "grade", "find_submissions", "START_SECONDS"]

START_SECONDS = 120.0  # for the child to import torch on a busy machine


@dataclass(frozen=True)
class Limits:
    """Per answer: CPU seconds and wall seconds; per child process: address space in bytes."""

    cpu_seconds: float = 10.0
    wall_seconds: float = 20.0
    memory_bytes: int = 4 * 2**30


@dataclass
class Row:
    """One gradebook row: learner, exercise, passed, reason (and the details of gradebook.jsonl)."""

    learner: str
    exercise: str
    passed: bool
    reason: str
    limit_seconds: float | None = None  # the limit that stopped the answer (the CSV's `seconds`)
    details: dict[str, Any] = field(default_factory=dict)

    def csv(self) -> list[str]:
        seconds = "" if self.limit_seconds is None else f"{self.limit_seconds:g}"
        return [self.learner, self.exercise, "true" if self.passed else "false", self.reason, seconds]


def find_submissions(paths: list[str]) -> list[Path]:
    """The files named, and every ``*.json`` file under the folders named, sorted."""
    found: list[Path] = []
    for p in map(Path, paths):
        found += sorted(q for q in p.rglob("*.json") if q.is_file()) if p.is_dir() else [p]
    return sorted(dict.fromkeys(found))


class _Template:
    """The process every child is forked from (``python -m viewlab.course.grade.runner FD``): torch imported
    and warmed up once, no answer and no exercise ever in it."""

    def __init__(self, work: str) -> None:
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.stderr = open(os.path.join(work, "template-stderr.txt"), "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "viewlab.course.grade.runner", str(theirs.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=self.stderr,
            stderr=self.stderr,
            cwd=work,
            env=env,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
        theirs.close()
        self.lock = threading.Lock()
        self.control.settimeout(START_SECONDS)
        try:
            ready = self.control.recv(64)
        except OSError:
            ready = b""
        if ready.strip() != b"ready":
            self.close()
            raise RuntimeError("the grader's template process did not start (see template-stderr.txt)")

    def fork(self, folder: str, memory_bytes: int, conn: socket.socket) -> int:
        """A new child for one submission, talking on ``conn``; its pid."""
        msg = json.dumps({"folder": folder, "memory_bytes": memory_bytes}).encode()
        with self.lock:
            socket.send_fds(self.control, [msg], [conn.fileno()])
            return int(self.control.recv(64))

    def close(self) -> None:
        self.control.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stderr.close()


class _Child:
    """One submission's process (forked from the template) and its socket."""

    def __init__(self, template: _Template, folder: str, limits: Limits) -> None:
        self.folder = folder
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, "exit.txt"))  # a previous child's
        self.conn, theirs = socket.socketpair()
        try:
            self.pid = template.fork(folder, limits.memory_bytes, theirs)
        finally:
            theirs.close()
        self.file = self.conn.makefile("rb")
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.conn, selectors.EVENT_READ)
        self.returncode: int | None = None
        if self.reply(START_SECONDS) != "ready":
            self.stop()
            raise RuntimeError("the grader's child process did not start (see stderr.txt in its folder)")

    def send(self, obj: dict[str, Any]) -> None:
        self.conn.sendall((json.dumps(obj) + "\n").encode())

    def reply(self, timeout: float) -> str | None:
        """The next line from the child, ``""`` when it ended, None when ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if self.sel.select(left):
                line = self.file.readline()
                return line.decode(errors="replace").strip() if line else ""
        return None

    def _exit_code(self, wait: float) -> int | None:
        path = os.path.join(self.folder, "exit.txt")
        deadline = time.monotonic() + wait
        while True:
            try:
                return int(Path(path).read_text())
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.02)

    def stop(self, wait: float = 0.0) -> None:
        """End the child (after ``wait`` seconds for it to end by itself) and read its exit status."""
        code = self._exit_code(wait)
        if code is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            code = self._exit_code(10.0)
        self.returncode = code
        self.sel.close()
        self.file.close()
        self.conn.close()


def _tail(folder: str, n: int = 2000) -> str:
    """The end of the child's stderr (what the answer printed, and a traceback if the runner itself failed)."""
    try:
        return Path(folder, "stderr.txt").read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


def _death(code: int | None, limits: Limits, timed_out: bool) -> tuple[str, float | None]:
    """Why a child died, in words, and the limit that stopped it (if one did)."""
    if timed_out or code == -signal.SIGXCPU:  # one reason for both limits: which comes first varies with load
        return (
            f"stopped: the answer ran past its time limit ({limits.cpu_seconds:g} s of CPU time, "
            f"{limits.wall_seconds:g} s of wall-clock time)",
            limits.wall_seconds,
        )
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        return f"the process running the answer was killed by {name} (it crashed)", None
    return f"the process running the answer ended (exit code {code}) before it finished", None


def _grade_submission(
    sub: Submission,
    plans: dict[str, Plan],
    files: dict[str, str],
    limits: Limits,
    work: str,
    known: set[str],
    template: _Template,
) -> list[Row]:
    folder = tempfile.mkdtemp(prefix="sub-", dir=work)
    answers_dir = os.path.join(folder, "ipykernel_answers")  # messages then say "line N of this cell"
    os.makedirs(answers_dir)
    rows: list[Row] = []
    child: _Child | None = None
    try:
        for ex_id in sorted(set(plans) | set(sub.answers)):
            if ex_id not in plans:
                if ex_id not in known:
                    rows.append(Row(sub.learner, ex_id, False, "no such exercise in this course version"))
                continue
            plan = plans[ex_id]
            source = sub.answers.get(ex_id)
            if source is None or not source.strip():
                rows.append(Row(sub.learner, ex_id, False, "no answer submitted"))
                continue
            if child is None:
                try:
                    child = _Child(template, answers_dir, limits)
                except RuntimeError as exc:
                    rows.append(Row(sub.learner, ex_id, False, str(exc)))
                    continue
            out_path = os.path.join(folder, f"{ex_id}.out")
            started = time.monotonic()
            child.send({"inputs": files[ex_id], "source": source, "out": out_path, "cpu_seconds": limits.cpu_seconds})
            line = child.reply(limits.wall_seconds)
            wall = time.monotonic() - started
            limit: float | None = None
            if line == "done":
                try:
                    out = torch.load(out_path, weights_only=True)
                    verdict = judge(plan, out)
                except Exception as exc:  # noqa: BLE001 - a record that cannot be read is a failed answer
                    verdict = Verdict(FAILED, f"what the answer's process sent back could not be read ({exc})", "")
                    out = {}
                finally:
                    if os.path.exists(out_path):
                        os.remove(out_path)
            else:
                timed_out = line is None
                child.stop(wait=0.0 if timed_out else 5.0)
                code = child.returncode
                child = None
                why, limit = _death(code, limits, timed_out)
                verdict, out = Verdict(FAILED, why, why, 0, {"stderr": _tail(answers_dir)}), {}
            details = dict(verdict.details)
            details.update(
                status=verdict.status,
                message=verdict.message or verdict.reason,
                inputs_judged=verdict.examples,
                cpu_seconds=round(float(out.get("cpu", 0.0)), 3),
                wall_seconds=round(wall, 3),
                same_as_solution=same_as_solution(source, solution_source(plan.ex), plan.name),
            )
            reason = verdict.reason if verdict.status != NOT_SOLVED else "not solved yet"
            rows.append(Row(sub.learner, ex_id, verdict.passed, reason, limit, details))
    finally:
        if child is not None:
            child.stop()
    return rows


def grade(
    paths: list[str],
    limits: Limits | None = None,
    jobs: int = 2,
    n_inputs: int = DEFAULT_INPUTS,
    exercises: list[str] | None = None,
) -> list[Row]:
    """Grade every submission under ``paths``; the rows, sorted by learner then exercise.

    ``exercises``: the ids graded (default: every exercise of the course); ``n_inputs``: draws per exercise.
    """
    limits = limits or Limits()
    known = set(exercise_ids())
    ids = exercises if exercises is not None else sorted(known)
    subs: list[Submission] = []
    rows: list[Row] = []
    names: dict[str, int] = {}
    for path in find_submissions(paths):
        try:
            sub = load(path)
        except BadSubmission as exc:
            rows.append(Row(path.stem, "*", False, f"{path.name}: {exc}"))
            continue
        if not sub.answers:
            rows.append(Row(sub.learner, "*", False, f"{path.name}: the submission holds no answers"))
            continue
        names[sub.learner] = names.get(sub.learner, 0) + 1
        if names[sub.learner] > 1:  # two files with one name: both graded, told apart
            sub = Submission(sub.path, f"{sub.learner} ({path.name})", sub.course_version, sub.answers)
        subs.append(sub)
    plans = {i: plan_for(get(i), n_inputs) for i in ids} if subs else {}
    with tempfile.TemporaryDirectory(prefix="viewlab-grade-") as work:
        files = {}
        for ex_id, plan in plans.items():
            files[ex_id] = os.path.join(work, f"{ex_id}.inputs")
            torch.save(plan.job(), files[ex_id])
        template = _Template(work) if subs else None
        try:
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                run = lambda s: _grade_submission(s, plans, files, limits, work, known, template)  # noqa: E731
                for sub_rows in pool.map(run, subs):
                    rows += sub_rows
        finally:
            if template is not None:
                template.close()
    return sorted(rows, key=lambda r: (r.learner, r.exercise))
