"""The child side of grading: run one learner's answers, record what they do, send back plain data.

The grader (:mod:`.grader`) starts ``python -m viewlab.course.grade.runner FD`` once: the template, which
imports torch and the course's recording mechanisms (:class:`~viewlab.course.exercises.watch.Watch`, its
operator recorder, ``viewlab.measure``), warms them up, and forks one child per submission (:func:`main`). No
process here ever holds a reference answer or an expected value: the exercise bank is never imported, and in a
child an audit hook refuses to import or read it. A child reads one command per line on its socket (JSON: the
answer's source text, the file of inputs the grader generated, where to write the record) and answers ``done``
once the record is written (:func:`serve`).

For each input the record holds, as plain data: how the call went (returned, raised, a stub, a call that does not
fit), the result and the inputs after the call (one ``torch.save``, so a result that shares storage with an input
still does when the grader loads it), the metadata of every result tensor, what the watch saw (the operators run,
forbidden families by name, numpy and viewlab calls, data leaving torch, a loop, the first new tensor), the bytes
``viewlab.measure`` saw, and the CPU time. Before any method of the result is called its type is checked:
``type(x) is torch.Tensor`` (a subclass could lie), and containers and scalars of the exact builtin types.

Limits, set here before the answer's code runs: address space (``RLIMIT_AS``), CPU time per answer
(``RLIMIT_CPU``, raised by the answer's budget before each one), file size and no core files; an audit hook,
which cannot be removed, refuses sockets, subprocesses, ``os.system``/``exec``/``fork``/``spawn``, ``ctypes``,
threads (the recorders watch the calling thread), importing or opening the exercise bank or the grader's judging code, and reading another process's ``/proc``.
The wall-clock limit is the grader's: it kills this process when an answer runs too long.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import resource
import sys
import time
import types
from collections.abc import Callable
from typing import Any

__all__ = ["main", "serve", "plain_result", "run_command", "run_input", "run_probe", "define", "Refused", "REFUSED"]

#: audit events refused once the answer's code may run (prefixes)
REFUSED = (
    "socket.",
    "subprocess.",
    "os.system",
    "os.exec",
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.spawn",
    "os.startfile",
    "pty.",
    "_thread.start_new_thread",
    "ctypes.",
    "_posixsubprocess.",
    "webbrowser.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
)
_SCALARS = (bool, int, float, complex, str, type(None))


class Refused(PermissionError):
    """An action the grader does not allow an answer (network, processes, ctypes, the exercise bank)."""


def _arm(forbidden_dirs: tuple[str, ...], forbidden_modules: tuple[str, ...]) -> None:
    """Install the audit hook (for the rest of this process's life: audit hooks cannot be removed)."""
    own = os.getpid()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(REFUSED):
            raise Refused(f"the grader does not allow {event} in an answer")
        if event == "import" and args and isinstance(args[0], str) and args[0].startswith(forbidden_modules):
            raise Refused(f"the grader does not allow importing {args[0]} in an answer")
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.fsdecode(args[0]) if not isinstance(args[0], int) else ""
            real = os.path.realpath(path) if path else ""
            if real.startswith(forbidden_dirs):
                raise Refused("the grader does not allow reading the course's exercise bank in an answer")
            parts = real.split("/")
            if len(parts) > 2 and parts[1] == "proc" and parts[2].isdigit() and int(parts[2]) != own:
                raise Refused("the grader does not allow reading another process in an answer")

    sys.addaudithook(hook)


def _set_limits(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2**30, 2**30))


