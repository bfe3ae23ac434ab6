"""viewlab.ipython: where the code runs (kernel, Colab), and what IPython keeps alive -- found and released
in a real kernel, and named clearly outside one."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import viewlab
import viewlab._format
from viewlab.ipython import HeldTensor, held_by_ipython, in_kernel, on_colab, release_ipython_refs

pytestmark = pytest.mark.colab  # also run on Colab's stack (IPython 7.34): make test-colab


def run_in_kernel(codes: list[str], timeout: float = 120) -> list[str]:
    """Run each code string as one cell of a fresh python3 kernel; what each cell printed."""
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    texts = []
    try:
        for code in codes:
            msg_id = kc.execute(code)
            text = []
            while True:
                msg = kc.get_iopub_msg(timeout=timeout)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    text.append(msg["content"]["text"])
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
            texts.append("".join(text))
        return texts
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_package_face_and_this_module_are_the_same_functions():
    assert viewlab.held_by_ipython is held_by_ipython and viewlab.release_ipython_refs is release_ipython_refs


@pytest.mark.kernel
def test_in_a_kernel_output_history_and_a_traceback_keep_tensors_alive_until_released():
    texts = run_in_kernel(
        [
            "import torch, gc, weakref\nfrom viewlab.ipython import held_by_ipython, in_kernel, release_ipython_refs",
            "torch.zeros(1000, 250)",  # a cell whose value is a 1,000,000-byte tensor: Out[2] and _ keep it
            "def f():\n    big = torch.ones(500_000)\n    raise RuntimeError('boom')\nf()",  # the traceback keeps big
            "mine = torch.ones(10)\nmine",  # shown, but also held by the learner's own variable
            "for h in held_by_ipython():\n    print(h.where, h.shape, h.bytes)\n"
            "print('only traceback', [h.where for h in held_by_ipython(sources=('traceback',))])",
            "print('freed', release_ipython_refs())\nprint('left', [h.where for h in held_by_ipython()])",
            "import gc\nfor o in gc.get_objects():\n    if isinstance(o, torch.Tensor) and o.numel() in (250000, 500000):\n        print('ALIVE', o.shape, [type(r).__name__ for r in gc.get_referrers(o)])",
            "print('mine still there', mine.shape, 'in a kernel', in_kernel())",
        ]
    )
    held = texts[4]
    assert "Out[2] (1000, 250) 1000000" in held and held.count("(1000, 250)") == 1, "Out[2], _2 and _: listed once"
    assert "traceback: f() local 'big' (500000,) 2000000" in held
    assert "(10,)" not in held, "a tensor the learner still names is not reported"
    assert "only traceback [\"traceback: f() local 'big'\"]" in held, held
    assert "freed 3000000" in texts[5] and "left []" in texts[5]
    assert "mine still there torch.Size([10]) in a kernel True" in texts[7], texts[6]


def test_outside_ipython_it_says_so_and_bad_sources_are_named():
    with pytest.raises(RuntimeError, match=r"^held_by_ipython\(\): works inside IPython or Jupyter"):
        held_by_ipython()
    with pytest.raises(RuntimeError, match=r"^release_ipython_refs\(\): works inside IPython or Jupyter"):
        release_ipython_refs()
    shell = SimpleNamespace(user_ns={"Out": {1: torch.zeros(4)}})
    with pytest.raises(ValueError, match=r"^release_ipython_refs\(\): `sources` must be some of \('history', "):
        release_ipython_refs(shell, sources="logs")
    with pytest.raises(ValueError, match=r"^held_by_ipython\(\): `sources` .*; got tuple \(\)"):
        held_by_ipython(shell, sources=())
    with pytest.raises(ValueError, match=r"`sources` .*; got list \[\['history'\]\]"):
        held_by_ipython(shell, sources=[["history"]])  # unhashable items: the same clear error
    with pytest.raises(TypeError, match=r"^held_by_ipython\(\): `ip` must be the IPython shell \(get_ipython\(\)\)"):
        held_by_ipython(ip=3)
    assert release_ipython_refs(shell, sources="traceback") == 0 and 1 in shell.user_ns["Out"]
    assert release_ipython_refs(shell, sources="history") == 16 and shell.user_ns["Out"] == {}


def test_outputs_inside_containers_are_found_by_path_and_a_storage_is_listed_once():
    big, deep = torch.zeros(300), torch.ones(5)
    shell = SimpleNamespace(
        user_ns={
            "Out": {1: (big, "text"), 2: {"logits": torch.ones(2, 3)}, 3: [[deep]], 4: "no tensor"},
            "_": big[:10],  # the same storage as Out[1], under another name
            "_7": 5,
            "__": {"mine": None},
        }
    )
    expected = [("Out[1][0]", big), ("Out[2]['logits']", shell.user_ns["Out"][2]["logits"]), ("Out[3][0][0]", deep)]
    held = held_by_ipython(shell)  # "_" is a view of Out[1]'s storage: listed once, where first found
    assert [(h.where, h.shape, h.bytes) for h in held] == [
        (where, tuple(t.shape), t.untyped_storage().nbytes()) for where, t in expected
    ]
    assert (
        repr(held[0]) == f"HeldTensor(Out[1][0]: shape (300,), torch.float32, cpu, {viewlab._format.exact_bytes(1200)})"
    )
    assert repr(HeldTensor("_", torch.zeros(2))) == "HeldTensor(_: shape (2,), torch.float32, cpu, 8 B)"
    dying = sum(t.untyped_storage().nbytes() for where, t in expected[1:3]) + big.untyped_storage().nbytes()
    del big, deep, held, expected
    assert release_ipython_refs(shell) == dying
    assert list(shell.user_ns["Out"]) == [4], "every entry that reaches a tensor is dropped, the rest stays"
    assert shell.user_ns["_"] is None and shell.user_ns["_7"] == 5 and shell.user_ns["__"] == {"mine": None}


def test_a_stand_in_shells_learner_names_hide_what_they_reach_and_sparse_tensors_are_told_apart():
    mine_sparse, shown_sparse = torch.eye(3).to_sparse(), torch.eye(4).to_sparse()
    model, kept = torch.nn.Linear(4, 2), torch.zeros(9)
    shell = SimpleNamespace(
        user_ns={
            "Out": {1: model.weight, 2: shown_sparse, 3: mine_sparse, 4: torch.zeros(6, device="meta"), 5: kept[1:]},
            "model": model,
            "sp": mine_sparse,
            "cache": SimpleNamespace(items=[{"kept": kept}]),  # an object's attribute, then a list, then a dict
        }
    )
    held = held_by_ipython(shell)
    sparse_bytes = sum(p.numel() * p.element_size() for p in (shown_sparse._indices(), shown_sparse._values()))
    assert [(h.where, h.bytes) for h in held] == [("Out[2]", sparse_bytes), ("Out[4]", 0)]


SHELL_DRIVER = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
config = Config()
config.HistoryManager.enabled = False  # no sqlite file, no saving thread
for cells in json.load(sys.stdin):
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance(config=config)
    for cell in cells:
        ip.run_cell(cell, store_history=True)
"""


