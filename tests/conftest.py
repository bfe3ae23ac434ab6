"""Shared test settings.

Markers are registered in pyproject.toml ([tool.pytest.ini_options] markers; --strict-markers refuses any
other): ``cuda`` tests are skipped here, with the reason, when torch sees no CUDA device, so a test says
``@pytest.mark.cuda`` instead of its own skipif.

Hypothesis has two profiles, chosen by ``VIEWLAB_HYPOTHESIS_PROFILE`` (read once, when this file loads):

* ``fixed`` (the default: ``python -m pytest``, ``make test``, ``.ci/run``): derandomized, no example database,
  so every run on every machine tries the same examples; a green run cannot turn red by luck and a red one
  repeats exactly. The examples depend on the test's code alone (Hypothesis seeds each test from it).
* ``random`` (``make test-random``, run weekly by .github/workflows/random.yml): new examples every run,
  :data:`RANDOM_FACTOR` times as many, no database. The Makefile picks the seed, prints it, passes it as
  ``--hypothesis-seed`` and prints it again on failure, so ``make test-random HYPOTHESIS_SEED=N`` repeats the run;
  ``print_blob`` adds the ``@reproduce_failure`` line for the one failing example.
"""

import os
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]  # the repository root

PROFILE_VARIABLE = "VIEWLAB_HYPOTHESIS_PROFILE"
RANDOM_FACTOR = 5  # the random profile multiplies each test's max_examples by this
settings.register_profile("fixed", derandomize=True, deadline=None, print_blob=True)
settings.register_profile(
    "random", derandomize=False, database=None, deadline=None, print_blob=True, max_examples=100 * RANDOM_FACTOR
)
PROFILE = os.environ.get(PROFILE_VARIABLE, "fixed") or "fixed"
if PROFILE not in ("fixed", "random"):
    raise pytest.UsageError(f"{PROFILE_VARIABLE}={PROFILE!r}: pass 'fixed' (the default) or 'random'")
settings.load_profile(PROFILE)

# The property tests of the notebooks' rules (tests/course/test_rules_nbNN.py): small enough that all of them
# together stay quick; derandomized like everything else under the fixed profile (their fallback is the profile
# loaded just above), so a sentence's proof is the same on every machine.
RULE_SETTINGS = settings(max_examples=60, deadline=None, print_blob=True)


def _more_examples(items: list[pytest.Item]) -> None:
    """Under the random profile, each Hypothesis test runs RANDOM_FACTOR times its own max_examples.

    A test's explicit ``@settings(max_examples=N)`` would otherwise win over the profile. Hypothesis keeps a
    test's settings on the function ``@given`` returns and reads them when the test runs; they are replaced
    here by the same settings with the larger count (derandomize and the rest are left as they were).
    """
    done: set[int] = set()  # the items of a parametrized test share one function: scale it once
    for item in items:
        test = getattr(item, "obj", None)
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if isinstance(current, settings) and getattr(test, "is_hypothesis_test", False) and id(test) not in done:
            done.add(id(test))
            test._hypothesis_internal_use_settings = settings(
                current, max_examples=current.max_examples * RANDOM_FACTOR
            )


def pytest_report_header(config: pytest.Config) -> str:
    return f"viewlab: hypothesis profile {PROFILE!r} ({PROFILE_VARIABLE}; 'random' is make test-random)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if PROFILE == "random":
        _more_examples(items)
    cuda = [item for item in items if item.get_closest_marker("cuda")]
    if not cuda:
        return
    import torch  # only when a cuda test was collected

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA device; torch.cuda.is_available() is False here")
        for item in cuda:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def chromium_args() -> list[str]:
    """Flags for Debian's chromium under Playwright (both browser tests): headless, no sandbox (containers),
    and nothing that reaches the network on its own (updates, background fetches)."""
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
    ]
