"""A generated classroom for the grader's tests (and the book's screenshot): submission files and, for each
learner and exercise, what the gradebook row must say.

``build(folder)`` writes the files and returns ``{(learner, exercise): (passed, text the reason contains)}``;
files that cannot be graded have exercise ``*``.
"""

from __future__ import annotations

import json
from pathlib import Path

from viewlab.course.exercises import get, solution_source

EXERCISES = [
    "02-pairwise-diff",
    "03-grad-of-expand",
    "03-windows-by-strides",
    "04-causal-mask",
    "05-batch-view",
    "05-count-labels",
    "05-flatten-any",
    "06-repeat-bytes",
    "07-expand-as-by-strides",
    "07-safe-copy",
    "08-bytes-by-dispatch",
    "09-pick-per-row",
    "10-saved-bytes",
]
PASS = (True, "")
NONE = (False, "no answer submitted")


def _d(text: str) -> str:
    return text.strip("\n") + "\n"


RIGHT_OTHER_WAY = {
    "05-flatten-any": "def flatten_any(x):\n    return x.flatten()",
    "02-pairwise-diff": "def pairwise_diff(p):\n    return p[:, None, :] - p[None, :, :]",
    "07-safe-copy": "import torch\n\ndef safe_copy(x):\n    return torch.clone(x)",
    "05-batch-view": "def batch_view(sample, n):\n    return sample.expand(n, *sample.shape)",
    "06-repeat-bytes": "import math\n\ndef repeat_bytes(x, reps):\n    return x.element_size() * x.numel() * math.prod(reps)",
    "05-count-labels": (
        "import torch\n\ndef count_labels(labels, num_classes):\n"
        "    counts = torch.zeros(labels.shape[0], num_classes)\n"
        "    rows = torch.arange(labels.shape[0])[:, None]\n"
        "    return counts.index_put_((rows, labels), torch.ones(labels.shape), accumulate=True)"
    ),
    "04-causal-mask": (
        "import torch\n\ndef causal(q_len, k_len, window):\n"
        "    d = torch.arange(q_len)[:, None] - torch.arange(k_len)[None, :]\n"
        "    return (d >= 0) & (d < window)"
    ),
    "03-grad-of-expand": "def grad_of_expand(upstream):\n    return upstream.sum(0, keepdim=True)",
    "08-bytes-by-dispatch": (  # weak references with a callback, as measure keeps them
        "import weakref\n\nimport torch\nfrom torch.utils._python_dispatch import TorchDispatchMode\n\n"
        "class Alive(TorchDispatchMode):\n"
        "    def __init__(self, inputs):\n"
        "        super().__init__()\n"
        "        self.inputs, self.bytes, self.refs = inputs, 0, {}\n\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
        "        out = func(*args, **(kwargs or {}))\n"
        "        for t in out if isinstance(out, (tuple, list)) else (out,):\n"
        "            s = t.untyped_storage() if isinstance(t, torch.Tensor) else None\n"
        "            known = self.refs.get(id(s))\n"
        "            if s is None or id(s) in self.inputs or (known is not None and known() is s):\n"
        "                continue\n"
        "            self.bytes += s.nbytes()\n"
        "            self.refs[id(s)] = weakref.ref(s, lambda _r, n=s.nbytes(): setattr(self, 'bytes', self.bytes - n))\n"
        "        return out\n\n"
        "def bytes_by_dispatch(fn, *args):\n"
        "    with Alive({id(t.untyped_storage()) for t in args}) as mode:\n"
        "        out = fn(*args)\n"
        "    return mode.bytes"
    ),
    "09-pick-per-row": (
        "import torch\n\ndef pick_per_row(scores, labels):\n"
        "    return torch.where(labels >= 0, scores[torch.arange(len(labels)), labels], 0)"
    ),
    "10-saved-bytes": (  # the storage objects themselves, held by identity
        "import torch\n\ndef saved_bytes(fn, *args):\n"
        "    storages = {}\n\n"
        "    def pack(t):\n"
        "        storages[id(t.untyped_storage())] = t.untyped_storage()\n"
        "        return t\n\n"
        "    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):\n"
        "        fn(*args)\n"
        "    return sum(s.nbytes() for s in storages.values())"
    ),
    "07-expand-as-by-strides": (  # refuses with its own ValueError where the reference raises RuntimeError
        "class ShapeError(ValueError):\n    pass\n\n"
        "def expand_as_by_strides(x, other):\n"
        "    pad = other.dim() - x.dim()\n"
        "    if pad < 0:\n        raise ShapeError('x has more dims than other')\n"
        "    sizes, strides = (1,) * pad + tuple(x.shape), (0,) * pad + tuple(x.stride())\n"
        "    if any(n not in (1, w) for n, w in zip(sizes, other.shape)):\n"
        "        raise ShapeError('the shapes do not expand')\n"
        "    return x.as_strided(other.shape, [s if n == w else 0 for n, s, w in zip(sizes, strides, other.shape)])"
    ),
}

