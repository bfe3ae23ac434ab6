"""viewlab: small helpers for the course on PyTorch tensor memory.

Importing viewlab starts nothing: no CUDA initialisation, no threads, no pyplot state.

>>> import torch, viewlab
>>> viewlab.shares_storage(torch.zeros(1, 3).expand(4, 3), torch.zeros(3))
False
"""

from . import bench, exercises, versions
from .attention import (
    SqueezeExcitation,
    causal_mask,
    combine_masks,
    merge_heads,
    multi_head_self_attention,
    padding_mask,
    scaled_dot_product_attention,
    split_heads,
)
from .broadcast import BroadcastExplanation, explain_broadcast
from .draw import draw_broadcast, draw_layout, show_figure
from .errors import BroadcastError, BroadcastStretchError, BroadcastWarning, CopyError
from .layout import Layout, layout, shares_storage, storage_indices
from .memory import Measurement, OpRecord, measure
from .monitor import MemoryMonitor
from .sentinels import (
    held_by_ipython,
    release_ipython_refs,
    views_only,
    watch_broadcasts,
)
from .viewops import OFFICIAL_VIEW_OPS, OP_CASES, observe, view_op_table

__all__ = [
    "explain_broadcast",
    "BroadcastError",
    "BroadcastExplanation",
    "draw_broadcast",
    "Layout",
    "layout",
    "storage_indices",
    "shares_storage",
    "draw_layout",
    "show_figure",
    "OP_CASES",
    "OFFICIAL_VIEW_OPS",
    "observe",
    "view_op_table",
    "measure",
    "Measurement",
    "OpRecord",
    "MemoryMonitor",
    "exercises",
    "scaled_dot_product_attention",
    "padding_mask",
    "causal_mask",
    "combine_masks",
    "split_heads",
    "merge_heads",
    "multi_head_self_attention",
    "SqueezeExcitation",
    "bench",
    "versions",
    "views_only",
    "CopyError",
    "watch_broadcasts",
    "BroadcastWarning",
    "BroadcastStretchError",
    "held_by_ipython",
    "release_ipython_refs",
]
__version__ = "0.1.0"


def load_ipython_extension(ipython):  # noqa: ANN001 - IPython's hook signature
    """``%load_ext viewlab``: an always-on memory monitor that marks and measures every cell.

    >>> callable(load_ipython_extension)
    True
    """
    from .monitor import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython):  # noqa: ANN001
    """``%unload_ext viewlab``: stop the cell monitor and show its final plot and per-cell table.

    >>> callable(unload_ipython_extension)
    True
    """
    from .monitor import unload_ipython_extension as _unload

    _unload(ipython)
