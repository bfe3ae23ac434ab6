"""viewlab.explore with a live kernel: the widget's model syncs both ways.

* In a real kernel, speaking the widget protocol as a front end does (no browser): the kernel opens the
  explorer's comm with its layout, an ``update`` from the front end changes it in Python, and
  ``.tensor()`` then agrees with torch. Marked ``colab``: ``make test-colab`` runs it on Colab's stack
  (ipywidgets 7.7.1, anywidget 0.9.21).
* In JupyterLab (headless server) driven by Debian's chromium: editing a stride in the page redraws the
  view and reaches the kernel, where ``.tensor()`` agrees with torch; a layout set in Python redraws the
  page. Screenshots go to test-artifacts/explorer/.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest
import torch

from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium")
ARTIFACTS = ROOT / "test-artifacts" / "explorer"
START = "import json, torch, viewlab\nx = torch.arange(12).view(3, 4)\nex = viewlab.explore(x)\nex"
CHECK = (
    "t = ex.tensor()\n"
    "print(json.dumps({'shape': ex.shape, 'stride': ex.stride, 'offset': ex.offset, 'values': t.flatten().tolist(),"
    " 'same_storage': t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()}))"
)


def _expected(shape, stride, offset) -> dict:
    x = torch.arange(12).view(3, 4)
    return {
        "shape": shape,
        "stride": stride,
        "offset": offset,
        "values": x.as_strided(shape, stride, offset).flatten().tolist(),
    }


# --- a real kernel, the widget protocol by hand ----------------------------------------------------------


def _collect(kc, msg_id: str, timeout: float = 120) -> list[dict]:
    """Every iopub message of one execution, up to its idle status."""
    msgs = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        msgs.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return msgs


def _stdout(msgs: list[dict]) -> str:
    errors = [m["content"] for m in msgs if m["msg_type"] == "error"]
    assert not errors, errors
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")


@pytest.mark.kernel
@pytest.mark.colab
def test_in_a_kernel_the_explorers_model_syncs_both_ways():
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        opened = _collect(kc, kc.execute(START))
        comms = [m["content"] for m in opened if m["msg_type"] == "comm_open"]
        explorer = next(c for c in comms if c["data"]["state"].get("_esm") and "shape" in c["data"]["state"])
        state = explorer["data"]["state"]
        assert (state["shape"], state["stride"], state["offset"], state["size"]) == ([3, 4], [4, 1], 0, 12)
        assert "export default" in state["_esm"]  # the module itself travels to the front end
        # the front end edits a stride (what explorer.js's save_changes sends), then the next cell reads it
        update = {
            "comm_id": explorer["comm_id"],
            "data": {"method": "update", "state": {"shape": [3, 2], "stride": [4, 2]}, "buffer_paths": []},
        }
        kc.shell_channel.send(kc.session.msg("comm_msg", update))
        got = json.loads(_stdout(_collect(kc, kc.execute(CHECK))).strip().splitlines()[-1])
        assert got == {**_expected([3, 2], [4, 2], 0), "same_storage": True}
        # displayed as the notebooks do it, beside a figure: the stored text is the layout (the book reads it)
        shown = _collect(
            kc,
            kc.execute("display(viewlab.show_figure(viewlab.draw_layout(x.t()), alt='x.t()'), viewlab.explore(x.t()))"),
        )
        data = [m["content"]["data"] for m in shown if m["msg_type"] == "display_data"]
        assert "image/png" in data[0] and "application/vnd.jupyter.widget-view+json" in data[1]
        t = torch.arange(12).view(3, 4).t()
        values = [str(v) for v in range(12)]  # the storage's values, as draw_layout writes them
        want = f"Explorer(shape={tuple(t.shape)}, stride={t.stride()}, offset=0, size=12, dtype=torch.int64, values={values!r})"
        # ipywidgets 7 (Colab's) displays a widget through its own _ipython_display_, which cuts the text at
        # 110 characters and adds an ellipsis; ipywidgets 8 sends the whole repr
        import ipywidgets  # the kernel runs in this environment

        if len(want) > 110 and ipywidgets.__version__.startswith("7."):
            want = want[:110] + "\u2026"
        assert data[1]["text/plain"] == want
        # and Python's edits reach the front end as updates
        changed = _collect(kc, kc.execute("ex.offset = 1"))
        updates = [m["content"]["data"] for m in changed if m["msg_type"] == "comm_msg"]
        assert any(u.get("method") == "update" and u["state"].get("offset") == 1 for u in updates), updates
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# --- JupyterLab in chromium --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(START),
        nbformat.v4.new_code_cell(CHECK),
        nbformat.v4.new_code_cell("ex.shape, ex.stride, ex.offset = [2, 2], [1, 4], 2"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "explore.ipynb")
    port = _free_port()
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1"]
    cmd += [f"--ServerApp.root_dir={root}", "--IdentityProvider.token=", "--ServerApp.password="]
    cmd += [
        "--ServerApp.disable_check_xsrf=True",
        "--LabApp.news_url=None",
        f"--LabApp.workspaces_dir={tmp_path / 'ws'}",
    ]
    cmd += ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONHASHSEED="0")
    with open(tmp_path / "lab.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + 120
            while True:  # the server is up when its status answers
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "lab.log").read_text()[-2000:]
                try:
                    with urllib.request.urlopen(url + "api/status", timeout=2):
                        break
                except OSError:
                    time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _run_cell(page, index: int) -> None:
    page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def _wait_for_drawn(page, want: list[int]) -> None:
    page.wait_for_function(
        "(want) => { const cells = [...document.querySelectorAll('.jp-OutputArea .vx .grid .c')];"
        " return JSON.stringify(cells.map(c => +c.dataset.storage)) === JSON.stringify(want); }",
        arg=want,
        timeout=60_000,
    )


def _legend_arithmetic_and_keys_in_lab(page) -> None:
    """The legend is there, pointing at a cell shows its address arithmetic, and the arrow keys move the
    focus inside the view (one Tab stop) while JupyterLab's own arrow-key cell selection stays put."""
    box = page.locator(".jp-OutputArea .vx").first
    items = box.locator(".legend li").all_inner_texts()
    for word in ("overlap", "out of bounds", "storage offset", "never read", "point at or focus"):
        assert any(word in item for item in items), (word, items)
    box.locator(".grid .c").nth(6).hover()  # x[1, 2]
    assert "[1, 2]: 0 + 1·4 + 2·1 = 6, at byte 48 (6 × 8), value 6" in box.locator(".arith").inner_text()
    active = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].findIndex(c => c.classList.contains('jp-mod-active'))"
    box.locator(".grid .c").first.click()  # the click makes the explorer's notebook cell the active one
    before = page.evaluate(active)
    for key in ("ArrowRight", "ArrowDown", "ArrowDown", "End"):
        page.keyboard.press(key)
    focused = page.evaluate("() => document.activeElement.getAttribute('aria-label')")
    assert focused.startswith("element [2, 3]: 0 + 2·4 + 3·1 = 11"), focused
    assert page.evaluate(active) == before  # the notebook did not move its cell selection
    assert box.locator(".grid .c[tabindex='0']").count() == 1
    box.screenshot(path=str(ARTIFACTS / "lab-keyboard-arithmetic.png"))