def run_in_shell(scenarios: list[list[str]]) -> list[dict]:
    """Run each scenario's cells in a fresh real IPython shell (InteractiveShell.run_cell, so the display hook
    fills Out, _, _N and an error fills sys.last_*), in a subprocess so this process never becomes IPython. A
    scenario's cells print ``RESULT <json>`` lines; they come back as dicts, in order."""
    pytest.importorskip("IPython")
    env = {**os.environ, "PYTHONPATH": str(Path(viewlab.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", SHELL_DRIVER],
        input=json.dumps(scenarios),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == len(scenarios), out.stdout[-3000:] + out.stderr[-3000:]
    return results


SETUP = "import gc, sys, weakref, torch\nfrom viewlab.ipython import held_by_ipython, release_ipython_refs"
# Each scenario: the cells that leave something to IPython, then one cell that records (weakrefs, bytes computed
# from the objects themselves) before and after release_ipython_refs(); the last cell prints it.
REPORT = (
    "held = [(h.where, h.bytes) for h in held_by_ipython()]\n"
    "freed = release_ipython_refs()\n"
    "alive = {k: r() is not None for k, r in refs.items()}\n"
    "left = [h.where for h in held_by_ipython()]\n"
    "print('RESULT ' + json.dumps(dict(held=held, freed=freed, expected=expected, alive=alive, left=left, **after())))"
)
# The scenario's own cells are In[3], In[4]...: a cell's value is Out[3], Out[4]...
SCENARIOS = {
    "a parameter the learner holds through model is not IPython's": [
        "model = torch.nn.Linear(64, 8)",
        "model.weight",
        "refs, expected, after = {'weight': weakref.ref(model.weight)}, 0, dict",
    ],
    "a displayed nn.Module, nested containers and a .numpy() array": [
        "torch.nn.Linear(32, 16)",
        "refs = {'module': weakref.ref(_)}\nexpected = sum(p.untyped_storage().nbytes() for p in _.parameters())",
        "[[{'a': torch.ones(30)}], (torch.zeros(5),)]",
        "refs['deep'] = weakref.ref(_[0][0]['a'])\nexpected += _[0][0]['a'].nbytes + _[1][0].nbytes",
        "torch.arange(40.0).numpy()",
        "refs['array'] = weakref.ref(_)\nexpected += _.nbytes\nafter = dict",
    ],
    "meta and nested tensors in Out; a sparse variable of the learner's hides only itself": [
        "torch.zeros(1000, device='meta')",
        "refs = {'meta': weakref.ref(_)}\nexpected = 0",
        "torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])",
        "expected += sum(c.numel() * c.element_size() for c in _.unbind())",
        "sp_mine = torch.eye(3).to_sparse()\nsp_mine",
        "torch.eye(5).to_sparse()",
        "refs['sparse'] = weakref.ref(_)\nexpected += _._values().nbytes + _._indices().nbytes\n"
        "after = lambda: {'mine_sparse': tuple(sp_mine.shape)}",
    ],
    "the learner's own _ stays, IPython's older results and the display hook's copy go": [
        "torch.zeros(25)",
        "refs = {'first': weakref.ref(_)}\nexpected = _.nbytes",
        "_ = torch.ones(7)",
        "torch.zeros(50)",  # the display hook keeps it even though it no longer updates _
        "refs['second'] = weakref.ref(Out[6])\nexpected += Out[6].nbytes\nmine = weakref.ref(_)",
        "Out.clear()\ndel _3, _6",  # what is left: IPython's hidden copies and its display hook's
        "after = lambda: {'own_underscore': _ is mine() and tuple(_.shape) == (7,)}",
    ],
    "a stored traceback: the error's attributes and its frames' locals": [
        "class Payload(Exception):\n    pass\n"
        "def step():\n    activations = torch.ones(500)\n    err = Payload('boom')\n"
        "    err.tensor = torch.ones(100)\n    raise err",
        "step()",
        "tb = sys.last_traceback\nwhile tb.tb_next is not None:\n    tb = tb.tb_next\n"
        "refs = {'activations': weakref.ref(tb.tb_frame.f_locals['activations'])}\n"
        "expected = tb.tb_frame.f_locals['activations'].nbytes + sys.last_value.tensor.nbytes\ndel tb\nafter = dict",
    ],
}


@pytest.fixture(scope="module")
def shell_results() -> dict[str, dict]:
    scenarios = [[SETUP, "import json"] + cells + [REPORT] for cells in SCENARIOS.values()]
    return dict(zip(SCENARIOS, run_in_shell(scenarios)))


def test_in_a_real_shell_a_parameter_the_learner_still_holds_is_not_reported(shell_results):
    r = shell_results["a parameter the learner holds through model is not IPython's"]
    assert r["held"] == [] and r["freed"] == 0 and r["alive"] == {"weight": True}


def test_in_a_real_shell_modules_containers_and_numpy_arrays_are_walked_and_freed(shell_results):
    r = shell_results["a displayed nn.Module, nested containers and a .numpy() array"]
    where = [w for w, _ in r["held"]]
    assert {"Out[3].weight", "Out[3].bias", "Out[5][0][0]['a']", "Out[5][1][0]", "Out[7].base"} <= set(where), where
    assert r["freed"] == r["expected"] > 0 and not any(r["alive"].values()) and r["left"] == []


def test_in_a_real_shell_meta_nested_and_sparse_tensors(shell_results):
    r = shell_results["meta and nested tensors in Out; a sparse variable of the learner's hides only itself"]
    held = dict(r["held"])
    assert held["Out[3]"] == 0, "a meta tensor holds no bytes"
    assert "Out[7]" not in held and held["Out[8]"] > 0, "the learner's sparse tensor is theirs; another one is not"
    assert r["mine_sparse"] == [3, 3]
    assert r["freed"] == r["expected"] and not any(r["alive"].values()) and r["left"] == []


def test_in_a_real_shell_the_learners_own_underscore_is_never_touched(shell_results):
    r = shell_results["the learner's own _ stays, IPython's older results and the display hook's copy go"]
    assert r["own_underscore"] is True
    assert "the display hook's _" in dict(r["held"]) and "IPython's hidden _" in dict(r["held"])
    assert r["freed"] == r["expected"] and not any(r["alive"].values()) and r["left"] == []


def test_in_a_real_shell_a_stored_error_keeps_its_payload_and_locals_until_released(shell_results):
    r = shell_results["a stored traceback: the error's attributes and its frames' locals"]
    where = [w for w, _ in r["held"]]
    assert "traceback: step() local 'activations'" in where and "traceback: the error Payload.tensor" in where
    assert r["freed"] == r["expected"] and not any(r["alive"].values()) and r["left"] == []


def test_in_kernel_and_on_colab_read_the_running_session():
    assert in_kernel() is False, "plain pytest is no kernel"
    assert on_colab() is ("google.colab" in sys.modules)


# How an output or a learner's variable may hold a tensor: bare, in containers, as an attribute, in a model's
# buffers, through a NumPy array that shares its storage.
def _in_module(t: torch.Tensor) -> torch.nn.Module:
    module = torch.nn.Module()
    module.register_buffer("kept", t)
    return module


WRAPS = {
    "bare": lambda t: t,
    "in a list in a dict": lambda t: {"a": [1, t]},
    "as an attribute": lambda t: SimpleNamespace(inner=SimpleNamespace(t=t)),
    "a model's buffer": _in_module,
    "as a NumPy array": lambda t: t.numpy(),
}


@settings(max_examples=40)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 40),
            st.sampled_from(["only Out", "also mine", "a view of mine"]),
            st.sampled_from(sorted(WRAPS)),
            st.sampled_from(sorted(WRAPS)),
        ),
        max_size=5,
    )
)
def test_release_frees_exactly_the_storages_no_learner_name_reaches(entries):
    # release_ipython_refs ends with a full gc.collect(), which walks every object of this worker (a second or
    # more once other test files have run here). gc.freeze() sets those older objects aside for this example only:
    # what the example makes is collected as before, so what is freed, and the assertions, are the same.
    gc.freeze()
    try:
        _release_frees_exactly_the_storages_no_learner_name_reaches(entries)
    finally:
        gc.unfreeze()


