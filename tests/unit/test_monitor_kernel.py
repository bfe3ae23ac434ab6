"""viewlab.MemoryMonitor in a real kernel (ipykernel) and the messages a front end receives: live frames while a
cell is busy, from the thread each frame source promises, and the final PNG and table."""

from __future__ import annotations

import time

import pytest
import torch

from tests.unit.monitor_support import _line_pixels
from viewlab.monitor import _THREAD_NAME

pytestmark = pytest.mark.colab
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA; torch.cuda.is_available() is False")


def _run(kc, codes: list[str], timeout: float = 120) -> list[list[dict]]:
    """Execute ``codes`` one after the other in the kernel; per cell, its messages and every comm message
    (live frames may be sent from another thread), each stamped with its arrival time."""
    all_msgs = []
    for code in codes:
        msg_id = kc.execute(code)
        msgs = []
        while True:
            msg = kc.get_iopub_msg(timeout=timeout)
            msg["_t"] = time.monotonic()
            if msg["msg_type"] == "comm_msg" or msg["parent_header"].get("msg_id") == msg_id:
                msgs.append(msg)
            if (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "status"
                and msg["content"]["execution_state"] == "idle"
            ):
                break
        all_msgs.append(msgs)
    return all_msgs


@pytest.fixture(scope="module")
def kernel():
    """One real kernel (ipykernel) for every kernel test here: starting one costs seconds. Each test's code
    imports what it uses and leaves no monitor running, so the tests do not depend on their order."""
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        _run(kc, ["import matplotlib.figure, ipywidgets, threading, time, torch\nimport viewlab"])  # warm imports
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _texts(msgs: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")


def _frames(msgs: list[dict]) -> list[dict]:
    return [m for m in msgs if m["msg_type"] == "comm_msg" and m.get("buffers")]


# The busy cells below run until the frames they wait for were sent, or 30 s pass: never for a fixed time,
# so a slow machine makes them slower, not red. ``keep[0].view(-1)`` is an operator that allocates nothing:
# in cell mode the frames are sent between two operators.
_BUSY_UNTIL = (
    "deadline = time.monotonic() + 30\n"
    "while {condition} and time.monotonic() < deadline:\n"
    "    keep[0].view(-1); time.sleep(0.02)\n"
)


@pytest.mark.kernel
@pytest.mark.parametrize(("frames", "sender"), [("thread", _THREAD_NAME), ("cell", "MainThread")])
def test_in_a_kernel_frames_stream_while_busy_and_the_final_png_stays(kernel, frames, sender):
    """Both frame paths in a real kernel: frames arrive while the cell is busy, from the thread the
    mode promises (recorded by an observer on the image widget, which runs in the sending thread), and the final
    PNG and table are displayed. How far apart frames are sent is counted on a clock the test moves, not here
    (test_monitor_threads.py): a real clock under load would make that a timing assert."""
    loop = (
        "import threading, time, torch\nfrom viewlab import MemoryMonitor\n"
        f"mon = MemoryMonitor(device='cpu', frames={frames!r}).start()\n"
        "print('at start', mon.frames, mon._view.image.layout.display)\n"
        "sent = []\n"
        "def seen(change):\n"
        "    sent.append(threading.current_thread().name)\n"
        "mon._view.image.observe(seen, names='value')\n"
        "keep = [torch.zeros(100_000) for i in range(12)]\n"
        + _BUSY_UNTIL.format(condition="len(sent) < 4")
        + "busy = list(sent)\n"
        "mon.stop()\n"
        "print('frames_from', mon.frames_from, 'senders', sorted(set(busy)), 'errors', mon.errors)\n"
        "print('busy frames', len(busy))"
    )
    (msgs,) = _run(kernel, [loop])
    assert "error" not in [m["msg_type"] for m in msgs], [m["content"] for m in msgs if m["msg_type"] == "error"]
    text = _texts(msgs)
    assert f"frames_from {frames} senders [{sender!r}] errors []" in text, text
    busy = text.split("busy frames ")[1].split()[0]
    assert int(busy) >= 4, f"live frames sent while the cell ran: {busy}"
    sent = _frames(msgs)
    assert len(sent) >= 4, f"the 4 frames sent while busy reached the front end: {len(sent)}"
    # No empty first frame: right after start (one sample; the next is 0.25 s away) nothing was sent and the image
    # is hidden; the first frame the front end gets draws the allocated line.
    assert "at start 0 none" in text, text
    assert _line_pixels(sent[0]["buffers"][0]) > 0, "the first frame the front end received draws no line"
    assert all(f["_t"] < msgs[-1]["_t"] for f in sent), "every frame arrives before the cell is done"
    displays = [m["content"] for m in msgs if m["msg_type"] == "display_data"]
    widget = [d for d in displays if "application/vnd.jupyter.widget-view+json" in d["data"]]
    pngs = [d for d in displays if "image/png" in d["data"]]
    htmls = [d for d in displays if "text/html" in d["data"]]
    assert widget and pngs and htmls
    assert "tensor storages (cpu)" in pngs[0]["metadata"]["image/png"]["alt"]
    assert pngs[0]["data"]["text/plain"].startswith("[figure] Memory over")
    assert widget[0]["data"]["text/plain"].startswith("[live memory monitor: tensor storages (cpu);"), widget[0]["data"]
    assert "4,800,000 B" in htmls[0]["data"]["text/html"]  # 12 x 400,000 bytes still held at stop


@pytest.mark.kernel
def test_in_a_kernel_a_cell_that_only_sleeps_gets_thread_frames_and_its_cell_frame_at_its_end(kernel):
    """No operator, no signal: with frames='thread' the sampling thread draws and sends while the cell sleeps; with
    frames='cell' the frame it drew waits for the cell and is sent when the cell ends (here: at stop). The kernel's
    SIGALRM handler and timer are untouched and no mode is left."""
    code = (
        "import signal, time\nfrom viewlab import MemoryMonitor\n"
        "from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as modes\n"
        "found = (signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL))\n"
        "mon = MemoryMonitor(device='cpu', frames='thread').start()\n"
        "first, deadline = mon.frames, time.monotonic() + 60\n"
        "while mon.frames - first < 2 and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        "slept = mon.frames - first\n"
        "mon.stop()\n"
        "cell = MemoryMonitor(device='cpu', frames='cell').start()\n"
        "first, deadline = cell.frames, time.monotonic() + 60\n"
        "while cell._frames.ready is None and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        "waiting = cell.frames - first\n"
        "cell.stop()\n"
        "same = (signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)) == found\n"
        "print('slept frames', slept, 'waiting', waiting, 'at the end', cell.frames - first, 'untouched', same,"
        " 'modes', len(modes()), 'errors', mon.errors + cell.errors)"
    )
    (msgs,) = _run(kernel, [code])
    assert "error" not in [m["msg_type"] for m in msgs], [m["content"] for m in msgs if m["msg_type"] == "error"]
    text = _texts(msgs)
    slept = int(text.split("slept frames ")[1].split()[0])
    assert slept >= 2 and "waiting 0 at the end 1 untouched True modes 0 errors []" in text, text


@pytest.mark.kernel
@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("frames", ["thread", "cell"])
def test_in_a_kernel_cuda_monitor_streams_frames(kernel, frames):
    """The CUDA allocator backend, live, in a real kernel, with both frame paths; prints the frame count."""
    loop = (
        "import time, torch\nfrom viewlab import MemoryMonitor\ntorch.zeros(1, device='cuda')\n"
        f"with MemoryMonitor(device='cuda', frames={frames!r}) as mon:\n"
        "    keep = [torch.zeros(2**20, device='cuda') for i in range(12)]\n"
        "    torch.cuda.synchronize()\n"
        + "".join("    " + line + "\n" for line in _BUSY_UNTIL.format(condition="mon.frames < 5").splitlines())
        + "print('cuda frames', mon.frames, 'from', mon.frames_from, 'errors', mon.errors, 'backend', mon.backend)"
    )
    (msgs,) = _run(kernel, [loop])
    assert "error" not in [m["msg_type"] for m in msgs], [m["content"] for m in msgs if m["msg_type"] == "error"]
    text = _texts(msgs)
    print(f"[gpu-check] frames={frames}: {text.strip()}")
    assert f"from {frames} errors [] backend cuda allocator" in text, text
    sent = _frames(msgs)
    assert len(sent) >= 5, f"live frames sent while the CUDA cell ran: {len(sent)}"


@pytest.mark.kernel
def test_in_a_kernel_load_ext_prints_one_line_per_cell(kernel):
    msgs = _run(
        kernel,
        [
            "%load_ext viewlab",
            "import torch\nx = torch.ones(1, 512)",
            "e = x.expand(64, 512)",
            "r = x.repeat(64, 1)",
            "%unload_ext viewlab",
        ],
    )
    text = [_texts(cell) for cell in msgs]
    assert "+2,048 B still held" in text[1]
    assert "+0 B still held, peak +0 B" in text[2]
    assert "+131,072 B still held" in text[3]
    final = [m["content"] for m in msgs[4] if m["msg_type"] == "display_data"]
    assert any("image/png" in d["data"] for d in final) and any("text/html" in d["data"] for d in final)


@pytest.mark.kernel
def test_in_a_kernel_load_ext_with_cell_frames_streams_during_a_busy_cell_and_cleans_up(kernel):
    """The per-cell monitor as Colab gets it (frames='cell'): frames arrive while a later cell is busy (it runs
    until 3 were sent, or 30 s), each cell still gets its line, and after unloading no dispatch mode is left
    on the kernel's thread."""
    load = (
        "from viewlab.monitor import load_ipython_extension, unload_ipython_extension\n"
        "mon = load_ipython_extension(get_ipython(), device='cpu', frames='cell')"
    )
    busy = (
        "import time, torch\nkeep = [torch.zeros(25_000) for i in range(10)]\nfirst = mon.frames\n"
        + _BUSY_UNTIL.format(condition="mon.frames - first < 3")
    )
    after = (
        "unload_ipython_extension(get_ipython())\n"
        "from torch.utils._python_dispatch import _get_current_dispatch_mode_stack\n"
        "print('modes left', len(_get_current_dispatch_mode_stack()), 'frames_from', mon.frames_from)"
    )
    msgs = _run(kernel, [load, busy, after])
    busy_frames = _frames(msgs[1])
    assert len(busy_frames) >= 3, f"frames sent from the cell's thread during the busy cell: {len(busy_frames)}"
    busy_text = _texts(msgs[1])
    assert "+1,000,000 B still held" in busy_text, busy_text
    text = _texts(msgs[2])
    assert "modes left 0 frames_from cell" in text, text


# ---------------------------------------------------------------- CUDA (skipped without a GPU)
