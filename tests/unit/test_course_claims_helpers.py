"""viewlab.course.claims' helpers (get, table, counts, judge, show, format_table) answer every bad argument with
a clear error that names the function, and running the claims leaves torch's one-time TypedStorage warning to
the learner: a claim's evidence is the same whatever ran before it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import viewlab
from viewlab.course import claims as cl

A22 = cl.get("A22")
ROW = {"id": "A22", "article": "000 expand", "statement": "It works.", "verdict": "true"}


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda: cl.get(3), TypeError, r"^get\(\): `claim_id` must be a claim id such as 'A01' \(a str\); got int 3"),
        (lambda: cl.get(["A01"]), TypeError, r"^get\(\): `claim_id` must be a claim id"),
        (lambda: cl.get("Z9"), ValueError, r"^get\(\): no claim 'Z9'; known ids: A01, "),
        (lambda: cl.show(None), TypeError, r"^show\(\): `claim_id` must be a claim id"),
        (lambda: cl.table(claims=3), TypeError, r"^table\(\): `claims` must be a list of Claim objects"),
        (lambda: cl.table(claims=A22), TypeError, r"^table\(\): `claims` must be a list of Claim .*claims=\[\.\.\.\]"),
        (lambda: cl.table(ids=5), TypeError, r"^table\(\): `ids` must be a list of claim ids"),
        (lambda: cl.table(ids=[["A01"]]), TypeError, r"^table\(\): `ids` must be a list of claim ids .*each a str"),
        (lambda: cl.table(ids=["Z9"]), ValueError, r"^table\(\): unknown claim ids \['Z9'\]"),
        (lambda: cl.counts(None), TypeError, r"^counts\(\): `rows` must be a list of rows as table\(\) returns"),
        (lambda: cl.counts([3]), TypeError, r"^counts\(\): `rows\[0\]` must be a dict as table\(\) returns it"),
        (lambda: cl.counts([{}]), ValueError, r"^counts\(\): `rows\[0\]` must be a dict with keys .*missing article"),
        (lambda: cl.counts([{**ROW, "verdict": "maybe"}]), ValueError, r"^counts\(\): `rows\[0\]\['verdict'\]` must"),
        (lambda: cl.counts([{**ROW, "article": 1}]), TypeError, r"^counts\(\): `rows\[0\]\['article'\]` must be a str"),
        (lambda: cl.format_table("A22"), TypeError, r"^format_table\(\): `rows` must be a list of rows"),
        (lambda: cl.format_table([{"id": "A22"}]), ValueError, r"^format_table\(\): `rows\[0\]` .*missing verdict"),
        (lambda: cl.format_table([{**ROW, "id": None}]), TypeError, r"^format_table\(\): `rows\[0\]\['id'\]`"),
        (lambda: cl.judge("A22", {}), TypeError, r"^judge\(\): `claim` must be a Claim, e.g. viewlab.course"),
        (lambda: cl.judge(A22, None), TypeError, r"^judge\(\): `facts` must be a dict of facts"),
        (lambda: cl.judge(A22, {}), ValueError, r"^judge\(\): claim A22's judge cannot read these facts \(KeyError"),
    ],
)
def test_every_bad_argument_gets_a_clear_error(call, kind, message):
    with pytest.raises(kind, match=message) as err:
        call()
    assert not isinstance(err.value, AttributeError)
    if isinstance(err.value, KeyError):  # an unknown id: a failed lookup and a wrong value at once
        assert isinstance(err.value, cl.UnknownClaim) and isinstance(err.value, ValueError)


def test_good_rows_still_count_and_format():
    rows = [ROW, {**ROW, "id": "B01", "article": "001 expand_as", "verdict": "misleading"}]
    counted = cl.counts(rows)
    assert counted["000 expand"]["true"] == sum(r["article"] == "000 expand" and r["verdict"] == "true" for r in rows)
    assert cl.format_table(iter(rows)).splitlines()[1].split()[:2] == ["B01", "misleading"]


# A05 and A28 call Tensor.storage(): torch warns about it once per process.
ORDER_SCRIPT = """
import json, sys, warnings, torch
from viewlab.course import claims
first = sys.argv[1]
if first == "table":
    claims.table()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")  # torch's own once-per-process rule decides
    torch.zeros(1).storage()
learner = any("TypedStorage is deprecated" in str(w.message) for w in caught)
rows = claims.table(ids=["A05", "A28"])
print(json.dumps({"learner_warned": learner, "rows": [[r["id"], r["verdict"], r["why"], repr(r["evidence"])] for r in rows]}))
"""


def _order_run(first: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(viewlab.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", ORDER_SCRIPT, first], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_the_table_leaves_torchs_one_time_storage_warning_to_the_learner_and_evidence_to_no_order():
    after_table, alone = _order_run("table"), _order_run("alone")
    assert after_table["learner_warned"] and alone["learner_warned"], "the learner's first .storage() still warns"
    assert after_table["rows"] == alone["rows"], "the same verdict, reason and evidence, whatever ran first"
    assert any("deprecated" in row[2].lower() for row in alone["rows"]), "the warning is part of A28's evidence"
