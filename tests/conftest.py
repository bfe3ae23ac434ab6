"""Shared test settings.

Hypothesis: under CI (CI=true) examples are derandomized, so a red run can be reproduced exactly and a green
run cannot turn red by luck; locally, examples vary between runs to find new failures.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