def _release_frees_exactly_the_storages_no_learner_name_reaches(entries) -> None:
    out, mine, dying, refs, t = {}, {}, 0, [], None
    for number, (n, kind, shown, kept) in enumerate(entries, start=1):
        t = torch.zeros(n)
        out[number] = WRAPS[shown](t if kind != "a view of mine" else t[1:])
        if kind == "only Out":
            dying += t.untyped_storage().nbytes()
            refs.append(weakref.ref(t))
        else:
            mine[f"x{number}"] = WRAPS[kept](t)
    del t
    shell = SimpleNamespace(user_ns={"Out": out, **mine})
    listed = held_by_ipython(shell)
    assert sum(h.bytes for h in listed) == dying and len(listed) == len(refs)
    del listed
    assert release_ipython_refs(shell) == dying and shell.user_ns["Out"] == {}
    assert all(r() is None for r in refs) and all(shell.user_ns[k] is v for k, v in mine.items())


def test_a_jagged_nested_tensor_counts_its_values_and_offsets():
    """A jagged nested tensor has no storage of its own (its wrapper's holds no data): its parts are counted."""
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)], layout=torch.jagged)
    parts = nested.values().untyped_storage().nbytes() + nested.offsets().untyped_storage().nbytes()
    assert parts == 5 * 4 + 3 * 8  # five float32 values, three int64 offsets
    shell = SimpleNamespace(user_ns={"Out": {1: nested}})
    assert [(h.where, h.bytes) for h in held_by_ipython(shell)] == [("Out[1]", parts)]
    ref = weakref.ref(nested.values())
    del nested
    assert release_ipython_refs(shell) == parts and ref() is None


