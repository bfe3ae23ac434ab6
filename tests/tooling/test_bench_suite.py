"""`make bench` (benchmarks/overhead.py) runs end to end on a tiny op count and prints its ratios.

Only that it runs, what it writes and that every ratio is printed are checked: timings vary by machine and load, so
no figure is asserted here (the ratios themselves are read from the table `make bench` writes).
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import threading

from tests.conftest import ROOT

MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")


def _load_overhead():
    spec = importlib.util.spec_from_file_location("overhead", ROOT / "benchmarks" / "overhead.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_bench_runs_the_overhead_benchmark():
    recipe = re.search(r"^bench:.*\n\t(.+)$", MAKEFILE, re.MULTILINE)
    assert recipe and "benchmarks/overhead.py" in recipe[1], "make bench runs benchmarks/overhead.py"
    assert re.search(r"^\.PHONY:.*\bbench\b", MAKEFILE, re.MULTILINE)


def test_the_benchmark_runs_and_prints_every_ratio(tmp_path, capsys):
    module = _load_overhead()
    md, out = tmp_path / "results.md", tmp_path / "overhead.json"
    module.main(["--ops", "40", "--big-ops", "4", "--rounds", "1", "--md", str(md), "--json", str(out)])
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    names = list(module.conditions())
    assert {"off", "empty mode", "measure", "monitor thread", "monitor cell", "torch.profiler"} <= set(names)
    for workload in ("small", "1mib"):
        table = data["table"][workload]
        assert list(table) == names
        assert table["empty mode"]["x_floor"] == 1.0 and table["off"]["x_off"] == 1.0
        assert all(math.isfinite(v) and v > 0 for row in table.values() for v in row.values())
    rows = [line for line in md.read_text().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == names, "one table row per condition"
    for name in names:  # each condition's ratios are printed, as written
        small, big = data["table"]["small"][name], data["table"]["1mib"][name]
        assert f"| {name} | {small['us_per_op']:.1f} | {small['x_floor']:.2f} | {small['x_off']:.2f} |" in printed
        assert f"| {big['us_per_op']:.1f} | {big['x_floor']:.2f} | {big['x_off']:.2f} |" in printed
    assert "monitor cell / monitor thread on small ops:" in printed
    assert not [t for t in threading.enumerate() if t.name == "viewlab-memory-monitor"], "no monitor left running"
