"""The live monitor in a real browser: JupyterLab (headless server) + Debian's Chromium via Playwright.

A notebook runs a loop under ``viewlab.MemoryMonitor`` that stays busy until the test has taken its two
screenshots of the widget (it waits for a file the test writes, or 120 s): the screenshots show two
different frames, each waited for as an event, never after a fixed time. After the run we save the
notebook and check the final PNG (with alt text) is stored in it.

Needs the ``chromium`` binary (Debian: ``apt-get install -y chromium``); Playwright comes from PyPI
and is launched on that binary -- never ``playwright install``. Skipped, with this reason, only when no
chromium binary is found. The screenshots and a summary.json go to test-artifacts/monitor/ (git-ignored;
VIEWLAB_BROWSER_EVIDENCE=<folder> puts them elsewhere).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.conftest import ROOT
from tests.unit.monitor_support import _line_pixels

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: `apt-get install -y chromium`)"),
]
BUSY_LIMIT_S = 120  # the loop cell ends when the screenshots are taken, or after this long
ARTIFACTS = ROOT / "test-artifacts" / "monitor"  # git-ignored

FRAME_SOURCES = ("thread", "cell")  # who sends live frames: the sampling thread, or the cell's own thread


def notebook_cells(frames: str, done: Path) -> list[str]:
    """The loop allocates and frees as it goes, so every frame differs; it runs until ``done`` exists."""
    return [
        "import os, time\nimport torch, ipywidgets, matplotlib.figure\nfrom viewlab import MemoryMonitor",
        (
            f"with MemoryMonitor(device='cpu', title='browser test', frames={frames!r}) as mon:\n"
            f"    keep, i, deadline = [], 0, time.monotonic() + {BUSY_LIMIT_S}\n"
            f"    while not os.path.exists({str(done)!r}) and time.monotonic() < deadline:\n"
            "        keep.append(torch.zeros(50_000 * (i % 7 + 1)))\n"
            "        if i % 9 == 8:\n"
            "            keep.clear()\n"
            "        i += 1\n"
            "        time.sleep(0.25)\n"
            "print('frames sent:', mon.frames, 'from', mon.frames_from)"
        ),
    ]


# The bytes of an image the page shows (a blob: or data: URL), base64-encoded in chunks (no huge argument list).
_IMAGE_BYTES = """async (src) => {
    const bytes = new Uint8Array(await (await fetch(src)).arrayBuffer());
    let text = "";
    for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode(...bytes.subarray(i, i + 8192));
    return btoa(text);
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "api/status", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"jupyter lab did not answer at {url} within {timeout} s")


@pytest.fixture(params=FRAME_SOURCES)
def lab(tmp_path, request):
    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in notebook_cells(request.param, root / "screenshots-done")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "live.ipynb")
    port = _free_port()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONHASHSEED="0")
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        "--ServerApp.disable_check_xsrf=True",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
    ]
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_for_server(url, proc)
        yield url, root, request.param
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _changed_fraction(png_a: bytes, png_b: bytes) -> float:
    import numpy as np
    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(png_a)).convert("RGB"), dtype=np.int16)
    b = np.asarray(Image.open(io.BytesIO(png_b)).convert("RGB"), dtype=np.int16)
    if a.shape != b.shape:
        return 1.0
    return float((np.abs(a - b).sum(axis=2) > 0).mean())


def _saved_outputs(path: Path, timeout: float = 60) -> list:
    """The loop cell's outputs once the saved file holds its final PNG (saving is waited for, not slept on)."""
    deadline, outputs = time.monotonic() + timeout, []
    while True:
        try:
            outputs = nbformat.read(path, as_version=4).cells[1].get("outputs", [])
        except Exception:  # noqa: BLE001 - the file may be read while it is being written
            pass
        if any("image/png" in o.get("data", {}) for o in outputs) or time.monotonic() > deadline:
            return outputs
        time.sleep(0.5)


