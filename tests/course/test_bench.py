"""viewlab.course.bench: side-by-side timing. Only structure and arithmetic are asserted, never wall-clock values."""

import pytest
import torch

from tests.conftest import ROOT
from viewlab.course.bench import BenchRow, Comparison, apart, compare, firm, same_bytes_copy


def test_every_case_runs_and_rows_keep_the_given_order():
    calls = {"a": 0, "b": 0}

    def a():
        calls["a"] += 1

    def b():
        calls["b"] += 1

    c = compare({"a": a, "b": b}, rounds=2, min_run_time=0.005)
    assert [r.name for r in c.rows] == ["a", "b"]
    assert calls["a"] > 0 and calls["b"] > 0
    assert c.reference == "a"
    assert all(r.runs >= 2 and r.median_s > 0 for r in c.rows)  # at least one block per round


def test_ratio_and_bandwidth_are_consistent_with_the_medians():
    x = torch.ones(4096)
    fn, nbytes = same_bytes_copy(x)
    c = compare(
        {"copy": fn, "clone": x.clone}, reference="clone", bytes_moved={"copy": nbytes}, rounds=1, min_run_time=0.01
    )
    assert c["clone"].ratio == 1.0
    assert c["copy"].ratio == pytest.approx(c["copy"].median_s / c["clone"].median_s)
    assert c["copy"].gb_per_s == pytest.approx(nbytes / c["copy"].median_s / 1e9)
    assert c["clone"].bytes_moved is None and c["clone"].gb_per_s is None
    assert c.speedup("clone", "copy") == pytest.approx(c["clone"].median_s / c["copy"].median_s)
    text = str(c)
    assert text.splitlines()[0].split()[:3] == ["candidate", "median", "IQR"]
    assert "clone" in c._repr_html_()


def test_same_bytes_copy_really_copies_the_bytes_of_the_logical_tensor():
    fn, nbytes = same_bytes_copy(torch.zeros(1, 100, dtype=torch.float64).expand(3, 100))
    assert nbytes == 2 * 3 * 100 * 8  # read + write, logical size (not the 800-byte storage)
    out = fn()
    assert out.numel() == 3 * 100 * 8 and bool((out == 1).all())


def test_lookup_of_unknown_candidate_says_which_exist():
    c = Comparison((BenchRow("x", 1.0, 0.0, 1, 1.0, None, None),), "x")
    with pytest.raises(KeyError, match=r"no candidate named 'y'; candidates: \['x'\]"):
        c["y"]


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(cases={}), ValueError, "non-empty dict"),
        (dict(cases={"a": 3}), TypeError, "case 'a' is a int, not a callable"),
        (dict(cases={"a": int}, reference="b"), ValueError, r"reference='b' is not one of the cases \['a'\]"),
        (dict(cases={"a": int}, bytes_moved={"b": 1}), ValueError, "bytes_moved names 'b'"),
        (dict(cases={"a": int}, bytes_moved={"a": -1}), ValueError, r"`bytes_moved\['a'\]` must be an int in 0\.\."),
        (dict(cases={"a": int}, rounds=0), ValueError, r"compare\(\): `rounds` must be an int >= 1; got int 0"),
        # a count that is not a whole number is the wrong kind of thing: TypeError, as for num_threads
        (dict(cases={"a": int}, rounds=1.5), TypeError, r"compare\(\): `rounds` must be an int >= 1; got float 1.5"),
        (dict(cases={"a": int}, min_run_time=0), ValueError, r"`min_run_time` must be a finite number > 0 <= 60"),
    ],
)
def test_bad_input_is_explained(kwargs, exc, match):
    cases = kwargs.pop("cases")
    with pytest.raises(exc, match=match):
        compare(cases, **kwargs)


def test_same_bytes_copy_rejects_non_tensors():
    with pytest.raises(TypeError, match="expects a torch.Tensor for `like`"):
        same_bytes_copy([1, 2, 3])


