"""Hypothesis under ``make test`` tries the same examples on every run; ``make test-random`` tries new ones.

Each case runs a small property test in a fresh interpreter that loads tests/conftest.py as pytest would
(the profile is chosen when that file loads) and prints the examples drawn.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import PROFILE_VARIABLE, RANDOM_FACTOR, ROOT

_DRAW = """
import json
from hypothesis import given, settings, strategies as st
import tests.conftest  # loads the profile
seen = []
@settings(max_examples=15)
@given(st.integers())
def probe(n):
    seen.append(n)
probe()
print(json.dumps({"seen": seen, "derandomize": settings.default.derandomize, "db": repr(settings.default.database)}))
"""


def _draw(profile: str | None, seed: int | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != PROFILE_VARIABLE}
    if profile is not None:
        env[PROFILE_VARIABLE] = profile
    code = _DRAW if seed is None else _DRAW.replace("probe()", f"from hypothesis import seed\nseed({seed})(probe)()")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_default_profile_draws_the_same_examples_every_run_and_keeps_no_database():
    first, second = _draw(None), _draw("fixed")
    assert first["derandomize"] is True and first["db"] == "None"
    assert first["seen"] == second["seen"] and len(set(first["seen"])) > 3


def test_the_random_profile_draws_new_examples_and_a_seed_repeats_them():
    a, b = _draw("random"), _draw("random")
    assert a["derandomize"] is False and a["db"] == "None"
    assert a["seen"] != b["seen"], "two random runs drew the same examples"
    assert _draw("random", seed=7)["seen"] == _draw("random", seed=7)["seen"]
    assert RANDOM_FACTOR > 1


def test_an_unknown_profile_is_refused_by_name():
    env = {**os.environ, PROFILE_VARIABLE: "sometimes"}
    done = subprocess.run(
        [sys.executable, "-c", "import tests.conftest"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and f"{PROFILE_VARIABLE}='sometimes'" in done.stderr


@pytest.mark.parametrize("profile", ["fixed", "random"])
def test_random_multiplies_each_tests_own_example_count(profile, tmp_path):
    """An explicit @settings(max_examples=N) runs N examples under fixed and RANDOM_FACTOR * N under random."""
    test = tmp_path / "test_count.py"
    test.write_text(
        "from hypothesis import given, settings, strategies as st\n"
        "SEEN = []\n"
        "@settings(max_examples=8)\n@given(st.integers())\ndef test_n(n):\n    SEEN.append(n)\n"
        "def test_after():\n    print('COUNT', len(SEEN))\n    assert len(SEEN) == (8 if '"
        + profile
        + "' == 'fixed' else "
        f"{8 * RANDOM_FACTOR})\n"
    )
    env = {**os.environ, PROFILE_VARIABLE: profile}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n0",
            "-q",
            "--rootdir",
            str(ROOT),
            "--confcutdir",
            str(ROOT),
            "-c",
            os.devnull,
            "-p",
            "tests.conftest",
            str(test),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