def test_live_plot_changes_while_the_cell_runs_and_final_png_is_saved(lab, tmp_path, chromium_args):
    from playwright.sync_api import sync_playwright

    url, root, frames = lab
    evidence = Path(os.environ.get("VIEWLAB_BROWSER_EVIDENCE", ARTIFACTS)) / f"frames-{frames}"
    evidence.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url + "lab/tree/live.ipynb", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            # wait until the kernel is ready, then Run > Run All Cells
            page.wait_for_function(
                "() => !!document.querySelector('.jp-Notebook') && "
                "!document.querySelector('.jp-Toolbar-kernelStatus[data-status=\"starting\"]')",
                timeout=120_000,
            )
            page.wait_for_timeout(3000)
            page.click(".jp-Notebook .jp-Cell >> nth=0")
            page.click("li.lm-MenuBar-item:has-text('Run')")
            page.click("li.lm-Menu-item:has-text('Run All Cells')")

            widget_img = page.locator(".jp-OutputArea .widget-image").first
            widget_img.wait_for(state="visible", timeout=120_000)
            # the first frame has content once src is set and the image decoded
            page.wait_for_function(
                "() => { const i = document.querySelector('.jp-OutputArea .widget-image');"
                " return i && i.naturalWidth > 0; }",
                timeout=60_000,
            )
            # the first frame the learner sees already draws the first samples' line (no empty axes): its bytes,
            # read back from the page, have the allocated line's pixels inside the axes
            src_0 = widget_img.get_attribute("src")
            first = base64.b64decode(page.evaluate(_IMAGE_BYTES, src_0))
            assert first[:4] == b"\x89PNG" and _line_pixels(first) > 0, "the first live frame shows no line"
            # then wait for one sent while the loop runs
            page.wait_for_function(
                "(s) => { const i = document.querySelector('.jp-OutputArea .widget-image');"
                " return i && i.src !== s && i.naturalWidth > 0; }",
                arg=src_0,
                timeout=30_000,
            )
            prompt = page.locator(".jp-Notebook .jp-Cell >> nth=1").locator(".jp-InputPrompt")
            assert "*" in prompt.inner_text(), "the loop cell should still be running"
            shot_1 = widget_img.screenshot()
            src_1 = widget_img.get_attribute("src")
            # the next frame, as an event: the image's source changes while the cell still runs
            page.wait_for_function(
                "(s) => { const i = document.querySelector('.jp-OutputArea .widget-image');"
                " return i && i.src !== s && i.naturalWidth > 0; }",
                arg=src_1,
                timeout=60_000,
            )
            assert "*" in prompt.inner_text(), "the loop cell should still be running at the second screenshot"
            shot_2 = widget_img.screenshot()
            src_2 = widget_img.get_attribute("src")
            live_size = _rendered(page, ".jp-OutputArea .widget-image")
            (root / "screenshots-done").write_text("done")  # the loop cell may end now
            (evidence / "monitor_t1.png").write_bytes(shot_1)
            (evidence / "monitor_t2.png").write_bytes(shot_2)
            changed = _changed_fraction(shot_1, shot_2)
            assert src_1 != src_2, "the widget image was not updated while the cell ran"
            assert changed > 0.002, f"only {changed:.4%} of the plot's pixels changed between the two moments"

            # wait for the run to finish, then save
            page.wait_for_function(
                "() => { const p = document.querySelectorAll('.jp-Notebook .jp-Cell .jp-InputPrompt')[1];"
                " return p && /\\[\\d+\\]/.test(p.textContent); }",
                timeout=BUSY_LIMIT_S * 1000,
            )
            page.wait_for_timeout(1000)
            final_size = _rendered(page, ".jp-OutputArea .jp-RenderedImage img")  # the stored PNG, not the widget
            page.keyboard.press("Control+s")
            outputs = _saved_outputs(root / "live.ipynb")
            page.screenshot(path=str(evidence / "lab_after_run.png"), full_page=True)
        finally:
            browser.close()

    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert pngs, f"no final PNG stored in the saved notebook; outputs: {[list(o.get('data', {})) for o in outputs]}"
    assert "tensor storages (cpu)" in pngs[0]["metadata"]["image/png"]["alt"]
    assert any("text/html" in o.get("data", {}) and "viewlab-memory" in o["data"]["text/html"] for o in outputs)
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert f"from {frames}" in printed, printed
    for where, size in (("live widget", live_size), ("final PNG", final_size)):
        _assert_readable(where, size)
    (evidence / "summary.json").write_text(
        json.dumps(
            {
                "changed_fraction": changed,
                "rendered": {"live": live_size, "final": final_size},
                "saved_outputs": [list(o.get("data", {})) for o in outputs],
            },
            indent=1,
        )
    )


def _rendered(page, selector: str) -> dict:
    """The first matching image's width on screen (CSS px at 100 % zoom) and its natural (PNG) width."""
    page.wait_for_function(
        f"() => {{ const i = document.querySelector({selector!r}); return i && i.naturalWidth > 0; }}"
    )
    return page.eval_on_selector(
        selector, "i => ({shown: i.getBoundingClientRect().width, natural: i.naturalWidth, zoom: devicePixelRatio})"
    )


def _assert_readable(where: str, size: dict) -> None:
    """At least 800 px wide on screen, and the legend's text (its size in the PNG, scaled as shown) at least 10 px."""
    from viewlab.monitor import Sample, plot

    legend = plot.figure([Sample(0.0, 0, 0), Sample(1.0, 1, 1)], backend="b").axes[0].get_legend()
    text_px = min(t.get_fontsize() for t in [*legend.get_texts(), legend.get_title()]) * plot.DPI / 72
    shown_px = text_px * size["shown"] / size["natural"]
    assert size["zoom"] == 1 and size["shown"] >= 800, f"the {where} is {size['shown']:.0f} px wide at 100 % zoom"
    assert shown_px >= 10, f"the {where}'s legend text is {shown_px:.1f} px tall on screen"


BOOK_HTML = ROOT / os.environ.get("VIEWLAB_BOOK_HTML", "book/_build/html")  # make test-book passes a relative path


@pytest.mark.skipif(
    not (BOOK_HTML / "notebooks" / "06_memory_lab.html").exists(), reason="no built book (make book writes it)"
)
def test_the_monitor_plot_in_the_book_is_readable_at_100_percent(chromium_args):
    """The stored final PNG of notebook 06's monitor, as the book shows it (a static page, opened from disk)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto((BOOK_HTML / "notebooks" / "06_memory_lab.html").as_uri(), timeout=60_000)
            size = _rendered(page, "img[alt^='Memory over']")
            page.eval_on_selector("img[alt^='Memory over']", "i => i.scrollIntoView()")
            # all of it on show: its right end is not under the page's sidebar (the cell is tagged full-width)
            on_top = page.eval_on_selector(
                "img[alt^='Memory over']",
                "i => { const r = i.getBoundingClientRect();"
                " return document.elementFromPoint(r.right - 4, (r.top + r.bottom) / 2) === i; }",
            )
        finally:
            browser.close()
    _assert_readable("book's monitor plot", size)
    assert on_top, "the right end of the book's monitor plot is covered (by the contents sidebar?)"