@pytest.mark.browser
@pytest.mark.kernel
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: `apt-get install -y chromium`)")
def test_in_jupyterlab_a_stride_edit_redraws_and_tensor_agrees_with_torch(lab, chromium_args):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    x = torch.arange(12).view(3, 4)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(lab + "lab/tree/explore.ipynb", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            # the kernel is ready when the status bar says so (a cell run before that would not start)
            page.wait_for_function(
                "() => /\\|\\s*Idle/.test(document.querySelector('.jp-StatusBar-Widget, #jp-main-statusbar')?.innerText || '')",
                timeout=120_000,
            )
            _run_cell(page, 0)
            _wait_for_drawn(page, x.flatten().tolist())
            _legend_arithmetic_and_keys_in_lab(page)
            stride = page.locator(".jp-OutputArea .vx input[name=stride]")
            stride.fill("1, 3")
            stride.press("Enter")
            _wait_for_drawn(page, x.as_strided((3, 4), (1, 3)).flatten().tolist())
            page.locator(".jp-OutputArea .vx").first.screenshot(path=str(ARTIFACTS / "lab-stride-edited.png"))
            _run_cell(page, 1)
            out = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea-output")
            out.wait_for(timeout=60_000)
            got = json.loads(out.inner_text().strip().splitlines()[-1])
            assert got == {**_expected([3, 4], [1, 3], 0), "same_storage": True}
            # an out-of-bounds edit in the page, then a layout set in Python: the old message must go
            stride.fill("4, 4")
            stride.press("Enter")
            status = page.locator(".jp-OutputArea .vx [role=status]")
            assert "out of bounds: the view needs 21 storage elements" in status.inner_text()
            _run_cell(page, 2)  # Python sets a layout: the page follows
            _wait_for_drawn(page, x.as_strided((2, 2), (1, 4), 2).flatten().tolist())
            assert "out of bounds" not in status.inner_text(), status.inner_text()
            page.locator(".jp-OutputArea .vx").first.screenshot(path=str(ARTIFACTS / "lab-python-edit-no-stale.png"))
            # keys inside the explorer are the explorer's: on its Undo button Ctrl+Z undoes the last change made
            # in the page (stride 4, 4: back to 1, 3), and "a" (JupyterLab's "insert a cell above") does nothing
            cells = page.locator(".jp-Notebook .jp-Cell").count()
            page.locator(".jp-OutputArea .vx button[name=undo]").focus()
            page.keyboard.press("Control+z")
            _wait_for_drawn(page, x.as_strided((3, 4), (1, 3)).flatten().tolist())
            assert "undone: back to shape (3, 4), stride (1, 3), offset 0" in status.inner_text()
            page.keyboard.press("a")
            box = page.locator(".jp-OutputArea .vx").first
            box.locator(".grid .c[tabindex='0']").focus()
            page.keyboard.press("b")  # "insert a cell below", on a cell of the view
            box.locator("select[name=op]").focus()
            page.keyboard.press("m")  # "make it a markdown cell", on the operator menu
            assert page.locator(".jp-Notebook .jp-Cell").count() == cells
            assert page.locator(".jp-Notebook .jp-MarkdownCell").count() == 0
            # Up in the stride field steps the number at the cursor (1, 3 -> 2, 3), not JupyterLab's cell selection
            active = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].findIndex(c => c.classList.contains('jp-mod-active'))"
            before = page.evaluate(active)
            stride.click()
            stride.evaluate("e => e.setSelectionRange(0, 0)")
            page.keyboard.press("ArrowUp")
            _wait_for_drawn(page, torch.arange(14).as_strided((3, 4), (2, 3)).flatten().tolist())  # 2 past the end
            assert stride.input_value() == "2, 3" and page.evaluate(active) == before
            page.screenshot(path=str(ARTIFACTS / "lab-after-python-edit.png"), full_page=True)
        finally:
            browser.close()
