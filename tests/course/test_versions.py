"""The torch floor is declared once in code (viewlab.course.versions) and the same in pyproject and environment.yml;
every version-dependent behaviour the course relies on holds on the torch installed here."""

from __future__ import annotations

import tomllib

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from tests.conftest import ROOT
from viewlab.course.versions import BEHAVIOURS, TORCH_FLOOR, check_torch, torch_at_least

pytestmark = pytest.mark.colab  # these run in the Colab-stack suite too


def test_floor_is_the_same_in_pyproject_and_environment():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"torch>={TORCH_FLOOR}" in deps
    env = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    assert f"pytorch>={TORCH_FLOOR}" in env


def test_no_behaviour_needs_more_than_the_floor():
    assert all(torch_at_least(b.since, installed=TORCH_FLOOR) for b in BEHAVIOURS)


@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids=lambda b: b.name[:50])
def test_each_behaviour_holds_on_this_torch(behaviour):
    assert torch_at_least(TORCH_FLOOR), "this torch is below the declared floor"
    assert behaviour.check(), f"{behaviour.name} (since torch {behaviour.since}) does not hold here"


def test_check_torch_reports_nothing_here():
    assert check_torch() == []


@pytest.mark.parametrize(
    ("want", "have", "expected"),
    [
        ("2.5", "2.5.0", True),
        ("2.5", "2.4.1", False),
        ("2.5", "2.11.0+cu128", True),
        ("2.5.1", "2.5.0", False),
        ("2.5", "2.6.0.dev20241001", True),
        ("2.10", "2.9.1", False),
    ],
)
def test_torch_at_least_compares_numerically(want, have, expected):
    assert torch_at_least(want, installed=have) is expected


def test_torch_at_least_rejects_bad_versions():
    with pytest.raises(ValueError, match="pass a version such as '2.5'"):
        torch_at_least("latest")
    with pytest.raises(
        TypeError, match=r"^torch_at_least\(\): `version` must be a string such as '2.5'; got float 2.5"
    ):
        torch_at_least(2.5)
    with pytest.raises(TypeError, match=r"^torch_at_least\(\): `installed` must be a version string"):
        torch_at_least("2.5", installed=2)
    with pytest.raises(ValueError, match=r"^torch_at_least\(\): installed='cuda': pass a version such as"):
        torch_at_least("2.5", installed="cuda")


releases = st.lists(st.integers(0, 12), min_size=1, max_size=4).map(lambda parts: ".".join(map(str, parts)))


@given(want=releases, have=releases, local=st.sampled_from(["", "+cu128", "+cpu", ".dev20241001"]))
def test_torch_at_least_compares_release_tuples_padded_with_zeros(want, have, local):
    # The oracle: packaging's Version, where "2.5" == "2.5.0" (trailing zeros do not count). A local tag such as
    # "+cu128" is the same release; a ".dev" build is counted as its release (2.6.0.dev... is at least 2.6).
    assert torch_at_least(want, installed=have + local) is (Version(have) >= Version(want))


def test_a_version_padded_with_zeros_is_the_same_version():
    assert torch_at_least("2.5.0", installed="2.5") and torch_at_least("2.5", installed="2.5.0.0")
    assert not torch_at_least("2.5.0.1", installed="2.5")
