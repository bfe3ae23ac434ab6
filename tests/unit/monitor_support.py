"""What the monitor's tests share: its threads, the dispatch modes on this thread, waiting for an event."""

from __future__ import annotations

import io
import threading
import time

from viewlab.monitor import _THREAD_NAME


def _monitor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == _THREAD_NAME]


def _modes() -> list:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return _get_current_dispatch_mode_stack()


def _wait_for(condition, what: str, seconds: float = 30.0) -> None:
    """Wait for an event (never for a fixed time): return as soon as ``condition()`` holds, fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"still waiting after {seconds} s for {what}"
        time.sleep(0.02)


def _line_pixels(png: bytes) -> int:
    """Pixels of the allocated line's colour (#0072B2) inside the plot's axes, below the legend (which sits above the
    axes, top at 24 % of the height, and has a blue handle of its own): 0 for empty axes, and for one sample, which
    draws no line."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    blue = np.abs(rgb - np.array([0, 114, 178])).sum(axis=-1) < 60
    return int(blue[int(rgb.shape[0] * 0.24) :].sum())
