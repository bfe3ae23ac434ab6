"""`make lab`, the learner's main command, really serves JupyterLab (also as root)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import ROOT

# `make lab` first installs the course into .venv when it is not there yet (minutes), which this test's
# two-minute wait does not cover; `make test` installs it before the tests run.
pytestmark = [
    pytest.mark.skipif(
        sys.platform == "win32" or shutil.which("make") is None,
        reason="needs make and POSIX process groups; on Windows use the README's python -m commands",
    ),
    pytest.mark.skipif(
        not (ROOT / ".venv" / ".installed-course").is_file(),
        reason="the course is not installed in .venv yet: run it through `make test`",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_lab_page_with_notebooks():
    port, token = _free_port(), "viewlab-test-token"
    args = f"--no-browser --ip=127.0.0.1 --ServerApp.token={token}"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline, body, status = time.monotonic() + 120, "", None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as r:
                    status, body = r.status, r.read().decode()
                break
            except OSError:
                time.sleep(1)
        assert status == 200, f"no answer on /lab; make lab exited with {proc.poll()}"
        assert "JupyterLab" in body
        # The notebook directory is notebooks/: the contents API lists the course there.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}", timeout=10) as r:
            listing = r.read().decode()
        assert "01_views_and_copies.ipynb" in listing
        kernels = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token={token}", timeout=10).read()
        assert b'"viewlab"' in kernels, "make lab should register the 'viewlab' kernel"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