def test_cycles_and_deep_nesting_end_the_walk():
    looped = [torch.zeros(3)]
    looped.append(looped)  # a list that holds itself
    deep: list = [torch.ones(2)]
    for _ in range(2000):  # far past the walk's depth, and past Python's recursion limit
        deep = [deep]
    shell = SimpleNamespace(user_ns={"Out": {1: looped, 2: deep}})
    assert [(h.where, h.bytes) for h in held_by_ipython(shell)] == [("Out[1][0]", looped[0].untyped_storage().nbytes())]


def test_each_name_has_its_own_budget_so_a_big_list_hides_nothing_after_it():
    kept = torch.ones(250)
    junk = [(i,) for i in range(60_000)]  # 60,000 objects: past one name's budget of 50,000
    shell = SimpleNamespace(user_ns={"junk": junk, "kept": kept, "Out": {1: kept}})
    assert held_by_ipython(shell) == [] and release_ipython_refs(shell) == 0
    # Within one name the budget still ends the walk: a tensor past 60,000 objects of one list is not reached.
    late = torch.ones(100)
    shell = SimpleNamespace(user_ns={"junk": [*junk, late], "Out": {1: late}})
    assert [(h.where, h.bytes) for h in held_by_ipython(shell)] == [("Out[1]", 400)]