WRONG = {
    "05-flatten-any": ("def flatten_any(x):\n    return x.view(-1)", "your function raised RuntimeError: view size"),
    "02-pairwise-diff": ("def pairwise_diff(p):\n    return p.unsqueeze(0) - p.unsqueeze(1)", "values differ"),
    "07-safe-copy": ("def safe_copy(x):\n    return x", "breaks rule `must_copy`"),
    "06-repeat-bytes": ("def repeat_bytes(x, reps):\n    return x.numel() * x.element_size()", "the result is"),
    "03-grad-of-expand": ("def grad_of_expand(upstream):\n    return upstream.sum(0)", "the result has shape"),
    "07-expand-as-by-strides": (  # never refuses
        "def expand_as_by_strides(x, other):\n"
        "    pad = other.dim() - x.dim()\n"
        "    strides = [0] * pad + [s if n == w else 0 for n, s, w in zip(x.shape, x.stride(), other.shape[pad:])]\n"
        "    return x.as_strided(other.shape, strides)",
        "on these inputs your function must refuse (raise RuntimeError or ValueError)",
    ),
    "08-bytes-by-dispatch": (  # no mode: the storages of what fn returned, so nothing that autograd saved
        "def bytes_by_dispatch(fn, *args):\n"
        "    out = fn(*args)\n"
        "    outs = out if isinstance(out, tuple) else (out,)\n"
        "    mine = {t.untyped_storage().data_ptr() for t in args}\n"
        "    found = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in outs}\n"
        "    return sum(n for p, n in found.items() if p not in mine)",
        "the result is 24 (int), expected 48 (int)",
    ),
    "09-pick-per-row": (  # -1 read as the last column
        "import torch\n\ndef pick_per_row(scores, labels):\n    return scores[torch.arange(len(labels)), labels]",
        "values differ",
    ),
    "10-saved-bytes": (  # per saved tensor, not per storage: t1 * t1 counts t1 twice
        "import torch\n\ndef saved_bytes(fn, *args):\n"
        "    sizes = []\n\n"
        "    def pack(t):\n"
        "        sizes.append(t.untyped_storage().nbytes())\n"
        "        return t\n\n"
        "    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):\n"
        "        fn(*args)\n"
        "    return sum(sizes)",
        "the result is 72 (int), expected 48 (int)",
    ),
    "03-windows-by-strides": (  # ignores x's storage offset
        "def windows_by_strides(x, size, step):\n"
        "    s = x.stride(0)\n"
        "    return x.as_strided(((len(x) - size) // step + 1, size), (step * s, s), 0)",
        "values differ",
    ),
}

