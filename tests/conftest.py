"""Shared test settings.

Markers are registered in pyproject.toml ([tool.pytest.ini_options] markers; --strict-markers refuses any
other): ``cuda`` tests are skipped here, with the reason, when torch sees no CUDA device, so a test says
``@pytest.mark.cuda`` instead of its own skipif.

Hypothesis: under CI (CI=true) examples are derandomized, so a red run can be reproduced exactly and a green
run cannot turn red by luck; locally, examples vary between runs to find new failures.
"""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

if sys.version_info < (3, 11):
    # tomllib (Python 3.11+) is tomli under its new name; pytest itself depends on tomli on 3.10.
    # Loaded before any test module, so `import tomllib` in the tests works on the 3.10 floor too.
    import tomli

    sys.modules.setdefault("tomllib", tomli)

ROOT = Path(__file__).resolve().parents[1]  # the repository root

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# The property tests of the notebooks' rules (tests/course/test_rules_nbNN.py): derandomized everywhere, so a
# sentence's proof is the same on every machine, and small enough that all of them together stay quick.
RULE_SETTINGS = settings(max_examples=60, derandomize=True, deadline=None, print_blob=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