def test_the_depth_is_walked_from_each_name_so_the_order_names_were_bound_in_changes_nothing():
    """A container one name reaches at the depth limit is walked again from a name that reaches it higher up."""
    t = torch.zeros(250)
    box = [t]  # t is one level below box
    deep = [[[[[[box]]]]]]  # deep reaches box six levels down, so t (seven) is past deep's walk
    for order in (("deep", "box"), ("box", "deep")):
        mine = {"deep": deep, "box": box}
        shell = SimpleNamespace(user_ns={n: mine[n] for n in order} | {"Out": {3: t}})
        assert held_by_ipython(shell) == [] and release_ipython_refs(shell) == 0 and box[0] is t
    shell = SimpleNamespace(user_ns={"deep": deep, "Out": {3: t}})  # deep alone does not reach t
    assert [(h.where, h.bytes) for h in held_by_ipython(shell)] == [("Out[3]", 1000)]
    # A list whose walk one name's budget ended is walked again from another name: what lies past it is found.
    late = torch.ones(100)
    junk = [(i,) for i in range(60_000)] + [late]
    shell = SimpleNamespace(user_ns={"junk": junk, "again": [junk], "Out": {1: late}})
    assert held_by_ipython(shell) == [] and release_ipython_refs(shell) == 0


def test_a_non_leafs_retained_grad_is_followed_and_a_plain_non_leaf_has_none():
    w = torch.ones(3, requires_grad=True)
    y, z = w * 2, w * 3
    y.retain_grad()
    (y.sum() + z.sum()).backward()
    shell = SimpleNamespace(user_ns={"y": y, "z": z, "Out": {1: y.grad}})
    assert held_by_ipython(shell) == [] and release_ipython_refs(shell) == 0
    shell = SimpleNamespace(user_ns={"z": z, "Out": {1: y.grad}})  # z keeps no grad: Out's is IPython's
    assert [(h.where, h.bytes) for h in held_by_ipython(shell)] == [("Out[1]", 12)]