RULE_BREAKING = {
    "02-pairwise-diff": (
        "def pairwise_diff(p):\n    n = p.shape[0]\n"
        "    return p.unsqueeze(1).repeat(1, n, 1) - p.unsqueeze(0).repeat(n, 1, 1)",
        "breaks rule `forbid repeat`: your function ran aten.repeat.default at line 3 of this cell",
    ),
    "05-count-labels": (
        "import torch\n\ndef count_labels(labels, num_classes):\n"
        "    return torch.bincount(labels, minlength=num_classes).float()",
        "breaks rule `forbid bincount`",
    ),
    "04-causal-mask": (
        "import torch\n\ndef causal(q_len, k_len, window):\n    m = torch.ones(q_len, k_len, dtype=torch.bool)\n"
        "    return m.tril() & ~m.tril(-window)",
        "breaks rule `forbid tril`",
    ),
    "03-grad-of-expand": (
        "import torch\n\ndef grad_of_expand(upstream):\n"
        "    x = torch.zeros(1, upstream.shape[1], requires_grad=True)\n"
        "    x.expand_as(upstream).backward(upstream)\n    return x.grad",
        "breaks rule `forbid autograd`",
    ),
    "06-repeat-bytes": ("def repeat_bytes(x, reps):\n    return x.repeat(*reps).nbytes", "breaks rule `forbid repeat`"),
    "05-batch-view": (
        "def batch_view(sample, n):\n    return sample.clone().unsqueeze(0).expand(n, *sample.shape)",
        "breaks rule `must_view`",
    ),
    "07-safe-copy": ("def safe_copy(x):\n    return x.contiguous()", "breaks rule `must_copy`"),
    "05-flatten-any": ("def flatten_any(x):\n    return x.clone().view(-1)", "breaks rule `view_when_possible`"),
    "03-windows-by-strides": (
        "def windows_by_strides(x, size, step):\n    return x.unfold(0, size, step)",
        "breaks rule `forbid unfold`: your function ran aten.unfold.default at line 2 of this cell",
    ),
    "07-expand-as-by-strides": (
        "def expand_as_by_strides(x, other):\n    return x.expand_as(other)",
        "breaks rule `forbid expand`",
    ),
    "08-bytes-by-dispatch": (
        "import torch\n\ndef bytes_by_dispatch(fn, *args):\n"
        "    with torch.profiler.profile(profile_memory=True) as prof:\n        fn(*args)\n"
        "    return sum(max(e.cpu_memory_usage, 0) for e in prof.events())",
        "breaks rule `forbid profiler`: your function called torch.profiler.profile at line 4 of this cell",
    ),
    "09-pick-per-row": (
        "def pick_per_row(scores, labels):\n"
        "    return scores[:, labels.clamp(min=0)].diagonal().masked_fill(labels < 0, 0)",
        "breaks rule `max_new_bytes`",
    ),
}

LOOPS = {
    "02-pairwise-diff": (
        "import torch\n\ndef pairwise_diff(p):\n    return torch.stack([row - p for row in p])",
        "breaks rule `no_python_loops`: your function has a comprehension at line 4 of this cell",
    ),
    "05-count-labels": (
        "import torch\n\ndef count_labels(labels, num_classes):\n"
        "    counts = torch.zeros(labels.shape[0], num_classes)\n"
        "    for b, row in enumerate(labels):\n        for c in row:\n            counts[b, c] += 1\n    return counts",
        "breaks rule `no_python_loops`: your function has a for loop",
    ),
    "04-causal-mask": (
        "import torch\n\ndef causal(q_len, k_len, window):\n    out = torch.zeros(q_len, k_len, dtype=torch.bool)\n"
        "    i = 0\n    while i < q_len:\n        out[i, max(0, i - window + 1) : i + 1] = True\n        i += 1\n"
        "    return out",
        "breaks rule `no_python_loops`: your function has a while loop",
    ),
}

FRAMES = """
import sys
import torch

def flatten_any(x):
    f = sys._getframe(1)
    while f is not None:
        for name, value in f.f_locals.items():
            if name in ("expected", "reference", "ref") and isinstance(value, torch.Tensor):
                return value
        f = f.f_back
    return torch.zeros(0)
"""

GC = """
import gc
import torch

found = []

def flatten_any(x):
    if not found:  # one walk of every object the collector tracks, then the reference if one was there
        found.append([o for o in gc.get_objects() if type(o).__name__ == "Exercise"])
    if found[0]:
        return found[0][0].reference(x)
    return torch.full((x.numel() + 1,), -1.0)
"""

SUBCLASS = """
import torch

class Liar(torch.Tensor):
    def __eq__(self, other):
        return torch.ones(self.shape, dtype=torch.bool)

def flatten_any(x):
    return torch.zeros(x.numel()).as_subclass(Liar)
"""

CUSTOM_OP = """
import torch

@torch.library.custom_op("classroom::tiled", mutates_args=())
def tiled(p: torch.Tensor, n: int) -> torch.Tensor:
    return p.repeat(n, 1, 1)

@tiled.register_fake
def _(p, n):
    return p.new_empty((n, *p.shape))

def pairwise_diff(p):
    n = p.shape[0]
    return p.unsqueeze(1) - tiled(p, n)
"""

MUTATION = """
def safe_copy(x):
    y = x.clone()
    x.fill_(7)
    return y
"""


def _sub(folder: Path, stem: str, learner: str, answers: dict[str, str]) -> None:
    data = {
        "format": 1,
        "learner": learner,
        "course_version": "test",
        "answers": {k: _d(v) for k, v in answers.items()},
    }
    (folder / f"{stem}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")