def test_benchmark_script_reports_every_candidate_per_size():
    import importlib.util

    path = ROOT / "benchmarks" / "expand_vs_repeat.py"
    spec = importlib.util.spec_from_file_location("expand_vs_repeat", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.run([2, 8], rounds=1, min_run_time=0.001, device="cpu", threads=1)
    assert [s["rows"] for s in result["sizes"]] == [2, 8]
    for size in result["sizes"]:
        names = [c["name"] for c in size["candidates"]]
        assert names == ["same-bytes copy", "expand", "repeat", "copy_ into buffer"]
        assert size["output_bytes"] == size["rows"] * module.WIDTH * 4
        copy = size["candidates"][0]
        assert copy["ratio_to_copy"] == 1.0 and copy["bytes_moved"] == 2 * size["output_bytes"]


def _outcome_within(seconds, fn):
    """Run fn in a daemon thread: ("returned", value), ("raised", exc), or ("hung", None) after `seconds`."""
    import threading

    box = {}

    def target():
        try:
            box["returned"] = fn()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            box["raised"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return "hung", None
    return next(iter(box.items()))


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e9, True])
def test_min_run_time_that_never_ends_is_refused_regression(value):
    kind, got = _outcome_within(10, lambda: compare({"a": lambda: None}, rounds=1, min_run_time=value))
    assert kind == "raised", f"compare(min_run_time={value!r}) {kind}"
    want = TypeError if value is True else ValueError  # a bool is not a number of seconds
    assert isinstance(got, want) and "compare(): `min_run_time` must be" in str(got), got


def test_compare_refuses_what_would_time_out_or_fail_inside_the_timer():
    kind, got = _outcome_within(10, lambda: compare({"a": lambda: None}, rounds=1000, min_run_time=1.0))
    assert kind == "raised" and "would time for at least 1,000 s" in str(got), (kind, got)
    with pytest.raises(TypeError, match=r"case 'a' takes arguments \(x\)"):
        compare({"a": lambda x: x})
    with pytest.raises(TypeError, match=r"compare\(\): `reference` must be a str or None; got list"):
        compare({"a": lambda: None}, reference=["a"])  # was: unhashable type: 'list'
    with pytest.raises(TypeError, match=r"compare\(\): `bytes_moved` must be a dict"):
        compare({"a": lambda: None}, bytes_moved=[("a", 1)])
    with pytest.raises(ValueError, match=r"compare\(\): `num_threads` must be an int in 1\.\."):
        compare({"a": lambda: None}, num_threads=0)


def _row(name, median_s, iqr_s, runs=10, bytes_moved=None):
    return BenchRow(name, median_s, iqr_s, runs, 1.0, bytes_moved, None if bytes_moved is None else 1.0)


def test_apart_needs_medians_further_apart_than_the_two_iqrs():
    a = _row("a", 1.00e-3, 0.24e-3)
    assert firm(a, _row("b", 0.99e-3, 0.24e-3)) and not apart(a, _row("b", 0.99e-3, 0.24e-3))  # firm, not apart
    assert apart(a, _row("c", 0.5e-3, 0.1e-3)) and apart(_row("c", 0.5e-3, 0.1e-3), a)  # symmetric
    assert not apart(a, _row("d", 0.76e-3, 0.0))  # 0.24 ms apart, 0.24 ms of IQR: the ranges may touch
    assert not apart(a, _row("e", 0.1e-3, 0.1e-3, runs=2))  # far apart, but on 2 blocks: not firm


def test_apart_compares_per_byte_when_both_rows_name_their_bytes():
    small, big = _row("small", 1e-6, 1e-8, bytes_moved=1000), _row("big", 1e-3, 1e-5, bytes_moved=1_000_000)
    assert not apart(small, big)  # the same bandwidth, 1000x the time
    assert apart(small, _row("slow", 4e-3, 1e-5, bytes_moved=1_000_000))  # a quarter of the bandwidth
    assert apart(small, _row("none", 1e-3, 1e-5))  # no bytes on one row: per call


def test_apart_names_its_argument():
    with pytest.raises(TypeError, match="`b`"):
        apart(_row("a", 1.0, 0.0), 1.0)


def test_table_marks_the_numbers_that_firm_does_not_back():
    steady, noisy = _row("steady", 1e-3, 1e-5, bytes_moved=1000), _row("noisy", 2e-3, 1e-3, bytes_moved=1000)
    lines = str(Comparison((steady, noisy), "steady")).splitlines()
    assert "(spread)" not in lines[1] and lines[2].count("(spread)") == 2  # its ratio and its GB/s
    assert lines[-1].startswith("(spread): an IQR over a quarter of its median")
    lines = str(Comparison((steady, noisy), "noisy")).splitlines()
    assert lines[1].count("(spread)") == 1  # a firm row's ratio to a noisy reference: marked, its GB/s not
    assert "(spread)" not in str(Comparison((steady,), "steady"))  # nothing marked: no footnote
    assert "(spread):" in Comparison((steady, noisy), "steady")._repr_html_()