def _cpu_budget(seconds: float) -> None:
    """Let this answer use ``seconds`` more CPU time (SIGXCPU, which kills the process, past it)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    now = used.ru_utime + used.ru_stime
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    want = int(now + seconds) + 1
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (want, hard))


def plain_result(obj: Any, depth: int = 0) -> tuple[Any, str | None]:
    """``obj`` as plain data torch.save can send (exact torch.Tensor, builtin containers and scalars), or why not.

    The type is checked before anything else is done with ``obj``: a tensor subclass or a list subclass could
    lie through its methods, so only the exact types pass.

    >>> import torch
    >>> plain_result((torch.zeros(2), 3))[1] is None
    True
    >>> class Liar(torch.Tensor): pass
    >>> plain_result(torch.zeros(2).as_subclass(Liar))[1]
    'your function returned a Liar (a subclass of torch.Tensor); return a plain torch.Tensor'
    """
    import torch

    kind = type(obj)
    if depth > 20:
        return None, "your function returned data nested more than 20 levels deep"
    if kind is torch.Tensor:
        if obj.layout is not torch.strided:
            return None, f"your function returned a {obj.layout} tensor; return a plain (strided) torch.Tensor"
        return obj.detach(), None
    if isinstance(obj, torch.Tensor):
        return (
            None,
            f"your function returned a {kind.__name__} (a subclass of torch.Tensor); return a plain torch.Tensor",
        )
    if kind is torch.Size:
        return ("__size__", tuple(int(v) for v in tuple.__iter__(obj))), None
    if kind in (torch.dtype, torch.device):
        return obj, None
    if kind in _SCALARS:
        return obj, None
    if obj is Ellipsis:
        return "__ellipsis__", None
    if kind in (tuple, list):
        items = []
        for item in tuple.__iter__(obj) if kind is tuple else list.__iter__(obj):
            value, why = plain_result(item, depth + 1)
            if why is not None:
                return None, why
            items.append(value)
        return (tuple(items) if kind is tuple else items), None
    name = getattr(kind, "__name__", "object")
    return None, f"your function returned a {name}; return a torch.Tensor or plain Python values"


def _tensor_meta(t: Any) -> dict[str, Any]:
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype),
        "stride": list(t.stride()),
        "offset": int(t.storage_offset()),
        "requires_grad": bool(t.requires_grad),
    }


def _rules(spec: dict[str, Any]) -> Any:
    """The watch's Rules from the grader's plain description (the judging stays with the grader)."""
    from viewlab.course.exercises.rules import Rules

    return Rules(
        forbid=tuple(spec["forbid"]),
        no_python_loops=(lambda n: ()) if spec["no_python_loops"] else None,
        must_view=spec["must_view"],
        must_copy=spec["must_copy"],
        max_new_bytes=0 if spec["max_new_bytes"] else None,
        predict_without_running=spec["predict_without_running"],
        allow_viewlab=tuple(spec["allow_viewlab"]),
    )


def _tensors(obj: Any) -> list[Any]:
    import torch

    if type(obj) is torch.Tensor:
        return [obj]
    if type(obj) in (tuple, list):
        return [t for o in obj for t in _tensors(o)]
    return []


def _first_line(exc: BaseException) -> str:
    try:
        text = str(exc).strip()
    except Exception:  # noqa: BLE001 - an exception whose str() raises says nothing
        text = ""
    return text.splitlines()[0] if text else ""


def run_input(fn: Callable[..., Any], args: tuple[Any, ...], rules: Any, memory: str | None) -> dict[str, Any]:
    """Run ``fn(*args)`` once, watched as the in-kernel check watches it; what happened, as plain data."""
    import torch

    from viewlab._checks import outside_entry
    from viewlab.course.exercises.watch import Watch
    from viewlab.memory import measure

    from . import seam

    try:
        inspect.signature(fn).bind(*args)
    except TypeError:
        return {"kind": "call", "takes": str(inspect.signature(fn)), "n_args": len(args)}
    except ValueError:
        pass
    watch = Watch(rules, memory, args) if Watch.wanted(rules, memory) else None
    parts = _tensors(args)
    metered = rules.max_new_bytes is not None or (memory == "view" and parts)
    by_bytes = rules.max_new_bytes is not None  # log the operators: the message names those that made bytes
    meter: Any = measure(device="cpu", log_ops=by_bytes) if metered else contextlib.nullcontext(None)
    start = time.process_time()
    record: dict[str, Any] = {"kind": "returned"}
    got: Any = None
    m: Any = None
    try:
        with meter as m:
            with watch if watch is not None else contextlib.nullcontext():
                with outside_entry():
                    got = fn(*args)
    except NotImplementedError:
        record = {"kind": "stub"}
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from an answer are its errors
        record = {"kind": "raised", "error": type(exc).__name__, "message": _first_line(exc)}
        record["bases"] = [c.__name__ for c in type(exc).__mro__]  # ShapeError(ValueError) refuses as ValueError
    record["cpu"] = time.process_time() - start
    plain: Any = None
    if record["kind"] == "returned":
        value, why = plain_result(got)  # the type first: nothing of a subclass is called
        if why is not None:
            record.update(kind="bad_result", why=why)
        else:
            plain = got
            record.update(value=value, meta=[_tensor_meta(t) for t in _tensors(value)])
    if watch is not None and record["kind"] in ("returned", "raised"):
        measured = m if record["kind"] == "returned" else None
        record["watch"] = seam.record(watch, fn, plain, measured)
    if m is not None:
        record["peak"], record["allocated"] = int(m.peak_bytes), int(m.allocated_bytes)
    from viewlab.course.exercises.programs import plain

    record["inputs_after"] = tuple(a.detach() if type(a) is torch.Tensor else plain(a) for a in args)
    return record


def run_probe(fn: Callable[..., Any], args: tuple[Any, ...], rules: Any) -> dict[str, Any]:
    """Rule ``no_python_loops``: one probe input, watched (the grader compares the two runs)."""
    from . import seam

    run = seam.probe_record(fn, args, rules)
    if run["kind"] == "returned":
        value, why = plain_result(run.pop("got"))
        run["value"] = value if why is None else None
    return run


def define(source: str, name: str, folder: str, exercise: str) -> tuple[Callable[..., Any] | None, str | None]:
    """Run the answer's source (its cell) in a fresh namespace; its function named ``name`` (or the only one)."""
    import torch

    path = os.path.join(folder, f"{exercise}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    try:
        code = compile(source, path, "exec")
    except SyntaxError as exc:
        return None, f"the answer does not compile: SyntaxError: {exc.msg} (line {exc.lineno} of the answer)"
    except (ValueError, OverflowError, MemoryError) as exc:
        return None, f"the answer does not compile: {type(exc).__name__}: {exc}"
    ns: dict[str, Any] = {"__name__": "__answer__", "torch": torch}
    try:
        exec(code, ns)  # noqa: S102 - the answer's own cell, inside the limits set above
    except NotImplementedError:
        pass
    except BaseException as exc:  # noqa: BLE001 - the cell's error is the answer's
        return None, f"the answer's cell raised {type(exc).__name__}: {_first_line(exc)}"
    fn = ns.get(name)
    if not isinstance(fn, types.FunctionType):
        own = [v for v in ns.values() if isinstance(v, types.FunctionType) and v.__code__.co_filename == path]
        if len(own) != 1:
            return None, f"the answer defines no function `{name}` (the exercise's signature names it)"
        fn = own[0]
    return fn, None


def run_command(cmd: dict[str, Any], folder: str) -> dict[str, Any]:
    import torch

    _cpu_budget(float(cmd["cpu_seconds"]))
    started = time.process_time()
    job = torch.load(cmd["inputs"], weights_only=True)
    fn, why = define(cmd["source"], job["name"], folder, job["exercise"])
    out: dict[str, Any] = {"exercise": job["exercise"], "defined": why is None, "why": why, "records": []}
    if fn is not None:
        rules = _rules(job["spec"])
        from viewlab.course.exercises.programs import revive

        for args in job["inputs"]:
            record = run_input(fn, tuple(revive(tuple(args))), rules, job["spec"]["memory"])
            out["records"].append(record)
            refusing = record["kind"] == "raised" and job["spec"].get("refuses")  # maybe right: the grader knows
            if record["kind"] in ("call", "stub", "raised", "bad_result") and not refusing:
                break  # the grader judges this input a failure: later inputs cannot come first
        else:
            out["probe"] = [run_probe(fn, tuple(a), rules) for a in job.get("probe", [])]
    out["cpu"] = time.process_time() - started
    return out


def _warm_up() -> None:
    """Pay once, in the template, what every first watched call pays (torch imports its compiler stack the first
    time a dispatch mode is entered): a tiny call of a function of nobody's, measured and watched."""
    import torch

    from viewlab.course.exercises.rules import Rules

    rules = Rules(forbid=("repeat",), no_python_loops=lambda n: (), max_new_bytes=0)
    run_input(lambda x: x[:, None] - x[None, :], (torch.ones(3),), rules, None)
    run_input(lambda x: x.t(), (torch.ones(2, 3),), Rules(must_view=True), "view")
    run_probe(lambda x: x + 1, (torch.ones(2),), rules)


def serve(conn: Any, folder: str, memory_bytes: int) -> None:
    """One submission's child (forked from the template): limits, the hook, then one command per line."""
    import torch

    from . import seam

    stream = conn.makefile("rwb", buffering=0)
    bank = seam.bank_dir()
    grade_dir = os.path.realpath(os.path.dirname(__file__))
    _set_limits(memory_bytes)
    _arm((bank, grade_dir + "/judge.py"), ("viewlab.course.exercises.bank", "viewlab.course.grade.judge"))
    stream.write(b"ready\n")
    for line in stream:
        if not line.strip():
            continue
        cmd = json.loads(line)
        try:
            out = run_command(cmd, folder)
        except Exception as exc:  # noqa: BLE001 - the answer broke the recording itself: a failed answer
            out = {"defined": False, "why": f"the answer broke the grader's recording ({type(exc).__name__}: {exc})"}
        part = cmd["out"] + ".part"
        torch.save(out, part)
        os.replace(part, cmd["out"])
        stream.write(b"done\n")


def _child(conn: Any, settings: dict[str, Any]) -> None:
    folder = settings["folder"]
    os.setsid()
    err = os.open(os.path.join(folder, "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(err, 1)  # the answers' prints go to stderr.txt, never into the replies
    os.dup2(err, 2)
    code = 0
    try:
        serve(conn, folder, int(settings["memory_bytes"]))
    except BaseException:  # noqa: BLE001 - reported on stderr.txt, and by the exit code
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    """The template: import and warm up once, then fork one child per request (a socket sent with it).

    The template never runs an answer and never holds an exercise: each child starts from this clean state, as
    a fresh process would, without paying torch's start-up again. A child's exit status is written to
    ``exit.txt`` in its folder once the template has reaped it.
    """
    import array
    import selectors
    import socket

    import numpy  # noqa: F401 - imported before any hook: the watch needs its location
    import torch

    import viewlab.course.exercises.watch  # noqa: F401 - the recorders, without the bank
    import viewlab.memory  # noqa: F401

    torch.set_num_threads(1)
    _warm_up()
    control = socket.socket(fileno=int(sys.argv[1]))
    folders: dict[int, str] = {}
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ)
    control.sendall(b"ready\n")
    while True:
        for pid, folder in list(folders.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                with open(os.path.join(folder, "exit.txt"), "w") as f:
                    f.write(str(code))
                del folders[pid]
        if not sel.select(0.05):
            continue
        fds = array.array("i")
        msg, ancdata, _flags, _addr = control.recvmsg(4096, socket.CMSG_SPACE(fds.itemsize))
        if not msg:
            break
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        settings = json.loads(msg)
        conn = socket.socket(fileno=fds[0])
        pid = os.fork()
        if pid == 0:
            control.close()
            _child(conn, settings)
        conn.close()
        folders[pid] = settings["folder"]
        control.sendall(f"{pid}\n".encode())


if __name__ == "__main__":
    main()