def build(folder: Path) -> dict[tuple[str, str], tuple[bool, str]]:
    """Write the classroom into ``folder``; the expected rows."""
    folder.mkdir(parents=True, exist_ok=True)
    want: dict[tuple[str, str], tuple[bool, str]] = {}

    def learner(stem: str, name: str, answers: dict[str, tuple[str, tuple[bool, str]]]) -> None:
        _sub(folder, stem, name, {k: v[0] for k, v in answers.items()})
        for ex in EXERCISES:
            want[(name, ex)] = answers[ex][1] if ex in answers else NONE

    learner("ada", "Ada", {e: (solution_source(get(e)), PASS) for e in EXERCISES})
    learner("ben", "Ben", {e: (t, PASS) for e, t in RIGHT_OTHER_WAY.items()})
    learner("cara", "Cara", {e: (t, (False, why)) for e, (t, why) in WRONG.items()})
    learner("dev", "Dev", {e: (t, (False, why)) for e, (t, why) in RULE_BREAKING.items()})
    learner("eve", "Eve", {e: (t, (False, why)) for e, (t, why) in LOOPS.items()})
    learner("finn", "Finn", {"05-flatten-any": (FRAMES, (False, "the result has shape (0,), expected (6,)"))})
    learner("gus", "Gus", {"05-flatten-any": (GC, (False, "the result has shape (7,), expected (6,)"))})
    learner("hana", "Hana", {"05-flatten-any": (SUBCLASS, (False, "your function returned a Liar (a subclass"))})
    learner(
        "ivan",
        "Ivan",
        {
            "07-safe-copy": (MUTATION, (False, "your function changed its input in place")),
            "02-pairwise-diff": (CUSTOM_OP, (False, "breaks rule `torch_only`: your function ran the custom operator")),
        },
    )
    hang = "def flatten_any(x):\n    while True:\n        pass"
    learner(
        "jo",
        "Jo",
        {
            "05-flatten-any": (hang, (False, "stopped: the answer ran past its time limit")),
            "07-safe-copy": (solution_source(get("07-safe-copy")), PASS),  # graded by a restarted process
        },
    )
    alloc = "import torch\n\ndef flatten_any(x):\n    big = torch.empty(50 * 10**9, dtype=torch.uint8)\n    return big"
    learner(
        "kim",
        "Kim",
        {
            "05-flatten-any": (
                alloc,
                (False, "DefaultCPUAllocator: can't allocate memory: you tried to allocate 50000000000 bytes"),
            ),
            "07-safe-copy": (solution_source(get("07-safe-copy")), PASS),
        },
    )
    learner("lee", "Lee", {"05-flatten-any": ("def flatten_any(x)\n    return x", (False, "SyntaxError"))})
    crash = "import os\n\ndef flatten_any(x):\n    os.abort()"
    learner(
        "mo",
        "Mo",
        {
            "05-flatten-any": (crash, (False, "killed by SIGABRT")),
            "07-safe-copy": (solution_source(get("07-safe-copy")), PASS),
        },
    )
    net = "import socket\n\ndef flatten_any(x):\n    socket.create_connection(('192.0.2.1', 80), timeout=1)\n    return x.reshape(-1)"
    learner("nia", "Nia", {"05-flatten-any": (net, (False, "the grader does not allow socket."))})
    proc = "import subprocess\n\ndef safe_copy(x):\n    subprocess.run(['true'])\n    return x.clone()"
    learner("oli", "Oli", {"07-safe-copy": (proc, (False, "the grader does not allow subprocess.Popen"))})
    bank = (
        "from viewlab.course.exercises import get\n\ndef flatten_any(x):\n    return get('05-flatten-any').reference(x)"
    )
    learner(
        "pat",
        "Pat",
        {"05-flatten-any": (bank, (False, "the grader does not allow importing viewlab.course.exercises.bank"))},
    )
    stub = "def flatten_any(x):\n    raise NotImplementedError"
    learner("quinn", "Quinn", {"05-flatten-any": (stub, (False, "not solved yet"))})
    learner(
        "ray",
        "Ray",
        {"05-flatten-any": ("def flatten_any(x, y):\n    return x.reshape(-1)", (False, "cannot be called"))},
    )
    learner(
        "sam",
        "Sam",
        {"05-flatten-any": ("def flatten_any(x):\n    raise SystemExit(3)", (False, "raised SystemExit: 3"))},
    )
    (folder / "malformed.json").write_text("{not json", encoding="utf-8")
    want[("malformed", "*")] = (False, "the file is not JSON")
    (folder / "empty.json").write_text("", encoding="utf-8")
    want[("empty", "*")] = (False, "the file is empty")
    _sub(folder, "tom", "Tom", {})
    want[("Tom", "*")] = (False, "the submission holds no answers")
    return want
